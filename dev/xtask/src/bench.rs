//! `cargo xtask bench`: the load benchmark suite, one markdown table. Each row is a release
//! service spawned by `admission-load` with its bench payload, the server pinned to one CPU and
//! the client to the other, four keep-alive TLS connections (64 for the busy pair of Pod rows),
//! after a warm-up outside the measured window; runs are interleaved (row 1..n, then again) so
//! that a slow spell of this shared machine spreads over every row, and each figure is the
//! median of the runs. The last row is the client's own ceiling: the same client against a path
//! the server refuses at once (404), which must stay well above every real row for the figures
//! to be the server's. After the table, each quota-state row against its in-process row.

use std::path::Path;
use std::process::Command;

use anyhow::{Context as _, Result, bail};

/// One row: a service, how it serves, what is sent.
pub struct Row {
    /// What the table calls it.
    pub name: &'static str,
    /// The service binary.
    pub service: &'static str,
    /// Its `--state` file, from the repository's root.
    pub state: Option<&'static str>,
    /// The endpoint loaded.
    pub path: &'static str,
    /// The review sent, from the repository's root.
    pub body: &'static str,
    /// The status every review gets (404 for the client's ceiling).
    pub expect: u16,
    /// Asks quota-state every quota question (a quota-state runs beside the server, on its
    /// CPU).
    pub quota_state: bool,
    /// Keep-alive connections, when not the suite's: the pair of Pod rows at a busy API
    /// server's concurrency, where quota-state's calls carry many pods each.
    pub connections: Option<usize>,
}

/// The connections of the busy pair of Pod rows: reviews in flight at once from an API server
/// serving many writers (a call to quota-state then carries about 30 pods).
const BUSY: usize = 64;

/// The Pod validation with the quota evaluated in-process.
const POD_VALIDATE: Row = Row {
    name: "scheduling validate Pod, quota in-process (1.7 KB)",
    service: "scheduling-webhook",
    state: Some("services/scheduling-webhook/examples/state.yaml"),
    path: "/validate-pod",
    body: "services/scheduling-webhook/benches/pod-review.json",
    expect: 200,
    quota_state: false,
    connections: None,
};

/// The same review with its quota question asked of quota-state.
const POD_VALIDATE_QUOTA_STATE: Row = Row {
    name: "scheduling validate Pod, quota through quota-state (1.7 KB)",
    body: "services/scheduling-webhook/benches/pod-review-quota-state.json",
    quota_state: true,
    ..POD_VALIDATE
};

/// A PyTorchJob judged whole against its quota (WQ) through quota-state: 1 Master + 3 Workers
/// of the Pod row's template, in the same namespace and quota.
const WORKLOAD_QUOTA_STATE: Row = Row {
    name: "scheduling validate PyTorchJob workload, quota through quota-state (3.3 KB)",
    path: "/validate-workload-kubeflow-org-v1-pytorchjob",
    body: "services/scheduling-webhook/benches/pytorchjob-workload-review-quota-state.json",
    ..POD_VALIDATE_QUOTA_STATE
};

/// The suite.
pub const ROWS: [Row; 16] = [
    Row {
        name: "registry validate Model (4.6 KB)",
        service: "registry-webhook",
        state: Some("services/registry-webhook/examples/state.yaml"),
        path: "/validate-registry-volcano-sh-v1alpha1-model",
        body: "services/registry-webhook/benches/model-review.json",
        expect: 200,
        quota_state: false,
        connections: None,
    },
    Row {
        name: "registry mutate Model (4.5 KB)",
        service: "registry-webhook",
        state: Some("services/registry-webhook/examples/state.yaml"),
        path: "/mutate-registry-volcano-sh-v1alpha1-model",
        body: "services/registry-webhook/benches/model-review-mutate.json",
        expect: 200,
        quota_state: false,
        connections: None,
    },
    Row {
        name: "registry validate ModelServing, Kthena v1.0 (6.9 KB)",
        service: "registry-webhook",
        state: Some("services/registry-webhook/examples/state.yaml"),
        path: "/validate-workload-ai-v1alpha1-modelserving",
        body: "services/registry-webhook/benches/modelserving-review.json",
        expect: 200,
        quota_state: false,
        connections: None,
    },
    Row {
        name: "registry mutate AutoscalingPolicy, Kthena v1.0 (2.1 KB)",
        service: "registry-webhook",
        state: Some("services/registry-webhook/examples/state.yaml"),
        path: "/mutate/autoscalingpolicy",
        body: "services/registry-webhook/benches/autoscalingpolicy-v1-review-mutate.json",
        expect: 200,
        quota_state: false,
        connections: None,
    },
    Row {
        name: "registry validate ModelRoute, Kthena v1.0 (1.0 KB)",
        service: "registry-webhook",
        state: Some("services/registry-webhook/examples/state.yaml"),
        path: "/validate/modelroute",
        body: "services/registry-webhook/benches/modelroute-review.json",
        expect: 200,
        quota_state: false,
        connections: None,
    },
    Row {
        name: "node-config mutate node status (22 KB)",
        service: "node-config-webhook",
        state: Some("services/node-config-webhook/examples/state.yaml"),
        path: "/mutate-node-status",
        body: "services/node-config-webhook/benches/node-status-review.json",
        expect: 200,
        quota_state: false,
        connections: None,
    },
    Row {
        name: "training validate PyTorchJob (4.9 KB)",
        service: "training-webhook",
        state: Some("services/training-webhook/examples/state.yaml"),
        path: "/validate-kubeflow-org-v1-pytorchjob",
        body: "services/training-webhook/benches/pytorchjob-review.json",
        expect: 200,
        quota_state: false,
        connections: None,
    },
    Row {
        name: "training validate TrainJob, Trainer v2.3, runtime from state (2.9 KB)",
        service: "training-webhook",
        state: Some("services/training-webhook/examples/state.yaml"),
        path: "/validate-trainer-kubeflow-org-v1alpha1-trainjob",
        body: "services/training-webhook/benches/trainjob-review.json",
        expect: 200,
        quota_state: false,
        connections: None,
    },
    Row {
        name: "training mutate TrainJob, Trainer v2.3 (2.9 KB)",
        service: "training-webhook",
        state: Some("services/training-webhook/examples/state.yaml"),
        path: "/mutate-trainer-kubeflow-org-v1alpha1-trainjob",
        body: "services/training-webhook/benches/trainjob-review-mutate.json",
        expect: 200,
        quota_state: false,
        connections: None,
    },
    POD_VALIDATE,
    POD_VALIDATE_QUOTA_STATE,
    WORKLOAD_QUOTA_STATE,
    Row {
        name: "scheduling mutate Pod (1.7 KB)",
        service: "scheduling-webhook",
        state: Some("services/scheduling-webhook/examples/state.yaml"),
        path: "/mutate-pod",
        body: "services/scheduling-webhook/benches/pod-review.json",
        expect: 200,
        quota_state: false,
        connections: None,
    },
    Row {
        name: "scheduling validate Pod, quota in-process, 64 connections (1.7 KB)",
        connections: Some(BUSY),
        ..POD_VALIDATE
    },
    Row {
        name: "scheduling validate Pod, quota through quota-state, 64 connections (1.7 KB)",
        connections: Some(BUSY),
        ..POD_VALIDATE_QUOTA_STATE
    },
    Row {
        name: "client ceiling: 404 from registry-webhook",
        service: "registry-webhook",
        state: Some("services/registry-webhook/examples/state.yaml"),
        path: "/not-served",
        body: "services/registry-webhook/benches/model-review.json",
        expect: 404,
        quota_state: false,
        connections: None,
    },
];

/// How the suite runs.
#[derive(Clone)]
pub struct Options {
    /// Runs per row (the median is printed).
    pub runs: usize,
    /// Measured seconds per run.
    pub seconds: u64,
    /// Keep-alive connections.
    pub connections: usize,
    /// CPU of the server; the client takes the other one.
    pub server_cpu: usize,
    /// CPU of the client.
    pub client_cpu: usize,
    /// Only the rows whose name contains one of these (all when empty).
    pub only: Vec<String>,
}

/// One run's figures.
#[derive(Debug, Clone, Copy, Default)]
pub struct Figures {
    /// Reviews (or calls) a second.
    pub per_sec: f64,
    p50: f64,
    /// 99th percentile latency, ms.
    pub p99: f64,
    p999: f64,
    rss_mib: f64,
    /// Spawn to first answered TLS handshake, ms.
    ready_ms: f64,
    /// Resident size then, MiB.
    idle_mib: f64,
    /// The server's CPU time per review, µs (0 where not measured), and its parts in the
    /// server's own code and in the kernel.
    pub cpu_us: f64,
    /// User part of [`Figures::cpu_us`].
    pub user_us: f64,
    /// System part of [`Figures::cpu_us`].
    pub system_us: f64,
}

/// Runs the suite with the release binaries in `bin_dir` and prints the table.
pub fn run(root: &Path, bin_dir: &Path, o: &Options) -> Result<()> {
    let rows: Vec<&Row> = ROWS
        .iter()
        .filter(|r| o.only.is_empty() || o.only.iter().any(|n| r.name.contains(n.as_str())))
        .collect();
    let mut all: Vec<Vec<Figures>> = vec![Vec::new(); rows.len()];
    for run in 0..o.runs {
        for (i, row) in rows.iter().enumerate() {
            let f = once(root, bin_dir, row, o)
                .with_context(|| format!("{} (run {})", row.name, run + 1))?;
            eprintln!(
                "run {}: {}: {:.0}/s p99 {:.3} ms",
                run + 1,
                row.name,
                f.per_sec,
                f.p99
            );
            all[i].push(f);
        }
    }
    println!(
        "| path | reviews/s (1 core) | p50 ms | p99 ms | p99.9 ms | server peak RSS MiB | start to ready ms | idle RSS MiB | image binary MiB |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (row, figures) in rows.iter().zip(&all) {
        let m = |f: fn(&Figures) -> f64| median(figures.iter().map(f).collect());
        // The size that ships: the `image` profile's stripped binary, when one at least as new
        // as the measured release binary is there (an older one is another build).
        let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
        let image = root.join("target/image").join(row.service);
        let size = match (modified(&image), modified(&bin_dir.join(row.service))) {
            (Some(i), Some(r)) if i >= r => std::fs::metadata(&image)
                .map_or("–".to_owned(), |m| {
                    format!("{:.1}", m.len() as f64 / (1024.0 * 1024.0))
                }),
            _ => "–".to_owned(),
        };
        println!(
            "| {} | {:.0} | {:.3} | {:.3} | {:.3} | {:.1} | {:.0} | {:.1} | {} |",
            row.name,
            m(|f| f.per_sec),
            m(|f| f.p50),
            m(|f| f.p99),
            m(|f| f.p999),
            m(|f| f.rss_mib),
            m(|f| f.ready_ms),
            m(|f| f.idle_mib),
            size
        );
    }
    println!(
        "\n{} runs of {} s each, interleaved, medians; {} connections unless the row says; server on CPU {}, client on CPU {}; image binary: `cargo build --profile image -p <service>` (– when not built).",
        o.runs, o.seconds, o.connections, o.server_cpu, o.client_cpu
    );
    let per_sec: Vec<f64> = all
        .iter()
        .map(|f| median(f.iter().map(|f| f.per_sec).collect()))
        .collect();
    for (row, through) in rows.iter().zip(&per_sec).filter(|(r, _)| r.quota_state) {
        // The in-process row of the same review at the same connections.
        let alone = rows.iter().zip(&per_sec).find(|(r, _)| {
            !r.quota_state
                && r.service == row.service
                && r.path == row.path
                && r.connections == row.connections
        });
        if let Some((_, alone)) = alone.filter(|(_, a)| **a > 0.0) {
            println!(
                "\nThrough quota-state at {} connections: {:.2}x the in-process row.",
                row.connections.unwrap_or(o.connections),
                through / alone
            );
        }
    }
    // A whole workload's check against a single Pod's, both through quota-state (WQ's budget:
    // at most 2×).
    let rate = |name: &str| {
        rows.iter()
            .zip(&per_sec)
            .find(|(r, _)| r.name == name)
            .map(|(_, p)| *p)
    };
    if let (Some(pod), Some(job)) = (
        rate(POD_VALIDATE_QUOTA_STATE.name),
        rate(WORKLOAD_QUOTA_STATE.name),
    ) && job > 0.0
    {
        println!(
            "\nA PyTorchJob's workload check through quota-state costs {:.2}x a Pod validation through quota-state (reviews/s ratio).",
            pod / job
        );
    }
    Ok(())
}

/// quota-state on its own: the ledger at 10,000 quotas and 100,000 pods in process
/// (`examples/ledger_scale`: memory per pod, admissions while quotas change), then AdmitPod over
/// gRPC (`examples/admit_load`, quota-state on the server's CPU, the client on the other): closed
/// loop for the most it answers, open loop at half that, and gRPC health checks at the same rate
/// (the transport alone).
pub fn quota_state(bin_dir: &Path, o: &Options) -> Result<()> {
    let examples = bin_dir.join("examples");
    let pinned = |cpu: usize, bin: &Path| {
        let mut c = Command::new("taskset");
        c.args(["-c", &cpu.to_string()]).arg(bin);
        c
    };
    let out = pinned(o.server_cpu, &examples.join("ledger_scale"))
        .output()
        .context("running ledger_scale")?;
    if !out.status.success() {
        bail!(
            "ledger_scale failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    println!(
        "\nquota-state's ledger in process (`ledger_scale`, CPU {}):\n",
        o.server_cpu
    );
    for l in String::from_utf8_lossy(&out.stdout).lines() {
        println!("- {l}");
    }
    let admit = |extra: &[String]| -> Result<Figures> {
        let mut c = pinned(o.client_cpu, &examples.join("admit_load"));
        c.arg("--spawn")
            .arg(bin_dir.join("quota-state"))
            .args(["--server-cpu", &o.server_cpu.to_string()])
            .args(["--duration-secs", &o.seconds.to_string()])
            .args(extra);
        let out = c.output().context("running admit_load")?;
        let text = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            bail!(
                "admit_load failed: {text}{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let after = |prefix: &str| text.lines().find_map(|l| l.strip_prefix(prefix));
        let num = |s: &str| s.split_whitespace().next()?.parse::<f64>().ok();
        let latency = after("latency ms:").context("no latency line")?;
        let field = |name: &str| latency.split_once(name).and_then(|(_, rest)| num(rest));
        Ok(Figures {
            per_sec: after("calls/s:").and_then(num).context("no calls/s")?,
            p50: field("p50 ").context("no p50")?,
            p99: field("p99 ").context("no p99")?,
            p999: field("p99.9 ").context("no p99.9")?,
            rss_mib: after("quota-state peak RSS:").and_then(num).unwrap_or(0.0),
            ..Figures::default()
        })
    };
    let connections = ["--connections".to_owned(), "8".to_owned()];
    let mut closed = Vec::new();
    for _ in 0..o.runs {
        closed.push(admit(&connections)?);
    }
    let max = median(closed.iter().map(|f| f.per_sec).collect());
    let half = (max / 2.0).round().max(1.0) as u64;
    let rate = [
        connections.to_vec(),
        vec!["--rate".into(), half.to_string()],
    ]
    .concat();
    let (mut open, mut health) = (Vec::new(), Vec::new());
    for _ in 0..o.runs {
        open.push(admit(&rate)?);
        health.push(admit(
            &[rate.clone(), vec!["--health-only".into()]].concat(),
        )?);
    }
    println!(
        "\nquota-state over gRPC (10,000 quotas, 100,000 pods; plaintext HTTP/2 on loopback, 8 connections; quota-state on CPU {}, client on CPU {}; {} runs of {} s, medians):\n",
        o.server_cpu, o.client_cpu, o.runs, o.seconds
    );
    println!("| calls | calls/s | p50 ms | p99 ms | p99.9 ms | quota-state peak RSS MiB |");
    println!("|---|---|---|---|---|---|");
    for (name, figures) in [
        ("AdmitPod, closed loop (its most)", &closed),
        ("AdmitPod, open loop at half that", &open),
        ("gRPC health check, open loop at the same rate", &health),
    ] {
        let m = |f: fn(&Figures) -> f64| median(figures.iter().map(f).collect());
        println!(
            "| {name} | {:.0} | {:.3} | {:.3} | {:.3} | {:.1} |",
            m(|f| f.per_sec),
            m(|f| f.p50),
            m(|f| f.p99),
            m(|f| f.p999),
            m(|f| f.rss_mib)
        );
    }
    Ok(())
}

/// What a fleet member far from the hub sees (docs/fleet-quota.md#latency): the Pod row through
/// quota-state with 0, 1 and 20 ms of round-trip time added between scheduling-webhook and
/// quota-state by toxiproxy (a real TCP proxy; its latency toxic delays each chunk by its
/// arrival time, so pipelined calls overlap as on a long link), at 4 and [`BUSY`] connections;
/// with the pods each quota-state call carried (`AdmitPods` batching). toxiproxy runs on the
/// client's CPU, as the network would.
pub fn fleet_latency(root: &Path, bin_dir: &Path, o: &Options) -> Result<()> {
    let toxiproxy = testenv::tools::toxiproxy()?;
    println!(
        "\nPod validation through quota-state, with round-trip time added between the webhook and quota-state (server CPU {}, client and toxiproxy CPU {}; {} runs of {} s, medians):\n",
        o.server_cpu, o.client_cpu, o.runs, o.seconds
    );
    println!(
        "| added RTT | connections | calls in flight | reviews/s | p50 ms | p99 ms | pods per quota-state call |"
    );
    println!("|---|---|---|---|---|---|---|");
    for rtt_ms in [0u64, 1, 20] {
        for (connections, in_flight) in [(4, 1), (4, 4), (BUSY, 1), (BUSY, 4)] {
            let extra = [format!("--quota-state-calls-in-flight={in_flight}")];
            let row = Row {
                connections: Some(connections),
                ..POD_VALIDATE_QUOTA_STATE
            };
            let mut runs = Vec::new();
            let mut per_call = Vec::new();
            for _ in 0..o.runs {
                let (_qs, qs_port, qs_metrics) =
                    crate::soak::start_quota_state_with_metrics(bin_dir, Some(o.server_cpu))?;
                let (_proxy, port) = if rtt_ms == 0 {
                    (None, qs_port)
                } else {
                    let (g, p) = delayed(&toxiproxy, o.client_cpu, qs_port, rtt_ms)?;
                    (Some(g), p)
                };
                runs.push(run_load(load_command_with(
                    root,
                    bin_dir,
                    &row,
                    o,
                    o.seconds,
                    Some(port),
                    &extra,
                ))?);
                per_call.push(pods_per_call(qs_metrics)?);
            }
            let m = |f: fn(&Figures) -> f64| median(runs.iter().map(f).collect());
            println!(
                "| {rtt_ms} ms | {connections} | {in_flight} | {:.0} | {:.3} | {:.3} | {:.1} |",
                m(|f| f.per_sec),
                m(|f| f.p50),
                m(|f| f.p99),
                median(per_call)
            );
        }
    }
    Ok(())
}

/// toxiproxy in front of 127.0.0.1:`upstream`, adding `rtt_ms` of round trip (whole
/// milliseconds each way, the toxic's unit: an odd RTT puts the extra millisecond on the
/// answers); returns the guard and the proxy's port.
fn delayed(
    toxiproxy: &Path,
    cpu: usize,
    upstream: u16,
    rtt_ms: u64,
) -> Result<(crate::soak::Guard, u16)> {
    let (api, port) = (testenv::free_port()?, testenv::free_port()?);
    let guard = crate::soak::Guard(
        Command::new("taskset")
            .args(["-c", &cpu.to_string()])
            .arg(toxiproxy)
            .args(["-host", "127.0.0.1", "-port", &api.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .context("starting toxiproxy")?,
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", api)).is_err() {
        if std::time::Instant::now() > deadline {
            bail!("toxiproxy did not listen within 20 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    post(
        api,
        "/proxies",
        &format!(
            r#"{{"name":"quota-state","listen":"127.0.0.1:{port}","upstream":"127.0.0.1:{upstream}","enabled":true}}"#
        ),
    )?;
    for (stream, ms) in [
        ("upstream", rtt_ms / 2),
        ("downstream", rtt_ms - rtt_ms / 2),
    ] {
        if ms > 0 {
            post(
                api,
                "/proxies/quota-state/toxics",
                &format!(
                    r#"{{"name":"rtt-{stream}","type":"latency","stream":"{stream}","attributes":{{"latency":{ms},"jitter":0}}}}"#
                ),
            )?;
        }
    }
    Ok((guard, port))
}

/// POSTs JSON to toxiproxy's API on loopback.
fn post(port: u16, path: &str, body: &str) -> Result<()> {
    http(port, "POST", path, body).map(drop)
}

/// One plain HTTP/1.0 request to a local tool (toxiproxy's API, quota-state's metrics); the
/// body of a 2xx answer. Hand-written: a few calls to local tools do not warrant an HTTP client
/// dependency in xtask.
fn http(port: u16, method: &str, path: &str, body: &str) -> Result<String> {
    use std::io::{Read as _, Write as _};
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port))?;
    write!(
        c,
        "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = String::new();
    c.read_to_string(&mut answer)?;
    let status = answer.split_whitespace().nth(1).unwrap_or_default();
    if !status.starts_with('2') {
        bail!("{method} {path} on port {port}: {answer}");
    }
    Ok(answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default())
}

/// Pods decided per quota-state call so far: AdmitPod decisions over AdmitPod and AdmitPods
/// calls, from quota-state's metrics.
fn pods_per_call(metrics_port: u16) -> Result<f64> {
    let text =
        http(metrics_port, "GET", "/metrics", "").context("reading quota-state's metrics")?;
    let sum = |prefix: &str| -> f64 {
        text.lines()
            .filter(|l| l.starts_with(prefix))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let decisions = sum("quota_state_admissions_total{");
    // Labels print in name order: `code` before `method`.
    let calls: f64 = text
        .lines()
        .filter(|l| {
            l.starts_with("quota_state_calls_total{")
                && (l.contains("method=\"AdmitPods\"") || l.contains("method=\"AdmitPod\""))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    Ok(if calls > 0.0 { decisions / calls } else { 0.0 })
}

/// One run of `row`: its service (with quota-state beside it where the row asks) under
/// `admission-load`.
pub fn once(root: &Path, bin_dir: &Path, row: &Row, o: &Options) -> Result<Figures> {
    // Held until the run ends: quota-state beside the server, on the server's CPU.
    let quota_state = if row.quota_state {
        Some(crate::soak::start_quota_state(bin_dir, Some(o.server_cpu))?)
    } else {
        None
    };
    let quota_port = quota_state.as_ref().map(|(_, port)| *port);
    run_load(load_command(root, bin_dir, row, o, o.seconds, quota_port))
}

/// Runs an `admission-load` command and reads its closed-loop figures.
pub fn run_load(mut c: Command) -> Result<Figures> {
    let out = c.output().context("running admission-load")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "admission-load failed: {}{}",
            text,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    parse(&text).with_context(|| format!("unexpected output: {text}"))
}

/// `admission-load` for `row`: it spawns the service pinned to the server's CPU, warms up and
/// loads it for `seconds` from the client's CPU.
pub fn load_command(
    root: &Path,
    bin_dir: &Path,
    row: &Row,
    o: &Options,
    seconds: u64,
    quota_state_port: Option<u16>,
) -> Command {
    load_command_with(root, bin_dir, row, o, seconds, quota_state_port, &[])
}

/// [`load_command`] with more arguments for the served binary's `serve`.
fn load_command_with(
    root: &Path,
    bin_dir: &Path,
    row: &Row,
    o: &Options,
    seconds: u64,
    quota_state_port: Option<u16>,
    extra: &[String],
) -> Command {
    let mut serve_args = extra.to_vec();
    if let Some(state) = row.state {
        serve_args.push(format!("--state={}", root.join(state).display()));
    }
    if let Some(port) = quota_state_port {
        serve_args.push(format!("--quota-state-url=http://127.0.0.1:{port}"));
    }
    let mut c = Command::new(bin_dir.join("admission-load"));
    c.arg("--spawn").arg(bin_dir.join(row.service));
    if !serve_args.is_empty() {
        c.arg(format!("--serve-args={}", serve_args.join(" ")));
    }
    c.arg("--case")
        .arg(format!("{}={}", row.path, root.join(row.body).display()))
        .args([
            "--connections",
            &row.connections.unwrap_or(o.connections).to_string(),
        ])
        .args(["--duration-secs", &seconds.to_string()])
        .args(["--requests", "100000000"])
        .args(["--warmup", "500"])
        .args(["--expect-status", &row.expect.to_string()])
        .args(["--server-cpu", &o.server_cpu.to_string()])
        .args(["--client-cpu", &o.client_cpu.to_string()]);
    c
}

/// Reads admission-load's closed-loop summary.
pub fn parse(text: &str) -> Option<Figures> {
    let after = |prefix: &str| text.lines().find_map(|l| l.strip_prefix(prefix));
    let num = |s: &str| s.split_whitespace().next()?.parse::<f64>().ok();
    let latency = after("latency ms:")?;
    let field = |name: &str| latency.split_once(name).and_then(|(_, rest)| num(rest));
    let cpu = after("server CPU:").unwrap_or_default();
    let cpu_part = |name: &str| {
        cpu.split_once(name)
            .and_then(|(_, rest)| num(rest))
            .unwrap_or(0.0)
    };
    Some(Figures {
        cpu_us: num(cpu).unwrap_or(0.0),
        user_us: cpu_part("user "),
        system_us: cpu_part("system "),
        per_sec: num(after("reviews/s:")?)?,
        p50: field("p50 ")?,
        p99: field("p99 ")?,
        p999: field("p99.9 ")?,
        rss_mib: after("server peak RSS:").and_then(num).unwrap_or(0.0),
        ready_ms: after("server start to ready:").and_then(num).unwrap_or(0.0),
        idle_mib: after("server idle RSS:").and_then(num).unwrap_or(0.0),
    })
}

/// The median (0 for none).
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_is_read() {
        let text = "reviews: 883  connections: 4  protocol: http/1.1  elapsed: 2.01s\nreviews/s: 439\nlatency ms: p50 8.578  p99 20.125  p99.9 23.215  max 26.819\nserver CPU: 12.5 µs per review (96 % of a core; user 6.1 µs, system 6.4 µs)\nserver peak RSS: 28.2 MiB\nserver start to ready: 41.5 ms\nserver idle RSS: 7.9 MiB\n";
        let f = parse(text).unwrap();
        assert_eq!((f.cpu_us, f.user_us, f.system_us), (12.5, 6.1, 6.4));
        assert_eq!(
            (f.per_sec, f.p50, f.p99, f.p999, f.rss_mib),
            (439.0, 8.578, 20.125, 23.215, 28.2)
        );
        assert_eq!((f.ready_ms, f.idle_mib), (41.5, 7.9));
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
    }
}
