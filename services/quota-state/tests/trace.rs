//! One trace across scheduling-webhook and quota-state: a traced review's quota question is a
//! span of the review's trace in the webhook (the call) and in quota-state (the call received),
//! over a real gRPC connection on loopback. Its own test binary: the subscriber is process-wide,
//! because quota-state answers on the runtime's other threads.

use std::sync::Arc;

use admission_kit::cluster::state::StaticState;
use admission_kit::{Context, Operation, Request, Validator};
use k8s_openapi::api::core::v1::Pod;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::json;
use tracing::Instrument as _;
use tracing_subscriber::layer::SubscriberExt as _;

/// The trace the API server would have sent.
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

fn pod(name: &str, cpu: &str) -> Request<Pod> {
    let p = json!({"metadata": {"name": name, "namespace": "team",
        "labels": {"quota.scheduling.koordinator.sh/name": "q"}},
        "spec": {"containers": [{"name": "main",
            "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}]}});
    let mut r = admission_testing::request::<Pod>("pods", Operation::Create, p, None);
    r.namespace = Some("team".into());
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traced_reviews_quota_call_is_one_trace_through_quota_state() {
    use quota_state::ledger::{Amount, Ledger, QuotaSpec};
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry()
            .with(tracing_subscriber::filter::LevelFilter::INFO)
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("test"))),
    )
    .unwrap();

    let ledger = Arc::new(Ledger::new(std::time::Duration::from_secs(30)));
    let ten = [(
        "cpu".to_owned(),
        Amount {
            nano: 10_000_000_000,
            format: admission_kit::compat::go::QuantityFormat::DecimalSI,
        },
    )]
    .into();
    ledger.upsert_quota(QuotaSpec::simple("q", "team", None, ten));
    let svc = quota_state::Service::new(
        ledger,
        quota_state::auth::Policy::Anyone,
        quota_state::metrics::Metrics::new().unwrap(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        quota_state::grpc_server()
            .add_service(quota_protocol::proto::quota_state_server::QuotaStateServer::new(svc))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    let url = format!("--quota-state-url=http://{addr}");
    let options = scheduling_webhook::options::Options::parse([url.as_str()]).unwrap();
    let webhook = Arc::new(scheduling_webhook::Service::new(options));
    let app = scheduling_webhook::app();
    let ctx =
        Context::new(Arc::new(StaticState::default())).with_gates(Arc::new(app.gates.clone()));
    let validator = scheduling_webhook::pod_validate::PodValidator(webhook);

    // Each review a span continuing the API server's trace, as the kit's server makes it.
    let mut headers = http::HeaderMap::new();
    for (name, cpu, parent) in [
        ("fits", "1", "00f067aa0ba902b7"),
        ("too-big", "20", "00f067aa0ba902b8"),
    ] {
        let traceparent = format!("00-{TRACE}-{parent}-01");
        headers.insert("traceparent", traceparent.parse().unwrap());
        let review = tracing::info_span!("review", otel.name = name);
        admission_kit::server::trace::continue_from(&review, &headers);
        let verdict = validator
            .validate_async(&pod(name, cpu), &ctx)
            .instrument(review)
            .await;
        assert_eq!(verdict.allowed(), name == "fits", "{name}: {verdict:?}");
    }
    let _ = provider.force_flush();
    let spans = exporter.get_finished_spans().unwrap();
    let named =
        |name: &str| -> Vec<&SpanData> { spans.iter().filter(|s| s.name == name).collect() };
    let reviews = [named("fits"), named("too-big")].concat();
    let calls = named("quota-state.AdmitPods");
    let received = named("/quotastate.v1.QuotaState/AdmitPods");
    let all: Vec<(&str, String)> = spans
        .iter()
        .map(|s| (s.name.as_ref(), s.span_context.trace_id().to_string()))
        .collect();
    assert_eq!(
        (reviews.len(), calls.len(), received.len()),
        (2, 2, 2),
        "{all:?}"
    );
    for ((review, call), got) in reviews.iter().zip(&calls).zip(&received) {
        for s in [review, call, got] {
            assert_eq!(s.span_context.trace_id().to_string(), TRACE, "{all:?}");
        }
        assert_eq!(call.parent_span_id, review.span_context.span_id());
        assert_eq!(got.parent_span_id, call.span_context.span_id());
    }
    // What a reader needs: the quota and the wait on the review, the counts on the calls.
    let attribute = |s: &SpanData, key: &str| {
        s.attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| kv.value.as_str().into_owned())
            .unwrap_or_default()
    };
    for (name, allowed, quota) in [("fits", "true", "q"), ("too-big", "false", "")] {
        let review = reviews.iter().find(|s| s.name == name).unwrap();
        assert_eq!(attribute(review, "quota"), quota, "{:?}", review.attributes);
        assert_eq!(attribute(review, "quota.allowed"), allowed);
        assert!(attribute(review, "quota.wait_us").parse::<u64>().is_ok());
    }
    for call in &calls {
        assert_eq!(attribute(call, "pods"), "1", "{:?}", call.attributes);
    }
    let by_outcome = |allowed: &str| {
        received
            .iter()
            .find(|s| attribute(s, "allowed") == allowed)
            .unwrap_or_else(|| panic!("no call answered with allowed={allowed}: {received:?}"))
    };
    let (admitted, refused) = (by_outcome("1"), by_outcome("0"));
    assert_eq!(attribute(admitted, "pods"), "1");
    assert_eq!(attribute(admitted, "quotas"), "q");
    assert_eq!(attribute(refused, "rules"), "PV-4");
}
