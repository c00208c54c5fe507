//! Whether a pattern compiles as Go's `regexp.Compile` (RE2 syntax), and Go's error text when it
//! does not: `error parsing regexp: <what>: `<fragment>``.
//!
//! Validity comes from `regex-syntax` (the same RE2 family) plus Go's own limits that crate does
//! not share (repeat counts above 1000, the `x` flag, `\<` and `\>`); the error kinds
//! are mapped to Go's words. The fragment is Go's for the common faults (an unclosed class or
//! group, an unopened group, a missing or nested repetition argument, a bad escape, range or
//! count); `docs/spec/kthena-v1.md` §10 lists where the two parsers still disagree. No crate
//! ports Go's parser, and porting it whole is out of proportion for one rule.

use regex_syntax::ast::{self, Ast, ErrorKind};

/// Go's error for `pattern`, or `None` when Go compiles it.
pub fn compile_error(original: &str) -> Option<String> {
    let fail =
        |what: &str, fragment: &str| Some(format!("error parsing regexp: {what}: `{fragment}`"));
    // Go's syntax that `regex-syntax` reads otherwise, rewritten to its equivalent first.
    let rewritten = match to_rust_syntax(original) {
        Ok(r) => r,
        Err((what, fragment)) => return fail(what, &fragment),
    };
    let pattern = rewritten.text.as_str();
    // Fragments are found in the rewritten text and quoted from the original.
    let quote = |r: std::ops::Range<usize>| {
        let r = rewritten.original(r);
        original
            .get(r.start..r.end.min(original.len()))
            .unwrap_or(original)
    };
    let parsed = ast::parse::ParserBuilder::new()
        .nest_limit(1000)
        .build()
        .parse(pattern);
    let tree = match parsed {
        Ok(tree) => tree,
        Err(e) => {
            let span = e.span();
            let at = |s: &ast::Span| quote(s.start.offset..s.end.offset);
            let from = quote(span.start.offset..usize::MAX);
            return match e.kind() {
                ErrorKind::ClassUnclosed => fail("missing closing ]", from),
                ErrorKind::GroupUnclosed => fail("missing closing )", original),
                ErrorKind::GroupUnopened => fail("unexpected )", original),
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
                ErrorKind::NestLimitExceeded(_) => fail("expression nests too deeply", original),
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
    if let Some((what, range)) = go_only_limits(&tree) {
        return fail(what, quote(range));
    }
    // Unknown Unicode class names are found when the tree is translated.
    match regex_syntax::hir::translate::TranslatorBuilder::new()
        .utf8(false)
        .build()
        .translate(pattern, &tree)
    {
        Err(e) => {
            let s = e.span();
            fail(
                "invalid character class range",
                quote(s.start.offset..s.end.offset),
            )
        }
        Ok(_) => None,
    }
}

/// The POSIX class names Go knows inside brackets (`[[:alpha:]]`).
const ASCII_CLASSES: [&str; 14] = [
    "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print", "punct",
    "space", "upper", "word", "xdigit",
];

/// Rewrites what Go reads differently from `regex-syntax` into the equivalent the latter reads
/// as Go does: `\\Q…\\E` literals, octal escapes (`\\0`, `\\012`), a `{` that starts no repeat
/// count (a literal to Go: `{,5}`, `{01}`), named groups (Go allows any `[A-Za-z0-9_]+` name,
/// repeated or starting with a digit: they become plain groups), and `[`, `&`, `~` inside a class
/// (literals to Go, class syntax to `regex-syntax`). Refuses, in Go's words, a named group Go
/// refuses and an unknown `[:name:]` class. One pass; every look-ahead is bounded by what it
/// consumes, so the work stays linear whatever the pattern.
fn to_rust_syntax(p: &str) -> Result<Rewritten, (&'static str, String)> {
    let b = p.as_bytes();
    let mut out = String::with_capacity(p.len() + 8);
    let mut marks = Vec::new();
    let mut i = 0;
    // Inside a class: the byte offset of its first member (a `]` there is a literal).
    let mut class: Option<usize> = None;
    let is_octal = |k: usize| b.get(k).is_some_and(|c| (b'0'..=b'7').contains(c));
    while i < b.len() {
        marks.push((out.len(), i));
        let rest = &p[i..];
        let Some(c) = rest.chars().next() else { break };
        if c == '\\' {
            let next = rest[1..].chars().next();
            match next {
                Some('Q') if class.is_none() => {
                    let body = &rest[2..];
                    let (lit, used) = body
                        .find("\\E")
                        .map_or((body, body.len()), |e| (&body[..e], e + 2));
                    out.push_str(&regex_syntax::escape(lit));
                    i += 2 + used;
                    continue;
                }
                // Go: `\\0` takes up to two more octal digits; `\\1`–`\\7` only when another
                // octal digit follows (else a backreference, which both refuse).
                Some(d @ '0'..='7') if d == '0' || is_octal(i + 2) => {
                    let mut j = i + 1;
                    let mut v = 0u32;
                    while j < i + 4 && is_octal(j) {
                        v = v * 8 + u32::from(b[j] - b'0');
                        j += 1;
                    }
                    out.push_str(&format!("\\x{{{v:x}}}"));
                    i = j;
                    continue;
                }
                _ => {}
            }
            out.push('\\');
            i += 1;
            if let Some(n) = next {
                out.push(n);
                i += n.len_utf8();
                // `\\x{…}`, `\\p{…}`, `\\P{…}` keep their braces (a short name or number:
                // the scan is bounded).
                if matches!(n, 'x' | 'p' | 'P') && b.get(i) == Some(&b'{') {
                    let body = p[i + 1..]
                        .bytes()
                        .take(64)
                        .take_while(|c| c.is_ascii_alphanumeric() || b"_=^ -".contains(c))
                        .count();
                    let end = i + 1 + body;
                    let close = usize::from(b.get(end) == Some(&b'}'));
                    out.push_str(&p[i..end + close]);
                    i = end + close;
                }
            }
            continue;
        }
        if let Some(first) = class {
            match c {
                ']' if i > first => class = None,
                '[' if rest.starts_with("[:") => {
                    // `[:name:]`: the name is letters, so the search stops at the first other byte.
                    let name_len = rest[2..]
                        .bytes()
                        .take_while(|c| c.is_ascii_alphabetic() || *c == b'^')
                        .count();
                    if rest[2 + name_len..].starts_with(":]") {
                        let whole = &rest[..name_len + 4];
                        let name = rest[2..2 + name_len].trim_start_matches('^');
                        if !ASCII_CLASSES.contains(&name) {
                            return Err(("invalid character class range", whole.to_owned()));
                        }
                        out.push_str(whole);
                        i += whole.len();
                        continue;
                    }
                    out.push_str("\\[");
                    i += 1;
                    continue;
                }
                '[' | '&' | '~' => {
                    out.push('\\');
                    out.push(c);
                    i += 1;
                    continue;
                }
                _ => {}
            }
            out.push(c);
            i += c.len_utf8();
            continue;
        }
        match c {
            '[' => {
                out.push('[');
                i += 1;
                if b.get(i) == Some(&b'^') {
                    out.push('^');
                    i += 1;
                }
                class = Some(i);
                continue;
            }
            '{' if !starts_repeat(&rest[1..]) => {
                out.push_str("\\{");
                i += 1;
                continue;
            }
            '(' if rest.starts_with("(?P<")
                || (rest.starts_with("(?<")
                    && !rest.starts_with("(?<=")
                    && !rest.starts_with("(?<!")) =>
            {
                let begin = if rest.starts_with("(?P<") { 4 } else { 3 };
                if rest.len() > 4 {
                    // The name ends at the first `>`; a valid one is short, so stop at the first
                    // byte that cannot be in a name (linear over the pattern as a whole).
                    let scan = rest[begin..]
                        .bytes()
                        .position(|c| !(c == b'_' || c.is_ascii_alphanumeric()));
                    let end = scan.map(|k| begin + k);
                    match end {
                        Some(e) if rest.as_bytes()[e] == b'>' && e > begin => {
                            out.push('(');
                            i += e + 1;
                            continue;
                        }
                        _ => {
                            let fragment = match rest.find('>') {
                                Some(e) => &rest[..=e],
                                None => rest,
                            };
                            return Err(("invalid named capture", fragment.to_owned()));
                        }
                    }
                }
            }
            _ => {}
        }
        out.push(c);
        i += c.len_utf8();
    }
    marks.push((out.len(), p.len()));
    Ok(Rewritten { text: out, marks })
}

/// The rewritten pattern, and where each of its pieces came from, so that Go's error quotes the
/// pattern as the user wrote it (`[[a`, not `[\\[a`).
struct Rewritten {
    text: String,
    /// `(offset in text, offset in the original)` at the start of every rewritten piece, in
    /// order, and both ends last.
    marks: Vec<(usize, usize)>,
}

impl Rewritten {
    /// The original's range for `range` of the text: a start inside a piece moves back to the
    /// piece's start, an end forward to its end.
    fn original(&self, range: std::ops::Range<usize>) -> std::ops::Range<usize> {
        let after = |o: usize| self.marks.partition_point(|&(t, _)| t <= o);
        let start = after(range.start)
            .checked_sub(1)
            .and_then(|k| self.marks.get(k))
            .map_or(0, |m| m.1);
        let end_at = self.marks.partition_point(|&(t, _)| t < range.end);
        let end = self.marks.get(end_at).map_or(usize::MAX, |m| m.1);
        start..end.max(start)
    }
}

/// Whether the text after a `{` is a Go repeat count, `n}`, `n,}` or `n,m}` with no leading
/// zeros (anything else makes the `{` a literal to Go).
fn starts_repeat(after: &str) -> bool {
    let number = |s: &str| {
        let digits = s.bytes().take_while(u8::is_ascii_digit).count();
        let leading_zero = digits >= 2 && s.starts_with('0');
        (digits > 0 && !leading_zero).then_some(digits)
    };
    let Some(n) = number(after) else { return false };
    let rest = &after[n..];
    if rest.starts_with('}') {
        return true;
    }
    let Some(rest) = rest.strip_prefix(',') else {
        return false;
    };
    if rest.starts_with('}') {
        return true;
    }
    number(rest).is_some_and(|m| rest[m..].starts_with('}'))
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
fn go_only_limits(node: &Ast) -> Option<(&'static str, std::ops::Range<usize>)> {
    let text = |s: &ast::Span| s.start.offset..s.end.offset;
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
            go_only_limits(&r.ast)
        }
        Ast::Flags(f) => flags_limit(&f.flags),
        Ast::Group(g) => {
            if let ast::GroupKind::NonCapturing(flags) = &g.kind
                && let Some(hit) = flags_limit(flags)
            {
                return Some(hit);
            }
            go_only_limits(&g.ast)
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
        Ast::Alternation(a) => a.asts.iter().find_map(go_only_limits),
        Ast::Concat(c) => c.asts.iter().find_map(go_only_limits),
        _ => None,
    }
}

/// Go knows the flags `i`, `m`, `s` and `U`; `x` (and `u`, `R`) are Perl syntax it refuses.
fn flags_limit(flags: &ast::Flags) -> Option<(&'static str, std::ops::Range<usize>)> {
    flags.items.iter().find_map(|item| match item.kind {
        ast::FlagsItemKind::Flag(
            ast::Flag::IgnoreWhitespace | ast::Flag::Unicode | ast::Flag::CRLF,
        ) => {
            let start = flags.span.start.offset.saturating_sub(2);
            let end = item.span.end.offset;
            Some(("invalid or unsupported Perl syntax", start..end))
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
    /// Each pattern with the error Go 1.26's `regexp.Compile` gives it (`""`: compiles), taken
    /// from Go itself; the three where only the wording differs are in the spec's R-1.
    #[test]
    fn as_go_compiles_them() {
        let cases: &[(&str, &str)] = &[
            // Quoted as written, where ours parses a rewriting.
            ("[[a", "error parsing regexp: missing closing ]: `[[a`"),
            ("[&~a", "error parsing regexp: missing closing ]: `[&~a`"),
            ("\\Q.*\\E[", "error parsing regexp: missing closing ]: `[`"),
            (
                "\\Q.*\\Ex{1001}",
                "error parsing regexp: invalid repeat count: `{1001}`",
            ),
            (
                "\\012[z-a]",
                "error parsing regexp: invalid character class range: `z-a`",
            ),
            (
                "a{2}{3}",
                "error parsing regexp: invalid nested repetition operator: `{2}{3}`",
            ),
            ("(?i)x", ""),
            ("\\pL", ""),
            ("[[:word:]]", ""),
            ("\\Q.\\E", ""),
            ("a{,5}", ""),
            ("x{1000}", ""),
            (
                "x{1001}",
                "error parsing regexp: invalid repeat count: `{1001}`",
            ),
            ("(?P<n>a)(?P<n>b)", ""),
            ("(?<n>a)", ""),
            (
                "a**",
                "error parsing regexp: invalid nested repetition operator: `**`",
            ),
            (
                "a*?+",
                "error parsing regexp: invalid nested repetition operator: `*?+`",
            ),
            ("(?U)a", ""),
            (
                "\\8",
                "error parsing regexp: invalid escape sequence: `\\8`",
            ),
            ("\\0", ""),
            ("(?m)^$", ""),
            (
                "a{2,1}",
                "error parsing regexp: invalid repeat count: `{2,1}`",
            ),
            ("[]a]", ""),
            ("[^]a]", ""),
            (
                "(?x)a",
                "error parsing regexp: invalid or unsupported Perl syntax: `(?x`",
            ),
            ("\\z", ""),
            (
                "\\C",
                "error parsing regexp: invalid escape sequence: `\\C`",
            ),
            (
                "a++",
                "error parsing regexp: invalid nested repetition operator: `++`",
            ),
            (
                "+a",
                "error parsing regexp: missing argument to repetition operator: `+`",
            ),
            ("(a|)", ""),
            ("()", ""),
            ("x{2,}?", ""),
            ("\\x{10FFFF}", ""),
            ("[\\x00-\\x{10FFFF}]", ""),
            ("(?i:a)", ""),
            ("(?-i)a", ""),
            ("(?:", "error parsing regexp: missing closing ): `(?:`"),
            ("a)b(", "error parsing regexp: unexpected ): `a)b(`"),
            ("[a", "error parsing regexp: missing closing ]: `[a`"),
            (
                "\\",
                "error parsing regexp: trailing backslash at end of expression: ``",
            ),
            (
                "\\e",
                "error parsing regexp: invalid escape sequence: `\\e`",
            ),
            ("\\a", ""),
            ("[a-]", ""),
            ("[-a]", ""),
            ("\\pZ", ""),
            (
                "\\p{Foo}",
                "error parsing regexp: invalid character class range: `\\p{Foo}`",
            ),
            (
                "(?P<>a)",
                "error parsing regexp: invalid named capture: `(?P<>`",
            ),
            ("(?P<1a>a)", ""),
            ("é+", ""),
            (
                "[[:foo:]]",
                "error parsing regexp: invalid character class range: `[:foo:]`",
            ),
            (
                "a{1000,1001}",
                "error parsing regexp: invalid repeat count: `{1000,1001}`",
            ),
            ("\\b", ""),
            ("\\B", ""),
            ("^*", ""),
            ("$+", ""),
            (
                "(*)",
                "error parsing regexp: missing argument to repetition operator: `*`",
            ),
            (
                "|*",
                "error parsing regexp: missing argument to repetition operator: `*`",
            ),
            ("x{0}", ""),
            (
                "[z-a]",
                "error parsing regexp: invalid character class range: `z-a`",
            ),
        ];
        for (pattern, go) in cases {
            assert_eq!(compile_error(pattern).unwrap_or_default(), *go, "{pattern}");
        }
    }
    /// Patterns built to make a look-ahead rescan the rest are decided in one pass (a quadratic
    /// rewrite of 200 KB would take minutes here), and decided as Go 1.26's `regexp.Compile`
    /// decides them (its answers taken by running it on the same patterns). The `\\x{` one is
    /// the same refusal, but Go's fragment runs to the offending character (`\\x{\\`).
    /// Fragments quote the pattern as written, not its rewriting (`[[:`, not `[\\[:`).
    #[test]
    fn long_hostile_patterns_are_decided_as_go_decides_them() {
        fn whole(head: &str, p: &str) -> Option<String> {
            Some(format!("error parsing regexp: {head}: `{p}`"))
        }
        // Go's answer, given the whole pattern.
        type Go = fn(&str) -> Option<String>;
        let cases: [(&str, Go); 6] = [
            ("{", |_| None),
            ("\\x{", |_| whole("invalid escape sequence", "\\x{")),
            ("(?P<", |p| whole("invalid named capture", p)),
            ("[[:", |p| whole("missing closing ]", p)),
            ("{1,", |_| None),
            ("\\Q", |_| None),
        ];
        for (unit, want) in cases {
            let pattern = unit.repeat(200_000 / unit.len());
            assert_eq!(compile_error(&pattern), want(&pattern), "{unit} repeated");
        }
    }
}
