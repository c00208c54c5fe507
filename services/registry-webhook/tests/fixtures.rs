//! Every registry case in ../shared/fixtures/reviews/registry and examples/registry, through the
//! handler in-process and through `registry-webhook review`.

use admission_kit::fixtures::{check_in_process, check_with_binary, fixtures_root, run_all};
use std::path::Path;

#[test]
fn registry_fixtures_pass_in_process() {
    let app = registry_webhook::app();
    let root = fixtures_root(env!("CARGO_MANIFEST_DIR"));
    match run_all(&root, "registry", |c| check_in_process(&app, c)) {
        Ok(n) => assert!(n >= 85, "only {n} cases found"),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn registry_fixtures_pass_through_the_review_command() {
    let bin = Path::new(env!("CARGO_BIN_EXE_registry-webhook"));
    let root = fixtures_root(env!("CARGO_MANIFEST_DIR"));
    match run_all(&root, "registry", |c| check_with_binary(bin, c)) {
        Ok(n) => assert!(n >= 85, "only {n} cases found"),
        Err(e) => panic!("{e}"),
    }
}

/// Issue 14's mutation fuzzer: seeded variants of every case keep every property that holds
/// whatever upstream decides (`admission_kit::variants`). `ADMISSION_VARIANTS_PER_CASE` and
/// `ADMISSION_VARIANTS_SEED` make another or a longer run.
#[test]
fn registry_variants_keep_every_property() {
    admission_kit::variants::check_domain(
        &registry_webhook::app(),
        env!("CARGO_MANIFEST_DIR"),
        "registry",
    );
}

/// Kthena v1.0's cases (ours, derived from upstream's webhook tests at v1.0.0; the source of
/// each names the test and the rule ids), in-process and through `registry-webhook review`.
#[test]
fn kthena_v1_fixtures_pass() {
    let app = registry_webhook::app();
    let bin = Path::new(env!("CARGO_BIN_EXE_registry-webhook"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    for (how, n) in [
        (
            "in process",
            run_all(&root, "kthena-v1", |c| check_in_process(&app, c)),
        ),
        (
            "review command",
            run_all(&root, "kthena-v1", |c| check_with_binary(bin, c)),
        ),
    ] {
        match n {
            Ok(n) => assert!(n >= 84, "{how}: only {n} cases found"),
            Err(e) => panic!("{how}: {e}"),
        }
    }
}
