//! Koordinator's Pod, Pod binding, Reservation and ElasticQuota admission
//! (`docs/spec/scheduling.md`). Rules carry the spec's ids (PM-, PV-, PB-, RM-, QM-, QV-).
//!
//! With `--quota-state-url`, every quota question goes to quota-state over gRPC
//! ([`quota_client`]): it holds the ElasticQuota tree and the usage from its own watches and
//! reserves admitted pods atomically, and this service then does not watch ElasticQuotas. Without it (`review --state`, `serve --state`), the same tree functions run in-process.

pub mod binding;
pub mod pod_mutate;
pub mod pod_validate;
pub mod profile;
pub mod quota;
pub mod quota_client;
pub mod reservation;
pub mod types;
pub mod workload;

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

/// Whether any rule reads the cluster's Pods under these options and gates: PB-6 reads the bound
/// pod when binding admission is on (its gate and an allowed user list), QV counts the pods of a
/// quota when quotas are evaluated in-process (no quota-state, which watches Pods itself). In the
/// deployed configuration neither does, and this service then neither watches nor caches a Pod.
pub fn rules_read_pods(settings: &admission_kit::Context) -> bool {
    !quota_client::enabled(settings) || binding::admission_on(settings)
}

/// What those rules read of a cached Pod besides its namespace and name: PB the bypass labels
/// and annotations of its options, QV in-process the quota label. Nothing else of a Pod is kept
/// (673 bytes a Pod with no kept label, 1.3 KiB with one: `cargo xtask footprint`, README).
pub fn pod_keys(settings: &admission_kit::Context) -> admission_kit::Keep {
    let mut labels = binding::bypass_labels(settings);
    if !quota_client::enabled(settings) {
        labels.push(quota_protocol::tree::keys::NAME.to_owned());
    }
    admission_kit::Keep {
        labels,
        annotations: binding::bypass_annotations(settings),
    }
}

/// The service: upstream paths, failure policies and gates (§1).
pub fn app() -> App {
    use FailurePolicy::{Fail, Ignore};
    use Operation::{Create, Delete, Update};
    App::new(
        "scheduling-webhook",
        "Koordinator admission for Pods, Pod bindings, Reservations and ElasticQuotas.",
    )
    .feature_gates(&GATES)
    .mutate("/mutate-pod", pods(&[Create]), Fail, pod_mutate::PodMutator)
    .gate("PodMutatingWebhook")
    .validate(
        "/validate-pod",
        pods(&[Create, Update]),
        Fail,
        pod_validate::PodValidator,
    )
    .gate("PodValidatingWebhook")
    // PV-4 reserves the pod's requests in quota-state, except on a dry run.
    .side_effects(SideEffects::NoneOnDryRun)
    .validate_each(WORKLOADS.iter().map(|(path, group, version, resource, kind)| {
        (*path, Target::resource(group, version, resource, kind))
    }), Ignore, || workload::WorkloadValidator)
    // WQ-4 on `kubectl scale` and HPAs: the scale subresource of the kinds that have one.
    .validate_each(SCALES.iter().map(|(path, group, version, resource)| {
        (*path, scales(group, version, resource))
    }), Ignore, || workload::WorkloadValidator)
    // The kinds of --workload-kinds-file (self-registration adds one webhook per kind).
    .validate(
        "/validate-workload",
        Target::unregistered(),
        Ignore,
        workload::WorkloadValidator,
    )
    .validate(
        "/validate-pod-binding",
        Target::resource("", "v1", "pods/binding", "Binding").operations(&[Create]),
        Ignore,
        binding::BindingValidator,
    )
    .gate("PodValidatingWebhook")
    // With PB off it admits every Binding: not registered then, so a scheduled Pod costs no call.
    .registered_if(binding::admission_on)
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
        quota::QuotaDefaulter,
    )
    .gate("ElasticMutatingWebhook")
    .validate(
        "/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota",
        Target::of::<ElasticQuota>().operations(&[Create, Update, Delete]),
        Fail,
        quota::QuotaValidator,
    )
    .gate("ElasticValidatingWebhook")
    .option(
        "quota-state-url",
        "quota-state's gRPC address, asked every quota question (PV-3.2, PV-4 check-and-reserve, PM-3, QM-3, QV): https://host:port with mutual TLS (--quota-state-client-secret, or the --quota-state-*-file options), http://host:port only against a quota-state run with --insecure-plaintext; empty: evaluate in-process from the cluster state.",
        "",
    )
    .option(
        "quota-state-client-secret",
        "Secret (namespace/name, or name in $POD_NAMESPACE) holding tls.crt, tls.key and ca.crt for mutual TLS with quota-state (quota-state's managed client Secret, or cert-manager's): read from the API and watched, so a renewal applies at once; instead of the --quota-state-*-file options.",
        "",
    )
    .option(
        "quota-state-ca-file",
        "PEM CA that quota-state's serving certificate must chain to (https URLs; reloaded when it changes).",
        "",
    )
    .option(
        "quota-state-cert-file",
        "PEM client certificate presented to quota-state (its names must include one quota-state allows, scheduling-webhook by default; reloaded when it changes).",
        "",
    )
    .option("quota-state-key-file", "PEM private key of --quota-state-cert-file.", "")
    .option(
        "quota-state-server-name",
        "Name quota-state's certificate must carry (default: the URL's host).",
        "",
    )
    .option(
        "quota-state-cluster",
        "In a fleet (one quota-state for several clusters, docs/fleet-quota.md): this cluster's name as the fleet knows it, sent with every admission and release; quota-state refuses the calls when the client certificate names another cluster (a copied Secret), rather than charge the wrong cluster. Empty: not sent.",
        "",
    )
    .option(
        "quota-state-calls-in-flight",
        "AdmitPods calls out to quota-state at once; the pods whose reviews arrive meanwhile go together in the next call. 1 suits a quota-state in the same cluster (fuller batches, less overhead); a fleet member far from its hub sets more, so that a review does not wait a round trip behind the previous batch (docs/fleet-quota.md#latency).",
        "1",
    )
    .option("quota-state-timeout-ms", "Deadline of each quota-state call, in milliseconds (well under timeoutSeconds).", "2000")
    .option(
        "quota-unavailable",
        "When quota-state cannot answer: deny (fail closed) or allow (admit with a warning).",
        "deny",
    )
    .option(
        "quota-label-scope",
        "PV-S1 (S-FIX-2, opt-in): `namespace` lets a pod's quota label name only a quota of its namespace or one whose namespaces annotation lists it, and the system, default and root quotas only from --quota-system-namespaces; `any` charges whatever quota the label names, as upstream (the default: upstream's own tests and documents keep quotas in a central namespace and label pods of others).",
        "any",
    )
    .option(
        "quota-system-namespaces",
        "PV-S1: comma list of the namespaces whose pods may name the system, default and root quotas.",
        "kube-system,koordinator-system",
    )
    .option(
        "workload-kinds-file",
        "WQ-1: a YAML or JSON file of further workload kinds (group, version, kind, resource, policy, and the JSON Pointers of each pod group's replicas and template; docs/workload-quota.md), read at start and whenever it changes (a mounted ConfigMap); a bad file refuses to start, a bad change keeps the kinds read before. Their reviews are sent to /validate-workload.",
        "",
    )
    .option(
        "workload-gang-kinds",
        "WQ-3: comma list of built-in workload kinds (Kind or group/Kind, `*` for all) refused, rather than admitted with a warning, when their peak is above what their quota has free now.",
        "",
    )
    .option(
        "workload-template-rules-deny-kinds",
        "WQ-6: comma list of workload kinds (Kind or group/Kind, `*` for all) refused, rather than admitted with a warning, when the pod rules would refuse the pods of one of their templates.",
        "",
    )
    .option(
        "enhanced-validator-config-namespace",
        "Namespace of the PV-6 ConfigMap.",
        "koordinator-system",
    )
    .option(
        "enhanced-validator-config-name",
        "Name of the PV-6 ConfigMap.",
        "pod-enhanced-validator-config",
    )
    .option(
        "binding-admission-user-name",
        "PB: comma list of username substrings allowed to bind (empty: off).",
        "",
    )
    .option(
        "binding-admission-namespaces",
        "PB: comma list of namespaces enforced (`*` = all).",
        "",
    )
    .option(
        "binding-admission-exclude-namespaces",
        "PB: namespaces never enforced.",
        "kube-system",
    )
    .option(
        "binding-admission-bypass-labels",
        "PB: pod label keys that bypass the check.",
        "koordinator.sh/binding-admission-bypass",
    )
    .option(
        "binding-admission-bypass-annotations",
        "PB: pod annotation keys that bypass the check.",
        "",
    )
    .option(
        "binding-admission-dry-run",
        "PB: log instead of deny (true/false).",
        "false",
    )
    .check_at_start(workload::check_mapping)
    .check_at_start(quota_client::check_options)
    .registers_also(workload::mapped_endpoints)
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
    .watch_metadata_if::<Pod>(rules_read_pods)
    .keeping(pod_keys)
    .watch_one::<ConfigMap>(
        "enhanced-validator-config-namespace",
        "enhanced-validator-config-name",
    )
    .crd(open_crd::<ElasticQuota>)
    .crd(open_crd::<ElasticQuotaProfile>)
    .crd(open_crd::<ClusterColocationProfile>)
    .crd(open_crd::<Reservation>)
}

#[cfg(test)]
mod tests;
