//! quota-state's Prometheus metrics, served with the probes on `--metrics-listen`.

use prometheus::{
    Counter, Encoder, GaugeVec, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge,
    Opts, Registry, TextEncoder,
};

use crate::ledger::Stats;

/// The metrics, one registry per process.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    /// Calls answered, per method and gRPC code (`OK`, `InvalidArgument`, …).
    pub calls: IntCounterVec,
    /// Refused handshakes and calls, per method (`handshake` for TLS) and reason.
    pub refused: IntCounterVec,
    /// Outstanding reservations (pods admitted, not yet seen in the watch).
    pub reservations: IntGauge,
    /// 1 while answering (lists in and leader), else 0.
    pub serving: IntGauge,
    /// 1 while this replica holds the `quota-state` Lease.
    pub leader: IntGauge,
    /// Time to decide one AdmitPod (check and reserve, under the ledger's lock).
    pub admit_latency: Histogram,
    /// AdmitPod decisions by result (`allowed`, `denied`) and the denying rule.
    pub admissions: IntCounterVec,
    /// The `allowed` series of `admissions`, resolved once: AdmitPod's common case pays no
    /// label lookup.
    pub admitted: IntCounter,
    /// CheckWorkload answers by fit (`fits`, `not_now`, `never`, `unchecked`, `refused`).
    pub workloads: IntCounterVec,
    /// Quotas and pods held.
    quotas: IntGauge,
    pods: IntGauge,
    /// Reservations expired, tree rebuilds and their seconds, since start.
    expired: IntCounter,
    /// Peers a created pod vouched for, outstanding reservations of the others, those dropped
    /// for a trusted peer's pod and the reviews refused at their bounds (see the ledger's
    /// `peers`).
    trusted_peers: IntGauge,
    untrusted: IntGauge,
    preempted: IntCounter,
    untrusted_refused: IntCounter,
    rebuilds: IntCounter,
    rebuild_seconds: Counter,
    /// The part of the rebuild seconds spent holding the ledger's lock: what admissions waited.
    rebuild_locked_seconds: Counter,
    /// Each quota's subtree usage and limit, per resource, in units.
    used: GaugeVec,
    limit: GaugeVec,
    /// Usage write-back rounds run (by the leader), and the annotation writes by result.
    pub usage_rounds: IntCounter,
    /// `ok` and `error` writes of the `child-request` annotation.
    pub usage_writes: IntCounterVec,
    /// How long reservations waited for their pod's watch event: a histogram kept by the
    /// ledger, exposed as Prometheus histogram series (`_bucket{le}` cumulative, `_count`,
    /// `_sum`), so `histogram_quantile` reads the window `--reservation-ttl-secs` must cover.
    backed_buckets: IntCounterVec,
    backed_count: IntCounter,
    backed_sum: Counter,
    /// In a fleet: 1 while a member's Pod watch is up, 0 while it is broken (its usage kept as
    /// last seen, its reservations held).
    member_watch: prometheus::IntGaugeVec,
}

impl Metrics {
    /// Creates and registers the metrics.
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new();
        let calls = IntCounterVec::new(
            Opts::new(
                "quota_state_calls_total",
                "gRPC calls answered, by method and code.",
            ),
            &["method", "code"],
        )?;
        let refused = IntCounterVec::new(
            Opts::new(
                "quota_state_refused_calls_total",
                "Connections and calls refused, by method (handshake for TLS) and reason.",
            ),
            &["method", "reason"],
        )?;
        let reservations = IntGauge::new(
            "quota_state_reservations",
            "Outstanding reservations: pods admitted and not yet seen in the Pod watch.",
        )?;
        let serving = IntGauge::new(
            "quota_state_serving",
            "1 while quota-state answers (initial lists in and leader), else 0.",
        )?;
        let leader = IntGauge::new(
            "quota_state_leader",
            "1 while this replica holds the quota-state Lease (only the leader answers).",
        )?;
        let admit_latency = Histogram::with_opts(
            HistogramOpts::new(
                "quota_state_admit_pod_duration_seconds",
                "Time to decide one AdmitPod: quota chain check and reservation, under the ledger's lock.",
            )
            .buckets(vec![
                0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                0.025, 0.05, 0.1,
            ]),
        )?;
        let admissions = IntCounterVec::new(
            Opts::new(
                "quota_state_admissions_total",
                "AdmitPod decisions by result (allowed, denied) and the denying rule (PV-3, PV-4; empty when allowed).",
            ),
            &["result", "rule"],
        )?;
        let workloads = IntCounterVec::new(
            Opts::new(
                "quota_state_workload_checks_total",
                "CheckWorkload answers by fit: fits, not_now (WQ-3), never (WQ-2), unchecked, refused (PV-3, PV-4).",
            ),
            &["fit"],
        )?;
        let quotas = IntGauge::new("quota_state_quotas", "ElasticQuotas held.")?;
        let pods = IntGauge::new("quota_state_pods", "Pods held (from the Pod watch).")?;
        let expired = IntCounter::new(
            "quota_state_reservations_expired_total",
            "Reservations whose pod never appeared in the watch within the TTL.",
        )?;
        let trusted_peers = IntGauge::new(
            "quota_state_trusted_peers",
            "Addresses whose reviews are trusted: a created pod backed one of their reservations.",
        )?;
        let untrusted = IntGauge::new(
            "quota_state_untrusted_reservations",
            "Outstanding reservations from addresses that no created pod has vouched for.",
        )?;
        let preempted = IntCounter::new(
            "quota_state_untrusted_reservations_preempted_total",
            "Reservations of untrusted addresses dropped for a trusted address's pod.",
        )?;
        let untrusted_refused = IntCounter::new(
            "quota_state_untrusted_refusals_total",
            "Reviews from untrusted addresses refused at their bounds (count or share).",
        )?;
        let rebuilds = IntCounter::new(
            "quota_state_tree_rebuilds_total",
            "Rebuilds of the quota tree and its usage (after quota changes).",
        )?;
        let rebuild_seconds = Counter::new(
            "quota_state_tree_rebuild_seconds_total",
            "Seconds spent rebuilding the quota tree and its usage.",
        )?;
        let rebuild_locked_seconds = Counter::new(
            "quota_state_tree_rebuild_locked_seconds_total",
            "Seconds of the tree rebuilds spent holding the ledger's lock (installing the tree and moving the usage it moved): what admissions waited.",
        )?;
        let used = GaugeVec::new(
            Opts::new(
                "quota_state_quota_used",
                "Usage of a quota's subtree (admitted pods and outstanding reservations), per resource, in units.",
            ),
            &["quota", "resource"],
        )?;
        let limit = GaugeVec::new(
            Opts::new(
                "quota_state_quota_limit",
                "A quota's admission limit (the admission annotation, else spec.max), per resource, in units.",
            ),
            &["quota", "resource"],
        )?;
        let usage_rounds = IntCounter::new(
            "quota_state_usage_write_rounds_total",
            "Usage write-back rounds run by the leader (each writes a quota at most once).",
        )?;
        let usage_writes = IntCounterVec::new(
            Opts::new(
                "quota_state_usage_writes_total",
                "Writes of a quota's usage to its child-request annotation, by result (ok, error).",
            ),
            &["result"],
        )?;
        let backed_buckets = IntCounterVec::new(
            Opts::new(
                "quota_state_reservation_backed_seconds_bucket",
                "Reservations whose pod appeared in the watch, by the seconds from the admission to the pod's event (cumulative, as a histogram's buckets).",
            ),
            &["le"],
        )?;
        let backed_count = IntCounter::new(
            "quota_state_reservation_backed_seconds_count",
            "Reservations whose pod appeared in the watch.",
        )?;
        let backed_sum = Counter::new(
            "quota_state_reservation_backed_seconds_sum",
            "Seconds from admission to the pod's watch event, summed over the backed reservations.",
        )?;
        let member_watch = prometheus::IntGaugeVec::new(
            Opts::new(
                "quota_state_member_watch_up",
                "In a fleet, per member cluster: 1 while its Pod watch is up, 0 while broken (its usage is kept as last seen and its reservations held until it lists again).",
            ),
            &["cluster"],
        )?;
        for c in [
            Box::new(calls.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(member_watch.clone()),
            Box::new(backed_buckets.clone()),
            Box::new(backed_count.clone()),
            Box::new(backed_sum.clone()),
            Box::new(usage_rounds.clone()),
            Box::new(usage_writes.clone()),
            Box::new(refused.clone()),
            Box::new(reservations.clone()),
            Box::new(serving.clone()),
            Box::new(leader.clone()),
            Box::new(admit_latency.clone()),
            Box::new(admissions.clone()),
            Box::new(workloads.clone()),
            Box::new(quotas.clone()),
            Box::new(pods.clone()),
            Box::new(expired.clone()),
            Box::new(trusted_peers.clone()),
            Box::new(untrusted.clone()),
            Box::new(preempted.clone()),
            Box::new(untrusted_refused.clone()),
            Box::new(rebuilds.clone()),
            Box::new(rebuild_seconds.clone()),
            Box::new(rebuild_locked_seconds.clone()),
            Box::new(used.clone()),
            Box::new(limit.clone()),
        ] {
            registry.register(c)?;
        }
        Ok(Self {
            registry,
            calls,
            refused,
            reservations,
            serving,
            leader,
            admit_latency,
            admitted: admissions.with_label_values(&["allowed", ""]),
            admissions,
            workloads,
            quotas,
            pods,
            expired,
            trusted_peers,
            untrusted,
            preempted,
            untrusted_refused,
            rebuilds,
            rebuild_seconds,
            rebuild_locked_seconds,
            used,
            limit,
            usage_rounds,
            usage_writes,
            backed_buckets,
            backed_count,
            backed_sum,
            member_watch,
        })
    }

    /// A member's Pod watch went up or down.
    pub fn member_watch(&self, cluster: &str, up: bool) {
        self.member_watch
            .with_label_values(&[cluster])
            .set(i64::from(up));
    }

    /// A member left the fleet: its series go.
    pub fn forget_member(&self, cluster: &str) {
        let _ = self.member_watch.remove_label_values(&[cluster]);
    }

    /// The registry, for the managed-certificate metrics.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Sets the ledger's numbers (at each scrape). Counters advance by what the ledger counted
    /// since the last scrape; the per-quota gauges are rebuilt, so deleted quotas disappear.
    pub fn observe_ledger(&self, s: &Stats) {
        let gauge = |g: &IntGauge, v: usize| g.set(i64::try_from(v).unwrap_or(i64::MAX));
        gauge(&self.quotas, s.quotas);
        gauge(&self.pods, s.pods);
        gauge(&self.reservations, s.reservations);
        self.expired
            .inc_by(s.expired.saturating_sub(self.expired.get()));
        gauge(&self.trusted_peers, s.trusted_peers);
        gauge(&self.untrusted, s.untrusted_reservations);
        self.preempted
            .inc_by(s.preempted.saturating_sub(self.preempted.get()));
        self.untrusted_refused.inc_by(
            s.untrusted_refused
                .saturating_sub(self.untrusted_refused.get()),
        );
        let mut below = 0;
        let bounds = crate::ledger::BACKED_BUCKETS.iter().map(|b| b.to_string());
        for (le, n) in bounds.zip(s.backed.buckets).chain([("+Inf".to_owned(), 0)]) {
            below += n;
            let c = self.backed_buckets.with_label_values(&[&le]);
            let total = if le == "+Inf" { s.backed.count } else { below };
            c.inc_by(total.saturating_sub(c.get()));
        }
        self.backed_count
            .inc_by(s.backed.count.saturating_sub(self.backed_count.get()));
        let more = s.backed.sum - self.backed_sum.get();
        if more > 0.0 {
            self.backed_sum.inc_by(more);
        }
        self.rebuilds
            .inc_by(s.rebuilds.saturating_sub(self.rebuilds.get()));
        let more = s.rebuild_seconds - self.rebuild_seconds.get();
        if more > 0.0 {
            self.rebuild_seconds.inc_by(more);
        }
        let more = s.rebuild_locked_seconds - self.rebuild_locked_seconds.get();
        if more > 0.0 {
            self.rebuild_locked_seconds.inc_by(more);
        }
        self.used.reset();
        self.limit.reset();
        for u in &s.usage {
            self.used
                .with_label_values(&[&u.quota, &u.resource])
                .set(u.used);
            if let Some(l) = u.limit {
                self.limit
                    .with_label_values(&[&u.quota, &u.resource])
                    .set(l);
            }
        }
    }

    /// Counts one refusal.
    pub fn refused(&self, method: &str, reason: &str) {
        self.refused.with_label_values(&[method, reason]).inc();
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
    use crate::ledger::QuotaUsage;

    #[test]
    fn ledger_numbers_become_gauges_and_counters() {
        let m = Metrics::new().unwrap();
        let mut s = Stats {
            quotas: 2,
            pods: 5,
            reservations: 1,
            expired: 3,
            rebuilds: 2,
            rebuild_seconds: 0.5,
            rebuild_locked_seconds: 0.25,
            rebuild_locked_max: 0.01,
            backed: Default::default(),
            trusted_peers: 1,
            untrusted_reservations: 2,
            preempted: 3,
            untrusted_refused: 4,
            usage: vec![QuotaUsage {
                quota: "team-a".into(),
                resource: "cpu".into(),
                used: 3.5,
                limit: Some(10.0),
            }],
        };
        m.observe_ledger(&s);
        s.expired = 4;
        s.usage.clear();
        m.observe_ledger(&s);
        let text = String::from_utf8(m.render()).unwrap();
        for want in [
            "quota_state_quotas 2",
            "quota_state_pods 5",
            "quota_state_reservations 1",
            "quota_state_reservations_expired_total 4",
            "quota_state_tree_rebuilds_total 2",
            "quota_state_tree_rebuild_seconds_total 0.5",
            "quota_state_tree_rebuild_locked_seconds_total 0.25",
        ] {
            assert!(text.contains(want), "missing {want}:\n{text}");
        }
        assert!(
            !text.contains("quota_state_quota_used{"),
            "a deleted quota's gauges disappear"
        );
    }
}
