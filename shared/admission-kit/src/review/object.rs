//! The view of an object most rules need: metadata and spec.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

/// An object as rules see it: metadata and spec. Unlike kube-derive's kinds, a missing or null
/// `spec` decodes as the zero spec, as Go's decoder leaves it; `status` and unknown keys are not
/// decoded (mutators still keep them: the kit diffs views and replays onto the raw object).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(bound(deserialize = "S: Deserialize<'de> + Default"))]
pub struct SpecView<S> {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The spec.
    #[serde(default)]
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
    let size = |c: &_| serde_json::to_vec(c).map_or(usize::MAX, |v| v.len());
    if size(crd) <= KUBECTL_APPLY_MAX_BYTES {
        return;
    }
    each_schema(crd, &mut |s, level| {
        if level > DESCRIBED_LEVELS {
            s.description = None;
        }
    });
}

/// Calls `f` on every schema of every version of `crd` with its level: a field's schema is one
/// level below its object's; an array's items, a map's values and the branches of `allOf`,
/// `anyOf` and `oneOf` are at the level of the schema that holds them.
fn each_schema(
    crd: &mut CustomResourceDefinition,
    f: &mut impl FnMut(&mut JSONSchemaProps, usize),
) {
    fn walk(
        s: &mut JSONSchemaProps,
        level: usize,
        f: &mut impl FnMut(&mut JSONSchemaProps, usize),
    ) {
        f(s, level);
        for p in s.properties.iter_mut().flat_map(|m| m.values_mut()) {
            walk(p, level + 1, f);
        }
        if let Some(JSONSchemaPropsOrArray::Schema(i)) = &mut s.items {
            walk(i, level, f);
        }
        if let Some(JSONSchemaPropsOrBool::Schema(a)) = &mut s.additional_properties {
            walk(a, level, f);
        }
        for list in [&mut s.all_of, &mut s.any_of, &mut s.one_of]
            .into_iter()
            .flatten()
        {
            list.iter_mut().for_each(|x| walk(x, level, f));
        }
    }
    for v in &mut crd.spec.versions {
        if let Some(s) = v
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            walk(s, 0, f);
        }
    }
}

/// The CRD of `K` as kube-derive generates it, with `listKind` named ([`name_list_kind`]) and
/// exactly the defaults its fields declare with [`crd_default`]: what every service's `crd`
/// command prints.
pub fn crd_of<K: kube::CustomResourceExt>() -> CustomResourceDefinition {
    let mut c = K::crd();
    name_list_kind(&mut c);
    crd_defaults(&mut c);
    controller_gen_metadata(&mut c);
    c
}

/// The object metadata as controller-gen writes it into the CRDs our upstreams publish: at the
/// root, `apiVersion`, `kind` and `metadata` declared (kube-derive leaves them out); an object
/// embedded in the spec (a pod template's, a claim template's) keeps only `annotations`,
/// `finalizers`, `labels`, `name` and `namespace` (controller-gen's embedded metadata), so the
/// API server prunes the rest there as it does with upstream's CRD.
fn controller_gen_metadata(crd: &mut CustomResourceDefinition) {
    const EMBEDDED: [&str; 5] = ["annotations", "finalizers", "labels", "name", "namespace"];
    each_schema(crd, &mut |s, level| {
        let Some(props) = s.properties.as_mut() else {
            return;
        };
        if level == 0 {
            for key in ["apiVersion", "kind"] {
                props.entry(key.into()).or_insert_with(|| JSONSchemaProps {
                    type_: Some("string".into()),
                    ..JSONSchemaProps::default()
                });
            }
            props
                .entry("metadata".into())
                .or_insert_with(|| JSONSchemaProps {
                    type_: Some("object".into()),
                    ..JSONSchemaProps::default()
                });
            return;
        }
        if let Some(meta) = props.get_mut("metadata")
            && let Some(fields) = meta.properties.as_mut()
            && fields.contains_key("generateName")
            && fields.contains_key("uid")
        {
            fields.retain(|k, _| EMBEDDED.contains(&k.as_str()));
        }
    });
}

/// Spells out `listKind` as `<Kind>List`: kube-derive leaves it to the API server's default,
/// the same value, which upstream's CRDs write out.
pub fn name_list_kind(crd: &mut CustomResourceDefinition) {
    if crd.spec.names.list_kind.is_none() {
        crd.spec.names.list_kind = Some(format!("{}List", crd.spec.names.kind));
    }
}

/// The key that carries a field's [`crd_default`] through kube-derive: its conversion of the
/// schema keeps only the keys a CRD schema has, and `example` is one no CRD of ours uses.
const DEFAULT_CARRIER: &str = "example";

/// Declares the default a field has in its upstream's CRD, beside the field:
/// `#[schemars(transform = crd_default(100))]`. [`crd_of`] makes it the field's `default`.
///
/// Why not schemars' own `default`: its derive writes one for every `#[serde(default)]` field
/// (Go's zero values: `""`, `0`, `[]`, `{…}`), which the API server would then write into every
/// object before any webhook sees it, and a declared default cannot be told from those.
pub fn crd_default(value: impl Into<serde_json::Value>) -> impl FnMut(&mut schemars::Schema) {
    let value = value.into();
    move |schema: &mut schemars::Schema| {
        schema.insert(DEFAULT_CARRIER.into(), value.clone());
    }
}

/// Gives a generated CRD exactly the defaults its fields declare ([`crd_default`]): every
/// `default` schemars wrote is dropped and every declared one put in its place.
fn crd_defaults(crd: &mut CustomResourceDefinition) {
    // What `crd_default` put in `DEFAULT_CARRIER`, or nothing.
    each_schema(crd, &mut |s, _| s.default = s.example.take());
}

#[cfg(test)]
mod tests {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    use super::*;

    /// A kind whose fields have Go's zero defaults (`#[serde(default)]`) and one declared default.
    #[derive(CustomResource, Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
    #[kube(group = "example.com", version = "v1", kind = "Thing", namespaced)]
    struct ThingSpec {
        #[serde(default)]
        zero: i32,
        #[serde(default)]
        #[schemars(transform = crd_default(3))]
        replicas: i32,
        #[serde(default)]
        parts: Vec<Part>,
    }

    #[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
    struct Part {
        #[serde(default)]
        #[schemars(transform = crd_default("main"))]
        name: String,
        #[serde(default)]
        note: String,
    }

    /// A kind embedding an object's metadata, as a pod template does.
    #[derive(CustomResource, Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
    #[kube(group = "example.com", version = "v1", kind = "Holder", namespaced)]
    struct HolderSpec {
        template: Embedded,
    }

    #[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
    struct Embedded {
        metadata: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>,
    }

    #[test]
    fn metadata_is_declared_as_controller_gen_declares_it() {
        let crd = crd_of::<Holder>();
        let schema = serde_json::to_value(&crd.spec.versions[0].schema).unwrap();
        let root = &schema["openAPIV3Schema"]["properties"];
        assert_eq!(root["apiVersion"]["type"], "string");
        assert_eq!(root["kind"]["type"], "string");
        assert_eq!(root["metadata"]["type"], "object");
        let embedded =
            root["spec"]["properties"]["template"]["properties"]["metadata"]["properties"]
                .as_object()
                .unwrap();
        let keys: Vec<&str> = embedded.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["annotations", "finalizers", "labels", "name", "namespace"]
        );
    }

    #[test]
    fn a_crd_has_exactly_the_declared_defaults() {
        let crd = crd_of::<Thing>();
        let mut found = Vec::new();
        fn walk(s: &serde_json::Value, at: &str, found: &mut Vec<String>) {
            let Some(o) = s.as_object() else { return };
            if let Some(d) = o.get("default") {
                found.push(format!("{at} = {d}"));
            }
            assert!(!o.contains_key(DEFAULT_CARRIER), "{at}: carrier left");
            for (k, v) in o
                .get("properties")
                .and_then(|p| p.as_object())
                .into_iter()
                .flatten()
            {
                walk(v, &format!("{at}.{k}"), found);
            }
            if let Some(i) = o.get("items") {
                walk(i, &format!("{at}[]"), found);
            }
        }
        let schema = serde_json::to_value(&crd.spec.versions[0].schema).unwrap();
        walk(&schema["openAPIV3Schema"], "", &mut found);
        assert_eq!(
            found,
            [".spec.parts[].name = \"main\"", ".spec.replicas = 3"]
        );
        assert_eq!(crd.spec.names.list_kind.as_deref(), Some("ThingList"));
    }
}
