//! apimachinery's `resource.Quantity`: parsing, exact comparison and arithmetic, printing.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::*;

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
pub(super) fn parse_quantity(text: &str) -> Result<ParsedQuantity, QuantityError> {
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

#[cfg(test)]
mod tests {
    use super::*;

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

    /// The check without a value agrees with the parser on every text of the tables above.
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
}
