//! Our Trainer v2.3 CRDs agree with upstream's (fixtures/crds/kubeflow-trainer-v2.3.0):
//! group, version, names, scope, subresources, the field names of every object the rules read,
//! and every default upstream declares on them (the API server fills those in before any webhook
//! runs, so a missing one would change what the rules see). Subtrees the rules do not read are
//! kept as sent (`x-kubernetes-preserve-unknown-fields`) and not compared.

use std::collections::BTreeSet;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion, JSONSchemaProps,
    JSONSchemaPropsOrArray,
};
use training_webhook::crd as v2_crd;
use training_webhook::v2::types::{ClusterTrainingRuntime, TrainJob, TrainingRuntime};

fn upstream(file: &str) -> CustomResourceDefinition {
    let root = admission_testing::fixtures::fixtures_root();
    let path = root.join("crds/kubeflow-trainer-v2.3.0").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml_ng::from_str(&text).unwrap()
}

fn schema(c: &CustomResourceDefinition) -> &JSONSchemaProps {
    c.spec.versions[0]
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .expect("schema")
}

/// The schema at a path of property names (`[]` steps into array items).
fn at<'a>(s: &'a JSONSchemaProps, path: &str) -> &'a JSONSchemaProps {
    let mut cur = s;
    for p in path.split('.').filter(|p| !p.is_empty()) {
        cur = if p == "[]" {
            match &cur.items {
                Some(JSONSchemaPropsOrArray::Schema(i)) => i,
                other => panic!("no items at {path}: {other:?}"),
            }
        } else {
            cur.properties
                .as_ref()
                .and_then(|m| m.get(p))
                .unwrap_or_else(|| panic!("no {p} in {path}"))
        };
    }
    cur
}

fn props(s: &JSONSchemaProps) -> BTreeSet<&str> {
    s.properties
        .iter()
        .flatten()
        .map(|(k, _)| k.as_str())
        .collect()
}

/// Every default at or under `s`, by path.
fn defaults(s: &JSONSchemaProps, prefix: &str, out: &mut BTreeSet<String>) {
    if let Some(d) = &s.default {
        out.insert(format!("{prefix} = {}", d.0));
    }
    for (k, v) in s.properties.iter().flatten() {
        defaults(v, &format!("{prefix}.{k}"), out);
    }
    if let Some(JSONSchemaPropsOrArray::Schema(i)) = &s.items {
        defaults(i, &format!("{prefix}.[]"), out);
    }
}

fn compare(ours: CustomResourceDefinition, file: &str, objects: &[&str], opaque: &[&str]) {
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
        (&ov.name, ov.served, ov.storage),
        (&tv.name, tv.served, tv.storage)
    );
    let status = |v: &CustomResourceDefinitionVersion| {
        v.subresources.as_ref().is_some_and(|s| s.status.is_some())
    };
    assert_eq!(status(ov), status(tv), "{file}: status subresource");
    let (os, ts) = (schema(&ours), schema(&theirs));
    for path in objects {
        assert_eq!(
            props(at(os, path)),
            props(at(ts, path)),
            "{file}: fields of {path}"
        );
    }
    // Defaults: every one of upstream's outside the subtrees we keep as sent, and no other.
    let mut ours_d = BTreeSet::new();
    let mut theirs_d = BTreeSet::new();
    defaults(os, "", &mut ours_d);
    defaults(ts, "", &mut theirs_d);
    let outside = |d: &&String| !opaque.iter().any(|o| d.starts_with(o));
    let theirs_d: BTreeSet<_> = theirs_d.iter().filter(outside).cloned().collect();
    assert_eq!(ours_d, theirs_d, "{file}: defaults");
}

const RUNTIME_OBJECTS: &[&str] = &[
    ".spec",
    ".spec.mlPolicy",
    ".spec.mlPolicy.torch",
    ".spec.mlPolicy.torch.envInjection",
    ".spec.mlPolicy.torch.envInjection.targets.[]",
    ".spec.mlPolicy.mpi",
    ".spec.mlPolicy.flux",
    ".spec.podGroupPolicy",
    ".spec.template",
    ".spec.template.spec",
    ".spec.template.spec.replicatedJobs.[]",
];

/// Subtrees of the runtimes kept as sent, and the Job templates (k8s-openapi's, whose own
/// defaults upstream's controller-gen copies from the Kubernetes types).
const RUNTIME_OPAQUE: &[&str] = &[
    ".spec.podGroupPolicy.",
    ".spec.template.metadata",
    ".spec.template.spec.failurePolicy",
    ".spec.template.spec.volumeClaimPolicies",
    ".spec.template.spec.replicatedJobs.[].template.",
    ".spec.template.spec.replicatedJobs.[].dependsOn",
    ".spec.template.spec.network",
    ".spec.template.spec.successPolicy",
    ".spec.template.spec.startupPolicy",
    ".spec.template.spec.coordinator",
];

#[test]
fn trainjob_crd_matches_upstream() {
    compare(
        v2_crd::<TrainJob>(),
        "trainer.kubeflow.org_trainjobs.yaml",
        &[
            ".spec",
            ".spec.runtimeRef",
            ".spec.trainer",
            ".spec.initializer",
            ".spec.initializer.dataset",
            ".spec.initializer.model",
            ".spec.runtimePatches.[]",
            ".spec.runtimePatches.[].trainingRuntimeSpec.template",
            ".spec.runtimePatches.[].trainingRuntimeSpec.template.spec.replicatedJobs.[]",
            ".spec.runtimePatches.[].trainingRuntimeSpec.template.spec.replicatedJobs.[].template.spec.template.spec",
            ".spec.runtimePatches.[].trainingRuntimeSpec.template.spec.replicatedJobs.[].template.spec.template.spec.containers.[]",
        ],
        &[
            ".spec.initializer.dataset.env",
            ".spec.initializer.dataset.secretRef",
            ".spec.initializer.model.env",
            ".spec.initializer.model.secretRef",
            ".spec.trainer.env",
            ".spec.trainer.resourcesPerNode",
            ".spec.runtimePatches.[].trainingRuntimeSpec.template.",
            ".status",
        ],
    );
}

#[test]
fn trainingruntime_crd_matches_upstream() {
    compare(
        v2_crd::<TrainingRuntime>(),
        "trainer.kubeflow.org_trainingruntimes.yaml",
        RUNTIME_OBJECTS,
        RUNTIME_OPAQUE,
    );
}

#[test]
fn clustertrainingruntime_crd_matches_upstream() {
    compare(
        v2_crd::<ClusterTrainingRuntime>(),
        "trainer.kubeflow.org_clustertrainingruntimes.yaml",
        RUNTIME_OBJECTS,
        RUNTIME_OPAQUE,
    );
}
