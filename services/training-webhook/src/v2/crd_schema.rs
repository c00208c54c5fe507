//! The schemas of members the rules keep as sent (`serde_json::Value`), so that the CRDs
//! `training-webhook crd` prints type them as upstream's CRDs do: with a member left untyped
//! the API server would take any value there (`dependsOn: [1]`) where upstream's CRD refuses it.
//! These types are never decoded into; they only describe. Built-in types come from
//! k8s-openapi; JobSet's (v0.12) and Trainer's own are written out from upstream's CRDs.

// Never constructed: the types exist for their schemas.
#![allow(dead_code)]

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::{JsonSchema, Schema, SchemaGenerator};

/// The schema of `T`, for `#[schemars(schema_with = "typed::<T>")]` on a member kept as sent.
pub fn typed<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

/// `podGroupPolicy.coscheduling` (scheduler-plugins).
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoschedulingPodGroupPolicySource {
    /// Seconds a gang may wait to be scheduled.
    pub schedule_timeout_seconds: Option<i32>,
}

/// `podGroupPolicy.volcano`.
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolcanoPodGroupPolicySource {
    /// Where in the network topology the gang may be placed.
    pub network_topology: Option<NetworkTopologySpec>,
}

/// `volcano.networkTopology`.
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkTopologySpec {
    /// `hard` or `soft`.
    pub mode: Option<String>,
    /// The highest tier the gang may span.
    pub highest_tier_allowed: Option<i64>,
}

/// JobSet's `coordinator`.
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Coordinator {
    /// The replicated job of the coordinator pod.
    pub replicated_job: String,
    /// Its job index.
    pub job_index: Option<i64>,
    /// Its pod index.
    pub pod_index: Option<i64>,
}

/// JobSet's `failurePolicy`.
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailurePolicy {
    /// Restarts before the JobSet fails.
    pub max_restarts: Option<i32>,
    /// `Recreate`, `BlockingRecreate`, `InPlaceRestart`.
    pub restart_strategy: Option<String>,
    /// Rules applied in order on a job failure.
    pub rules: Option<Vec<FailurePolicyRule>>,
}

/// `failurePolicy.rules[]`.
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailurePolicyRule {
    /// The rule's name.
    pub name: String,
    /// What to do.
    pub action: String,
    /// Job failure reasons the rule matches.
    pub on_job_failure_reasons: Option<Vec<String>>,
    /// Job failure message patterns the rule matches.
    pub on_job_failure_message_patterns: Option<Vec<String>>,
    /// Replicated jobs the rule applies to.
    pub target_replicated_jobs: Option<Vec<String>>,
}

/// JobSet's `network`.
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Network {
    /// Pods get DNS host names.
    #[serde(rename = "enableDNSHostnames")]
    pub enable_dns_hostnames: Option<bool>,
    /// The headless service's subdomain.
    pub subdomain: Option<String>,
    /// Addresses published before pods are ready.
    pub publish_not_ready_addresses: Option<bool>,
}

/// JobSet's `startupPolicy`.
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StartupPolicy {
    /// `AnyOrder` or `InOrder`.
    pub startup_policy_order: String,
}

/// JobSet's `successPolicy`.
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SuccessPolicy {
    /// `All` or `Any`.
    pub operator: String,
    /// Replicated jobs whose success counts.
    pub target_replicated_jobs: Option<Vec<String>>,
}

/// `replicatedJobs[].dependsOn[]`.
#[derive(JsonSchema)]
pub struct DependsOn {
    /// The replicated job waited for.
    pub name: String,
    /// `Ready` or `Complete`.
    pub status: String,
}

/// JobSet's `volumeClaimPolicies[]`.
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeClaimPolicy {
    /// Claims created for the JobSet.
    pub templates: Option<Vec<PersistentVolumeClaim>>,
    /// What happens to them when the JobSet goes.
    pub retention_policy: Option<VolumeRetentionPolicy>,
}

/// `volumeClaimPolicies[].retentionPolicy`.
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeRetentionPolicy {
    /// `Delete` or `Retain`.
    pub when_deleted: Option<String>,
}

/// `TrainJob.status`.
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrainJobStatus {
    /// The job's conditions.
    pub conditions: Option<Vec<Condition>>,
    /// Each replicated job's counts.
    pub jobs_status: Option<Vec<JobStatus>>,
    /// What the trainer reports.
    pub trainer_status: Option<TrainJobTrainerStatus>,
}

/// `status.jobsStatus[]`.
#[derive(JsonSchema)]
pub struct JobStatus {
    /// The replicated job.
    pub name: String,
    /// Ready pods' jobs.
    pub ready: i32,
    /// Succeeded jobs.
    pub succeeded: i32,
    /// Failed jobs.
    pub failed: i32,
    /// Active jobs.
    pub active: i32,
    /// Suspended jobs.
    pub suspended: i32,
}

/// `status.trainerStatus`.
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TrainJobTrainerStatus {
    /// Progress in percent.
    pub progress_percentage: Option<i32>,
    /// Seconds left, as estimated.
    pub estimated_remaining_seconds: Option<i32>,
    /// Metrics the trainer reports.
    pub metrics: Option<Vec<Metric>>,
    /// When the status was last updated.
    pub last_updated_time: Option<Time>,
}

/// `trainerStatus.metrics[]`.
#[derive(JsonSchema)]
pub struct Metric {
    /// The metric.
    pub name: String,
    /// Its value.
    pub value: String,
}
