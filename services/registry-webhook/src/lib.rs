//! Admission webhooks for Kthena: the pinned model registry (`registry.volcano.sh/v1alpha1`:
//! Model, AutoscalingPolicy, AutoscalingPolicyBinding, as `docs/spec/registry.md` describes
//! them; rules MV, MM, PV, PM, BV) and Kthena v1.0 beside it (`workload.serving.volcano.sh` and
//! `networking.serving.volcano.sh`, `docs/spec/kthena-v1.md`; rules MB, AP, MS, MR). Rule
//! functions are named by their spec ids.

pub mod binding;
pub mod model;
pub mod policy;
pub mod types;
pub mod v1;

use admission_kit::{App, FailurePolicy, FieldError, Status, Target};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use types::{AutoscalingPolicy, AutoscalingPolicyBinding, Model};
use v1::networking::{ModelRoute, ModelServer};
use v1::workload::{AutoscalingPolicy as AutoscalingPolicyV1, ModelBooster, ModelServing};

/// The upstream denial text (§4): `validation failed:` then one `  - <path>: <body>` line per
/// error, and no code or reason, so the API server reports 400 to its client.
pub fn denial(errors: &[FieldError]) -> Status {
    let mut msg = String::from("validation failed:");
    for e in errors {
        msg.push_str("\n  - ");
        msg.push_str(&e.to_string());
    }
    Status::message(msg)
}

/// The service under these of its flags (`--name=value`), as `serve` builds it: for tools that
/// run it under options. A flag it does not declare is an error.
pub fn app_from_flags<'a>(flags: impl IntoIterator<Item = &'a str>) -> Result<App, String> {
    admission_kit::cli::build_with::<admission_kit::cli::NoOptions>(flags, |_| Ok(app()))
}

/// The service: endpoints at the upstream paths (§1.2), each with upstream's failure policy.
pub fn app() -> App {
    use FailurePolicy::Fail;
    App::new(
        "registry-webhook",
        "Admission webhooks for Kthena: the model registry (Model, AutoscalingPolicy, AutoscalingPolicyBinding) and v1.0 (ModelBooster, ModelServing, AutoscalingPolicy, ModelRoute, ModelServer).",
    )
    // Kthena answers undecodable reviews with plain-text HTTP 400 (HX-02 … HX-05).
    .decode_errors(admission_kit::DecodeErrors::PlainText)
    .validate("/validate-registry-volcano-sh-v1alpha1-model", Target::of::<Model>(), Fail, model::ModelValidator)
    .mutate("/mutate-registry-volcano-sh-v1alpha1-model", Target::of::<Model>(), Fail, model::ModelDefaulter)
    .validate(
        "/validate-registry-volcano-sh-v1alpha1-autoscalingpolicy",
        Target::of::<AutoscalingPolicy>(),
        Fail,
        policy::PolicyValidator,
    )
    .mutate(
        "/mutate-registry-volcano-sh-v1alpha1-autoscalingpolicy",
        Target::of::<AutoscalingPolicy>(),
        Fail,
        policy::PolicyDefaulter,
    )
    .validate(
        "/validate-registry-volcano-sh-v1alpha1-autoscalingpolicybinding",
        Target::of::<AutoscalingPolicyBinding>(),
        Fail,
        binding::BindingValidator,
    )
    // Kthena v1.0, the controller manager's (workload group) …
    .validate("/validate/modelbooster", Target::of::<ModelBooster>(), Fail, v1::booster::BoosterValidator)
    .mutate("/mutate/modelbooster", Target::of::<ModelBooster>(), Fail, v1::booster::BoosterDefaulter)
    .validate("/validate/autoscalingpolicy", Target::of::<AutoscalingPolicyV1>(), Fail, v1::autoscaling::AutoscalingValidator)
    .mutate("/mutate/autoscalingpolicy", Target::of::<AutoscalingPolicyV1>(), Fail, v1::autoscaling::AutoscalingDefaulter)
    .validate("/validate-workload-ai-v1alpha1-modelserving", Target::of::<ModelServing>(), Fail, v1::serving::ServingValidator)
    // … and the router's (networking group).
    .validate("/validate/modelroute", Target::of::<ModelRoute>(), Fail, v1::route::RouteValidator)
    .validate("/validate/modelserver", Target::of::<ModelServer>(), Fail, v1::route::ServerValidator)
    .watch::<AutoscalingPolicy>()
    .crd(crd::<Model>)
    .crd(crd::<AutoscalingPolicy>)
    .crd(crd::<AutoscalingPolicyBinding>)
    .crd(crd::<ModelBooster>)
    .crd(crd::<ModelServing>)
    .crd(crd::<AutoscalingPolicyV1>)
    .crd(crd::<ModelRoute>)
    .crd(crd::<ModelServer>)
}

/// The CRD of a kind, with `listKind` spelled out as upstream's (kube-derive leaves it to the
/// API server's default, which is the same value) and exactly upstream's defaults, declared on
/// the fields ([`admission_kit::review::object::crd_default`]: the API server applies them
/// before any webhook runs), small enough for `kubectl apply` (`fit_for_kubectl_apply`).
pub fn crd<K: CustomResourceExt>() -> CustomResourceDefinition {
    let mut c = admission_kit::review::object::crd_of::<K>();
    // ModelServing's Pod templates make it 650 KB: `kubectl apply -k` would be refused.
    admission_kit::review::object::fit_for_kubectl_apply(&mut c);
    c
}
