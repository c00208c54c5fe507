//! The fuzzing entry point: arbitrary bytes as a sequence of calls and watch events against one
//! service and ledger, through the same handlers the server runs. Used by the libFuzzer target
//! (`fuzz/fuzz_targets/ledger_inputs.rs`, run by `cargo xtask fuzz`) and by a bounded test in the test command. What must hold: no
//! panic, no hang, every call answered or refused.

use std::sync::Arc;
use std::time::Duration;

use prost::Message;
use tonic::Request;

use crate::auth::Policy;
use crate::ledger::{Ledger, QuotaSpec, ReservationLimits};
use quota_protocol::proto::quota_state_server::QuotaState;
use quota_protocol::proto::{
    AdmitPodRequest, AdmitPodsRequest, CheckWorkloadRequest, LookupRequest, ReleaseRequest,
    ValidateQuotaRequest,
};
use quota_protocol::types::ElasticQuota;

/// Runs `data`: chunks of `[kind][length: 2 bytes LE][payload]`, each decoded as one gRPC
/// request (AdmitPod, Release, Lookup, ValidateQuota, AdmitPods, CheckWorkload), an
/// ElasticQuota event (JSON)
/// or a pod event (an AdmitPod message read as the observed pod).
pub fn run(data: &[u8]) {
    let ledger = Arc::new(
        Ledger::new(Duration::from_secs(30)).with_limits(ReservationLimits {
            per_namespace: 8,
            total: 16,
            quota_share_permille: ReservationLimits::SERVICE_SHARE_PERMILLE,
            namespace_share_permille: ReservationLimits::SERVICE_SHARE_PERMILLE,
            untrusted_per_peer: 4,
            untrusted_total: 8,
            ..ReservationLimits::default()
        }),
    );
    let Ok(metrics) = crate::metrics::Metrics::new() else {
        return;
    };
    let svc = crate::Service::new(ledger.clone(), Policy::Anyone, metrics);
    let mut rest = data;
    while rest.len() >= 3 {
        let kind = rest[0];
        let len = usize::from(u16::from_le_bytes([rest[1], rest[2]])).min(rest.len() - 3);
        let payload = &rest[3..3 + len];
        rest = &rest[3 + len..];
        match kind % 9 {
            0 => {
                if let Ok(m) = AdmitPodRequest::decode(payload) {
                    let _ = futures::executor::block_on(svc.admit_pod(Request::new(m)));
                }
            }
            1 => {
                if let Ok(m) = ReleaseRequest::decode(payload) {
                    let _ = futures::executor::block_on(svc.release(Request::new(m)));
                }
            }
            2 => {
                if let Ok(m) = LookupRequest::decode(payload) {
                    let _ = futures::executor::block_on(svc.lookup(Request::new(m)));
                }
            }
            3 => {
                if let Ok(m) = ValidateQuotaRequest::decode(payload) {
                    let _ = futures::executor::block_on(svc.validate_quota(Request::new(m)));
                }
            }
            4 => {
                if let Ok(q) = serde_json::from_slice::<ElasticQuota>(payload) {
                    ledger.upsert_quota(QuotaSpec::of(&q));
                }
            }
            5 => {
                if let Ok(m) = AdmitPodRequest::decode(payload) {
                    let requests = m
                        .requests
                        .iter()
                        .map(|(k, a)| Ok((k.clone(), quota_protocol::wire::amount_of_wire(k, a)?)))
                        .collect::<Result<_, String>>();
                    ledger.observe_pod_usage(&m.namespace, &m.name, &m.quota_label, requests);
                }
            }
            6 => {
                if let Ok(m) = ReleaseRequest::decode(payload) {
                    ledger.delete_pod(&m.namespace, &m.name);
                    ledger.delete_quota(&m.name, &m.namespace);
                }
            }
            7 => {
                if let Ok(m) = CheckWorkloadRequest::decode(payload) {
                    let _ = futures::executor::block_on(svc.check_workload(Request::new(m)));
                }
            }
            _ => {
                if let Ok(m) = AdmitPodsRequest::decode(payload) {
                    let _ = futures::executor::block_on(svc.admit_pods(Request::new(m)));
                }
            }
        }
    }
}
