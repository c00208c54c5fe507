//! Logs and traces: tracing with JSON (or text) output, and OTLP trace export when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::io::IsTerminal as _;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// How log lines are written.
/// One JSON object per line, event fields at the top level, no spans.
fn json_lines<S, W>(writer: W) -> impl Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + 'static,
{
    tracing_subscriber::fmt::layer()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(false)
        .fmt_fields(UnprintedSpanFields)
        .with_writer(writer)
}

/// The span-field formatter of the JSON lines, which print no span (`with_current_span` and
/// `with_span_list` off): the fmt layer still formats every span's fields when the span opens
/// and again at each `record` (for JSON by re-reading what it wrote), once per review for
/// nothing (3 % of a review's time under load). Event fields are written by the JSON event
/// format itself, not by this.
struct UnprintedSpanFields;

impl<'w> tracing_subscriber::fmt::FormatFields<'w> for UnprintedSpanFields {
    fn format_fields<R: tracing_subscriber::field::RecordFields>(
        &self,
        _: tracing_subscriber::fmt::format::Writer<'w>,
        _: R,
    ) -> std::fmt::Result {
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line (the default: machine-read audit trail).
    Json,
    /// Human-readable text.
    Text,
}

/// Where log lines go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogTarget {
    /// Standard output (servers).
    Stdout,
    /// Standard error (commands whose stdout is their result).
    Stderr,
}

/// Why telemetry could not start.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The OTLP exporter could not be built.
    #[error("OTLP exporter: {0}")]
    Otlp(String),
    /// A global subscriber was already set.
    #[error("tracing subscriber: {0}")]
    Subscriber(String),
}

/// Keeps the trace pipeline alive; [`Telemetry::shutdown`] flushes pending spans.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Installs the global subscriber. `RUST_LOG` filters (default `info`).
    pub fn init(
        service: &'static str,
        format: LogFormat,
        target: LogTarget,
    ) -> Result<Self, TelemetryError> {
        let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
        let writer = move || -> Box<dyn std::io::Write> {
            match target {
                LogTarget::Stdout => Box::new(std::io::stdout()),
                LogTarget::Stderr => Box::new(std::io::stderr()),
            }
        };
        let fmt = match format {
            LogFormat::Json => json_lines(writer).boxed(),
            // Colour only for a person at a terminal: in a file or a log pipeline the escape
            // codes are noise.
            LogFormat::Text => tracing_subscriber::fmt::layer()
                .with_ansi(match target {
                    LogTarget::Stdout => std::io::stdout().is_terminal(),
                    LogTarget::Stderr => std::io::stderr().is_terminal(),
                })
                .with_writer(writer)
                .boxed(),
        };
        let endpoint_set = std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT")
            .is_some_and(|v| !v.is_empty())
            || std::env::var_os("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                .is_some_and(|v| !v.is_empty());
        let (provider, otel) = if endpoint_set {
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .build()
                .map_err(|e| TelemetryError::Otlp(e.to_string()))?;
            let provider = SdkTracerProvider::builder()
                .with_batch_exporter(exporter)
                .with_resource(
                    opentelemetry_sdk::Resource::builder()
                        .with_service_name(service)
                        .build(),
                )
                .build();
            let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer(service));
            (Some(provider), Some(layer))
        } else {
            (None, None)
        };
        tracing_subscriber::registry()
            .with(filter)
            .with(fmt)
            .with(otel)
            .try_init()
            .map_err(|e| TelemetryError::Subscriber(e.to_string()))?;
        Ok(Self { provider })
    }

    /// Whether spans are exported over OTLP.
    pub fn exporting(&self) -> bool {
        self.provider.is_some()
    }

    /// Flushes and stops the exporter.
    pub fn shutdown(self) {
        if let Some(p) = self.provider
            && let Err(e) = p.shutdown()
        {
            tracing::warn!(error = %e, "cannot flush traces");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    /// Lines written, shared with the test.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// The lines are what tracing-subscriber's own JSON span-field formatter gives (which
    /// formats span fields these lines never print), the timestamp aside.
    #[test]
    fn json_lines_are_unchanged_by_the_unprinted_span_fields() {
        let run = |ours: bool| {
            let out = Lines::default();
            let w = out.clone();
            let writer = move || w.clone();
            let layer = if ours {
                json_lines(writer).boxed()
            } else {
                tracing_subscriber::fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_current_span(false)
                    .with_span_list(false)
                    .with_writer(writer)
                    .boxed()
            };
            tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
                let span = tracing::info_span!(
                    "review",
                    uid = tracing::field::Empty,
                    allowed = tracing::field::Empty
                );
                let _e = span.enter();
                span.record("uid", "u-1");
                span.record("allowed", true);
                tracing::info!(target: "admission::decision", webhook = "/validate", name = %"a \"quoted\" name", allowed = false, latency_us = 42u64, "decision");
            });
            let bytes = out.0.lock().unwrap().clone();
            let mut v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            assert!(v["timestamp"].is_string(), "{v}");
            v["timestamp"] = serde_json::Value::Null;
            v
        };
        let ours = run(true);
        assert_eq!(ours, run(false));
        assert_eq!(ours["name"], "a \"quoted\" name");
        assert_eq!(ours["latency_us"], 42);
        assert_eq!(ours["message"], "decision");
    }
}
