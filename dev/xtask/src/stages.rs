//! `cargo xtask stages`: where a served review's time goes, by stage, from a profile of the
//! running server. Each path of the bench suite (the quota-state row and the client's ceiling
//! left out) is loaded as `cargo xtask bench` loads it; during the load `perf record` samples the
//! server's process with DWARF call stacks, and each sample is given to the stage of the
//! innermost frame that names one (a `malloc` inside the JSON decoder counts as decoding, a
//! `memmove` inside rustls as TLS). Kernel samples go by their system call: sending (which
//! includes waking the client's socket), receiving, or waiting. The table gives each stage's
//! share of the server's CPU and, with the reviews a second of the same run (the server's core
//! saturated), its microseconds per review.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};

use crate::bench::{self, Options};

/// Stages that take a sample when any of its frames names them: logging and metrics (their JSON
/// formatting is logging, not encoding), a watch (its events' decoding and cache update are the
/// watch's), quota-state's ledger and the gRPC call between the two processes (its TLS and
/// HTTP/2 included), in this order.
const ANY: [(&str, &[&str]); 5] = [
    (
        "logging",
        &[
            "tracing_subscriber",
            "tracing_core",
            "tracing_log",
            "telemetry",
        ],
    ),
    (
        "metrics",
        &["prometheus::", "admission_kit::server::metrics"],
    ),
    (
        "watches (kube, quota-state feed: events, decode, cache)",
        &[
            "kube_runtime::",
            "kube_client::",
            "quota_state::feed::",
            "admission_kit::cluster::state::",
        ],
    ),
    ("quota ledger (quota-state)", &["quota_state::ledger"]),
    (
        "quota-state call (gRPC: tonic, prost)",
        &[
            "tonic::",
            "prost::",
            "tower::buffer",
            "quota_protocol::proto",
        ],
    ),
];

/// Stages of user-space frames, tested in this order on each frame from the innermost out.
const USER: [(&str, &[&str]); 7] = [
    (
        "TLS (rustls, ring)",
        &["rustls::", "ring::", "ring_core", "tokio_rustls"],
    ),
    (
        "patch (diff of the edit)",
        &[
            "json_patch",
            "to_value",
            "typed_patch",
            "serde_json::value",
            "admission_kit::review::diff::",
            "admission_kit::review::skeleton::",
        ],
    ),
    (
        "decode (JSON to typed)",
        &[
            "serde_json::de",
            "Deserialize",
            "deserialize",
            "handler::decode",
            "decoded_body",
            "handler::envelope",
            "review_body",
            "compat::zero",
            "parse_quantity",
        ],
    ),
    (
        "encode (answer to JSON)",
        &["serde_json::ser", "Serialize", "to_bytes", "ReviewOut"],
    ),
    ("HTTP (hyper)", &["hyper::", "http::header", "httparse"]),
    (
        "rules",
        &[
            "_webhook::",
            "admission_kit::review::field",
            // The rules' arithmetic on quantities, durations and pod requests, which the kit
            // holds for every service (it was counted as server layers).
            "admission_kit::compat::resources",
            "admission_kit::compat::go::",
            "admission_kit::compat::selector",
            "Validating",
            "Mutating",
            "quota_state::",
        ],
    ),
    ("server layers (admission-kit)", &["admission_kit::"]),
];

/// Stages of kernel samples, by a frame of their call stack.
const KERNEL: [(&str, &[&str]); 4] = [
    (
        "kernel: send (and wake the client)",
        &[
            "do_writev",
            "sock_write_iter",
            "tcp_sendmsg",
            "sock_sendmsg",
        ],
    ),
    (
        "kernel: receive",
        &["tcp_recvmsg", "sock_read_iter", "sock_recvmsg", "ksys_read"],
    ),
    (
        "kernel: epoll, futex, scheduling",
        &["epoll", "futex", "schedule"],
    ),
    ("kernel: page faults", &["exc_page_fault", "clear_page"]),
];

/// Whether frame `f` holds `needle`. A crate path (`ring::`) must start a path there, so that
/// `String::` is not ring's.
fn names(f: &str, needle: &str) -> bool {
    let crate_path = needle.ends_with("::") && needle.starts_with(char::is_alphabetic);
    f.match_indices(needle).any(|(i, _)| {
        !crate_path
            || !f[..i]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// The stage of one sample's frames (innermost first).
fn stage(frames: &[&str]) -> &'static str {
    let is_kernel = frames
        .first()
        .is_some_and(|f| f.contains("[kernel.kallsyms]"));
    if is_kernel {
        return KERNEL
            .iter()
            .find(|(_, needles)| frames.iter().any(|f| needles.iter().any(|n| names(f, n))))
            .map_or("kernel: other", |(name, _)| name);
    }
    let any = |f: &str, needles: &[&str]| needles.iter().any(|n| names(f, n));
    if let Some((name, _)) = ANY
        .iter()
        .find(|(_, needles)| frames.iter().any(|f| any(f, needles)))
    {
        return name;
    }
    for f in frames {
        if let Some((name, _)) = USER.iter().find(|(_, needles)| any(f, needles)) {
            return name;
        }
    }
    "runtime, allocator, other"
}

/// Samples per stage.
pub type Counts = BTreeMap<&'static str, usize>;

/// Every stage, in the order the tables print them.
fn all_stages() -> Vec<&'static str> {
    ANY.iter()
        .chain(&USER)
        .map(|(n, _)| *n)
        .chain(KERNEL.iter().map(|(n, _)| *n))
        .chain(["kernel: other", "runtime, allocator, other"])
        .collect()
}

/// Samples per stage from `perf script` output (a header line per sample, then its frames).
fn classify(script: &str) -> Counts {
    let mut out = BTreeMap::new();
    let mut frames: Vec<&str> = Vec::new();
    let mut flush = |frames: &mut Vec<&str>| {
        if !frames.is_empty() {
            *out.entry(stage(frames)).or_insert(0) += 1;
            frames.clear();
        }
    };
    for line in script.lines() {
        if line.starts_with(char::is_whitespace) {
            if !line.trim().is_empty() {
                frames.push(line.trim());
            }
        } else {
            flush(&mut frames);
        }
    }
    flush(&mut frames);
    out
}

/// [`classify`] of a `perf record` file.
pub fn classify_file(data: &Path) -> Result<Counts> {
    let script = Command::new("perf")
        .args(["script", "-F", "comm,tid,ip,sym,dso", "-i"])
        .arg(data)
        .stderr(Stdio::null())
        .output()
        .context("running perf script")?;
    Ok(classify(&String::from_utf8_lossy(&script.stdout)))
}

/// Prints one process's table: each stage with samples, its share, and its microseconds per
/// `unit` when the process spent `micros_per_unit` of CPU per unit.
pub fn print_one(counts: &Counts, micros_per_unit: f64, unit: &str) {
    let total = counts.values().sum::<usize>().max(1) as f64;
    println!("| stage | µs per {unit} | share |");
    println!("| --- | --- | --- |");
    for s in all_stages() {
        if let Some(&n) = counts.get(s) {
            let share = n as f64 / total;
            println!(
                "| {s} | {:.1} | {:.1} % |",
                share * micros_per_unit,
                share * 100.0
            );
        }
    }
    println!("| all | {micros_per_unit:.1} | 100 % |");
}

/// The first process whose parent is `parent` (the service admission-load spawned; `taskset`
/// executes it in place).
fn child_of(parent: u32) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
        // The fields after the command name, which is in parentheses and may hold spaces.
        let rest = stat.rsplit_once(") ")?.1;
        let ppid: u32 = rest.split_whitespace().nth(1)?.parse().ok()?;
        (ppid == parent).then_some(pid)
    })
}

/// Profiles each path for `o.seconds` and prints the table.
pub fn run(root: &Path, bin_dir: &Path, o: &Options) -> Result<()> {
    let seconds = o.seconds;
    let dir = std::env::temp_dir().join(format!("xtask-stages-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut columns = Vec::new();
    for row in bench::ROWS
        .iter()
        .filter(|r| !r.quota_state && r.expect == 200 && r.connections.is_none())
    {
        eprintln!("==> {}", row.name);
        // Warm-up and settling before the recording, a second of load after it.
        let load = bench::load_command(root, bin_dir, row, o, seconds + 4, None)
            .stdout(Stdio::piped())
            .spawn()
            .context("running admission-load")?;
        std::thread::sleep(Duration::from_secs(2));
        let server = child_of(load.id()).context("the spawned service was not found")?;
        let data = dir.join("perf.data");
        let rec = Command::new("perf")
            .args(["record", "--call-graph", "dwarf,16384", "-F", "1000", "-q"])
            .arg("-o")
            .arg(&data)
            .args([
                "-p",
                &server.to_string(),
                "--",
                "sleep",
                &seconds.to_string(),
            ])
            .stdout(Stdio::null())
            .status()
            .context("running perf record (is perf installed?)")?;
        let out = load.wait_with_output().context("admission-load")?;
        let text = String::from_utf8_lossy(&out.stdout);
        if !rec.success() || !out.status.success() {
            bail!("{}: perf record {rec}, admission-load: {text}", row.name);
        }
        let figures = bench::parse(&text).with_context(|| format!("unexpected output: {text}"))?;
        let counts = classify_file(&data)?;
        columns.push((row.name, figures.per_sec, counts));
    }
    let _ = std::fs::remove_dir_all(&dir);
    let stages: Vec<&str> = all_stages()
        .into_iter()
        .filter(|s| columns.iter().any(|(_, _, c)| c.contains_key(s)))
        .collect();
    print!("| stage |");
    for (name, per_sec, _) in &columns {
        print!(" {name}: µs per review (share); {per_sec:.0}/s |");
    }
    println!();
    println!("|---|{}", "---|".repeat(columns.len()));
    for s in stages {
        print!("| {s} |");
        for (_, per_sec, counts) in &columns {
            let total: usize = counts.values().sum();
            let share = counts.get(s).copied().unwrap_or(0) as f64 / total.max(1) as f64;
            print!(
                " {:.1} ({:.1} %) |",
                share * 1e6 / per_sec.max(1.0),
                share * 100.0
            );
        }
        println!();
    }
    println!(
        "\nperf record --call-graph dwarf at 1 kHz on the server's process for {seconds} s of each path's load (server on CPU {}, client on CPU {}, {} connections); µs per review = share × 1 s / reviews a second of that run, whose figure the recording itself lowers.",
        o.server_cpu, o.client_cpu, o.connections
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_go_to_their_innermost_stage() {
        let script = "\
tokio-rt-worker 1 
\t  1 _int_malloc (libc.so.6)
\t  2 serde_json::de::Deserializer::parse_str (svc)
\t  3 hyper::proto::h1::dispatch (svc)

tokio-rt-worker 1 
\t  4 __memmove_avx (libc.so.6)
\t  5 rustls::vecbuf::ChunkVecBuffer::write_to (svc)
\t  6 hyper::proto::h1::io::Buffered::poll_flush (svc)

tokio-rt-worker 1 
\t  7 _raw_spin_unlock_irqrestore ([kernel.kallsyms])
\t  8 sock_def_readable ([kernel.kallsyms])
\t  9 sock_write_iter ([kernel.kallsyms])

tokio-rt-worker 1 
\t  a tokio::runtime::task::raw::poll (svc)

tokio-rt-worker 1 
\t  e <alloc::string::String as core::fmt::Write>::write_str (svc)
\t  f registry_webhook::model::validate_model (svc)

tokio-rt-worker 1 
\t  b serde_json::ser::format_escaped_str (svc)
\t  c tracing_subscriber::fmt::format::json::Json::format_event (svc)
\t  d hyper::proto::h1::dispatch (svc)

tokio-rt-worker 1 
\t 10 admission_kit::compat::go::Quantity::parse (svc)
\t 11 admission_kit::compat::resources::try_pod_request (svc)
\t 12 admission_kit::review::handler::Validating<V>::answer (svc)

tokio-rt-worker 1 
\t 13 admission_kit::compat::zero::after_strict (svc)
\t 14 admission_kit::review::handler::decode_raw (svc)
";
        let c = classify(script);
        assert_eq!(c.get("decode (JSON to typed)"), Some(&2), "{c:?}");
        assert_eq!(c.get("TLS (rustls, ring)"), Some(&1));
        assert_eq!(c.get("kernel: send (and wake the client)"), Some(&1));
        assert_eq!(c.get("runtime, allocator, other"), Some(&1));
        assert_eq!(c.get("logging"), Some(&1), "{c:?}");
        // `String::` is not ring's; the kit's quantity arithmetic under a rule is the rule's.
        assert_eq!(c.get("rules"), Some(&2), "{c:?}");
        assert_eq!(c.get("server layers (admission-kit)"), None, "{c:?}");
        assert_eq!(c.values().sum::<usize>(), 8);
    }

    #[test]
    fn a_watch_and_the_quota_call_take_every_sample_under_them() {
        let script = "\
tokio-rt-worker 1 
\t  1 serde_json::de::Deserializer::parse_str (svc)
\t  2 kube_client::client::Client::request_events (svc)

tokio-rt-worker 1 
\t  3 ring_core_0_17_14__aes_gcm_dec_update (svc)
\t  4 rustls::conn::ConnectionCommon::read_tls (svc)
\t  5 tonic::transport::channel::Channel::call (svc)

tokio-rt-worker 1 
\t  6 quota_state::ledger::Ledger::admit (svc)
\t  7 tonic::server::grpc::Grpc::unary (svc)

tokio-rt-worker 1 
\t  8 quota_state::admit_one (svc)
";
        let c = classify(script);
        assert_eq!(
            c.get("watches (kube, quota-state feed: events, decode, cache)"),
            Some(&1),
            "{c:?}"
        );
        assert_eq!(
            c.get("quota-state call (gRPC: tonic, prost)"),
            Some(&1),
            "{c:?}"
        );
        assert_eq!(c.get("quota ledger (quota-state)"), Some(&1), "{c:?}");
        assert_eq!(c.get("rules"), Some(&1), "{c:?}");
    }
}
