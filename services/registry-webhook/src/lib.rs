//! Admission webhooks for Kthena's model registry (`registry.volcano.sh/v1alpha1`): Model,
//! AutoscalingPolicy and AutoscalingPolicyBinding, as `../shared/spec/registry.md` describes
//! them. Rule functions are named by their spec ids (MV-xx, MM-xx, PV-xx, PM-xx, BV-xx).

pub mod binding;
pub mod model;
pub mod policy;
pub mod types;

use admission_kit::{App, FailurePolicy, FieldError, Status, Target};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use types::{AutoscalingPolicy, AutoscalingPolicyBinding, Model};

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

/// The service: endpoints at the upstream paths (§1.2), each with upstream's failure policy.
pub fn app() -> App {
    use FailurePolicy::Fail;
    App::new(
        "registry-webhook",
        "Admission webhooks for Kthena's model registry: Model, AutoscalingPolicy, AutoscalingPolicyBinding.",
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
    .watch::<AutoscalingPolicy>()
    .crd(crd::<Model>)
    .crd(crd::<AutoscalingPolicy>)
    .crd(crd::<AutoscalingPolicyBinding>)
}

/// The CRD of a kind, with `listKind` spelled out as upstream's (kube-derive leaves it to the
/// API server's default, which is the same value).
pub fn crd<K: CustomResourceExt>() -> CustomResourceDefinition {
    let mut c = K::crd();
    if c.spec.names.list_kind.is_none() {
        c.spec.names.list_kind = Some(format!("{}List", c.spec.names.kind));
    }
    c
}
