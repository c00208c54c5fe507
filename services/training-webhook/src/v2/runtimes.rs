//! TrainingRuntime and ClusterTrainingRuntime validation (spec §4, RT-01..RT-03).

use admission_kit::review::field::BadValue;
use admission_kit::{
    Context, ErrorList, FieldError, Operation, Path, Request, Status, Validator, Verdict,
};

use super::gojson::{self, CONTAINERS};
use super::types::{
    ClusterTrainingRuntime, LABEL_ANCESTOR, LABEL_SUPPORT, ReplicatedJob, TrainingRuntime,
};
use super::{Doc, denial};

/// Where upstream documents the deprecation of runtimes.
pub const DEPRECATION_POLICY_URL: &str = "https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html#runtime-deprecation-policy";

/// The container each ancestor step must have.
fn required_container(ancestor: &str) -> Option<&'static str> {
    match ancestor {
        "trainer" => Some("node"),
        "model-initializer" => Some("model-initializer"),
        "dataset-initializer" => Some("dataset-initializer"),
        _ => None,
    }
}

fn replicated_jobs() -> Path {
    Path::new("spec")
        .child("template")
        .child("spec")
        .child("replicatedJobs")
}

/// RT-01: a replicated job of an ancestor step runs exactly one Job.
///
/// Refused: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: torch}, spec: {template: {spec: {replicatedJobs: [{name: node, replicas: 2, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// Admitted: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: torch}, spec: {mlPolicy: {numNodes: 1, torch: {}}, template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
fn rt_01_replicas(i: usize, rj: &ReplicatedJob, errs: &mut ErrorList) {
    if rj.replicas != 1 {
        errs.push(FieldError::invalid(
            "RT-01",
            replicated_jobs().index(i).child("replicas"),
            rj.replicas,
            "always must be 1",
        ));
    }
}

/// RT-02: a replicated job of an ancestor step has that step's container (init containers do
/// not count); the denial prints the containers as Go marshals them.
///
/// Refused: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: torch}, spec: {template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: main, image: x}]}}}}}]}}}}`
fn rt_02_required_container(
    i: usize,
    ancestor: &str,
    required: &str,
    rj: &ReplicatedJob,
    raw_containers: Option<&serde_json::Value>,
    errs: &mut ErrorList,
) {
    let pod = &rj.template.spec.template.spec;
    if pod
        .containers
        .iter()
        .any(|c| super::types::container_name(c) == required)
    {
        return;
    }
    let printed = match raw_containers {
        Some(v) if !v.is_null() => gojson::print(v, &CONTAINERS),
        _ => "null".to_owned(),
    };
    errs.push(FieldError::invalid(
        "RT-02",
        replicated_jobs()
            .index(i)
            .child("template")
            .child("spec")
            .child("template")
            .child("spec")
            .child("containers"),
        BadValue::Raw(printed),
        format!("must contain the required container for the ancestor: {ancestor}"),
    ));
}

/// RT-01 and RT-02 over every replicated job carrying a known ancestor label.
fn validate_replicated_jobs(rjobs: &[ReplicatedJob], raw: &serde_json::Value) -> ErrorList {
    let mut errs = ErrorList::new();
    for (i, rj) in rjobs.iter().enumerate() {
        let Some(ancestor) = rj
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.as_ref())
            .and_then(|l| l.get(LABEL_ANCESTOR))
        else {
            continue;
        };
        let Some(required) = required_container(ancestor) else {
            continue;
        };
        rt_01_replicas(i, rj, &mut errs);
        let raw_containers = raw.pointer(&format!(
            "/spec/template/spec/replicatedJobs/{i}/template/spec/template/spec/containers"
        ));
        rt_02_required_container(i, ancestor, required, rj, raw_containers, &mut errs);
    }
    errs
}

/// Whether the labels mark a runtime deprecated (`trainer.kubeflow.org/support: deprecated`).
pub fn is_deprecated(labels: Option<&std::collections::BTreeMap<String, String>>) -> bool {
    labels
        .and_then(|l| l.get(LABEL_SUPPORT))
        .is_some_and(|v| v == "deprecated")
}

/// RT-03: a deprecated ClusterTrainingRuntime is created with a warning.
///
/// Admitted: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: torch, labels: {trainer.kubeflow.org/support: deprecated}}, spec: {mlPolicy: {numNodes: 1, torch: {}}, template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
fn rt_03_deprecation_warning(ctr: &ClusterTrainingRuntime) -> Option<String> {
    is_deprecated(ctr.metadata.labels.as_ref()).then(|| {
        format!(
            "ClusterTrainingRuntime \"{}\" is deprecated and will be removed in a future release of Kubeflow Trainer. See runtime deprecation policy: {DEPRECATION_POLICY_URL}",
            ctr.metadata.name.as_deref().unwrap_or_default()
        )
    })
}

/// `/validate-trainer-kubeflow-org-v1alpha1-trainingruntime`: RT-01, RT-02 on create only
/// (upstream's update admits everything).
pub struct TrainingRuntimeValidator;

impl Validator for TrainingRuntimeValidator {
    type Object = Doc<TrainingRuntime>;

    fn validate(&self, req: &Request<Self::Object>, _: &Context) -> Verdict {
        if req.operation != Operation::Create {
            return Verdict::default();
        }
        let o = &req.object;
        validate_replicated_jobs(&o.typed.spec.template.spec.replicated_jobs, &o.raw).into()
    }

    fn denial(&self, _: &Request<Self::Object>, errors: &[FieldError]) -> Status {
        denial(errors)
    }
}

/// `/validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime`: RT-01, RT-02 on create and
/// update, RT-03 on create.
pub struct ClusterTrainingRuntimeValidator;

impl Validator for ClusterTrainingRuntimeValidator {
    type Object = Doc<ClusterTrainingRuntime>;

    fn validate(&self, req: &Request<Self::Object>, _: &Context) -> Verdict {
        let o = &req.object;
        let mut v: Verdict =
            validate_replicated_jobs(&o.typed.spec.template.spec.replicated_jobs, &o.raw).into();
        if req.operation == Operation::Create {
            v.warnings.extend(rt_03_deprecation_warning(&o.typed));
        }
        v
    }

    fn denial(&self, _: &Request<Self::Object>, errors: &[FieldError]) -> Status {
        denial(errors)
    }
}
