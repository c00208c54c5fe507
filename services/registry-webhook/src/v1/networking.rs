//! Kthena v1.0 kinds of `networking.serving.volcano.sh/v1alpha1`: ModelRoute and ModelServer
//! (`docs/spec/kthena-v1.md` §2). Decoding as in [`crate::v1::workload`].

use std::collections::BTreeMap;

use admission_kit::compat::go::GoDuration;
use kube::CustomResource;

// A matcher and the body match are the pinned kinds' (v1.0 kept them field for field).
pub use crate::types::{BodyMatch, StringMatch};
use admission_kit::review::object::crd_default;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group of the two kinds.
pub const GROUP: &str = "networking.serving.volcano.sh";

/// `ModelRoute.spec`: which model servers serve requests for a model.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "networking.serving.volcano.sh",
    version = "v1alpha1",
    kind = "ModelRoute",
    doc = "Routes requests for a model or LoRA adapters to model servers (Kthena v1.0).",
    plural = "modelroutes",
    namespaced,
    status = "EmptyStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct ModelRouteSpec {
    /// The model requests name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model_name: String,
    /// LoRA adapters requests name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lora_adapters: Option<Vec<String>>,
    /// Gateways the route attaches to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_refs: Option<Vec<ParentReference>>,
    /// Routing rules; `null` items are kept (MR-3).
    #[serde(default)]
    pub rules: Vec<Option<Rule>>,
    /// Token rate limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
}

/// Gateway API's `ParentReference`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ParentReference {
    /// API group of the parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default("gateway.networking.k8s.io"))]
    pub group: Option<String>,
    /// Kind of the parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default("Gateway"))]
    pub kind: Option<String>,
    /// Namespace of the parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Name of the parent.
    #[serde(default)]
    pub name: String,
    /// Section (listener) of the parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section_name: Option<String>,
    /// Port of the parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
}

/// `spec.rules[i]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rule {
    /// Rule name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Which requests the rule takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_match: Option<ModelMatch>,
    /// Where they go; `null` items are kept (MR-6).
    #[serde(default)]
    pub target_models: Vec<Option<TargetModel>>,
}

/// Request matching: headers, URI and body, all ANDed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ModelMatch {
    /// Header matchers by header name (a Go map: rules visit keys in sorted order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, Option<StringMatch>>>,
    /// URI matcher.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<StringMatch>,
    /// Body matcher.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<BodyMatch>,
}

/// `spec.rules[i].targetModels[j]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetModel {
    /// The ModelServer.
    #[serde(default)]
    pub model_server_name: String,
    /// Share of traffic; absent counts 100 (MR-7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default(100))]
    pub weight: Option<u32>,
}

/// `spec.rateLimit`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RateLimit {
    /// Input tokens per unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens_per_unit: Option<u32>,
    /// Output tokens per unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens_per_unit: Option<u32>,
    /// `second`, `minute`, `hour`, `day` or `month`.
    #[serde(default)]
    #[schemars(transform = crd_default("second"))]
    pub unit: String,
    /// A limit shared by every router.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global: Option<GlobalRateLimit>,
}

/// `spec.rateLimit.global`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GlobalRateLimit {
    /// The Redis holding the counters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis: Option<RedisConfig>,
}

/// `spec.rateLimit.global.redis`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RedisConfig {
    /// `host:port`.
    #[serde(default)]
    pub address: String,
}

/// An empty status object.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EmptyStatus {}

/// `ModelServer.spec`: the pods serving a model, and how to reach them.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "networking.serving.volcano.sh",
    version = "v1alpha1",
    kind = "ModelServer",
    doc = "The inference pods of a model and how the router reaches them (Kthena v1.0).",
    plural = "modelservers",
    namespaced,
    status = "EmptyStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct ModelServerSpec {
    /// The model the pods serve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `vLLM` or `SGLang`.
    #[serde(default)]
    pub inference_engine: String,
    /// Which pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_selector: Option<WorkloadSelector>,
    /// Their port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_port: Option<WorkloadPort>,
    /// Timeouts and retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic_policy: Option<TrafficPolicy>,
    /// KV cache transfer between prefill and decode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_connector: Option<KvConnector>,
}

/// `spec.workloadSelector`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadSelector {
    /// Pod labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_labels: Option<BTreeMap<String, String>>,
    /// Prefill/decode grouping.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pd_group: Option<PdGroup>,
}

/// `spec.workloadSelector.pdGroup`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PdGroup {
    /// Label grouping a prefill pod with its decode pods.
    #[serde(default)]
    pub group_key: String,
    /// Labels of prefill pods.
    #[serde(default)]
    pub prefill_labels: BTreeMap<String, String>,
    /// Labels of decode pods.
    #[serde(default)]
    pub decode_labels: BTreeMap<String, String>,
}

/// `spec.workloadPort`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WorkloadPort {
    /// Port.
    #[serde(default)]
    pub port: i32,
    /// `http` or `https`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default("http"))]
    pub protocol: Option<String>,
}

/// `spec.trafficPolicy`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TrafficPolicy {
    /// Request timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<GoDuration>,
    /// Retries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Retry>,
}

/// `spec.trafficPolicy.retry`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Retry {
    /// Attempts.
    #[serde(default)]
    pub attempts: i32,
    /// Pause between attempts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default("100ms"))]
    pub retry_interval: Option<GoDuration>,
}

/// `spec.kvConnector`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KvConnector {
    /// `http`, `nixl`, `lmcache` or `mooncake`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    #[schemars(transform = crd_default("http"))]
    pub type_: Option<String>,
}
