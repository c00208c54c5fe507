//! Go's quoting: `%q` (`strconv.Quote`) and `encoding/json`'s string encoding.

use std::fmt::Write as _;

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
