//! W3C trace context across process boundaries: continuing the trace a caller sends
//! (`traceparent`, `tracestate`), and sending ours on the calls our services make to each other
//! (scheduling-webhook → quota-state), so one trace holds the API server's request, the webhook
//! and the quota decision.
//!
//! With no OTLP export (no `OTEL_EXPORTER_OTLP_ENDPOINT`, [`crate::server::telemetry`]) spans
//! carry no OpenTelemetry context: nothing is sent, and a received context is kept but goes
//! nowhere.

use std::collections::HashMap;

use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::TraceContextExt as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

struct HeaderExtractor<'a>(&'a http::HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}

/// Makes `span` a child of the trace `headers` carry, when they carry one (`traceparent`).
pub fn continue_from(span: &tracing::Span, headers: &http::HeaderMap) {
    if headers.contains_key("traceparent") {
        let parent = TraceContextPropagator::new().extract(&HeaderExtractor(headers));
        // Fails only when the span is already closed or was disabled by the filter.
        let _ = span.set_parent(parent);
    }
}

/// Whether `headers` carry a trace context whose caller chose not to sample it (`traceparent`
/// with the sampled flag clear): the services sample as their caller does, so such a request
/// needs no span at all. A malformed header is not "unsampled": the propagator decides.
pub fn unsampled(headers: &http::HeaderMap) -> bool {
    let Some(v) = headers.get("traceparent").map(http::HeaderValue::as_bytes) else {
        return false;
    };
    // version "-" trace-id "-" parent-id "-" flags: 55 bytes in version 00.
    v.len() == 55
        && v[52] == b'-'
        && std::str::from_utf8(&v[53..])
            .ok()
            .and_then(|f| u8::from_str_radix(f, 16).ok())
            .is_some_and(|flags| flags & 1 == 0)
}

/// Whether `span` is exported (OTLP export is on and the span is recorded): what only a trace
/// reader needs is worth writing into it.
pub fn exported(span: &tracing::Span) -> bool {
    !span.is_disabled() && span.context().span().span_context().is_valid()
}

/// Writes `key = value` into `span`'s exported attributes; nothing when the span is not
/// exported. A caller building a costly value checks [`exported`] (or [`Carried::is_valid`])
/// first, once for all its attributes.
pub fn record(span: &tracing::Span, key: &'static str, value: impl Into<opentelemetry::Value>) {
    span.set_attribute(key, value);
}

/// The trace context of a span, kept to make calls on its behalf later, from another task
/// (the batch of quota-state calls).
#[derive(Clone, Debug)]
pub struct Carried(opentelemetry::Context);

impl Carried {
    /// The current span's context.
    pub fn current() -> Self {
        Self(tracing::Span::current().context())
    }

    /// Whether it names a span (OTLP export is on and the span was recorded).
    pub fn is_valid(&self) -> bool {
        self.0.span().span_context().is_valid()
    }
}

/// A span for one call made on behalf of several spans: the child of the first, linked to the
/// others (a batch of reviews answered by one call belongs to several traces). A disabled span
/// when none of them is traced: untraced calls pay for no span.
pub fn call_span(name: &'static str, on_behalf_of: &[Carried]) -> tracing::Span {
    let mut valid = on_behalf_of.iter().filter(|c| c.is_valid());
    let Some(first) = valid.next() else {
        return tracing::Span::none();
    };
    let span = tracing::info_span!("call", otel.name = name, otel.kind = "client");
    let _ = span.set_parent(first.0.clone());
    for other in valid {
        span.add_link(other.0.span().span_context().clone());
    }
    span
}

/// The span of one call received (gRPC, HTTP): the child of the trace its headers carry; a
/// disabled span when they carry none.
pub fn server_span(name: &str, headers: &http::HeaderMap) -> tracing::Span {
    if !headers.contains_key("traceparent") {
        return tracing::Span::none();
    }
    let span = tracing::info_span!("call", otel.name = %name, otel.kind = "server");
    continue_from(&span, headers);
    span
}

/// The headers that carry `span`'s trace to the callee (`traceparent`, and `tracestate` when
/// set); none when the span has no OpenTelemetry context.
pub fn headers_of(span: &tracing::Span) -> Vec<(&'static str, String)> {
    let cx = span.context();
    if !cx.span().span_context().is_valid() {
        return Vec::new();
    }
    let mut carrier: HashMap<String, String> = HashMap::new();
    TraceContextPropagator::new().inject_context(&cx, &mut carrier);
    ["traceparent", "tracestate"]
        .into_iter()
        .filter_map(|k| carrier.remove(k).filter(|v| !v.is_empty()).map(|v| (k, v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
    use tracing_subscriber::layer::SubscriberExt as _;

    use super::*;

    const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn a_call_span_continues_the_callers_trace_and_sends_it_on() {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("t")));
        tracing::subscriber::with_default(subscriber, || {
            let mut headers = http::HeaderMap::new();
            headers.insert("traceparent", PARENT.parse().unwrap());
            let review = tracing::info_span!("review");
            continue_from(&review, &headers);
            assert!(exported(&review));
            let other = tracing::info_span!("other review");
            let carried = review.in_scope(Carried::current);
            let unrelated = other.in_scope(Carried::current);
            let call = call_span("quota-state.AdmitPods", &[carried, unrelated]);
            let sent = headers_of(&call);
            assert_eq!(sent.len(), 1, "{sent:?}");
            assert_eq!(sent[0].0, "traceparent");
            assert!(
                sent[0]
                    .1
                    .starts_with("00-0af7651916cd43dd8448eb211c80319c-"),
                "{sent:?}"
            );
            assert!(
                !sent[0].1.contains("b7ad6b7169203331"),
                "the call's own span id"
            );
            let mut received = http::HeaderMap::new();
            received.insert(sent[0].0, sent[0].1.parse().unwrap());
            drop(server_span("/quota.QuotaState/AdmitPods", &received));
            drop(call);
            drop(other);
            drop(review);
        });
        let spans = exporter.get_finished_spans().unwrap();
        let call = spans
            .iter()
            .find(|s| s.name == "quota-state.AdmitPods")
            .unwrap();
        assert_eq!(
            call.span_context.trace_id().to_string(),
            "0af7651916cd43dd8448eb211c80319c"
        );
        assert_eq!(call.links.len(), 1, "linked to the other review");
        let server = spans
            .iter()
            .find(|s| s.name == "/quota.QuotaState/AdmitPods")
            .unwrap();
        assert_eq!(server.parent_span_id, call.span_context.span_id());
    }

    #[test]
    fn unsampled_reads_the_flags_of_a_well_formed_traceparent_only() {
        let with = |v: &str| {
            let mut h = http::HeaderMap::new();
            h.insert("traceparent", v.parse().unwrap());
            unsampled(&h)
        };
        assert!(with(
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"
        ));
        assert!(with(
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-02"
        ));
        assert!(!with(PARENT));
        assert!(!with(
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-0x"
        ));
        assert!(!with(
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b716920333-00"
        ));
        assert!(!unsampled(&http::HeaderMap::new()));
    }

    #[test]
    fn without_export_nothing_is_sent() {
        let span = tracing::info_span!("review");
        assert!(!exported(&span));
        assert!(headers_of(&span).is_empty());
        let carried = span.in_scope(Carried::current);
        assert!(!carried.is_valid());
        assert!(call_span("c", &[carried]).is_none());
        assert!(server_span("s", &http::HeaderMap::new()).is_none());
    }
}
