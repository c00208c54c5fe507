//! `cargo xtask soak --minutes N`: every service under steady load at once, for long enough to
//! see memory creep, latency drift or failures that a benchmark's seconds hide.
//!
//! Release builds of the four webhook services and quota-state. quota-state runs in plaintext
//! with a synthetic state (1,000 quotas, 10,000 pods) and scheduling-webhook asks it every quota
//! question, as in the quota-state-in-the-loop benchmark of docs/performance.md. Each webhook gets its own
//! `admission-load` (TLS keep-alive, its bench payloads): first a closed loop of
//! `--calibrate-secs` with all four at once measures each one's maximum *on this machine with the
//! others running*, then an open loop at half of it (`--fraction`) for the rest. Every
//! `--report-every-secs` one row: per service the window's p99 and the server's RSS, and
//! quota-state's RSS. At the end a summary per service; the command fails when any review failed.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use serde_json::Value;

/// One webhook service under load: its binary, `serve` arguments and review cases.
struct Load {
    service: &'static str,
    serve_args: String,
    cases: Vec<String>,
}

fn loads(root: &Path, quota_state: &str) -> Vec<Load> {
    let p = |rel: &str| root.join(rel).display().to_string();
    vec![
        Load {
            service: "registry-webhook",
            serve_args: format!(
                "--state {}",
                p("services/registry-webhook/examples/state.yaml")
            ),
            cases: vec![
                format!(
                    "/validate-registry-volcano-sh-v1alpha1-model={}",
                    p("services/registry-webhook/benches/model-review.json")
                ),
                format!(
                    "/mutate-registry-volcano-sh-v1alpha1-model={}",
                    p("services/registry-webhook/benches/model-review-mutate.json")
                ),
            ],
        },
        Load {
            service: "node-config-webhook",
            serve_args: format!(
                "--state {}",
                p("services/node-config-webhook/examples/state.yaml")
            ),
            cases: vec![format!(
                "/mutate-node-status={}",
                p("services/node-config-webhook/benches/node-status-review.json")
            )],
        },
        Load {
            service: "training-webhook",
            serve_args: format!(
                "--state {}",
                p("services/training-webhook/examples/state.yaml")
            ),
            cases: vec![format!(
                "/validate-kubeflow-org-v1-pytorchjob={}",
                p("services/training-webhook/benches/pytorchjob-review.json")
            )],
        },
        Load {
            service: "scheduling-webhook",
            serve_args: format!(
                "--state {} --quota-state-url {quota_state}",
                p("services/scheduling-webhook/examples/state.yaml")
            ),
            cases: vec![format!(
                "/validate-pod={}",
                p("services/scheduling-webhook/benches/pod-review-quota-state.json")
            )],
        },
    ]
}

/// A child killed when dropped.
pub struct Guard(pub Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts quota-state in plaintext with a synthetic state (1,000 quotas, 10,000 pods), pinned to
/// `cpu` when given, and waits until its gRPC port accepts (the state is filled before it
/// listens). The child is killed when the guard drops.
pub fn start_quota_state(bin_dir: &Path, cpu: Option<usize>) -> Result<(Guard, u16)> {
    start_quota_state_with_metrics(bin_dir, cpu).map(|(g, port, _)| (g, port))
}

/// [`start_quota_state`], also returning its metrics port.
pub fn start_quota_state_with_metrics(
    bin_dir: &Path,
    cpu: Option<usize>,
) -> Result<(Guard, u16, u16)> {
    let (port, metrics) = (testenv::free_port()?, testenv::free_port()?);
    let mut cmd = match cpu {
        Some(cpu) => {
            let mut c = Command::new("taskset");
            c.args(["-c", &cpu.to_string()])
                .arg(bin_dir.join("quota-state"));
            c
        }
        None => Command::new(bin_dir.join("quota-state")),
    };
    let guard = Guard(
        cmd.args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--metrics-listen", &format!("127.0.0.1:{metrics}")])
            .args(["--leader-election", "false", "--insecure-plaintext"])
            .args(["--synthetic-quotas", "1000", "--synthetic-pods", "10000"])
            .args(["--reservation-ttl-secs", "5"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting quota-state")?,
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            bail!("quota-state did not listen within 60 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok((guard, port, metrics))
}

/// How the soak runs.
pub struct Options {
    /// Open-loop minutes after the calibration.
    pub minutes: u64,
    /// Closed-loop seconds that measure each service's maximum.
    pub calibrate_secs: u64,
    /// The fraction of the maximum sent.
    pub fraction: f64,
    /// Seconds between rows.
    pub report_every_secs: u64,
}

/// Runs the soak with the release binaries in `bin_dir`.
pub fn run(root: &Path, bin_dir: &Path, o: &Options) -> Result<()> {
    let (mut quota_state, qs_port) = start_quota_state(bin_dir, None)?;
    let qs_pid = quota_state.0.id();
    let (tx, rx) = mpsc::channel::<(usize, Value)>();
    let mut loaders = Vec::new();
    let loads = loads(root, &format!("http://127.0.0.1:{qs_port}"));
    for (i, l) in loads.iter().enumerate() {
        let mut cmd = Command::new(bin_dir.join("admission-load"));
        cmd.arg("--spawn")
            .arg(bin_dir.join(l.service))
            .arg(format!("--serve-args={}", l.serve_args))
            .args(["--connections", "4"])
            .args(["--calibrate-secs", &o.calibrate_secs.to_string()])
            .args(["--rate-fraction", &o.fraction.to_string()])
            .args(["--duration-secs", &(o.minutes * 60).to_string()])
            .args(["--report-every-secs", &o.report_every_secs.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for c in &l.cases {
            cmd.arg("--case").arg(c);
        }
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting admission-load for {}", l.service))?;
        let out = child.stdout.take().context("admission-load stdout")?;
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    let _ = tx.send((i, v));
                }
            }
        });
        loaders.push(Guard(child));
    }
    drop(tx);
    eprintln!(
        "soak: {} services, {} s calibration, then {} min at {:.0} % of each one's maximum",
        loads.len(),
        o.calibrate_secs,
        o.minutes,
        o.fraction * 100.0
    );

    let names: Vec<&str> = loads.iter().map(|l| l.service).collect();
    let mut header = String::from("| t (s) |");
    for n in &names {
        header.push_str(&format!(" {n} p99 ms / RSS MiB |"));
    }
    header.push_str(" quota-state RSS MiB |");
    let mut rows: BTreeMap<u64, BTreeMap<usize, Value>> = BTreeMap::new();
    let mut calibration = BTreeMap::new();
    let mut summary = BTreeMap::new();
    let mut printed_header = false;
    let mut qs_first: Option<f64> = None;
    let mut qs_peak = 0.0f64;
    for (i, v) in rx {
        if v.get("calibrated_max").is_some() {
            calibration.insert(i, v);
            continue;
        }
        if v.get("summary").is_some() {
            summary.insert(i, v);
            continue;
        }
        let t = v["t_s"].as_u64().unwrap_or(0);
        let row = rows.entry(t).or_default();
        row.insert(i, v);
        if row.len() == names.len() {
            if !printed_header {
                println!("{header}");
                println!("|---|{}---|", "---|".repeat(names.len()));
                printed_header = true;
            }
            let qs = crate::footprint::rss_mib(qs_pid);
            qs_first.get_or_insert(qs);
            qs_peak = qs_peak.max(qs);
            let mut line = format!("| {t} |");
            for k in 0..names.len() {
                let w = &row[&k];
                let failed = w["failed"].as_u64().unwrap_or(0);
                line.push_str(&format!(
                    " {:.2} / {:.1}{} |",
                    w["p99_ms"].as_f64().unwrap_or(0.0),
                    w["rss_mib"].as_f64().unwrap_or(0.0),
                    if failed > 0 {
                        format!(" ({failed} failed)")
                    } else {
                        String::new()
                    }
                ));
            }
            line.push_str(&format!(" {qs:.1} |"));
            println!("{line}");
            rows.remove(&t);
        }
    }
    let quota_state_alive = matches!(quota_state.0.try_wait(), Ok(None));
    drop(loaders);
    drop(quota_state);

    println!();
    println!(
        "| service | calibrated max /s | rate /s | reviews | failed | p99 ms | worst window p99 ms | peak RSS MiB |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut failed = 0u64;
    for (i, n) in names.iter().enumerate() {
        let (c, s) = (calibration.get(&i), summary.get(&i));
        let f = |v: Option<&Value>, k: &str| v.and_then(|v| v[k].as_f64()).unwrap_or(f64::NAN);
        let fails = s.and_then(|s| s["failed"].as_u64()).unwrap_or(u64::MAX);
        failed = failed.saturating_add(fails);
        println!(
            "| {n} | {:.0} | {:.0} | {} | {} | {:.2} | {:.2} | {:.1} |",
            f(c, "calibrated_max"),
            f(c, "rate"),
            s.and_then(|s| s["reviews"].as_u64()).unwrap_or(0),
            if fails == u64::MAX {
                "no summary".to_owned()
            } else {
                fails.to_string()
            },
            f(s, "p99_ms"),
            f(s, "worst_window_p99_ms"),
            f(s, "peak_rss_mib"),
        );
    }
    println!(
        "| quota-state | – | – | – | – | – | – | {qs_peak:.1} (first row {:.1}) |",
        qs_first.unwrap_or(0.0)
    );
    if !quota_state_alive {
        bail!("quota-state exited during the soak");
    }
    if failed > 0 {
        bail!("{failed} reviews failed (or a load ended without a summary)");
    }
    Ok(())
}
