//! Arbitrary text as a Kubernetes quantity and a Go duration: parse, canonical form, re-parse.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| admission_testing::fuzzing::quantity_and_duration(data));
