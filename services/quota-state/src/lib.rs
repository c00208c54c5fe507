//! quota-state: the ElasticQuota tree and per-quota usage in memory, answering scheduling-webhook's
//! quota checks over gRPC with atomic check-and-reserve ([`ledger`] states the consistency
//! argument and its limits).
//!
//! Replicas elect a leader on a coordination.k8s.io Lease (kube-lease-manager); only the leader
//! reports SERVING, so only it receives admissions. Fail-over limit: reservations the old leader
//! made for pods not yet visible in the new leader's Pod watch are not known to the new leader
//! until those pods appear (an over-admission window bounded by the pods in flight at that
//! moment). Feeding: [`feed`]; the ledger and its consistency argument: [`ledger`].

pub mod feed;
pub mod ledger;
pub mod synthetic;

/// Generated gRPC types and service (`proto/quota_state.proto`).
#[allow(missing_docs, clippy::all)]
pub mod proto {
    tonic::include_proto!("quotastate.v1");
}

use std::sync::Arc;
use std::time::Instant;

use admission_kit::go::QuantityFormat;
use ledger::{Admission, Amount, Amounts, Ledger};
use proto::quota_state_server::QuotaState;
use proto::{AdmitPodRequest, AdmitPodResponse, ReleaseRequest, ReleaseResponse};
use tonic::{Request, Response, Status};

fn format_of(code: u32) -> QuantityFormat {
    match code {
        1 => QuantityFormat::BinarySI,
        2 => QuantityFormat::DecimalExponent,
        _ => QuantityFormat::DecimalSI,
    }
}

/// The wire code of a format.
pub fn format_code(f: QuantityFormat) -> u32 {
    match f {
        QuantityFormat::DecimalSI => 0,
        QuantityFormat::BinarySI => 1,
        QuantityFormat::DecimalExponent => 2,
    }
}

/// The gRPC service over a ledger.
#[derive(Clone)]
pub struct Service {
    ledger: Arc<Ledger>,
}

impl Service {
    /// Serves `ledger`.
    pub fn new(ledger: Arc<Ledger>) -> Self {
        Self { ledger }
    }
}

#[tonic::async_trait]
impl QuotaState for Service {
    async fn admit_pod(
        &self,
        req: Request<AdmitPodRequest>,
    ) -> Result<Response<AdmitPodResponse>, Status> {
        let r = req.into_inner();
        let requests: Amounts = r
            .requests
            .iter()
            .map(|(k, a)| {
                (
                    k.clone(),
                    Amount {
                        milli: a.milli,
                        format: format_of(a.format),
                    },
                )
            })
            .collect();
        let answer = match self.ledger.admit(
            &r.namespace,
            &r.name,
            &r.quota,
            &requests,
            r.dry_run,
            Instant::now(),
        ) {
            Admission::Allowed => AdmitPodResponse {
                allowed: true,
                message: String::new(),
            },
            Admission::Denied(message) => AdmitPodResponse {
                allowed: false,
                message,
            },
        };
        Ok(Response::new(answer))
    }

    async fn release(
        &self,
        req: Request<ReleaseRequest>,
    ) -> Result<Response<ReleaseResponse>, Status> {
        let r = req.into_inner();
        self.ledger.release(&r.namespace, &r.name);
        Ok(Response::new(ReleaseResponse {}))
    }
}
