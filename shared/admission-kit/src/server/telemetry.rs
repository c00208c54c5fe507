//! Logs and traces: tracing with JSON (or text) output, and OTLP trace export when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::fmt::Write as _;
use std::io::IsTerminal as _;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// One JSON object per line, event fields at the top level, no spans: the lines of
/// tracing-subscriber's JSON format with `flatten_event`, written by [`JsonLine`].
fn json_lines<S, W>(writer: W) -> impl Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + 'static,
{
    tracing_subscriber::fmt::layer()
        .event_format(JsonLine)
        .fmt_fields(UnprintedSpanFields)
        .with_writer(writer)
}

/// Writes an event as tracing-subscriber's JSON format writes it with `flatten_event` and no
/// spans (`timestamp`, `level`, the fields in their order, `target`), byte for byte, straight
/// into the line's buffer. Ours rather than that format because it goes through serde_json's
/// writer, whose every small write the fmt layer's adaptor checks for UTF-8 again: a decision
/// line with its span took 28,250 instructions that way, 15,970 this way (the
/// `decision_lines` example under callgrind).
struct JsonLine;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for JsonLine
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'w> tracing_subscriber::fmt::FormatFields<'w> + 'static,
{
    fn format_event(
        &self,
        _: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut w: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        use tracing_log::NormalizeEvent as _;
        use tracing_subscriber::fmt::time::FormatTime as _;
        // A `log` record's level and target, as the JSON format takes them.
        let normalized = event.normalized_metadata();
        let meta = normalized.as_ref().unwrap_or_else(|| event.metadata());
        w.write_str("{\"timestamp\":\"")?;
        tracing_subscriber::fmt::time::SystemTime.format_time(&mut w)?;
        w.write_str("\",\"level\":\"")?;
        w.write_str(meta.level().as_str())?;
        w.write_char('"')?;
        let mut fields = JsonFields {
            w: &mut w,
            result: Ok(()),
        };
        event.record(&mut fields);
        fields.result?;
        w.write_str(",\"target\":")?;
        json_str(&mut w, meta.target())?;
        w.write_str("}\n")
    }
}

/// Writes each field as `,"name":value`: booleans, integers up to 64 bits and floats as JSON
/// numbers (a float that is not finite as `null`), strings as JSON strings, and everything else
/// as the JSON string of its `Debug` text, which is what the JSON format's visitor does.
struct JsonFields<'a, 'w> {
    w: &'a mut tracing_subscriber::fmt::format::Writer<'w>,
    result: std::fmt::Result,
}

impl JsonFields<'_, '_> {
    fn entry(
        &mut self,
        field: &tracing::field::Field,
        value: impl FnOnce(&mut tracing_subscriber::fmt::format::Writer<'_>) -> std::fmt::Result,
    ) {
        if self.result.is_ok() {
            self.result = self
                .w
                .write_char(',')
                .and_then(|()| json_str(self.w, field.name()))
                .and_then(|()| self.w.write_char(':'))
                .and_then(|()| value(self.w));
        }
    }
}

impl tracing::field::Visit for JsonFields<'_, '_> {
    fn record_bool(&mut self, field: &tracing::field::Field, value: bool) {
        self.entry(field, |w| write!(w, "{value}"));
    }

    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        self.entry(field, |w| write!(w, "{value}"));
    }

    fn record_i64(&mut self, field: &tracing::field::Field, value: i64) {
        self.entry(field, |w| write!(w, "{value}"));
    }

    fn record_f64(&mut self, field: &tracing::field::Field, value: f64) {
        // serde_json's own rendering (shortest round trip; `null` when not finite).
        self.entry(field, |w| match serde_json::to_string(&value) {
            Ok(text) => w.write_str(&text),
            Err(_) => w.write_str("null"),
        });
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.entry(field, |w| json_str(w, value));
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.entry(field, |w| {
            w.write_char('"')?;
            write!(Escaped(&mut *w), "{value:?}")?;
            w.write_char('"')
        });
    }
}

/// `text` as a JSON string.
fn json_str(w: &mut impl std::fmt::Write, text: &str) -> std::fmt::Result {
    w.write_char('"')?;
    Escaped(&mut *w).write_str(text)?;
    w.write_char('"')
}

/// Escapes what it is given as the inside of a JSON string, as serde_json does: `"`, `\\` and
/// control characters, nothing else.
struct Escaped<W>(W);

impl<W: std::fmt::Write> std::fmt::Write for Escaped<W> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let mut clean = 0;
        for (i, b) in s.bytes().enumerate() {
            let escape = match b {
                b'"' => "\\\"",
                b'\\' => "\\\\",
                b'\n' => "\\n",
                b'\r' => "\\r",
                b'\t' => "\\t",
                0x08 => "\\b",
                0x0c => "\\f",
                0..=0x1f => "",
                _ => continue,
            };
            // Everything before is ASCII-clean or whole UTF-8 sequences: `b` is ASCII.
            self.0.write_str(&s[clean..i])?;
            if escape.is_empty() {
                write!(self.0, "\\u{b:04x}")?;
            } else {
                self.0.write_str(escape)?;
            }
            clean = i + 1;
        }
        self.0.write_str(&s[clean..])
    }
}

/// The span-field formatter of the JSON lines, which print no span (`with_current_span` and
/// `with_span_list` off): the fmt layer still formats every span's fields when the span opens
/// and again at each `record` (for JSON by re-reading what it wrote), once per review for
/// nothing (3 % of a review's time under load). Event fields are written by the JSON event
/// format itself, not by this. Public for the `decision_lines` example's comparison.
pub struct UnprintedSpanFields;

impl<'w> tracing_subscriber::fmt::FormatFields<'w> for UnprintedSpanFields {
    fn format_fields<R: tracing_subscriber::field::RecordFields>(
        &self,
        _: tracing_subscriber::fmt::format::Writer<'w>,
        _: R,
    ) -> std::fmt::Result {
        Ok(())
    }
}

/// How log lines are written (`--log-format`).
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

/// The stream a line goes to (a `Box<dyn Write>` would be allocated for every line).
enum Out {
    Stdout(std::io::Stdout),
    Stderr(std::io::Stderr),
}

impl std::io::Write for Out {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Out::Stdout(o) => o.write(buf),
            Out::Stderr(e) => e.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        // The stream's own `write_all` locks it once for the whole line.
        match self {
            Out::Stdout(o) => o.write_all(buf),
            Out::Stderr(e) => e.write_all(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Out::Stdout(o) => o.flush(),
            Out::Stderr(e) => e.flush(),
        }
    }
}

/// The text format's line, its control characters written as escapes: a field a forged review
/// chose (a name, a message) cannot end the line and start a fake one, nor move a terminal's
/// cursor. The fmt layer writes each event whole, in one `write_all` ending in its newline,
/// which alone is kept; so are tabs, and the colours' escape codes when `ansi` is on.
struct EscapedLine<W> {
    inner: W,
    ansi: bool,
}

impl<W: std::io::Write> std::io::Write for EscapedLine<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let (body, end) = match buf.strip_suffix(b"\n") {
            Some(b) => (b, &b"\n"[..]),
            None => (buf, &b""[..]),
        };
        let plain = |c: char| {
            c == '\t'
                || (c == '\u{1b}' && self.ansi)
                || !(c.is_control() || c == '\u{2028}' || c == '\u{2029}')
        };
        let text = String::from_utf8_lossy(body);
        if text.chars().all(plain) {
            self.inner.write_all(buf)?;
            return Ok(buf.len());
        }
        let mut out = String::with_capacity(text.len() + 16);
        for c in text.chars() {
            match c {
                _ if plain(c) => out.push(c),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                c => {
                    let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
                }
            }
        }
        out.push_str(std::str::from_utf8(end).unwrap_or_default());
        self.inner.write_all(out.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// The span pipeline exporting over OTLP/gRPC, as the `OTEL_EXPORTER_OTLP_*` variables say.
#[cfg(feature = "otlp")]
fn otlp_provider(service: &'static str) -> Result<SdkTracerProvider, TelemetryError> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .build()
        .map_err(|e| TelemetryError::Otlp(e.to_string()))?;
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name(service)
                .build(),
        )
        .build())
}

/// Without the `otlp` feature an endpoint set is a mistake worth stopping for.
#[cfg(not(feature = "otlp"))]
fn otlp_provider(_: &'static str) -> Result<SdkTracerProvider, TelemetryError> {
    Err(TelemetryError::Otlp(
        "an OTLP endpoint is set, but this build has no OTLP export (feature otlp)".into(),
    ))
}

/// The target of the decision lines (one per review): what a log pipeline selects them by.
pub const DECISION_TARGET: &str = "admission::decision";

/// The layer that turns spans into OpenTelemetry spans for `provider`, as the services export
/// them: the spans' own attributes only. The source location, thread and busy/idle times the
/// layer adds by default say nothing to a trace reader and cost every exported review; the
/// decision line is not copied into the review's span as an event, whose attributes hold it
/// already.
pub fn span_layer<S>(provider: &SdkTracerProvider, service: &'static str) -> impl Layer<S>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    tracing_opentelemetry::layer()
        .with_tracer(provider.tracer(service))
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_tracked_inactivity(false)
        .with_filter(tracing_subscriber::filter::filter_fn(|m| {
            m.target() != DECISION_TARGET
        }))
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
        let writer = move || match target {
            LogTarget::Stdout => Out::Stdout(std::io::stdout()),
            LogTarget::Stderr => Out::Stderr(std::io::stderr()),
        };
        let fmt = match format {
            LogFormat::Json => json_lines(writer).boxed(),
            // Colour only for a person at a terminal: in a file or a log pipeline the escape
            // codes are noise.
            LogFormat::Text => {
                let ansi = match target {
                    LogTarget::Stdout => std::io::stdout().is_terminal(),
                    LogTarget::Stderr => std::io::stderr().is_terminal(),
                };
                tracing_subscriber::fmt::layer()
                    .with_ansi(ansi)
                    .with_writer(move || EscapedLine {
                        inner: writer(),
                        ansi,
                    })
                    .boxed()
            }
        };
        let endpoint_set = std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT")
            .is_some_and(|v| !v.is_empty())
            || std::env::var_os("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                .is_some_and(|v| !v.is_empty());
        let provider = if endpoint_set {
            Some(otlp_provider(service)?)
        } else {
            None
        };
        let otel = provider.as_ref().map(|p| span_layer(p, service));
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

    /// A served review leaves one JSON line: its decision, every field named.
    #[tokio::test]
    async fn a_decision_is_one_json_line() {
        let lines = lines_at_info(
            crate::review::handler::Decision {
                uid: "u-7".into(),
                kind: "Model".into(),
                namespace: "ns".into(),
                name: "m \"1\"".into(),
                operation: "CREATE",
                allowed: false,
                denials: vec![crate::review::handler::Denial {
                    rule: "MV-01",
                    field: "spec.a".into(),
                    message: "bad".into(),
                }],
                applied: vec!["MM-1", "MM-2"],
                ..Default::default()
            },
            false,
        )
        .await;
        let text = lines.join("\n");
        assert_eq!(lines.len(), 1, "{text}");
        let mut line: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
        assert!(line["latency_us"].is_u64(), "{line}");
        assert!(line["timestamp"].is_string(), "{line}");
        line["latency_us"] = 0.into();
        line["timestamp"] = "T".into();
        assert_eq!(
            line,
            serde_json::json!({
                "timestamp": "T", "level": "INFO", "message": "decision",
                "webhook": "/validate-x", "uid": "u-7", "kind": "Model", "namespace": "ns",
                "name": "m \"1\"", "operation": "CREATE", "allowed": false, "patched": false,
                "dry_run": false, "rules": "MV-01", "applied": "MM-1,MM-2", "latency_us": 0,
                "target": "admission::decision"
            })
        );
    }

    /// The decision lines one review leaves under the default filter (`info`).
    async fn lines_at_info(
        d: crate::review::handler::Decision,
        log_admissions: bool,
    ) -> Vec<String> {
        use tower::{Layer as _, ServiceExt as _};
        let out = Lines::default();
        let w = out.clone();
        let subscriber = tracing_subscriber::registry()
            .with(EnvFilter::new("info"))
            .with(json_lines(move || w.clone()));
        let _default = tracing::subscriber::set_default(subscriber);
        let observed = crate::server::http::observe::ObserveLayer {
            path: "/validate-x",
            metrics: crate::server::metrics::Metrics::new().unwrap(),
            continue_traces: true,
            log_admissions,
        }
        .layer(tower::service_fn(move |_: http::Request<()>| {
            let d = d.clone();
            async move {
                let mut resp = http::Response::new(crate::server::http::Body::default());
                resp.extensions_mut().insert(d);
                Ok::<_, std::convert::Infallible>(resp)
            }
        }));
        observed.oneshot(http::Request::new(())).await.unwrap();
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        text.lines().map(str::to_owned).collect()
    }

    /// A plain admission leaves no INFO line unless asked for; a mutation, a warning, a denial
    /// and a decision on trial always do.
    #[tokio::test]
    async fn plain_admissions_are_logged_when_asked() {
        use crate::review::handler::{Decision, Denial};
        use crate::review::mode::Enforcement;
        let plain = Decision {
            uid: "u-1".into(),
            operation: "CREATE",
            allowed: true,
            applied: vec!["gate-off"],
            ..Default::default()
        };
        assert!(lines_at_info(plain.clone(), false).await.is_empty());
        let lines = lines_at_info(plain.clone(), true).await;
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("\"allowed\":true"), "{lines:?}");
        let said = [
            Decision {
                patched: true,
                patch_bytes: 40,
                ..plain.clone()
            },
            Decision {
                warnings: 1,
                ..plain.clone()
            },
            Decision {
                allowed: false,
                denials: vec![Denial {
                    rule: "MV-01",
                    field: "spec.a".into(),
                    message: "bad".into(),
                }],
                ..plain.clone()
            },
            Decision {
                enforcement: Enforcement::Audit,
                ..plain.clone()
            },
        ];
        for d in said {
            let lines = lines_at_info(d.clone(), false).await;
            assert_eq!(lines.len(), 1, "{d:?}: {lines:?}");
        }
        let warned = lines_at_info(
            Decision {
                warnings: 2,
                ..plain
            },
            false,
        )
        .await;
        assert!(warned[0].contains("\"warnings\":2"), "{warned:?}");
    }

    /// A forged name with newlines and a terminal escape stays on its line in the text format.
    #[test]
    fn text_lines_escape_control_characters() {
        let out = Lines::default();
        let w = out.clone();
        let layer = tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .with_writer(move || EscapedLine {
                inner: w.clone(),
                ansi: false,
            });
        tracing::subscriber::with_default(tracing_subscriber::registry().with(layer), || {
            let name = "ghost\n2026-01-01T00:00:00Z  INFO admission::decision: allowed\r\u{1b}[2J\u{2028}x\ty";
            tracing::info!(target: "admission::decision", name = %name, "decision");
        });
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(text.ends_with('\n'));
        assert!(
            text.contains("ghost\\n2026-01-01T00:00:00Z  INFO admission::decision: allowed\\r\\u{1b}[2J\\u{2028}x\ty"),
            "{text}"
        );
    }

    /// Our lines are tracing-subscriber's own JSON lines (`flatten_event`, no spans, its
    /// span-field formatter, which formats span fields these lines never print), byte for byte
    /// but for the time, for every kind of field value and for a `log` record.
    #[test]
    fn json_lines_are_tracing_subscribers_json_lines() {
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
                tracing::info!(
                    target: "admission::decision",
                    webhook = "/validate",
                    name = %"a \"quoted\" name",
                    allowed = false,
                    latency_us = 42u64,
                    "decision",
                );
                let odd =
                    "q\" b\\ s/ nl\n cr\r tab\t bs\u{8} ff\u{c} one\u{1} us\u{1f} del\u{7f} é € 😀";
                let error: &(dyn std::error::Error + 'static) = &std::fmt::Error;
                tracing::warn!(
                    text = odd,
                    shown = %odd,
                    debugged = ?odd,
                    list = ?vec![1, 2],
                    half = 1.5f64,
                    whole = 2.0f64,
                    nan = f64::NAN,
                    negative = -3i64,
                    big = u64::MAX,
                    huge = i128::MIN,
                    no = false,
                    error,
                    "message with {} and {odd}",
                    "args"
                );
                tracing::error!(target: "other", "");
                tracing_log::format_trace(
                    &tracing_log::log::Record::builder()
                        .args(format_args!("from log: {odd}"))
                        .level(tracing_log::log::Level::Warn)
                        .target("rustls::client")
                        .module_path_static(Some("rustls::client"))
                        .file_static(Some("client.rs"))
                        .line(Some(7))
                        .build(),
                )
                .unwrap();
            });
            let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
            // Each line's time, which differs between the runs, masked.
            text.lines()
                .map(|line| {
                    let v: serde_json::Value = serde_json::from_str(line).unwrap();
                    let time = v["timestamp"].as_str().unwrap().to_owned();
                    assert_eq!(line.matches(&time).count(), 1, "{line}");
                    line.replace(&time, "T")
                })
                .collect::<Vec<_>>()
        };
        let ours = run(true);
        assert_eq!(ours.len(), 4, "{ours:#?}");
        assert_eq!(ours, run(false));
        let first: serde_json::Value = serde_json::from_str(&ours[0]).unwrap();
        assert_eq!(first["name"], "a \"quoted\" name");
        assert_eq!(first["latency_us"], 42);
        assert_eq!(first["message"], "decision");
        let log: serde_json::Value = serde_json::from_str(&ours[3]).unwrap();
        assert_eq!(log["target"], "rustls::client");
        assert_eq!(log["level"], "WARN");
    }
}
