//! House rules a reader would otherwise have to police by hand: no code or page cites an issue of
//! a tracker outside the repository (a reader cannot follow it), no test is named after one, and
//! no service keeps state in a `static`.

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

/// `static` items holding state that changes (a lock, an atomic, a cell set once at run time) in
/// `text`, outside its `#[cfg(test)]` module: what one service's handlers share belongs in a
/// struct they hold, so that two endpoint tables in one process (tests, tools) never share it.
fn mutable_statics(text: &str) -> Vec<String> {
    let code = text.split("#[cfg(test)]\nmod ").next().unwrap_or_default();
    code.lines()
        .enumerate()
        .filter(|(_, l)| {
            let l = l.trim_start();
            (l.starts_with("static ") || l.starts_with("pub static ") || l.contains(" static "))
                && [
                    "Mutex<",
                    "RwLock<",
                    "Atomic",
                    "OnceLock<",
                    "OnceCell<",
                    "Cell<",
                ]
                .iter()
                .any(|t| l.contains(t))
        })
        .map(|(n, l)| format!("line {}: {}", n + 1, l.trim()))
        .collect()
}

/// The services' rules and the kit's review layer keep no process-wide state. (The kit's
/// Prometheus collectors are registered once per process by design, as every exporter's are.)
#[test]
fn handlers_share_nothing_process_wide() {
    let mut bad = Vec::new();
    for f in our_text_files() {
        let rel = f
            .strip_prefix(root())
            .unwrap_or(&f)
            .to_string_lossy()
            .into_owned();
        let scoped = (rel.starts_with("services/") && rel.contains("/src/"))
            || rel.starts_with("shared/admission-kit/src/review/")
            || rel.starts_with("shared/admission-compat/src/");
        if !scoped || !rel.ends_with(".rs") || rel.ends_with("/tests.rs") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        for s in mutable_statics(&text) {
            bad.push(format!("{rel}: {s}"));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn mutable_statics_are_recognised() {
    let n = |t: &str| mutable_statics(t).len();
    assert_eq!(n("static LAST: Mutex<Option<u8>> = Mutex::new(None);"), 1);
    assert_eq!(
        n("    static NS: std::sync::OnceLock<String> = OnceLock::new();"),
        1
    );
    assert_eq!(n("pub static N: AtomicBool = AtomicBool::new(false);"), 1);
    assert_eq!(
        n("static NONE: LazyLock<Amounts> = LazyLock::new(Amounts::new);"),
        0
    );
    assert_eq!(
        n("#[cfg(test)]\nmod tests {\nstatic M: Mutex<u8> = Mutex::new(0);\n}"),
        0
    );
}

/// Every path dependency as (package dir, dependency dir, kind), from `cargo metadata`.
fn path_dependencies() -> Vec<(String, String, String)> {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root())
        .output()
        .expect("cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let workspace = meta["workspace_root"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let rel = |p: &str| {
        let dir = Path::new(p).parent().unwrap_or(Path::new(p));
        dir.strip_prefix(&workspace)
            .unwrap_or(dir)
            .to_string_lossy()
            .into_owned()
    };
    let mut found = Vec::new();
    for p in meta["packages"].as_array().into_iter().flatten() {
        let from = rel(p["manifest_path"].as_str().unwrap_or_default());
        for d in p["dependencies"].as_array().into_iter().flatten() {
            let Some(path) = d["path"].as_str() else {
                continue;
            };
            let to = Path::new(path)
                .strip_prefix(&workspace)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_else(|_| path.to_owned());
            let kind = d["kind"].as_str().unwrap_or("normal").to_owned();
            found.push((from.clone(), to, kind));
        }
    }
    found
}

/// The arrows point one way: `shared/` libraries use only `shared/`; services use `shared/` (and
/// dev-only test support); `dev/` and `tools/` may use anything. Nothing a service or the kit
/// links depends on tooling.
#[test]
fn dependencies_point_down_from_tooling_to_services_to_shared() {
    let deps = path_dependencies();
    assert!(
        deps.len() > 20,
        "only {} path dependencies found",
        deps.len()
    );
    let mut bad = Vec::new();
    for (from, to, kind) in &deps {
        let linked = kind != "dev";
        let wrong = (from.starts_with("shared/") && !to.starts_with("shared/"))
            || (from.starts_with("services/")
                && linked
                && !(to.starts_with("shared/") || to.starts_with("services/")))
            || (from.starts_with("services/") && linked && to.starts_with("services/"));
        if wrong {
            bad.push(format!("{from} -> {to} ({kind})"));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
