//! `cargo xtask check-speed`: how long `admission-check` (release build) takes over a directory of
//! many manifests on this machine's two cores (`--cpus 1` for one: files are read on a thread of
//! their own), and whether the cost per object stays flat as the
//! directory grows (it was quadratic in ElasticQuotas: each quota rebuilt the tree of every
//! earlier one).
//!
//! The corpus: 40 % ElasticQuotas (a tree of parents with 39 children each, in the order a
//! directory apply creates them: each parent before its children), the rest the upstream example
//! manifests and the services' samples copied round-robin, each copy a new object in a child
//! quota's namespace (templated examples, which are not YAML until rendered, left out): the mixed
//! shape of a platform repository, whose workloads are judged against the quota tree. Two sizes are run, the requested one and a tenth of it; the run
//! fails when the larger costs more than 1.5× per object what the smaller does, or when its
//! median is above `--budget-secs`.

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

/// Children per parent quota.
const CHILDREN: usize = 39;

/// The `k`-th of `quotas` ElasticQuotas: parents first (one per 40 quotas), then children spread
/// over them, each child's minimum well inside its parent's.
fn quota(k: usize, quotas: usize) -> String {
    let parents = quotas.div_ceil(CHILDREN + 1).max(1);
    if k < parents {
        format!(
            "apiVersion: scheduling.sigs.k8s.io/v1alpha1\nkind: ElasticQuota\nmetadata:\n  name: parent-{k}\n  namespace: quota-parents\n  labels:\n    quota.scheduling.koordinator.sh/is-parent: \"true\"\nspec:\n  min: {{cpu: \"100\", memory: 400Gi}}\n  max: {{cpu: \"1000\", memory: 4000Gi}}\n"
        )
    } else {
        let child = k - parents;
        format!(
            "apiVersion: scheduling.sigs.k8s.io/v1alpha1\nkind: ElasticQuota\nmetadata:\n  name: team-{child}\n  namespace: team-{child}\n  labels:\n    quota.scheduling.koordinator.sh/parent: parent-{}\nspec:\n  min: {{cpu: \"1\", memory: 4Gi}}\n  max: {{cpu: \"10\", memory: 40Gi}}\n",
            child % parents
        )
    }
}

/// The `copy`-th copy of an example: every object renamed (`-c{copy}`) and moved to the
/// namespace of quota `team-{team}`, so that copies are new objects (not updates of the first),
/// and workloads are judged against a quota of the tree, as a platform's repository of many
/// teams' manifests is.
fn distinct(text: &str, copy: usize, team: usize) -> String {
    use serde::Deserialize as _;
    let mut docs = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(text) {
        let Ok(mut v) = serde_yaml_ng::Value::deserialize(doc) else {
            return text.to_owned();
        };
        if let Some(meta) = v.get_mut("metadata").and_then(|m| m.as_mapping_mut()) {
            if let Some(serde_yaml_ng::Value::String(name)) = meta.get_mut("name") {
                name.push_str(&format!("-c{copy}"));
            }
            meta.insert("namespace".into(), format!("team-{team}").into());
        }
        match serde_yaml_ng::to_string(&v) {
            Ok(t) => docs.push(t),
            Err(_) => return text.to_owned(),
        }
    }
    docs.join("---\n")
}

/// Writes `n` manifests into `dir`: every fifth file from 0 and from 2 a quota (40 %), in order;
/// the others copies of the examples ([`distinct`]), spread over the child quotas' namespaces.
fn write_corpus(dir: &Path, n: usize, texts: &[String]) -> Result<()> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    let is_quota = |i: usize| matches!(i % 5, 0 | 2);
    let quotas = (0..n).filter(|i| is_quota(*i)).count();
    let (mut q, mut other) = (0, 0);
    for i in 0..n {
        let text = if is_quota(i) {
            q += 1;
            quota(q - 1, quotas)
        } else {
            other += 1;
            let children = quotas - quotas.div_ceil(CHILDREN + 1).max(1);
            distinct(
                &texts[(other - 1) % texts.len()],
                (other - 1) / texts.len(),
                (other - 1) % children.max(1),
            )
        };
        std::fs::write(dir.join(format!("{i:06}.yaml")), text)?;
    }
    Ok(())
}

/// The median wall time of `runs` checks of `dir` on `cpus`, and the objects checked.
fn time_runs(binary: &Path, dir: &Path, runs: usize, cpus: &str) -> Result<(f64, u64)> {
    let mut times = Vec::new();
    let mut objects = 0u64;
    for run in 1..=runs {
        let started = Instant::now();
        let out = Command::new("taskset")
            .args(["-c", cpus])
            .arg(binary)
            .args(["--profile", "koordinator", "-o", "json"])
            .arg(dir)
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
            "  run {run}: {secs:.2} s, {objects} objects ({})",
            report["summary"]
        );
        times.push(secs);
    }
    times.sort_by(f64::total_cmp);
    Ok((times[times.len() / 2], objects))
}

/// Builds admission-check (release), writes the corpus at `manifests` and a tenth of it, times
/// `runs` checks of each on `cpus` (a `taskset -c` list); prints both medians and their cost per object, and fails when
/// growth is worse than linear by 1.5× or the large run's median exceeds `budget_secs`.
pub fn run(
    root: &Path,
    mut cargo: Command,
    manifests: usize,
    runs: usize,
    cpus: &str,
    budget_secs: f64,
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
    let small = (manifests / 10).max(1);
    let mut rows = Vec::new();
    for n in [small, manifests] {
        let dir = root.join(format!("target/check-speed/{n}"));
        write_corpus(&dir, n, &texts)?;
        eprintln!(
            "==> {n} manifests (40 % ElasticQuotas, the rest {} distinct examples); {runs} runs of `taskset -c {cpus} admission-check --profile koordinator -o json {}`",
            texts.len(),
            dir.display()
        );
        let (median, objects) = time_runs(&binary, &dir, runs, cpus)?;
        let per = median * 1e6 / objects.max(1) as f64;
        println!(
            "admission-check: {n} manifests, {objects} objects, cores {cpus}: median {median:.2} s over {runs} runs ({per:.0} µs per object)"
        );
        rows.push((median, per));
    }
    let growth = rows[1].1 / rows[0].1;
    println!(
        "growth from {small} to {manifests} manifests: {:.1}× the time, {growth:.2}× the cost per object (linear is 1.0×; at most 1.5× passes)",
        rows[1].0 / rows[0].0
    );
    if growth > 1.5 {
        bail!("the cost per object grew {growth:.2}× from {small} to {manifests} manifests");
    }
    if rows[1].0 > budget_secs {
        bail!(
            "{manifests} manifests took {:.2} s, over the {budget_secs} s budget",
            rows[1].0
        );
    }
    Ok(())
}
