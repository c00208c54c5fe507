//! Go's `time.Duration` text: `time.ParseDuration` and `Duration.String`, with Go's errors.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Why a Go duration did not parse, in `time.ParseDuration`'s words: `time: invalid duration
/// "x"`, `time: missing unit in duration "1"`, `time: unknown unit "d" in duration "1d"`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("time: {what} {}", time_quote(text))]
pub struct DurationError {
    what: String,
    text: String,
}

/// Go's `time.quote`: double quotes, `"` and `\\` escaped, every byte of a non-ASCII or control
/// character as `\xNN`.
fn time_quote(s: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c.is_ascii() && c >= ' ' {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out.push('"');
    out
}

const NS: u64 = 1;
const US: u64 = 1_000;
const MS: u64 = 1_000_000;
const SEC: u64 = 1_000_000_000;
const MIN: u64 = 60 * SEC;
const HOUR: u64 = 60 * MIN;

/// A duration in Go syntax (`30s`, `1h30m`, `0.5m`), as `metav1.Duration` carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoDuration {
    nanos: i64,
    text: String,
}

impl GoDuration {
    /// Parses Go `time.ParseDuration` syntax.
    pub fn parse(text: &str) -> Result<Self, DurationError> {
        parse_go_duration(text).map(|nanos| Self {
            nanos,
            text: text.to_owned(),
        })
    }

    /// A duration of `nanos` nanoseconds, written in Go's canonical form.
    pub fn from_nanos(nanos: i64) -> Self {
        Self {
            nanos,
            text: format_go_duration(nanos),
        }
    }

    /// The length in nanoseconds (negative durations are negative).
    pub fn nanos(&self) -> i64 {
        self.nanos
    }

    /// The text as the request wrote it.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Go's `Duration.String()`: `30s`, `1m0s`, `-1m0s`, `300ns`.
    pub fn canonical(&self) -> String {
        format_go_duration(self.nanos)
    }

    /// Whether this is a zero duration (`0`, `0s`, `0m`…).
    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }
}

impl Default for GoDuration {
    /// Go's zero `Duration`, written `0s`.
    fn default() -> Self {
        Self::from_nanos(0)
    }
}

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for GoDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = GoDuration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a Go duration string such as \"30s\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<GoDuration, E> {
                GoDuration::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_str(V)
    }
}

impl schemars::JsonSchema for GoDuration {
    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string" })
    }
}

fn parse_go_duration(orig: &str) -> Result<i64, DurationError> {
    let err = |what: &str| DurationError {
        what: what.to_owned(),
        text: orig.to_owned(),
    };
    let mut s = orig.as_bytes();
    let mut neg = false;
    if let Some(&c) = s.first()
        && (c == b'-' || c == b'+')
    {
        neg = c == b'-';
        s = &s[1..];
    }
    if s == b"0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(err("invalid duration"));
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        if !(s[0] == b'.' || s[0].is_ascii_digit()) {
            return Err(err("invalid duration"));
        }
        // Integer part.
        let mut v: u64 = 0;
        let mut i = 0;
        while i < s.len() && s[i].is_ascii_digit() {
            if v > (1 << 63) / 10 {
                return Err(err("invalid duration"));
            }
            v = v * 10 + u64::from(s[i] - b'0');
            if v > 1 << 63 {
                return Err(err("invalid duration"));
            }
            i += 1;
        }
        let pre = i > 0;
        s = &s[i..];
        // Fraction.
        let mut f: u64 = 0;
        let mut scale: f64 = 1.0;
        let mut post = false;
        if s.first() == Some(&b'.') {
            s = &s[1..];
            let mut j = 0;
            let mut overflow = false;
            while j < s.len() && s[j].is_ascii_digit() {
                if !overflow {
                    if f > (u64::MAX >> 1) / 10 {
                        overflow = true;
                    } else {
                        f = f * 10 + u64::from(s[j] - b'0');
                        scale *= 10.0;
                    }
                }
                j += 1;
            }
            post = j > 0;
            s = &s[j..];
        }
        if !pre && !post {
            return Err(err("invalid duration"));
        }
        // Unit.
        let mut k = 0;
        while k < s.len() && s[k] != b'.' && !s[k].is_ascii_digit() {
            k += 1;
        }
        if k == 0 {
            return Err(err("missing unit in duration"));
        }
        let unit = match &s[..k] {
            b"ns" => NS,
            b"us" | [0xc2, 0xb5, b's'] | [0xce, 0xbc, b's'] => US,
            b"ms" => MS,
            b"s" => SEC,
            b"m" => MIN,
            b"h" => HOUR,
            other => {
                let unit = String::from_utf8_lossy(other);
                return Err(err(&format!(
                    "unknown unit {} in duration",
                    time_quote(&unit)
                )));
            }
        };
        s = &s[k..];
        if v > (1 << 63) / unit {
            return Err(err("invalid duration"));
        }
        v *= unit;
        if f > 0 {
            // Go adds the fraction through float64, truncating.
            v += (f as f64 * (unit as f64 / scale)) as u64;
            if v > 1 << 63 {
                return Err(err("invalid duration"));
            }
        }
        total += v;
        if total > 1 << 63 {
            return Err(err("invalid duration"));
        }
    }
    if neg {
        return Ok((total as i128).wrapping_neg() as i64);
    }
    if total > (1 << 63) - 1 {
        return Err(err("invalid duration"));
    }
    Ok(total as i64)
}

fn format_go_duration(d: i64) -> String {
    let neg = d < 0;
    let mut u = d.unsigned_abs();
    // Built right to left, as Go does.
    let mut out: Vec<u8> = Vec::with_capacity(24);
    fn frac(out: &mut Vec<u8>, mut v: u64, prec: u32) -> u64 {
        let mut print = false;
        for _ in 0..prec {
            let digit = (v % 10) as u8;
            print = print || digit != 0;
            if print {
                out.push(b'0' + digit);
            }
            v /= 10;
        }
        if print {
            out.push(b'.');
        }
        v
    }
    fn int(out: &mut Vec<u8>, mut v: u64) {
        if v == 0 {
            out.push(b'0');
        }
        while v > 0 {
            out.push(b'0' + (v % 10) as u8);
            v /= 10;
        }
    }
    if u < SEC {
        if u == 0 {
            return "0s".to_owned();
        }
        out.push(b's');
        let prec = if u < US {
            out.push(b'n');
            0
        } else if u < MS {
            // "µ" (U+00B5) reversed byte-wise.
            out.extend_from_slice(&[0xb5, 0xc2]);
            3
        } else {
            out.push(b'm');
            6
        };
        u = frac(&mut out, u, prec);
        int(&mut out, u);
    } else {
        out.push(b's');
        u = frac(&mut out, u, 9);
        int(&mut out, u % 60);
        u /= 60;
        if u > 0 {
            out.push(b'm');
            int(&mut out, u % 60);
            u /= 60;
            if u > 0 {
                out.push(b'h');
                int(&mut out, u);
            }
        }
    }
    if neg {
        out.push(b'-');
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duration_errors_in_go_words() {
        // Each line as Go 1.26's time.ParseDuration prints it.
        let cases = [
            ("", r#"time: invalid duration """#),
            ("x", r#"time: invalid duration "x""#),
            ("1", r#"time: missing unit in duration "1""#),
            ("1d", r#"time: unknown unit "d" in duration "1d""#),
            ("1.5.5s", r#"time: missing unit in duration "1.5.5s""#),
            ("-", r#"time: invalid duration "-""#),
            (".s", r#"time: invalid duration ".s""#),
            (
                "99999999999999999999s",
                r#"time: invalid duration "99999999999999999999s""#,
            ),
            (
                "1µx",
                r#"time: unknown unit "\xc2\xb5x" in duration "1\xc2\xb5x""#,
            ),
            ("3h\"q", r#"time: unknown unit "h\"q" in duration "3h\"q""#),
            (
                "1é",
                r#"time: unknown unit "\xc3\xa9" in duration "1\xc3\xa9""#,
            ),
            ("+", r#"time: invalid duration "+""#),
            ("1s2", r#"time: missing unit in duration "1s2""#),
        ];
        for (text, want) in cases {
            let got = GoDuration::parse(text)
                .map(|_| ())
                .map_err(|e| e.to_string());
            assert_eq!(got, Err(want.to_owned()), "{text:?}");
        }
    }

    fn d(s: &str) -> i64 {
        GoDuration::parse(s).map(|d| d.nanos()).unwrap_or(i64::MIN)
    }

    #[test]
    fn durations_parse_as_go() {
        assert_eq!(d("30s"), 30 * SEC as i64);
        assert_eq!(d("0.5m"), 30 * SEC as i64);
        assert_eq!(d("1h30m"), 90 * MIN as i64);
        assert_eq!(d("-1s"), -(SEC as i64));
        assert_eq!(d("300ns"), 300);
        assert_eq!(d("1.5µs"), 1500);
        assert_eq!(d("1μs"), 1000);
        assert_eq!(d(".5s"), 500 * MS as i64);
        assert_eq!(d("5.s"), 5 * SEC as i64);
        assert_eq!(d("0"), 0);
        assert_eq!(d("+0"), 0);
        for bad in [
            "",
            "30",
            " 30s",
            "1d",
            "s",
            ".s",
            "1.2.3s",
            "9999999999999999999h",
            "-",
        ] {
            assert!(GoDuration::parse(bad).is_err(), "{bad:?} should fail");
        }
    }

    #[test]
    fn durations_render_as_go() {
        let f = |secs: f64| format_go_duration((secs * 1e9) as i64);
        assert_eq!(f(30.0), "30s");
        assert_eq!(f(1801.0), "30m1s");
        assert_eq!(f(1800.5), "30m0.5s");
        assert_eq!(f(60.0), "1m0s");
        assert_eq!(f(300.0), "5m0s");
        assert_eq!(f(3600.0), "1h0m0s");
        assert_eq!(f(-60.0), "-1m0s");
        assert_eq!(format_go_duration(0), "0s");
        assert_eq!(format_go_duration(300), "300ns");
        assert_eq!(format_go_duration(1_500_000), "1.5ms");
        assert_eq!(format_go_duration(1_500), "1.5µs");
        assert_eq!(format_go_duration(i64::MIN), "-2562047h47m16.854775808s");
    }

    #[test]
    fn durations_keep_their_text() {
        let v: GoDuration = serde_json::from_str("\"0.5m\"").unwrap();
        assert_eq!(serde_json::to_string(&v).unwrap(), "\"0.5m\"");
        assert_eq!(v.canonical(), "30s");
        assert!(serde_json::from_str::<GoDuration>("30").is_err());
        assert!(serde_json::from_str::<GoDuration>("null").is_err());
    }
}
