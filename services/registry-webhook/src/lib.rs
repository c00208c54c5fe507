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
/// API server's default, which is the same value) and exactly upstream's defaults
/// ([`crd_defaults`]: the API server applies them before any webhook runs), small enough for
/// `kubectl apply` (`fit_for_kubectl_apply`).
pub fn crd<K: CustomResourceExt>() -> CustomResourceDefinition {
    let mut c = admission_kit::review::object::crd_of::<K>(&crd_defaults(K::crd_name()));
    // ModelServing's Pod templates make it 650 KB: `kubectl apply -k` would be refused.
    admission_kit::review::object::fit_for_kubectl_apply(&mut c);
    c
}

/// The defaults of upstream's CRD named `name`, by schema path.
fn crd_defaults(name: &str) -> Vec<(String, serde_json::Value)> {
    use serde_json::json;
    // An autoscaling policy's own defaults, under `prefix` (the pinned Model inlines two).
    let policy = |prefix: &str| {
        let mut d = Vec::new();
        for stable in [".behavior.scaleDown", ".behavior.scaleUp.stablePolicy"] {
            d.push((format!("{prefix}{stable}.instances"), json!(1)));
            d.push((format!("{prefix}{stable}.percent"), json!(100)));
            d.push((format!("{prefix}{stable}.period"), json!("15s")));
            d.push((format!("{prefix}{stable}.selectPolicy"), json!("Or")));
        }
        let panic = format!("{prefix}.behavior.scaleUp.panicPolicy");
        d.push((format!("{panic}.panicModeHold"), json!("60s")));
        d.push((format!("{panic}.panicThresholdPercent"), json!(200)));
        d.push((format!("{panic}.percent"), json!(1000)));
        d.push((format!("{prefix}.tolerancePercent"), json!(10)));
        d
    };
    let pod_source = |prefix: &str| {
        vec![
            (format!("{prefix}.metricSources{{}}.pod.port"), json!(8100)),
            (
                format!("{prefix}.metricSources{{}}.pod.uri"),
                json!("/metrics"),
            ),
        ]
    };
    let endpoint = |prefix: &str| {
        vec![
            (format!("{prefix}.metricEndpoint.port"), json!(8100)),
            (format!("{prefix}.metricEndpoint.uri"), json!("/metrics")),
        ]
    };
    let plain = |list: &[(&str, serde_json::Value)]| {
        list.iter()
            .map(|(p, v)| ((*p).to_owned(), v.clone()))
            .collect::<Vec<_>>()
    };
    match name {
        "models.registry.volcano.sh" => {
            let mut d = policy(".spec.autoscalingPolicy");
            d.extend(policy(".spec.backends[].autoscalingPolicy"));
            d.extend(plain(&[
                (".spec.backends[].routeWeight", json!(100)),
                (".spec.backends[].workers[].type", json!("server")),
            ]));
            d
        }
        "autoscalingpolicies.registry.volcano.sh" => policy(".spec"),
        "autoscalingpolicybindings.registry.volcano.sh" => {
            let mut d = plain(&[
                (
                    ".spec.optimizerConfiguration.costExpansionRatePercent",
                    json!(200),
                ),
                (".spec.policyRef.name", json!("")),
            ]);
            d.extend(endpoint(".spec.optimizerConfiguration.params[].target"));
            d.extend(endpoint(".spec.scalingConfiguration.target"));
            d
        }
        "autoscalingpolicies.workload.serving.volcano.sh" => {
            let mut d = policy(".spec");
            d.extend(pod_source(".spec.disaggregatedTarget.roles{}"));
            d.extend(pod_source(".spec.heterogeneousTarget.params[].target"));
            d.extend(pod_source(".spec.homogeneousTarget.target"));
            d.push((
                ".spec.heterogeneousTarget.costExpansionRatePercent".to_owned(),
                json!(200),
            ));
            d
        }
        "modelboosters.workload.serving.volcano.sh" => {
            plain(&[(".spec.backend.workers[].type", json!("server"))])
        }
        "modelservings.workload.serving.volcano.sh" => plain(&[
            (".spec.plugins[].type", json!("BuiltIn")),
            (".spec.recoveryPolicy", json!("RoleRecreate")),
            (".spec.replicas", json!(1)),
            (
                ".spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable",
                json!(1),
            ),
            (
                ".spec.rolloutStrategy.type",
                json!("ServingGroupRollingUpdate"),
            ),
            (".spec.schedulerName", json!("volcano")),
            (
                ".spec.template.networkTopology.groupPolicy.mode",
                json!("hard"),
            ),
            (
                ".spec.template.networkTopology.rolePolicy.mode",
                json!("hard"),
            ),
            (".spec.template.restartGracePeriodSeconds", json!(0)),
            (".spec.template.roles[].replicas", json!(1)),
        ]),
        "modelroutes.networking.serving.volcano.sh" => plain(&[
            (
                ".spec.parentRefs[].group",
                json!("gateway.networking.k8s.io"),
            ),
            (".spec.parentRefs[].kind", json!("Gateway")),
            (".spec.rateLimit.unit", json!("second")),
            (".spec.rules[].targetModels[].weight", json!(100)),
        ]),
        "modelservers.networking.serving.volcano.sh" => plain(&[
            (".spec.kvConnector.type", json!("http")),
            (".spec.trafficPolicy.retry.retryInterval", json!("100ms")),
            (".spec.workloadPort.protocol", json!("http")),
        ]),
        _ => Vec::new(),
    }
}
