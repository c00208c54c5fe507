//! Value types whose meaning comes from the Go upstreams: `metav1.Duration` (Go duration text)
//! and `resource.Quantity`, plus a serde helper for Go's "null means zero value" decoding.
//!
//! Both types keep the text exactly as the request wrote it and serialise it back unchanged, so a
//! mutation never rewrites a value the user gave (`0.5m` stays `0.5m`), and a patch computed by
//! diffing typed objects touches only what a rule changed.
//!
//! Hand-written rather than a crate: the decisions depend on Go's exact grammar and rendering
//! (`1h30m`, `µs`, `30m0.5s`), which no Rust duration crate reproduces.
//!
//! One module per job: [`duration`], [`quantity`], [`quote`] (Go's `%q` and JSON strings),
//! [`json`] (`encoding/json`'s errors, metav1's types), [`parse_request_uri`] (`net/url`);
//! this module adds `strconv.Atoi` and the serde helper.

mod duration;
mod json;
mod quantity;
mod quote;
mod url;

pub use duration::*;
pub use json::*;
pub use quantity::*;
pub use quote::*;
pub use url::parse_request_uri;

/// Go's `strconv.Atoi` on a 64-bit platform: an optional sign and decimal digits, nothing else;
/// the error is Go's text (`strconv.Atoi: parsing "x": invalid syntax`, `… value out of range`).
pub fn atoi(s: &str) -> Result<i64, String> {
    let digits = s.strip_prefix(['+', '-']).unwrap_or(s);
    let fail = |why: &str| format!("strconv.Atoi: parsing {}: {why}", go_quote(s));
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(fail("invalid syntax"));
    }
    let magnitude: i128 = digits
        .bytes()
        .try_fold(0i128, |acc, b| {
            acc.checked_mul(10)?.checked_add(i128::from(b - b'0'))
        })
        .unwrap_or(i128::MAX);
    let value = if s.starts_with('-') {
        -magnitude
    } else {
        magnitude
    };
    i64::try_from(value).map_err(|_| fail("value out of range"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atoi_as_go() {
        assert_eq!(atoi("42"), Ok(42));
        assert_eq!(atoi("-7"), Ok(-7));
        assert_eq!(atoi("+0"), Ok(0));
        assert_eq!(
            atoi(""),
            Err("strconv.Atoi: parsing \"\": invalid syntax".to_owned())
        );
        assert_eq!(
            atoi("1.5"),
            Err("strconv.Atoi: parsing \"1.5\": invalid syntax".to_owned())
        );
        assert_eq!(atoi("9223372036854775807"), Ok(i64::MAX));
        assert_eq!(
            atoi("9223372036854775808"),
            Err("strconv.Atoi: parsing \"9223372036854775808\": value out of range".to_owned())
        );
        assert_eq!(atoi("-9223372036854775808"), Ok(i64::MIN));
    }
}
