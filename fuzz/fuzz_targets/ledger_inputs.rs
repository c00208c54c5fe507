//! Arbitrary bytes as calls and watch events against quota-state's handlers and ledger (see
//! `quota_state::fuzzing`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| quota_state::fuzzing::run(data));
