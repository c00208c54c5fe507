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
use std::fmt::{self, Write as _};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

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

/// Decodes a JSON `null` as the type's default, the way Go's `encoding/json` leaves a non-pointer
/// field at its zero value. Use with `#[serde(default, deserialize_with = "null_as_default")]`.
pub fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

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

/// Why a quantity did not parse: apimachinery's three errors, with its texts (which do not
/// repeat the value; callers that name it add it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// `ErrFormatWrong`: not a number followed by a suffix.
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    Format,
    /// `ErrSuffix`: a suffix outside the table (`1K`, `1e`, `1mi`).
    #[error("unable to parse quantity's suffix")]
    Suffix,
    /// `ErrNumeric`: Go's big-decimal path found no digit (`Ei`, `.Pi`).
    #[error("unable to parse numeric value")]
    Numeric,
}

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
    /// The text Go keeps for printing (its `Quantity.s`): the parsed text when it already is in
    /// a form Go prints as is (`"+1"`, `"1E3"`, `"500m"`); `None` for computed values and
    /// whenever Go prints the canonical form instead.
    pub spelled: Option<String>,
}

impl ParsedQuantity {
    /// Zero, as Go's zero `resource.Quantity` (DecimalSI).
    pub fn zero() -> Self {
        Self {
            negative: false,
            digits: String::new(),
            exp10: 0,
            exp2: 0,
            format: QuantityFormat::DecimalSI,
            spelled: None,
        }
    }

    /// Compares two values exactly (Go's `Quantity.Cmp`): sub-milli digits, binary factors and
    /// any size included.
    pub fn cmp_value(&self, other: &Self) -> std::cmp::Ordering {
        let sign = |q: &Self| match (q.is_zero(), q.negative) {
            (true, _) => 0i8,
            (false, true) => -1,
            (false, false) => 1,
        };
        let (sa, sb) = (sign(self), sign(other));
        if sa != sb || sa == 0 {
            return sa.cmp(&sb);
        }
        let magnitude = |q: &Self| {
            let (mut digits, mut exp2, mut exp10) = (q.digits.clone(), q.exp2, q.exp10);
            fold_binary(&mut digits, &mut exp2);
            normalise(&mut digits, &mut exp10);
            (digits, exp10)
        };
        let ((da, ea), (db, eb)) = (magnitude(self), magnitude(other));
        // Order of magnitude first (number of integer digits), then the digits themselves.
        let order = |d: &str, e: i32| i64::try_from(d.len()).unwrap_or(i64::MAX) + i64::from(e);
        let by_size = order(&da, ea).cmp(&order(&db, eb)).then_with(|| {
            let width = da.len().max(db.len());
            format!("{da:0<width$}").cmp(&format!("{db:0<width$}"))
        });
        if sa < 0 { by_size.reverse() } else { by_size }
    }

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

    /// Go's `Quantity.MilliValue()`: the value × 1000, rounded away from zero; `None` beyond
    /// 64 bits.
    pub fn milli_value(&self) -> Option<i64> {
        i64::try_from(self.milli_value_wide()?).ok()
    }

    /// The value × 1000, rounded away from zero as Go rounds, exactly in 128 bits; `None` beyond (above about 1.7e35
    /// units). Go's `MilliValue` wraps silently beyond 64 bits, where `Quantity.Cmp` stays exact:
    /// sums and comparisons of resource amounts use this width so that memory in the petabytes
    /// (whose milli-value exceeds 64 bits) still counts exactly.
    pub fn milli_value_wide(&self) -> Option<i128> {
        self.value_times_ten_to(3)
    }

    /// The value × 10^9 exactly in 128 bits (above about 1.7e29 units `None`). Parsing rounds
    /// every quantity to whole nanos (away from zero), so this is the exact value of any parsed
    /// quantity: sums of these are Go's `Quantity.Add`, without its `inf.Dec` allocations.
    pub fn nano_value_wide(&self) -> Option<i128> {
        self.value_times_ten_to(9)
    }

    /// The value × 10^`scale`, rounded away from zero as Go rounds (`-100u` is -1m); `None`
    /// beyond 128 bits.
    fn value_times_ten_to(&self, scale: i32) -> Option<i128> {
        let (m, e) = self.decimal()?;
        let e = e.checked_add(scale)?;
        if e >= 0 {
            m.checked_mul(10i128.checked_pow(u32::try_from(e).ok()?)?)
        } else {
            let Some(d) = u32::try_from(-e).ok().and_then(|x| 10i128.checked_pow(x)) else {
                // Smaller than the unit: away from zero, to ±1 (0 stays 0).
                return Some(m.signum());
            };
            // Truncating division rounds toward zero; Go rounds away from it.
            let (q, r) = (m / d, m % d);
            Some(q + r.signum())
        }
    }

    /// A value of `milli` thousandths, printed in `format` (Go's `NewMilliQuantity`).
    pub fn from_milli(milli: impl Into<i128>, format: QuantityFormat) -> Self {
        Self::scaled(milli.into(), -3, format)
    }

    /// A value of `nano` billionths, printed in `format` (Go's `NewScaledQuantity(n, Nano)`).
    pub fn from_nano(nano: impl Into<i128>, format: QuantityFormat) -> Self {
        Self::scaled(nano.into(), -9, format)
    }

    fn scaled(m: i128, exp10: i32, format: QuantityFormat) -> Self {
        let zero = m == 0;
        Self {
            negative: m < 0,
            digits: if zero {
                String::new()
            } else {
                m.unsigned_abs().to_string()
            },
            exp10: if zero { 0 } else { exp10 },
            exp2: 0,
            format,
            spelled: None,
        }
    }

    /// The text Go prints (`resource.Quantity.String()`): the text as parsed where Go keeps it
    /// ([`spelled`](Self::spelled): `+1`, `1E3`, `500m`), otherwise the canonical form:
    /// `1024Mi` → `1Gi`, `1000` → `1k`, `0.5` → `500m`, `12000m` → `12`, zero → `0`. Falls back
    /// to the decimal form when a binary form would lose precision.
    pub fn canonical(&self) -> String {
        if let Some(text) = &self.spelled {
            return text.clone();
        }
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
    /// Parses Kubernetes quantity text as `resource.ParseQuantity` does (no trimming).
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        Ok(Self {
            parsed: parse_quantity(text)?,
            text: text.to_owned(),
            number: false,
        })
    }

    /// Parses a quantity's JSON string content as `Quantity.UnmarshalJSON` does: surrounding
    /// white space is trimmed first (`" 1 "` is `1`; see [`json_trim`]).
    pub fn from_json_text(text: &str) -> Result<Self, QuantityError> {
        Ok(Self {
            parsed: parse_quantity(json_trim(text))?,
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

    /// The numeric content.
    pub fn value(&self) -> &ParsedQuantity {
        &self.parsed
    }

    /// Whether Go's decode keeps a value other than the one written: finer than a nano
    /// (rounded up) or a BinarySI value beyond 2^63-1 (capped). Such a quantity re-printed
    /// (`Quantity.String()`) says something else than the request did.
    pub fn altered_by_decode(&self) -> bool {
        parse_quantity_noting(json_trim(&self.text)).is_ok_and(|(_, altered)| altered)
    }
}

impl Default for Quantity {
    /// The zero quantity, as Go's zero `resource.Quantity`.
    fn default() -> Self {
        Self {
            text: "0".to_owned(),
            number: false,
            parsed: ParsedQuantity::zero(),
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
            // Go's `UnmarshalJSON` reads `null` as the zero quantity.
            serde_json::Value::Null => return Ok(Self::default()),
            // Go parses the raw JSON (`true`, `{}`), which never matches the grammar.
            other => {
                return Err(D::Error::custom(format_args!(
                    "{}: {other}",
                    QuantityError::Format
                )));
            }
        };
        let parsed = parse_quantity(json_trim(&text))
            .map_err(|e| D::Error::custom(format_args!("{e}: {}", go_quote(&text))))?;
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

/// apimachinery's `parseQuantityString` on `text`: sign, integer digits without leading zeros
/// (`"0"` when none), fraction digits, the numeric text (sign included) and the suffix.
struct Split<'a> {
    negative: bool,
    num: &'a str,
    denom: &'a str,
    value: &'a str,
    suffix: &'a str,
}

fn split_quantity(text: &str) -> Result<Split<'_>, QuantityError> {
    let b = text.as_bytes();
    let end = b.len();
    let mut pos = 0;
    let mut negative = false;
    if let Some(&c) = b.first()
        && (c == b'+' || c == b'-')
    {
        negative = c == b'-';
        pos = 1;
    }
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    if pos == end {
        // Nothing but a sign and zeros ("", "-", "000" after the sign): zero.
        return Ok(Split {
            negative,
            num: "0",
            denom: "",
            value: "0",
            suffix: "",
        });
    }
    let digits_end = |from: usize| (from..end).find(|&i| !b[i].is_ascii_digit()).unwrap_or(end);
    let num_end = digits_end(pos);
    let mut num = &text[pos..num_end];
    if num.is_empty() {
        num = "0";
    }
    pos = num_end;
    let mut denom = "";
    if pos < end && b[pos] == b'.' {
        let denom_end = digits_end(pos + 1);
        denom = &text[pos + 1..denom_end];
        pos = denom_end;
    }
    let value = &text[..pos];
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < end && (b[pos] == b'-' || b[pos] == b'+') {
        pos += 1;
    }
    if digits_end(pos) != end {
        return Err(QuantityError::Format);
    }
    Ok(Split {
        negative,
        num,
        denom,
        value,
        suffix: &text[suffix_start..],
    })
}

/// apimachinery's suffix table: `(base, exponent, format)`.
fn interpret_suffix(suffix: &str) -> Option<(u32, i32, QuantityFormat)> {
    let dec = |e| Some((10, e, QuantityFormat::DecimalSI));
    let bin = |e| Some((2, e, QuantityFormat::BinarySI));
    match suffix {
        "" => dec(0),
        "n" => dec(-9),
        "u" => dec(-6),
        "m" => dec(-3),
        "k" => dec(3),
        "M" => dec(6),
        "G" => dec(9),
        "T" => dec(12),
        "P" => dec(15),
        "E" => dec(18),
        "Ki" => bin(10),
        "Mi" => bin(20),
        "Gi" => bin(30),
        "Ti" => bin(40),
        "Pi" => bin(50),
        "Ei" => bin(60),
        s if s.len() > 1 && s.starts_with(['e', 'E']) => {
            // QTY-FIX-1: Go parses 64 bits and keeps the low 32 (`int32(parsed)`), so
            // `1e4294967296` reads as 1; an exponent beyond i32 is refused here instead.
            let e: i32 = s[1..].parse().ok()?;
            Some((10, e, QuantityFormat::DecimalExponent))
        }
        _ => None,
    }
}

/// What `Quantity.UnmarshalJSON` trims from a JSON string: it trims the raw JSON text between the
/// quotes (`strings.TrimSpace`), so a white-space character written as itself goes (a space, a
/// no-break space) but a control character never does: JSON always escapes those (`\t`, `\n`),
/// and Go sees the backslash. (A space written as a `\u0020` escape would not be trimmed
/// either; the API server re-encodes every object and never writes one.)
pub fn json_trim(text: &str) -> &str {
    text.trim_matches(|c: char| c.is_whitespace() && !c.is_control())
}

/// The largest BinarySI value Go keeps: larger ones are capped to it (`maxAllowed`, 2^63-1).
const BINARY_CAP: &str = "9223372036854775807";

/// Whether `text` parses as a quantity, without building its value: the same three errors as
/// [`parse_quantity`] (which it shares its steps with), for the decode checks that only need to
/// know (every quantity of every object passes through them).
pub fn check_quantity_text(text: &str) -> Result<(), QuantityError> {
    if text.is_empty() {
        return Err(QuantityError::Format);
    }
    let s = split_quantity(text)?;
    let (base, exponent, _) = interpret_suffix(s.suffix).ok_or(QuantityError::Suffix)?;
    if !fast_path(&s, base, exponent) && !s.value.bytes().any(|c| c.is_ascii_digit()) {
        return Err(QuantityError::Numeric);
    }
    Ok(())
}

/// Whether Go takes its int64 fast path for this text (no rounding needed; see
/// [`parse_quantity`]).
fn fast_path(s: &Split<'_>, base: u32, exponent: i32) -> bool {
    let (num_len, denom_len) = (s.num.len(), s.denom.len());
    if base == 10 {
        let scale = i64::from(exponent) - i64::try_from(denom_len).unwrap_or(i64::MAX);
        num_len + denom_len <= 18 && scale >= -9
    } else {
        let precision =
            15 - i64::try_from(num_len).unwrap_or(i64::MAX) - i64::from(exponent) * 3 / 10 - 1;
        s.denom.is_empty()
            && precision >= 0
            && s.num
                .parse::<i64>()
                .ok()
                .and_then(|v| v.checked_mul(1i64 << exponent))
                .is_some()
    }
}

/// `resource.ParseQuantity`, step for step: the same accepted texts and errors, the value
/// rounded up (away from zero) to nano units when finer, BinarySI values capped at 2^63-1, and
/// the text Go keeps for printing when it already is in a form Go would print.
fn parse_quantity(text: &str) -> Result<ParsedQuantity, QuantityError> {
    parse_quantity_noting(text).map(|(q, _)| q)
}

/// [`parse_quantity`], and whether the value Go keeps differs from the value written (rounded
/// up to nano units, or capped at 2^63-1).
fn parse_quantity_noting(text: &str) -> Result<(ParsedQuantity, bool), QuantityError> {
    if text.is_empty() {
        return Err(QuantityError::Format);
    }
    let mut altered = false;
    let s = split_quantity(text)?;
    let (base, exponent, mut format) = interpret_suffix(s.suffix).ok_or(QuantityError::Suffix)?;
    let denom_len = i32::try_from(s.denom.len()).map_err(|_| QuantityError::Numeric)?;
    // Go's int64 fast path: when it is taken the value needs no rounding and, in the canonical
    // cases below, Go keeps the text as written for printing (`"+1"`, `"1E3"`, `"050m"`).
    // Go's precision estimate for BinarySI is 15 - digits - int(float32(exponent)*3/10) - 1.
    let fast = fast_path(&s, base, exponent);
    // The digits without the point (pushed, not `format!`ted: this runs for every quantity of
    // every pod, and formatting cost 7 % of a Pod validation).
    let mut digits = String::with_capacity(s.num.len() + s.denom.len());
    digits.push_str(s.num);
    digits.push_str(s.denom);
    let keeps_text = if base == 10 {
        let scale = exponent.saturating_sub(denom_len);
        fast && scale % 3 == 0 && s.num != "0" && !digits.ends_with("000")
    } else {
        fast && s.num.parse::<i64>().map_or(0, |v| v & 7) != 0
    };
    if !fast && !s.value.bytes().any(|c| c.is_ascii_digit()) {
        // Go's big-decimal path needs a digit ("Ei", ".Pi").
        return Err(QuantityError::Numeric);
    }
    let (mut exp10, mut exp2) = if base == 10 {
        (exponent.saturating_sub(denom_len), 0u32)
    } else {
        (-denom_len, exponent.unsigned_abs())
    };
    normalise(&mut digits, &mut exp10);
    if digits.is_empty() {
        let zero = ParsedQuantity {
            format,
            ..ParsedQuantity::zero()
        };
        return Ok((zero, false));
    }
    if !fast {
        fold_binary(&mut digits, &mut exp2);
        normalise(&mut digits, &mut exp10);
        if exp10 < -9 {
            // Rounded up, away from zero, to nano units. Normalised, the last digit is never 0,
            // so the digits dropped are never all zeros.
            let drop = usize::try_from(-9 - exp10).unwrap_or(usize::MAX);
            digits = if drop >= digits.len() {
                "1".to_owned()
            } else {
                let mut kept = digits[..digits.len() - drop].to_owned();
                increment(&mut kept);
                kept
            };
            exp10 = -9;
            normalise(&mut digits, &mut exp10);
            altered = true;
        }
        if format == QuantityFormat::BinarySI {
            if exceeds(&digits, exp10, BINARY_CAP) {
                digits = BINARY_CAP.to_owned();
                exp10 = 0;
                altered = true;
            } else if exp10 < 0 && digits.len() <= exp10.unsigned_abs() as usize {
                // Between 0 and 1: Go prints it in decimal.
                format = QuantityFormat::DecimalSI;
            }
        }
    }
    let parsed = ParsedQuantity {
        negative: s.negative,
        digits,
        exp10,
        exp2,
        format,
        spelled: keeps_text.then(|| text.to_owned()),
    };
    Ok((parsed, altered))
}

/// Strips leading zeros and moves trailing zeros into the exponent, so equal values are equal.
fn normalise(digits: &mut String, exp10: &mut i32) {
    let lead = digits.len() - digits.trim_start_matches('0').len();
    digits.drain(..lead);
    while digits.ends_with('0') {
        digits.pop();
        *exp10 = exp10.saturating_add(1);
    }
    if digits.is_empty() {
        *exp10 = 0;
    }
}

/// Multiplies the decimal digits by `2^exp2` and clears `exp2`.
fn fold_binary(digits: &mut String, exp2: &mut u32) {
    let mut d: Vec<u8> = digits.bytes().map(|c| c - b'0').collect();
    for _ in 0..*exp2 {
        let mut carry = 0;
        for x in d.iter_mut().rev() {
            let v = *x * 2 + carry;
            *x = v % 10;
            carry = v / 10;
        }
        if carry > 0 {
            d.insert(0, carry);
        }
    }
    *exp2 = 0;
    *digits = d.into_iter().map(|x| char::from(b'0' + x)).collect();
}

/// Adds one to a decimal digit string.
fn increment(digits: &mut String) {
    let mut d: Vec<u8> = digits.bytes().collect();
    for x in d.iter_mut().rev() {
        if *x == b'9' {
            *x = b'0';
        } else {
            *x += 1;
            *digits = String::from_utf8(d).unwrap_or_default();
            return;
        }
    }
    d.insert(0, b'1');
    *digits = String::from_utf8(d).unwrap_or_default();
}

/// Whether `digits × 10^exp10` (non-negative) is greater than the integer `limit`.
fn exceeds(digits: &str, exp10: i32, limit: &str) -> bool {
    let int_len = i64::try_from(digits.len()).unwrap_or(i64::MAX) + i64::from(exp10);
    let limit_len = i64::try_from(limit.len()).unwrap_or(i64::MAX);
    if int_len != limit_len {
        return int_len > limit_len;
    }
    // Same number of integer digits: compare them, then any fraction makes it larger.
    let int_len = usize::try_from(int_len).unwrap_or(0);
    let mut int: String = digits.chars().take(int_len).collect();
    while int.len() < int_len {
        int.push('0');
    }
    match int.as_str().cmp(limit) {
        std::cmp::Ordering::Equal => digits.len() > int_len,
        o => o == std::cmp::Ordering::Greater,
    }
}

/// Whether Go's `strconv.IsPrint` holds: letters, marks, numbers, punctuation, symbols and the
/// ASCII space. Everything else (other spaces such as U+00A0, line and paragraph separators,
/// controls, format characters such as U+200B, private use, unassigned) is escaped by `%q`.
/// General categories from `unicode-general-category` (std has none).
fn go_is_print(c: char) -> bool {
    use unicode_general_category::{GeneralCategory as G, get_general_category};
    c == ' '
        || !matches!(
            get_general_category(c),
            G::SpaceSeparator
                | G::LineSeparator
                | G::ParagraphSeparator
                | G::Control
                | G::Format
                | G::Surrogate
                | G::PrivateUse
                | G::Unassigned
        )
}

/// A string as Go's `encoding/json` writes it, which is how apimachinery (v0.34) prints a bad
/// value of a named string type or of a struct: `"`, `\\` and control characters escaped
/// (`\n`, `\r`, `\t`, `\b`, `\f`, else `\u00XX`), `<`, `>`, `&`, U+2028 and U+2029 as `\uXXXX`.
pub fn go_json_quote(s: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || matches!(c, '<' | '>' | '&' | '\u{2028}' | '\u{2029}') => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Quotes a string as Go's `strconv.Quote` (`%q`) does, which is how apimachinery prints string
/// values: `"nginx latest"`, a tab as `\t`, a no-break space as `\u00a0`, printable non-ASCII
/// text as it is.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if go_is_print(c) => out.push(c),
            c if (c as u32) < 0x10000 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\U{:08x}", c as u32);
            }
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {

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
        for bad in [
            "", "abc", "1x", "1..2", "--1", "1e", "1K", "0x10", " 1", "1 ",
        ] {
            assert!(parse_quantity(bad).is_err(), "{bad:?} should fail");
        }
    }

    /// Apimachinery's `ParseQuantity`, case by case: which texts it accepts, its three
    /// errors, nano rounding away from zero, the BinarySI cap, and the spelling it keeps.
    #[test]
    fn quantities_parse_as_apimachinery_parses_them() {
        let err = |s: &str| parse_quantity(s).err();
        for s in ["", "abc", "0x10", "1..2", "1e3.5", " 1", "1 ", "1.5.", "x1"] {
            assert_eq!(err(s), Some(QuantityError::Format), "{s:?}");
        }
        for s in [
            "1e", "1K", "1mi", "1Ki2", "1e+", "1E-", "1ee3", "1kk", "--1",
        ] {
            assert_eq!(err(s), Some(QuantityError::Suffix), "{s:?}");
        }
        for s in ["Ei", "Pi", ".Ei", "-.Pi"] {
            assert_eq!(err(s), Some(QuantityError::Numeric), "{s:?}");
        }
        // Texts Go reads as zero.
        for s in ["-", "+", ".", "m", "Ki", "Ti", "-0", "000", "0.000", "+.k"] {
            let q = parse_quantity(s).unwrap_or_else(|e| panic!("{s:?}: {e}"));
            assert!(q.is_zero(), "{s:?}");
            assert_eq!(q.canonical(), "0", "{s:?}");
        }
        let text = |s: &str| parse_quantity(s).map(|q| q.canonical()).unwrap_or_default();
        // The spelling Go keeps (its int64 fast path, canonical scale, no trailing 000 and no
        // leading 0) and the canonical form otherwise.
        for (input, printed) in [
            ("+1", "+1"),
            ("1E3", "1E3"),
            ("1e3", "1e3"),
            ("050m", "050m"),
            ("500m", "500m"),
            ("1.", "1."),
            ("3Mi", "3Mi"),
            ("1000", "1k"),
            ("0.5", "500m"),
            ("1.5", "1500m"),
            ("8Ki", "8Ki"),
            ("1024Mi", "1Gi"),
            ("1.5Gi", "1536Mi"),
            ("500u", "500u"),
            ("100n", "100n"),
            ("1500u", "1500u"),
            ("1.5m", "1500u"),
            ("-100m", "-100m"),
            ("0.0001Ki", "102400u"),
        ] {
            assert_eq!(text(input), printed, "{input:?}");
        }
        // Finer than nano: rounded up, away from zero.
        assert_eq!(text("0.1n"), "1n");
        assert_eq!(text("1.0000000001"), "1000000001n");
        assert_eq!(text("-0.1n"), "-1n");
        assert_eq!(text("0.0000000001Ki"), "103n");
        // BinarySI beyond 2^63-1 is capped (DecimalSI is not).
        assert_eq!(text("8Ei"), "9223372036854775807");
        assert_eq!(text("-16Ei"), "-9223372036854775807");
        assert_eq!(text("9E"), "9E");
        assert_eq!(text("10E"), "10E");
        // QTY-FIX-1: an exponent beyond 32 bits is refused, not truncated to its low bits.
        assert_eq!(err("1e4294967296"), Some(QuantityError::Suffix));
        assert_eq!(err("1e-2147483649"), Some(QuantityError::Suffix));
        assert_eq!(text("1e2147483646"), "1e2147483646");
        assert_eq!(text("1e2147483647"), "10e2147483646");
        // Which of those Go keeps at another value than written.
        for (input, altered) in [
            ("0.1n", true),
            ("1.0000000001", true),
            ("8Ei", true),
            ("-16Ei", true),
            ("7Ei", false),
            ("9E", false),
            ("1n", false),
            ("1000m", false),
            ("+1", false),
        ] {
            let q = Quantity::from_json_text(input).unwrap();
            assert_eq!(q.altered_by_decode(), altered, "{input:?}");
        }
        // MilliValue and Value round away from zero.
        let milli = |s: &str| parse_quantity(s).ok().and_then(|q| q.milli_value());
        assert_eq!(milli("100u"), Some(1));
        assert_eq!(milli("-100u"), Some(-1));
        assert_eq!(milli("-1500u"), Some(-2));
        assert_eq!(milli("1500u"), Some(2));
    }

    /// The check without a value agrees with the parser on every text of the item-3 tables.
    #[test]
    fn the_check_agrees_with_the_parser() {
        for t in [
            "",
            "abc",
            "0x10",
            "1..2",
            "1e3.5",
            " 1",
            "1.5.",
            "x1",
            "1e",
            "1K",
            "1mi",
            "1Ki2",
            "1e+",
            "--1",
            "Ei",
            "Pi",
            ".Ei",
            "-.Pi",
            "-",
            "+",
            ".",
            "m",
            "Ki",
            "Ti",
            "000",
            "+1",
            "1E3",
            "050m",
            "1.",
            "3Mi",
            "1000",
            "0.5",
            "8Ki",
            "1.5Gi",
            "500u",
            "0.1n",
            "8Ei",
            "-16Ei",
            "1e4294967296",
            "1e2147483647",
            "12345678901234567890",
            "1234567890123456789012Ki",
        ] {
            assert_eq!(check_quantity_text(t), parse_quantity(t).map(drop), "{t:?}");
        }
    }

    /// Exact comparison: sub-milli values, binary against decimal, huge and negative values.
    #[test]
    fn quantities_compare_exactly() {
        use std::cmp::Ordering::*;
        let cmp = |a: &str, b: &str| {
            parse_quantity(a)
                .unwrap()
                .cmp_value(&parse_quantity(b).unwrap())
        };
        assert_eq!(cmp("500u", "400u"), Greater);
        assert_eq!(cmp("1Ki", "1024"), Equal);
        assert_eq!(cmp("1Ki", "1k"), Greater);
        assert_eq!(cmp("1", "1000m"), Equal);
        assert_eq!(cmp("-1", "-2"), Greater);
        assert_eq!(cmp("-100u", "0"), Less);
        assert_eq!(cmp("0", "-0"), Equal);
        assert_eq!(cmp("1e40", "9e39"), Greater);
        assert_eq!(cmp("15", "150m"), Greater);
        assert_eq!(cmp("0.15", "150m"), Equal);
    }

    /// A quantity in JSON is trimmed first (`UnmarshalJSON`), `null` is zero, and a
    /// decode error carries apimachinery's text first.
    #[test]
    fn json_quantities_trim_and_refuse_as_go() {
        let q: Quantity = serde_json::from_str("\" 1Gi \"").unwrap();
        assert_eq!(q.value().canonical(), "1Gi");
        assert_eq!(
            q.text(),
            " 1Gi ",
            "the text as written is kept for the patch diff"
        );
        let z: Quantity = serde_json::from_str("null").unwrap();
        assert!(z.value().is_zero());
        // A no-break space goes (Go trims the raw text); an escaped tab or newline
        // stays, and the text does not parse.
        let nbsp: Quantity = serde_json::from_str("\"10Gi\u{a0}\"").unwrap();
        assert_eq!(nbsp.value().canonical(), "10Gi");
        for escaped in [r#""\t1048576\n""#, r#""1\r""#] {
            let e = serde_json::from_str::<Quantity>(escaped)
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("quantities must match"), "{escaped}: {e}");
        }
        let e = serde_json::from_str::<Quantity>("\"abc\"")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(
                "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': \"abc\""
            ),
            "{e}"
        );
        let e = serde_json::from_str::<Quantity>("true")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("quantities must match"), "{e}");
        let rl = decode_resource_list(r#"{"cpu":" 2 ","memory":null}"#).unwrap();
        assert_eq!(rl["cpu"].canonical(), "2");
        assert!(rl["memory"].is_zero());
        assert_eq!(
            decode_resource_list(r#"{"cpu":"1e"}"#),
            Err("unable to parse quantity's suffix".to_owned())
        );
        assert_eq!(
            decode_resource_list("[1]"),
            Err("json: cannot unmarshal array into Go value of type v1.ResourceList".to_owned())
        );
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

/// How Go's `UnmarshalTypeError` names the kind of a JSON value (`string`, `array`…; `number`
/// when the target is not numeric). `null` never fails a Go decode; it is named for completeness.
pub fn go_json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "bool",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}

/// What `metav1.Duration.UnmarshalJSON` refuses in a JSON value: anything but a string (and
/// `null`), or a string `time.ParseDuration` refuses; in Go's words.
pub fn check_metav1_duration(v: &serde_json::Value) -> Result<(), String> {
    match v {
        serde_json::Value::Null => Ok(()),
        serde_json::Value::String(s) => GoDuration::parse(s).map(drop).map_err(|e| e.to_string()),
        other => Err(format!(
            "json: cannot unmarshal {} into Go value of type string",
            go_json_kind(other)
        )),
    }
}

/// What `metav1.Time.UnmarshalJSON` refuses in a JSON value: anything but a string (and
/// `null`), or a string `time.Parse(time.RFC3339, …)` refuses (`2006-01-02T15:04:05Z07:00`
/// with an optional fraction after `.` or `,`, a real calendar date, hours below 24, minutes
/// and seconds below 60, `Z` or a `±hh:mm` offset). The error names the text and the layout
/// as Go's does; Go's own detail after them (which element failed) is not reproduced.
pub fn check_metav1_time(v: &serde_json::Value) -> Result<(), String> {
    let text = match v {
        serde_json::Value::Null => return Ok(()),
        serde_json::Value::String(s) => s,
        other => {
            return Err(format!(
                "json: cannot unmarshal {} into Go value of type string",
                go_json_kind(other)
            ));
        }
    };
    if rfc3339_ok(text.as_bytes()) {
        Ok(())
    } else {
        Err(format!(
            "parsing time {} as \"2006-01-02T15:04:05Z07:00\": cannot parse {} as RFC 3339",
            go_quote(text),
            go_quote(text)
        ))
    }
}

/// Whether `b` is a time Go's RFC 3339 parser accepts (see [`check_metav1_time`]).
fn rfc3339_ok(b: &[u8]) -> bool {
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        let d = b.get(r)?;
        d.iter()
            .all(u8::is_ascii_digit)
            .then(|| d.iter().fold(0, |n, c| n * 10 + u32::from(c - b'0')))
    };
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    let (Some(year), Some(month), Some(day), Some(hour), Some(min), Some(sec)) = (
        num(0..4),
        num(5..7),
        num(8..10),
        num(11..13),
        num(14..16),
        num(17..19),
    ) else {
        return false;
    };
    if !(at(4, b'-') && at(7, b'-') && at(10, b'T') && at(13, b':') && at(16, b':')) {
        return false;
    }
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    if day == 0 || day > days || hour > 23 || min > 59 || sec > 59 {
        return false;
    }
    let mut i = 19;
    if at(i, b'.') || at(i, b',') {
        let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return false;
        }
        i += 1 + digits;
    }
    match b.get(i..) {
        Some([b'Z']) => true,
        Some([sign, ..]) if *sign == b'+' || *sign == b'-' => {
            b.len() == i + 6
                && at(i + 3, b':')
                && num(i + 1..i + 3).is_some_and(|h| h < 24)
                && num(i + 4..i + 6).is_some_and(|m| m < 60)
        }
        _ => false,
    }
}

/// Decodes `text` as Go's `json.Unmarshal` into a `map[string]T` whose Go type is `go_type`:
/// invalid JSON and a non-object fail with Go's texts, `null` is an empty map, duplicate keys keep
/// the last value, and `value` converts each entry (`Ok(None)` leaves it out).
pub fn decode_go_map<T>(
    text: &str,
    go_type: &str,
    value: impl Fn(serde_json::Value) -> Result<Option<T>, String>,
) -> Result<std::collections::BTreeMap<String, T>, String> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| go_json_syntax_error(&e, text))?;
    let mut out = std::collections::BTreeMap::new();
    match v {
        serde_json::Value::Null => {}
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                if let Some(t) = value(v)? {
                    out.insert(k, t);
                }
            }
        }
        other => {
            return Err(format!(
                "json: cannot unmarshal {} into Go value of type {go_type}",
                go_json_kind(&other)
            ));
        }
    }
    Ok(out)
}

/// Decodes `text` as Go decodes a `corev1.ResourceList`: each value through
/// `Quantity.UnmarshalJSON` (a string's content trimmed and parsed, a number's text parsed,
/// `null` the zero quantity, anything else refused), errors in Go's words.
pub fn decode_resource_list(
    text: &str,
) -> Result<std::collections::BTreeMap<String, ParsedQuantity>, String> {
    decode_go_map(text, "v1.ResourceList", |v| {
        let parsed = match &v {
            serde_json::Value::Null => Ok(ParsedQuantity::zero()),
            serde_json::Value::String(s) => parse_quantity(json_trim(s)),
            serde_json::Value::Number(n) => parse_quantity(&n.to_string()),
            _ => Err(QuantityError::Format),
        };
        parsed.map(Some).map_err(|e| e.to_string())
    })
}

/// The text Go's `encoding/json` gives when `input` is not valid JSON, for upstream messages
/// that embed it (`invalid character 'g' looking for beginning of value`,
/// `unexpected end of JSON input`).
pub fn go_json_syntax_error(e: &serde_json::Error, input: &str) -> String {
    if e.is_eof() || input.trim().is_empty() {
        return eof_error(input);
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
            let q = go_quote(&c.to_string());
            format!("'{}'", &q[1..q.len() - 1])
        }
    };
    let msg = e.to_string();
    // Everything before the offending character, for the scanner state Go names.
    let mut before: String = input
        .lines()
        .take(e.line().saturating_sub(1))
        .flat_map(|l| [l, "\n"])
        .collect();
    before.extend(line.chars().take(e.column().saturating_sub(1)));
    let context = if msg.starts_with("expected `,` or `}`") {
        "after object key:value pair".to_owned()
    } else if msg.starts_with("expected `,` or `]`") {
        "after array element".to_owned()
    } else if msg.starts_with("expected `:`") {
        "after object key".to_owned()
    } else if msg.starts_with("key must be a string") {
        "looking for beginning of object key string".to_owned()
    } else if msg.starts_with("trailing characters") {
        "after top-level value".to_owned()
    } else if msg.starts_with("trailing comma") && c == '}' {
        "looking for beginning of object key string".to_owned()
    } else if msg.starts_with("expected ident") {
        literal_context(&before)
    } else if msg.starts_with("invalid number") {
        number_context(&before, c)
    } else if msg.starts_with("invalid escape") || msg.starts_with("invalid unicode") {
        if before
            .rsplit_once("\\u")
            .is_some_and(|(_, hex)| hex.len() < 4)
        {
            "in \\u hexadecimal character escape".to_owned()
        } else {
            "in string escape code".to_owned()
        }
    } else if msg.starts_with("control character") {
        "in string literal".to_owned()
    } else {
        "looking for beginning of value".to_owned()
    };
    format!("invalid character {quoted} {context}")
}

/// Go's words at the end of the input: its scanner is stepped once more with a space, so a
/// number or literal cut short (`-`, `1.`, `1e`, `tr`) is `invalid character ' ' …`, anything
/// else `unexpected end of JSON input`.
fn eof_error(input: &str) -> String {
    let end = "unexpected end of JSON input".to_owned();
    let Some(last) = input.chars().last() else {
        return end;
    };
    if inside_string(input) {
        return end;
    }
    let token: String = {
        let mut t: Vec<char> = input
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '-'))
            .collect();
        t.reverse();
        t.into_iter().collect()
    };
    if matches!(last, '-' | '.' | 'e' | 'E' | '+')
        && token.starts_with(|c: char| c == '-' || c.is_ascii_digit())
    {
        return format!("invalid character ' ' {}", number_context(input, ' '));
    }
    let partial = ["true", "false", "null"]
        .iter()
        .any(|l| !token.is_empty() && l.starts_with(token.as_str()) && *l != token);
    if partial {
        return format!("invalid character ' ' {}", literal_context(input));
    }
    end
}

/// Whether JSON text ends inside a string.
fn inside_string(text: &str) -> bool {
    let (mut in_string, mut escaped) = (false, false);
    for ch in text.chars() {
        match (in_string, escaped, ch) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (_, false, '"') => in_string = !in_string,
            _ => {}
        }
    }
    in_string
}

/// Go's words for a bad character inside `true`, `false` or `null`: which literal, and the
/// character it expected.
fn literal_context(before: &str) -> String {
    let prefix: String = before
        .chars()
        .rev()
        .take_while(char::is_ascii_alphabetic)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let literal = ["true", "false", "null"]
        .into_iter()
        .find(|l| l.starts_with(&prefix) && !prefix.is_empty())
        .unwrap_or("true");
    let expected = literal.chars().nth(prefix.len()).unwrap_or('e');
    format!("in literal {literal} (expecting '{expected}')")
}

/// Go's words for a bad character in or right after a number, from the number's text so far.
fn number_context(before: &str, c: char) -> String {
    let number: String = before
        .chars()
        .rev()
        .take_while(|ch| ch.is_ascii_digit() || matches!(ch, '.' | 'e' | 'E' | '+' | '-'))
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let digits = number.trim_start_matches('-');
    if digits.ends_with('.') {
        "after decimal point in numeric literal".to_owned()
    } else if digits.ends_with(['e', 'E', '+', '-']) {
        "in exponent of numeric literal".to_owned()
    } else if digits.is_empty() {
        "in numeric literal".to_owned()
    } else if digits == "0" && c.is_ascii_digit() {
        // `01`: Go ends the number at `0` and then finds a digit where a separator goes.
        match innermost_container(before) {
            Some('{') => "after object key:value pair".to_owned(),
            Some(_) => "after array element".to_owned(),
            None => "after top-level value".to_owned(),
        }
    } else {
        "in numeric literal".to_owned()
    }
}

/// The innermost open `{` or `[` of JSON text (strings skipped), if any.
fn innermost_container(text: &str) -> Option<char> {
    let (mut stack, mut in_string, mut escaped) = (Vec::new(), false, false);
    for ch in text.chars() {
        if in_string {
            match (escaped, ch) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match ch {
            '"' => in_string = true,
            '{' | '[' => stack.push(ch),
            '}' | ']' => {
                stack.pop();
            }
            _ => {}
        }
    }
    stack.last().copied()
}

#[cfg(test)]
mod json_error_tests {
    use super::{go_json_quote, go_json_syntax_error, go_quote};

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
        // Cut short at the end: Go's scanner steps once more with a space.
        for (input, go) in [
            ("-", "invalid character ' ' in numeric literal"),
            (
                "1.",
                "invalid character ' ' after decimal point in numeric literal",
            ),
            ("1e", "invalid character ' ' in exponent of numeric literal"),
            ("{\"a\": -", "invalid character ' ' in numeric literal"),
            (
                "tr",
                "invalid character ' ' in literal true (expecting 'u')",
            ),
            (
                "[nul",
                "invalid character ' ' in literal null (expecting 'l')",
            ),
            ("\"tr", "unexpected end of JSON input"),
            ("{\"a\": 1", "unexpected end of JSON input"),
        ] {
            assert_eq!(err(input), go, "{input}");
        }
    }

    /// The scanner states Go names inside literals, numbers and strings.
    #[test]
    fn go_texts_inside_values() {
        for (input, go) in [
            (
                "{\"cpu\": 1,}",
                "invalid character '}' looking for beginning of object key string",
            ),
            (
                "[1,]",
                "invalid character ']' looking for beginning of value",
            ),
            (
                "{\"a\":tru}",
                "invalid character '}' in literal true (expecting 'e')",
            ),
            (
                "{\"a\":nul}",
                "invalid character '}' in literal null (expecting 'l')",
            ),
            (
                "{\"a\":fx}",
                "invalid character 'x' in literal false (expecting 'a')",
            ),
            (
                "{\"a\":1.}",
                "invalid character '}' after decimal point in numeric literal",
            ),
            ("{\"a\":-}", "invalid character '}' in numeric literal"),
            (
                "{\"a\":1e}",
                "invalid character '}' in exponent of numeric literal",
            ),
            (
                "{\"a\":01}",
                "invalid character '1' after object key:value pair",
            ),
            ("[01]", "invalid character '1' after array element"),
            (
                "{\"a\":\"\\x\"}",
                "invalid character 'x' in string escape code",
            ),
            (
                "{\"a\":\"\u{1}\"}",
                "invalid character '\\x01' in string literal",
            ),
        ] {
            assert_eq!(err(input), go, "{input:?}");
        }
    }

    #[test]
    fn go_json_quote_escapes_as_encoding_json() {
        assert_eq!(go_json_quote("50%"), "\"50%\"");
        assert_eq!(
            go_json_quote("a\"b\\c\n\u{1}<>&\u{2028}é"),
            "\"a\\\"b\\\\c\\n\\u0001\\u003c\\u003e\\u0026\\u2028é\""
        );
    }

    #[test]
    fn go_quote_escapes_controls() {
        assert_eq!(go_quote("x\"y\\z\n\u{1}"), "\"x\\\"y\\\\z\\n\\x01\"");
        assert_eq!(go_quote("µs"), "\"µs\"");
    }

    /// `%q` escapes what Go's `IsPrint` rejects, and only
    /// that.
    #[test]
    fn go_quote_escapes_what_go_does_not_print() {
        for (input, quoted) in [
            ("a\u{a0}b", "\"a\\u00a0b\""),
            ("\u{ad}", "\"\\u00ad\""),
            ("\u{85}", "\"\\u0085\""),
            ("x\u{2028}", "\"x\\u2028\""),
            ("\u{200b}", "\"\\u200b\""),
            ("\u{feff}", "\"\\ufeff\""),
            ("\u{e000}", "\"\\ue000\""),
            ("\u{10ffff}", "\"\\U0010ffff\""),
            ("\u{3000}", "\"\\u3000\""),
            ("nginx:1.25 é 中 😀", "\"nginx:1.25 é 中 😀\""),
        ] {
            assert_eq!(go_quote(input), quoted, "{input:?}");
        }
    }
}

#[cfg(test)]
mod metav1_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn metav1_duration_and_time_refuse_what_go_refuses() {
        for ok in [json!(null), json!("1h30m"), json!("0"), json!("-1s")] {
            assert_eq!(check_metav1_duration(&ok), Ok(()), "{ok}");
        }
        assert_eq!(
            check_metav1_duration(&json!("1d")),
            Err(r#"time: unknown unit "d" in duration "1d""#.into())
        );
        assert_eq!(
            check_metav1_duration(&json!(5)),
            Err("json: cannot unmarshal number into Go value of type string".into())
        );
        for ok in [
            "2026-11-27T01:02:03Z",
            "2024-02-29T23:59:59.123456789+05:30",
            "2026-01-01T00:00:00,5-00:00",
        ] {
            assert_eq!(check_metav1_time(&json!(ok)), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "x",
            "2026-11-27",
            "2026-11-27 01:02:03Z",
            "2026-11-27t01:02:03z",
            "2023-02-29T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-11-27T24:00:00Z",
            "2026-11-27T01:02:60Z",
            "2026-11-27T01:02:03.Z",
            "2026-11-27T01:02:03+0100",
            "2026-11-27T01:02:03+24:00",
            "2026-11-27T01:02:03Zx",
        ] {
            let e = check_metav1_time(&json!(bad)).unwrap_err();
            assert!(e.starts_with("parsing time "), "{bad}: {e}");
        }
        assert!(check_metav1_time(&json!(true)).is_err());
    }
}
