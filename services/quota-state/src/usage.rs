//! Usage write-back: the serving replica shows each quota's usage on the ElasticQuota itself, so
//! that `kubectl get elasticquota -o yaml` tells what quota-state counts.
//!
//! The field is Koordinator's `quota.scheduling.koordinator.sh/child-request` annotation: upstream's
//! PV-4 reads a quota's admitted usage from it and writes it back after each admission, so tools
//! and runbooks built for upstream find the number where they look, and `review --state` on an
//! exported quota evaluates against the same usage. Not `status.used`: that is the scheduler's
//! observed usage (its own controller writes it) and QV's strict-keys check reads it, so writing
//! it would change other rules' answers.
//!
//! Writes come in rounds (`--usage-write-interval-secs`), never one per pod: a round writes each
//! quota whose usage changed at most once, at most `--usage-writes-per-round` of them, a few at a
//! time, and the next round starts where this one stopped. Only the replica that answers writes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams};

use crate::ledger::{Ledger, PodKey, UsageWrite};
use crate::metrics::Metrics;
use quota_protocol::tree::keys::CHILD_REQUEST;
use quota_protocol::types::ElasticQuota;

/// Writes in flight at once within a round: enough to drain a round quickly, few enough not to
/// crowd the API server (each write is also admitted through scheduling-webhook's quota rules).
const CONCURRENCY: usize = 4;

/// How often and how much to write.
#[derive(Debug, Clone, Copy)]
pub struct WriteBack {
    /// Time between rounds.
    pub interval: Duration,
    /// Quotas written per round at most.
    pub per_round: usize,
}

/// The field manager of the write-back, as `kubectl get -o yaml --show-managed-fields` shows it.
pub const FIELD_MANAGER: &str = "quota-state";

async fn write(api_client: &kube::Client, w: &UsageWrite) -> Result<(), kube::Error> {
    let api: Api<ElasticQuota> = Api::namespaced(api_client.clone(), &w.namespace);
    let patch = if w.by_member.is_empty() {
        serde_json::json!({"metadata": {"annotations": {CHILD_REQUEST: w.value}}})
    } else {
        serde_json::json!({"metadata": {"annotations": {
            CHILD_REQUEST: w.value,
            crate::ledger::BY_MEMBER: w.by_member,
        }}})
    };
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    api.patch(&w.name, &params, &Patch::Merge(&patch))
        .await
        .map(|_| ())
}

/// One round: the due quotas after `after`, written; `after` moves to the last one tried.
/// Returns the failures as "namespace/name: error".
pub async fn round(
    client: &kube::Client,
    ledger: &Ledger,
    cfg: WriteBack,
    after: &mut Option<PodKey>,
    metrics: &Metrics,
) -> Vec<String> {
    let due = ledger.usage_writes(Instant::now(), after.as_ref(), cfg.per_round);
    if let Some(last) = due.last() {
        *after = Some((last.namespace.clone(), last.name.clone()));
    }
    let results: Vec<(UsageWrite, Result<(), kube::Error>)> = futures::stream::iter(due)
        .map(|w| async move {
            let r = write(client, &w).await;
            (w, r)
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    metrics.usage_rounds.inc();
    let mut failed = Vec::new();
    for (w, r) in results {
        match r {
            Ok(()) => {
                // Not written again before its watch event arrives.
                ledger.observe_shown(&w.namespace, &w.name, &w.value);
                if !w.by_member.is_empty() {
                    ledger.observe_shown_split(&w.namespace, &w.name, &w.by_member);
                }
                metrics.usage_writes.with_label_values(&["ok"]).inc();
            }
            Err(e) => {
                metrics.usage_writes.with_label_values(&["error"]).inc();
                failed.push(format!("{}/{}: {e}", w.namespace, w.name));
            }
        }
    }
    failed
}

/// Runs rounds for ever, every `cfg.interval`, while `serving` holds. Logs a WARN line when
/// writes start failing (with how many and the first error) and an INFO line when they succeed
/// again; every write is counted in `quota_state_usage_writes_total`.
pub async fn run(
    client: kube::Client,
    ledger: Arc<Ledger>,
    cfg: WriteBack,
    metrics: Metrics,
    serving: Arc<AtomicBool>,
) {
    let mut tick = tokio::time::interval(cfg.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut after = None;
    let mut failing = false;
    loop {
        tick.tick().await;
        if !serving.load(Ordering::Acquire) {
            continue;
        }
        let failed = round(&client, &ledger, cfg, &mut after, &metrics).await;
        match (failing, failed.first()) {
            (false, Some(first)) => tracing::warn!(
                failed = failed.len(),
                first = %first,
                "usage write-back: cannot write quotas' child-request annotation; retrying each round"
            ),
            (true, None) => tracing::info!("usage write-back: writing again"),
            _ => {}
        }
        failing = !failed.is_empty();
    }
}
