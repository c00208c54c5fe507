//! AdmitPod load over gRPC on loopback against a quota-state holding a large synthetic state.
//!
//! `cargo build --release -p quota-state --example admit_load && target/release/examples/admit_load --spawn target/release/quota-state`
//! starts `quota-state --synthetic-quotas 10000 --synthetic-pods 100000` on a free port, waits
//! for SERVING, sends AdmitPod calls for random leaf quotas from several connections for a bounded
//! time (after a warm-up outside the measured window), and prints calls/s, p50/p99/p99.9 and the
//! server's peak RSS. Closed loop (each connection sends its next call when the last returns) by
//! default; `--rate N` sends N calls a second in all on a fixed schedule instead, from one thread
//! that polls rather than sleeps, the connections taking calls in turn (several in flight on each
//! when the server lags), each latency counted from when its call was due, so a stalled server
//! shows in the figures rather than slowing the client down. Any failed call stops the run with
//! its error.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use quota_protocol::proto::quota_state_client::QuotaStateClient;
use quota_protocol::proto::{AdmitPodRequest, Amount};

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
    /// A fleet of this many member clusters (0: one cluster): the synthetic pods spread over
    /// them, and each connection calls as one member (`m<connection % members>`), as each
    /// member's webhook keeps its own connection to the hub.
    #[arg(long, default_value_t = 0)]
    members: usize,
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
            "--synthetic-members",
            &args.members.to_string(),
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
    let mut all = if args.rate > 0 {
        let (url, connections, warmup, rate, health_only) = (
            url.clone(),
            args.connections,
            args.warmup,
            args.rate,
            args.health_only,
        );
        let load = Load {
            leaves,
            members: args.members,
            health_only,
        };
        let result = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
                .block_on(open_loop(url, connections, warmup, rate, duration, load))
        })
        .join()
        .map_err(|_| anyhow::anyhow!("the load thread panicked"))
        .and_then(|r| r);
        match result {
            Ok(lat) => lat,
            Err(e) => {
                let _ = child.kill();
                return Err(e);
            }
        }
    } else {
        closed_loop(&url, channel, &args, leaves, duration)
            .await
            .inspect_err(|_| {
                let _ = child.kill();
            })?
    };
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

/// Each connection on a thread of its own sends its next call when the last returns; latency is
/// counted from the send.
async fn closed_loop(
    url: &str,
    channel: tonic::transport::Channel,
    args: &Args,
    leaves: usize,
    duration: Duration,
) -> anyhow::Result<Vec<u64>> {
    // Every connection warms up, then all start the measured window at one instant.
    let barrier = Arc::new(std::sync::Barrier::new(args.connections));
    let mut tasks = Vec::new();
    for c in 0..args.connections {
        let ch = if c == 0 {
            channel.clone()
        } else {
            tonic::transport::Endpoint::from_shared(url.to_owned())?
                .connect()
                .await?
        };
        let (barrier, warmup, health_only) = (barrier.clone(), args.warmup, args.health_only);
        let members = args.members;
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
                runtime
                    .block_on(client.admit_pod(request(leaves, c, i, members)))
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
            while Instant::now() < stop {
                let sent = Instant::now();
                call(i)?;
                lat.push(sent.elapsed().as_nanos() as u64);
                i += CALL_STEP;
            }
            anyhow::Ok(lat)
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        let joined = tokio::task::spawn_blocking(move || t.join())
            .await?
            .map_err(|_| anyhow::anyhow!("a load thread panicked"))?;
        all.extend(joined?);
    }
    Ok(all)
}

/// Call `i` of connection `c`: a pod of its own on one of the synthetic leaf quotas.
fn request(leaves: usize, c: usize, i: u64, members: usize) -> AdmitPodRequest {
    // A cheap deterministic spread over the leaves.
    let leaf = (i.wrapping_mul(2_654_435_761) as usize) % leaves.max(1);
    AdmitPodRequest {
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
        cluster: if members == 0 {
            String::new()
        } else {
            quota_state::synthetic::member(c % members)
        },
        ..AdmitPodRequest::default()
    }
}

/// What each open-loop call sends.
#[derive(Clone, Copy)]
struct Load {
    leaves: usize,
    members: usize,
    health_only: bool,
}

impl Load {
    async fn call(self, ch: tonic::transport::Channel, c: usize, i: u64) -> anyhow::Result<()> {
        if self.health_only {
            let mut health = tonic_health::pb::health_client::HealthClient::new(ch);
            return health
                .check(tonic_health::pb::HealthCheckRequest::default())
                .await
                .map(drop)
                .map_err(|e| anyhow::anyhow!("connection {c}: health check failed: {e}"));
        }
        QuotaStateClient::new(ch)
            .admit_pod(request(self.leaves, c, i, self.members))
            .await
            .map(drop)
            .map_err(|e| anyhow::anyhow!("connection {c}: AdmitPod failed: {e}"))
    }
}

/// `rate` calls a second on a fixed schedule, spread over the connections in turn (HTTP/2 carries
/// several at once on each), each latency counted from when its call was due. One thread drives
/// everything and polls rather than sleeps: the runtime's timer ticks in milliseconds, and
/// waking a sleeping thread costs tens of microseconds here, both more than the figures this
/// measures (with threads sleeping between calls the client's own floor was a 0.3 ms median).
async fn open_loop(
    url: String,
    connections: usize,
    warmup: u64,
    rate: u64,
    duration: Duration,
    load: Load,
) -> anyhow::Result<Vec<u64>> {
    let mut channels = Vec::new();
    for _ in 0..connections {
        channels.push(
            tonic::transport::Endpoint::from_shared(url.clone())?
                .connect()
                .await?,
        );
    }
    for (c, ch) in channels.iter().enumerate() {
        for w in 0..warmup {
            load.call(ch.clone(), c, w * CALL_STEP + c as u64).await?;
        }
    }
    let tasks = tokio::task::LocalSet::new();
    tasks
        .run_until(async {
            let latencies = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
            let failure = std::rc::Rc::new(std::cell::RefCell::new(None));
            let interval = Duration::from_secs_f64(1.0 / rate as f64);
            let start = Instant::now();
            let stop = start + duration;
            let mut handles = Vec::new();
            let mut k: u64 = 0;
            loop {
                let due = start + interval.mul_f64(k as f64);
                if due >= stop || failure.borrow().is_some() {
                    break;
                }
                if Instant::now() < due {
                    // Lets the runtime poll the sockets and run the calls in flight.
                    tokio::task::yield_now().await;
                    continue;
                }
                let c = (k % connections as u64) as usize;
                let i = (warmup + k / connections as u64) * CALL_STEP + c as u64;
                let (ch, latencies, failure) =
                    (channels[c].clone(), latencies.clone(), failure.clone());
                handles.push(tokio::task::spawn_local(async move {
                    match load.call(ch, c, i).await {
                        Ok(()) => latencies.borrow_mut().push(due.elapsed().as_nanos() as u64),
                        Err(e) => drop(failure.borrow_mut().get_or_insert(e)),
                    }
                }));
                k += 1;
            }
            for h in handles {
                h.await?;
            }
            if let Some(e) = failure.borrow_mut().take() {
                return Err(e);
            }
            Ok(latencies.take())
        })
        .await
}
