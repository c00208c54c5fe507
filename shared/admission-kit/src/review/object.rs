//! The view of an object most rules need: metadata and spec.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::compat::go::null_as_default;

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

/// The most bytes a CRD's JSON may take and still be applied with `kubectl apply` (client
/// side): kubectl keeps the whole object in its `last-applied-configuration` annotation, and the
/// API server refuses annotations above 256 KiB. Kept below that limit, with room to spare.
pub const KUBECTL_APPLY_MAX_BYTES: usize = 200 * 1024;

/// How many levels of fields keep their descriptions in a CRD too large for `kubectl apply`.
const DESCRIBED_LEVELS: usize = 5;

/// Makes `crd` fit [`KUBECTL_APPLY_MAX_BYTES`] when it does not: the descriptions of fields
/// below the first five levels (where the embedded Kubernetes types begin, a Pod template's
/// hundreds of fields; `kubectl explain pod.spec` has them) are dropped, as controller-gen's
/// `maxDescLen` does for the same reason. A CRD that already fits is left alone.
pub fn fit_for_kubectl_apply(crd: &mut CustomResourceDefinition) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
    };
    fn undescribe(s: &mut JSONSchemaProps, level: usize) {
        if level > DESCRIBED_LEVELS {
            s.description = None;
        }
        for p in s.properties.iter_mut().flat_map(|m| m.values_mut()) {
            undescribe(p, level + 1);
        }
        if let Some(JSONSchemaPropsOrArray::Schema(i)) = &mut s.items {
            undescribe(i, level);
        }
        if let Some(JSONSchemaPropsOrBool::Schema(a)) = &mut s.additional_properties {
            undescribe(a, level);
        }
        for list in [&mut s.all_of, &mut s.any_of, &mut s.one_of]
            .into_iter()
            .flatten()
        {
            list.iter_mut().for_each(|x| undescribe(x, level));
        }
    }
    let size = |c: &_| serde_json::to_vec(c).map_or(usize::MAX, |v| v.len());
    if size(crd) <= KUBECTL_APPLY_MAX_BYTES {
        return;
    }
    for v in &mut crd.spec.versions {
        if let Some(s) = v
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            undescribe(s, 0);
        }
    }
}

/// The CRD of `K` as kube-derive generates it, with `listKind` named ([`name_list_kind`]) and
/// exactly `defaults` ([`crd_defaults`]): what every service's `crd` command prints.
pub fn crd_of<K: kube::CustomResourceExt>(
    defaults: &[(impl AsRef<str>, serde_json::Value)],
) -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    let mut c = K::crd();
    name_list_kind(&mut c);
    crd_defaults(&mut c, defaults);
    c
}

/// Spells out `listKind` as `<Kind>List`: kube-derive leaves it to the API server's default,
/// the same value, which upstream's CRDs write out.
pub fn name_list_kind(crd: &mut CustomResourceDefinition) {
    if crd.spec.names.list_kind.is_none() {
        crd.spec.names.list_kind = Some(format!("{}List", crd.spec.names.kind));
    }
}

/// Gives a generated CRD exactly the defaults of `defaults`, each a schema path
/// (`.spec.backends[].workers[].type`; `[]` an array's items, `{}` a map's values) and its
/// value, as the upstream's CRD has them. schemars writes a `default` for every
/// `#[serde(default)]` field (Go's zero values: `""`, `0`, `[]`, `{…}`), which the API server
/// would then write into every object before any webhook sees it; those are dropped. A path the
/// schema lacks is skipped (the CRD tests compare every default with upstream's).
pub fn crd_defaults(
    crd: &mut CustomResourceDefinition,
    defaults: &[(impl AsRef<str>, serde_json::Value)],
) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        JSON, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
    };
    fn strip(s: &mut JSONSchemaProps) {
        s.default = None;
        for p in s.properties.iter_mut().flat_map(|m| m.values_mut()) {
            strip(p);
        }
        if let Some(JSONSchemaPropsOrArray::Schema(i)) = &mut s.items {
            strip(i);
        }
        if let Some(JSONSchemaPropsOrBool::Schema(a)) = &mut s.additional_properties {
            strip(a);
        }
        for list in [&mut s.all_of, &mut s.any_of, &mut s.one_of]
            .into_iter()
            .flatten()
        {
            list.iter_mut().for_each(strip);
        }
    }
    fn at<'a>(mut s: &'a mut JSONSchemaProps, path: &str) -> Option<&'a mut JSONSchemaProps> {
        for seg in path.split('.').filter(|p| !p.is_empty()) {
            let (name, suffixes) = seg.find(['[', '{']).map_or((seg, ""), |i| seg.split_at(i));
            s = s.properties.as_mut()?.get_mut(name)?;
            for suffix in [suffixes.get(..2), suffixes.get(2..4)]
                .into_iter()
                .flatten()
            {
                s = match suffix {
                    "[]" => match s.items.as_mut()? {
                        JSONSchemaPropsOrArray::Schema(i) => i,
                        JSONSchemaPropsOrArray::Schemas(_) => return None,
                    },
                    "{}" => match s.additional_properties.as_mut()? {
                        JSONSchemaPropsOrBool::Schema(a) => a,
                        JSONSchemaPropsOrBool::Bool(_) => return None,
                    },
                    _ => return None,
                };
            }
        }
        Some(s)
    }
    for v in &mut crd.spec.versions {
        if let Some(s) = v
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            strip(s);
            for (path, value) in defaults {
                if let Some(field) = at(s, path.as_ref()) {
                    field.default = Some(JSON(value.clone()));
                }
            }
        }
    }
}
