//! Prometheus metrics, served in text format on the metrics port.
//!
//! Names follow controller-runtime's webhook metrics where one exists
//! (`controller_runtime_webhook_requests_total`, `…_latency_seconds`, `…_requests_in_flight`); the
//! decision and per-rule denial counters have no controller-runtime counterpart.

use std::sync::LazyLock;

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry, TextEncoder,
};

/// Reviews answered while a dependency (quota-state) could not be asked, by how they were
/// answered; and whether each dependency answered its last call. Process-wide, because rules
/// (which have no handle on [`Metrics`]) record them; every [`Metrics`] registers them.
static DEPENDENCIES: LazyLock<Option<(IntCounterVec, IntGaugeVec)>> = LazyLock::new(|| {
    let unavailable = IntCounterVec::new(
        Opts::new(
            "admission_webhook_dependency_unavailable_total",
            "Reviews answered without a dependency that could not be asked, by outcome: admitted (no rule needed it), allowed (with a warning, by policy), denied (by policy).",
        ),
        &["dependency", "outcome"],
    )
    .ok()?;
    let up = IntGaugeVec::new(
        Opts::new(
            "admission_webhook_dependency_up",
            "1 when the dependency answered the last call, 0 while it cannot be asked.",
        ),
        &["dependency"],
    )
    .ok()?;
    Some((unavailable, up))
});

/// Lookups the watch cache could not answer and that went to the API server instead, by kind
/// and result (`found`, `absent`, `error`). Process-wide, as the state has no handle on
/// [`Metrics`]; every [`Metrics`] registers it.
static LIVE_READS: LazyLock<Option<IntCounterVec>> = LazyLock::new(|| {
    IntCounterVec::new(
        Opts::new(
            "admission_webhook_state_live_reads_total",
            "Lookups missed by the watch cache (or made before it synced) and read from the API server instead, by kind and result (found, absent, error).",
        ),
        &["kind", "result"],
    )
    .ok()
});

/// Workload quota decisions (scheduling-webhook's WQ rules), by kind and outcome. Process-wide
/// like the others; every [`Metrics`] registers it.
static WORKLOAD_DECISIONS: LazyLock<Option<IntCounterVec>> = LazyLock::new(|| {
    IntCounterVec::new(
        Opts::new(
            "admission_webhook_workload_quota_decisions_total",
            "Workloads judged whole against their quota at submission, by kind and outcome (fits, not_now_warned, not_now_refused, never_fits, pods_refused, rollout_waits_warned, unchecked, unchanged, warned, invalid, template_refused, unavailable).",
        ),
        &["kind", "outcome"],
    )
    .ok()
});

/// Drains (lifecycle-webhook), by outcome. Process-wide like the others; every [`Metrics`]
/// registers it.
static DRAINS: LazyLock<Option<IntCounterVec>> = LazyLock::new(|| {
    IntCounterVec::new(
        Opts::new(
            "admission_webhook_drains_total",
            "Drains before deletion, by outcome: started, done, timed_out (counted once per drain across replicas); unanswered (the Pod's endpoint did not answer), unrecorded (the drain record could not be written), undecided (no decision within the review deadline), per review.",
        ),
        &["outcome"],
    )
    .ok()
});

/// The drain outcomes, each at 0 until it happens, so that dashboards and alerts find the
/// series of a service that drains (called by lifecycle-webhook's endpoint table).
pub fn drains_known() {
    if let Some(c) = DRAINS.as_ref() {
        for o in [
            "started",
            "done",
            "timed_out",
            "unanswered",
            "unrecorded",
            "undecided",
        ] {
            c.with_label_values(&[o]);
        }
    }
}

/// Records one drain event.
pub fn drain(outcome: &str) {
    if let Some(c) = DRAINS.as_ref() {
        c.with_label_values(&[outcome]).inc();
    }
}

/// Records one workload quota decision.
pub fn workload_quota_decision(kind: &str, outcome: &str) {
    if let Some(c) = WORKLOAD_DECISIONS.as_ref() {
        c.with_label_values(&[kind, outcome]).inc();
    }
}

/// Records a live read of `kind` with `result`.
pub fn state_live_read(kind: &str, result: &str) {
    if let Some(c) = LIVE_READS.as_ref() {
        c.with_label_values(&[kind, result]).inc();
    }
}

/// Records a review answered while `dependency` could not be asked, and marks it down.
pub fn dependency_unavailable(dependency: &str, outcome: &str) {
    if let Some((c, up)) = DEPENDENCIES.as_ref() {
        c.with_label_values(&[dependency, outcome]).inc();
        up.with_label_values(&[dependency]).set(0);
    }
}

/// Marks `dependency` as answering.
pub fn dependency_up(dependency: &str) {
    if let Some((_, up)) = DEPENDENCIES.as_ref() {
        up.with_label_values(&[dependency]).set(1);
    }
}

/// Koordinator's webhook metrics (`koord_manager_webhook_*`, scheduling spec §8), with upstream's
/// names, labels and buckets, so that dashboards and alerts written for Koordinator keep working.
/// Process-wide like the dependency metrics; a series appears once a service records it.
pub mod koord {
    use std::sync::LazyLock;
    use std::time::{Duration, Instant};

    use prometheus::{GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, Opts};

    pub(super) struct Collectors {
        pub(super) duration: HistogramVec,
        pub(super) shared_weight: GaugeVec,
        /// The quotas `shared_weight` holds series of, and their resources: at most
        /// [`SHARED_WEIGHT_QUOTAS`] quotas, so that reviews naming invented quotas cannot grow
        /// the registry without bound.
        pub(super) weighted: std::sync::Mutex<std::collections::HashMap<String, Vec<String>>>,
        /// Quotas admitted whose creation is being looked for ([`shared_weight_once_created`]).
        pub(super) pending: std::sync::atomic::AtomicUsize,
        pub(super) binding: IntCounterVec,
    }

    /// Quotas whose shared weight is shown at most; later ones are left out until some are
    /// deleted. A quota's resources count as at most [`SHARED_WEIGHT_RESOURCES`].
    pub const SHARED_WEIGHT_QUOTAS: usize = 2_000;
    /// Resources of one quota whose shared weight is shown at most.
    pub const SHARED_WEIGHT_RESOURCES: usize = 8;

    pub(super) static KOORD: LazyLock<Option<Collectors>> = LazyLock::new(|| {
        let buckets = prometheus::exponential_buckets(0.001, 2.0, 20).ok()?;
        Some(Collectors {
            duration: HistogramVec::new(
                HistogramOpts::new(
                    "koord_manager_webhook_webhook_duration_milliseconds",
                    "webhook_duration_milliseconds",
                )
                .buckets(buckets),
                &[
                    "webhook_type",
                    "object_type",
                    "operation",
                    "plugin_name",
                    "status",
                ],
            )
            .ok()?,
            shared_weight: GaugeVec::new(
                Opts::new(
                    "koord_manager_webhook_quota_shared_weight",
                    "quota_shared_weight",
                ),
                &["elasticquota_name", "resource_name"],
            )
            .ok()?,
            weighted: std::sync::Mutex::default(),
            pending: std::sync::atomic::AtomicUsize::new(0),
            binding: IntCounterVec::new(
                Opts::new(
                    "koord_manager_webhook_binding_admission_decisions_total",
                    "binding_admission_decisions_total",
                ),
                &["decision"],
            )
            .ok()?,
        })
    });

    /// Records one plugin run: `webhook_type` `mutate`|`validate`, `object_type` `pod`,
    /// `elasticquota`, `reservation`, `node` or `configmap`, the operation, upstream's plugin
    /// name, and whether it let the object through.
    pub fn observe(
        webhook_type: &str,
        object_type: &str,
        operation: &str,
        plugin: &str,
        allowed: bool,
        elapsed: Duration,
    ) {
        if let Some(c) = KOORD.as_ref() {
            let status = if allowed { "allowed" } else { "rejected" };
            c.duration
                .with_label_values(&[webhook_type, object_type, operation, plugin, status])
                .observe(elapsed.as_secs_f64() * 1000.0);
        }
    }

    /// Runs `f` as plugin `plugin` and records it ([`observe`]); `Err` counts as rejected.
    pub fn timed<T, E>(
        webhook_type: &str,
        object_type: &str,
        operation: &str,
        plugin: &str,
        f: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        timed_with(
            webhook_type,
            object_type,
            operation,
            plugin,
            f,
            Result::is_ok,
        )
    }

    /// [`timed`] for a plugin that waits for another service: the wait counts.
    pub async fn timed_async<T, E>(
        webhook_type: &str,
        object_type: &str,
        operation: &str,
        plugin: &str,
        f: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        let start = Instant::now();
        let r = f.await;
        observe(
            webhook_type,
            object_type,
            operation,
            plugin,
            r.is_ok(),
            start.elapsed(),
        );
        r
    }

    /// Runs `f` as plugin `plugin` and records it ([`observe`]), `allowed` telling whether its
    /// result let the object through (for handlers that answer with a verdict).
    pub fn timed_with<T>(
        webhook_type: &str,
        object_type: &str,
        operation: &str,
        plugin: &str,
        f: impl FnOnce() -> T,
        allowed: impl Fn(&T) -> bool,
    ) -> T {
        let start = Instant::now();
        let r = f();
        observe(
            webhook_type,
            object_type,
            operation,
            plugin,
            allowed(&r),
            start.elapsed(),
        );
        r
    }

    /// Sets quota `quota`'s shared weight of `resource` (QM-5), within the bounds above; call it
    /// for quotas that exist ([`shared_weight_once_created`]). Whether it is shown.
    pub fn shared_weight(quota: &str, resource: &str, value: f64) -> bool {
        let Some(c) = KOORD.as_ref() else {
            return false;
        };
        let mut weighted = c.weighted.lock().unwrap_or_else(|p| p.into_inner());
        let full = weighted.len() >= SHARED_WEIGHT_QUOTAS;
        let shown = match weighted.get_mut(quota) {
            Some(r) if r.iter().any(|x| x == resource) => true,
            Some(r) if r.len() < SHARED_WEIGHT_RESOURCES => {
                r.push(resource.to_owned());
                true
            }
            Some(_) => false,
            None if full => false,
            None => {
                weighted.insert(quota.to_owned(), vec![resource.to_owned()]);
                true
            }
        };
        if shown {
            c.shared_weight
                .with_label_values(&[quota, resource])
                .set(value);
        }
        shown
    }

    /// Quotas admitted at once whose creation [`shared_weight_once_created`] looks for at most;
    /// past it a quota's shared weight is not shown (reviews forged at full speed take these
    /// places, never a series).
    pub const SHARED_WEIGHT_PENDING: usize = 64;

    /// When an admitted quota is looked for, each after the one before: a create is persisted
    /// within milliseconds of its admission, unless a later webhook refuses it.
    pub const SHARED_WEIGHT_LOOKS: [Duration; 3] = [
        Duration::from_millis(500),
        Duration::from_secs(2),
        Duration::from_secs(10),
    ];

    /// Gives a pending place back when a look ends, however it ends.
    struct Pending;

    impl Drop for Pending {
        fn drop(&mut self) {
            if let Some(c) = KOORD.as_ref() {
                c.pending.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
            }
        }
    }

    /// Quota `quota` was admitted for creation (QM-5): its shared weight is shown once it
    /// exists, as `created` reads it from the quota itself (its weights per resource; `None`
    /// while there is no such quota), looked for at [`SHARED_WEIGHT_LOOKS`]. So a review that
    /// is forged, or refused by a later webhook, never names a series. Nothing is looked for
    /// outside a Tokio runtime (the `review` command) or past [`SHARED_WEIGHT_PENDING`]. Whether
    /// a look was started.
    pub fn shared_weight_once_created<F>(quota: &str, created: F) -> bool
    where
        F: Fn() -> Option<Vec<(String, f64)>> + Send + 'static,
    {
        look_for(quota, move |quota| match created() {
            Some(weights) => {
                for (resource, value) in weights {
                    shared_weight(quota, &resource, value);
                }
                true
            }
            None => false,
        })
    }

    /// Quota `quota` was admitted for deletion: its series go once `gone` finds no such quota,
    /// looked for as [`shared_weight_once_created`] does, so a forged review removes nothing.
    pub fn forget_shared_weight_once_gone<F>(quota: &str, gone: F) -> bool
    where
        F: Fn() -> bool + Send + 'static,
    {
        look_for(quota, move |quota| {
            let done = gone();
            if done {
                forget_shared_weight(quota);
            }
            done
        })
    }

    /// Runs `found` at [`SHARED_WEIGHT_LOOKS`] until it says it found what it looked for.
    fn look_for<F>(quota: &str, found: F) -> bool
    where
        F: Fn(&str) -> bool + Send + 'static,
    {
        let Some(c) = KOORD.as_ref() else {
            return false;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return false;
        };
        let order = std::sync::atomic::Ordering::AcqRel;
        if c.pending.fetch_add(1, order) >= SHARED_WEIGHT_PENDING {
            c.pending.fetch_sub(1, order);
            return false;
        }
        let pending = Pending;
        let quota = quota.to_owned();
        runtime.spawn(async move {
            let _pending = pending;
            for wait in SHARED_WEIGHT_LOOKS {
                tokio::time::sleep(wait).await;
                if found(&quota) {
                    return;
                }
            }
        });
        true
    }

    /// Quota `quota` is deleted: its shared-weight series go.
    pub fn forget_shared_weight(quota: &str) {
        let Some(c) = KOORD.as_ref() else { return };
        let mut weighted = c.weighted.lock().unwrap_or_else(|p| p.into_inner());
        for r in weighted.remove(quota).unwrap_or_default() {
            let _ = c.shared_weight.remove_label_values(&[quota, &r]);
        }
    }

    /// One binding admission decision (PB).
    pub fn binding_decision(decision: &str) {
        if let Some(c) = KOORD.as_ref() {
            c.binding.with_label_values(&[decision]).inc();
        }
    }
}

/// The kit's metrics, one registry per process.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    /// HTTP requests per webhook path and status code.
    pub requests: IntCounterVec,
    /// Review latency per webhook path.
    pub latency: HistogramVec,
    /// Reviews being handled per webhook path.
    pub in_flight: IntGaugeVec,
    /// Decisions per webhook path, operation and decision (allowed/denied/error).
    pub decisions: IntCounterVec,
    /// Denials per webhook path and rule id (one per field error).
    pub denials: IntCounterVec,
    /// 1 for each webhook path whose feature gate is enabled, 0 when it admits everything.
    pub enabled: IntGaugeVec,
    /// Decisions of endpoints on trial (`--enforcement warn|audit`) per webhook path, rule id and
    /// outcome: `would_deny` (one per rule that would have denied), `would_patch` (one per rule
    /// whose patch enforcing sends: withheld in `audit`, sent in `warn`), `agree` (admitted
    /// unchanged either way).
    pub audit: IntCounterVec,
    /// 1 for each webhook path's enforcement mode (`enforce`, `warn`, `audit`).
    pub enforcement: IntGaugeVec,
    /// TLS handshakes that did not complete, by reason (`failed`: a bad or missing client
    /// certificate, a protocol error; `timeout`).
    pub handshakes_refused: IntCounterVec,
}

impl Metrics {
    /// Creates and registers the metrics.
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new(
                "controller_runtime_webhook_requests_total",
                "Total number of admission requests by HTTP status code.",
            ),
            &["webhook", "code"],
        )?;
        let latency = HistogramVec::new(
            HistogramOpts::new(
                "controller_runtime_webhook_latency_seconds",
                "Histogram of the latency of processing admission requests.",
            )
            .buckets(vec![
                0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                1.0, 2.5, 5.0, 10.0,
            ]),
            &["webhook"],
        )?;
        let in_flight = IntGaugeVec::new(
            Opts::new(
                "controller_runtime_webhook_requests_in_flight",
                "Current number of admission requests being served.",
            ),
            &["webhook"],
        )?;
        let decisions = IntCounterVec::new(
            Opts::new(
                "admission_webhook_decisions_total",
                "Admission decisions by operation and decision (allowed, denied, error).",
            ),
            &["webhook", "operation", "decision"],
        )?;
        let denials = IntCounterVec::new(
            Opts::new(
                "admission_webhook_denials_total",
                "Field errors that denied a review, by rule id.",
            ),
            &["webhook", "rule"],
        )?;
        let enabled = IntGaugeVec::new(
            Opts::new(
                "admission_webhook_enabled",
                "1 when the webhook's rules run, 0 when its feature gate is off and it admits everything.",
            ),
            &["webhook"],
        )?;
        registry.register(Box::new(requests.clone()))?;
        registry.register(Box::new(latency.clone()))?;
        registry.register(Box::new(in_flight.clone()))?;
        registry.register(Box::new(decisions.clone()))?;
        registry.register(Box::new(denials.clone()))?;
        let audit = IntCounterVec::new(
            Opts::new(
                "admission_webhook_audit_total",
                "Decisions of endpoints in warn or audit mode, by rule id and outcome (would_deny, would_patch, agree): what enforcing would have done.",
            ),
            &["webhook", "rule", "outcome"],
        )?;
        let enforcement = IntGaugeVec::new(
            Opts::new(
                "admission_webhook_enforcement",
                "1 for the enforcement mode (enforce, warn, audit) each webhook path runs in.",
            ),
            &["webhook", "mode"],
        )?;
        registry.register(Box::new(audit.clone()))?;
        registry.register(Box::new(enforcement.clone()))?;
        let handshakes_refused = IntCounterVec::new(
            Opts::new(
                "admission_webhook_tls_handshakes_refused_total",
                "TLS handshakes on the webhook port that did not complete, by reason (failed, timeout, forbidden: a client certificate naming none of --allowed-client-names, busy: too many handshakes in progress, in all or from one address).",
            ),
            &["reason"],
        )?;
        registry.register(Box::new(enabled.clone()))?;
        registry.register(Box::new(handshakes_refused.clone()))?;
        if let Some((c, up)) = DEPENDENCIES.as_ref() {
            registry.register(Box::new(c.clone()))?;
            registry.register(Box::new(up.clone()))?;
        }
        if let Some(c) = LIVE_READS.as_ref() {
            registry.register(Box::new(c.clone()))?;
        }
        if let Some(c) = WORKLOAD_DECISIONS.as_ref() {
            registry.register(Box::new(c.clone()))?;
        }
        if let Some(c) = DRAINS.as_ref() {
            registry.register(Box::new(c.clone()))?;
        }
        if let Some(k) = koord::KOORD.as_ref() {
            registry.register(Box::new(k.duration.clone()))?;
            registry.register(Box::new(k.shared_weight.clone()))?;
            registry.register(Box::new(k.binding.clone()))?;
        }
        Ok(Self {
            registry,
            requests,
            latency,
            in_flight,
            decisions,
            denials,
            audit,
            enforcement,
            enabled,
            handshakes_refused,
        })
    }

    /// The registry, for other parts of the service to register their metrics with.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The metrics in Prometheus text format.
    pub fn render(&self) -> Vec<u8> {
        let mut buf = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut buf) {
            tracing::warn!(error = %e, "cannot encode metrics");
        }
        buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reviews naming invented quotas add a bounded number of series, and a deleted quota's go.
    #[test]
    fn shared_weight_series_are_bounded_and_removed_with_their_quota() {
        let mut shown = 0;
        for i in 0..koord::SHARED_WEIGHT_QUOTAS + 50 {
            if koord::shared_weight(&format!("invented-{i}"), "cpu", 1.0) {
                shown += 1;
            }
        }
        assert!(shown <= koord::SHARED_WEIGHT_QUOTAS, "{shown}");
        assert!(
            !koord::shared_weight("one-more", "cpu", 1.0),
            "the cap holds"
        );
        let resources = (0..koord::SHARED_WEIGHT_RESOURCES + 5)
            .filter(|r| koord::shared_weight("invented-0", &format!("r{r}"), 1.0))
            .count();
        assert!(resources < koord::SHARED_WEIGHT_RESOURCES, "{resources}");
        for i in 0..koord::SHARED_WEIGHT_QUOTAS + 50 {
            koord::forget_shared_weight(&format!("invented-{i}"));
        }
        assert!(koord::shared_weight("one-more", "cpu", 1.0));
        koord::forget_shared_weight("one-more");
    }

    /// A quota admitted for creation shows its weight once it exists; one that never comes
    /// (forged, or refused later) shows nothing, and looks waiting at once are bounded.
    #[tokio::test(start_paused = true)]
    async fn shared_weight_is_shown_only_for_quotas_that_come_to_exist() {
        let exists = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let e = exists.clone();
        assert!(koord::shared_weight_once_created(
            "comes-later",
            move || {
                e.load(std::sync::atomic::Ordering::Acquire)
                    .then(|| vec![("cpu".to_owned(), 4.0)])
            }
        ));
        assert!(koord::shared_weight_once_created("never-comes", || None));
        let shown = |name: &str| {
            String::from_utf8(Metrics::new().unwrap().render())
                .unwrap()
                .contains(&format!("elasticquota_name=\"{name}\""))
        };
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        assert!(!shown("comes-later") && !shown("never-comes"));
        exists.store(true, std::sync::atomic::Ordering::Release);
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        assert!(shown("comes-later"));
        tokio::time::sleep(std::time::Duration::from_secs(20)).await;
        assert!(!shown("never-comes"));
        // Every look ended: their places are back; past the bound nothing more is looked for.
        let started = (0..koord::SHARED_WEIGHT_PENDING + 10)
            .filter(|i| koord::shared_weight_once_created(&format!("forged-{i}"), || None))
            .count();
        assert_eq!(started, koord::SHARED_WEIGHT_PENDING);
        // A deletion admitted: the series stays while the quota does, and goes with it.
        let e = exists.clone();
        tokio::time::sleep(std::time::Duration::from_secs(15)).await;
        assert!(koord::forget_shared_weight_once_gone(
            "comes-later",
            move || { !e.load(std::sync::atomic::Ordering::Acquire) }
        ));
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
        assert!(
            shown("comes-later"),
            "a deletion not (yet) made removed the series"
        );
        exists.store(false, std::sync::atomic::Ordering::Release);
        tokio::time::sleep(std::time::Duration::from_secs(11)).await;
        assert!(!shown("comes-later"));
    }

    #[test]
    fn dependency_outages_are_exported() {
        dependency_unavailable("test-dependency", "admitted");
        let text = String::from_utf8(Metrics::new().unwrap().render()).unwrap();
        assert!(
            text.contains(
                "admission_webhook_dependency_unavailable_total{dependency=\"test-dependency\",outcome=\"admitted\"} 1"
            ),
            "{text}"
        );
        assert!(text.contains("admission_webhook_dependency_up{dependency=\"test-dependency\"} 0"));
        dependency_up("test-dependency");
        let text = String::from_utf8(Metrics::new().unwrap().render()).unwrap();
        assert!(text.contains("admission_webhook_dependency_up{dependency=\"test-dependency\"} 1"));
    }
}
