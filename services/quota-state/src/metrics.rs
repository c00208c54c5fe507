//! quota-state's Prometheus metrics, served with the probes on `--metrics-listen`.

use prometheus::{Encoder, IntCounterVec, IntGauge, Opts, Registry, TextEncoder};

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
        registry.register(Box::new(calls.clone()))?;
        registry.register(Box::new(refused.clone()))?;
        registry.register(Box::new(reservations.clone()))?;
        registry.register(Box::new(serving.clone()))?;
        Ok(Self {
            registry,
            calls,
            refused,
            reservations,
            serving,
        })
    }

    /// The registry, for the managed-certificate metrics.
    pub fn registry(&self) -> &Registry {
        &self.registry
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
