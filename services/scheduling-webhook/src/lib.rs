//! Koordinator's Pod, Pod binding, Reservation and ElasticQuota admission
//! (`docs/spec/scheduling.md`). Rules carry the spec's ids (PM-, PV-, PB-, RM-, QM-, QV-).
//!
//! With `--quota-state-url`, every quota question goes to quota-state over gRPC
//! ([`quota_client`]): it holds the ElasticQuota tree and the usage from its own watches and
//! reserves admitted pods atomically, and this service then does not watch ElasticQuotas. Without it (`review --state`, `serve --state`), the same tree functions run in-process.

pub mod binding;
pub mod options;
pub mod pod_mutate;
pub mod pod_validate;
pub mod profile;
pub mod quota;
pub mod quota_client;
pub mod reservation;
pub mod types;
pub mod workload;

use std::sync::Arc;

use admission_kit::{App, FailurePolicy, Operation, SideEffects, Target};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use kube::CustomResourceExt;
use types::{ClusterColocationProfile, ElasticQuota, ElasticQuotaProfile, Reservation};

/// A CRD for a Koordinator kind whose Rust type models only what the rules read: `spec` and
/// `status` keep every field (`x-kubernetes-preserve-unknown-fields`), so installing it for
/// `cargo xtask up` never prunes what Koordinator's own CRD would keep.
pub fn open_crd<K: CustomResourceExt>() -> CustomResourceDefinition {
    let mut c = K::crd();
    let open = JSONSchemaProps {
        type_: Some("object".into()),
        x_kubernetes_preserve_unknown_fields: Some(true),
        ..JSONSchemaProps::default()
    };
    for v in &mut c.spec.versions {
        if let Some(props) = v
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
            .and_then(|s| s.properties.as_mut())
        {
            for key in ["spec", "status"] {
                if props.contains_key(key) {
                    props.insert(key.into(), open.clone());
                }
            }
        }
    }
    admission_kit::review::object::name_list_kind(&mut c);
    if c.spec.group.ends_with(".k8s.io") {
        // Groups under k8s.io are protected; scheduler-plugins' CRD carries the same marker.
        c.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(
                "api-approved.kubernetes.io".into(),
                "unapproved, experimental-only; please avoid using".into(),
            );
    }
    c
}

/// Koordinator's gates with the spec's fixture gate profile as defaults (§0.4).
pub const GATES: [(&str, bool); 21] = [
    ("PodMutatingWebhook", true),
    ("PodValidatingWebhook", true),
    ("ElasticMutatingWebhook", true),
    ("ElasticValidatingWebhook", true),
    ("ReservationMutatingWebhook", true),
    ("BindingAdmissionWebhook", false),
    ("MultiQuotaTree", true),
    ("EnableQuotaAdmission", true),
    ("EnableQuotaAdmissionOnUpdate", false),
    ("ValidatePodDeviceResource", true),
    ("EnablePodEnhancedValidator", true),
    ("ColocationProfileSkipMutatingResources", false),
    ("ColocationProfileSkipValidatingPriority", false),
    ("DisableExtendedResourceSpec", false),
    ("DisableDeviceResourceSpec", false),
    ("ElasticQuotaEnableUpdateResourceKey", false),
    ("ElasticQuotaGuaranteeUsage", false),
    ("DisableDefaultQuota", false),
    ("SupportParentQuotaSubmitPod", false),
    ("ElasticQuotaEvaluationTransformPod", false),
    ("ReplaceResourcesTransformer", false),
];

const QOS: [&str; 5] = ["LSE", "LSR", "LS", "BE", "SYSTEM"];
const CLASSES: [&str; 4] = ["koord-prod", "koord-mid", "koord-batch", "koord-free"];

/// The pod's Koordinator QoS label when it is one of the five names.
pub fn raw_qos(pod: &Pod) -> Option<&'static str> {
    let v = pod
        .metadata
        .labels
        .as_ref()?
        .get("koordinator.sh/qosClass")?;
    QOS.iter().find(|q| **q == v).copied()
}

/// The pod's Koordinator priority class: the label (even invalid) else the band of
/// `spec.priority`.
pub fn raw_priority_class(pod: &Pod) -> Option<&'static str> {
    if let Some(v) = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("koordinator.sh/priority-class"))
    {
        return CLASSES.iter().find(|c| **c == v).copied();
    }
    match pod.spec.as_ref()?.priority? {
        9000..=9999 => Some("koord-prod"),
        7000..=7999 => Some("koord-mid"),
        5000..=5999 => Some("koord-batch"),
        3000..=3999 => Some("koord-free"),
        _ => None,
    }
}

/// Kubernetes' QoS class of a pod.
fn kube_qos(pod: &Pod) -> &'static str {
    let Some(spec) = pod.spec.as_ref() else {
        return "BestEffort";
    };
    let all = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    let (mut any, mut guaranteed) = (false, true);
    for c in all {
        let r = c.resources.clone().unwrap_or_default();
        let (req, lim) = (r.requests.unwrap_or_default(), r.limits.unwrap_or_default());
        for k in ["cpu", "memory"] {
            let (q, l) = (
                req.get(k).map(admission_kit::compat::resources::Amount::of),
                lim.get(k).map(admission_kit::compat::resources::Amount::of),
            );
            if q.is_some_and(|a| !a.is_zero()) || l.is_some_and(|a| !a.is_zero()) {
                any = true;
            }
            match (q, l) {
                (_, None) => guaranteed = false,
                (Some(q), Some(l)) if q.nano != l.nano => guaranteed = false,
                _ => {}
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// The effective priority class (PM-1.7): raw, else derived from the QoS.
pub fn effective_priority_class(pod: &Pod) -> Option<String> {
    if let Some(c) = raw_priority_class(pod) {
        return Some(c.to_owned());
    }
    let qos = raw_qos(pod).unwrap_or(match kube_qos(pod) {
        "Guaranteed" => "LSR",
        "Burstable" => "LS",
        _ => "BE",
    });
    Some(
        if qos == "BE" {
            "koord-batch"
        } else {
            "koord-prod"
        }
        .to_owned(),
    )
}

/// The workload kinds judged whole (WQ, `docs/workload-quota.md`), a webhook each for CREATE
/// and UPDATE: path, group, version, resource, kind.
#[rustfmt::skip]
const WORKLOADS: [(&str, &str, &str, &str, &str); 12] = [
    ("/validate-workload-apps-v1-deployment", "apps", "v1", "deployments", "Deployment"),
    ("/validate-workload-apps-v1-replicaset", "apps", "v1", "replicasets", "ReplicaSet"),
    ("/validate-workload-apps-v1-statefulset", "apps", "v1", "statefulsets", "StatefulSet"),
    ("/validate-workload-batch-v1-job", "batch", "v1", "jobs", "Job"),
    ("/validate-workload-batch-v1-cronjob", "batch", "v1", "cronjobs", "CronJob"),
    ("/validate-workload-kubeflow-org-v1-pytorchjob", "kubeflow.org", "v1", "pytorchjobs", "PyTorchJob"),
    ("/validate-workload-kubeflow-org-v1-tfjob", "kubeflow.org", "v1", "tfjobs", "TFJob"),
    ("/validate-workload-kubeflow-org-v1-xgboostjob", "kubeflow.org", "v1", "xgboostjobs", "XGBoostJob"),
    ("/validate-workload-kubeflow-org-v1-paddlejob", "kubeflow.org", "v1", "paddlejobs", "PaddleJob"),
    ("/validate-workload-kubeflow-org-v1-jaxjob", "kubeflow.org", "v1", "jaxjobs", "JAXJob"),
    ("/validate-workload-kubeflow-org-v1-mpijob", "kubeflow.org", "v1", "mpijobs", "MPIJob"),
    ("/validate-workload-kubeflow-org-v2beta1-mpijob", "kubeflow.org", "v2beta1", "mpijobs", "MPIJob"),
];

/// The workload kinds whose scale subresource is judged (WQ-4): path, group, version, resource.
#[rustfmt::skip]
const SCALES: [(&str, &str, &str, &str); 6] = [
    ("/validate-workload-apps-v1-deployment-scale", "apps", "v1", "deployments"),
    ("/validate-workload-apps-v1-replicaset-scale", "apps", "v1", "replicasets"),
    ("/validate-workload-apps-v1-statefulset-scale", "apps", "v1", "statefulsets"),
    ("/validate-workload-kubeflow-org-v1-pytorchjob-scale", "kubeflow.org", "v1", "pytorchjobs"),
    ("/validate-workload-kubeflow-org-v1-paddlejob-scale", "kubeflow.org", "v1", "paddlejobs"),
    ("/validate-workload-kubeflow-org-v1-jaxjob-scale", "kubeflow.org", "v1", "jaxjobs"),
];

/// The `scale` subresource of a workload kind, for UPDATE (its object is an autoscaling/v1 Scale).
fn scales(group: &str, version: &str, resource: &str) -> Target {
    Target::resource(group, version, &format!("{resource}/scale"), "Scale")
        .operations(&[Operation::Update])
}

fn pods(ops: &'static [Operation]) -> Target {
    Target::resource("", "v1", "pods", "Pod").operations(ops)
}

/// What the handlers share: the options, quota-state's client, and what is derived once and
/// kept (the state's quota tree, the kinds of the workload kinds file). One per endpoint table:
/// nothing of it is process-wide.
pub struct Service {
    /// The options in force.
    pub options: Arc<options::Options>,
    /// quota-state, when `--quota-state-url` is set.
    pub quota: quota_client::QuotaClient,
    /// The cluster state's quotas and their tree, as last derived.
    pub quotas: quota::QuotaCache,
    /// The kinds of `--workload-kinds-file`, as last read.
    pub kinds: workload::KindsFile,
}

impl Service {
    /// The service under `options`; nothing is read or connected yet.
    pub fn new(options: options::Options) -> Self {
        let options = Arc::new(options);
        Self {
            quota: quota_client::QuotaClient::new(options.clone()),
            quotas: quota::QuotaCache::default(),
            kinds: workload::KindsFile::default(),
            options,
        }
    }
}

impl Default for Service {
    fn default() -> Self {
        Self::new(options::Options::default())
    }
}

/// Whether any rule reads the cluster's Pods under these options and gates: PB-6 reads the bound
/// pod when binding admission is on (its gate and an allowed user list), QV counts the pods of a
/// quota when quotas are evaluated in-process (no quota-state, which watches Pods itself). In the
/// deployed configuration neither does, and this service then neither watches nor caches a Pod.
pub fn rules_read_pods(o: &options::Options, settings: &admission_kit::Context) -> bool {
    !o.quota_state() || binding::admission_on(o, settings)
}

/// What those rules read of a cached Pod besides its namespace and name: PB the bypass labels
/// and annotations of its options, QV in-process the quota label. Nothing else of a Pod is kept
/// (673 bytes a Pod with no kept label, 1.3 KiB with one: `cargo xtask footprint`, README).
pub fn pod_keys(o: &options::Options) -> admission_kit::Keep {
    let owned = |v: &[String]| options::entries(v).map(str::to_owned).collect::<Vec<_>>();
    let mut labels = owned(&o.binding_admission_bypass_labels);
    if !o.quota_state() {
        labels.push(quota_protocol::tree::keys::NAME.to_owned());
    }
    admission_kit::Keep {
        labels,
        annotations: owned(&o.binding_admission_bypass_annotations),
    }
}

/// The service under these of its flags (`--name=value`), as `serve` builds it: for tools that
/// run it under options. A flag it does not declare is an error.
pub fn app_from_flags<'a>(flags: impl IntoIterator<Item = &'a str>) -> Result<App, String> {
    admission_kit::cli::build_with::<options::Options>(flags, app_with)
}

/// The service at its default options.
pub fn app() -> App {
    app_of(Arc::new(Service::default()), Vec::new())
}

/// The service under `options`; `Err` when they cannot be used (a workload kinds file that
/// cannot be read or parsed).
pub fn app_with(options: options::Options) -> Result<App, String> {
    let service = Arc::new(Service::new(options));
    let mapped = workload::mapped_endpoints(&service.options)?;
    Ok(app_of(service, mapped))
}

/// The service: upstream paths, failure policies and gates (§1), its handlers sharing `svc`;
/// `mapped`: the webhooks self-registration adds for the workload kinds file's kinds.
fn app_of(svc: Arc<Service>, mapped: Vec<admission_kit::review::app::EndpointInfo>) -> App {
    use FailurePolicy::{Fail, Ignore};
    use Operation::{Create, Delete, Update};
    let o = svc.options.clone();
    let (reads_pods, keys, binds) = (o.clone(), o.clone(), o.clone());
    App::new(
        "scheduling-webhook",
        "Koordinator admission for Pods, Pod bindings, Reservations and ElasticQuotas.",
    )
    .feature_gates(&GATES)
    .mutate(
        "/mutate-pod",
        pods(&[Create]),
        Fail,
        pod_mutate::PodMutator(svc.clone()),
    )
    .gate("PodMutatingWebhook")
    .validate(
        "/validate-pod",
        pods(&[Create, Update]),
        Fail,
        pod_validate::PodValidator(svc.clone()),
    )
    .gate("PodValidatingWebhook")
    // PV-4 reserves the pod's requests in quota-state, except on a dry run.
    .side_effects(SideEffects::NoneOnDryRun)
    .validate_each(
        WORKLOADS
            .iter()
            .map(|(path, group, version, resource, kind)| {
                (*path, Target::resource(group, version, resource, kind))
            }),
        Ignore,
        || workload::WorkloadValidator(svc.clone()),
    )
    // WQ-4 on `kubectl scale` and HPAs: the scale subresource of the kinds that have one.
    .validate_each(
        SCALES
            .iter()
            .map(|(path, group, version, resource)| (*path, scales(group, version, resource))),
        Ignore,
        || workload::WorkloadValidator(svc.clone()),
    )
    // The kinds of --workload-kinds-file (self-registration adds one webhook per kind).
    .validate(
        "/validate-workload",
        Target::unregistered(),
        Ignore,
        workload::WorkloadValidator(svc.clone()),
    )
    .validate(
        "/validate-pod-binding",
        Target::resource("", "v1", "pods/binding", "Binding").operations(&[Create]),
        Ignore,
        binding::BindingValidator(o.clone()),
    )
    .gate("PodValidatingWebhook")
    // With PB off it admits every Binding: not registered then, so a scheduled Pod costs no call.
    .registered_if(move |settings| binding::admission_on(&binds, settings))
    .mutate(
        "/mutate-reservation",
        Target::of::<types::Reservation>().operations(&[Create]),
        Fail,
        reservation::ReservationMutator,
    )
    .gate("ReservationMutatingWebhook")
    .mutate(
        "/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota",
        Target::of::<ElasticQuota>().operations(&[Create]),
        Fail,
        quota::QuotaDefaulter(svc.clone()),
    )
    .gate("ElasticMutatingWebhook")
    .validate(
        "/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota",
        Target::of::<ElasticQuota>().operations(&[Create, Update, Delete]),
        Fail,
        quota::QuotaValidator(svc.clone()),
    )
    .gate("ElasticValidatingWebhook")
    .registers_also(mapped)
    .watch::<ClusterColocationProfile>()
    .watch::<Namespace>()
    .watch::<PriorityClass>()
    // With quota-state, quota questions go to it; our own ElasticQuota cache then only tells,
    // while quota-state cannot be asked, which pods no quota rule concerns (admitted anyway).
    .watch::<ElasticQuota>()
    .watch::<ElasticQuotaProfile>()
    // PB reads the bound pod's labels and annotations, QV (in-process) the pods' quota labels:
    // metadata only, so every Pod of the cluster costs about a tenth of its full size; and only
    // when one of them will read it.
    .watch_metadata_if::<Pod>(move |settings| rules_read_pods(&reads_pods, settings))
    .keeping(move |_| pod_keys(&keys))
    .watch_one::<ConfigMap>(
        o.enhanced_validator_config_namespace.clone(),
        o.enhanced_validator_config_name.clone(),
    )
    .crd(open_crd::<ElasticQuota>)
    .crd(open_crd::<ElasticQuotaProfile>)
    .crd(open_crd::<ClusterColocationProfile>)
    .crd(open_crd::<Reservation>)
}

#[cfg(test)]
mod tests;
