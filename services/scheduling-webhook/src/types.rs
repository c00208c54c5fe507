//! The Koordinator kinds the rules read: ElasticQuota, ElasticQuotaProfile,
//! ClusterColocationProfile and Reservation (only the fields the rules use; unknown fields are
//! ignored when reading and kept by mutations).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use admission_kit::compat::resources::ResourceList;
/// ElasticQuota is quota-state's kind: the tree rules it runs read it.
pub use quota_protocol::types::{ElasticQuota, ElasticQuotaSpec, ElasticQuotaStatus};

/// `ElasticQuotaProfile.spec` (quota.koordinator.sh/v1alpha1).
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "quota.koordinator.sh",
    version = "v1alpha1",
    kind = "ElasticQuotaProfile",
    plural = "elasticquotaprofiles",
    namespaced
)]
#[serde(rename_all = "camelCase")]
pub struct ElasticQuotaProfileSpec {
    /// Root quota name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_name: Option<String>,
    /// Nodes of the tree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<LabelSelector>,
}

/// `ClusterColocationProfile.spec` (config.koordinator.sh/v1alpha1, cluster-scoped).
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "config.koordinator.sh",
    version = "v1alpha1",
    kind = "ClusterColocationProfile",
    plural = "clustercolocationprofiles"
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterColocationProfileSpec {
    /// Namespaces whose pods it applies to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<LabelSelector>,
    /// Pods it applies to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// Percentage chance of applying (`50` or `"50%"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Value>")]
    pub probability: Option<serde_json::Value>,
    /// Labels to set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Annotations to set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Label copies: from → to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_keys_mapping: Option<BTreeMap<String, String>>,
    /// Annotation copies: from → to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotation_keys_mapping: Option<BTreeMap<String, String>>,
    /// Label value suffixes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_suffixes: Option<BTreeMap<String, String>>,
    /// Scheduler.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_name: Option<String>,
    /// Koordinator QoS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qos_class: Option<String>,
    /// PriorityClass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// Koordinator sub-priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub koordinator_priority: Option<i32>,
    /// Strategic-merge patch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<serde_json::Value>")]
    pub patch: Option<serde_json::Value>,
}

/// `Reservation.spec` (scheduling.koordinator.sh/v1alpha1, cluster-scoped): what RM-1 reads.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "scheduling.koordinator.sh",
    version = "v1alpha1",
    kind = "Reservation",
    plural = "reservations",
    derive = "PartialEq",
    derive = "Default"
)]
pub struct ReservationSpec {
    /// The reserved pod's template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<PodTemplateSpec>,
    /// `metav1.Duration`, kept as sent: only its decode is checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<serde_json::Value>,
    /// `metav1.Time`, kept as sent: only its decode is checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<serde_json::Value>,
}
