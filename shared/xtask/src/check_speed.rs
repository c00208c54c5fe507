//! `cargo xtask check-speed`: how long `admission-check` takes over a directory of many
//! manifests, pinned to one core. The corpus is the upstream example manifests and the
//! services' samples, copied round-robin to the requested count (templated examples, which are
//! not YAML until rendered, are left out).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context as _, Result, bail};

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            yaml_files(&p, out)?;
        } else if p.extension().is_some_and(|e| e == "yaml") {
            out.push(p);
        }
    }
    Ok(())
}

/// Builds admission-check (release), writes `manifests` files and times `runs` checks of them
/// on `cpu`; prints the median.
pub fn run(
    root: &Path,
    mut cargo: Command,
    manifests: usize,
    runs: usize,
    cpu: usize,
) -> Result<()> {
    eprintln!("==> cargo build --release -p admission-check");
    let ok = cargo
        .args(["build", "--release", "-p", "admission-check"])
        .status()
        .context("cargo build")?
        .success();
    if !ok {
        bail!("building admission-check failed");
    }
    let binary = root.join("target/release/admission-check");
    let mut sources = Vec::new();
    yaml_files(&crate::fixtures().join("examples/raw"), &mut sources)?;
    for svc in [
        "registry-webhook",
        "scheduling-webhook",
        "node-config-webhook",
        "training-webhook",
    ] {
        yaml_files(
            &root.join("services").join(svc).join("examples/samples"),
            &mut sources,
        )?;
    }
    let texts: Vec<String> = sources
        .iter()
        .map(std::fs::read_to_string)
        .collect::<std::io::Result<Vec<_>>>()?
        .into_iter()
        .filter(|t| !t.contains("{{"))
        .collect();
    if texts.is_empty() {
        bail!("no example manifests found");
    }
    let dir = root.join("target/check-speed");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    for i in 0..manifests {
        std::fs::write(dir.join(format!("{i:05}.yaml")), &texts[i % texts.len()])?;
    }
    eprintln!(
        "==> {manifests} manifests ({} distinct) in {}; {runs} runs of `taskset -c {cpu} admission-check -o json {}`",
        texts.len(),
        dir.display(),
        dir.display()
    );
    let mut times = Vec::new();
    let mut objects = 0u64;
    for run in 1..=runs {
        let started = Instant::now();
        let out = Command::new("taskset")
            .args(["-c", &cpu.to_string()])
            .arg(&binary)
            .args(["-o", "json"])
            .arg(&dir)
            .stderr(Stdio::inherit())
            .output()
            .context("running admission-check under taskset")?;
        let secs = started.elapsed().as_secs_f64();
        if !matches!(out.status.code(), Some(0 | 1 | 4)) {
            bail!("admission-check exited with {:?}", out.status.code());
        }
        let report: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        objects = report["summary"]["objects"].as_u64().unwrap_or_default();
        eprintln!(
            "run {run}: {secs:.2} s, {objects} objects ({})",
            report["summary"]
        );
        times.push(secs);
    }
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    println!(
        "admission-check: {manifests} manifests, {objects} objects, one core: median {median:.2} s over {runs} runs ({:.0} µs per object; runs {})",
        median * 1e6 / objects.max(1) as f64,
        times
            .iter()
            .map(|t| format!("{t:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(())
}
