//! Logs and traces: tracing with JSON (or text) output, and OTLP trace export when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::io::IsTerminal as _;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// How log lines are written.
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
            LogFormat::Json => tracing_subscriber::fmt::layer()
                .json()
                .flatten_event(true)
                .with_current_span(false)
                .with_span_list(false)
                .with_writer(writer)
                .boxed(),
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
