//! Our generated CRDs agree with the upstream ones (fixtures/crds/training): group,
//! version, names, scope, subresources (status, and scale paths), and the field names of spec,
//! replica specs, run and elastic policies and status.

use std::collections::BTreeSet;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion, JSONSchemaProps,
    JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use training_webhook::crd;
use training_webhook::types::{JAXJob, MXJob, PaddleJob, PyTorchJob, TFJob, XGBoostJob};

fn upstream(file: &str) -> CustomResourceDefinition {
    let root = admission_testing::fixtures::fixtures_root();
    let path = root.join("crds/training").join(file);
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
