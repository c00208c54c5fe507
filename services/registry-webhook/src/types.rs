//! Kthena registry kinds (`registry.volcano.sh/v1alpha1`): Model, AutoscalingPolicy,
//! AutoscalingPolicyBinding.
//!
//! Decoding follows Go's lenient `encoding/json` as the spec (§3.1) requires: missing non-pointer
//! fields take their zero value (`#[serde(default)]`; the kit reads a `null` as Go does), pointer
//! fields are `Option` (presence matters to the rules), a wrong JSON type fails the whole decode.
//! Unknown keys are ignored here and kept by mutators (the kit diffs typed objects and replays
//! onto the raw JSON).

use admission_kit::compat::go::{GoDuration, Quantity};
use admission_kit::review::object::crd_default;
use k8s_openapi::api::core::v1::{
    Affinity, EnvFromSource, EnvVar, ObjectReference, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The API group of all three kinds.
pub const GROUP: &str = "registry.volcano.sh";

/// An object as the rules see it (kit's [`admission_kit::SpecView`]).
pub use admission_kit::SpecView as Obj;

fn preserve_unknown(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "x-kubernetes-preserve-unknown-fields": true })
}

/// `Model.spec`: a model served by one or more inference backends.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "registry.volcano.sh",
    version = "v1alpha1",
    kind = "Model",
    doc = "A model served by one or more inference backends (Kthena registry).",
    plural = "models",
    namespaced,
    status = "ModelStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct ModelSpec {
    /// Display name of the model (not used by any rule).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Owner.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub owner: String,
    /// The inference backends.
    #[serde(default)]
    pub backends: Vec<ModelBackend>,
    /// Model-level autoscaling (inline policy). Presence matters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling_policy: Option<AutoscalingPolicySpec>,
    /// Percent by which cost may expand when scaling. Presence matters (0 counts as present).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_expansion_rate_percent: Option<i32>,
    /// Request matching for routing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_match: Option<ModelMatch>,
}

/// `spec.modelMatch`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelMatch {
    /// Header matchers by header name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, StringMatch>>,
    /// URI matcher.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<StringMatch>,
    /// Body matcher.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<BodyMatch>,
}

/// One of exact / prefix / regex.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StringMatch {
    /// Exact value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact: Option<String>,
    /// Prefix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
    /// Regular expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regex: Option<String>,
}

/// `spec.modelMatch.body`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BodyMatch {
    /// The model name in the request body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// `spec.backends[i]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelBackend {
    /// Backend name.
    #[serde(default)]
    pub name: String,
    /// `vLLM`, `vLLMDisaggregated`, `SGLang`, `MindIE`, `MindIEDisaggregated`.
    #[serde(default, rename = "type")]
    pub type_: String,
    /// Where the weights come from (`hf://`, `s3://`, `pvc://`).
    #[serde(default, rename = "modelURI")]
    pub model_uri: String,
    /// Where weights are cached.
    #[serde(default, rename = "cacheURI", skip_serializing_if = "Option::is_none")]
    pub cache_uri: Option<String>,
    /// Environment sources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_from: Option<Vec<EnvFromSource>>,
    /// Environment variables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,
    /// Minimum replicas.
    #[serde(default)]
    pub min_replicas: i32,
    /// Maximum replicas.
    #[serde(default)]
    pub max_replicas: i32,
    /// Scaling cost; 0 and absent are the same ("not provided").
    #[serde(default, skip_serializing_if = "is_zero")]
    pub scaling_cost: i32,
    /// Route weight, 0..100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default(100))]
    pub route_weight: Option<u32>,
    /// How long to wait before scaling to zero. Presence matters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_to_zero_grace_period: Option<GoDuration>,
    /// The backend's workers.
    #[serde(default)]
    pub workers: Vec<ModelWorker>,
    /// LoRA adapters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lora_adapters: Option<Vec<LoraAdapter>>,
    /// Backend-level autoscaling (inline policy). Presence matters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling_policy: Option<AutoscalingPolicySpec>,
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

/// `spec.backends[i].workers[j]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelWorker {
    /// `server`, `prefill`, `decode`, `controller`, `coordinator`; absent is `""`.
    #[serde(default, rename = "type")]
    #[schemars(transform = crd_default("server"))]
    pub type_: String,
    /// Container image.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image: String,
    /// Replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Pods per replica.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<i32>,
    /// Resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Affinity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// Engine configuration, any JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "preserve_unknown")]
    pub config: Option<serde_json::Value>,
}

/// `spec.backends[i].loraAdapters[j]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LoraAdapter {
    /// Adapter name.
    #[serde(default)]
    pub name: String,
    /// Where the adapter comes from.
    #[serde(default, rename = "artifactURL")]
    pub artifact_url: String,
}

/// `Model.status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelStatus {
    /// Conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    /// Replicas per backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_statuses: Option<Vec<BackendStatus>>,
    /// Last generation acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// `Model.status.backendStatuses[i]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BackendStatus {
    /// Backend name.
    #[serde(default)]
    pub name: String,
    /// Replicas.
    #[serde(default)]
    pub replicas: i32,
}

/// `AutoscalingPolicy.spec`, also the inline `autoscalingPolicy` of a Model.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "registry.volcano.sh",
    version = "v1alpha1",
    kind = "AutoscalingPolicy",
    doc = "How a model or backend scales on its metrics (Kthena registry).",
    plural = "autoscalingpolicies",
    namespaced,
    status = "EmptyStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct AutoscalingPolicySpec {
    /// Tolerance in percent (not checked by the webhook).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default(10))]
    pub tolerance_percent: Option<i32>,
    /// Metrics and their targets.
    #[serde(default)]
    pub metrics: Vec<AutoscalingPolicyMetric>,
    /// Scaling behaviour. Emptiness is decided by presence (§8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behavior: Option<AutoscalingPolicyBehavior>,
}

/// An empty status object.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EmptyStatus {}

/// `spec.metrics[i]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AutoscalingPolicyMetric {
    /// Metric name.
    #[serde(default)]
    pub metric_name: String,
    /// Target value; missing or `null` is the zero quantity.
    #[serde(default)]
    pub target_value: Quantity,
}

/// `spec.behavior`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AutoscalingPolicyBehavior {
    /// Scale-up policies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_up: Option<ScaleUpPolicy>,
    /// Scale-down policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down: Option<StablePolicy>,
}

/// `spec.behavior.scaleUp`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScaleUpPolicy {
    /// The stable policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stable_policy: Option<StablePolicy>,
    /// The panic policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub panic_policy: Option<PanicPolicy>,
}

/// A stable scaling policy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StablePolicy {
    /// Instances per step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default(1))]
    pub instances: Option<i32>,
    /// Percent per step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default(100))]
    pub percent: Option<i32>,
    /// Step period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default("15s"))]
    pub period: Option<GoDuration>,
    /// `Or` or `And`; a plain string upstream, so `""` is the same as absent.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(transform = crd_default("Or"))]
    pub select_policy: String,
    /// Stabilisation window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stabilization_window: Option<GoDuration>,
}

impl StablePolicy {
    /// Empty as Go's zero-struct comparison sees it (§8).
    pub fn is_empty(&self) -> bool {
        self.instances.is_none()
            && self.percent.is_none()
            && self.period.is_none()
            && self.select_policy.is_empty()
            && self.stabilization_window.is_none()
    }
}

/// The panic policy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PanicPolicy {
    /// Percent per step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default(1000))]
    pub percent: Option<i32>,
    /// Step period: a plain (non-pointer) duration upstream, absent = 0; `null` fails to decode
    /// as it does upstream.
    #[serde(default)]
    pub period: GoDuration,
    /// Threshold to enter panic mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default(200))]
    pub panic_threshold_percent: Option<i32>,
    /// How long panic mode lasts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default("60s"))]
    pub panic_mode_hold: Option<GoDuration>,
}

impl PanicPolicy {
    /// Empty as Go's zero-struct comparison sees it (§8, Q-13: a zero period counts as empty).
    pub fn is_empty(&self) -> bool {
        self.percent.is_none()
            && self.panic_threshold_percent.is_none()
            && self.panic_mode_hold.is_none()
            && self.period.is_zero()
    }
}

/// `AutoscalingPolicyBinding.spec`.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "registry.volcano.sh",
    version = "v1alpha1",
    kind = "AutoscalingPolicyBinding",
    doc = "Binds an AutoscalingPolicy to scaling targets (Kthena registry).",
    plural = "autoscalingpolicybindings",
    namespaced,
    status = "EmptyStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct AutoscalingPolicyBindingSpec {
    /// The AutoscalingPolicy in the same namespace.
    #[serde(default)]
    pub policy_ref: PolicyRef,
    /// Heterogeneous (cost-optimised) scaling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub optimizer_configuration: Option<OptimizerConfiguration>,
    /// Homogeneous scaling of one target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaling_configuration: Option<ScalingConfiguration>,
}

/// `spec.policyRef`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PolicyRef {
    /// Policy name.
    #[serde(default)]
    #[schemars(transform = crd_default(""))]
    pub name: String,
}

/// `spec.optimizerConfiguration`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OptimizerConfiguration {
    /// One entry per target.
    #[serde(default)]
    pub params: Vec<OptimizerParam>,
    /// Cost expansion rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default(200))]
    pub cost_expansion_rate_percent: Option<i32>,
}

/// `spec.optimizerConfiguration.params[i]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OptimizerParam {
    /// The scaled target.
    #[serde(default)]
    pub target: Target,
    /// Cost of one replica.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<i32>,
    /// Minimum replicas.
    #[serde(default)]
    pub min_replicas: i32,
    /// Maximum replicas.
    #[serde(default)]
    pub max_replicas: i32,
}

/// `spec.scalingConfiguration`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScalingConfiguration {
    /// The scaled target.
    #[serde(default)]
    pub target: Target,
    /// Minimum replicas.
    #[serde(default)]
    pub min_replicas: i32,
    /// Maximum replicas.
    #[serde(default)]
    pub max_replicas: i32,
}

/// A scaled target.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Target {
    /// The target object.
    #[serde(default)]
    pub target_ref: ObjectReference,
    /// Extra labels to match pods with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_match_labels: Option<BTreeMap<String, String>>,
    /// Where metrics are scraped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric_endpoint: Option<MetricEndpoint>,
}

/// `target.metricEndpoint`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MetricEndpoint {
    /// Path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default("/metrics"))]
    pub uri: Option<String>,
    /// Port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default(8100))]
    pub port: Option<i32>,
}
