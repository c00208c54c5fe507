//! Every training case in fixtures/reviews/training and examples/training,
//! through the handler in-process and through `training-webhook review`.

use admission_testing::fixtures::{
    check_in_process, check_with_binary, check_with_binary_args, fixtures_root, run_all,
};
use std::path::Path;

#[test]
fn training_fixtures_pass_in_process() {
    let app = training_webhook::app();
    let root = fixtures_root();
    match run_all(&root, "training", |c| check_in_process(&app, c)) {
        Ok(n) => assert!(n >= 43, "only {n} cases found"),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn training_fixtures_pass_through_the_review_command() {
    let bin = Path::new(env!("CARGO_BIN_EXE_training-webhook"));
    let root = fixtures_root();
    match run_all(&root, "training", |c| check_with_binary(bin, c)) {
        Ok(n) => assert!(n >= 43, "only {n} cases found"),
        Err(e) => panic!("{e}"),
    }
}

/// The mutation fuzzer: seeded variants of every case keep every property that holds
/// whatever upstream decides (`admission_testing::variants`). `ADMISSION_VARIANTS_PER_CASE` and
/// `ADMISSION_VARIANTS_SEED` make another or a longer run.
#[test]
fn training_variants_keep_every_property() {
    admission_testing::variants::check_domain(&training_webhook::app(), "training");
}

/// The training webhook with the TrainJob defaulter on the fixed clock the Trainer v2 cases were
/// answered with (upstream's oracle runs its defaulter at 2026-01-01T00:00:00Z).
fn app_on_fixed_clock() -> admission_kit::App {
    let options = admission_kit::cli::parse_options(["--trainjob-clock", TRAINER_V2_CLOCK]);
    training_webhook::app_with(options.unwrap())
}

const TRAINER_V2_CLOCK: &str = "2026-01-01T00:00:00Z";

/// Kubeflow Trainer v2.3's cases (`fixtures/reviews/trainer-v2`, written by
/// `tools/upstream-oracle/trainer-v2.3.0/cases.py` from upstream's tests and answers).
#[test]
fn trainer_v2_fixtures_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let app = app_on_fixed_clock();
    let bin = Path::new(env!("CARGO_BIN_EXE_training-webhook"));
    let clock = ["--trainjob-clock", TRAINER_V2_CLOCK];
    for (how, n) in [
        (
            "in process",
            run_all(&root, "trainer-v2", |c| check_in_process(&app, c)),
        ),
        (
            "review command",
            run_all(&root, "trainer-v2", |c| {
                check_with_binary_args(bin, c, &clock)
            }),
        ),
    ] {
        match n {
            Ok(n) => assert!(n >= 121, "{how}: only {n} cases found"),
            Err(e) => panic!("{how}: {e}"),
        }
    }
}

/// The mutation fuzzer over Trainer v2.3's cases: seeded variants keep every property that holds
/// whatever upstream decides.
#[test]
fn trainer_v2_variants_keep_every_property() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    admission_testing::variants::check_cases(&app_on_fixed_clock(), &root, "trainer-v2");
}
