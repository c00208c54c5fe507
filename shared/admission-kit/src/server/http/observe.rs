//! One span, the metrics and one log line per review.

use super::*;

/// One span per review (continuing the API server's trace from `traceparent`), the webhook
/// metrics, and one structured log line per decision: the audit trail.
#[derive(Clone)]
pub struct ObserveLayer {
    /// The webhook path, the metrics' label.
    pub path: &'static str,
    /// Where to count.
    pub metrics: Metrics,
    /// Continue the trace of `traceparent` ([`ServeOptions::continue_traces`]).
    pub continue_traces: bool,
    /// Log plain admissions at INFO too ([`ServeOptions::log_admissions`]).
    pub log_admissions: bool,
}

impl<S> Layer<S> for ObserveLayer {
    type Service = Observe<S>;
    fn layer(&self, inner: S) -> Observe<S> {
        Observe {
            inner,
            cfg: self.clone(),
        }
    }
}

/// See [`ObserveLayer`].
#[derive(Clone)]
pub struct Observe<S> {
    inner: S,
    cfg: ObserveLayer,
}

impl<S, B> Service<Request<B>> for Observe<S>
where
    S: Service<Request<B>, Response = Response<Body>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
    B: Send + 'static,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let inner = self.inner.clone();
        let cfg = self.cfg.clone();
        // A request its caller traces without sampling gets no span: it would be made, filled
        // and dropped by the sampler.
        let span = if cfg.continue_traces && crate::server::trace::unsampled(req.headers()) {
            tracing::Span::none()
        } else {
            tracing::info_span!(
                "admission.review",
                otel.name = %cfg.path,
                webhook = %cfg.path,
                uid = tracing::field::Empty,
                allowed = tracing::field::Empty,
                kind = tracing::field::Empty,
                namespace = tracing::field::Empty,
                name = tracing::field::Empty,
                operation = tracing::field::Empty,
                rules = tracing::field::Empty,
                applied = tracing::field::Empty,
                patched = tracing::field::Empty,
                patch_bytes = tracing::field::Empty,
                dry_run = tracing::field::Empty,
            )
        };
        if cfg.continue_traces && !span.is_none() {
            crate::server::trace::continue_from(&span, req.headers());
        }
        Box::pin(
            async move {
                let m = &cfg.metrics;
                let path = cfg.path;
                let gauge = m.in_flight.with_label_values(&[path]);
                gauge.inc();
                let start = Instant::now();
                let resp = inner.oneshot(req).await;
                let elapsed = start.elapsed();
                gauge.dec();
                let Ok(resp) = resp;
                m.latency
                    .with_label_values(&[path])
                    .observe(elapsed.as_secs_f64());
                m.requests
                    .with_label_values(&[path, resp.status().as_str()])
                    .inc();
                record(path, m, &resp, elapsed, cfg.log_admissions);
                Ok(resp)
            }
            .instrument(span),
        )
    }
}

/// Writes the decision's fields into the review span in one call (one pass through the
/// subscriber's layers instead of one per field).
fn trace_fields(span: &tracing::Span, d: &Decision) {
    use tracing::field::Value;
    let Some(meta) = span.metadata() else {
        return;
    };
    let (rules, applied) = (tracing::field::display(d.rules()), d.applied.join(","));
    let patch_bytes = d.patch_bytes as u64;
    let values: [(&str, &dyn Value); 9] = [
        ("kind", &d.kind.as_str()),
        ("namespace", &d.namespace.as_str()),
        ("name", &d.name.as_str()),
        ("operation", &d.operation),
        ("rules", &rules),
        ("applied", &applied.as_str()),
        ("patched", &d.patched),
        ("patch_bytes", &patch_bytes),
        ("dry_run", &d.dry_run),
    ];
    let fields = meta.fields();
    let found: Vec<_> = values.iter().filter_map(|(n, _)| fields.field(n)).collect();
    // All nine are declared where the span is made.
    let Ok(found) = <[tracing::field::Field; 9]>::try_from(found) else {
        return;
    };
    let pairs: [(&tracing::field::Field, Option<&dyn Value>); 9] =
        std::array::from_fn(|i| (&found[i], Some(values[i].1)));
    span.record_all(&fields.value_set(&pairs));
}

/// One decision line, at the level given.
macro_rules! decision_line {
    ($level:expr, $path:expr, $d:expr, $on_trial:expr, $latency_us:expr) => {
        tracing::event!(
            target: crate::server::telemetry::DECISION_TARGET,
            $level,
            webhook = $path,
            uid = %$d.uid,
            kind = %$d.kind,
            namespace = %$d.namespace,
            name = %$d.name,
            operation = $d.operation,
            allowed = $d.allowed,
            patched = $d.patched,
            dry_run = $d.dry_run,
            rules = %$d.rules(),
            applied = %$d.applied.join(","),
            // Only when there are some (absent fields are not written).
            warnings = ($d.warnings > 0).then_some($d.warnings),
            // On trial only: what enforcing would have done.
            enforcement = $on_trial.then_some($d.enforcement.as_str()),
            would_deny = $on_trial.then_some($d.would_deny),
            withheld_patch = $d.withheld_patch.as_deref(),
            latency_us = $latency_us,
            "decision"
        )
    };
}

/// Whether a decision is a plain admission: admitted as sent, with nothing to say and nothing
/// that enforcing would have done otherwise. Its line is written at DEBUG unless the operator
/// asks for every admission (`--log-admissions`); it is counted in the metrics either way.
pub(super) fn plain(d: &Decision) -> bool {
    d.allowed
        && !d.patched
        && d.warnings == 0
        && d.denials.is_empty()
        && d.enforcement == Enforcement::Enforce
        && d.withheld_patch.is_none()
}

pub(super) fn record(
    path: &str,
    m: &Metrics,
    resp: &Response<Body>,
    elapsed: Duration,
    log_admissions: bool,
) {
    let latency_us = elapsed.as_micros() as u64;
    if let Some(d) = resp.extensions().get::<Decision>() {
        let span = tracing::Span::current();
        span.record("uid", d.uid.as_str());
        span.record("allowed", d.allowed);
        // What a trace reader needs, written only when the span is exported: the decision line
        // below has it already.
        if crate::server::trace::exported(&span) {
            trace_fields(&span, d);
        }
        let decision = if d.allowed { "allowed" } else { "denied" };
        m.decisions
            .with_label_values(&[path, d.operation, decision])
            .inc();
        let on_trial = d.enforcement != Enforcement::Enforce;
        if !on_trial {
            for denial in &d.denials {
                m.denials.with_label_values(&[path, denial.rule]).inc();
            }
        } else {
            trial(path, m, d);
        }
        if log_admissions || !plain(d) {
            decision_line!(tracing::Level::INFO, path, d, on_trial, latency_us);
        } else {
            decision_line!(tracing::Level::DEBUG, path, d, on_trial, latency_us);
        }
    } else if let Some(TrialRefusal(mode)) = resp.extensions().get::<TrialRefusal>() {
        // Admitted on trial: what enforcing would have refused.
        m.decisions.with_label_values(&[path, "", "allowed"]).inc();
        m.audit
            .with_label_values(&[path, REVIEW_ERROR_RULE, "would_deny"])
            .inc();
        let why = resp
            .extensions()
            .get::<ReviewError>()
            .map(ToString::to_string)
            .unwrap_or_default();
        tracing::info!(
            target: crate::server::telemetry::DECISION_TARGET,
            webhook = path,
            allowed = true,
            enforcement = mode.as_str(),
            would_deny = true,
            rules = REVIEW_ERROR_RULE,
            error = %why,
            latency_us,
            "decision"
        );
    } else {
        m.decisions.with_label_values(&[path, "", "error"]).inc();
        let why = resp
            .extensions()
            .get::<ReviewError>()
            .map(ToString::to_string)
            .unwrap_or_default();
        tracing::warn!(
            target: crate::server::telemetry::DECISION_TARGET,
            webhook = path,
            code = resp.status().as_u16(),
            error = %why,
            latency_us,
            "review refused"
        );
    }
}

/// Marks a response that admitted, on trial, a review enforcing would have refused as
/// undecodable.
#[derive(Debug, Clone, Copy)]
pub(super) struct TrialRefusal(pub(super) Enforcement);

/// The rule label of a would-be refusal of an undecodable review.
pub(super) const REVIEW_ERROR_RULE: &str = "review-error";

/// Counts one decision of an endpoint on trial (`warn`, `audit`): each rule that would have
/// denied, each rule whose patch enforcing sends (withheld in `audit`, sent in `warn`), or
/// agreement.
pub(super) fn trial(path: &str, m: &Metrics, d: &Decision) {
    if d.would_deny {
        for denial in &d.denials {
            m.audit
                .with_label_values(&[path, denial.rule, "would_deny"])
                .inc();
        }
    } else if d.withheld_patch.is_some() || d.patched {
        for rule in &d.applied {
            m.audit
                .with_label_values(&[path, rule, "would_patch"])
                .inc();
        }
        if d.applied.is_empty() {
            m.audit.with_label_values(&[path, "", "would_patch"]).inc();
        }
    } else {
        m.audit.with_label_values(&[path, "", "agree"]).inc();
    }
}
