//! `encoding/json`'s decode errors and metav1's JSON types, in Go's words.

use super::quantity::parse_quantity;
use super::*;

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

/// The days of `month` (1–12) in `year` of the Gregorian calendar, as Go's `time` counts them;
/// `None` for no such month.
fn days_in_month(year: u32, month: u32) -> Option<u32> {
    let leap = year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => Some(31),
        4 | 6 | 9 | 11 => Some(30),
        2 if leap => Some(29),
        2 => Some(28),
        _ => None,
    }
}

/// Whether Go's `time.Parse("2006-01-02", s)` accepts `s`: RFC 3339's full-date, a day that
/// exists.
pub fn is_full_date(s: &str) -> bool {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        let d = b.get(r)?;
        d.iter()
            .all(u8::is_ascii_digit)
            .then(|| d.iter().fold(0, |n, c| n * 10 + u32::from(c - b'0')))
    };
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let (Some(year), Some(month), Some(day)) = (num(0..4), num(5..7), num(8..10)) else {
        return false;
    };
    days_in_month(year, month).is_some_and(|days| (1..=days).contains(&day))
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
    let Some(days) = days_in_month(year, month) else {
        return false;
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
    // serde_json counts columns in bytes, and Go's scanner names the offending byte, not the
    // character it starts: `string(c)` of a byte reads it as Latin-1 (0xC2, the first byte of a
    // no-break space, is 'Â').
    let at = e.column().saturating_sub(1);
    let c = line.as_bytes().get(at).map_or(' ', |b| char::from(*b));
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
    before.push_str(line.get(..at).unwrap_or(line));
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
        // Go names the first byte of a multi-byte character, read as Latin-1, and counts bytes.
        assert_eq!(
            err("{}\u{a0}"),
            "invalid character '\u{c2}' after top-level value"
        );
        assert_eq!(
            err("{\"é\": 1 x}"),
            "invalid character 'x' after object key:value pair"
        );
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
