//! Hostile clients against the real `registry-webhook serve` process, its memory read from
//! /proc: 2,000 idle TLS connections, 100 concurrent 7 MiB reviews over HTTP/1.1 and over one
//! HTTP/2 connection, an HTTP/2 rapid-reset burst. Throughout, good reviews on their own
//! connection are answered; the peak RSS of each phase stays under the Deployments' 128Mi
//! limit. Each phase prints its figures (peak and settled RSS, the slowest good review); speed is
//! reported, not asserted.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// The Deployments' memory limit.
const LIMIT_KIB: u64 = 128 * 1024;
const MODEL: &str = "/validate-registry-volcano-sh-v1alpha1-model";

/// Where and how to reach the server.
#[derive(Clone)]
struct Client {
    addr: SocketAddr,
    connector: TlsConnector,
}

struct Served {
    child: Child,
    client: Client,
    pid: u32,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn status_kib(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

/// Starts the peak (VmHWM) over from the current RSS.
fn reset_peak(pid: u32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").unwrap();
}

async fn start(dir: &Path) -> Served {
    rustls::crypto::ring::default_provider()
        .install_default()
        .ok();
    let (port, metrics) = (testenv::free_port().unwrap(), testenv::free_port().unwrap());
    let ca = dir.join("ca.pem");
    let log = std::fs::File::create(dir.join("server.log")).unwrap();
    // HOSTILE_SERVER_BINARY measures another build (the release or image profile) the same way.
    let binary = std::env::var_os("HOSTILE_SERVER_BINARY")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_registry-webhook").into());
    let child = Command::new(binary)
        .args(["serve", "--self-signed", "--log-format", "text"])
        .arg("--ca-bundle-out")
        .arg(&ca)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--metrics-listen", &format!("127.0.0.1:{metrics}")])
        .arg("--state")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/state.yaml"))
        .env("RUST_LOG", "warn")
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let pid = child.id();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let started = Instant::now();
    let pem = loop {
        if let Ok(p) = std::fs::read_to_string(&ca)
            && p.contains("END CERTIFICATE")
            && TcpStream::connect(addr).await.is_ok()
        {
            break p;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "server did not start"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // The server executed itself again with glibc's cache size (trim::tune_malloc), same PID:
    // the memory bounds below hold with the tuning production runs.
    // (glibc rewrites the variable in place as it parses it, so only its first entry is sure to
    // read back whole.)
    let environ = String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/environ")).unwrap())
        .into_owned();
    let first = admission_kit::server::trim::MALLOC_TUNABLES
        .split(':')
        .next()
        .unwrap();
    assert!(
        environ.split('\0').any(|v| v
            .strip_prefix("GLIBC_TUNABLES=")
            .is_some_and(|t| t.starts_with(first))),
        "the server runs without {first}"
    );
    let der: CertificateDer<'static> = rustls_pemfile::certs(&mut pem.as_bytes())
        .next()
        .unwrap()
        .unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der).unwrap();
    let mut cfg = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Served {
        child,
        client: Client {
            addr,
            connector: TlsConnector::from(Arc::new(cfg)),
        },
        pid,
    }
}

async fn tls(s: &Client, alpn: &[u8]) -> std::io::Result<TlsStream<TcpStream>> {
    let tcp = TcpStream::connect(s.addr).await?;
    let mut cfg = (**s.connector.config()).clone();
    cfg.alpn_protocols = vec![alpn.to_vec()];
    TlsConnector::from(Arc::new(cfg))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
}

fn model_review(pad: usize) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u", "operation": "CREATE", "namespace": "default",
            "kind": {"group": "registry.volcano.sh", "version": "v1alpha1", "kind": "Model"},
            "resource": {"group": "registry.volcano.sh", "version": "v1alpha1", "resource": "models"},
            "object": {"apiVersion": "registry.volcano.sh/v1alpha1", "kind": "Model",
                "metadata": {"name": "m", "namespace": "default", "annotations": {"pad": "x".repeat(pad)}},
                "spec": {"backends": [{"name": "b", "type": "vLLM", "modelURI": "hf://a/b",
                    "minReplicas": 1, "maxReplicas": 1,
                    "workers": [{"type": "server", "image": "vllm/vllm-openai:v0.10.1"}]}]}}}
    }))
    .unwrap()
}

fn post(body: Vec<u8>) -> http::Request<Full<Bytes>> {
    http::Request::post(MODEL)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

/// One good review on a new HTTP/1.1 connection: its status and how long it took.
async fn good_review(s: &Client) -> (u16, Duration) {
    let started = Instant::now();
    let io = TokioIo::new(tls(s, b"http/1.1").await.unwrap());
    let (mut send, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
    tokio::spawn(conn);
    let resp = send.send_request(post(model_review(0))).await.unwrap();
    (status_read(resp).await, started.elapsed())
}

/// The answer's status, once its body has been read.
async fn status_read(resp: hyper::Response<hyper::body::Incoming>) -> u16 {
    let status = resp.status().as_u16();
    let _ = resp.into_body().collect().await;
    status
}

/// The statuses of uploads running as tasks (`None`: no answer).
async fn statuses(tasks: Vec<tokio::task::JoinHandle<Option<u16>>>) -> Vec<Option<u16>> {
    let mut codes = Vec::new();
    for t in tasks {
        codes.push(t.await.unwrap());
    }
    codes
}

/// Runs one phase with good reviews alongside: its output, and its figures once settled.
async fn phase<F: std::future::Future>(
    s: &Client,
    pid: u32,
    name: &'static str,
    run: F,
    note: impl FnOnce(&F::Output) -> String,
) -> (F::Output, Phase) {
    reset_peak(pid);
    let (out, slowest) = while_good_reviews(s, run).await;
    let peak_kib = status_kib(pid, "VmHWM:");
    let note = note(&out);
    let settled_kib = settle(pid).await;
    let p = Phase {
        name,
        peak_kib,
        settled_kib,
        slowest,
        note,
    };
    (out, p)
}

/// Good reviews every 50 ms while `phase` runs; the slowest, after checking all were answered.
async fn while_good_reviews<F: std::future::Future>(s: &Client, phase: F) -> (F::Output, Duration) {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let probe = {
        let stop = stop.clone();
        let s = s.clone();
        tokio::spawn(async move {
            let mut slowest = Duration::ZERO;
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Acquire) || n == 0 {
                let (status, took) = good_review(&s).await;
                assert_eq!(
                    status, 200,
                    "a good review was not answered during the phase"
                );
                slowest = slowest.max(took);
                n += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            slowest
        })
    };
    let out = phase.await;
    stop.store(true, std::sync::atomic::Ordering::Release);
    (out, probe.await.unwrap())
}

struct Phase {
    name: &'static str,
    peak_kib: u64,
    settled_kib: u64,
    slowest: Duration,
    note: String,
}

/// RSS once the burst is over (the server returns free memory within about 5 s of one).
async fn settle(pid: u32) -> u64 {
    tokio::time::sleep(Duration::from_secs(7)).await;
    status_kib(pid, "VmRSS:")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hostile_clients_stay_within_the_memory_limit_and_good_reviews_are_answered() {
    let dir = tempfile::tempdir().unwrap();
    let served = start(dir.path()).await;
    let (s, pid) = (&served.client, served.pid);
    let (status, _) = good_review(s).await;
    assert_eq!(status, 200);
    let idle = status_kib(pid, "VmRSS:");
    let mut phases = Vec::new();

    // 2,000 connections that finish the handshake and send nothing (closed when the phase ends).
    let (_, p) = phase(
        s,
        pid,
        "2,000 idle TLS connections",
        async {
            let mut held = Vec::new();
            for _ in 0..2000 {
                held.push(tls(s, b"http/1.1").await);
            }
            held.iter().filter(|c| c.is_ok()).count()
        },
        |open| format!("{open} handshakes completed"),
    )
    .await;
    phases.push(p);

    // 100 reviews of 7 MiB at once, each on its own HTTP/1.1 connection.
    let big = model_review(7 * 1024 * 1024 - 2048);
    let uploads = (0..100).map(|_| {
        let body = big.clone();
        let c = s.clone();
        tokio::spawn(async move {
            let io = TokioIo::new(tls(&c, b"http/1.1").await.ok()?);
            let (mut send, conn) = hyper::client::conn::http1::handshake(io).await.ok()?;
            tokio::spawn(conn);
            Some(status_read(send.send_request(post(body)).await.ok()?).await)
        })
    });
    let run = statuses(uploads.collect());
    let (_, p) = phase(s, pid, "100 × 7 MiB over HTTP/1.1", run, |c| tally(c)).await;
    phases.push(p);

    // The same over one HTTP/2 connection (100 streams).
    let run = async {
        let io = TokioIo::new(tls(s, b"h2").await.unwrap());
        let (send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .unwrap();
        tokio::spawn(conn);
        let uploads = (0..100).map(|_| {
            let mut send = send.clone();
            let body = big.clone();
            tokio::spawn(async move {
                Some(status_read(send.send_request(post(body)).await.ok()?).await)
            })
        });
        statuses(uploads.collect()).await
    };
    let (_, p) = phase(
        s,
        pid,
        "100 × 7 MiB over one HTTP/2 connection",
        run,
        |c| tally(c),
    )
    .await;
    phases.push(p);

    // Rapid reset: streams opened and cancelled at once, as fast as the client can.
    let run = async {
        let io = tls(s, b"h2").await.unwrap();
        let Ok((client, conn)) = h2::client::handshake(io).await else {
            return 0;
        };
        tokio::spawn(conn);
        let mut opened = 0u32;
        let Ok(mut client) = client.ready().await else {
            return 0;
        };
        for _ in 0..20_000 {
            let req = http::Request::post(MODEL)
                .header("content-type", "application/json")
                .body(())
                .unwrap();
            match client.send_request(req, false) {
                Ok((_, mut stream)) => {
                    stream.send_reset(h2::Reason::CANCEL);
                    opened += 1;
                }
                Err(_) => break,
            }
            match client.ready().await {
                Ok(c) => client = c,
                Err(_) => break,
            }
        }
        opened
    };
    let (_, p) = phase(s, pid, "HTTP/2 rapid reset", run, |n| {
        format!("{n} streams opened and reset before the server ended the connection")
    })
    .await;
    phases.push(p);

    println!("registry-webhook serve: idle RSS {} KiB", idle);
    println!("| phase | peak RSS | RSS 7 s after | slowest good review | what happened |");
    println!("|---|---|---|---|---|");
    for p in &phases {
        println!(
            "| {} | {:.1} MiB | {:.1} MiB | {:.1} ms | {} |",
            p.name,
            p.peak_kib as f64 / 1024.0,
            p.settled_kib as f64 / 1024.0,
            p.slowest.as_secs_f64() * 1e3,
            p.note
        );
    }
    // Memory goes back after the bursts: within 35 s (two of the server's 15-s trim retries),
    // RSS is back within 24 MiB of idle.
    let mut rss = status_kib(pid, "VmRSS:");
    for _ in 0..35 {
        if rss < idle + 24 * 1024 {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        rss = status_kib(pid, "VmRSS:");
    }
    assert!(
        rss < idle + 24 * 1024,
        "RSS {rss} KiB stays far above idle {idle} KiB after the bursts"
    );
    for p in &phases {
        assert!(
            p.peak_kib < LIMIT_KIB,
            "{}: peak RSS {} KiB reaches the 128Mi limit",
            p.name,
            p.peak_kib
        );
    }
}

fn tally(codes: &[Option<u16>]) -> String {
    let mut m = std::collections::BTreeMap::<String, usize>::new();
    for c in codes {
        *m.entry(c.map_or("no answer".into(), |c| c.to_string()))
            .or_default() += 1;
    }
    m.iter()
        .map(|(k, v)| format!("{v}× {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}
