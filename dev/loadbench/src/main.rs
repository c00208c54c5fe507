//! `admission-load`: drives AdmissionReviews at a webhook server over TLS with keep-alive on
//! loopback and prints reviews/s, latency percentiles and the server's peak RSS.
//!
//! With `--spawn BINARY` it starts `BINARY serve --self-signed …` on a free loopback port, waits
//! until it answers, runs the load, reads the server's peak RSS (VmHWM) and stops it with
//! SIGTERM. Otherwise it targets `--addr` with `--ca`. Traffic goes to loopback addresses only,
//! and every run is bounded by `--requests` and `--duration`.
//!
//! With `--rate` (or `--calibrate-secs`, which measures the closed-loop maximum first and then
//! runs at `--rate-fraction` of it) it runs an open loop for soaks instead ([`steady`]): JSON
//! lines every `--report-every-secs` with the window's p99 and the server's RSS.

mod steady;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;

#[derive(Parser, Debug)]
#[command(
    name = "admission-load",
    about = "Load benchmark for admission webhooks (loopback, TLS keep-alive)."
)]
struct Args {
    /// Start this webhook binary (`serve --self-signed`) and benchmark it.
    #[arg(long)]
    spawn: Option<PathBuf>,
    /// Extra arguments for the spawned `serve`, space-separated (e.g. "--state FILE").
    #[arg(long, allow_hyphen_values = true, default_value = "")]
    serve_args: String,
    /// Server address when not spawning (loopback only).
    #[arg(long, default_value = "127.0.0.1:8443")]
    addr: SocketAddr,
    /// CA bundle (PEM) to trust when not spawning.
    #[arg(long)]
    ca: Option<PathBuf>,
    /// A request mix entry `PATH=FILE` (an AdmissionReview JSON); repeat for a mix, sent round-robin.
    #[arg(long = "case", required = true)]
    cases: Vec<String>,
    /// Concurrent keep-alive connections.
    #[arg(long, default_value_t = 16)]
    connections: usize,
    /// Stop after this many reviews in total.
    #[arg(long, default_value_t = 200_000)]
    requests: u64,
    /// Stop after this long (Go duration seconds, e.g. 10).
    #[arg(long, default_value_t = 10)]
    duration_secs: u64,
    /// Reviews per connection before measuring starts.
    #[arg(long, default_value_t = 200)]
    warmup: u64,
    /// Use HTTP/2 (one stream at a time per connection) instead of HTTP/1.1.
    #[arg(long)]
    http2: bool,
    /// Open loop: send this many reviews a second for `--duration-secs` (0: closed loop).
    #[arg(long, default_value_t = 0.0)]
    rate: f64,
    /// Open loop at `--rate-fraction` of the maximum a closed loop reaches in this many
    /// seconds (with `--connections`), measured first on the same server.
    #[arg(long, default_value_t = 0)]
    calibrate_secs: u64,
    /// With `--calibrate-secs`: the fraction of the measured maximum to send.
    #[arg(long, default_value_t = 0.5)]
    rate_fraction: f64,
    /// Open loop: a JSON line of figures every this many seconds.
    #[arg(long, default_value_t = 30)]
    report_every_secs: u64,
    /// The name the server's certificate is verified for (a spawned server's self-signed
    /// certificate names `localhost`).
    #[arg(long, default_value = "localhost")]
    server_name: String,
    /// Pin this client (every thread) to this CPU.
    #[arg(long)]
    client_cpu: Option<usize>,
    /// Pin the spawned server to this CPU (with `taskset`).
    #[arg(long)]
    server_cpu: Option<usize>,
    /// The process id of a server started elsewhere (with `--addr`), whose CPU time per
    /// review is then printed as a spawned server's is.
    #[arg(long)]
    server_pid: Option<u32>,
    /// The HTTP status every answer must have: 200 for reviews; 404 measures the client's own
    /// ceiling on a path the server routes and refuses at once.
    #[arg(long, default_value_t = 200)]
    expect_status: u16,
    /// Send a `traceparent` with each review, a new trace each, as an API server with tracing
    /// configured does, this percentage of them sampled (100: every request, as
    /// `samplingRatePerMillion: 1000000`).
    #[arg(long, value_name = "SAMPLED_PERCENT")]
    traceparent: Option<f64>,
}

struct Case {
    path: String,
    body: Bytes,
}

fn cases(args: &Args) -> Result<Vec<Case>> {
    args.cases
        .iter()
        .map(|c| {
            let (path, file) = c.split_once('=').context("a --case is PATH=FILE")?;
            let body = std::fs::read(file).with_context(|| format!("reading {file}"))?;
            Ok(Case {
                path: path.to_owned(),
                body: Bytes::from(body),
            })
        })
        .collect()
}

fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

struct Spawned {
    child: Child,
    dir: PathBuf,
    /// From spawning to the first answered TLS handshake.
    ready_after: Duration,
    /// Resident size then, before any review.
    idle_kib: Option<u64>,
}

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A figure of `/proc/<pid>/status` in KiB: `VmHWM` (peak RSS) or `VmRSS` (current).
fn status_kib(pid: u32, key: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

fn tls_config(ca_pem: &[u8], h2: bool) -> Result<Arc<rustls::ClientConfig>> {
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut &ca_pem[..]) {
        let c: CertificateDer<'static> = c?;
        roots.add(c)?;
    }
    let mut cfg = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![if h2 {
        b"h2".to_vec()
    } else {
        b"http/1.1".to_vec()
    }];
    Ok(Arc::new(cfg))
}

/// Where the load goes: address, the certificate name verified, TLS settings, protocol, and
/// the status every answer must have.
#[derive(Clone)]
pub(crate) struct Target {
    pub addr: SocketAddr,
    pub name: ServerName<'static>,
    pub cfg: Arc<rustls::ClientConfig>,
    pub h2: bool,
    pub expect: http::StatusCode,
    /// Send a `traceparent` with each review, sampled with this probability.
    pub traceparent: Option<f64>,
}

async fn connect(t: &Target) -> Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(t.addr)
        .await
        .with_context(|| format!("connecting to {}", t.addr))?;
    tcp.set_nodelay(true)?;
    tokio_rustls::TlsConnector::from(t.cfg.clone())
        .connect(t.name.clone(), tcp)
        .await
        .with_context(|| {
            format!(
                "TLS handshake with {} verifying the name {:?} (set --server-name to a name in the server's certificate)",
                t.addr,
                t.name.to_str()
            )
        })
}

enum Conn {
    H1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
}

impl Conn {
    async fn open(t: &Target) -> Result<Self> {
        let io = TokioIo::new(connect(t).await?);
        if t.h2 {
            let (s, c) =
                hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io)
                    .await?;
            tokio::spawn(c);
            Ok(Conn::H2(s))
        } else {
            let (s, c) = hyper::client::conn::http1::handshake(io).await?;
            tokio::spawn(c);
            Ok(Conn::H1(s))
        }
    }

    async fn review(&mut self, case: &Case, target: &Target) -> Result<()> {
        let mut req = http::Request::post(&case.path)
            .header("host", "localhost")
            .header("content-type", "application/json");
        if let Some(sampled) = target.traceparent {
            // A new trace per review; ids only need to be valid and distinct.
            let (trace, span) = (fastrand::u128(1..), fastrand::u64(1..));
            let flags = u8::from(fastrand::f64() < sampled);
            req = req.header(
                "traceparent",
                format!("00-{trace:032x}-{span:016x}-{flags:02x}"),
            );
        }
        let req = req.body(Full::new(case.body.clone()))?;
        let expect = target.expect;
        let resp = match self {
            Conn::H1(s) => s.send_request(req).await?,
            Conn::H2(s) => s.send_request(req).await?,
        };
        let status = resp.status();
        let body = resp.into_body().collect().await?.to_bytes();
        if status != expect {
            bail!("HTTP {status}: {}", String::from_utf8_lossy(&body));
        }
        Ok(())
    }
}

/// The p-th percentile of nanosecond samples, in milliseconds.
fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i.min(sorted.len() - 1)] as f64 / 1e6
}

fn main() -> Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = Args::parse();
    // Pinned before the runtime starts, so that every worker thread inherits the CPU.
    if let Some(cpu) = args.client_cpu {
        pin_to(cpu)?;
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(load(args))
}

/// Pins the calling thread (and the threads it starts later) to one CPU.
#[allow(unsafe_code)] // libc calls (process and resource controls) with no safe wrapper.
fn pin_to(cpu: usize) -> Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it, and
    // sched_setaffinity reads it for the calling thread.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        bail!(
            "cannot pin to CPU {cpu}: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(())
}

async fn load(args: Args) -> Result<()> {
    let cases = Arc::new(cases(&args)?);
    let (addr, ca_pem, spawned) = match &args.spawn {
        Some(bin) => {
            let port = free_port()?;
            let dir = std::env::temp_dir().join(format!("admission-load-{}", std::process::id()));
            std::fs::create_dir_all(&dir)?;
            let ca = dir.join("ca.pem");
            let mut command = match args.server_cpu {
                Some(cpu) => {
                    let mut c = Command::new("taskset");
                    c.args(["-c", &cpu.to_string()]).arg(bin);
                    c
                }
                None => Command::new(bin),
            };
            let spawned_at = Instant::now();
            let child = command
                .arg("serve")
                .arg("--self-signed")
                .arg("--ca-bundle-out")
                .arg(&ca)
                .arg("--listen")
                .arg(format!("127.0.0.1:{port}"))
                .arg("--metrics-listen")
                .arg("127.0.0.1:0")
                .arg("--shutdown-delay")
                .arg("0s")
                .args(args.serve_args.split_whitespace())
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .with_context(|| format!("starting {}", bin.display()))?;
            let mut sp = Spawned {
                child,
                dir,
                ready_after: Duration::ZERO,
                idle_kib: None,
            };
            let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
            let deadline = Instant::now() + Duration::from_secs(30);
            let name = ServerName::try_from(args.server_name.clone())?;
            let pem = loop {
                // Listening first: the server writes its CA bundle before it binds, so the
                // file is whole by then; a TLS failure now is the answer (a name the
                // certificate does not hold, say), not a reason to wait.
                if TcpStream::connect(addr).await.is_ok()
                    && let Ok(pem) = std::fs::read(&ca)
                    && !pem.is_empty()
                {
                    let probe = Target {
                        addr,
                        name: name.clone(),
                        cfg: tls_config(&pem, false)?,
                        h2: false,
                        expect: http::StatusCode::OK,
                        traceparent: None,
                    };
                    connect(&probe).await?;
                    // Start to ready (a TLS handshake answered, the malloc re-exec included),
                    // and the resident size before any review.
                    sp.ready_after = spawned_at.elapsed();
                    sp.idle_kib = status_kib(sp.child.id(), "VmRSS");
                    break pem;
                }
                if let Some(status) = sp.child.try_wait()? {
                    bail!("server exited early: {status}");
                }
                if Instant::now() > deadline {
                    bail!("server did not come up within 30 s");
                }
                // Fine-grained, so that start to ready is measured to a few milliseconds.
                tokio::time::sleep(Duration::from_millis(2)).await;
            };
            (addr, pem, Some(sp))
        }
        None => {
            let ca = args
                .ca
                .as_ref()
                .context("--ca is required without --spawn")?;
            (args.addr, std::fs::read(ca)?, None)
        }
    };
    if !addr.ip().is_loopback() {
        bail!("refusing to send load to a non-loopback address {addr}");
    }
    let target = Target {
        addr,
        name: ServerName::try_from(args.server_name.clone())?,
        cfg: tls_config(&ca_pem, args.http2)?,
        h2: args.http2,
        expect: http::StatusCode::from_u16(args.expect_status)?,
        traceparent: args.traceparent.map(|p| p / 100.0),
    };
    if args.rate > 0.0 || args.calibrate_secs > 0 {
        let rate = if args.rate > 0.0 {
            args.rate
        } else {
            let (lat, elapsed, _) = closed_loop(
                &target,
                cases.clone(),
                &args,
                Duration::from_secs(args.calibrate_secs),
                None,
            )
            .await?;
            let max = lat.len() as f64 / elapsed.as_secs_f64();
            println!(
                "{}",
                serde_json::json!({"calibrated_max": max, "rate": max * args.rate_fraction})
            );
            max * args.rate_fraction
        };
        steady::run(
            steady::Plan {
                target,
                connections: args.connections,
                rate,
                duration: Duration::from_secs(args.duration_secs),
                report_every: Duration::from_secs(args.report_every_secs.max(1)),
                pid: spawned.as_ref().map(|s| s.child.id()),
            },
            cases,
        )
        .await?;
        stop(spawned);
        return Ok(());
    }
    let (mut all, elapsed, cpu) = closed_loop(
        &target,
        cases,
        &args,
        Duration::from_secs(args.duration_secs),
        spawned.as_ref().map(|s| s.child.id()).or(args.server_pid),
    )
    .await?;
    all.sort_unstable();
    let rss = spawned
        .as_ref()
        .and_then(|s| status_kib(s.child.id(), "VmHWM"));
    println!(
        "reviews: {}  connections: {}  protocol: {}  elapsed: {:.2}s",
        all.len(),
        args.connections,
        if args.http2 { "h2" } else { "http/1.1" },
        elapsed.as_secs_f64()
    );
    println!("reviews/s: {:.0}", all.len() as f64 / elapsed.as_secs_f64());
    println!(
        "latency ms: p50 {:.3}  p99 {:.3}  p99.9 {:.3}  max {:.3}",
        percentile(&all, 50.0),
        percentile(&all, 99.0),
        percentile(&all, 99.9),
        percentile(&all, 100.0)
    );
    if let Some(cpu) = cpu {
        let per_review = |d: Duration| d.as_secs_f64() * 1e6 / all.len().max(1) as f64;
        println!(
            "server CPU: {:.1} µs per review ({:.0} % of a core; user {:.1} µs, system {:.1} µs)",
            per_review(cpu.user + cpu.system),
            (cpu.user + cpu.system).as_secs_f64() * 100.0 / elapsed.as_secs_f64(),
            per_review(cpu.user),
            per_review(cpu.system),
        );
    }
    match rss {
        Some(kib) => println!("server peak RSS: {:.1} MiB", kib as f64 / 1024.0),
        None => println!("server peak RSS: n/a (not spawned)"),
    }
    if let Some(s) = &spawned {
        println!(
            "server start to ready: {:.1} ms",
            s.ready_after.as_secs_f64() * 1e3
        );
        if let Some(kib) = s.idle_kib {
            println!("server idle RSS: {:.1} MiB", kib as f64 / 1024.0);
        }
    }
    stop(spawned);
    Ok(())
}

/// Stops a spawned server with SIGTERM and waits for it.
fn stop(spawned: Option<Spawned>) {
    if let Some(mut sp) = spawned {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(sp.child.id().to_string())
            .status();
        let _ = sp.child.wait();
    }
}

/// `args.connections` connections, each sending its next review when the last is answered,
/// for `duration` (or `args.requests` in all) after `args.warmup` reviews each: the latencies
/// (ns) and the time measured. Every connection is opened and warmed up before the measured
/// window starts, at one instant for all; if any fails to open or warm up, the run stops at once
/// with its error instead of waiting for it.
async fn closed_loop(
    target: &Target,
    cases: Arc<Vec<Case>>,
    args: &Args,
    duration: Duration,
    server: Option<u32>,
) -> Result<(Vec<u64>, Duration, Option<CpuTime>)> {
    let per_conn = args.requests.div_ceil(args.connections as u64);
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel::<Result<()>>(args.connections);
    let (start_tx, start_rx) = tokio::sync::watch::channel::<Option<Instant>>(None);
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..args.connections {
        let (cases, target, ready_tx, mut start_rx) = (
            cases.clone(),
            target.clone(),
            ready_tx.clone(),
            start_rx.clone(),
        );
        let warmup = args.warmup;
        tasks.spawn(async move {
            let opened = async {
                let mut conn = Conn::open(&target).await?;
                for i in 0..warmup {
                    conn.review(&cases[(i as usize + w) % cases.len()], &target)
                        .await
                        .context("warm-up review")?;
                }
                anyhow::Ok(conn)
            }
            .await;
            let mut conn = match opened {
                Ok(c) => {
                    let _ = ready_tx.send(Ok(())).await;
                    c
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e)).await;
                    return Ok(Vec::new());
                }
            };
            let start = loop {
                if let Some(at) = *start_rx.borrow_and_update() {
                    break at;
                }
                start_rx.changed().await?;
            };
            let stop_at = start + duration;
            let mut lat = Vec::with_capacity(per_conn.min(1 << 20) as usize);
            let mut i = w;
            while (lat.len() as u64) < per_conn && Instant::now() < stop_at {
                let t = Instant::now();
                conn.review(&cases[i % cases.len()], &target).await?;
                lat.push(u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX));
                i += 1;
            }
            anyhow::Ok(lat)
        });
    }
    drop(ready_tx);
    for n in 0..args.connections {
        match ready_rx.recv().await {
            Some(Ok(())) => {}
            Some(Err(e)) => {
                tasks.abort_all();
                return Err(e.context(format!(
                    "connection {} of {} could not start",
                    n + 1,
                    args.connections
                )));
            }
            None => bail!("a connection task ended before it was ready"),
        }
    }
    let start = Instant::now();
    let cpu_before = server.and_then(cpu_time);
    start_tx.send(Some(start))?;
    let mut all = Vec::new();
    while let Some(done) = tasks.join_next().await {
        match done.context("connection task")? {
            Ok(lat) => all.extend(lat),
            Err(e) => {
                tasks.abort_all();
                return Err(e.context("a review failed during the measured window"));
            }
        }
    }
    let elapsed = start.elapsed();
    let cpu = cpu_before.and_then(|b| Some(server.and_then(cpu_time)?.since(b)));
    Ok((all, elapsed, cpu))
}

/// The CPU time a process has used (all threads), split as the kernel accounts it: in its own
/// code (user) and in the kernel on its behalf (system: system calls, and on loopback the
/// receiving side's TCP work the sender's `write` runs).
#[derive(Debug, Clone, Copy)]
struct CpuTime {
    user: Duration,
    system: Duration,
}

impl CpuTime {
    fn since(self, before: CpuTime) -> CpuTime {
        CpuTime {
            user: self.user.saturating_sub(before.user),
            system: self.system.saturating_sub(before.system),
        }
    }
}

/// The CPU time process `pid` has used: `/proc/<pid>/stat`'s utime and stime, in clock ticks
/// of 10 ms (Linux's USER_HZ, 100 on every architecture it reports to user space).
fn cpu_time(pid: u32) -> Option<CpuTime> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks = |i: usize| -> Option<Duration> {
        Some(Duration::from_millis(
            fields.get(i)?.parse::<u64>().ok()? * 10,
        ))
    };
    Some(CpuTime {
        user: ticks(11)?,
        system: ticks(12)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_cpu_time_is_read_as_user_and_system() {
        let before = cpu_time(std::process::id()).expect("this process's stat");
        // Spin in user code until a clock tick has been charged (at most a few hundred ms).
        let start = Instant::now();
        let mut x = 0u64;
        let after = loop {
            for i in 0..1_000_000u64 {
                x = std::hint::black_box(x.wrapping_add(i));
            }
            let now = cpu_time(std::process::id()).expect("this process's stat");
            if now.user > before.user || start.elapsed() > Duration::from_secs(10) {
                break now;
            }
        };
        let spent = after.since(before);
        assert!(spent.user > Duration::ZERO, "{spent:?}");
        assert!(cpu_time(u32::MAX).is_none());
    }
}
