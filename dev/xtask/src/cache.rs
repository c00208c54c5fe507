//! The test command's record of what passed, so that running it again on an unchanged tree
//! replays those passes instead of repeating them, as `go test` replays a cached result.
//!
//! A pass is replayed only when everything it could depend on is unchanged, so the key is
//! deliberately coarse: the content of every file of the repository that git does not ignore
//! (a test may read any of them: the layer check reads the kit's sources, the link check the
//! docs), every file under `$ADMISSION_FIXTURES_DIR` when the fixtures are read from there, the toolchain (`rustc -vV`), `RUSTFLAGS`,
//! the tool cache's entries (each named by its version), and what the step runs (a test
//! binary's size and modification time, the binaries a step starts). Any change reruns
//! everything; a failure is never recorded; `cargo xtask test --rerun` ignores the record. A
//! clean clone has none, so CI always runs everything.
//!
//! Hand-written over a build-system crate: the key is a few hashes over files the test command
//! already knows, and it must see exactly the inputs described here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result, bail};
use serde::{Deserialize, Serialize};

/// One recorded pass.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
struct Entry {
    /// The key it passed under.
    key: String,
    /// Tests it counted as passed.
    passed: u64,
}

/// What passed, by step (`registry-webhook/lib`, `soak`, …), read at the start of a run and
/// written at its end.
#[derive(Debug)]
pub struct Record {
    path: PathBuf,
    /// The key of the tree and toolchain this run sees.
    tree: String,
    /// Passes recorded by earlier runs (empty with `--rerun`).
    before: BTreeMap<String, Entry>,
    /// Passes of this run and replayed ones: what the next run may replay.
    now: BTreeMap<String, Entry>,
}

impl Record {
    /// Reads the record at `path` for the repository at `root`; with `rerun`, nothing recorded
    /// is replayed.
    pub fn open(root: &Path, path: PathBuf, rerun: bool) -> Result<Self> {
        let elsewhere = std::env::var_os("ADMISSION_FIXTURES_DIR").map(PathBuf::from);
        let tree = tree_key(root, elsewhere.as_deref())?;
        let before = if rerun {
            BTreeMap::new()
        } else {
            std::fs::read(&path)
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .unwrap_or_default()
        };
        Ok(Self {
            path,
            tree,
            before,
            now: BTreeMap::new(),
        })
    }

    fn key(&self, inputs: &str) -> String {
        images::sha256_hex(format!("{}\n{inputs}", self.tree).as_bytes())
    }

    /// Whether an earlier run recorded `step` passing under the same key (what
    /// [`Record::replay`] would replay), without replaying it.
    pub fn holds(&self, step: &str, inputs: &str) -> bool {
        let key = self.key(inputs);
        self.before.get(step).is_some_and(|e| e.key == key)
    }

    /// The tests `step` passed under the same key in an earlier run: `Some` means it may be
    /// replayed (and is kept for the next run).
    pub fn replay(&mut self, step: &str, inputs: &str) -> Option<u64> {
        let key = self.key(inputs);
        let e = self.before.get(step).filter(|e| e.key == key)?.clone();
        let passed = e.passed;
        self.now.insert(step.to_owned(), e);
        Some(passed)
    }

    /// Records that `step` passed `passed` tests.
    pub fn passed(&mut self, step: &str, inputs: &str, passed: u64) {
        let key = self.key(inputs);
        self.now.insert(step.to_owned(), Entry { key, passed });
    }

    /// Writes the record for the next run (a failure to write only loses the replay).
    pub fn save(&self) {
        if let Ok(text) = serde_json::to_vec_pretty(&self.now)
            && let Err(e) = std::fs::write(&self.path, text)
        {
            eprintln!("cannot record the passes in {}: {e}", self.path.display());
        }
    }
}

/// What a step runs, as part of its key: each file's path, size and modification time (a
/// rebuilt binary differs in the last); `missing` for an absent one.
pub fn files_stamp(files: &[PathBuf]) -> String {
    let mut out = String::new();
    for f in files {
        let stamp = std::fs::metadata(f)
            .and_then(|m| Ok((m.len(), m.modified()?)))
            .map(|(len, t)| {
                let ns = t
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or_default();
                format!("{len} {ns}")
            })
            .unwrap_or_else(|_| "missing".to_owned());
        out.push_str(&format!("{} {stamp}\n", f.display()));
    }
    out
}

/// The key of the tree and toolchain: see the module documentation. `elsewhere`: fixtures read
/// from outside the tree (`$ADMISSION_FIXTURES_DIR`), which count file by file.
fn tree_key(root: &Path, elsewhere: Option<&Path>) -> Result<String> {
    let mut lines = Vec::new();
    let listed = Command::new("git")
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .current_dir(root)
        .output()
        .context("git ls-files")?;
    if !listed.status.success() {
        bail!("git ls-files failed ({})", listed.status);
    }
    let mut files: Vec<String> = listed
        .stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    files.sort();
    files.dedup();
    for f in files {
        lines.push(format!("{f} {}", content(&root.join(&f))));
    }
    if let Some(dir) = elsewhere {
        let mut stack = vec![dir.to_path_buf()];
        let mut outside = Vec::new();
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d)
                .with_context(|| d.display().to_string())?
                .flatten()
            {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    outside.push(p);
                }
            }
        }
        outside.sort();
        for p in outside {
            lines.push(format!("{} {}", p.display(), content(&p)));
        }
    }
    let rustc = Command::new("rustc")
        .arg("-vV")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    lines.push(format!("rustc {rustc}"));
    lines.push(format!(
        "RUSTFLAGS {}",
        std::env::var("RUSTFLAGS").unwrap_or_default()
    ));
    let mut tools: Vec<String> = std::fs::read_dir(testenv::tools::cache_dir())
        .map(|rd| {
            rd.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    tools.sort();
    lines.push(format!("tools {}", tools.join(" ")));
    Ok(images::sha256_hex(lines.join("\n").as_bytes()))
}

/// A file's content hash, or `unreadable` (a deleted tracked file, a dangling link).
fn content(path: &Path) -> String {
    std::fs::read(path)
        .map(|b| images::sha256_hex(&b))
        .unwrap_or_else(|_| "unreadable".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(tree: &str, before: BTreeMap<String, Entry>) -> Record {
        Record {
            path: PathBuf::from("/nonexistent/record.json"),
            tree: tree.to_owned(),
            before,
            now: BTreeMap::new(),
        }
    }

    #[test]
    fn a_pass_is_replayed_only_under_the_same_key() {
        let mut first = record("tree-1", BTreeMap::new());
        assert_eq!(first.replay("a/lib", "bin 1"), None);
        first.passed("a/lib", "bin 1", 7);
        let recorded = first.now.clone();

        let mut same = record("tree-1", recorded.clone());
        assert!(same.holds("a/lib", "bin 1") && !same.holds("a/lib", "bin 2"));
        assert_eq!(same.replay("a/lib", "bin 1"), Some(7));
        assert_eq!(
            same.now, recorded,
            "a replayed pass is kept for the next run"
        );

        let mut rebuilt = record("tree-1", recorded.clone());
        assert_eq!(rebuilt.replay("a/lib", "bin 2"), None, "the binary changed");
        assert!(rebuilt.now.is_empty());

        let mut edited = record("tree-2", recorded);
        assert_eq!(edited.replay("a/lib", "bin 1"), None, "a file changed");
    }

    #[test]
    fn the_tree_key_follows_every_unignored_file() {
        let dir = std::env::temp_dir().join(format!("xtask-cache-{}", std::process::id()));
        let repo = dir.join("repo");
        std::fs::create_dir_all(repo.join("target")).unwrap();
        let outside = dir.join("fixtures");
        std::fs::create_dir_all(&outside).unwrap();
        let git = |args: &[&str]| {
            assert!(
                Command::new("git")
                    .args(args)
                    .current_dir(&repo)
                    .output()
                    .unwrap()
                    .status
                    .success()
            )
        };
        git(&["init", "-q"]);
        std::fs::write(repo.join(".gitignore"), "target/\n").unwrap();
        std::fs::write(repo.join("a.md"), "one").unwrap();
        std::fs::write(outside.join("x.json"), "{}").unwrap();
        let key = |elsewhere: Option<&Path>| tree_key(&repo, elsewhere).unwrap();
        let k1 = key(None);
        std::fs::write(repo.join("target/out"), "ignored").unwrap();
        assert_eq!(key(None), k1, "ignored files do not count");
        std::fs::write(repo.join("a.md"), "two").unwrap();
        let k2 = key(None);
        assert_ne!(k2, k1, "an edited (untracked) file counts");
        let k3 = key(Some(&outside));
        assert_ne!(k3, k2, "fixtures read from elsewhere count");
        std::fs::write(outside.join("x.json"), "[]").unwrap();
        assert_ne!(key(Some(&outside)), k3, "and so does each of their files");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
