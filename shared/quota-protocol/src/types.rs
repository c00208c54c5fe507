//! ElasticQuota (scheduling.sigs.k8s.io/v1alpha1): only the fields the quota rules read;
//! unknown fields are ignored when reading and kept by the webhook's mutations.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use admission_compat::resources::ResourceList;

/// `ElasticQuota.spec` (scheduling.sigs.k8s.io/v1alpha1).
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "scheduling.sigs.k8s.io",
    version = "v1alpha1",
    kind = "ElasticQuota",
    plural = "elasticquotas",
    namespaced,
    status = "ElasticQuotaStatus",
    derive = "PartialEq",
    derive = "Default"
)]
pub struct ElasticQuotaSpec {
    /// Guaranteed resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<ResourceList>,
    /// Upper bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<ResourceList>,
}

/// `ElasticQuota.status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ElasticQuotaStatus {
    /// Resources in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used: Option<ResourceList>,
}
