//! Go's answers for the shapes where another RE2 parser answers otherwise, each recorded from
//! Go 1.26's `regexp.Compile` (the whole corpus is checked by `tests/go_regexp.rs`).

use super::{canonical, compile_error};

#[test]
fn go_compiles_these() {
    for (pattern, _) in [
        (r#"\<"#, r#""#),
        (r#"\>"#, r#""#),
        (r#"[\w-z]"#, r#""#),
        (r#"[\p{Greek}-z]"#, r#""#),
        (r#"\p{^Greek}"#, r#""#),
        (r#"\P{^L}"#, r#""#),
        (r#"\p{greek}"#, r#""#),
        (r#"\p{G_r-e e k}"#, r#""#),
        (r#"(?)"#, r#""#),
        (r#"(a{10}){100}"#, r#""#),
        (r#"(?P<n>a)(?P<n>b)"#, r#""#),
        (r#"(?<1a>x)"#, r#""#),
        (r#"x{,5}"#, r#""#),
        (r#"a{01}"#, r#""#),
        (r#"\Q*\E+"#, r#""#),
        (r#"\b{start}"#, r#""#),
        (r#"a(?i)*"#, r#""#),
        (r#"^*"#, r#""#),
        (r#"\12"#, r#""#),
        (r#"\0123"#, r#""#),
        (r#"[]a]"#, r#""#),
        (r#"^/v1/.*$"#, r#""#),
        (r#"(?i)abc"#, r#""#),
        (r#"[[:alpha:]]+"#, r#""#),
        (r#"\d+\z"#, r#""#),
        (r#""#, r#""#),
        (r#"a{5,}"#, r#""#),
    ] {
        assert_eq!(compile_error(pattern), None, "{pattern}");
    }
}

#[test]
fn go_refuses_these_in_its_words() {
    for (pattern, go) in [
        (
            r#"\p{IsGreek}"#,
            r#"error parsing regexp: invalid character class range: `\p{IsGreek}`"#,
        ),
        (
            r#"\u0041"#,
            r#"error parsing regexp: invalid escape sequence: `\u`"#,
        ),
        (
            r#"[a--b]"#,
            r#"error parsing regexp: invalid character class range: `a--`"#,
        ),
        (
            r#"(?P=n)"#,
            r#"error parsing regexp: invalid or unsupported Perl syntax: `(?P`"#,
        ),
        (
            r#"(?#c)"#,
            r#"error parsing regexp: invalid or unsupported Perl syntax: `(?#`"#,
        ),
        (
            r#"(?'n'a)"#,
            r#"error parsing regexp: invalid or unsupported Perl syntax: `(?'`"#,
        ),
        (
            r#"(?|a)"#,
            r#"error parsing regexp: invalid or unsupported Perl syntax: `(?|`"#,
        ),
        (
            r#"(?>a)"#,
            r#"error parsing regexp: invalid or unsupported Perl syntax: `(?>`"#,
        ),
        (
            r#"(?=a)"#,
            r#"error parsing regexp: invalid or unsupported Perl syntax: `(?=`"#,
        ),
        (
            r#"{3,2}"#,
            r#"error parsing regexp: invalid repeat count: `{3,2}`"#,
        ),
        (
            r#"{1001}"#,
            r#"error parsing regexp: invalid repeat count: `{1001}`"#,
        ),
        (
            r#"(?<=a)"#,
            r#"error parsing regexp: invalid named capture: `(?<=a)`"#,
        ),
        (
            r#"(?i"#,
            r#"error parsing regexp: invalid or unsupported Perl syntax: `(?i`"#,
        ),
        (
            r#"{2,3}**"#,
            r#"error parsing regexp: missing argument to repetition operator: `{2,3}`"#,
        ),
        (
            r#"a{2,3}**"#,
            r#"error parsing regexp: invalid nested repetition operator: `{2,3}*`"#,
        ),
        (
            r#"\p{Old_Italic}"#,
            r#"error parsing regexp: invalid character class range: `\p{Old_Italic}`"#,
        ),
        (
            r#"\x{110000}"#,
            r#"error parsing regexp: invalid escape sequence: `\x{110000`"#,
        ),
        (
            r#"\x{z}"#,
            r#"error parsing regexp: invalid escape sequence: `\x{z`"#,
        ),
        (
            r#"\8"#,
            r#"error parsing regexp: invalid escape sequence: `\8`"#,
        ),
        (
            r#"(a{10}){101}"#,
            r#"error parsing regexp: invalid repeat count: `{101}`"#,
        ),
        (
            r#"a**"#,
            r#"error parsing regexp: invalid nested repetition operator: `**`"#,
        ),
        (
            r#"*"#,
            r#"error parsing regexp: missing argument to repetition operator: `*`"#,
        ),
        (
            r#"[[:foo:]]"#,
            r#"error parsing regexp: invalid character class range: `[:foo:]`"#,
        ),
        (
            r#"[[:alpha:]"#,
            r#"error parsing regexp: missing closing ]: `[[:alpha:]`"#,
        ),
        (
            r#"[a-\d]"#,
            r#"error parsing regexp: invalid escape sequence: `\d`"#,
        ),
        (
            r#"\x{\}"#,
            r#"error parsing regexp: invalid escape sequence: `\x{\`"#,
        ),
        (
            r#"a\"#,
            r#"error parsing regexp: trailing backslash at end of expression: ``"#,
        ),
        (r#"(a))"#, r#"error parsing regexp: unexpected ): `(a))`"#),
        (
            r#"((a)"#,
            r#"error parsing regexp: missing closing ): `((a)`"#,
        ),
        (
            r#"a|*"#,
            r#"error parsing regexp: missing argument to repetition operator: `*`"#,
        ),
        (
            r#"(?i)*"#,
            r#"error parsing regexp: missing argument to repetition operator: `*`"#,
        ),
        (
            r#"\C"#,
            r#"error parsing regexp: invalid escape sequence: `\C`"#,
        ),
        (
            r#"\pé"#,
            r#"error parsing regexp: invalid character class range: `\pé`"#,
        ),
        (
            r#"\p"#,
            r#"error parsing regexp: invalid character class range: `\p`"#,
        ),
        (
            r#"(?P<a)b>c)"#,
            r#"error parsing regexp: invalid named capture: `(?P<a)b>`"#,
        ),
        (
            r#"(?i-)"#,
            r#"error parsing regexp: invalid or unsupported Perl syntax: `(?i-)`"#,
        ),
        (
            r#"(?--i)"#,
            r#"error parsing regexp: invalid or unsupported Perl syntax: `(?--`"#,
        ),
        (
            r#"\1"#,
            r#"error parsing regexp: invalid escape sequence: `\1`"#,
        ),
        (
            r#"[\Q]\E]"#,
            r#"error parsing regexp: invalid escape sequence: `\Q`"#,
        ),
        (
            r#"[^]"#,
            r#"error parsing regexp: missing closing ]: `[^]`"#,
        ),
        (
            r#"\p{Greek"#,
            r#"error parsing regexp: invalid character class range: `\p{Greek`"#,
        ),
        (
            r#"a{2}{3}"#,
            r#"error parsing regexp: invalid nested repetition operator: `{2}{3}`"#,
        ),
        (
            r#"a*?*"#,
            r#"error parsing regexp: invalid nested repetition operator: `*?*`"#,
        ),
        (
            r#"(?i:a"#,
            r#"error parsing regexp: missing closing ): `(?i:a`"#,
        ),
        (
            r#"x{2}{1001}"#,
            r#"error parsing regexp: invalid repeat count: `{1001}`"#,
        ),
        (
            r#"a{99999999999}"#,
            r#"error parsing regexp: invalid repeat count: `{99999999999}`"#,
        ),
        (
            r#"a{1,99999999999}"#,
            r#"error parsing regexp: invalid repeat count: `{1,99999999999}`"#,
        ),
    ] {
        assert_eq!(compile_error(pattern).as_deref(), Some(go), "{pattern}");
    }
}

#[test]
fn nesting_and_copies_stop_where_go_stops() {
    let nested = |k: usize| format!("{}a{}", "(".repeat(k), ")".repeat(k));
    assert_eq!(compile_error(&nested(999)), None);
    assert_eq!(
        compile_error(&nested(1000)),
        Some(format!(
            "error parsing regexp: expression nests too deeply: `{}`",
            nested(1000)
        ))
    );
    // Non-capturing groups add no node: any depth is one literal.
    let groups = format!("{}a{}", "(?:".repeat(5000), ")".repeat(5000));
    assert_eq!(compile_error(&groups), None);
    // Each `a*` compiles to three instructions: 1,119 of them a thousand times pass Go's
    // 3,355,443.
    let big = format!("(?:{}){{1000}}", "a*".repeat(1119));
    assert_eq!(
        compile_error(&big),
        Some(format!(
            "error parsing regexp: expression too large: `{big}`"
        ))
    );
    assert_eq!(
        compile_error(&format!("(?:{}){{1000}}", "a*".repeat(1118))),
        None
    );
}

#[test]
fn class_names_are_looked_up_as_go_folds_them() {
    assert_eq!(canonical("g_r-e e k"), "Greek");
    assert_eq!(canonical("LU"), "Lu");
    assert_eq!(canonical(""), "");
}

#[test]
fn long_hostile_patterns_are_decided_as_go_decides_them() {
    fn whole(what: &str, p: &str) -> Option<String> {
        Some(format!("error parsing regexp: {what}: `{p}`"))
    }
    // 200 KB of each unit; Go's answers, given the whole pattern.
    type Go = fn(&str) -> Option<String>;
    let cases: [(&str, Go); 7] = [
        ("{", |_| None),
        ("\\x{", |_| whole("invalid escape sequence", "\\x{\\")),
        ("(?P<", |p| whole("invalid named capture", p)),
        ("[[:", |p| whole("missing closing ]", p)),
        ("{1,", |_| None),
        ("\\Q", |_| None),
        ("a", |_| None),
    ];
    for (unit, want) in cases {
        let pattern = unit.repeat(200_000 / unit.len());
        assert_eq!(compile_error(&pattern), want(&pattern), "{unit} repeated");
    }
}

#[test]
fn alternations_are_measured_as_go_factors_them() {
    let nested = |branch: &str, n: usize| format!("{}c{}", branch.repeat(n), ")".repeat(n));
    // Written out, 1,000 nested alternations are 2,000 levels high; Go factors each level's
    // shared `ab` away before measuring, and compiles them.
    assert_eq!(compile_error(&nested("(?:ab|", 1000)), None);
    // Without a shared prefix nothing is factored, and Go refuses the same depth.
    assert_eq!(
        compile_error(&nested("(?:ab|x", 1000)).map(|e| e[..51].to_owned()),
        Some("error parsing regexp: expression nests too deeply: ".to_owned())
    );
    // 1,200 branches of 12 runes under {1000} would be about 15.6 million instructions; Go
    // turns the shared eight runes into one prefix and the last digits into classes.
    let branches: Vec<String> = (0..1200).map(|i| format!("abcdefgh{i:04}")).collect();
    assert_eq!(
        compile_error(&format!("(?:{}){{1000}}", branches.join("|"))),
        None
    );
}

#[test]
fn class_runes_count_against_gos_limit() {
    // Each `\pL` pushes Go's 1,292-rune list of letters; 2^25 runes in all is Go's limit.
    assert_eq!(compile_error(&r"\pL".repeat(25_458)), None);
    let refused = compile_error(&r"\pL".repeat(25_459)).map(|e| e[..43].to_owned());
    assert_eq!(
        refused.as_deref(),
        Some("error parsing regexp: expression too large:")
    );
}

#[test]
fn very_long_patterns_are_parsed_with_room_for_gos_recursion() {
    // `a|aa|aaa|…`: Go factors the shared `a` level after level, 3,000 levels deep (4.5 MB).
    let pattern: Vec<String> = (1..=3000).map(|k| "a".repeat(k)).collect();
    let refused = compile_error(&pattern.join("|")).map(|e| e[..51].to_owned());
    assert_eq!(
        refused.as_deref(),
        Some("error parsing regexp: expression nests too deeply: ")
    );
}
