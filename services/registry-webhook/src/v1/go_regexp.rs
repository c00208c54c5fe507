//! Whether a pattern compiles as Go's `regexp.Compile` (RE2 syntax), and Go's error text when it
//! does not: `error parsing regexp: <what>: `<fragment>``.
//!
//! Validity comes from `regex-syntax` (the same RE2 family) plus Go's own limits that crate does
//! not share (repeat counts above 1000, the `x` flag, `\<`/`\>` and `\b{…}`); the error kinds
//! are mapped to Go's words. The fragment is Go's for the common faults (an unclosed class or
//! group, an unopened group, a missing or nested repetition argument, a bad escape, range or
//! count); `docs/spec/kthena-v1.md` §10 lists where the two parsers still disagree. No crate
//! ports Go's parser, and porting it whole is out of proportion for one rule.

use regex_syntax::ast::{self, Ast, ErrorKind};

/// Go's error for `pattern`, or `None` when Go compiles it.
pub fn compile_error(pattern: &str) -> Option<String> {
    let fail =
        |what: &str, fragment: &str| Some(format!("error parsing regexp: {what}: `{fragment}`"));
    let parsed = ast::parse::ParserBuilder::new()
        .nest_limit(1000)
        .build()
        .parse(pattern);
    let tree = match parsed {
        Ok(tree) => tree,
        Err(e) => {
            let span = e.span();
            let at = |s: &ast::Span| pattern.get(s.start.offset..s.end.offset).unwrap_or(pattern);
            let from = pattern.get(span.start.offset..).unwrap_or(pattern);
            return match e.kind() {
                ErrorKind::ClassUnclosed => fail("missing closing ]", from),
                ErrorKind::GroupUnclosed => fail("missing closing )", pattern),
                ErrorKind::GroupUnopened => fail("unexpected )", pattern),
                ErrorKind::RepetitionMissing => fail(
                    "missing argument to repetition operator",
                    repetition_op(from),
                ),
                ErrorKind::EscapeUnexpectedEof => {
                    fail("trailing backslash at end of expression", "")
                }
                ErrorKind::ClassRangeInvalid | ErrorKind::ClassRangeLiteral => {
                    fail("invalid character class range", at(span))
                }
                ErrorKind::RepetitionCountInvalid
                | ErrorKind::RepetitionCountUnclosed
                | ErrorKind::RepetitionCountDecimalEmpty
                | ErrorKind::DecimalInvalid
                | ErrorKind::DecimalEmpty => fail("invalid repeat count", at(span)),
                ErrorKind::GroupNameEmpty
                | ErrorKind::GroupNameInvalid
                | ErrorKind::GroupNameUnexpectedEof
                | ErrorKind::GroupNameDuplicate { .. } => fail("invalid named capture", from),
                ErrorKind::NestLimitExceeded(_) => fail("expression nests too deeply", pattern),
                ErrorKind::UnicodeClassInvalid => fail("invalid character class range", at(span)),
                ErrorKind::FlagUnrecognized
                | ErrorKind::FlagDanglingNegation
                | ErrorKind::FlagDuplicate { .. }
                | ErrorKind::FlagRepeatedNegation { .. }
                | ErrorKind::FlagUnexpectedEof
                | ErrorKind::UnsupportedLookAround => {
                    fail("invalid or unsupported Perl syntax", from)
                }
                _ => fail("invalid escape sequence", at(span)),
            };
        }
    };
    go_only_limits(&tree, pattern)
        .map(|(what, fragment)| format!("error parsing regexp: {what}: `{fragment}`"))
}

/// The repetition operator `rest` starts with: `*`, `+`, `?` or a `{…}` count, with a lazy `?`.
fn repetition_op(rest: &str) -> &str {
    let len = match rest.as_bytes().first() {
        Some(b'{') => rest.find('}').map_or(rest.len(), |i| i + 1),
        Some(_) => 1,
        None => 0,
    };
    let lazy = rest.get(len..).is_some_and(|r| r.starts_with('?'));
    rest.get(..len + usize::from(lazy)).unwrap_or(rest)
}

/// What Go refuses that `regex-syntax` accepts, first in pattern order.
fn go_only_limits(node: &Ast, pattern: &str) -> Option<(&'static str, String)> {
    let text = |s: &ast::Span| {
        pattern
            .get(s.start.offset..s.end.offset)
            .unwrap_or(pattern)
            .to_owned()
    };
    match node {
        Ast::Repetition(r) => {
            if let ast::RepetitionKind::Range(range) = &r.op.kind {
                let (lo, hi) = match *range {
                    ast::RepetitionRange::Exactly(n) | ast::RepetitionRange::AtLeast(n) => (n, n),
                    ast::RepetitionRange::Bounded(a, b) => (a, b),
                };
                if lo > 1000 || hi > 1000 {
                    return Some(("invalid repeat count", text(&r.op.span)));
                }
            }
            if let Ast::Repetition(inner) = &*r.ast {
                let nested = ast::Span::new(inner.op.span.start, r.op.span.end);
                return Some(("invalid nested repetition operator", text(&nested)));
            }
            go_only_limits(&r.ast, pattern)
        }
        Ast::Flags(f) => flags_limit(&f.flags, pattern),
        Ast::Group(g) => {
            if let ast::GroupKind::NonCapturing(flags) = &g.kind
                && let Some(hit) = flags_limit(flags, pattern)
            {
                return Some(hit);
            }
            go_only_limits(&g.ast, pattern)
        }
        Ast::Assertion(a) => match a.kind {
            ast::AssertionKind::StartLine
            | ast::AssertionKind::EndLine
            | ast::AssertionKind::StartText
            | ast::AssertionKind::EndText
            | ast::AssertionKind::WordBoundary
            | ast::AssertionKind::NotWordBoundary => None,
            _ => Some(("invalid escape sequence", text(&a.span))),
        },
        Ast::Alternation(a) => a.asts.iter().find_map(|n| go_only_limits(n, pattern)),
        Ast::Concat(c) => c.asts.iter().find_map(|n| go_only_limits(n, pattern)),
        _ => None,
    }
}

/// Go knows the flags `i`, `m`, `s` and `U`; `x` (and `u`, `R`) are Perl syntax it refuses.
fn flags_limit(flags: &ast::Flags, pattern: &str) -> Option<(&'static str, String)> {
    flags.items.iter().find_map(|item| match item.kind {
        ast::FlagsItemKind::Flag(
            ast::Flag::IgnoreWhitespace | ast::Flag::Unicode | ast::Flag::CRLF,
        ) => {
            let start = flags.span.start.offset.saturating_sub(2);
            let end = item.span.end.offset;
            Some((
                "invalid or unsupported Perl syntax",
                pattern.get(start..end).unwrap_or(pattern).to_owned(),
            ))
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::compile_error;

    #[test]
    fn valid_patterns_compile() {
        for ok in [
            "^/v1/.*$",
            "a{2,1000}",
            "(?i)abc",
            "(?P<n>x)",
            "[[:alpha:]]+",
            "\\d+\\z",
            "",
        ] {
            assert_eq!(compile_error(ok), None, "{ok}");
        }
    }

    #[test]
    fn go_texts_for_common_faults() {
        let cases = [
            ("[abc", "error parsing regexp: missing closing ]: `[abc`"),
            ("x(abc", "error parsing regexp: missing closing ): `x(abc`"),
            ("abc)", "error parsing regexp: unexpected ): `abc)`"),
            (
                "*a",
                "error parsing regexp: missing argument to repetition operator: `*`",
            ),
            (
                "a**",
                "error parsing regexp: invalid nested repetition operator: `**`",
            ),
            (
                "\\q",
                "error parsing regexp: invalid escape sequence: `\\q`",
            ),
            (
                "[z-a]",
                "error parsing regexp: invalid character class range: `z-a`",
            ),
            (
                "a{1001}",
                "error parsing regexp: invalid repeat count: `{1001}`",
            ),
            (
                "a\\",
                "error parsing regexp: trailing backslash at end of expression: ``",
            ),
            (
                "(?x)a",
                "error parsing regexp: invalid or unsupported Perl syntax: `(?x`",
            ),
        ];
        for (pattern, want) in cases {
            assert_eq!(compile_error(pattern).as_deref(), Some(want), "{pattern}");
        }
    }
}
