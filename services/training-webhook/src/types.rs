//! Kubeflow Training Operator v1 job kinds (`kubeflow.org/v1`): PyTorchJob, TFJob, XGBoostJob,
//! PaddleJob, JAXJob and (v1.8.x) MXJob. Replica maps are typed maps of [`ReplicaSpec`] whose
//! pod templates are k8s-openapi `PodTemplateSpec`s; presence is modelled with `Option` where a
//! rule depends on it (spec §11).

use std::collections::BTreeMap;

use admission_kit::review::object::crd_default;
use k8s_openapi::api::autoscaling::v2::MetricSpec;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A replica map: replica type → spec. A `null` value is kept as `None` (FIX-2 treats it as `{}`).
pub type ReplicaSpecs = BTreeMap<String, Option<ReplicaSpec>>;

/// One replica type of a job.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSpec {
    /// Desired replicas; absent is not 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// The pods' template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<PodTemplateSpec>,
    /// `Always`, `OnFailure`, `Never`, `ExitCode`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
}

/// `spec.runPolicy`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunPolicy {
    /// `All`, `Running`, `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clean_pod_policy: Option<String>,
    /// Seconds to keep a finished job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
    /// Deadline in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
    /// Retries before failing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_limit: Option<i32>,
    /// Gang-scheduling settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling_policy: Option<SchedulingPolicy>,
    /// Suspended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default(false))]
    pub suspend: Option<bool>,
    /// The controller that reconciles the job; absent is not `""` (TR-02, TR-03).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_by: Option<String>,
}

/// `spec.runPolicy` of the v1.8 MXJob, which has no `managedBy`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MXRunPolicy {
    /// `All`, `Running`, `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clean_pod_policy: Option<String>,
    /// Seconds to keep a finished job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
    /// Deadline in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
    /// Retries before failing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_limit: Option<i32>,
    /// Gang-scheduling settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling_policy: Option<SchedulingPolicy>,
    /// Suspended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default(false))]
    pub suspend: Option<bool>,
}

/// `spec.runPolicy.schedulingPolicy`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchedulingPolicy {
    /// Minimum pods to start together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_available: Option<i32>,
    /// Queue name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// Minimum resources (quantities: strings or numbers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_resources: Option<BTreeMap<String, Quantity>>,
    /// Priority class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class: Option<String>,
    /// Scheduling timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_timeout_seconds: Option<i32>,
}

/// `spec.elasticPolicy` of a PyTorchJob.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ElasticPolicy {
    /// Lower bound of workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<i32>,
    /// Upper bound of workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_replicas: Option<i32>,
    /// Rendezvous backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdzv_backend: Option<String>,
    /// Rendezvous port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdzv_port: Option<i32>,
    /// Rendezvous host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdzv_host: Option<String>,
    /// Rendezvous id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdzv_id: Option<String>,
    /// Extra rendezvous settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdzv_conf: Option<Vec<RdzvConf>>,
    /// Standalone rendezvous.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standalone: Option<bool>,
    /// Deprecated: processes per node (TR-12, TR-13); presence matters.
    #[serde(
        default,
        rename = "nProcPerNode",
        skip_serializing_if = "Option::is_none"
    )]
    pub n_proc_per_node: Option<i32>,
    /// Restarts allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_restarts: Option<i32>,
    /// Autoscaling metrics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Vec<MetricSpec>>,
}

/// `spec.elasticPolicy` of a PaddleJob.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PaddleElasticPolicy {
    /// Lower bound of workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<i32>,
    /// Upper bound of workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_replicas: Option<i32>,
    /// Restarts allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_restarts: Option<i32>,
    /// Autoscaling metrics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Vec<MetricSpec>>,
}

/// One rendezvous setting.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RdzvConf {
    /// Key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

/// The status every job kind shares (not read by any rule).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobStatus {
    /// Conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<JobCondition>>,
    /// Per replica type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_statuses: Option<BTreeMap<String, ReplicaStatus>>,
    /// Start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// Completion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_time: Option<Time>,
    /// Last reconcile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_reconcile_time: Option<Time>,
}

/// A job condition.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobCondition {
    /// Type.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// Status.
    #[serde(default)]
    pub status: String,
    /// Reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Last update.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_update_time: Option<Time>,
    /// Last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

/// Status of one replica type.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaStatus {
    /// Running pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active: Option<i32>,
    /// Succeeded pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub succeeded: Option<i32>,
    /// Failed pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<i32>,
    /// Deprecated selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// Selector for the scale subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
}

/// `PyTorchJob.spec`.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubeflow.org",
    version = "v1",
    kind = "PyTorchJob",
    plural = "pytorchjobs",
    namespaced,
    status = "JobStatus",
    doc = "A distributed PyTorch training job.",
    scale = r#"{"specReplicasPath":".spec.pytorchReplicaSpecs.Worker.replicas","statusReplicasPath":".status.replicaStatuses.Worker.active","labelSelectorPath":".status.replicaStatuses.Worker.selector"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct PyTorchJobSpec {
    /// Run policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_policy: Option<RunPolicy>,
    /// Elastic training; presence matters even when `{}` (TR-11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elastic_policy: Option<ElasticPolicy>,
    /// `Master` and `Worker`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pytorch_replica_specs: Option<ReplicaSpecs>,
    /// Processes per node (a string: `auto`, `cpu`, `gpu` or a number); presence matters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nproc_per_node: Option<String>,
}

/// `TFJob.spec`.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubeflow.org",
    version = "v1",
    kind = "TFJob",
    plural = "tfjobs",
    namespaced,
    status = "JobStatus",
    doc = "A distributed TensorFlow training job."
)]
#[serde(rename_all = "camelCase")]
pub struct TFJobSpec {
    /// Run policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_policy: Option<RunPolicy>,
    /// `""` or `AllWorkers`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub success_policy: Option<String>,
    /// `Chief`, `Master`, `PS`, `Worker`, `Evaluator` (any key accepted, Q1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tf_replica_specs: Option<ReplicaSpecs>,
    /// Dynamic workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable_dynamic_worker: Option<bool>,
}

/// `XGBoostJob.spec`.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubeflow.org",
    version = "v1",
    kind = "XGBoostJob",
    plural = "xgboostjobs",
    namespaced,
    status = "JobStatus",
    doc = "A distributed XGBoost training job."
)]
#[serde(rename_all = "camelCase")]
pub struct XGBoostJobSpec {
    /// Run policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_policy: Option<RunPolicy>,
    /// `Master` and `Worker`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xgb_replica_specs: Option<ReplicaSpecs>,
}

/// `PaddleJob.spec`.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubeflow.org",
    version = "v1",
    kind = "PaddleJob",
    plural = "paddlejobs",
    namespaced,
    status = "JobStatus",
    doc = "A distributed PaddlePaddle training job.",
    scale = r#"{"specReplicasPath":".spec.paddleReplicaSpecs.Worker.replicas","statusReplicasPath":".status.replicaStatuses.Worker.active","labelSelectorPath":".status.replicaStatuses.Worker.selector"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct PaddleJobSpec {
    /// Run policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_policy: Option<RunPolicy>,
    /// Elastic training (no rule reads it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elastic_policy: Option<PaddleElasticPolicy>,
    /// `Master` and `Worker`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paddle_replica_specs: Option<ReplicaSpecs>,
}

/// `JAXJob.spec`.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubeflow.org",
    version = "v1",
    kind = "JAXJob",
    plural = "jaxjobs",
    namespaced,
    status = "JobStatus",
    doc = "A distributed JAX training job.",
    scale = r#"{"specReplicasPath":".spec.jaxReplicaSpecs.Worker.replicas","statusReplicasPath":".status.replicaStatuses.Worker.active","labelSelectorPath":".status.replicaStatuses.Worker.selector"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct JAXJobSpec {
    /// Run policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_policy: Option<RunPolicy>,
    /// `Worker` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jax_replica_specs: Option<ReplicaSpecs>,
}

/// `MXJob.spec` (v1.8.x; removed in v1.9.0).
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubeflow.org",
    version = "v1",
    kind = "MXJob",
    plural = "mxjobs",
    namespaced,
    status = "JobStatus",
    doc = "A distributed MXNet training job (deprecated)."
)]
#[serde(rename_all = "camelCase")]
pub struct MXJobSpec {
    /// Run policy (no managedBy in v1.8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_policy: Option<MXRunPolicy>,
    /// `MXTrain` or `MXTune`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_mode: Option<String>,
    /// `Scheduler`, `Server`, `Worker`, `TunerTracker`, `TunerServer`, `Tuner`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mx_replica_specs: Option<ReplicaSpecs>,
}
