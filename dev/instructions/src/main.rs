//! `review-loop SERVICE PATH BODY N [STATE]`: decides the review in BODY N times on SERVICE's
//! endpoint PATH, in-process (decode, rules, encode), with the service's default feature gates and
//! options and the cluster state in the STATE file (none without), as `serve --state` would,
//! after one warm-up answer that must succeed. Run under callgrind by `cargo xtask
//! instructions`; two runs with different N cancel the start-up cost.

use std::hint::black_box;

use std::sync::Arc;

use admission_kit::cluster::state::StaticState;
use admission_kit::review::handler::{Context, review_body};
use admission_kit::review::lookup::{ClusterState, EmptyState};
use anyhow::{Context as _, bail};

fn main() -> anyhow::Result<()> {
    // As the services run (the guard counts what production executes).
    admission_kit::server::trim::tune_malloc();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (service, path, body, n, state) = match args.as_slice() {
        [service, path, body, n] => (service, path, body, n, None),
        [service, path, body, n, state] => (service, path, body, n, Some(state)),
        _ => bail!("usage: review-loop SERVICE PATH BODY N [STATE]"),
    };
    let app = instructions::app(service).with_context(|| format!("no service {service}"))?;
    let endpoint = app
        .endpoint(path)
        .with_context(|| format!("{service} serves no {path}"))?;
    let body = std::fs::read(body).with_context(|| format!("reading {body}"))?;
    let n: u64 = n.parse().context("N")?;
    let state: Arc<dyn ClusterState> = match state {
        Some(file) => Arc::new(StaticState::from_files(&[file])?),
        None => Arc::new(EmptyState),
    };
    let prepared = app.prepare(None)?;
    let ctx = Context::new(state).with_gates(prepared.gates.clone());
    // One answer outside the loop: it must be a decision, so the loop measures the real path.
    review_body(endpoint.handler.as_ref(), &body, &ctx)
        .map_err(|e| anyhow::anyhow!("{path}: {e}"))?;
    for _ in 0..n {
        let answer = review_body(endpoint.handler.as_ref(), black_box(&body), &ctx);
        black_box(answer.map(|a| a.review.to_bytes()).ok());
    }
    Ok(())
}
