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

async fn connect(
    addr: SocketAddr,
    cfg: Arc<rustls::ClientConfig>,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let name = ServerName::try_from("localhost")?;
    Ok(tokio_rustls::TlsConnector::from(cfg)
        .connect(name, tcp)
        .await?)
}

enum Conn {
    H1(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    H2(hyper::client::conn::http2::SendRequest<Full<Bytes>>),
}

impl Conn {
    async fn open(addr: SocketAddr, cfg: Arc<rustls::ClientConfig>, h2: bool) -> Result<Self> {
        let io = TokioIo::new(connect(addr, cfg).await?);
        if h2 {
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

    async fn review(&mut self, case: &Case) -> Result<()> {
        let req = http::Request::post(&case.path)
            .header("host", "localhost")
            .header("content-type", "application/json")
            .body(Full::new(case.body.clone()))?;
        let resp = match self {
            Conn::H1(s) => s.send_request(req).await?,
            Conn::H2(s) => s.send_request(req).await?,
        };
        let status = resp.status();
        let body = resp.into_body().collect().await?.to_bytes();
        if status != http::StatusCode::OK {
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

#[tokio::main]
async fn main() -> Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = Args::parse();
    let cases = Arc::new(cases(&args)?);
    let (addr, ca_pem, spawned) = match &args.spawn {
        Some(bin) => {
            let port = free_port()?;
            let dir = std::env::temp_dir().join(format!("admission-load-{}", std::process::id()));
            std::fs::create_dir_all(&dir)?;
            let ca = dir.join("ca.pem");
            let child = Command::new(bin)
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
            let mut sp = Spawned { child, dir };
            let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
            let deadline = Instant::now() + Duration::from_secs(30);
            let pem = loop {
                if let Ok(pem) = std::fs::read(&ca)
                    && !pem.is_empty()
                    && connect(addr, tls_config(&pem, false)?).await.is_ok()
                {
                    break pem;
                }
                if let Some(status) = sp.child.try_wait()? {
                    bail!("server exited early: {status}");
                }
                if Instant::now() > deadline {
                    bail!("server did not come up within 30 s");
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
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
    let cfg = tls_config(&ca_pem, args.http2)?;
    if args.rate > 0.0 || args.calibrate_secs > 0 {
        let rate = if args.rate > 0.0 {
            args.rate
        } else {
            let (lat, elapsed) = closed_loop(
                addr,
                cfg.clone(),
                cases.clone(),
                &args,
                Duration::from_secs(args.calibrate_secs),
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
                addr,
                cfg,
                h2: args.http2,
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
    let (mut all, elapsed) = closed_loop(
        addr,
        cfg,
        cases,
        &args,
        Duration::from_secs(args.duration_secs),
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
    match rss {
        Some(kib) => println!("server peak RSS: {:.1} MiB", kib as f64 / 1024.0),
        None => println!("server peak RSS: n/a (not spawned)"),
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
/// (ns) and the time measured.
async fn closed_loop(
    addr: SocketAddr,
    cfg: Arc<rustls::ClientConfig>,
    cases: Arc<Vec<Case>>,
    args: &Args,
    duration: Duration,
) -> Result<(Vec<u64>, Duration)> {
    let per_conn = args.requests.div_ceil(args.connections as u64);
    let barrier = Arc::new(tokio::sync::Barrier::new(args.connections + 1));
    let mut tasks = Vec::new();
    for w in 0..args.connections {
        let (cases, cfg, barrier) = (cases.clone(), cfg.clone(), barrier.clone());
        let (warmup, h2) = (args.warmup, args.http2);
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::open(addr, cfg, h2).await?;
            for i in 0..warmup {
                conn.review(&cases[(i as usize + w) % cases.len()]).await?;
            }
            barrier.wait().await;
            let stop_at = Instant::now() + duration;
            let mut lat = Vec::with_capacity(per_conn.min(1 << 20) as usize);
            let mut i = w;
            while (lat.len() as u64) < per_conn && Instant::now() < stop_at {
                let t = Instant::now();
                conn.review(&cases[i % cases.len()]).await?;
                lat.push(u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX));
                i += 1;
            }
            anyhow::Ok(lat)
        }));
    }
    barrier.wait().await;
    let start = Instant::now();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await??);
    }
    Ok((all, start.elapsed()))
}
