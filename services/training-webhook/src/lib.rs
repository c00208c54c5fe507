//! Kubeflow Training Operator v1 job validation (`../shared/spec/training.md`): PyTorchJob,
//! TFJob, XGBoostJob, PaddleJob and JAXJob (v1.9.0 rules, TR-01..TR-16 with the FIX rows), and
//! the v1.8.x MXJob endpoint that only warns (TR-17).

pub mod rules;
pub mod types;

use admission_kit::{App, FailurePolicy, Operation, Target};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use rules::{JobValidator, MXJobWarner};
use types::{
    JAXJob, JAXJobSpec, MXJob, PaddleJob, PaddleJobSpec, PyTorchJob, PyTorchJobSpec, TFJob,
    TFJobSpec, XGBoostJob, XGBoostJobSpec,
};

/// The CRD of a kind with `listKind` spelled out and upstream's one default (`runPolicy.suspend:
/// false`) as its only one ([`admission_kit::object::crd_defaults`]).
pub fn crd<K: CustomResourceExt>() -> CustomResourceDefinition {
    let mut c = K::crd();
    if c.spec.names.list_kind.is_none() {
        c.spec.names.list_kind = Some(format!("{}List", c.spec.names.kind));
    }
    admission_kit::object::crd_defaults(
        &mut c,
        &[(".spec.runPolicy.suspend", serde_json::Value::Bool(false))],
    );
    c
}

/// The service: upstream paths (controller-runtime's naming), every webhook failurePolicy Fail.
pub fn app() -> App {
    use FailurePolicy::Fail;
    App::new(
        "training-webhook",
        "Kubeflow Training Operator v1 job validation: PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob, MXJob (warning only).",
    )
    .validate("/validate-kubeflow-org-v1-pytorchjob", Target::of::<PyTorchJob>(), Fail, JobValidator::<PyTorchJobSpec>::default())
    .validate("/validate-kubeflow-org-v1-tfjob", Target::of::<TFJob>(), Fail, JobValidator::<TFJobSpec>::default())
    .validate("/validate-kubeflow-org-v1-xgboostjob", Target::of::<XGBoostJob>(), Fail, JobValidator::<XGBoostJobSpec>::default())
    .validate("/validate-kubeflow-org-v1-paddlejob", Target::of::<PaddleJob>(), Fail, JobValidator::<PaddleJobSpec>::default())
    .validate("/validate-kubeflow-org-v1-jaxjob", Target::of::<JAXJob>(), Fail, JobValidator::<JAXJobSpec>::default())
    .validate(
        "/validate-kubeflow-org-v1-mxjob",
        Target::of::<MXJob>().operations(&[Operation::Create, Operation::Update, Operation::Delete]),
        Fail,
        MXJobWarner,
    )
    .crd(crd::<PyTorchJob>)
    .crd(crd::<TFJob>)
    .crd(crd::<XGBoostJob>)
    .crd(crd::<PaddleJob>)
    .crd(crd::<JAXJob>)
    .crd(crd::<MXJob>)
}
