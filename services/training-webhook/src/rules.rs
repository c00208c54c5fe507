//! The job validators (spec §4, §5): the rules every kind shares (TR-01..TR-08) and the
//! kind-specific ones (TR-09..TR-16), run in upstream's order with replica types in key order.

use std::marker::PhantomData;

use admission_kit::compat::resources::{BadQuantity, check_list, check_pod_spec};
use admission_kit::{
    Context, ErrorList, FieldError, Operation, Path, Request, SpecView, Status, Validator, Verdict,
};
use serde::de::DeserializeOwned;

use crate::types::{
    JAXJobSpec, PaddleJobSpec, PyTorchJobSpec, ReplicaSpec, ReplicaSpecs, RunPolicy, TFJobSpec,
    XGBoostJobSpec,
};

const MANAGED_BY: [&str; 2] = [
    "kubeflow.org/training-operator",
    "kueue.x-k8s.io/multikueue",
];

/// What distinguishes one job kind for the shared rules.
pub trait JobKind: DeserializeOwned + Default + Send + Sync + 'static {
    /// JSON name of the replica map (`pytorchReplicaSpecs`).
    const MAP: &'static str;
    /// Allowed replica keys (TR-05); `None`: any key (TFJob, Q1).
    const KEYS: Option<&'static [&'static str]>;
    /// The container name TR-08 looks for.
    const CONTAINER: &'static str;
    /// Whether TR-08 quotes the name (PaddleJob).
    const QUOTE_CONTAINER: bool = false;
    /// Whether TR-02/TR-03 apply (not JAXJob, Q3).
    const MANAGED_BY_RULES: bool = true;

    /// The run policy.
    fn run_policy(&self) -> Option<&RunPolicy>;
    /// The replica map.
    fn replicas(&self) -> Option<&ReplicaSpecs>;
    /// Rules between TR-02 and TR-04 (PyTorch elastic rules).
    fn before_replicas(&self, _errs: &mut ErrorList, _warnings: &mut Vec<String>) {}
    /// Rules after TR-08 for one replica type.
    fn per_replica(&self, _key: &str, _spec: &ReplicaSpec, _path: &Path, _errs: &mut ErrorList) {}
    /// Rules after every replica type.
    fn after_replicas(&self, _errs: &mut ErrorList) {}
}

fn spec() -> Path {
    Path::new("spec")
}

/// TR-01: the name is a DNS-1035 label.
///
/// Refused: `{apiVersion: kubeflow.org/v1, kind: PyTorchJob, metadata: {name: 1job}, spec: {pytorchReplicaSpecs: {Master: {replicas: 1, template: {spec: {containers: [{name: pytorch, image: x}]}}}}}}`
///
/// Admitted: `{apiVersion: kubeflow.org/v1, kind: PyTorchJob, metadata: {name: job-1}, spec: {pytorchReplicaSpecs: {Master: {replicas: 1, template: {spec: {containers: [{name: pytorch, image: x}]}}}}}}`
fn tr_01_name(name: &str, errs: &mut ErrorList) {
    let reasons = admission_kit::compat::validation::dns1035_label_errors(name);
    if !reasons.is_empty() {
        errs.push(FieldError::invalid(
            "TR-01",
            Path::new("metadata").child("name"),
            name,
            format!("should match: {}", reasons.join(",")),
        ));
    }
}

fn managed_by(p: Option<&RunPolicy>) -> Option<&str> {
    p.and_then(|p| p.managed_by.as_deref())
}

fn managed_by_path() -> Path {
    spec().child("runPolicy").child("managedBy")
}

/// TR-02: managedBy, when present (even `""`, Q2), names a supported controller.
///
/// Refused: `{apiVersion: kubeflow.org/v1, kind: PyTorchJob, metadata: {name: j}, spec: {runPolicy: {managedBy: example.com/other}, pytorchReplicaSpecs: {Master: {replicas: 1, template: {spec: {containers: [{name: pytorch, image: x}]}}}}}}`
///
/// Admitted: `{apiVersion: kubeflow.org/v1, kind: PyTorchJob, metadata: {name: j}, spec: {runPolicy: {managedBy: kueue.x-k8s.io/multikueue}, pytorchReplicaSpecs: {Master: {replicas: 1, template: {spec: {containers: [{name: pytorch, image: x}]}}}}}}`
fn tr_02_managed_by(value: Option<&str>, errs: &mut ErrorList) {
    if let Some(v) = value
        && !MANAGED_BY.contains(&v)
    {
        errs.push(FieldError::not_supported(
            "TR-02",
            managed_by_path(),
            v,
            &MANAGED_BY,
        ));
    }
}

/// TR-03: managedBy never changes on UPDATE (absent and present differ, Q4). Enforced for
/// PyTorchJob too (FIX-1).
///
/// State: `{apiVersion: kubeflow.org/v1, kind: PyTorchJob, metadata: {name: j}, spec: {pytorchReplicaSpecs: {Master: {replicas: 1, template: {spec: {containers: [{name: pytorch, image: x}]}}}}}}`
///
/// Refused on update: `{apiVersion: kubeflow.org/v1, kind: PyTorchJob, metadata: {name: j}, spec: {runPolicy: {managedBy: kubeflow.org/training-operator}, pytorchReplicaSpecs: {Master: {replicas: 1, template: {spec: {containers: [{name: pytorch, image: x}]}}}}}}`
///
/// Admitted on update: `{apiVersion: kubeflow.org/v1, kind: PyTorchJob, metadata: {name: j, labels: {team: a}}, spec: {pytorchReplicaSpecs: {Master: {replicas: 1, template: {spec: {containers: [{name: pytorch, image: x}]}}}}}}`
fn tr_03_managed_by_immutable(old: Option<&str>, new: Option<&str>, errs: &mut ErrorList) {
    if old != new {
        errs.push(FieldError::invalid(
            "TR-03",
            managed_by_path(),
            new.unwrap_or("null"),
            "field is immutable",
        ));
    }
}

/// TR-05..TR-08 for one replica type.
///
/// TR-05: the replica type is one the job kind supports.
///
/// Refused: `{apiVersion: kubeflow.org/v1, kind: PyTorchJob, metadata: {name: j}, spec: {pytorchReplicaSpecs: {Chief: {replicas: 1, template: {spec: {containers: [{name: pytorch, image: x}]}}}}}}`
///
/// Admitted: `{apiVersion: kubeflow.org/v1, kind: PyTorchJob, metadata: {name: j}, spec: {pytorchReplicaSpecs: {Master: {replicas: 1, template: {spec: {containers: [{name: pytorch, image: x}]}}}}}}`
///
/// TR-06: the replica's pod template has containers.
///
/// Refused: `{apiVersion: kubeflow.org/v1, kind: PyTorchJob, metadata: {name: j}, spec: {pytorchReplicaSpecs: {Master: {replicas: 1, template: {spec: {containers: []}}}}}}`
///
/// Admitted: `{apiVersion: kubeflow.org/v1, kind: PyTorchJob, metadata: {name: j}, spec: {pytorchReplicaSpecs: {Master: {replicas: 1, template: {spec: {containers: [{name: pytorch, image: x}]}}}}}}`
///
/// TR-07: each container has an image.
///
/// Refused: `{apiVersion: kubeflow.org/v1, kind: PyTorchJob, metadata: {name: j}, spec: {pytorchReplicaSpecs: {Master: {replicas: 1, template: {spec: {containers: [{name: pytorch}]}}}}}}`
///
/// Admitted: `{apiVersion: kubeflow.org/v1, kind: PyTorchJob, metadata: {name: j}, spec: {pytorchReplicaSpecs: {Master: {replicas: 1, template: {spec: {containers: [{name: pytorch, image: x}]}}}}}}`
///
/// TR-08: one container has the job kind's default container name.
///
/// Refused: `{apiVersion: kubeflow.org/v1, kind: PyTorchJob, metadata: {name: j}, spec: {pytorchReplicaSpecs: {Master: {replicas: 1, template: {spec: {containers: [{name: trainer, image: x}]}}}}}}`
///
/// Admitted: `{apiVersion: kubeflow.org/v1, kind: PyTorchJob, metadata: {name: j}, spec: {pytorchReplicaSpecs: {Master: {replicas: 1, template: {spec: {containers: [{name: pytorch, image: x}]}}}}}}`
fn tr_05_08_replica<J: JobKind>(key: &str, spec: &ReplicaSpec, path: &Path, errs: &mut ErrorList) {
    if let Some(keys) = J::KEYS
        && !keys.contains(&key)
    {
        errs.push(FieldError::not_supported("TR-05", path.clone(), key, keys));
    }
    let containers_path = path.child("template").child("spec").child("containers");
    let containers = spec
        .template
        .as_ref()
        .and_then(|t| t.spec.as_ref())
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    if containers.is_empty() {
        errs.push(FieldError::required(
            "TR-06",
            containers_path.clone(),
            "must be specified",
        ));
    }
    for (i, c) in containers.iter().enumerate() {
        if c.image.as_deref().unwrap_or_default().is_empty() {
            errs.push(FieldError::required(
                "TR-07",
                containers_path.index(i).child("image"),
                "must be required",
            ));
        }
    }
    if !containers.iter().any(|c| c.name == J::CONTAINER) {
        let name = if J::QUOTE_CONTAINER {
            format!("{:?}", J::CONTAINER)
        } else {
            J::CONTAINER.to_owned()
        };
        errs.push(FieldError::required(
            "TR-08",
            containers_path,
            format!("must have at least one container with name {name}"),
        ));
    }
}

/// Every rule for a job of kind `J`, in upstream's order (§5).
///
/// TR-04: the job's replica map (`spec.pytorchReplicaSpecs`, …) is required; an empty map
/// passes.
///
/// Refused: `{apiVersion: kubeflow.org/v1, kind: PyTorchJob, metadata: {name: j}, spec: {runPolicy: {}}}`
///
/// Admitted: `{apiVersion: kubeflow.org/v1, kind: PyTorchJob, metadata: {name: j}, spec: {pytorchReplicaSpecs: {Master: {replicas: 1, template: {spec: {containers: [{name: pytorch, image: x}]}}}}}}`
pub fn validate_job<J: JobKind>(req: &Request<SpecView<J>>) -> (ErrorList, Vec<String>) {
    let (mut errs, mut warnings) = (ErrorList::new(), Vec::new());
    let job = &req.object;
    tr_01_name(job.metadata.name.as_deref().unwrap_or_default(), &mut errs);
    if J::MANAGED_BY_RULES {
        if req.operation == Operation::Update
            && let Some(old) = &req.old_object
        {
            tr_03_managed_by_immutable(
                managed_by(old.spec.run_policy()),
                managed_by(job.spec.run_policy()),
                &mut errs,
            );
        }
        tr_02_managed_by(managed_by(job.spec.run_policy()), &mut errs);
    }
    job.spec.before_replicas(&mut errs, &mut warnings);
    let map_path = spec().child(J::MAP);
    match job.spec.replicas() {
        None => errs.push(FieldError::required("TR-04", map_path, "must be required")),
        Some(map) => {
            let empty = ReplicaSpec::default();
            for (key, rs) in map {
                // FIX-2: a null replica spec is `{}`.
                let rs = rs.as_ref().unwrap_or(&empty);
                let path = map_path.key(key);
                tr_05_08_replica::<J>(key, rs, &path, &mut errs);
                job.spec.per_replica(key, rs, &path, &mut errs);
            }
        }
    }
    job.spec.after_replicas(&mut errs);
    (errs, warnings)
}

/// The validator of one job kind.
pub struct JobValidator<J>(PhantomData<J>);

impl<J> Default for JobValidator<J> {
    fn default() -> Self {
        Self(PhantomData)
    }
}

impl<J: JobKind> Validator for JobValidator<J> {
    type Object = SpecView<J>;

    fn validate(&self, req: &Request<SpecView<J>>, _: &Context) -> Verdict {
        // DELETE and CONNECT are admitted unchecked (Q7).
        if !matches!(req.operation, Operation::Create | Operation::Update) {
            return Verdict::default();
        }
        let (errors, warnings) = validate_job(req);
        Verdict {
            errors,
            warnings,
            ..Verdict::default()
        }
    }

    fn check_decoded(&self, job: &SpecView<J>) -> Result<(), String> {
        check_quantities(&job.spec).map_err(|e| e.to_string())
    }

    fn denial(&self, _: &Request<SpecView<J>>, errors: &[FieldError]) -> Status {
        Status::failure(
            403,
            "Forbidden",
            admission_kit::review::field::aggregate(errors),
        )
    }

    fn allowed_status(&self) -> Option<Status> {
        Some(Status::allowed())
    }
}

/// The quantities Go's typed decode of a job parses (minimum resources and every
/// replica's pod template), refused here as upstream's decoder refuses them.
fn check_quantities<J: JobKind>(spec: &J) -> Result<(), BadQuantity> {
    let min = spec
        .run_policy()
        .and_then(|r| r.scheduling_policy.as_ref())
        .and_then(|s| s.min_resources.as_ref());
    check_list("spec.runPolicy.schedulingPolicy.minResources", min)?;
    for (key, replica) in spec.replicas().into_iter().flatten() {
        let pod = replica
            .as_ref()
            .and_then(|r| r.template.as_ref())
            .and_then(|t| t.spec.as_ref());
        if let Some(pod) = pod {
            check_pod_spec("template.spec", pod)
                .map_err(|e| e.under(format_args!("spec.{}.{key}", J::MAP)))?;
        }
    }
    Ok(())
}

const MASTER_WORKER: &[&str] = &["Master", "Worker"];

fn replicas_path(path: &Path) -> Path {
    path.child("replicas")
}

impl JobKind for PyTorchJobSpec {
    const MAP: &'static str = "pytorchReplicaSpecs";
    const KEYS: Option<&'static [&'static str]> = Some(MASTER_WORKER);
    const CONTAINER: &'static str = "pytorch";

    fn run_policy(&self) -> Option<&RunPolicy> {
        self.run_policy.as_ref()
    }
    fn replicas(&self) -> Option<&ReplicaSpecs> {
        self.pytorch_replica_specs.as_ref()
    }

    /// TR-11 (a Worker is needed with elastic training, Q8), TR-12 (deprecation warning),
    /// TR-13 (not both nProcPerNode fields).
    ///
    /// TR-11: elastic training needs a Worker replica.
    ///
    /// Refused: `{apiVersion: kubeflow.org/v1, kind: PyTorchJob, metadata: {name: j}, spec: {elasticPolicy: {maxReplicas: 2}, pytorchReplicaSpecs: {Master: {replicas: 1, template: {spec: {containers: [{name: pytorch, image: x}]}}}}}}`
    ///
    /// Admitted: `{apiVersion: kubeflow.org/v1, kind: PyTorchJob, metadata: {name: j}, spec: {elasticPolicy: {maxReplicas: 2}, pytorchReplicaSpecs: {Worker: {replicas: 2, template: {spec: {containers: [{name: pytorch, image: x}]}}}}}}`
    ///
    /// TR-13: `spec.elasticPolicy.nProcPerNode` and `spec.nprocPerNode` may not both be set.
    ///
    /// Refused: `{apiVersion: kubeflow.org/v1, kind: PyTorchJob, metadata: {name: j}, spec: {nprocPerNode: "2", elasticPolicy: {nProcPerNode: 2}, pytorchReplicaSpecs: {Worker: {replicas: 2, template: {spec: {containers: [{name: pytorch, image: x}]}}}}}}`
    ///
    /// Admitted: `{apiVersion: kubeflow.org/v1, kind: PyTorchJob, metadata: {name: j}, spec: {elasticPolicy: {nProcPerNode: 2}, pytorchReplicaSpecs: {Worker: {replicas: 2, template: {spec: {containers: [{name: pytorch, image: x}]}}}}}}`
    fn before_replicas(&self, errs: &mut ErrorList, warnings: &mut Vec<String>) {
        let Some(ep) = &self.elastic_policy else {
            return;
        };
        if !self
            .pytorch_replica_specs
            .as_ref()
            .is_some_and(|m| m.contains_key("Worker"))
        {
            errs.push(FieldError::required(
                "TR-11",
                spec().child(Self::MAP).key("Worker"),
                "must be configured if elastic policy is used",
            ));
        }
        if ep.n_proc_per_node.is_some() {
            warnings.push(
                "spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead"
                    .into(),
            );
            if self.nproc_per_node.is_some() {
                errs.push(FieldError::forbidden(
                    "TR-13",
                    spec().child("elasticPolicy").child("nProcPerNode"),
                    "must not be used with spec.nprocPerNode",
                ));
            }
        }
    }

    /// TR-09: exactly one Master (absent replicas fail, Q5).
    ///
    /// Refused: `{apiVersion: kubeflow.org/v1, kind: PyTorchJob, metadata: {name: j}, spec: {pytorchReplicaSpecs: {Master: {replicas: 2, template: {spec: {containers: [{name: pytorch, image: x}]}}}}}}`
    ///
    /// Admitted: `{apiVersion: kubeflow.org/v1, kind: PyTorchJob, metadata: {name: j}, spec: {pytorchReplicaSpecs: {Master: {replicas: 1, template: {spec: {containers: [{name: pytorch, image: x}]}}}}}}`
    ///
    /// TR-10: every other replica type asks for at least one replica when it says how many.
    ///
    /// Refused: `{apiVersion: kubeflow.org/v1, kind: PyTorchJob, metadata: {name: j}, spec: {pytorchReplicaSpecs: {Master: {replicas: 1, template: {spec: {containers: [{name: pytorch, image: x}]}}}, Worker: {replicas: 0, template: {spec: {containers: [{name: pytorch, image: x}]}}}}}}`
    ///
    /// Admitted: `{apiVersion: kubeflow.org/v1, kind: PyTorchJob, metadata: {name: j}, spec: {pytorchReplicaSpecs: {Master: {replicas: 1, template: {spec: {containers: [{name: pytorch, image: x}]}}}}}}`
    fn per_replica(&self, key: &str, rs: &ReplicaSpec, path: &Path, errs: &mut ErrorList) {
        if key == "Master" {
            if rs.replicas != Some(1) {
                errs.push(FieldError::forbidden(
                    "TR-09",
                    replicas_path(path),
                    "must be 1",
                ));
            }
        } else if rs.replicas.is_some_and(|r| r < 1) {
            errs.push(FieldError::forbidden(
                "TR-10",
                replicas_path(path),
                "must be at least 1",
            ));
        }
    }
}

impl JobKind for TFJobSpec {
    const MAP: &'static str = "tfReplicaSpecs";
    const KEYS: Option<&'static [&'static str]> = None;
    const CONTAINER: &'static str = "tensorflow";

    fn run_policy(&self) -> Option<&RunPolicy> {
        self.run_policy.as_ref()
    }
    fn replicas(&self) -> Option<&ReplicaSpecs> {
        self.tf_replica_specs.as_ref()
    }

    /// TR-14: not both Chief and Master.
    ///
    /// Refused: `{apiVersion: kubeflow.org/v1, kind: TFJob, metadata: {name: j}, spec: {tfReplicaSpecs: {Chief: {replicas: 1, template: {spec: {containers: [{name: tensorflow, image: x}]}}}, Master: {replicas: 1, template: {spec: {containers: [{name: tensorflow, image: x}]}}}}}}`
    ///
    /// Admitted: `{apiVersion: kubeflow.org/v1, kind: TFJob, metadata: {name: j}, spec: {tfReplicaSpecs: {Chief: {replicas: 1, template: {spec: {containers: [{name: tensorflow, image: x}]}}}, Worker: {replicas: 1, template: {spec: {containers: [{name: tensorflow, image: x}]}}}}}}`
    fn after_replicas(&self, errs: &mut ErrorList) {
        let m = self.tf_replica_specs.as_ref();
        let count = ["Chief", "Master"]
            .iter()
            .filter(|k| m.is_some_and(|m| m.contains_key(**k)))
            .count();
        if count > 1 {
            errs.push(FieldError::forbidden(
                "TR-14",
                spec().child(Self::MAP),
                "must not have more than 1 Chief or Master role",
            ));
        }
    }
}

impl JobKind for XGBoostJobSpec {
    const MAP: &'static str = "xgbReplicaSpecs";
    const KEYS: Option<&'static [&'static str]> = Some(MASTER_WORKER);
    const CONTAINER: &'static str = "xgboost";

    fn run_policy(&self) -> Option<&RunPolicy> {
        self.run_policy.as_ref()
    }
    fn replicas(&self) -> Option<&ReplicaSpecs> {
        self.xgb_replica_specs.as_ref()
    }

    /// TR-15: exactly one Master.
    ///
    /// Refused: `{apiVersion: kubeflow.org/v1, kind: XGBoostJob, metadata: {name: j}, spec: {xgbReplicaSpecs: {Master: {replicas: 2, template: {spec: {containers: [{name: xgboost, image: x}]}}}}}}`
    ///
    /// Admitted: `{apiVersion: kubeflow.org/v1, kind: XGBoostJob, metadata: {name: j}, spec: {xgbReplicaSpecs: {Master: {replicas: 1, template: {spec: {containers: [{name: xgboost, image: x}]}}}}}}`
    fn per_replica(&self, key: &str, rs: &ReplicaSpec, path: &Path, errs: &mut ErrorList) {
        if key == "Master" && rs.replicas != Some(1) {
            errs.push(FieldError::forbidden(
                "TR-15",
                replicas_path(path),
                "must be 1",
            ));
        }
    }

    /// TR-16: a Master is present.
    ///
    /// Refused: `{apiVersion: kubeflow.org/v1, kind: XGBoostJob, metadata: {name: j}, spec: {xgbReplicaSpecs: {Worker: {replicas: 1, template: {spec: {containers: [{name: xgboost, image: x}]}}}}}}`
    ///
    /// Admitted: `{apiVersion: kubeflow.org/v1, kind: XGBoostJob, metadata: {name: j}, spec: {xgbReplicaSpecs: {Master: {replicas: 1, template: {spec: {containers: [{name: xgboost, image: x}]}}}, Worker: {replicas: 1, template: {spec: {containers: [{name: xgboost, image: x}]}}}}}}`
    fn after_replicas(&self, errs: &mut ErrorList) {
        if !self
            .xgb_replica_specs
            .as_ref()
            .is_some_and(|m| m.contains_key("Master"))
        {
            errs.push(FieldError::required(
                "TR-16",
                spec().child(Self::MAP).key("Master"),
                "must be present",
            ));
        }
    }
}

impl JobKind for PaddleJobSpec {
    const MAP: &'static str = "paddleReplicaSpecs";
    const KEYS: Option<&'static [&'static str]> = Some(MASTER_WORKER);
    const CONTAINER: &'static str = "paddle";
    const QUOTE_CONTAINER: bool = true;

    fn run_policy(&self) -> Option<&RunPolicy> {
        self.run_policy.as_ref()
    }
    fn replicas(&self) -> Option<&ReplicaSpecs> {
        self.paddle_replica_specs.as_ref()
    }
}

impl JobKind for JAXJobSpec {
    const MAP: &'static str = "jaxReplicaSpecs";
    const KEYS: Option<&'static [&'static str]> = Some(&["Worker"]);
    const CONTAINER: &'static str = "jax";
    const MANAGED_BY_RULES: bool = false;

    fn run_policy(&self) -> Option<&RunPolicy> {
        self.run_policy.as_ref()
    }
    fn replicas(&self) -> Option<&ReplicaSpecs> {
        self.jax_replica_specs.as_ref()
    }
}

/// TR-17's text (FIX-4: upstream's two sentences joined by a space instead of a line feed,
/// which the API server would drop from the `Warning` header).
pub const MXJOB_WARNING: &str = "MXJob is deprecated, and the MXJob will be removed in the release v1.9.0. Please see https://github.com/kubeflow/training-operator/issues/1996 for more details";

/// `/validate-kubeflow-org-v1-mxjob`: admits everything with the deprecation warning (TR-17).
///
/// TR-17: every MXJob request is admitted with a warning that MXJob is no longer supported.
///
/// Warned: `{apiVersion: kubeflow.org/v1, kind: MXJob, metadata: {name: j}, spec: {mxReplicaSpecs: {Scheduler: {replicas: 1, template: {spec: {containers: [{name: mxnet, image: x}]}}}}}}`
///
/// Admitted: `{apiVersion: kubeflow.org/v1, kind: PyTorchJob, metadata: {name: j}, spec: {pytorchReplicaSpecs: {Master: {replicas: 1, template: {spec: {containers: [{name: pytorch, image: x}]}}}}}}`
pub struct MXJobWarner;

impl Validator for MXJobWarner {
    type Object = SpecView<crate::types::MXJobSpec>;

    fn validate(&self, _: &Request<Self::Object>, _: &Context) -> Verdict {
        Verdict {
            warnings: vec![MXJOB_WARNING.to_owned()],
            applied: vec!["TR-17"],
            ..Verdict::default()
        }
    }

    fn allowed_status(&self) -> Option<Status> {
        Some(Status::allowed())
    }
}

#[cfg(test)]
mod tests;
