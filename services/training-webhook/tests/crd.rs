//! Our generated CRDs agree with the upstream ones (fixtures/crds/training and
//! fixtures/crds/kubeflow-trainer-v2.3.0): group, version, names, scope, subresources (status,
//! and scale paths), and, over the whole schema, every field typed as upstream types it.

use std::collections::BTreeSet;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion, JSONSchemaProps,
    JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde_json::Value;
use training_webhook::crd;
use training_webhook::types::{JAXJob, MXJob, PaddleJob, PyTorchJob, TFJob, XGBoostJob};
use training_webhook::v2::types::{ClusterTrainingRuntime, TrainJob, TrainingRuntime};

fn upstream(file: &str) -> CustomResourceDefinition {
    upstream_in("training", file)
}

fn upstream_in(dir: &str, file: &str) -> CustomResourceDefinition {
    let root = admission_testing::fixtures::fixtures_root();
    let path = root.join("crds").join(dir).join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml_ng::from_str(&text).unwrap()
}

fn props(s: &JSONSchemaProps) -> BTreeSet<String> {
    s.properties
        .iter()
        .flatten()
        .map(|(k, _)| k.clone())
        .collect()
}

fn at<'a>(s: &'a JSONSchemaProps, path: &[&str]) -> &'a JSONSchemaProps {
    let mut cur = s;
    for p in path {
        cur = if *p == "*" {
            match &cur.additional_properties {
                Some(JSONSchemaPropsOrBool::Schema(b)) => b,
                other => panic!("no additionalProperties schema at {path:?}: {other:?}"),
            }
        } else {
            cur.properties
                .as_ref()
                .and_then(|m| m.get(*p))
                .unwrap_or_else(|| panic!("no {p} in {path:?}"))
        };
    }
    cur
}

fn compare(ours: CustomResourceDefinition, file: &str, map: &str) {
    let theirs = upstream(file);
    assert_eq!(ours.metadata.name, theirs.metadata.name);
    assert_eq!(ours.spec.group, theirs.spec.group);
    assert_eq!(ours.spec.scope, theirs.spec.scope);
    assert_eq!(ours.spec.names.kind, theirs.spec.names.kind);
    assert_eq!(ours.spec.names.plural, theirs.spec.names.plural);
    assert_eq!(ours.spec.names.singular, theirs.spec.names.singular);
    assert_eq!(ours.spec.names.list_kind, theirs.spec.names.list_kind);
    let (ov, tv) = (&ours.spec.versions[0], &theirs.spec.versions[0]);
    assert_eq!(
        (ours.spec.versions.len(), &ov.name, ov.served, ov.storage),
        (1, &tv.name, tv.served, tv.storage)
    );
    let sub = |v: &CustomResourceDefinitionVersion| {
        let s = v.subresources.clone().unwrap_or_default();
        (
            s.status.is_some(),
            s.scale.map(|sc| {
                (
                    sc.spec_replicas_path,
                    sc.status_replicas_path,
                    sc.label_selector_path,
                )
            }),
        )
    };
    assert_eq!(sub(ov), sub(tv), "{file}: subresources");
    let os = ov
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .unwrap();
    let ts = tv
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .unwrap();
    for path in [
        vec!["spec"],
        vec!["spec", "runPolicy"],
        vec!["spec", map, "*"],
        vec!["status"],
    ] {
        assert_eq!(
            props(at(os, &path)),
            props(at(ts, &path)),
            "{file}: fields of {path:?}"
        );
    }
    if props(at(ts, &["spec"])).contains("elasticPolicy") {
        assert_eq!(
            props(at(os, &["spec", "elasticPolicy"])),
            props(at(ts, &["spec", "elasticPolicy"])),
            "{file}: elasticPolicy"
        );
    }
    // The pod template is k8s-openapi's: upstream's container fields are all there.
    let containers = ["spec", map, "*", "template", "spec", "containers"];
    let item = |s: &JSONSchemaProps| match &at(s, &containers).items {
        Some(JSONSchemaPropsOrArray::Schema(i)) => props(i),
        _ => BTreeSet::new(),
    };
    assert!(
        item(ts).is_subset(&item(os)),
        "{file}: container fields missing: {:?}",
        item(ts).difference(&item(os)).collect::<Vec<_>>()
    );
}

#[test]
fn pytorchjob_crd() {
    compare(
        crd::<PyTorchJob>(),
        "kubeflow.org_pytorchjobs.yaml",
        "pytorchReplicaSpecs",
    );
}
#[test]
fn tfjob_crd() {
    compare(crd::<TFJob>(), "kubeflow.org_tfjobs.yaml", "tfReplicaSpecs");
}
#[test]
fn xgboostjob_crd() {
    compare(
        crd::<XGBoostJob>(),
        "kubeflow.org_xgboostjobs.yaml",
        "xgbReplicaSpecs",
    );
}
#[test]
fn paddlejob_crd() {
    compare(
        crd::<PaddleJob>(),
        "kubeflow.org_paddlejobs.yaml",
        "paddleReplicaSpecs",
    );
}
#[test]
fn jaxjob_crd() {
    compare(
        crd::<JAXJob>(),
        "kubeflow.org_jaxjobs.yaml",
        "jaxReplicaSpecs",
    );
}
#[test]
fn mxjob_crd() {
    compare(crd::<MXJob>(), "kubeflow.org_mxjobs.yaml", "mxReplicaSpecs");
}

/// Fields one side's Kubernetes has and the other's has not, inside the pod and claim types
/// (spec FIX rows: ours are Kubernetes 1.34's; the Training Operator's CRDs are older, Trainer
/// v2.3.0's newer). `true`: only ours has it.
const KUBERNETES_VERSION_FIELDS: [(&str, bool); 17] = [
    ("fileKeyRef", true),
    ("stopSignal", true),
    ("restartPolicyRules", true),
    ("seLinuxChangePolicy", true),
    ("podCertificate", true),
    ("hostnameOverride", true),
    ("resources", true),
    ("appArmorProfile", true),
    ("request", true),
    ("recursiveReadOnly", true),
    ("resourceClaimName", true),
    ("resourceClaimTemplateName", true),
    ("supplementalGroupsPolicy", true),
    ("image", true),
    ("source", false),
    ("schedulingGroup", false),
    ("userAnnotations", false),
];

/// Where the two schemas type a field differently: a field one side lacks, a subtree ours keeps
/// untyped (`x-kubernetes-preserve-unknown-fields`) where upstream's is typed, another type.
fn typing_differences(theirs: &Value, ours: &Value, at: &str, out: &mut Vec<String>) {
    let opaque = |s: &Value| {
        s["x-kubernetes-preserve-unknown-fields"] == true
            && s.get("properties").is_none()
            && s.get("items").is_none()
    };
    if opaque(ours) && !opaque(theirs) {
        if theirs.get("properties").is_some()
            || theirs.get("items").is_some()
            || theirs["type"].as_str().is_some_and(|t| t != "object")
        {
            out.push(format!("{at}: untyped in ours"));
        }
        return;
    }
    let int_or_string = |s: &Value| s["x-kubernetes-int-or-string"] == true;
    if theirs["type"] != ours["type"] && !(int_or_string(theirs) && int_or_string(ours)) {
        out.push(format!(
            "{at}: type {} upstream, {} ours",
            theirs["type"], ours["type"]
        ));
    }
    let fields = |s: &Value| s.get("properties").and_then(Value::as_object).cloned();
    let (tf, of) = (
        fields(theirs).unwrap_or_default(),
        fields(ours).unwrap_or_default(),
    );
    for (k, t) in &tf {
        match of.get(k) {
            Some(o) => typing_differences(t, o, &format!("{at}.{k}"), out),
            None if KUBERNETES_VERSION_FIELDS.contains(&(k.as_str(), false)) => {}
            None => out.push(format!("{at}.{k}: missing in ours")),
        }
    }
    if theirs["x-kubernetes-preserve-unknown-fields"] != true {
        for k in of.keys().filter(|k| !tf.contains_key(*k)) {
            if !KUBERNETES_VERSION_FIELDS.contains(&(k.as_str(), true)) {
                out.push(format!("{at}.{k}: only in ours"));
            }
        }
    }
    if let Some(t) = theirs.get("items") {
        typing_differences(t, &ours["items"], &format!("{at}[]"), out);
    }
    if let Some(t) = theirs.get("additionalProperties").filter(|a| a.is_object()) {
        typing_differences(t, &ours["additionalProperties"], &format!("{at}{{}}"), out);
    }
}

fn schema_of(crd: &CustomResourceDefinition) -> Value {
    serde_json::to_value(&crd.spec.versions[0].schema)
        .map(|s| s["openAPIV3Schema"].clone())
        .unwrap_or_default()
}

/// Every field upstream's CRD types, ours types the same way, over the whole schema (not only
/// what the rules read): a field kept as sent would let the API server take what upstream's CRD
/// refuses (`dependsOn: [1]`), a field missing would be pruned.
#[test]
fn every_kind_types_what_upstream_types() {
    let kinds = [
        (
            crd::<PyTorchJob>(),
            "training",
            "kubeflow.org_pytorchjobs.yaml",
        ),
        (crd::<TFJob>(), "training", "kubeflow.org_tfjobs.yaml"),
        (
            crd::<XGBoostJob>(),
            "training",
            "kubeflow.org_xgboostjobs.yaml",
        ),
        (
            crd::<PaddleJob>(),
            "training",
            "kubeflow.org_paddlejobs.yaml",
        ),
        (crd::<JAXJob>(), "training", "kubeflow.org_jaxjobs.yaml"),
        (crd::<MXJob>(), "training", "kubeflow.org_mxjobs.yaml"),
        (
            crd::<TrainJob>(),
            TRAINER,
            "trainer.kubeflow.org_trainjobs.yaml",
        ),
        (
            crd::<TrainingRuntime>(),
            TRAINER,
            "trainer.kubeflow.org_trainingruntimes.yaml",
        ),
        (
            crd::<ClusterTrainingRuntime>(),
            TRAINER,
            "trainer.kubeflow.org_clustertrainingruntimes.yaml",
        ),
    ];
    let mut out = Vec::new();
    for (ours, dir, file) in kinds {
        let theirs = upstream_in(dir, file);
        typing_differences(&schema_of(&theirs), &schema_of(&ours), file, &mut out);
    }
    assert!(
        out.is_empty(),
        "{} differences:\n{}",
        out.len(),
        out.join("\n")
    );
}

const TRAINER: &str = "kubeflow-trainer-v2.3.0";

/// The comparison sees what it is for: a subtree kept as sent, a missing field, a field only
/// in ours, another type.
#[test]
fn typing_differences_are_seen() {
    let theirs = serde_json::json!({"type": "object", "properties": {
        "dependsOn": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
        "a": {"type": "string"}, "b": {"type": "integer"}}});
    let ours = serde_json::json!({"type": "object", "properties": {
        "dependsOn": {"x-kubernetes-preserve-unknown-fields": true},
        "b": {"type": "string"}, "c": {"type": "string"}}});
    let mut out = Vec::new();
    typing_differences(&theirs, &ours, "x", &mut out);
    out.sort();
    assert_eq!(
        out,
        [
            "x.a: missing in ours",
            "x.b: type \"integer\" upstream, \"string\" ours",
            "x.c: only in ours",
            "x.dependsOn: untyped in ours",
        ]
    );
}
