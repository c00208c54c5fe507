//! `cargo xtask given-diff DIR`: what differs between the given facts kept here (`fixtures/`,
//! the rule specifications in `docs/spec/`) and another copy laid out as the project brief lays
//! them out (`DIR/fixtures`, `DIR/spec/*.md`), so a newer brief is taken in file by file.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};

/// One difference, by path relative to the compared folders.
#[derive(Debug, PartialEq, Eq)]
pub enum Difference {
    /// Only in the other copy: new facts to take in.
    OnlyThere(String),
    /// Only here: a file the other copy dropped, or one of ours (`README.md`).
    OnlyHere(String),
    /// In both, with other content.
    Changed(String),
}

/// The differences of `here` against `there`, both read recursively, sorted by path.
pub fn compare(here: &Path, there: &Path) -> Result<Vec<Difference>> {
    let ours = files(here)?;
    let theirs = files(there)?;
    let mut out = Vec::new();
    for rel in ours.union(&theirs) {
        match (ours.contains(rel), theirs.contains(rel)) {
            (true, false) => out.push(Difference::OnlyHere(rel.clone())),
            (false, true) => out.push(Difference::OnlyThere(rel.clone())),
            _ => {
                let a = std::fs::read(here.join(rel)).with_context(|| rel.clone())?;
                let b = std::fs::read(there.join(rel)).with_context(|| rel.clone())?;
                if a != b {
                    out.push(Difference::Changed(rel.clone()));
                }
            }
        }
    }
    Ok(out)
}

/// Prints the differences of both folder pairs; the return says whether any were found.
pub fn run(repo: &Path, brief: &Path) -> Result<bool> {
    let pairs = [
        (repo.join("fixtures"), brief.join("fixtures"), "fixtures"),
        (repo.join("docs/spec"), brief.join("spec"), "docs/spec"),
    ];
    let mut any = false;
    for (here, there, name) in pairs {
        for d in compare(&here, &there)? {
            // Our own pages beside the given ones are expected.
            let ours = matches!(&d, Difference::OnlyHere(p)
                if name == "fixtures" && p == "README.md"
                    || name == "docs/spec" && !there.join(p).exists() && is_ours(p));
            if !ours {
                any = true;
                println!("{name}: {d:?}");
            }
        }
    }
    if !any {
        println!("no difference");
    }
    Ok(any)
}

/// The specifications this repository wrote itself (the upstream releases after the pins).
fn is_ours(rel: &str) -> bool {
    matches!(rel, "kthena-v1.md" | "trainer-v2.md")
}

fn files(root: &Path) -> Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    let mut stack: Vec<PathBuf> = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).with_context(|| dir.display().to_string())? {
            let p = e?.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(rel) = p.strip_prefix(root) {
                out.insert(rel.display().to_string());
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_difference_is_named() {
        let dir = std::env::temp_dir().join(format!("xtask-given-{}", std::process::id()));
        let (a, b) = (dir.join("a"), dir.join("b"));
        for d in [&a, &b] {
            std::fs::create_dir_all(d.join("sub")).unwrap();
            std::fs::write(d.join("same.json"), "{}").unwrap();
        }
        std::fs::write(a.join("sub/changed.json"), "1").unwrap();
        std::fs::write(b.join("sub/changed.json"), "2").unwrap();
        std::fs::write(a.join("mine.md"), "").unwrap();
        std::fs::write(b.join("sub/new.json"), "").unwrap();
        let got = compare(&a, &b).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(
            got,
            vec![
                Difference::OnlyHere("mine.md".into()),
                Difference::Changed("sub/changed.json".into()),
                Difference::OnlyThere("sub/new.json".into()),
            ]
        );
    }
}
