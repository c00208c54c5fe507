//! Value types whose meaning comes from the Go upstreams: `metav1.Duration` (Go duration text)
//! and `resource.Quantity`, plus a serde helper for Go's "null means zero value" decoding.
//!
//! Both types keep the text exactly as the request wrote it and serialise it back unchanged, so a
//! mutation never rewrites a value the user gave (`0.5m` stays `0.5m`), and a patch computed by
//! diffing typed objects touches only what a rule changed.
//!
//! Hand-written rather than a crate: the decisions depend on Go's exact grammar and rendering
//! (`1h30m`, `µs`, `30m0.5s`), which no Rust duration crate reproduces.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Decodes a JSON `null` as the type's default, the way Go's `encoding/json` leaves a non-pointer
/// field at its zero value. Use with `#[serde(default, deserialize_with = "null_as_default")]`.
pub fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Why a Go duration did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("time: invalid duration {text:?}: {why}")]
pub struct DurationError {
    text: String,
    why: &'static str,
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
    let err = |why| DurationError {
        text: orig.to_owned(),
        why,
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
        return Err(err("empty"));
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        if !(s[0] == b'.' || s[0].is_ascii_digit()) {
            return Err(err("expected a number"));
        }
        // Integer part.
        let mut v: u64 = 0;
        let mut i = 0;
        while i < s.len() && s[i].is_ascii_digit() {
            if v > (1 << 63) / 10 {
                return Err(err("overflow"));
            }
            v = v * 10 + u64::from(s[i] - b'0');
            if v > 1 << 63 {
                return Err(err("overflow"));
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
            return Err(err("expected a number"));
        }
        // Unit.
        let mut k = 0;
        while k < s.len() && s[k] != b'.' && !s[k].is_ascii_digit() {
            k += 1;
        }
        if k == 0 {
            return Err(err("missing unit"));
        }
        let unit = match &s[..k] {
            b"ns" => NS,
            b"us" | [0xc2, 0xb5, b's'] | [0xce, 0xbc, b's'] => US,
            b"ms" => MS,
            b"s" => SEC,
            b"m" => MIN,
            b"h" => HOUR,
            _ => return Err(err("unknown unit")),
        };
        s = &s[k..];
        if v > (1 << 63) / unit {
            return Err(err("overflow"));
        }
        v *= unit;
        if f > 0 {
            // Go adds the fraction through float64, truncating.
            v += (f as f64 * (unit as f64 / scale)) as u64;
            if v > 1 << 63 {
                return Err(err("overflow"));
            }
        }
        total += v;
        if total > 1 << 63 {
            return Err(err("overflow"));
        }
    }
    if neg {
        return Ok((total as i128).wrapping_neg() as i64);
    }
    if total > (1 << 63) - 1 {
        return Err(err("overflow"));
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

/// Why a quantity did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {0:?}"
)]
pub struct QuantityError(String);

/// A Kubernetes `resource.Quantity` as the request wrote it: a JSON string (`"500m"`, `"1Gi"`) or
/// a JSON number (`80`). Serialises back exactly as written.
#[derive(Debug, Clone, PartialEq)]
pub struct Quantity {
    text: String,
    /// Written as a JSON number rather than a string.
    number: bool,
    parsed: ParsedQuantity,
}

/// How a quantity prints, decided by the suffix it was written with (as `resource.Format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuantityFormat {
    /// No suffix or a decimal SI suffix (`m`, `k`, `M`…).
    DecimalSI,
    /// A binary suffix (`Ki`, `Mi`…).
    BinarySI,
    /// An exponent (`1e3`).
    DecimalExponent,
}

/// The numeric content of a quantity: `±digits × 10^exp10 × 2^exp2`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedQuantity {
    /// Sign (a zero value is never negative).
    pub negative: bool,
    /// Significant decimal digits without leading zeros; empty for zero.
    pub digits: String,
    /// Power of ten applied to `digits`.
    pub exp10: i32,
    /// Power of two applied (binary suffixes Ki..Ei).
    pub exp2: u32,
    /// The format the value prints in.
    pub format: QuantityFormat,
}

impl ParsedQuantity {
    /// Whether the value is zero.
    pub fn is_zero(&self) -> bool {
        self.digits.is_empty()
    }

    /// The value as the nearest `f64` (may be infinite for absurd exponents).
    pub fn to_f64(&self) -> f64 {
        // Parsed as one decimal literal: a mantissa beyond f64's range (over 308 digits) with a
        // negative exponent would otherwise be inf × 0 = NaN (found by the fuzz target).
        let m: f64 = format!("{}e{}", self.digits, self.exp10)
            .parse()
            .unwrap_or(0.0);
        let v = m * 2f64.powi(self.exp2 as i32);
        if self.negative { -v } else { v }
    }

    /// The value exactly as `mantissa × 10^exp` (binary factors multiplied out), or `None` when it
    /// does not fit 128 bits.
    fn decimal(&self) -> Option<(i128, i32)> {
        if self.digits.is_empty() {
            return Some((0, 0));
        }
        let mut m: i128 = self.digits.parse().ok()?;
        for _ in 0..self.exp2 {
            m = m.checked_mul(2)?;
        }
        Some((if self.negative { -m } else { m }, self.exp10))
    }

    /// Go's `Quantity.MilliValue()`: the value × 1000, rounded up; `None` beyond 64 bits.
    pub fn milli_value(&self) -> Option<i64> {
        i64::try_from(self.milli_value_wide()?).ok()
    }

    /// The value × 1000, rounded up, exactly in 128 bits; `None` beyond (above about 1.7e35
    /// units). Go's `MilliValue` wraps silently beyond 64 bits, where `Quantity.Cmp` stays exact:
    /// sums and comparisons of resource amounts use this width so that memory in the petabytes
    /// (whose milli-value exceeds 64 bits) still counts exactly.
    pub fn milli_value_wide(&self) -> Option<i128> {
        let (m, e) = self.decimal()?;
        let e = e.checked_add(3)?;
        if e >= 0 {
            m.checked_mul(10i128.checked_pow(u32::try_from(e).ok()?)?)
        } else {
            let Some(d) = u32::try_from(-e).ok().and_then(|x| 10i128.checked_pow(x)) else {
                // Smaller than one thousandth: rounds up to 1 (or 0 for zero and negatives).
                return Some(i128::from(m > 0));
            };
            let q = m.div_euclid(d);
            Some(if m.rem_euclid(d) != 0 { q + 1 } else { q })
        }
    }

    /// A value of `milli` thousandths, printed in `format` (Go's `NewMilliQuantity`).
    pub fn from_milli(milli: impl Into<i128>, format: QuantityFormat) -> Self {
        let milli: i128 = milli.into();
        let digits = milli.unsigned_abs().to_string();
        let zero = milli == 0;
        let mut q = Self {
            negative: milli < 0,
            digits: if zero { String::new() } else { digits },
            exp10: -3,
            exp2: 0,
            format,
        };
        if zero {
            q.exp10 = 0;
        }
        q
    }

    /// Kubernetes' canonical text (`resource.Quantity.String()`): `1024Mi` → `1Gi`,
    /// `1000` → `1k`, `0.5` → `500m`, `12000m` → `12`, zero → `0`. Falls back to the decimal
    /// form when a binary form would lose precision.
    pub fn canonical(&self) -> String {
        let Some((m, e)) = self.decimal() else {
            return self.fallback_text();
        };
        if m == 0 {
            return "0".to_owned();
        }
        let mut format = self.format;
        if format == QuantityFormat::BinarySI {
            match integer_value(m, e) {
                Some(v) if !(-1024 < v && v < 1024) => {
                    let (mut mant, mut pow) = (v, 0usize);
                    while pow < 6 && mant % 1024 == 0 {
                        mant /= 1024;
                        pow += 1;
                    }
                    const BIN: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
                    return format!("{mant}{}", BIN[pow]);
                }
                _ => format = QuantityFormat::DecimalSI,
            }
        }
        let (mut mant, mut exp) = (m, e);
        while mant % 10 == 0 {
            mant /= 10;
            exp += 1;
        }
        let r = exp.rem_euclid(3);
        // A mantissa of 37 or more digits cannot take the zeros an SI suffix needs (found by
        // the quantity fuzz target): print the exact decimal form instead of overflowing.
        let Some(scaled) = 10i128
            .checked_pow(r.unsigned_abs())
            .and_then(|p| mant.checked_mul(p))
        else {
            return self.fallback_text();
        };
        mant = scaled;
        exp -= r;
        let suffix = match (format, exp) {
            (_, 0) => String::new(),
            (QuantityFormat::DecimalExponent, e) => format!("e{e}"),
            (_, -9) => "n".into(),
            (_, -6) => "u".into(),
            (_, -3) => "m".into(),
            (_, 3) => "k".into(),
            (_, 6) => "M".into(),
            (_, 9) => "G".into(),
            (_, 12) => "T".into(),
            (_, 15) => "P".into(),
            (_, 18) => "E".into(),
            (_, e) => format!("e{e}"),
        };
        format!("{mant}{suffix}")
    }

    /// The exact value when it is too large for the canonical forms: `digits` `e` `exp10`, or
    /// for a binary quantity the decimal number with its binary suffix (an exponent cannot
    /// carry the power of two).
    fn fallback_text(&self) -> String {
        let sign = if self.negative { "-" } else { "" };
        const BIN: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
        let suffix = self
            .exp2
            .is_multiple_of(10)
            .then(|| BIN.get(usize::try_from(self.exp2 / 10).ok()?).copied())
            .flatten();
        match suffix {
            Some(bin) if !bin.is_empty() => {
                let digits = if self.digits.is_empty() {
                    "0"
                } else {
                    &self.digits
                };
                let number = match usize::try_from(-i64::from(self.exp10)) {
                    // A fraction: the point goes `-exp10` digits from the right.
                    Ok(frac) if frac > 0 => {
                        let padded = format!("{digits:0>width$}", width = frac + 1);
                        let (int, dec) = padded.split_at(padded.len() - frac);
                        format!("{int}.{dec}")
                    }
                    _ => format!(
                        "{digits}{}",
                        "0".repeat(usize::try_from(self.exp10).unwrap_or(0))
                    ),
                };
                format!("{sign}{number}{bin}")
            }
            _ => format!("{sign}{}e{}", self.digits, self.exp10),
        }
    }
}

/// `m × 10^e` as an integer when it is one.
fn integer_value(m: i128, e: i32) -> Option<i128> {
    if e >= 0 {
        m.checked_mul(10i128.checked_pow(u32::try_from(e).ok()?)?)
    } else {
        let d = 10i128.checked_pow(u32::try_from(-e).ok()?)?;
        (m % d == 0).then(|| m / d)
    }
}

impl Quantity {
    /// Parses Kubernetes quantity text.
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        Ok(Self {
            parsed: parse_quantity(text)?,
            text: text.to_owned(),
            number: false,
        })
    }

    /// The text as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether the request wrote it as a JSON number rather than a string.
    pub fn is_number(&self) -> bool {
        self.number
    }

    /// The value as a field error shows it: a number as its digits, text quoted.
    pub fn bad_value(&self) -> crate::field::BadValue {
        if self.number {
            crate::field::BadValue::Raw(self.text.clone())
        } else {
            crate::field::BadValue::Str(self.text.clone())
        }
    }

    /// The numeric content.
    pub fn value(&self) -> &ParsedQuantity {
        &self.parsed
    }
}

impl Default for Quantity {
    /// The zero quantity, as Go's zero `resource.Quantity`.
    fn default() -> Self {
        Self {
            text: "0".to_owned(),
            number: false,
            parsed: ParsedQuantity {
                negative: false,
                digits: String::new(),
                exp10: 0,
                exp2: 0,
                format: QuantityFormat::DecimalSI,
            },
        }
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.number
            && let Ok(n) = self.text.parse::<serde_json::Number>()
        {
            return n.serialize(s);
        }
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let v = serde_json::Value::deserialize(d)?;
        let (text, number) = match v {
            serde_json::Value::String(s) => (s, false),
            serde_json::Value::Number(n) => (n.to_string(), true),
            other => {
                return Err(D::Error::custom(format!(
                    "a quantity must be a string or a number, got {other}"
                )));
            }
        };
        let parsed = parse_quantity(&text).map_err(D::Error::custom)?;
        Ok(Self {
            text,
            number,
            parsed,
        })
    }
}

impl schemars::JsonSchema for Quantity {
    fn schema_name() -> Cow<'static, str> {
        "Quantity".into()
    }
    fn inline_schema() -> bool {
        true
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "anyOf": [{ "type": "integer" }, { "type": "string" }],
            "pattern": "^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$",
            "x-kubernetes-int-or-string": true
        })
    }
}

fn parse_quantity(text: &str) -> Result<ParsedQuantity, QuantityError> {
    let err = || QuantityError(text.to_owned());
    let b = text.as_bytes();
    let mut i = 0;
    let mut negative = false;
    if let Some(&c) = b.first()
        && (c == b'+' || c == b'-')
    {
        negative = c == b'-';
        i = 1;
    }
    let num_start = i;
    let mut int_digits = String::new();
    let mut frac_digits = String::new();
    let mut seen_dot = false;
    while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
        if b[i] == b'.' {
            if seen_dot {
                return Err(err());
            }
            seen_dot = true;
        } else if seen_dot {
            frac_digits.push(b[i] as char);
        } else {
            int_digits.push(b[i] as char);
        }
        i += 1;
    }
    if i == num_start || (int_digits.is_empty() && frac_digits.is_empty()) {
        return Err(err());
    }
    let suffix = &text[i..];
    let format = match suffix {
        "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => QuantityFormat::BinarySI,
        s if s.starts_with(['e', 'E']) => QuantityFormat::DecimalExponent,
        _ => QuantityFormat::DecimalSI,
    };
    let (mut exp10, exp2): (i32, u32) = match suffix {
        "" => (0, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        s if s.starts_with(['e', 'E']) => {
            let e = &s[1..];
            let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
            if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
                return Err(err());
            }
            (e.parse::<i32>().map_err(|_| err())?, 0)
        }
        _ => return Err(err()),
    };
    let mut digits = int_digits;
    digits.push_str(&frac_digits);
    exp10 = exp10.saturating_sub(i32::try_from(frac_digits.len()).map_err(|_| err())?);
    let trimmed = digits.trim_start_matches('0');
    let mut digits = trimmed.to_owned();
    // Normalise trailing zeros into the exponent so equal values compare equal.
    while digits.ends_with('0') {
        digits.pop();
        exp10 = exp10.saturating_add(1);
    }
    let zero = digits.is_empty();
    Ok(ParsedQuantity {
        negative: negative && !zero,
        digits,
        exp10: if zero { 0 } else { exp10 },
        exp2: if zero { 0 } else { exp2 },
        format,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn quantities_parse() {
        let q = |s: &str| parse_quantity(s).unwrap().to_f64();
        assert_eq!(q("80"), 80.0);
        assert_eq!(q("500m"), 0.5);
        assert_eq!(q("1Ki"), 1024.0);
        assert_eq!(q("1e3"), 1000.0);
        assert_eq!(q("-1"), -1.0);
        assert!(parse_quantity("0").unwrap().is_zero());
        assert!(parse_quantity("-0.0").unwrap().is_zero());
        assert!(!parse_quantity("-0.0").unwrap().negative);
        for bad in ["", "abc", "1x", "1..2", "--1", "1e", "1K", "."] {
            assert!(parse_quantity(bad).is_err(), "{bad:?} should fail");
        }
    }

    /// Found by the `quantity_duration` fuzz target: 38 significant digits overflowed while
    /// scaling the mantissa to an SI suffix (a panic in debug builds, a wrong text in release).
    #[test]
    fn canonical_text_of_a_very_long_mantissa_keeps_its_value() {
        for text in [
            "2.155555555555555555555555555555555555555",
            // Too large for i128 with its 2^30: the fallback kept the digits and lost the Gi.
            "1555555555555555555555530073558Gi",
            "15555555555555555555555555555555555.5Ki",
            "2.1555555555555555555555555555555555555555555555555555555551000000000000000002000000000000001002055555555555555555555555555510000000000000000020000000055555555555555555555555555555555555555555100000000000000000200000000000000100205555555555555555555555555551000000000000000002000000000000001002055555555555555555555555555555555555555555555555555555555555000000100205555555555555555555555555555555555555555555555555555555555555",
        ] {
            let q = parse_quantity(text).unwrap();
            let c = q.canonical();
            let again = parse_quantity(&c).unwrap();
            assert_eq!(
                again.milli_value_wide(),
                q.milli_value_wide(),
                "{text} -> {c}"
            );
            let (a, b) = (again.to_f64(), q.to_f64());
            assert!(
                (a - b).abs() <= b.abs() * 1e-12,
                "{text} -> {c}: {a} vs {b}"
            );
            crate::fuzzing::quantity_and_duration(text.as_bytes());
        }
    }

    #[test]
    fn canonical_text_as_kubernetes_prints_it() {
        let c = |s: &str| parse_quantity(s).unwrap().canonical();
        for (input, want) in [
            ("1024Mi", "1Gi"),
            ("23040Mi", "23040Mi"),
            ("1000", "1k"),
            ("1500", "1500"),
            ("0.5", "500m"),
            ("1.5", "1500m"),
            ("12000m", "12"),
            ("4Gi", "4Gi"),
            ("0", "0"),
            ("0Gi", "0"),
            ("1e3", "1e3"),
            ("1.5Ki", "1536"),
            ("512Ki", "512Ki"),
            ("100Mi", "100Mi"),
            ("1000Ki", "1000Ki"),
            ("-1500m", "-1500m"),
            ("8", "8"),
            ("16Gi", "16Gi"),
            ("0.1", "100m"),
            ("2000k", "2M"),
        ] {
            assert_eq!(c(input), want, "{input}");
        }
    }

    #[test]
    fn milli_values_and_milli_quantities() {
        let p = |s: &str| parse_quantity(s).unwrap();
        assert_eq!(p("8").milli_value(), Some(8000));
        assert_eq!(p("16Gi").milli_value(), Some(17_179_869_184_000));
        assert_eq!(p("0.0001").milli_value(), Some(1), "rounded up");
        let amp = |s: &str, r: f64| {
            let q = p(s);
            ParsedQuantity::from_milli((q.milli_value().unwrap() as f64 * r) as i64, q.format)
                .canonical()
        };
        assert_eq!(amp("8", 1.5), "12");
        assert_eq!(amp("7", 1.5), "10500m");
        assert_eq!(amp("16Gi", 1.5), "24Gi");
        assert_eq!(amp("15Gi", 1.5), "23040Mi");
    }

    #[test]
    fn quantities_keep_their_json_form() {
        let n: Quantity = serde_json::from_str("80").unwrap();
        assert_eq!(serde_json::to_string(&n).unwrap(), "80");
        let s: Quantity = serde_json::from_str("\"500m\"").unwrap();
        assert_eq!(serde_json::to_string(&s).unwrap(), "\"500m\"");
        assert!(serde_json::from_str::<Quantity>("\"invalid\"").is_err());
        assert!(serde_json::from_str::<Quantity>("true").is_err());
    }

    #[test]
    fn null_decodes_as_zero_value() {
        #[derive(Deserialize)]
        struct S {
            #[serde(default, deserialize_with = "null_as_default")]
            n: i32,
            #[serde(default, deserialize_with = "null_as_default")]
            v: Vec<String>,
        }
        let s: S = serde_json::from_str(r#"{"n": null, "v": null}"#).unwrap();
        assert_eq!((s.n, s.v.len()), (0, 0));
    }
}

/// The text Go's `encoding/json` gives when `input` is not valid JSON, for upstream messages
/// that embed it (`invalid character 'g' looking for beginning of value`,
/// `unexpected end of JSON input`).
pub fn go_json_syntax_error(e: &serde_json::Error, input: &str) -> String {
    if e.is_eof() || input.trim().is_empty() {
        return "unexpected end of JSON input".to_owned();
    }
    let line = input
        .lines()
        .nth(e.line().saturating_sub(1))
        .unwrap_or_default();
    let c = line
        .chars()
        .nth(e.column().saturating_sub(1))
        .unwrap_or(' ');
    let quoted = match c {
        '\'' => "'\\''".to_owned(),
        '"' => "'\"'".to_owned(),
        c => {
            let q = crate::field::go_quote(&c.to_string());
            format!("'{}'", &q[1..q.len() - 1])
        }
    };
    let msg = e.to_string();
    let context = if msg.starts_with("expected `,` or `}`") {
        "after object key:value pair"
    } else if msg.starts_with("expected `,` or `]`") {
        "after array element"
    } else if msg.starts_with("expected `:`") {
        "after object key"
    } else if msg.starts_with("key must be a string") {
        "looking for beginning of object key string"
    } else if msg.starts_with("trailing characters") {
        "after top-level value"
    } else {
        "looking for beginning of value"
    };
    format!("invalid character {quoted} {context}")
}

#[cfg(test)]
mod json_error_tests {
    use super::go_json_syntax_error;

    fn err(s: &str) -> String {
        let e = serde_json::from_str::<serde_json::Value>(s).err().unwrap();
        go_json_syntax_error(&e, s)
    }

    #[test]
    fn go_texts() {
        assert_eq!(
            err("garbage"),
            "invalid character 'g' looking for beginning of value"
        );
        assert_eq!(err(""), "unexpected end of JSON input");
        assert_eq!(err("{\"a\": 1"), "unexpected end of JSON input");
        assert_eq!(
            err("{\"a\": 1 \"b\": 2}"),
            "invalid character '\"' after object key:value pair"
        );
        assert_eq!(err("[1 2]"), "invalid character '2' after array element");
        assert_eq!(err("{} x"), "invalid character 'x' after top-level value");
    }
}
