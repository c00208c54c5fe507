//! Entry points for fuzzing (the libFuzzer targets in `fuzz/`, run bounded by `cargo xtask
//! test` and at length by `cargo xtask fuzz`). What must hold for any input: no panic, no hang,
//! and every review either answered with an AdmissionReview that encodes, or refused with a
//! [`ReviewError`](admission_kit::review::handler::ReviewError).

use admission_kit::compat::go::{GoDuration, Quantity};
use admission_kit::review::app::App;
use admission_kit::review::handler::{Context, review_body};

/// Runs `data` through one endpoint of `app`: the first byte picks the endpoint, the rest is
/// the request body, decoded, decided and encoded exactly as the server does.
pub fn review(app: &App, ctx: &Context, data: &[u8]) {
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    if app.endpoints.is_empty() {
        return;
    }
    let endpoint = &app.endpoints[usize::from(pick) % app.endpoints.len()];
    if let Ok(answer) = review_body(&*endpoint.handler, body, ctx) {
        // The answer must encode: it is what the API server reads.
        if serde_json::to_vec(&answer.review).is_err() {
            panic!("an answer that does not encode");
        }
    }
}

/// Parses `data` as a quantity and as a Go duration; what parses must print in canonical form
/// and that form must parse to the same value.
pub fn quantity_and_duration(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The decode checks' parse-free check must agree with the parser on every text.
    assert_eq!(
        admission_kit::compat::go::check_quantity_text(text),
        Quantity::parse(text).map(drop),
        "check and parse disagree on {text:?}"
    );
    if let Ok(q) = Quantity::parse(text) {
        let v = q.value();
        let canonical = v.canonical();
        let again = Quantity::parse(&canonical)
            .unwrap_or_else(|e| panic!("canonical {canonical:?} of {text:?} does not parse: {e}"));
        assert_eq!(
            again.value().milli_value_wide(),
            v.milli_value_wide(),
            "canonical {canonical:?} of {text:?} changes the value"
        );
        // f64 is only an approximation: compared where both are normal numbers (a value of
        // 1e-327 is 0 or subnormal depending on the order of its factors).
        let (a, b) = (again.value().to_f64(), v.to_f64());
        let comparable = a.abs().max(b.abs()) > 1e-300 && a.is_finite() && b.is_finite();
        assert!(
            !comparable || (a - b).abs() <= b.abs() * 1e-12,
            "canonical {canonical:?} of {text:?} changes the value: {a} vs {b}"
        );
        let k8s = k8s_openapi::apimachinery::pkg::api::resource::Quantity(text.to_owned());
        let _ = (
            v.to_f64(),
            v.milli_value(),
            admission_kit::compat::resources::Amount::try_of("cpu", &k8s),
        );
    }
    if let Ok(d) = GoDuration::parse(text) {
        let canonical = d.canonical();
        let again = GoDuration::parse(&canonical)
            .unwrap_or_else(|e| panic!("canonical {canonical:?} of {text:?} does not parse: {e}"));
        assert_eq!(
            again.nanos(),
            d.nanos(),
            "canonical {canonical:?} of {text:?}"
        );
    }
}

#[cfg(test)]
mod tests {
    /// Inputs the fuzzer once found (long mantissas, huge binary suffixes) and ordinary ones
    /// hold the entry point's checks.
    #[test]
    fn found_inputs_hold_the_quantity_and_duration_checks() {
        for text in [
            "2.155555555555555555555555555555555555555",
            "1555555555555555555555530073558Gi",
            "15555555555555555555555555555555555.5Ki",
            "100m",
            "1e3",
            "-0.5Gi",
            "1h2m3.5s",
            "-1.5µs",
            "",
        ] {
            super::quantity_and_duration(text.as_bytes());
        }
    }
}
