//! Every scheduling case in fixtures/reviews/scheduling and examples/scheduling,
//! through the handler in-process and through `scheduling-webhook review`.

use admission_testing::fixtures::{check_in_process, check_with_binary, fixtures_root, run_all};
use std::path::Path;

#[test]
fn scheduling_fixtures_pass_in_process() {
    let app = scheduling_webhook::app();
    let root = fixtures_root();
    match run_all(&root, "scheduling", |c| check_in_process(&app, c)) {
        Ok(n) => assert!(n >= 114, "only {n} cases found"),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn scheduling_fixtures_pass_through_the_review_command() {
    let bin = Path::new(env!("CARGO_BIN_EXE_scheduling-webhook"));
    let root = fixtures_root();
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
    admission_testing::variants::check_domain(&scheduling_webhook::app(), "scheduling");
}
