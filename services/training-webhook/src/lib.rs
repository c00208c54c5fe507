//! Kubeflow Training Operator v1 job validation (`docs/spec/training.md`): PyTorchJob,
//! TFJob, XGBoostJob, PaddleJob and JAXJob (v1.9.0 rules, TR-01..TR-16 with the FIX rows), and
//! the v1.8.x MXJob endpoint that only warns (TR-17); and Kubeflow Trainer v2.3
//! (`docs/spec/trainer-v2.md`): TrainJob, TrainingRuntime, ClusterTrainingRuntime.

pub mod rules;
pub mod types;
pub mod v2;

use admission_kit::{App, FailurePolicy, Operation, Target};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use rules::{JobValidator, MXJobWarner};
use types::{
    JAXJob, JAXJobSpec, MXJob, PaddleJob, PaddleJobSpec, PyTorchJob, PyTorchJobSpec, TFJob,
    TFJobSpec, XGBoostJob, XGBoostJobSpec,
};

/// The CRD of a kind with `listKind` spelled out and the defaults upstream's CRD has, declared
/// on the fields ([`admission_kit::review::object::crd_default`]).
pub fn crd<K: CustomResourceExt>() -> CustomResourceDefinition {
    admission_kit::review::object::crd_of::<K>()
}

/// The service's options: flags of `serve` and `review`, parsed once.
#[derive(clap::Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// A fixed RFC 3339 time the TrainJob defaulter stamps runtime patches with (fixtures);
    /// absent: the system clock.
    #[arg(long = "trainjob-clock", value_parser = rfc3339)]
    pub trainjob_clock: Option<jiff::Timestamp>,
}

fn rfc3339(s: &str) -> Result<jiff::Timestamp, String> {
    s.parse()
        .map_err(|e| format!("an RFC 3339 time such as 2026-01-01T00:00:00Z: {e}"))
}

/// The service under these of its flags (`--name=value`), as `serve` builds it: for tools that
/// run it under options. A flag it does not declare is an error.
pub fn app_from_flags<'a>(flags: impl IntoIterator<Item = &'a str>) -> Result<App, String> {
    admission_kit::cli::build_with::<Options>(flags, |o| Ok(app_with(o)))
}

/// The service at its default options.
pub fn app() -> App {
    app_with(Options::default())
}

/// The service: upstream paths (controller-runtime's naming), every webhook failurePolicy Fail.
pub fn app_with(options: Options) -> App {
    use FailurePolicy::Fail;
    use v2::types::{ClusterTrainingRuntime, TrainJob, TrainingRuntime};
    App::new(
        "training-webhook",
        "Kubeflow Training Operator v1 job validation: PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob, MXJob (warning only); Kubeflow Trainer v2.3: TrainJob, TrainingRuntime, ClusterTrainingRuntime.",
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
    .mutate("/mutate-trainer-kubeflow-org-v1alpha1-trainjob", Target::of::<TrainJob>(), Fail, v2::defaulter::TrainJobDefaulter { clock: options.trainjob_clock })
    .validate("/validate-trainer-kubeflow-org-v1alpha1-trainjob", Target::of::<TrainJob>(), Fail, v2::trainjob::TrainJobValidator)
    .validate("/validate-trainer-kubeflow-org-v1alpha1-trainingruntime", Target::of::<TrainingRuntime>(), Fail, v2::runtimes::TrainingRuntimeValidator)
    .object_selector_not_in(v2::types::LABEL_VALIDATION, &["disabled"])
    .validate("/validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime", Target::of::<ClusterTrainingRuntime>(), Fail, v2::runtimes::ClusterTrainingRuntimeValidator)
    .object_selector_not_in(v2::types::LABEL_VALIDATION, &["disabled"])
    // Trainer's CRDs may be absent where only the v1 jobs run.
    .watch_optional::<TrainingRuntime>()
    .watch_optional::<ClusterTrainingRuntime>()
    .watch_metadata::<k8s_openapi::api::scheduling::v1::PriorityClass>()
    .crd(crd::<PyTorchJob>)
    .crd(crd::<TFJob>)
    .crd(crd::<XGBoostJob>)
    .crd(crd::<PaddleJob>)
    .crd(crd::<JAXJob>)
    .crd(crd::<MXJob>)
    .crd(crd::<TrainJob>)
    .crd(crd::<TrainingRuntime>)
    .crd(crd::<ClusterTrainingRuntime>)
}
