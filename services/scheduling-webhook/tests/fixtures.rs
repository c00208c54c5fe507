//! Every scheduling case in ../shared/fixtures/reviews/scheduling and examples/scheduling,
//! through the handler in-process and through `scheduling-webhook review`.

use admission_testing::fixtures::{check_in_process, check_with_binary, fixtures_root, run_all};
use std::path::Path;

#[test]
fn scheduling_fixtures_pass_in_process() {
    let app = scheduling_webhook::app();
    let root = fixtures_root(env!("CARGO_MANIFEST_DIR"));
    match run_all(&root, "scheduling", |c| check_in_process(&app, c)) {
        Ok(n) => assert!(n >= 114, "only {n} cases found"),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn scheduling_fixtures_pass_through_the_review_command() {
    let bin = Path::new(env!("CARGO_BIN_EXE_scheduling-webhook"));
    let root = fixtures_root(env!("CARGO_MANIFEST_DIR"));
    match run_all(&root, "scheduling", |c| check_with_binary(bin, c)) {
        Ok(n) => assert!(n >= 114, "only {n} cases found"),
        Err(e) => panic!("{e}"),
    }
}

/// The mutation fuzzer: seeded variants of every case keep every property that holds
/// whatever upstream decides (`admission_testing::variants`). `ADMISSION_VARIANTS_PER_CASE` and
/// `ADMISSION_VARIANTS_SEED` make another or a longer run.
#[test]
fn scheduling_variants_keep_every_property() {
    admission_testing::variants::check_domain(
        &scheduling_webhook::app(),
        env!("CARGO_MANIFEST_DIR"),
        "scheduling",
    );
}

/// With `SCHEDULING_VARIANTS_DIR` set, writes the fuzzer's variants of the scheduling cases there
/// as case files (with each case's cluster state), for the differential run against
/// Koordinator's handlers (`tools/upstream-oracle/koordinator-a7a1b76`); otherwise does nothing.
#[test]
fn scheduling_variants_for_upstream_comparison() {
    let Ok(dir) = std::env::var("SCHEDULING_VARIANTS_DIR") else {
        return;
    };
    let root = fixtures_root(env!("CARGO_MANIFEST_DIR"));
    let n = admission_testing::variants::write_for_comparison(&root, "scheduling", Path::new(&dir))
        .unwrap();
    eprintln!("{n} variants written to {dir}");
}
