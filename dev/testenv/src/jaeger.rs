//! Jaeger, the trace store of the local control plane (`cargo xtask up`) and of the end-to-end
//! trace test: its v2 binary ([`crate::tools::jaeger`]) with an in-memory store, receiving OTLP
//! over gRPC and answering its query API, every port a free loopback one.
//!
//! The query API read here is the JSON one Jaeger's UI uses (`/api/traces`): each span with its
//! service, operation, parent, start, duration and tags.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::free_port;
use crate::system::{Running, SystemError, http_get};

/// A running Jaeger; stopped when dropped.
#[derive(Debug)]
pub struct Jaeger {
    /// Where the OTLP/gRPC receiver listens, as `OTEL_EXPORTER_OTLP_ENDPOINT` takes it
    /// (`http://127.0.0.1:<port>`).
    pub otlp_endpoint: String,
    /// The same receiver as `host:port`, as the API server's tracing configuration takes it.
    pub otlp_address: String,
    /// The query API and UI (`127.0.0.1:<port>`).
    pub query: String,
    /// The process.
    pub running: Running,
}

/// The collector configuration: OTLP in, Jaeger's in-memory store, its query API, and no
/// listener or destination on a fixed port (the collector's own metrics and traces are off), so
/// that several run at once.
fn config(otlp: &str, otlp_http: &str, query: &str, query_grpc: &str) -> String {
    format!(
        r#"service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    traces:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: memstore
    http:
      endpoint: "{query}"
    grpc:
      endpoint: "{query_grpc}"
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: "{otlp}"
      http:
        endpoint: "{otlp_http}"
processors:
  batch:
    timeout: 200ms
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
"#
    )
}

impl Jaeger {
    /// Starts Jaeger with its files (configuration, log) in `dir` and waits until its query API
    /// answers (at most 60 s).
    pub async fn start(bin: &Path, dir: &Path) -> Result<Self, SystemError> {
        let port = || {
            free_port()
                .map(|p| format!("127.0.0.1:{p}"))
                .map_err(|e| SystemError::Invalid(e.to_string()))
        };
        let (otlp, otlp_http, query, query_grpc) = (port()?, port()?, port()?, port()?);
        let path = dir.join("jaeger.yaml");
        std::fs::write(&path, config(&otlp, &otlp_http, &query, &query_grpc))
            .map_err(|e| SystemError::Io(path.display().to_string(), e))?;
        let mut cmd = Command::new(bin);
        cmd.arg("--config").arg(format!("file:{}", path.display()));
        let log = dir.join("jaeger.log");
        let running = Running::spawn("jaeger", cmd, log.clone())?;
        let j = Self {
            otlp_endpoint: format!("http://{otlp}"),
            otlp_address: otlp,
            query,
            running,
        };
        let wait = Duration::from_secs(60);
        let deadline = Instant::now() + wait;
        while !matches!(http_get(&j.query, "/api/services").await, Ok((200, _))) {
            if Instant::now() > deadline {
                return Err(SystemError::NotReady("jaeger".into(), wait, log));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(j)
    }

    /// The UI's address.
    pub fn ui(&self) -> String {
        format!("http://{}", self.query)
    }

    /// Span export settings for a service sending here: OTLP/gRPC, and a batch sent every
    /// 200 ms instead of every 5 s, so a test reads its trace soon after the request.
    pub fn exporter_env(&self) -> Vec<(String, String)> {
        vec![
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT".into(),
                self.otlp_endpoint.clone(),
            ),
            ("OTEL_BSP_SCHEDULE_DELAY".into(), "200".into()),
        ]
    }

    /// The traces of the last hour that hold a span of `service` (at most 1,000).
    pub async fn traces_of(&self, service: &str) -> Result<Vec<Trace>, String> {
        let path = format!("/api/traces?service={service}&lookback=1h&limit=1000");
        let (status, body) = http_get(&self.query, &path).await?;
        if status != 200 {
            return Err(format!("{path}: HTTP {status}: {body}"));
        }
        let v: serde_json::Value =
            serde_json::from_str(&body).map_err(|e| format!("{path}: {e}"))?;
        Ok(v["data"]
            .as_array()
            .map(|ts| ts.iter().map(Trace::of).collect())
            .unwrap_or_default())
    }

    /// One trace by id, as the query API returns it (JSON).
    pub async fn trace_json(&self, id: &str) -> Result<serde_json::Value, String> {
        let path = format!("/api/traces/{id}");
        let (status, body) = http_get(&self.query, &path).await?;
        if status != 200 {
            return Err(format!("{path}: HTTP {status}: {body}"));
        }
        serde_json::from_str(&body).map_err(|e| format!("{path}: {e}"))
    }
}

/// One span as the query API shows it.
#[derive(Debug, Clone)]
pub struct Span {
    /// Its id.
    pub id: String,
    /// Its parent's id ("" for a root).
    pub parent: String,
    /// The service that sent it.
    pub service: String,
    /// Its name.
    pub operation: String,
    /// Start, µs since the epoch.
    pub start_us: u64,
    /// Duration, µs.
    pub duration_us: u64,
    /// Its attributes, values as text.
    pub tags: BTreeMap<String, String>,
}

impl Span {
    /// The value of tag `key`, "" when absent.
    pub fn tag(&self, key: &str) -> &str {
        self.tags.get(key).map(String::as_str).unwrap_or_default()
    }
}

/// One trace: its id and spans, in start order.
#[derive(Debug, Clone)]
pub struct Trace {
    /// The trace id (hex).
    pub id: String,
    /// Its spans, earliest first.
    pub spans: Vec<Span>,
}

fn text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

impl Trace {
    /// Reads one element of the query API's `data`.
    pub fn of(v: &serde_json::Value) -> Self {
        let services: BTreeMap<String, String> = v["processes"]
            .as_object()
            .map(|ps| {
                ps.iter()
                    .map(|(k, p)| (k.clone(), text(&p["serviceName"])))
                    .collect()
            })
            .unwrap_or_default();
        let mut spans: Vec<Span> = v["spans"]
            .as_array()
            .map(|ss| {
                ss.iter()
                    .map(|s| Span {
                        id: text(&s["spanID"]),
                        parent: s["references"]
                            .as_array()
                            .and_then(|rs| rs.iter().find(|r| r["refType"] == "CHILD_OF"))
                            .map(|r| text(&r["spanID"]))
                            .unwrap_or_default(),
                        service: services
                            .get(&text(&s["processID"]))
                            .cloned()
                            .unwrap_or_default(),
                        operation: text(&s["operationName"]),
                        start_us: s["startTime"].as_u64().unwrap_or_default(),
                        duration_us: s["duration"].as_u64().unwrap_or_default(),
                        tags: s["tags"]
                            .as_array()
                            .map(|ts| {
                                ts.iter()
                                    .map(|t| (text(&t["key"]), text(&t["value"])))
                                    .collect()
                            })
                            .unwrap_or_default(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        spans.sort_by_key(|s| s.start_us);
        Self {
            id: text(&v["traceID"]),
            spans,
        }
    }

    /// The first span of `service` named `operation` for which `pick` holds.
    pub fn span(
        &self,
        service: &str,
        operation: &str,
        pick: impl Fn(&Span) -> bool,
    ) -> Option<&Span> {
        self.spans
            .iter()
            .find(|s| s.service == service && s.operation == operation && pick(s))
    }

    /// Whether `child` descends from `ancestor`.
    pub fn descends(&self, child: &Span, ancestor: &Span) -> bool {
        let mut at = child.parent.as_str();
        while !at.is_empty() {
            if at == ancestor.id {
                return true;
            }
            at = self
                .spans
                .iter()
                .find(|s| s.id == at)
                .map(|s| s.parent.as_str())
                .unwrap_or_default();
        }
        false
    }

    /// The trace as an indented tree, one span a line: start offset and duration in ms, service,
    /// name and the tags `shown` that have a value (the others are left out).
    pub fn render(&self, shown: &[&str]) -> String {
        let t0 = self.spans.first().map(|s| s.start_us).unwrap_or_default();
        let mut out = format!("trace {}\n", self.id);
        let known: std::collections::BTreeSet<&str> =
            self.spans.iter().map(|s| s.id.as_str()).collect();
        let roots = self
            .spans
            .iter()
            .filter(|s| !known.contains(s.parent.as_str()));
        for root in roots {
            self.render_at(root, 0, t0, shown, &mut out);
        }
        out
    }

    fn render_at(&self, span: &Span, depth: usize, t0: u64, shown: &[&str], out: &mut String) {
        use std::fmt::Write as _;
        let tags: Vec<String> = shown
            .iter()
            .filter_map(|k| {
                span.tags
                    .get(*k)
                    .filter(|v| !v.is_empty())
                    .map(|v| format!("{k}={v}"))
            })
            .collect();
        let _ = writeln!(
            out,
            "{:>8.2} ms {:>7.2} ms  {}{} · {}{}{}",
            span.start_us.saturating_sub(t0) as f64 / 1000.0,
            span.duration_us as f64 / 1000.0,
            "  ".repeat(depth),
            span.service,
            span.operation,
            if tags.is_empty() { "" } else { "  " },
            tags.join(" ")
        );
        for child in self.spans.iter().filter(|s| s.parent == span.id) {
            self.render_at(child, depth + 1, t0, shown, out);
        }
    }
}
