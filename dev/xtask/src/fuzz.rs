//! `cargo xtask fuzz`: the libFuzzer targets of `fuzz/`, built with cargo-fuzz on the nightly
//! toolchain (no sanitizer: `-s none`), each run from a seed corpus made of the given cases.
//! `cargo xtask test` runs every target for a bounded, seeded number of executions.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context as _, Result, bail};
use serde_json::Value;

/// cargo-fuzz release installed when none is on PATH.
const CARGO_FUZZ_VERSION: &str = "0.13.2";

/// Every target, and the fixture domain whose cases seed it.
pub const TARGETS: [(&str, Option<&str>); 9] = [
    ("review_registry", Some("registry")),
    ("review_node_config", Some("node-config")),
    ("review_training", Some("training")),
    ("review_scheduling", Some("scheduling")),
    ("review_lifecycle", None),
    ("slo_config", None),
    ("quantity_duration", None),
    ("go_regexp", None),
    ("ledger_inputs", None),
];

/// The outcome of one target's run.
pub struct Ran {
    /// The target.
    pub target: &'static str,
    /// Whether it ended without a crash.
    pub ok: bool,
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// cargo-fuzz, installed into the tool cache when missing; nightly, installed with rustup
/// when missing.
fn cargo_fuzz() -> Result<PathBuf> {
    let nightly = Command::new("rustup")
        .args(["run", "nightly", "rustc", "--version"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !nightly {
        eprintln!(
            "installing the nightly toolchain with rustup (cargo-fuzz needs it), first time only"
        );
        let ok = Command::new("rustup")
            .args(["toolchain", "install", "nightly", "--profile", "minimal"])
            .status()
            .context("rustup")?
            .success();
        if !ok {
            bail!("rustup toolchain install nightly failed");
        }
    }
    if let Some(p) = on_path("cargo-fuzz") {
        return Ok(p);
    }
    let root = testenv::tools::cache_dir().join(format!("cargo-fuzz-{CARGO_FUZZ_VERSION}"));
    let bin = root.join("bin/cargo-fuzz");
    if !bin.is_file() {
        eprintln!("installing cargo-fuzz {CARGO_FUZZ_VERSION} from crates.io, first time only");
        let ok = Command::new("cargo")
            .args([
                "install",
                "--locked",
                "--version",
                CARGO_FUZZ_VERSION,
                "--root",
            ])
            .arg(&root)
            .arg("cargo-fuzz")
            .status()
            .context("cargo install cargo-fuzz")?
            .success();
        if !ok {
            bail!("cargo install cargo-fuzz failed");
        }
    }
    Ok(bin)
}

fn write_seed(dir: &Path, n: &mut usize, bytes: &[u8]) -> Result<()> {
    *n += 1;
    std::fs::write(dir.join(format!("seed-{n:04}")), bytes)
        .with_context(|| format!("writing a seed in {}", dir.display()))
}

/// The seed corpus of `target`, from the given cases: each review case as a body for its
/// endpoint, each SLO ConfigMap key's value, quantities and durations from the spec's edge
/// cases. Written under `fuzz/corpus/<target>` (kept between runs, ignored by git).
fn seeds(root: &Path, target: &str, domain: Option<&str>) -> Result<PathBuf> {
    let dir = root.join("fuzz/corpus").join(target);
    std::fs::create_dir_all(&dir)?;
    let fixtures = crate::fixtures();
    let mut n = 0;
    let cases_under = |root: &Path, domain: &str| -> Vec<admission_testing::fixtures::Case> {
        admission_testing::fixtures::case_files(root, domain)
            .iter()
            .filter_map(|f| admission_testing::fixtures::load(f).ok())
            .collect()
    };
    let cases = |domain: &str| cases_under(&fixtures, domain);
    if let Some(domain) = domain {
        let app = match domain {
            "registry" => registry_webhook::app(),
            "node-config" => node_config_webhook::app(),
            "training" => training_webhook::app(),
            _ => scheduling_webhook::app(),
        };
        let mut all = cases(domain);
        // Kthena v1.0's and Trainer v2.3's cases are their services' own.
        if domain == "registry" {
            let own = root.join("services/registry-webhook/fixtures");
            all.extend(cases_under(&own, "kthena-v1"));
        }
        if domain == "training" {
            let own = root.join("services/training-webhook/fixtures");
            all.extend(cases_under(&own, "trainer-v2"));
        }
        for case in all {
            let Some(i) = app.endpoints.iter().position(|e| e.path == case.path) else {
                continue;
            };
            let mut bytes = vec![u8::try_from(i).unwrap_or(0)];
            bytes.extend(serde_json::to_vec(&case.review)?);
            write_seed(&dir, &mut n, &bytes)?;
        }
    }
    if target == "slo_config" {
        let keys = &node_config_webhook::slo::KEYS;
        for case in cases("node-config") {
            let data = &case.review["request"]["object"]["data"];
            let Some(map) = data.as_object() else {
                continue;
            };
            let system = map
                .get("system-config")
                .and_then(Value::as_str)
                .unwrap_or("{}");
            for (i, key) in keys.iter().enumerate() {
                if let Some(v) = map.get(key.name).and_then(Value::as_str) {
                    let mut bytes = vec![u8::try_from(i).unwrap_or(0)];
                    bytes.extend(v.as_bytes());
                    bytes.push(0);
                    bytes.extend(system.as_bytes());
                    write_seed(&dir, &mut n, &bytes)?;
                }
            }
        }
    }
    if target == "review_lifecycle" {
        // A deletion of the Pod the target's cluster holds, and an eviction of it, by every
        // first byte (endpoint and drain answer).
        let pod = serde_json::json!({
            "metadata": {"name": "llm-0", "namespace": "serving", "uid": "u-1",
                         "labels": {"drain.admission-webhooks.io/enabled": "true"}},
            "status": {"phase": "Running", "podIP": "10.0.0.7"}});
        let review = |resource: &str, sub: &str, op: &str, kind: &str, object: Value| {
            serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "request": {"uid": "r-1", "kind": {"group": "", "version": "v1", "kind": kind},
                    "resource": {"group": "", "version": "v1", "resource": resource},
                    "subResource": sub, "name": "llm-0", "namespace": "serving",
                    "operation": op, "userInfo": {"username": "alice"},
                    "object": object.clone(), "oldObject": object}})
        };
        let deletion = review("pods", "", "DELETE", "Pod", pod);
        let eviction = review(
            "pods",
            "eviction",
            "CREATE",
            "Eviction",
            serde_json::json!({"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": "llm-0", "namespace": "serving"}}),
        );
        for pick in 0u8..6 {
            let body = if pick / 3 % 2 == 0 {
                &deletion
            } else {
                &eviction
            };
            let mut bytes = vec![pick];
            bytes.extend(serde_json::to_vec(body)?);
            write_seed(&dir, &mut n, &bytes)?;
        }
    }
    if target == "go_regexp" {
        // One of each of the grammar's parts: alternations Go factors, classes under (?i),
        // Unicode names and negations, counts, groups, flags and quoting.
        for s in [
            "a|ab|abc|abd",
            "(?i)[\\pL\\d_-]+",
            "\\p{^Greek}\\PL[[:^alpha:]]",
            "(?:ab|(?:ab|c))",
            "[ab]x|[ab]y|.z|(?s:.)w",
            "x{2,5}?(a{3}){10}",
            "\\Qa*\\E(?P<n>b)(?<m>c)",
            "[^\\x00-\\x{10FFFF}]|\\x{1F600}",
            "(?U)a*?(?-i:k)\\z",
        ] {
            write_seed(&dir, &mut n, s.as_bytes())?;
        }
    }
    if target == "quantity_duration" {
        for s in [
            "500m",
            "1Gi",
            "1e3",
            "1E3",
            "+1",
            "0x10",
            "1.5",
            "100n",
            "500u",
            "-100m",
            " 2 ",
            "9223372036854775807",
            "8Ei",
            "1h30m",
            "0.5m",
            "30s",
            "-1.5h",
            "1us",
            "1µs",
            "",
        ] {
            write_seed(&dir, &mut n, s.as_bytes())?;
        }
    }
    Ok(dir)
}

/// Codegen units of the fuzz build: cargo-fuzz's default of 1 made it the longest step of the
/// test command; 16 builds faster (figures in docs/fuzzing.md) for somewhat slower executions,
/// which the bounded runs of the test command barely feel.
const CODEGEN_UNITS: &str = "16";

/// `cargo fuzz ARGS` in `root`, on the nightly toolchain (under `nice -n 19` when `nice`).
fn cargo_fuzz_command(fuzz: &Path, root: &Path, args: &[&str], nice: bool) -> Command {
    // As `cargo()` does: without `cargo run`'s package variables, or ring rebuilds.
    let mut c = if nice {
        let mut n = crate::plain("nice");
        n.args(["-n", "19"]).arg(fuzz);
        n
    } else {
        crate::plain(fuzz)
    };
    c.current_dir(root)
        .env("RUSTUP_TOOLCHAIN", "nightly")
        .arg("fuzz")
        .args(args);
    c
}

/// How [`build`] runs beside other work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// In the foreground, printing cargo's progress.
    Normal,
    /// At the lowest CPU priority (`nice -n 19`), its output kept and printed only on failure:
    /// the test command builds the targets while the end-to-end binaries mostly wait on their
    /// control planes, so the build takes the idle CPU and the tests keep theirs.
    Background,
}

/// Builds the fuzz targets.
pub fn build(root: &Path, priority: Priority) -> Result<()> {
    let fuzz = cargo_fuzz()?;
    let started = Instant::now();
    eprintln!(
        "==> cargo +nightly fuzz build -s none --codegen-units {CODEGEN_UNITS} --fuzz-dir fuzz{}",
        if priority == Priority::Background {
            " (at low priority, beside the tests)"
        } else {
            ""
        }
    );
    let args = [
        "build",
        "-s",
        "none",
        "--codegen-units",
        CODEGEN_UNITS,
        "--fuzz-dir",
        "fuzz",
    ];
    let mut cmd = cargo_fuzz_command(&fuzz, root, &args, priority == Priority::Background);
    let built = match priority {
        Priority::Normal => cmd.status().context("cargo fuzz build")?.success(),
        Priority::Background => {
            let out = cmd.output().context("nice cargo fuzz build")?;
            if !out.status.success() {
                eprintln!("{}", String::from_utf8_lossy(&out.stderr));
            }
            out.status.success()
        }
    };
    if !built {
        bail!("building the fuzz targets failed");
    }
    eprintln!("fuzz targets built in {:.0?}", started.elapsed());
    Ok(())
}

/// Builds the targets and runs each for `runs` executions from its seeds (`-seed=1`), or for
/// `seconds` when given. Returns each target's outcome; a crash leaves its input in
/// `fuzz/artifacts/<target>/`.
pub fn run(root: &Path, targets: &[String], runs: u64, seconds: Option<u64>) -> Result<Vec<Ran>> {
    build(root, Priority::Normal)?;
    run_built(root, targets, runs, seconds)
}

/// [`run`] on targets [`build`] built.
pub fn run_built(
    root: &Path,
    targets: &[String],
    runs: u64,
    seconds: Option<u64>,
) -> Result<Vec<Ran>> {
    let fuzz = cargo_fuzz()?;
    let cargo_fuzz = |args: &[&str]| cargo_fuzz_command(&fuzz, root, args, false);
    let mut out = Vec::new();
    for (target, domain) in TARGETS {
        if !targets.is_empty() && !targets.iter().any(|t| t == target) {
            continue;
        }
        let corpus = seeds(root, target, domain)?;
        let limit = match seconds {
            Some(s) => format!("-max_total_time={s}"),
            None => format!("-runs={runs}"),
        };
        let t = Instant::now();
        let corpus_arg = corpus.display().to_string();
        let output = cargo_fuzz(&[
            "run",
            "-s",
            "none",
            "--codegen-units",
            CODEGEN_UNITS,
            "--fuzz-dir",
            "fuzz",
            target,
            &corpus_arg,
            "--",
            "-seed=1",
            &limit,
            "-max_len=65536",
            "-timeout=10",
            "-rss_limit_mb=2048",
            "-print_final_stats=1",
        ])
        .output()
        .with_context(|| format!("cargo fuzz run {target}"))?;
        let log = String::from_utf8_lossy(&output.stderr);
        let execs = log
            .lines()
            .find_map(|l| l.strip_prefix("stat::number_of_executed_units:"))
            .map(str::trim)
            .unwrap_or("?");
        let ok = output.status.success();
        if ok {
            eprintln!(
                "fuzz {target}: {execs} executions in {:.1?}, no crash",
                t.elapsed()
            );
        } else {
            eprintln!("{log}");
            eprintln!(
                "fuzz {target}: FAILED after {execs} executions (input saved under fuzz/artifacts/{target}/)"
            );
        }
        out.push(Ran { target, ok });
    }
    Ok(out)
}
