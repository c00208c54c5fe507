//! The ledger at cluster scale, in-process: memory per pod, and how long admissions stall while
//! quotas change.
//!
//! `cargo build --release -p quota-state --example ledger_scale && target/release/examples/ledger_scale`
//! fills a ledger with the synthetic state (10,000 quotas, 100,000 running pods by default) and
//! prints the resident memory it added per pod. Then one thread admits pods (dry runs against
//! random leaf quotas, each call timed) while the main thread changes quotas the way a cluster
//! does: a leaf's limit, a leaf moved to another parent, a new leaf binding a namespace. It prints
//! the admission latencies without changes and while they happen (p50, p99, max), so a change
//! that holds the ledger's lock shows as the max.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use admission_kit::compat::go::QuantityFormat;
use clap::Parser;
use quota_state::ledger::{Amount, Amounts, Ledger, PodCheck, QuotaSpec};
use quota_state::synthetic;

#[derive(Parser)]
struct Args {
    /// Quotas in the synthetic state.
    #[arg(long, default_value_t = 10_000)]
    quotas: usize,
    /// Running pods in the synthetic state.
    #[arg(long, default_value_t = 100_000)]
    pods: usize,
    /// Quota changes to make while admitting.
    #[arg(long, default_value_t = 30)]
    changes: usize,
    /// Milliseconds between two changes.
    #[arg(long, default_value_t = 100)]
    every_ms: u64,
    /// A fleet of this many member clusters (0: one cluster): the pods spread over them, each
    /// admission from one of them in turn (docs/fleet-quota.md#one-ledger-for-a-fleet).
    #[arg(long, default_value_t = 0)]
    members: usize,
}

/// Resident memory of this process in KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

fn cpu(milli: i64) -> Amounts {
    Amounts::from([(
        "cpu".to_owned(),
        Amount::from_milli(i128::from(milli), QuantityFormat::DecimalSI),
    )])
}

/// Latencies in microseconds: p50, p99, max.
fn summary(mut v: Vec<f64>) -> (f64, f64, f64, usize) {
    v.sort_by(f64::total_cmp);
    let at = |p: f64| v.get(((v.len() as f64 * p) as usize).min(v.len().saturating_sub(1)));
    (
        at(0.5).copied().unwrap_or(0.0),
        at(0.99).copied().unwrap_or(0.0),
        v.last().copied().unwrap_or(0.0),
        v.len(),
    )
}

/// Admits until `stop`, returning each call's latency in µs.
fn admit_until(ledger: &Ledger, leaves: usize, members: &[String], stop: &AtomicBool) -> Vec<f64> {
    let mut out = Vec::new();
    let requests = cpu(100);
    let mut i = 0usize;
    while !stop.load(Ordering::Relaxed) {
        i = i.wrapping_mul(2_654_435_761).wrapping_add(12_345);
        let leaf = i % leaves;
        let ns = format!("ns-{leaf}");
        let label = synthetic::leaf(leaf);
        let started = Instant::now();
        let check = PodCheck {
            cluster: members
                .get(i % members.len().max(1))
                .map_or("", String::as_str),
            namespace: &ns,
            name: "probe",
            label: &label,
            old_label: None,
            requests: &requests,
            dry_run: true,
            disable_default_quota: false,
            check_parent: true,
            check_admission: true,
            caller: "scale",
            review: "",
            peer: "",
            pod_uid: "",
        };
        std::hint::black_box(ledger.check_pod(&check, started));
        out.push(started.elapsed().as_secs_f64() * 1e6);
    }
    out
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let ledger = Arc::new(Ledger::new(Duration::from_secs(30)));
    ledger.spawn_rebuilder()?;
    let before = rss_kib();
    let started = Instant::now();
    synthetic::fill_fleet(&ledger, args.quotas, args.pods, args.members);
    let members: Arc<Vec<String>> = Arc::new((0..args.members).map(synthetic::member).collect());
    let filled = started.elapsed();
    // The first read builds the tree and the usage.
    let _ = ledger.used(&synthetic::leaf(0));
    let first_tree = started.elapsed() - filled;
    // The rebuilder's last rebuild and its trim.
    std::thread::sleep(Duration::from_millis(500));
    let after = rss_kib();
    let per_pod = (after.saturating_sub(before)) as f64 * 1024.0 / args.pods.max(1) as f64;
    println!(
        "{} quotas, {} pods{}: filled in {:.2} s, first tree in {:.2} s; RSS {} → {} KiB, {:.0} bytes per pod (quotas included)",
        args.quotas,
        args.pods,
        if args.members > 0 {
            format!(" across {} member clusters", args.members)
        } else {
            String::new()
        },
        filled.as_secs_f64(),
        first_tree.as_secs_f64(),
        before,
        after,
        per_pod
    );

    let leaves = args.quotas - args.quotas.div_ceil(101).max(1);
    let parents = args.quotas.div_ceil(101).max(1);
    let window = Duration::from_millis(args.every_ms * args.changes as u64);
    let at_start = ledger.stats();
    for changing in [false, true] {
        let stop = Arc::new(AtomicBool::new(false));
        let admitter = {
            let (ledger, stop, members) = (ledger.clone(), stop.clone(), members.clone());
            std::thread::spawn(move || admit_until(&ledger, leaves, &members, &stop))
        };
        let mut changes = 0;
        let t0 = Instant::now();
        while t0.elapsed() < window {
            std::thread::sleep(Duration::from_millis(args.every_ms));
            if !changing {
                continue;
            }
            let k = changes % leaves.max(1);
            let spec = match changes % 3 {
                // A leaf's limit.
                0 => {
                    let mut q = QuotaSpec::simple(
                        &synthetic::leaf(k),
                        &format!("team-{}", k % parents),
                        Some(&format!("parent-{}", k % parents)),
                        cpu(10_000_000 + changes as i64),
                    );
                    q.namespaces = vec![format!("ns-{k}")];
                    q
                }
                // A leaf moved to another parent.
                1 => {
                    let mut q = QuotaSpec::simple(
                        &synthetic::leaf(k),
                        &format!("team-{}", k % parents),
                        Some(&format!("parent-{}", (k + 1) % parents)),
                        cpu(10_000_000),
                    );
                    q.namespaces = vec![format!("ns-{k}")];
                    q
                }
                // A new leaf binding a new namespace.
                _ => {
                    let mut q = QuotaSpec::simple(
                        &format!("new-{changes}"),
                        "team-0",
                        Some("parent-0"),
                        cpu(1_000),
                    );
                    q.namespaces = vec![format!("new-ns-{changes}")];
                    q
                }
            };
            ledger.upsert_quota(spec);
            changes += 1;
        }
        stop.store(true, Ordering::Relaxed);
        let lat = admitter
            .join()
            .map_err(|_| anyhow::anyhow!("admitter panicked"))?;
        let (p50, p99, max, n) = summary(lat);
        println!(
            "{}: {n} admissions, p50 {p50:.1} µs, p99 {p99:.1} µs, max {max:.1} µs",
            if changing {
                format!("with {changes} quota changes")
            } else {
                "without quota changes".to_owned()
            }
        );
    }
    // Outstanding reservations at the default bound (50,000): what they hold.
    let before = rss_kib();
    let requests = cpu(1);
    for i in 0..50_000usize {
        let leaf = i % leaves;
        let admitted = ledger.check_pod(
            &PodCheck {
                cluster: "",
                namespace: &format!("ns-{leaf}"),
                name: &format!("reserved-{i}"),
                label: &synthetic::leaf(leaf),
                old_label: None,
                requests: &requests,
                dry_run: false,
                disable_default_quota: false,
                check_parent: true,
                check_admission: true,
                caller: "scale",
                review: "",
                peer: "",
                pod_uid: "",
            },
            Instant::now(),
        );
        std::hint::black_box(admitted);
    }
    println!(
        "{} outstanding reservations: {:.0} bytes each",
        ledger.reservations(),
        (rss_kib().saturating_sub(before)) as f64 * 1024.0 / ledger.reservations().max(1) as f64
    );
    let s = ledger.stats();
    let n = s.rebuilds - at_start.rebuilds;
    println!(
        "tree rebuilds for the changes {n}, {:.2} ms each on average, of which under the ledger's lock {:.3} ms (the first tree, built while filling, held it {:.2} ms)",
        (s.rebuild_seconds - at_start.rebuild_seconds) * 1e3 / n.max(1) as f64,
        (s.rebuild_locked_seconds - at_start.rebuild_locked_seconds) * 1e3 / n.max(1) as f64,
        at_start.rebuild_locked_max * 1e3
    );
    Ok(())
}
