//! Kubeflow Trainer v2.3 kinds of `trainer.kubeflow.org/v1alpha1`: TrainJob, TrainingRuntime
//! (namespaced) and ClusterTrainingRuntime (cluster-scoped), as the rules read them
//! (`docs/spec/trainer-v2.md` §2).
//!
//! Decoding follows Go's `encoding/json` as for the v1 jobs: a missing or `null` non-pointer
//! field takes its zero value, pointer fields are `Option`, a value of the wrong JSON type fails
//! the decode. Where upstream embeds Kubernetes types that k8s-openapi models with required
//! fields Go does not require (a container's `name`, a Job's pod template), the rules' own
//! lighter types are used and the CRD schema still comes from k8s-openapi (`schema_with`).
//! Values that appear in denial texts are printed from the request's JSON ([`super::gojson`]),
//! so these types keep only what the rules read.

use std::collections::BTreeMap;

use admission_kit::review::object::crd_default;

use super::crd_schema::{self, typed};
use k8s_openapi::api::core::v1::{EnvVar, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group of the three kinds.
pub const GROUP: &str = "trainer.kubeflow.org";

/// `trainer.kubeflow.org/trainjob-ancestor-step`: which TrainJob step a replicated job runs.
pub const LABEL_ANCESTOR: &str = "trainer.kubeflow.org/trainjob-ancestor-step";
/// `trainer.kubeflow.org/webhook-validation`: `disabled` keeps a runtime from the runtime
/// validators (their webhooks' objectSelector), for runtimes validated ahead of time.
pub const LABEL_VALIDATION: &str = "trainer.kubeflow.org/webhook-validation";
/// `trainer.kubeflow.org/support`: a runtime's support status (`deprecated`).
pub const LABEL_SUPPORT: &str = "trainer.kubeflow.org/support";

fn preserve_unknown(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true })
}

fn is_zero_i64(v: &i64) -> bool {
    *v == 0
}

/// `TrainJob.spec`: one training run of a runtime, with what it overrides.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "trainer.kubeflow.org",
    version = "v1alpha1",
    kind = "TrainJob",
    doc = "One training run on a TrainingRuntime or ClusterTrainingRuntime (Kubeflow Trainer v2.3).",
    plural = "trainjobs",
    namespaced,
    status = "TrainJobStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct TrainJobSpec {
    /// The runtime the job runs on.
    #[serde(default)]
    pub runtime_ref: RuntimeRef,
    /// Dataset and model initializers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initializer: Option<Initializer>,
    /// What the job overrides in the runtime's trainer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trainer: Option<Trainer>,
    /// Patches to the runtime's template, one per manager.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runtime_patches: Vec<RuntimePatch>,
    /// Suspended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default(false))]
    pub suspend: Option<bool>,
    /// Deadline in seconds.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub active_deadline_seconds: i64,
    /// The controller that reconciles the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default("trainer.kubeflow.org/trainjob-controller"))]
    pub managed_by: Option<String>,
}

/// `TrainJob.status`: kept as sent (the rules never read it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct TrainJobStatus(
    #[schemars(schema_with = "typed::<crd_schema::TrainJobStatus>")] pub serde_json::Value,
);

/// `spec.runtimeRef`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeRef {
    /// The runtime's name.
    #[serde(default)]
    pub name: String,
    /// Its API group (the CRD defaults `trainer.kubeflow.org`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default("trainer.kubeflow.org"))]
    pub api_group: Option<String>,
    /// Its kind (the CRD defaults `ClusterTrainingRuntime`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default("ClusterTrainingRuntime"))]
    pub kind: Option<String>,
}

/// `spec.initializer`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Initializer {
    /// The dataset initializer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<StorageInitializer>,
    /// The model initializer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<StorageInitializer>,
}

/// `spec.initializer.dataset` and `spec.initializer.model` (the same fields).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageInitializer {
    /// Where to fetch from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_uri: Option<String>,
    /// Extra environment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// Credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "typed::<k8s_openapi::api::core::v1::LocalObjectReference>")]
    pub secret_ref: Option<serde_json::Value>,
}

/// `spec.trainer`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Trainer {
    /// Image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Entrypoint.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// Arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Environment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// Nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_nodes: Option<i32>,
    /// Resources of each node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources_per_node: Option<ResourceRequirements>,
    /// Processes per node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_proc_per_node: Option<i32>,
}

/// `spec.runtimePatches[]`: one manager's patch to the runtime template.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuntimePatch {
    /// Who wrote the patch (a domain-prefixed path).
    #[serde(default)]
    pub manager: String,
    /// When it last changed (set by the defaulter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<Time>,
    /// The patch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub training_runtime_spec: Option<TrainingRuntimeSpecPatch>,
}

/// `runtimePatches[].trainingRuntimeSpec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TrainingRuntimeSpecPatch {
    /// The JobSet template patch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<JobSetTemplatePatch>,
}

/// `…trainingRuntimeSpec.template`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JobSetTemplatePatch {
    /// Labels and annotations for the JobSet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMeta>,
    /// The JobSet spec patch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<JobSetSpecPatch>,
}

/// `…template.spec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobSetSpecPatch {
    /// Patches by replicated job name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicated_jobs: Vec<ReplicatedJobPatch>,
}

/// `…replicatedJobs[]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReplicatedJobPatch {
    /// The replicated job patched.
    #[serde(default)]
    pub name: String,
    /// The Job template patch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<JobTemplatePatch>,
}

/// `…replicatedJobs[].template`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JobTemplatePatch {
    /// Labels and annotations for the Job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMeta>,
    /// The Job spec patch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<JobSpecPatch>,
}

/// `…template.spec` of a Job.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JobSpecPatch {
    /// The pod template patch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<PodTemplatePatch>,
}

/// `…spec.template` of a Job.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PodTemplatePatch {
    /// Labels and annotations for the pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMeta>,
    /// The pod spec patch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<PodSpecPatch>,
}

/// The pod fields a runtime patch may set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodSpecPatch {
    /// Service account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// Volumes (merged by name).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "typed::<Vec<k8s_openapi::api::core::v1::Volume>>")]
    pub volumes: Vec<serde_json::Value>,
    /// Init containers (merged by name).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub init_containers: Vec<ContainerPatch>,
    /// Containers (merged by name).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub containers: Vec<ContainerPatch>,
    /// Image pull secrets (merged by name).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "typed::<Vec<k8s_openapi::api::core::v1::LocalObjectReference>>")]
    pub image_pull_secrets: Vec<serde_json::Value>,
    /// Pod security context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "typed::<k8s_openapi::api::core::v1::PodSecurityContext>")]
    pub security_context: Option<serde_json::Value>,
    /// Node selector.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Affinity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "typed::<k8s_openapi::api::core::v1::Affinity>")]
    pub affinity: Option<serde_json::Value>,
    /// Tolerations (replaced whole).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "typed::<Vec<k8s_openapi::api::core::v1::Toleration>>")]
    pub tolerations: Vec<serde_json::Value>,
    /// Scheduling gates (merged by name).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "typed::<Vec<k8s_openapi::api::core::v1::PodSchedulingGate>>")]
    pub scheduling_gates: Vec<serde_json::Value>,
    /// Grace period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<i64>,
}

/// The container fields a runtime patch may set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerPatch {
    /// The container patched.
    #[serde(default)]
    pub name: String,
    /// Environment (merged by name).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// Volume mounts (merged by mount path).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "typed::<Vec<k8s_openapi::api::core::v1::VolumeMount>>")]
    pub volume_mounts: Vec<VolumeMountLite>,
    /// Security context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "typed::<k8s_openapi::api::core::v1::SecurityContext>")]
    pub security_context: Option<serde_json::Value>,
}

/// A volume mount as the rules read it (Go requires neither field).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeMountLite {
    /// The volume.
    #[serde(default)]
    pub name: String,
    /// Where it is mounted (the merge key).
    #[serde(default)]
    pub mount_path: String,
}

/// `TrainingRuntime.spec`: a namespaced runtime template.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "trainer.kubeflow.org",
    version = "v1alpha1",
    kind = "TrainingRuntime",
    doc = "A namespaced training runtime: the JobSet template and policies TrainJobs run on (Kubeflow Trainer v2.3).",
    plural = "trainingruntimes",
    namespaced
)]
#[serde(rename_all = "camelCase")]
pub struct TrainingRuntimeSpec {
    /// The ML framework policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ml_policy: Option<MLPolicy>,
    /// The gang-scheduling policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_group_policy: Option<PodGroupPolicy>,
    /// The JobSet template.
    #[serde(default)]
    pub template: JobSetTemplateSpec,
}

/// `ClusterTrainingRuntime.spec`: the same spec, cluster-scoped.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "trainer.kubeflow.org",
    version = "v1alpha1",
    kind = "ClusterTrainingRuntime",
    doc = "A cluster-wide training runtime: the JobSet template and policies TrainJobs run on (Kubeflow Trainer v2.3).",
    plural = "clustertrainingruntimes"
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterTrainingRuntimeSpec {
    /// The ML framework policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ml_policy: Option<MLPolicy>,
    /// The gang-scheduling policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_group_policy: Option<PodGroupPolicy>,
    /// The JobSet template.
    #[serde(default)]
    pub template: JobSetTemplateSpec,
}

impl From<ClusterTrainingRuntimeSpec> for TrainingRuntimeSpec {
    fn from(s: ClusterTrainingRuntimeSpec) -> Self {
        Self {
            ml_policy: s.ml_policy,
            pod_group_policy: s.pod_group_policy,
            template: s.template,
        }
    }
}

/// `spec.mlPolicy`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MLPolicy {
    /// Nodes of the trainer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_nodes: Option<i32>,
    /// PyTorch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch: Option<TorchPolicy>,
    /// MPI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpi: Option<MpiPolicy>,
    /// Flux.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flux: Option<FluxPolicy>,
    /// JAX (no fields).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown")]
    pub jax: Option<serde_json::Value>,
    /// XGBoost (no fields).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown")]
    pub xgboost: Option<serde_json::Value>,
}

/// `mlPolicy.torch`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TorchPolicy {
    /// Environment injected into other containers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_injection: Option<EnvInjection>,
}

/// `mlPolicy.torch.envInjection`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EnvInjection {
    /// Where to inject.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<EnvInjectionTarget>,
}

/// `envInjection.targets[]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EnvInjectionTarget {
    /// The replicated job.
    #[serde(default)]
    pub job_name: String,
    /// Its containers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub container_names: Vec<String>,
}

/// `mlPolicy.mpi`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MpiPolicy {
    /// Slots per node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default(1))]
    pub num_proc_per_node: Option<i32>,
    /// `OpenMPI`, `Intel`, `MPICH`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default("OpenMPI"))]
    pub mpi_implementation: Option<String>,
    /// Where the SSH keys are mounted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default("/root/.ssh"))]
    pub ssh_auth_mount_path: Option<String>,
    /// Whether the launcher also trains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default(false))]
    pub run_launcher_as_node: Option<bool>,
}

/// `mlPolicy.flux`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FluxPolicy {
    /// Processes per node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default(1))]
    pub num_proc_per_node: Option<i32>,
}

/// `spec.podGroupPolicy`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PodGroupPolicy {
    /// The scheduler-plugins coscheduling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "typed::<crd_schema::CoschedulingPodGroupPolicySource>")]
    pub coscheduling: Option<serde_json::Value>,
    /// Volcano.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "typed::<crd_schema::VolcanoPodGroupPolicySource>")]
    pub volcano: Option<serde_json::Value>,
}

/// `spec.template`: the JobSet's metadata and spec.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JobSetTemplateSpec {
    /// Labels and annotations propagated to the JobSet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMeta>,
    /// The JobSet spec.
    #[serde(default)]
    pub spec: JobSetSpec,
}

/// A JobSet spec (`jobset.x-k8s.io/v1alpha2`): the replicated jobs the rules read, the rest kept.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobSetSpec {
    /// The replicated jobs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicated_jobs: Vec<ReplicatedJob>,
    /// Network settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "typed::<crd_schema::Network>")]
    pub network: Option<serde_json::Value>,
    /// When the JobSet succeeds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "typed::<crd_schema::SuccessPolicy>")]
    pub success_policy: Option<serde_json::Value>,
    /// When the JobSet fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "typed::<crd_schema::FailurePolicy>")]
    pub failure_policy: Option<serde_json::Value>,
    /// Start order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "typed::<crd_schema::StartupPolicy>")]
    pub startup_policy: Option<serde_json::Value>,
    /// Suspended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// The coordinator pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "typed::<crd_schema::Coordinator>")]
    pub coordinator: Option<serde_json::Value>,
    /// The controller of the JobSet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub managed_by: Option<String>,
    /// Seconds to keep a finished JobSet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
    /// Claims made for the JobSet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "typed::<Vec<crd_schema::VolumeClaimPolicy>>")]
    pub volume_claim_policies: Option<serde_json::Value>,
}

/// `replicatedJobs[]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplicatedJob {
    /// The replicated job's name.
    #[serde(default)]
    pub name: String,
    /// Group name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default("default"))]
    pub group_name: Option<String>,
    /// The Job template.
    #[serde(default)]
    #[schemars(schema_with = "typed::<k8s_openapi::api::batch::v1::JobTemplateSpec>")]
    pub template: JobTemplate,
    /// Jobs made from the template (Go's `int32`, not a pointer: absent is 0).
    #[serde(default)]
    #[schemars(transform = crd_default(1))]
    pub replicas: i32,
    /// Start dependencies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "typed::<Vec<crd_schema::DependsOn>>")]
    pub depends_on: Option<serde_json::Value>,
}

/// A Job template as the rules read it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobTemplate {
    /// Labels (the ancestor label) and annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMeta>,
    /// The Job spec.
    #[serde(default)]
    pub spec: JobSpecLite,
}

/// A Job spec as the rules read it; other fields are kept.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JobSpecLite {
    /// Pods run at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<i32>,
    /// The pod template.
    #[serde(default)]
    pub template: PodTemplateLite,
    /// Every other Job field, as sent.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

/// A pod template as the rules read it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PodTemplateLite {
    /// Labels and annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMeta>,
    /// The pod spec.
    #[serde(default)]
    pub spec: PodSpecLite,
}

/// A pod spec as the rules read it: containers are kept as sent, since denials print them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpecLite {
    /// Init containers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub init_containers: Vec<serde_json::Value>,
    /// Containers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub containers: Vec<serde_json::Value>,
    /// Priority class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// Every other pod field, as sent.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

/// A container's `name` as Go reads it (absent or not a string: empty).
pub fn container_name(c: &serde_json::Value) -> &str {
    c.get("name")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("")
}
