//! Our generated CRDs agree with the upstream ones (fixtures/crds/kthena): group,
//! versions, names, scope, subresources, and every field name.

use std::collections::BTreeSet;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion, JSONSchemaProps,
    JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use registry_webhook::types::{AutoscalingPolicy, AutoscalingPolicyBinding, Model};

/// Fields whose types come from k8s-openapi: their inner field names follow the Kubernetes
/// release of k8s-openapi, so there we require only that ours include upstream's.
const CORE_TYPES: &[&str] = &[
    "env",
    "envFrom",
    "entryTemplate",
    "workerTemplate",
    "tolerations",
    "labelSelector",
    "resources",
    "affinity",
    "targetRef",
    "conditions",
];

fn paths(
    s: &JSONSchemaProps,
    prefix: &str,
    out: &mut BTreeSet<String>,
    core: &mut BTreeSet<String>,
) {
    // A default is part of the field: the API server fills it in before any webhook runs.
    if let Some(d) = &s.default
        && !core.iter().any(|c| c == prefix)
    {
        out.insert(format!("{prefix} = {}", d.0));
    }
    if let Some(props) = &s.properties {
        for (k, v) in props {
            let p = format!("{prefix}.{k}");
            let in_core = CORE_TYPES.iter().any(|c| {
                prefix.ends_with(&format!(".{c}"))
                    || prefix.contains(&format!(".{c}."))
                    || prefix.contains(&format!(".{c}[]"))
            });
            if in_core {
                core.insert(p.clone());
            } else {
                out.insert(p.clone());
            }
            paths(v, &p, out, core);
        }
    }
    if let Some(JSONSchemaPropsOrArray::Schema(items)) = &s.items {
        paths(items, &format!("{prefix}[]"), out, core);
    }
    if let Some(JSONSchemaPropsOrBool::Schema(m)) = &s.additional_properties {
        paths(m, &format!("{prefix}{{}}"), out, core);
    }
}

fn upstream(file: &str) -> CustomResourceDefinition {
    let root = admission_testing::fixtures::fixtures_root();
    // Kthena v1.0's groups are in their own folder.
    let dir = if file.contains(".serving.volcano.sh_") {
        "crds/kthena-v1.0.0"
    } else {
        "crds/kthena"
    };
    let path = root.join(dir).join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml_ng::from_str(&text).unwrap()
}

fn compare(ours: CustomResourceDefinition, file: &str) {
    let theirs = upstream(file);
    assert_eq!(ours.spec.group, theirs.spec.group);
    assert_eq!(ours.spec.scope, theirs.spec.scope);
    assert_eq!(ours.spec.names.kind, theirs.spec.names.kind);
    assert_eq!(ours.spec.names.plural, theirs.spec.names.plural);
    assert_eq!(ours.spec.names.singular, theirs.spec.names.singular);
    assert_eq!(ours.spec.names.list_kind, theirs.spec.names.list_kind);
    assert_eq!(ours.metadata.name, theirs.metadata.name);
    let names = |c: &CustomResourceDefinition| {
        c.spec
            .versions
            .iter()
            .map(|v| (v.name.clone(), v.served, v.storage))
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&ours), names(&theirs));
    let (ov, tv) = (&ours.spec.versions[0], &theirs.spec.versions[0]);
    assert_eq!(
        ov.subresources.as_ref().map(|s| s.status.is_some()),
        tv.subresources.as_ref().map(|s| s.status.is_some()),
        "status subresource"
    );
    let schema = |v: &CustomResourceDefinitionVersion| {
        let mut own = BTreeSet::new();
        let mut core = BTreeSet::new();
        paths(
            v.schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .expect("schema"),
            "",
            &mut own,
            &mut core,
        );
        (own, core)
    };
    let ((o_own, o_core), (t_own, t_core)) = (schema(ov), schema(tv));
    // apiVersion, kind and metadata are every object's; kube-derive leaves them implicit.
    let standard = [".apiVersion", ".kind", ".metadata"];
    let missing: Vec<_> = t_own
        .difference(&o_own)
        .filter(|p| !standard.contains(&p.as_str()))
        .collect();
    let extra: Vec<_> = o_own
        .difference(&t_own)
        .filter(|p| !p.starts_with(".metadata."))
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "{file}: missing {missing:?}, extra {extra:?}"
    );
    let core_missing: Vec<_> = t_core.difference(&o_core).collect();
    assert!(
        core_missing.is_empty(),
        "{file}: core-type fields missing {core_missing:?}"
    );
}

#[test]
fn model_crd_matches_upstream() {
    compare(
        registry_webhook::crd::<Model>(),
        "registry.volcano.sh_models.yaml",
    );
}

#[test]
fn autoscaling_policy_crd_matches_upstream() {
    compare(
        registry_webhook::crd::<AutoscalingPolicy>(),
        "registry.volcano.sh_autoscalingpolicies.yaml",
    );
}

#[test]
fn autoscaling_policy_binding_crd_matches_upstream() {
    compare(
        registry_webhook::crd::<AutoscalingPolicyBinding>(),
        "registry.volcano.sh_autoscalingpolicybindings.yaml",
    );
}

#[test]
fn v1_crds_match_upstream() {
    use registry_webhook::v1::networking::{ModelRoute, ModelServer};
    use registry_webhook::v1::workload::{
        AutoscalingPolicy as AutoscalingPolicyV1, ModelBooster, ModelServing,
    };
    let w = "workload.serving.volcano.sh_";
    let n = "networking.serving.volcano.sh_";
    compare(
        registry_webhook::crd::<ModelBooster>(),
        &format!("{w}modelboosters.yaml"),
    );
    compare(
        registry_webhook::crd::<ModelServing>(),
        &format!("{w}modelservings.yaml"),
    );
    compare(
        registry_webhook::crd::<AutoscalingPolicyV1>(),
        &format!("{w}autoscalingpolicies.yaml"),
    );
    compare(
        registry_webhook::crd::<ModelRoute>(),
        &format!("{n}modelroutes.yaml"),
    );
    compare(
        registry_webhook::crd::<ModelServer>(),
        &format!("{n}modelservers.yaml"),
    );
}

#[test]
fn packaged_crds_are_the_generated_ones() {
    let app = registry_webhook::app();
    let mut want = String::new();
    for c in &app.custom_resource_definitions() {
        want.push_str("---\n");
        want.push_str(&serde_yaml_ng::to_string(c).unwrap());
    }
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../kustomize/base/registry-crds/crds.yaml"
    );
    let have = std::fs::read_to_string(path).unwrap();
    assert!(
        have == want,
        "kustomize/base/registry-crds/crds.yaml is stale: regenerate with `cargo run -p registry-webhook -- crd > kustomize/base/registry-crds/crds.yaml`"
    );
}

#[test]
fn every_packaged_crd_fits_kubectl_apply() {
    for c in &registry_webhook::app().custom_resource_definitions() {
        let size = serde_json::to_vec(c).unwrap().len();
        assert!(
            size <= admission_kit::review::object::KUBECTL_APPLY_MAX_BYTES,
            "{:?}: {size} bytes, too large for kubectl apply's last-applied annotation",
            c.metadata.name
        );
    }
}
