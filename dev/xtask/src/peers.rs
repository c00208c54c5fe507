//! `cargo xtask bench --peers`: each bench path beside its upstream's own server. The upstream
//! servers are the oracles of `tools/upstream-oracle` in their `serve` mode: upstream's handlers
//! at the pinned tags, over Go's net/http and TLS as upstream serves them. For each path the two
//! answers are first checked to be the same (the oracle's own comparison); then every
//! measurement is one `admission-load` run against a fresh server pinned to the server's CPU,
//! the client on the other, at 4 and 16 keep-alive connections, ours and upstream's
//! interleaved run by run so that a slow spell of the machine falls on both; the figures are
//! medians.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use serde::Deserialize as _;

use crate::bench::{self, Figures, Options, Row};

/// One path and the upstream server it is measured against.
struct Peer {
    /// The bench row ([`bench::ROWS`]) by name: service, path, state and review.
    row: &'static str,
    /// The oracle's folder in `tools/upstream-oracle`.
    oracle: &'static str,
    /// Whether the oracle's `serve` takes the row's state (as a case file).
    with_state: bool,
}

const PEERS: [Peer; 10] = [
    Peer {
        row: "registry validate ModelServing, Kthena v1.0 (6.9 KB)",
        oracle: "kthena-v1",
        with_state: false,
    },
    Peer {
        row: "registry validate ModelRoute, Kthena v1.0 (1.0 KB)",
        oracle: "kthena-v1",
        with_state: false,
    },
    Peer {
        row: "registry mutate AutoscalingPolicy, Kthena v1.0 (2.1 KB)",
        oracle: "kthena-v1",
        with_state: false,
    },
    Peer {
        row: "training validate PyTorchJob (4.9 KB)",
        oracle: "training-v1.9.4",
        with_state: false,
    },
    Peer {
        row: "training validate TrainJob, Trainer v2.3, runtime from state (2.9 KB)",
        oracle: "trainer-v2.3.0",
        with_state: true,
    },
    Peer {
        row: "training mutate TrainJob, Trainer v2.3 (2.9 KB)",
        oracle: "trainer-v2.3.0",
        with_state: true,
    },
    Peer {
        row: "scheduling mutate Pod (1.7 KB)",
        oracle: "koordinator-a7a1b76",
        with_state: true,
    },
    Peer {
        row: "scheduling validate Pod, quota in-process (1.7 KB)",
        oracle: "koordinator-a7a1b76",
        with_state: true,
    },
    // Ours asks quota-state (as deployed); upstream's webhook holds the quota tree itself.
    Peer {
        row: "scheduling validate Pod, quota through quota-state (1.7 KB)",
        oracle: "koordinator-a7a1b76",
        with_state: true,
    },
    Peer {
        row: "node-config mutate node status (22 KB)",
        oracle: "koordinator-a7a1b76",
        with_state: true,
    },
];

/// The median of one figure over runs.
fn m(v: &[Figures], f: fn(&Figures) -> f64) -> f64 {
    bench::median(v.iter().map(f).collect())
}

/// The connections each path is measured at.
const CONNECTIONS: [usize; 2] = [4, 16];

/// Runs the side-by-side with the release binaries in `bin_dir` and prints the table.
/// Koordinator's paths need `checkout` (a Koordinator tree at the pin); without it they are
/// left out, and said so.
pub fn run(root: &Path, bin_dir: &Path, o: &Options, checkout: Option<&Path>) -> Result<()> {
    let work = std::env::temp_dir().join(format!("bench-peers-{}", std::process::id()));
    std::fs::create_dir_all(&work)?;
    let mut chosen = Vec::new();
    for peer in &PEERS {
        let row = bench::ROWS
            .iter()
            .find(|r| r.name == peer.row)
            .with_context(|| format!("no bench row {}", peer.row))?;
        if !o.only.is_empty() && !o.only.iter().any(|n| row.name.contains(n.as_str())) {
            continue;
        }
        if peer.oracle.starts_with("koordinator") && checkout.is_none() {
            eprintln!("{}: left out (no --koordinator-src)", row.name);
            continue;
        }
        let case = case_file(root, row, &work)?;
        if let Some(diff) =
            crate::differential::differs_on(peer.oracle, root, checkout, row.service, &case)?
        {
            bail!("{}: upstream answers otherwise:\n{diff}", row.name);
        }
        let oracle = crate::differential::oracle_named(peer.oracle, root, checkout)?;
        chosen.push((peer, row, oracle, case));
    }
    // [path][connections] → (ours, upstream) per run.
    let mut all = vec![[(); CONNECTIONS.len()].map(|()| (Vec::new(), Vec::new())); chosen.len()];
    for run in 0..o.runs {
        for (i, (peer, row, oracle, case)) in chosen.iter().enumerate() {
            for (k, &connections) in CONNECTIONS.iter().enumerate() {
                let o = Options {
                    connections,
                    ..o.clone()
                };
                let ours = bench::once(root, bin_dir, row, &o)
                    .with_context(|| format!("{}: ours", row.name))?;
                let state = peer.with_state.then_some(case.as_path());
                let theirs = upstream(root, bin_dir, oracle, state, row, &o, &work)
                    .with_context(|| format!("{}: upstream", row.name))?;
                eprintln!(
                    "run {}: {} at {connections}: ours {:.0}/s, upstream {:.0}/s",
                    run + 1,
                    row.name,
                    ours.per_sec,
                    theirs.per_sec
                );
                all[i][k].0.push(ours);
                all[i][k].1.push(theirs);
            }
        }
    }
    println!(
        "| path | upstream | ours /s (4 / 16 conns) | upstream /s (4 / 16) | ratio (4 / 16) | p99 ms ours / upstream (4 conns) |"
    );
    println!("|---|---|---|---|---|---|");
    for ((peer, row, _, _), figures) in chosen.iter().zip(&all) {
        let rate = |k: usize| {
            (
                m(&figures[k].0, |f| f.per_sec),
                m(&figures[k].1, |f| f.per_sec),
            )
        };
        let ((o4, u4), (o16, u16)) = (rate(0), rate(1));
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
        println!(
            "| {} | {} | {o4:.0} / {o16:.0} | {u4:.0} / {u16:.0} | {:.1}× / {:.1}× | {:.3} / {:.3} |",
            row.name,
            peer.oracle,
            ratio(o4, u4),
            ratio(o16, u16),
            m(&figures[0].0, |f| f.p99),
            m(&figures[0].1, |f| f.p99),
        );
    }
    // The same runs by the server's CPU time: what a review costs the server whatever the
    // client reaches, split between the server's code and the kernel (system calls, and on
    // loopback the receiver's TCP work run by the sender's write).
    println!(
        "\n| path | server CPU µs per review, ours / upstream (4 conns) | of which system µs, ours / upstream | CPU ratio (4 / 16 conns) | ratio of the user part alone (4 conns) |"
    );
    println!("|---|---|---|---|---|");
    for ((_, row, _, _), figures) in chosen.iter().zip(&all) {
        // Upstream's cost over ours, as the throughput ratio is ours over upstream's.
        let ratio = |a: f64, b: f64| if a > 0.0 { b / a } else { 0.0 };
        let cpu = |k: usize| {
            (
                m(&figures[k].0, |f| f.cpu_us),
                m(&figures[k].1, |f| f.cpu_us),
            )
        };
        let ((o4, u4), (o16, u16)) = (cpu(0), cpu(1));
        let (os, us) = (
            m(&figures[0].0, |f| f.system_us),
            m(&figures[0].1, |f| f.system_us),
        );
        println!(
            "| {} | {o4:.1} / {u4:.1} | {os:.1} / {us:.1} | {:.1}× / {:.1}× | {:.1}× |",
            row.name,
            ratio(o4, u4),
            ratio(o16, u16),
            ratio(
                m(&figures[0].0, |f| f.user_us),
                m(&figures[0].1, |f| f.user_us)
            ),
        );
    }
    println!(
        "\n{} runs of {} s each per side and connection count, interleaved, medians; server on CPU {}, client on CPU {}; answers checked the same first.",
        o.runs, o.seconds, o.server_cpu, o.client_cpu
    );
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}

/// The row's review as a case file (`{"path", "state", "review"}`), the form the oracles read:
/// for the comparison, and as the state a stateful upstream server is started with.
fn case_file(root: &Path, row: &Row, work: &Path) -> Result<PathBuf> {
    let review: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(row.body))?)
            .with_context(|| row.body.to_owned())?;
    // The state file's objects: its documents, a `List`'s items in their place.
    let mut state = Vec::new();
    if let Some(file) = row.state {
        let text = std::fs::read_to_string(root.join(file))?;
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            let doc = serde_json::Value::deserialize(doc).with_context(|| file.to_owned())?;
            match doc.get("items").and_then(serde_json::Value::as_array) {
                Some(items) if doc["kind"] == "List" => state.extend(items.iter().cloned()),
                _ if doc.is_null() => {}
                _ => state.push(doc),
            }
        }
    }
    let case = serde_json::json!({"path": row.path, "state": state, "review": review});
    let file = work.join(format!(
        "{}.json",
        row.path.trim_start_matches('/').replace('/', "_")
    ));
    std::fs::write(&file, serde_json::to_vec_pretty(&case)?)?;
    Ok(file)
}

/// One `admission-load` run against a fresh upstream server on the server's CPU.
fn upstream(
    root: &Path,
    bin_dir: &Path,
    oracle: &Path,
    state: Option<&Path>,
    row: &Row,
    o: &Options,
    work: &Path,
) -> Result<Figures> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let ca = work.join(format!("ca-{port}.pem"));
    let _ = std::fs::remove_file(&ca);
    let mut serve = Command::new("taskset");
    serve
        .args(["-c", &o.server_cpu.to_string()])
        .arg(oracle)
        .arg("serve")
        .arg(format!("127.0.0.1:{port}"))
        .arg(&ca)
        .args(state)
        .stdout(std::process::Stdio::null());
    let server = Server(serve.spawn().context("starting the upstream server")?);
    // The oracle writes its CA once it listens.
    let start = Instant::now();
    while !ca.is_file() {
        if start.elapsed() > Duration::from_secs(60) {
            bail!("the upstream server did not start within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(100));
    let mut load = Command::new(bin_dir.join("admission-load"));
    load.args(["--addr", &format!("127.0.0.1:{port}")])
        .arg("--ca")
        .arg(&ca)
        .arg("--case")
        .arg(format!("{}={}", row.path, root.join(row.body).display()))
        .args(["--connections", &o.connections.to_string()])
        .args(["--duration-secs", &o.seconds.to_string()])
        .args(["--requests", "100000000"])
        .args(["--warmup", "500"])
        .args(["--expect-status", &row.expect.to_string()])
        .args(["--client-cpu", &o.client_cpu.to_string()])
        // taskset executes the oracle in its own process, so the child's pid is the server's.
        .args(["--server-pid", &server.0.id().to_string()]);
    let figures = bench::run_load(load);
    drop(server);
    figures
}

/// A started server, stopped when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
