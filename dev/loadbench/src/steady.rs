//! Open-loop load for soaks: reviews are scheduled at a fixed rate whatever the server's answers
//! take, and each review's latency is measured from when it was due, not from when a connection
//! got free (a closed loop under-reports a slow server: it waits before it sends). Every
//! `report_every` a JSON line gives the window's reviews, failures, p99 and the server's current
//! RSS; failures are counted, never fatal (a soak reports them).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::{Case, Conn, Target, percentile, status_kib};

/// What a window collected.
#[derive(Default)]
struct Window {
    latencies_ns: Vec<u64>,
    failed: u64,
    first_error: Option<String>,
}

/// Where the open loop sends and how fast.
pub struct Plan {
    pub target: Target,
    pub connections: usize,
    pub rate: f64,
    pub duration: Duration,
    pub report_every: Duration,
    /// The server's pid, for its RSS.
    pub pid: Option<u32>,
}

/// Runs the open loop and prints a JSON line per window and one summary line.
pub async fn run(plan: Plan, cases: Arc<Vec<Case>>) -> Result<()> {
    let started = Instant::now();
    let window = Arc::new(Mutex::new(Window::default()));
    // Due times waiting for a free connection; the connections take them in order.
    let due: Arc<Mutex<VecDeque<Instant>>> = Arc::new(Mutex::new(VecDeque::new()));
    let wake = Arc::new(tokio::sync::Notify::new());
    let stop_at = started + plan.duration;
    let mut workers = Vec::new();
    for w in 0..plan.connections {
        let (due, wake, window, cases, target) = (
            due.clone(),
            wake.clone(),
            window.clone(),
            cases.clone(),
            plan.target.clone(),
        );
        workers.push(tokio::spawn(async move {
            let mut conn: Option<Conn> = None;
            let mut i = w;
            loop {
                let next = due.lock().ok().and_then(|mut q| q.pop_front());
                let Some(at) = next else {
                    if Instant::now() >= stop_at {
                        break;
                    }
                    wake.notified().await;
                    continue;
                };
                let result = match conn.as_mut() {
                    Some(c) => c.review(&cases[i % cases.len()], &target).await,
                    None => match Conn::open(&target).await {
                        Ok(mut c) => {
                            let r = c.review(&cases[i % cases.len()], &target).await;
                            conn = Some(c);
                            r
                        }
                        Err(e) => Err(e),
                    },
                };
                i += 1;
                let took = u64::try_from(at.elapsed().as_nanos()).unwrap_or(u64::MAX);
                if let Ok(mut win) = window.lock() {
                    match result {
                        Ok(()) => win.latencies_ns.push(took),
                        Err(e) => {
                            win.failed += 1;
                            win.first_error.get_or_insert_with(|| e.to_string());
                            // A broken connection is opened again for the next review.
                            conn = None;
                        }
                    }
                }
            }
        }));
    }
    let ticker = {
        let (due, wake) = (due.clone(), wake.clone());
        let period = Duration::from_secs_f64(1.0 / plan.rate.max(1.0));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            while Instant::now() < stop_at {
                tick.tick().await;
                if let Ok(mut q) = due.lock() {
                    q.push_back(Instant::now());
                }
                wake.notify_one();
            }
            wake.notify_waiters();
        })
    };
    let (mut total, mut total_failed, mut all) = (0u64, 0u64, Vec::new());
    let mut worst_p99 = 0.0f64;
    let mut peak_rss = 0u64;
    let mut next_report = started + plan.report_every;
    loop {
        tokio::time::sleep_until(next_report.min(stop_at).into()).await;
        let last = Instant::now() >= stop_at;
        next_report += plan.report_every;
        let win = window
            .lock()
            .map(|mut w| std::mem::take(&mut *w))
            .unwrap_or_default();
        let mut lat = win.latencies_ns;
        lat.sort_unstable();
        let p99 = percentile(&lat, 99.0);
        worst_p99 = worst_p99.max(p99);
        let rss = plan.pid.and_then(|p| status_kib(p, "VmRSS")).unwrap_or(0);
        peak_rss = peak_rss.max(rss);
        let backlog = due.lock().map(|q| q.len()).unwrap_or(0);
        total += lat.len() as u64 + win.failed;
        total_failed += win.failed;
        println!(
            "{}",
            serde_json::json!({
                "t_s": started.elapsed().as_secs(),
                "reviews": lat.len() as u64 + win.failed,
                "failed": win.failed,
                "first_error": win.first_error,
                "p50_ms": percentile(&lat, 50.0),
                "p99_ms": p99,
                "rss_mib": rss as f64 / 1024.0,
                "backlog": backlog,
            })
        );
        all.extend(lat);
        if last {
            break;
        }
    }
    ticker.abort();
    wake.notify_waiters();
    for w in workers {
        w.abort();
    }
    all.sort_unstable();
    println!(
        "{}",
        serde_json::json!({
            "summary": true,
            "rate": plan.rate,
            "reviews": total,
            "failed": total_failed,
            "p99_ms": percentile(&all, 99.0),
            "worst_window_p99_ms": worst_p99,
            "peak_rss_mib": peak_rss as f64 / 1024.0,
        })
    );
    Ok(())
}
