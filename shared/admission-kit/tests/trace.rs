//! One span per review, continuing the API server's trace from its `traceparent` header.

use admission_kit::review::handler::{Context, Request, Validator, Verdict};
use admission_kit::server::http::{Readiness, Router, ServeOptions};
use admission_kit::server::metrics::Metrics;
use admission_kit::server::tls::CertStore;
use admission_kit::{App, FailurePolicy, Target};
use bytes::Bytes;
use http_body_util::Full;
use opentelemetry::trace::{SpanId, TraceId, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use std::sync::Arc;
use tracing_subscriber::layer::SubscriberExt;

struct AllowAll;
impl Validator for AllowAll {
    type Object = serde_json::Value;
    fn validate(&self, _: &Request<serde_json::Value>, _: &Context) -> Verdict {
        Verdict::default()
    }
}

/// A sampled trace context, as an API server that traces the request sends it.
const SAMPLED: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// Counts the spans made, exported or not.
#[derive(Clone, Default)]
struct Made(Arc<std::sync::atomic::AtomicUsize>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Made {
    fn on_new_span(
        &self,
        _: &tracing::span::Attributes<'_>,
        _: &tracing::span::Id,
        _: tracing_subscriber::layer::Context<'_, S>,
    ) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The spans one review through the router exports, its request carrying `traceparent`.
fn spans_of_one_review(
    opts: &ServeOptions,
    traceparent: &str,
) -> Vec<opentelemetry_sdk::trace::SpanData> {
    spans_made_and_exported(opts, traceparent).1
}

/// How many spans one review through the router makes, and those it exports.
fn spans_made_and_exported(
    opts: &ServeOptions,
    traceparent: &str,
) -> (usize, Vec<opentelemetry_sdk::trace::SpanData>) {
    let made = Made::default();
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")))
        .with(made.clone());
    let target = Target::resource("g", "v1", "r", "Thing").operations(&[]);
    let app = App::new("t", "t").validate("/v", target, FailurePolicy::Fail, AllowAll);
    let readiness = Arc::new(Readiness::new(CertStore::new(), || true));
    let router = Router::new(
        &app,
        Context::default(),
        Metrics::new().unwrap(),
        readiness,
        opts,
    );
    let body = br#"{"apiVersion":"admission.k8s.io/v1","request":{"uid":"u","operation":"CREATE","namespace":"team","name":"n","object":{}}}"#;
    let req = http::Request::post("/v")
        .header("content-type", "application/json")
        .header("traceparent", traceparent)
        .body(Full::new(Bytes::from_static(body)))
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let resp = tracing::subscriber::with_default(subscriber, || rt.block_on(router.handle(req)));
    assert_eq!(resp.status(), 200);
    (
        made.0.load(std::sync::atomic::Ordering::Relaxed),
        exporter.get_finished_spans().unwrap(),
    )
}

#[test]
fn review_span_continues_the_callers_trace() {
    let spans = spans_of_one_review(&ServeOptions::default(), SAMPLED);
    let span = spans
        .iter()
        .find(|s| s.name == "/v")
        .expect("a span named after the webhook path");
    assert_eq!(
        span.span_context.trace_id(),
        TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap()
    );
    assert_eq!(
        span.parent_span_id,
        SpanId::from_hex("00f067aa0ba902b7").unwrap()
    );
    let attribute = |key: &str| {
        span.attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| kv.value.as_str().into_owned())
    };
    // What a reader of the trace needs (the decision line's fields), no object body.
    for (key, value) in [
        ("uid", "u"),
        ("operation", "CREATE"),
        ("namespace", "team"),
        ("name", "n"),
        ("allowed", "true"),
        ("patched", "false"),
        ("patch_bytes", "0"),
        ("rules", ""),
    ] {
        assert_eq!(attribute(key).as_deref(), Some(value), "{key}");
    }
}

/// With `continue_traces` off (`serve` with no span export) the header is not read: the span,
/// were it exported, would start a trace of its own.
#[test]
fn without_continue_traces_the_header_is_not_read() {
    let spans = spans_of_one_review(
        &ServeOptions {
            continue_traces: false,
            ..ServeOptions::default()
        },
        SAMPLED,
    );
    let span = spans.iter().find(|s| s.name == "/v").unwrap();
    assert_ne!(
        span.span_context.trace_id(),
        TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap()
    );
    assert_eq!(span.parent_span_id, SpanId::INVALID);
}

/// A request its caller traces without sampling it (flags 00) makes no span at all (the
/// sampler would drop it, after it was made and filled).
#[test]
fn an_unsampled_request_makes_no_span() {
    let unsampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
    let (made, exported) = spans_made_and_exported(&ServeOptions::default(), unsampled);
    assert_eq!((made, exported.len()), (0, 0));
    let (made, exported) = spans_made_and_exported(&ServeOptions::default(), SAMPLED);
    assert_eq!((made, exported.len()), (1, 1));
}
