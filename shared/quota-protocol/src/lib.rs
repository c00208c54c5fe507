//! What scheduling-webhook and quota-state share, so that the webhook builds without the
//! quota-state server (its ledger, watches, election and metrics):
//!
//! - [`proto`]: the gRPC messages and service (`proto/quota_state.proto`), and [`wire`]: amounts,
//!   formats and operations as they cross it;
//! - [`channel`]: the client's channels to quota-state (mutual TLS, or plaintext for benchmarks),
//!   each call written whole ([`coalesce`]);
//! - [`types`]: the ElasticQuota custom resource;
//! - [`tree`]: the quota tree rules (QV, PM-3, QM-3 and the tree the pod rules walk), run by
//!   quota-state on its ledger and by the webhook's offline `review` on the cluster state;
//! - [`spec`]: one quota as both sides count it; [`workload`]: the whole-workload decision (WQ).

pub mod channel;
pub mod coalesce;
pub mod spec;
pub mod tree;
pub mod types;
pub mod wire;
pub mod workload;

/// Generated gRPC types and service (`proto/quota_state.proto`).
#[allow(missing_docs, clippy::all)]
pub mod proto {
    tonic::include_proto!("quotastate.v1");
}
