//! Runs the workspace's test binaries several at a time. `cargo test` runs them one after the
//! other, and the end-to-end binaries spend most of their time waiting (certificate rotations,
//! leases, watches) on a control plane of their own; run side by side they take the time of the
//! longest, not the sum. Each binary runs as `cargo test` runs it (from its package's directory,
//! with its package variables); its output is printed whole when it ends, so outputs never
//! interleave. The previous run's durations (in `target/xtask-test-times.json`) order the queue
//! longest first.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};

/// One test executable cargo built.
#[derive(Debug, Clone)]
pub struct TestBinary {
    /// Its package's name.
    pub package: String,
    /// Where its package lives (the working directory `cargo test` gives it).
    pub dir: PathBuf,
    /// `package/target`, e.g. `e2e/managed_certs` or `quota-state/lib`.
    pub name: String,
    /// The executable.
    pub executable: PathBuf,
}

/// Builds every test target with `build` (a `cargo test --workspace --no-run` command) and lists
/// the executables, from cargo's JSON messages.
pub fn build(mut build: Command) -> Result<Vec<TestBinary>> {
    build
        .args(["--message-format", "json-render-diagnostics"])
        .stdout(Stdio::piped())
        // `output()` would capture stderr too and a failed build would end without its reason
        // (the compiler's errors, a full disk).
        .stderr(Stdio::inherit());
    let out = build.output().context("cargo test --no-run")?;
    if !out.status.success() {
        bail!("building the tests failed ({})", out.status);
    }
    let mut bins = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(m) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let Some(exe) = m["executable"].as_str() else {
            continue;
        };
        if m["reason"] != "compiler-artifact" || m["profile"]["test"] != true {
            continue;
        }
        let manifest = PathBuf::from(m["manifest_path"].as_str().unwrap_or_default());
        let dir = manifest.parent().map(Path::to_path_buf).unwrap_or_default();
        let package = m["package_id"]
            .as_str()
            .and_then(package_name)
            .unwrap_or_default();
        let kind = m["target"]["kind"][0].as_str().unwrap_or_default();
        let target = m["target"]["name"].as_str().unwrap_or_default();
        let name = if kind == "lib" || kind == "bin" {
            format!("{package}/{kind}:{target}")
        } else {
            format!("{package}/{target}")
        };
        bins.push(TestBinary {
            package,
            dir,
            name,
            executable: PathBuf::from(exe),
        });
    }
    Ok(bins)
}

/// The package name of a cargo package id (`path+file:///…/e2e#0.1.0`, or
/// `path+file:///…/dir#name@0.1.0` when the directory is named otherwise).
fn package_name(id: &str) -> Option<String> {
    let (path, rest) = id.rsplit_once('#')?;
    Some(match rest.split_once('@') {
        Some((name, _)) => name.to_owned(),
        None => path.rsplit('/').next()?.to_owned(),
    })
}

/// What one binary did.
struct Outcome {
    binary: TestBinary,
    output: String,
    success: bool,
    took: Duration,
}

fn run_one(b: TestBinary) -> Outcome {
    let started = Instant::now();
    let result = Command::new(&b.executable)
        .current_dir(&b.dir)
        .env("CARGO_MANIFEST_DIR", &b.dir)
        .env("CARGO_PKG_NAME", &b.package)
        .stdin(Stdio::null())
        .output();
    let (output, success) = match result {
        Ok(o) => (
            format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
            o.status.success(),
        ),
        Err(e) => (
            format!("cannot run {}: {e}\n", b.executable.display()),
            false,
        ),
    };
    Outcome {
        binary: b,
        output,
        success,
        took: started.elapsed(),
    }
}

/// The totals of a run.
#[derive(Debug, Default)]
pub struct Totals {
    /// Tests passed, over every binary.
    pub passed: u64,
    /// Tests failed.
    pub failed: u64,
    /// Binaries that failed (a failed test, or a crash).
    pub failed_binaries: Vec<String>,
    /// Each binary run: its name and tests passed, when it succeeded.
    pub succeeded: Vec<(String, u64)>,
}

/// Adds the counts of every `test result:` line of `output`.
pub fn count(output: &str, totals: &mut Totals) {
    for l in output.lines().filter(|l| l.starts_with("test result:")) {
        let words: Vec<&str> = l.split_whitespace().collect();
        for w in words.windows(2) {
            match w[1].trim_end_matches(';') {
                "passed" => totals.passed += w[0].parse::<u64>().unwrap_or(0),
                "failed" => totals.failed += w[0].parse::<u64>().unwrap_or(0),
                _ => {}
            }
        }
    }
}

/// Runs `bins` with `jobs` at a time, longest first by `times_file`, printing each binary's
/// output when it ends; records the durations for the next run.
pub fn run(bins: Vec<TestBinary>, jobs: usize, times_file: &Path) -> Totals {
    let mut times: BTreeMap<String, f64> = std::fs::read(times_file)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let mut queue: Vec<TestBinary> = bins;
    // Unknown binaries first (they may be long), then the longest.
    queue.sort_by(|a, b| {
        let t = |x: &TestBinary| times.get(&x.name).copied().unwrap_or(f64::MAX);
        t(b).total_cmp(&t(a))
    });
    let total = queue.len();
    let queue = Arc::new(Mutex::new(VecDeque::from(queue)));
    let (tx, rx) = mpsc::channel::<Outcome>();
    for _ in 0..jobs.max(1) {
        let (queue, tx) = (queue.clone(), tx.clone());
        std::thread::spawn(move || {
            loop {
                let next = queue.lock().ok().and_then(|mut q| q.pop_front());
                let Some(b) = next else { break };
                if tx.send(run_one(b)).is_err() {
                    break;
                }
            }
        });
    }
    drop(tx);
    let mut totals = Totals::default();
    for (done, o) in rx.iter().enumerate() {
        println!(
            "\n     Running {} ({}) [{}/{total}, {:.1} s]",
            o.binary.name,
            o.binary.executable.display(),
            done + 1,
            o.took.as_secs_f64()
        );
        print!("{}", o.output);
        let mut own = Totals::default();
        count(&o.output, &mut own);
        totals.passed += own.passed;
        totals.failed += own.failed;
        if o.success {
            totals.succeeded.push((o.binary.name.clone(), own.passed));
        } else {
            totals.failed_binaries.push(o.binary.name.clone());
        }
        times.insert(o.binary.name.clone(), o.took.as_secs_f64());
    }
    if let Ok(text) = serde_json::to_vec_pretty(&times) {
        let _ = std::fs::write(times_file, text);
    }
    totals
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_names_from_ids() {
        assert_eq!(
            package_name("path+file:///work/main/dev/e2e#0.1.0").as_deref(),
            Some("e2e")
        );
        assert_eq!(
            package_name("path+file:///work/main/shared/admission-kit#admission-kit@0.1.0")
                .as_deref(),
            Some("admission-kit")
        );
    }

    #[test]
    fn totals_add_every_result_line() {
        let mut t = Totals::default();
        count(
            "test result: ok. 3 passed; 0 failed; 0 ignored\nnoise\ntest result: FAILED. 1 passed; 2 failed;\n",
            &mut t,
        );
        assert_eq!((t.passed, t.failed), (4, 2));
    }
}
