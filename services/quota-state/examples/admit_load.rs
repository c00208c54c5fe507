//! AdmitPod load over gRPC on loopback against a quota-state holding a large synthetic state.
//!
//! `cargo build --release -p quota-state --example admit_load && target/release/examples/admit_load --spawn target/release/quota-state`
//! starts `quota-state --synthetic-quotas 10000 --synthetic-pods 100000` on a free port, waits
//! for SERVING, sends AdmitPod calls for random leaf quotas from several connections for a bounded
//! time (after a warm-up outside the measured window), and prints calls/s, p50/p99/p99.9 and the
//! server's peak RSS. Closed loop (each connection sends its next call when the last returns) by
//! default; `--rate N` sends N calls a second in all on a fixed schedule instead, each latency
//! counted from when its call was due, so a stalled server shows in the figures rather than
//! slowing the client down. Any failed call stops the run with its error.

use std::process::{Command, Stdio};
use std::sync::Arc;
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
    /// Calls per second in all, on a fixed schedule (open loop); 0: closed loop.
    #[arg(long, default_value_t = 0)]
    rate: u64,
    /// Calls per connection before the measured window.
    #[arg(long, default_value_t = 500)]
    warmup: u64,
    /// Send gRPC health checks instead of AdmitPod: what the transport alone costs (the floor
    /// under AdmitPod's figures).
    #[arg(long)]
    health_only: bool,
    /// Pin quota-state to this CPU (with `taskset`).
    #[arg(long)]
    server_cpu: Option<usize>,
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
    let mut command = match args.server_cpu {
        Some(cpu) => {
            let mut c = Command::new("taskset");
            c.args(["-c", &cpu.to_string()]).arg(&args.spawn);
            c
        }
        None => Command::new(&args.spawn),
    };
    let mut child = command
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
    let duration = Duration::from_secs(args.duration_secs);
    // Every connection warms up, then all start the measured window at one instant.
    let barrier = Arc::new(std::sync::Barrier::new(args.connections));
    let interval = (args.rate > 0)
        .then(|| Duration::from_secs_f64(args.connections as f64 / args.rate as f64));
    let connections = args.connections as u32;
    let mut tasks = Vec::new();
    for c in 0..args.connections {
        let ch = if c == 0 {
            channel.clone()
        } else {
            tonic::transport::Endpoint::from_shared(url.clone())?
                .connect()
                .await?
        };
        let (barrier, warmup, health_only) = (barrier.clone(), args.warmup, args.health_only);
        let runtime = tokio::runtime::Handle::current();
        // A thread per connection, pacing with the system's sleep (the runtime's timer ticks
        // in milliseconds, coarser than the calls); the runtime's workers drive the I/O.
        tasks.push(std::thread::spawn(move || {
            let mut health = tonic_health::pb::health_client::HealthClient::new(ch.clone());
            let mut client = QuotaStateClient::new(ch);
            let mut lat = Vec::new();
            let mut i: u64 = c as u64;
            let mut call = |i: u64| {
                if health_only {
                    let check = tonic_health::pb::HealthCheckRequest::default();
                    return runtime
                        .block_on(health.check(check))
                        .map(drop)
                        .map_err(|e| anyhow::anyhow!("connection {c}: health check failed: {e}"));
                }
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
                runtime
                    .block_on(client.admit_pod(req))
                    .map(drop)
                    .map_err(|e| anyhow::anyhow!("connection {c}: AdmitPod failed: {e}"))
            };
            for _ in 0..warmup {
                call(i)?;
                i += CALL_STEP;
            }
            barrier.wait();
            let start = Instant::now();
            let stop = start + duration;
            // Connections start their schedules spread over one interval.
            let mut due = start + interval.map_or(Duration::ZERO, |d| d * c as u32 / connections);
            while Instant::now() < stop {
                match interval {
                    Some(_) => std::thread::sleep(due.saturating_duration_since(Instant::now())),
                    None => due = Instant::now(),
                }
                call(i)?;
                lat.push(due.elapsed().as_nanos() as u64);
                i += CALL_STEP;
                if let Some(d) = interval {
                    due += d;
                }
            }
            anyhow::Ok(lat)
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        let joined = tokio::task::spawn_blocking(move || t.join())
            .await?
            .map_err(|_| anyhow::anyhow!("a load thread panicked"))?;
        match joined {
            Ok(lat) => all.extend(lat),
            Err(e) => {
                let _ = child.kill();
                return Err(e);
            }
        }
    }
    all.sort_unstable();
    let pct = |p: f64| {
        all.get(((p / 100.0) * (all.len().saturating_sub(1)) as f64) as usize)
            .map(|v| *v as f64 / 1e6)
            .unwrap_or(0.0)
    };
    println!(
        "{} calls: {}  connections: {}  {}",
        if args.health_only {
            "health check"
        } else {
            "AdmitPod"
        },
        all.len(),
        args.connections,
        match args.rate {
            0 => "closed loop".to_owned(),
            r => format!("open loop at {r}/s"),
        }
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

/// Between two calls of one connection: keeps pod names apart across connections.
const CALL_STEP: u64 = 7919;
