//! Arbitrary bytes as a request body to one of scheduling-webhook's endpoints (the first byte picks it):
//! envelope, decode, rules and encode, as served (`admission_testing::fuzzing::review`).
#![no_main]

use std::sync::LazyLock;

static SERVICE: LazyLock<(admission_kit::App, admission_kit::review::handler::Context)> =
    LazyLock::new(|| {
        admission_fuzz::service(
            scheduling_webhook::app(),
            include_str!("../../services/scheduling-webhook/examples/state.yaml"),
        )
    });

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    admission_testing::fuzzing::review(&SERVICE.0, &SERVICE.1, data)
});
