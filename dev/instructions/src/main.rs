//! `review-loop [--served MODE] SERVICE PATH BODY N [STATE]`: decides the review in BODY N times
//! on SERVICE's endpoint PATH, in-process (decode, rules, encode), with the service's default
//! feature gates and options and the cluster state in the STATE file (none without), as `serve
//! --state` would, after one warm-up answer that must succeed. Run under callgrind by `cargo
//! xtask instructions`; two runs with different N cancel the start-up cost.
//!
//! `--served` sends each review through the kit's HTTP router instead (the endpoint's layers:
//! budget, metrics, the review span), as an HTTP POST the API server would send: `plain`, no
//! trace context; `traceparent`, a sampled `traceparent` header and no span export (a traced API
//! server, our export off); `exported`, the same with every span exported (an OpenTelemetry
//! layer whose exporter drops what it is given: the span's making and attributes are counted,
//! the OTLP encoding and sending on the batch exporter's thread are not).

use std::hint::black_box;

use std::sync::Arc;

use admission_kit::cluster::state::StaticState;
use admission_kit::review::handler::{Context, review_body};
use admission_kit::review::lookup::{ClusterState, EmptyState};
use anyhow::{Context as _, bail};

fn main() -> anyhow::Result<()> {
    // As the services run (the guard counts what production executes).
    admission_kit::server::trim::tune_malloc();
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let served = match args.first().map(String::as_str) {
        Some("--served") if args.len() > 1 => {
            let mode = Served::parse(&args[1])?;
            args.drain(..2);
            Some(mode)
        }
        _ => None,
    };
    let (service, path, body, n, state) = match args.as_slice() {
        [service, path, body, n] => (service, path, body, n, None),
        [service, path, body, n, state] => (service, path, body, n, Some(state)),
        _ => bail!(
            "usage: review-loop [--served plain|traceparent|exported] SERVICE PATH BODY N [STATE]"
        ),
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
    if let Some(mode) = served {
        return serve_loop(&app, path, body, n, ctx, mode);
    }
    // One answer outside the loop: it must be a decision, so the loop measures the real path.
    review_body(endpoint.handler.as_ref(), &body, &ctx)
        .map_err(|e| anyhow::anyhow!("{path}: {e}"))?;
    for _ in 0..n {
        let answer = review_body(endpoint.handler.as_ref(), black_box(&body), &ctx);
        black_box(answer.map(|a| a.review.to_bytes()).ok());
    }
    Ok(())
}

/// How `--served` sends the reviews.
#[derive(Clone, Copy, PartialEq)]
enum Served {
    /// No trace context.
    Plain,
    /// A sampled `traceparent`, no span export.
    Traceparent,
    /// A sampled `traceparent`, every span exported.
    Exported,
}

impl Served {
    fn parse(s: &str) -> anyhow::Result<Self> {
        Ok(match s {
            "plain" => Self::Plain,
            "traceparent" => Self::Traceparent,
            "exported" => Self::Exported,
            other => bail!("--served {other}: plain, traceparent or exported"),
        })
    }
}

/// An exporter that drops every span: what export costs on the review's own path, without the
/// OTLP encoding and network of the batch exporter's thread.
#[derive(Debug)]
struct Dropped;

impl opentelemetry_sdk::trace::SpanExporter for Dropped {
    async fn export(
        &self,
        batch: Vec<opentelemetry_sdk::trace::SpanData>,
    ) -> opentelemetry_sdk::error::OTelSdkResult {
        black_box(batch);
        Ok(())
    }
}

/// The reviews through the kit's router, as HTTP POSTs.
fn serve_loop(
    app: &admission_kit::App,
    path: &str,
    body: Vec<u8>,
    n: u64,
    ctx: Context,
    mode: Served,
) -> anyhow::Result<()> {
    use admission_kit::server::http::{Readiness, Router, ServeOptions};
    use tracing_subscriber::layer::SubscriberExt as _;

    let readiness = Arc::new(Readiness::new(
        admission_kit::server::tls::CertStore::new(),
        || true,
    ));
    let metrics = admission_kit::server::metrics::Metrics::new()?;
    // As `serve` sets it: the header read only when spans are exported.
    let opts = ServeOptions {
        continue_traces: mode == Served::Exported,
        ..ServeOptions::default()
    };
    let router = Router::new(app, ctx, metrics, readiness, &opts);
    let body = bytes::Bytes::from(body);
    let request = || {
        let mut r = http::Request::post(path).header("content-type", "application/json");
        if mode != Served::Plain {
            r = r.header(
                "traceparent",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            );
        }
        r.body(http_body_util::Full::new(body.clone()))
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let run = || -> anyhow::Result<()> {
        let first = rt.block_on(router.handle(request()?));
        if first.status() != 200 {
            bail!("{path}: HTTP {}", first.status());
        }
        for _ in 0..n {
            black_box(rt.block_on(router.handle(black_box(request()?))));
        }
        Ok(())
    };
    match mode {
        Served::Exported => {
            let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
                .with_simple_exporter(Dropped)
                .build();
            let subscriber = tracing_subscriber::registry().with(
                admission_kit::server::telemetry::span_layer(&provider, "review-loop"),
            );
            tracing::subscriber::with_default(subscriber, run)
        }
        Served::Plain | Served::Traceparent => run(),
    }
}
