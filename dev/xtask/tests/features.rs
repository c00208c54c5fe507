//! `cargo xtask …` builds the xtask alone (`cargo run -p xtask`), and cargo unifies dependency
//! features over the packages it builds: unless the xtask turns on every feature the rest of the
//! workspace does, the test command's `cargo test --workspace` compiles the shared dependencies
//! (tokio and all above it) a second time. The xtask's manifest lists those features; this test
//! fails naming any dependency whose features now differ.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// Each package of `cargo tree` (normal edges, `dev` too when asked) → its feature sets.
fn features(select: &[&str], edges: &str) -> BTreeMap<String, BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .args(["tree", "--offline", "--locked", "--prefix", "none"])
        .args(["-e", edges, "-f", "{p}|{f}"])
        .args(select)
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut map: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some((package, features)) = line.trim_end_matches(" (*)").split_once('|') else {
            continue;
        };
        // `name vX.Y.Z (path)` for workspace members: the name and version identify it.
        let id: String = package.split(" (").next().unwrap_or(package).to_owned();
        map.entry(id).or_default().insert(features.to_owned());
    }
    map
}

#[test]
fn the_xtask_builds_its_dependencies_with_the_workspace_features() {
    // Normal edges: what is linked into the binaries (build scripts' own dependencies are few
    // and small).
    let xtask = features(&["-p", "xtask"], "normal");
    let workspace = features(&["--workspace"], "normal,dev");
    let differing: Vec<String> = xtask
        .iter()
        .filter_map(|(package, sets)| {
            let all = workspace.get(package)?;
            (sets != all).then(|| format!("{package}: xtask {sets:?}, workspace {all:?}"))
        })
        .collect();
    assert!(
        xtask.len() > 100,
        "cargo tree listed {} packages",
        xtask.len()
    );
    assert!(
        differing.is_empty(),
        "add these features to dev/xtask/Cargo.toml:\n{}",
        differing.join("\n")
    );
}

/// admission-check runs the rules only: the kit's `serve` feature (certificates it issues, the
/// Lease, OTLP export) stays out of its binary, and out of the service crates as it links them.
#[test]
fn admission_check_links_no_serving_part() {
    let linked = features(&["-p", "admission-check"], "normal");
    let serving: Vec<&String> = linked
        .keys()
        .filter(|p| {
            ["rcgen ", "kube-lease-manager ", "opentelemetry-otlp "]
                .iter()
                .any(|name| p.starts_with(name))
        })
        .collect();
    assert!(linked.len() > 100, "cargo tree listed {}", linked.len());
    assert!(
        serving.is_empty(),
        "admission-check links {serving:?}: a crate it depends on turns on admission-kit's `serve`"
    );
}
