//! The view of an object most rules need: metadata and spec.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::go::null_as_default;

/// An object as rules see it: metadata and spec. Unlike kube-derive's kinds, a missing or null
/// `spec` decodes as the zero spec, as Go's decoder leaves it; `status` and unknown keys are not
/// decoded (mutators still keep them: the kit diffs views and replays onto the raw object).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(bound(deserialize = "S: Deserialize<'de> + Default"))]
pub struct SpecView<S> {
    /// Standard object metadata.
    #[serde(default, deserialize_with = "null_as_default")]
    pub metadata: ObjectMeta,
    /// The spec.
    #[serde(default, deserialize_with = "null_as_default")]
    pub spec: S,
}
