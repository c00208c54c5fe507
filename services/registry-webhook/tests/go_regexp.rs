//! Every pattern of `tests/data/go-regexp.jsonl` is decided and worded as Go's `regexp.Compile`
//! decided and worded it when the file was recorded (`go run ./tools/go-regexp-corpus -corpus`,
//! Go 1.26; see that tool for how the patterns are generated from Go's grammar).

use registry_webhook::v1::go_regexp::compile_error;

/// A long pattern shortened for a failure message.
fn short(s: &str) -> String {
    if s.chars().count() <= 100 {
        return format!("{s:?}");
    }
    let head: String = s.chars().take(60).collect();
    let tail: String = s
        .chars()
        .rev()
        .take(30)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    format!("{head:?}…{tail:?} ({} bytes)", s.len())
}

#[test]
fn every_recorded_pattern_gets_gos_answer() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/go-regexp.jsonl");
    let text = std::fs::read_to_string(path).expect("the recorded corpus");
    let mut checked = 0;
    let mut differ = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let [pattern, go]: [String; 2] =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("line {}: {e}", n + 1));
        let go = (!go.is_empty()).then_some(go);
        let ours = compile_error(&pattern);
        if ours != go {
            differ.push(format!(
                "line {}: {}\n    Go:   {}\n    ours: {}",
                n + 1,
                short(&pattern),
                go.as_deref().map_or("compiles".into(), short),
                ours.as_deref().map_or("compiles".into(), short),
            ));
        }
        checked += 1;
    }
    assert!(checked >= 20_000, "only {checked} recorded patterns");
    assert!(
        differ.is_empty(),
        "{} of {checked} patterns differ from Go, the first ones:\n{}",
        differ.len(),
        differ[..differ.len().min(25)].join("\n")
    );
}
