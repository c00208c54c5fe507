//! Arbitrary bytes as calls and watch events against quota-state's handlers and ledger:
//! `cargo +nightly fuzz run ledger_inputs` in `services/quota-state` (see `quota_state::fuzzing`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| quota_state::fuzzing::run(data));
