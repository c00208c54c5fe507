//! House rules a reader would otherwise have to police by hand: no code or page cites an issue of
//! a tracker outside the repository (a reader cannot follow it), and no test is named after one.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The files git tracks or would track, given facts (`fixtures/`, the given specifications)
/// left out: their words are not ours.
fn our_text_files() -> Vec<PathBuf> {
    let out = Command::new("git")
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .current_dir(root())
        .output()
        .expect("git ls-files");
    let given = [
        "docs/spec/registry.md",
        "docs/spec/scheduling.md",
        "docs/spec/node-config.md",
        "docs/spec/training.md",
    ];
    out.stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .filter(|p| !p.starts_with("fixtures/") && !given.contains(&p.as_str()))
        .filter(|p| {
            [
                ".rs", ".md", ".go", ".py", ".sh", ".toml", ".yaml", ".yml", "Tiltfile",
            ]
            .iter()
            .any(|e| p.ends_with(e))
        })
        .map(|p| root().join(p))
        .collect()
}

/// Where `text` cites an issue: "issue" or "issues" then a number (with or without `#`), or a
/// name like `item_N_…` or `round_N_…` taken from an issue's list.
fn citations(text: &str) -> Vec<String> {
    let lower = text.to_ascii_lowercase();
    let mut found = Vec::new();
    for (n, line) in lower.lines().enumerate() {
        for word in ["issue ", "issues ", "issue #", "item_", "item-", "round_"] {
            for (i, _) in line.match_indices(word) {
                let before = line[..i].chars().last();
                if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                    continue;
                }
                if line[i + word.len()..].starts_with(|c: char| c.is_ascii_digit()) {
                    found.push(format!("line {}: {}", n + 1, line.trim()));
                }
            }
        }
    }
    found
}

#[test]
fn nothing_cites_an_outside_issue() {
    let files = our_text_files();
    assert!(files.len() > 100, "only {} files listed", files.len());
    let mut bad = Vec::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        for c in citations(&text) {
            bad.push(format!("{}: {c}", f.display()));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn citations_are_recognised() {
    // Built here, so this file passes its own check.
    let n = |t: &str| citations(&t.replace('N', "3")).len();
    assert_eq!(n("// see issue N item N"), 1);
    assert_eq!(n("// see Issue #N"), 1);
    assert_eq!(n("fn item_N_quantities() {}"), 1);
    assert_eq!(n("every text of the item-N tables"), 1);
    assert_eq!(n("fn round_N_item_N_x() {}"), 1);
    assert_eq!(n("the CA issues N certificates; issues/1996, tissue N"), 1);
    assert_eq!(n("a_round_N and issue numbers"), 0);
}
