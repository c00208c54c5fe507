//! TrainJob validation (spec §5): the referenced runtime is read from cluster state (TJ-01..TJ-04),
//! merged with the TrainJob's runtime patches ([`super::info`]), and the plugins' checks run on
//! the result ([`super::plugins`]).

use admission_kit::{Context, ErrorList, FieldError, Path, Request, Status, Validator, Verdict};
use kube::api::DynamicObject;
use serde::Deserialize;

use super::info::{MergeError, runtime_info};
use super::plugins::{self, Job};
use super::runtimes::{DEPRECATION_POLICY_URL, is_deprecated};
use super::types::{ClusterTrainingRuntime, GROUP, TrainJob, TrainingRuntime, TrainingRuntimeSpec};
use super::{Doc, denial, gojson};

/// Which runtime kind a TrainJob names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Namespaced,
    Cluster,
}

/// TJ-01: the runtime reference names one of the two runtime kinds of this group; upstream's
/// answer is a plain denial `unsupported runtime: KIND.GROUP` (the CRD's defaults fill both).
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: torch}, spec: {mlPolicy: {numNodes: 1, torch: {}}, template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// Refused: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torch, apiGroup: trainer.kubeflow.org, kind: Runtime}}}`
///
/// Admitted: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torch, apiGroup: trainer.kubeflow.org, kind: ClusterTrainingRuntime}}}`
fn tj_01_kind(job: &TrainJob) -> Result<Kind, String> {
    let r = &job.spec.runtime_ref;
    let group = r.api_group.as_deref().unwrap_or_default();
    let kind = r.kind.as_deref().unwrap_or_default();
    match (group, kind) {
        (GROUP, "TrainingRuntime") => Ok(Kind::Namespaced),
        (GROUP, "ClusterTrainingRuntime") => Ok(Kind::Cluster),
        ("", _) => Err(format!("unsupported runtime: {kind}")),
        _ => Err(format!("unsupported runtime: {kind}.{group}")),
    }
}

/// The runtime's spec from a stored object, read in place; one that does not decode is reported
/// as the API client would report it.
fn decode_runtime(o: &DynamicObject) -> Result<TrainingRuntimeSpec, String> {
    match o.data.get("spec") {
        // Read as Go reads it (a `null` is the zero value), as the defaulter reads the objects.
        Some(spec) if !spec.is_null() => {
            gojson::go_decode_view(spec, &gojson::RUNTIME_SPEC, ".spec")
                .and_then(|view| TrainingRuntimeSpec::deserialize(&view).map_err(|e| e.to_string()))
        }
        _ => Ok(TrainingRuntimeSpec::default()),
    }
}

/// TJ-02, TJ-03: the runtime exists (the namespaced one in the TrainJob's namespace). Upstream
/// names the field `spec.runtimeRef` for one kind and `spec.RuntimeRef` for the other (Q-2).
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: torch}, spec: {mlPolicy: {numNodes: 1, torch: {}}, template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// Refused: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torch, apiGroup: trainer.kubeflow.org, kind: TrainingRuntime}}}`
///
/// Refused: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: pytorch, apiGroup: trainer.kubeflow.org, kind: ClusterTrainingRuntime}}}`
///
/// Admitted: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torch}}}`
fn tj_02_03_lookup(
    kind: Kind,
    job: &Job,
    ctx: &Context,
) -> Result<(TrainingRuntimeSpec, bool), FieldError> {
    let t = &job.new.typed;
    let name = t.spec.runtime_ref.name.as_str();
    let (rule, field, plural, what, found) = match kind {
        Kind::Namespaced => (
            "TJ-02",
            "runtimeRef",
            "trainingruntimes",
            "trainingRuntime",
            ctx.get::<TrainingRuntime>(t.metadata.namespace.as_deref(), name),
        ),
        Kind::Cluster => (
            "TJ-03",
            "RuntimeRef",
            "clustertrainingruntimes",
            "clusterTrainingRuntime",
            ctx.get::<ClusterTrainingRuntime>(None, name),
        ),
    };
    let why = match found {
        // A cache lookup of the empty name finds nothing, as upstream's cached client does.
        Err(admission_kit::review::lookup::LookupError::EmptyName) | Ok(None) => format!(
            "{plural}.{GROUP} {} not found",
            admission_kit::compat::go::go_quote(name)
        ),
        Ok(Some(o)) => match decode_runtime(&o) {
            Ok(spec) => {
                let deprecated = kind == Kind::Cluster && is_deprecated(o.metadata.labels.as_ref());
                return Ok((spec, deprecated));
            }
            Err(e) => e,
        },
        Err(e) => e.to_string(),
    };
    Err(FieldError::invalid(
        rule,
        Path::new("spec").child(field),
        job.runtime_ref_printed(),
        format!("{why}: specified {what} must be created before the TrainJob is created"),
    ))
}

/// TJ-04: a TrainJob on a deprecated ClusterTrainingRuntime is admitted with a warning.
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: torch, labels: {trainer.kubeflow.org/support: deprecated}}, spec: {mlPolicy: {numNodes: 1, torch: {}}, template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// Admitted: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torch}}}`
fn tj_04_deprecated(name: &str) -> String {
    format!(
        "Referenced ClusterTrainingRuntime \"{name}\" is deprecated and will be removed in a future release of Kubeflow Trainer. See runtime deprecation policy: {DEPRECATION_POLICY_URL}"
    )
}

/// F-1: a runtime patch that cannot be merged (a replicated job or container without a name).
/// The CRD refuses it; upstream's webhook panics (500). Ours refuses naming the field.
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: torch}, spec: {mlPolicy: {numNodes: 1, torch: {}}, template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// Refused: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torch}, runtimePatches: [{manager: acme.io/tuner, trainingRuntimeSpec: {template: {spec: {replicatedJobs: [{template: {spec: {parallelism: 1}}}]}}}}]}}`
///
/// Admitted: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torch}}}`
fn f_1_unmergeable(e: &MergeError) -> FieldError {
    let mut p = Path::new("spec")
        .child("runtimePatches")
        .index(e.patch)
        .child("trainingRuntimeSpec")
        .child("template")
        .child("spec")
        .child("replicatedJobs")
        .index(e.job);
    if let Some((which, i)) = e.container {
        for c in ["template", "spec", "template", "spec"] {
            p = p.child(c);
        }
        p = p.child(which).index(i);
    }
    FieldError::required(
        "F-1",
        p.child("name"),
        "a runtime patch's replicated jobs and containers are merged by name",
    )
}

/// Every TrainJob rule, in upstream's order.
pub fn validate(job: &Job, ctx: &Context) -> Verdict {
    let kind = match tj_01_kind(&job.new.typed) {
        Ok(k) => k,
        Err(message) => {
            return Verdict {
                refusal: Some(("TJ-01", Status::failure(403, "Forbidden", message))),
                ..Verdict::default()
            };
        }
    };
    let (runtime, deprecated) = match tj_02_03_lookup(kind, job, ctx) {
        Ok(r) => r,
        Err(e) => return vec![e].into(),
    };
    let mut v = Verdict::default();
    if deprecated {
        v.warnings
            .push(tj_04_deprecated(&job.new.typed.spec.runtime_ref.name));
    }
    let mut errs = ErrorList::new();
    match runtime_info(&runtime, &job.new.typed.spec.runtime_patches) {
        Ok(info) => plugins::validate(&info, job, ctx, &mut errs),
        Err(e) => errs.push(f_1_unmergeable(&e)),
    }
    v.errors = errs;
    v
}

/// `/validate-trainer-kubeflow-org-v1alpha1-trainjob` (create and update).
pub struct TrainJobValidator;

impl Validator for TrainJobValidator {
    type Object = Doc<TrainJob>;

    fn validate(&self, req: &Request<Self::Object>, ctx: &Context) -> Verdict {
        let job = Job {
            new: &req.object,
            old: req.old_object.as_ref(),
        };
        validate(&job, ctx)
    }

    fn denial(&self, _: &Request<Self::Object>, errors: &[FieldError]) -> Status {
        denial(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stored runtime reads as Go's client reads it: a `null` anywhere is the zero value,
    /// inside the members our types keep as sent too.
    #[test]
    fn a_stored_runtime_reads_null_as_zero() {
        let o: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime",
            "metadata": {"name": "r", "namespace": "n"},
            "spec": {"mlPolicy": {"numNodes": null, "torch": null},
                     "template": {"spec": {"replicatedJobs": [null, {"name": "node", "template": {
                         "metadata": {"labels": {"a": null}},
                         "spec": {"parallelism": null, "template": {"spec": {
                             "containers": [null, {"name": "node", "image": null}]}}}}}]}}}
        }))
        .unwrap();
        let spec = decode_runtime(&o).unwrap();
        let jobs = &spec.template.spec.replicated_jobs;
        assert_eq!((jobs.len(), jobs[0].name.as_str()), (2, ""));
        let node = &jobs[1].template;
        let labels = node.metadata.as_ref().and_then(|m| m.labels.clone());
        assert_eq!(labels, Some([("a".to_owned(), String::new())].into()));
        assert_eq!(node.spec.parallelism, None);
        let containers = &node.spec.template.spec.containers;
        let names: Vec<_> = containers
            .iter()
            .map(crate::v2::types::container_name)
            .collect();
        assert_eq!(names, ["", "node"]);
    }
}
