//! Kthena v1.0 kinds of `workload.serving.volcano.sh/v1alpha1`: ModelBooster, ModelServing,
//! AutoscalingPolicy (`docs/spec/kthena-v1.md` §2).
//!
//! Decoding follows Go's `encoding/json` as for the pinned kinds (`crate::types`): missing or
//! `null` non-pointer fields take their zero value, pointer fields are `Option`, a wrong JSON
//! type fails the decode. The scaling behaviour types are the pinned ones: v1.0 kept them
//! field for field.

use std::collections::BTreeMap;

use admission_kit::compat::go::Quantity;
use admission_kit::review::object::crd_default;
use k8s_openapi::api::core::v1::{
    Affinity, EnvFromSource, EnvVar, ObjectReference, PodSpec, ResourceRequirements, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::types::{AutoscalingPolicyBehavior, PanicPolicy, ScaleUpPolicy, StablePolicy};
use crate::v1::networking::ModelMatch;

/// The API group of the three kinds.
pub const GROUP: &str = "workload.serving.volcano.sh";

fn preserve_unknown(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true })
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

/// `ModelBooster.spec`: one model on one inference backend.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "workload.serving.volcano.sh",
    version = "v1alpha1",
    kind = "ModelBooster",
    doc = "One model served by one inference backend (Kthena v1.0).",
    plural = "modelboosters",
    namespaced,
    status = "ModelBoosterStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct ModelBoosterSpec {
    /// The model's name where `metadata.name` cannot hold it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Owner.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub owner: String,
    /// The backend.
    #[serde(default)]
    pub backend: ModelBackend,
    /// Request matching for routing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_match: Option<ModelMatch>,
}

/// `spec.backend`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelBackend {
    /// Backend name.
    #[serde(default)]
    pub name: String,
    /// `vLLM`, `vLLMDisaggregated`, `SGLang`, `MindIE`, `MindIEDisaggregated`.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// Where the weights come from.
    #[serde(default, rename = "modelURI")]
    pub model_uri: String,
    /// Where weights are cached.
    #[serde(default, rename = "cacheURI", skip_serializing_if = "String::is_empty")]
    pub cache_uri: String,
    /// Environment sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_from: Option<Vec<EnvFromSource>>,
    /// Environment variables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,
    /// Replicas (a plain int upstream: absent is 0).
    #[serde(default)]
    pub replicas: i32,
    /// The workers.
    #[serde(default)]
    pub workers: Vec<ModelWorker>,
    /// Scheduler of the pods.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub scheduler_name: String,
    /// RuntimeClass of the pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_class_name: Option<String>,
}

/// `spec.backend.workers[i]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelWorker {
    /// `server`, `prefill`, `decode`, `controller`, `coordinator`; absent is `""`.
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    #[schemars(transform = crd_default("server"))]
    pub type_: String,
    /// Container image.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image: String,
    /// Replicas.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replicas: i32,
    /// Pods per replica.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pods: i32,
    /// Resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Affinity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// Tolerations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    /// Engine configuration, any JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown")]
    pub config: Option<serde_json::Value>,
}

/// `ModelBooster.status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelBoosterStatus {
    /// Conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    /// Last generation acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// `ModelServing.spec`: replicated serving groups of roles.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "workload.serving.volcano.sh",
    version = "v1alpha1",
    kind = "ModelServing",
    doc = "Replicated serving groups, each a set of roles with an entry pod and workers (Kthena v1.0).",
    plural = "modelservings",
    namespaced,
    status = "ModelServingStatus",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.labelSelector"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ModelServingSpec {
    /// Serving groups; a pointer upstream, so absent and 0 differ (MS-5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default(1))]
    pub replicas: Option<i32>,
    /// Scheduler of the pods.
    #[serde(default)]
    #[schemars(transform = crd_default("volcano"))]
    pub scheduler_name: String,
    /// Built-in plugins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugins: Option<Vec<PluginSpec>>,
    /// The serving group template.
    #[serde(default)]
    pub template: ServingGroup,
    /// How updates roll out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout_strategy: Option<RolloutStrategy>,
    /// `ServingGroupRecreate`, `RoleRecreate` (the default when empty) or `None`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(transform = crd_default("RoleRecreate"))]
    pub recovery_policy: String,
}

/// `spec.plugins[i]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PluginSpec {
    /// Plugin name.
    #[serde(default)]
    pub name: String,
    /// `BuiltIn`.
    #[serde(default, rename = "type")]
    #[schemars(transform = crd_default("BuiltIn"))]
    pub type_: String,
    /// Plugin configuration, any JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown")]
    pub config: Option<serde_json::Value>,
    /// Where the plugin applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<PluginScope>,
}

/// `spec.plugins[i].scope`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PluginScope {
    /// Roles it applies to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roles: Option<Vec<String>>,
    /// `All`, `Entry` or `Worker`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub target: String,
}

/// `spec.rolloutStrategy`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStrategy {
    /// `ServingGroupRollingUpdate` (the default when empty) or `RoleRollingUpdate`.
    #[serde(default, rename = "type")]
    #[schemars(transform = crd_default("ServingGroupRollingUpdate"))]
    pub type_: String,
    /// Rolling update bounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update_configuration: Option<RollingUpdateConfiguration>,
}

/// `spec.rolloutStrategy.rollingUpdateConfiguration`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdateConfiguration {
    /// Serving groups that may be down at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default(1))]
    pub max_unavailable: Option<IntOrString>,
    /// Groups at or above this ordinal are updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<IntOrString>,
}

/// `spec.template`: one serving group.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServingGroup {
    /// Grace period before a failed group restarts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default(0))]
    pub restart_grace_period_seconds: Option<i64>,
    /// Gang scheduling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gang_policy: Option<GangPolicy>,
    /// Volcano network topology of groups and roles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_topology: Option<NetworkTopology>,
    /// The roles; a nil list and an empty one print differently (MS-6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roles: Option<Vec<Role>>,
}

/// `spec.template.gangPolicy`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GangPolicy {
    /// Minimum replicas per role name (a Go map: rules visit keys in sorted order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_role_replicas: Option<BTreeMap<String, i32>>,
}

/// `spec.template.networkTopology`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkTopology {
    /// Topology of a whole group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_policy: Option<NetworkTopologySpec>,
    /// Topology of one role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role_policy: Option<NetworkTopologySpec>,
}

/// Volcano's `NetworkTopologySpec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkTopologySpec {
    /// `hard` or `soft`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default("hard"))]
    pub mode: Option<String>,
    /// Highest tier allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub highest_tier_allowed: Option<i32>,
    /// Name of the highest tier allowed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub highest_tier_name: Option<String>,
}

/// `spec.template.roles[i]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Role {
    /// Role name, a DNS-1035 label (MS-2).
    #[serde(default)]
    pub name: String,
    /// Role replicas; a pointer upstream (absent counts as 1 where defaulted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default(1))]
    pub replicas: Option<i32>,
    /// The entry pod.
    #[serde(default)]
    pub entry_template: PodTemplate,
    /// Workers per role replica.
    #[serde(default)]
    pub worker_replicas: i32,
    /// The worker pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker_template: Option<PodTemplate>,
    /// Role replicas that may be down at once (RoleRollingUpdate only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
}

/// A pod template whose metadata holds only labels and annotations.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PodTemplate {
    /// Labels and annotations of the pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMetadata>,
    // Boxed: a `PodSpec` is 1,440 bytes, and a role holds two templates inline, so every move
    // of a role and every growth of the roles list copied both (about 4 % of a ModelServing
    // review on the loopback path; docs/performance.md). A plain comment, because the field's
    // doc comment is its description in the generated CRD.
    /// The pod spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<Box<PodSpec>>,
}

/// `…Template.metadata`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TemplateMetadata {
    /// Labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// `ModelServing.status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelServingStatus {
    /// Last generation acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Serving groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Groups at the current revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_replicas: Option<i32>,
    /// Groups at the update revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_replicas: Option<i32>,
    /// Groups ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,
    /// Current revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_revision: Option<String>,
    /// Update revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_revision: Option<String>,
    /// Conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    /// Selector of the pods, for the scale subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<String>,
}

/// `AutoscalingPolicy.spec` (v1.0: the policy names its own targets).
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "workload.serving.volcano.sh",
    version = "v1alpha1",
    kind = "AutoscalingPolicy",
    doc = "How ModelServings scale on their metrics (Kthena v1.0).",
    plural = "autoscalingpolicies",
    namespaced,
    status = "AutoscalingPolicyStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct AutoscalingPolicySpec {
    /// Tolerance in percent (no rule reads it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default(10))]
    pub tolerance_percent: Option<i32>,
    /// Metrics and their targets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Vec<Metric>>,
    /// Scaling behaviour; emptiness decided as for the pinned kind (PM rules).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behavior: Option<AutoscalingPolicyBehavior>,
    /// One ModelServing scaled between bounds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub homogeneous_target: Option<HomogeneousTarget>,
    /// Several ModelServings traded off by cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heterogeneous_target: Option<HeterogeneousTarget>,
    /// The roles of one disaggregated ModelServing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disaggregated_target: Option<DisaggregatedTarget>,
}

/// `spec.metrics[i]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Metric {
    /// Metric name.
    #[serde(default)]
    pub name: String,
    /// Target value; missing or `null` is the zero quantity.
    #[serde(default)]
    pub target_value: Quantity,
}

/// Where a role's or target's metrics come from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MetricSource {
    /// Scraped from the pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<PodMetricSource>,
    /// Queried from Prometheus.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prometheus: Option<PrometheusMetricSource>,
}

/// `…metricSources{}.pod`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodMetricSource {
    /// Container or metric name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Path of the metrics endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default("/metrics"))]
    pub uri: Option<String>,
    /// Port of the metrics endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default(8100))]
    pub port: Option<i32>,
    /// Which pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
}

/// `…metricSources{}.prometheus`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PrometheusMetricSource {
    /// Prometheus URL.
    #[serde(default, rename = "serverURL")]
    pub server_url: String,
    /// PromQL query.
    #[serde(default)]
    pub query: String,
    /// Authentication (empty in v1.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<EmptyObject>,
}

/// An object with no fields.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EmptyObject {}

/// A ModelServing and where its metrics come from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    /// The ModelServing.
    #[serde(default)]
    pub target_ref: ObjectReference,
    /// Metric sources by metric name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric_sources: Option<BTreeMap<String, MetricSource>>,
}

/// `spec.homogeneousTarget`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HomogeneousTarget {
    /// The target.
    #[serde(default)]
    pub target: Target,
    /// Lower bound.
    #[serde(default)]
    pub min_replicas: i32,
    /// Upper bound.
    #[serde(default)]
    pub max_replicas: i32,
}

/// `spec.heterogeneousTarget`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HeterogeneousTarget {
    /// The targets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Vec<HeterogeneousTargetParam>>,
    /// How far cost may grow, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default(200))]
    pub cost_expansion_rate_percent: Option<i32>,
}

/// `spec.heterogeneousTarget.params[i]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HeterogeneousTargetParam {
    /// The target.
    #[serde(default)]
    pub target: Target,
    /// Relative cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<i32>,
    /// Lower bound.
    #[serde(default)]
    pub min_replicas: i32,
    /// Upper bound.
    #[serde(default)]
    pub max_replicas: i32,
}

/// `spec.disaggregatedTarget`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DisaggregatedTarget {
    /// The ModelServing.
    #[serde(default)]
    pub target_ref: ObjectReference,
    /// Bounds and metrics per role name (a Go map: rules visit keys in sorted order).
    #[serde(default)]
    pub roles: BTreeMap<String, RoleScalingParam>,
    /// Bounds on the ratio of two roles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_constraint: Option<RoleRatioConstraint>,
}

/// `spec.disaggregatedTarget.roles{}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoleScalingParam {
    /// Lower bound.
    #[serde(default)]
    pub min_replicas: i32,
    /// Upper bound.
    #[serde(default)]
    pub max_replicas: i32,
    /// The role's own metrics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Vec<Metric>>,
    /// Metric sources by metric name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric_sources: Option<BTreeMap<String, MetricSource>>,
}

/// `spec.disaggregatedTarget.ratioConstraint`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoleRatioConstraint {
    /// Role counted above the line.
    #[serde(default)]
    pub numerator_role: String,
    /// Role counted below the line.
    #[serde(default)]
    pub denominator_role: String,
    /// Lowest ratio.
    #[serde(default)]
    pub min_ratio: Quantity,
    /// Highest ratio.
    #[serde(default)]
    pub max_ratio: Quantity,
}

/// `AutoscalingPolicy.status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AutoscalingPolicyStatus {
    /// Last generation acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    /// State of a homogeneous target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub homogeneous_status: Option<TargetScalingStatus>,
    /// State of a disaggregated target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disaggregated_status: Option<DisaggregatedScalingStatus>,
    /// State of each heterogeneous target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heterogeneous_status: Option<Vec<TargetScalingStatus>>,
}

/// The scaling state of one target or role.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetScalingStatus {
    /// Target or role name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Replicas now.
    #[serde(default)]
    pub current_replicas: i32,
    /// Replicas wanted.
    #[serde(default)]
    pub desired_replicas: i32,
    /// Stable or panic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// When it last scaled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scale_time: Option<Time>,
}

/// `status.disaggregatedStatus`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DisaggregatedScalingStatus {
    /// Per role.
    #[serde(default)]
    pub roles: Vec<TargetScalingStatus>,
    /// The ratio now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_status: Option<RoleRatioStatus>,
    /// Whether the ratio forced an adjustment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_adjusted: Option<bool>,
}

/// `status.disaggregatedStatus.ratioStatus`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoleRatioStatus {
    /// Numerator role.
    #[serde(default)]
    pub numerator_role: String,
    /// Denominator role.
    #[serde(default)]
    pub denominator_role: String,
    /// The ratio now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_ratio: Option<String>,
}
