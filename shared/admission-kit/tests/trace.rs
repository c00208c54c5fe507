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

#[test]
fn review_span_continues_the_callers_trace() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test")));
    let target = Target::resource("g", "v1", "r", "Thing").operations(&[]);
    let app = App::new("t", "t").validate("/v", target, FailurePolicy::Fail, AllowAll);
    let readiness = Arc::new(Readiness::new(CertStore::new(), || true));
    let router = Router::new(
        &app,
        Context::default(),
        Metrics::new().unwrap(),
        readiness,
        &ServeOptions::default(),
    );
    let body = br#"{"apiVersion":"admission.k8s.io/v1","request":{"uid":"u","operation":"CREATE","namespace":"team","name":"n","object":{}}}"#;
    let req = http::Request::post("/v")
        .header("content-type", "application/json")
        .header(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )
        .body(Full::new(Bytes::from_static(body)))
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let resp = tracing::subscriber::with_default(subscriber, || rt.block_on(router.handle(req)));
    assert_eq!(resp.status(), 200);
    let spans = exporter.get_finished_spans().unwrap();
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
        ("rules", ""),
    ] {
        assert_eq!(attribute(key).as_deref(), Some(value), "{key}");
    }
}
