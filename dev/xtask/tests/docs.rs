//! The README and the pages of `docs/` hold together: every relative link reaches a file, and
//! a heading of it when it names one (GitHub's anchors), and every `cargo xtask <command>` they
//! name is a command of this xtask; the README stays short and long pages have headings.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// README.md, CONTRIBUTING.md, CHANGELOG.md, the fixtures' README and every page of docs/.
fn pages() -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = [
        "README.md",
        "CONTRIBUTING.md",
        "CHANGELOG.md",
        "fixtures/README.md",
    ]
    .iter()
    .map(|p| root().join(p))
    .collect();
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    assert!(!docs.is_empty(), "docs/ has no page");
    pages.extend(docs);
    pages
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim_start_matches('#')
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The headings' anchors of a Markdown text (fenced code left out).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.insert(anchor(line));
        }
    }
    out
}

/// The targets of the inline links `[text](target)` of a Markdown text.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        if let Some(end) = rest.find(')') {
            out.push(rest[..end].to_owned());
        }
    }
    out
}

#[test]
fn every_relative_link_resolves() {
    let mut checked = 0;
    let mut broken = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let dir = page.parent().unwrap();
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, frag) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let path = if file.is_empty() {
                page.clone()
            } else {
                dir.join(file)
            };
            checked += 1;
            if !path.exists() {
                broken.push(format!("{}: {target} (no such file)", page.display()));
                continue;
            }
            if let Some(a) = frag {
                let heads = anchors(&std::fs::read_to_string(&path).unwrap_or_default());
                if !heads.contains(a) {
                    broken.push(format!("{}: {target} (no such heading)", page.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(checked > 20, "only {checked} links found");
}

#[test]
fn every_xtask_command_named_exists() {
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    let commands: BTreeSet<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(commands.contains("test"), "{help}");
    let mut unknown = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for (i, _) in text.match_indices("cargo xtask ") {
            let name: String = text[i + 12..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '-')
                .collect();
            if !name.is_empty() && !commands.contains(name.as_str()) {
                unknown.push(format!("{}: cargo xtask {name}", page.display()));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "no such xtask command:\n{}",
        unknown.join("\n")
    );
}

#[test]
fn anchors_follow_github() {
    assert_eq!(
        anchor("## The kit (`shared/admission-kit`)"),
        "the-kit-sharedadmission-kit"
    );
    assert_eq!(
        anchor("### quota-state's security model"),
        "quota-states-security-model"
    );
}

/// The README is the front door: set-up, install, layout and where to read on. Everything else
/// has a page under docs/.
#[test]
fn the_readme_stays_within_300_lines() {
    let text = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = text.lines().count();
    assert!(
        lines <= 300,
        "README.md has {lines} lines: move detail to docs/"
    );
}

/// A reader scans a page by its headings: no page runs 80 lines without one (code blocks and
/// tables count as lines too).
#[test]
fn long_pages_have_headings_to_scan() {
    let mut bare = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let mut since = 0;
        let mut in_code = false;
        let mut worst = 0;
        for line in text.lines() {
            if line.starts_with("```") {
                in_code = !in_code;
            }
            if !in_code && line.starts_with('#') {
                since = 0;
            } else {
                since += 1;
                worst = worst.max(since);
            }
        }
        if worst > 80 {
            bare.push(format!(
                "{}: {worst} lines under one heading",
                page.display()
            ));
        }
    }
    assert!(bare.is_empty(), "{}", bare.join("\n"));
}
