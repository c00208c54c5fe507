//! AdmitPod load over gRPC on loopback against a quota-state holding a large synthetic state.
//!
//! `cargo build --release -p quota-state --example admit_load && target/release/examples/admit_load --spawn target/release/quota-state`
//! starts `quota-state --synthetic-quotas 10000 --synthetic-pods 100000` on a free port, waits
//! for SERVING, sends AdmitPod calls for random leaf quotas from several connections for a bounded
//! time, and prints calls/s, p50/p99/p99.9 and the server's peak RSS.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use quota_state::proto::quota_state_client::QuotaStateClient;
use quota_state::proto::{AdmitPodRequest, Amount};

#[derive(Parser)]
struct Args {
    /// The quota-state binary.
    #[arg(long)]
    spawn: std::path::PathBuf,
    /// Quotas in the synthetic state.
    #[arg(long, default_value_t = 10_000)]
    quotas: usize,
    /// Running pods in the synthetic state.
    #[arg(long, default_value_t = 100_000)]
    pods: usize,
    /// Concurrent HTTP/2 connections.
    #[arg(long, default_value_t = 8)]
    connections: usize,
    /// Seconds of load.
    #[arg(long, default_value_t = 8)]
    duration_secs: u64,
}

fn peak_rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let mut child = Command::new(&args.spawn)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args([
            "--synthetic-quotas",
            &args.quotas.to_string(),
            "--synthetic-pods",
            &args.pods.to_string(),
        ])
        .args(["--reservation-ttl-secs", "5", "--insecure-plaintext"])
        .args(["--metrics-listen", "127.0.0.1:0"])
        // Every call reserves under a new name: lift the bounds that protect a real cluster.
        .args(["--max-reservations", "10000000"])
        .args(["--max-reservations-per-namespace", "10000000"])
        .stdout(Stdio::null())
        .spawn()?;
    let url = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    let channel = loop {
        if let Ok(ep) = tonic::transport::Endpoint::from_shared(url.clone())
            && let Ok(c) = ep.connect().await
        {
            let mut h = tonic_health::pb::health_client::HealthClient::new(c.clone());
            let ok = h
                .check(tonic_health::pb::HealthCheckRequest {
                    service: "quotastate.v1.QuotaState".into(),
                })
                .await
                .map(|r| {
                    r.into_inner().status
                        == tonic_health::pb::health_check_response::ServingStatus::Serving as i32
                })
                .unwrap_or(false);
            if ok {
                break c;
            }
        }
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            anyhow::bail!("quota-state did not become ready");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eprintln!(
        "ready after {:.1?} ({} quotas, {} pods)",
        started.elapsed(),
        args.quotas,
        args.pods
    );
    let leaves = args.quotas - args.quotas.div_ceil(101).max(1);
    let stop = Instant::now() + Duration::from_secs(args.duration_secs);
    let mut tasks = Vec::new();
    for c in 0..args.connections {
        let ch = if c == 0 {
            channel.clone()
        } else {
            tonic::transport::Endpoint::from_shared(url.clone())?
                .connect()
                .await?
        };
        tasks.push(tokio::spawn(async move {
            let mut client = QuotaStateClient::new(ch);
            let mut lat = Vec::new();
            let mut i: u64 = c as u64;
            while Instant::now() < stop {
                // A cheap deterministic spread over the leaves.
                let leaf = (i.wrapping_mul(2_654_435_761) as usize) % leaves.max(1);
                let req = AdmitPodRequest {
                    namespace: format!("ns-{leaf}"),
                    name: format!("bench-{c}-{i}"),
                    quota_label: quota_state::synthetic::leaf(leaf),
                    check_parent: true,
                    check_admission: true,
                    requests: [(
                        "cpu".to_owned(),
                        Amount {
                            milli: 1000,
                            ..Amount::default()
                        },
                    )]
                    .into(),
                    ..AdmitPodRequest::default()
                };
                let t = Instant::now();
                if client.admit_pod(req).await.is_err() {
                    break;
                }
                lat.push(t.elapsed().as_nanos() as u64);
                i += args_connections_step();
            }
            lat
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await?);
    }
    all.sort_unstable();
    let pct = |p: f64| {
        all.get(((p / 100.0) * (all.len().saturating_sub(1)) as f64) as usize)
            .map(|v| *v as f64 / 1e6)
            .unwrap_or(0.0)
    };
    println!(
        "AdmitPod calls: {}  connections: {}",
        all.len(),
        args.connections
    );
    println!(
        "calls/s: {:.0}",
        all.len() as f64 / args.duration_secs as f64
    );
    println!(
        "latency ms: p50 {:.3}  p99 {:.3}  p99.9 {:.3}",
        pct(50.0),
        pct(99.0),
        pct(99.9)
    );
    if let Some(kib) = peak_rss_kib(child.id()) {
        println!("quota-state peak RSS: {:.1} MiB", kib as f64 / 1024.0);
    }
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    let _ = child.wait();
    Ok(())
}

fn args_connections_step() -> u64 {
    7919
}
