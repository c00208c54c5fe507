//! Arbitrary text as a ModelRoute regex: Go's syntax decided without a crash or a hang, and
//! every refusal worded as Go words one.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(pattern) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(error) = registry_webhook::v1::go_regexp::compile_error(pattern) {
        assert!(error.starts_with("error parsing regexp: "), "{error}");
    }
});
