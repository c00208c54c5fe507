//! Arbitrary bytes as a request body to lifecycle-webhook's deletion or eviction endpoint, over a
//! cluster in memory (`lifecycle_webhook::fuzzing`).
#![no_main]

use std::sync::LazyLock;

use lifecycle_webhook::fuzzing::Fuzzer;

static FUZZER: LazyLock<Fuzzer> = LazyLock::new(|| match Fuzzer::new() {
    Ok(f) => f,
    Err(e) => panic!("the fuzz target cannot start: {e}"),
});

libfuzzer_sys::fuzz_target!(|data: &[u8]| FUZZER.run(data));
