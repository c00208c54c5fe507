//! `/validate-pod` (spec §4, PV-0..PV-6): the first failing check denies with 400.

use admission_kit::review::field::{ErrorList, FieldError, Path};
use admission_kit::server::metrics::koord;
use admission_kit::{Context, Operation, Request, Status, Validator, Verdict};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};

use crate::options::{LabelScope, Options, entries};
use crate::quota::{
    admission_runs, keys, pod_namespace, pv_3_2_not_on_parent, pv_4_quota_admission,
};
use crate::quota_client::{self, PodAnswer};
use crate::{raw_priority_class, raw_qos};
use admission_kit::compat::resources::{Amount, PodRequest, amounts};
use admission_kit::review::field::aggregate;

fn label<'a>(p: &'a Pod, k: &str) -> &'a str {
    p.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(k))
        .map(String::as_str)
        .unwrap_or_default()
}

/// PV-1: the reserve-pod annotation is the scheduler's.
///
/// Refused: `{apiVersion: v1, kind: Pod, metadata: {name: p, annotations: {scheduling.koordinator.sh/reserve-pod: "true"}}, spec: {containers: [{name: c, image: busybox}]}}`
///
/// Admitted: `{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, image: busybox}]}}`
fn pv_1_reserve_pod(pod: &Pod) -> ErrorList {
    let mut errs = ErrorList::new();
    if pod
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key("scheduling.koordinator.sh/reserve-pod"))
    {
        errs.push(FieldError::forbidden(
            "PV-1",
            Path::new("annotations").child("scheduling.koordinator.sh/reserve-pod"),
            "cannot set in annotations",
        ));
    }
    errs
}

/// PV-2: QoS, priority class and resources agree.
///
/// Refused: `{apiVersion: v1, kind: Pod, metadata: {name: p, labels: {koordinator.sh/qosClass: BE, koordinator.sh/priority-class: koord-prod}}, spec: {containers: [{name: c, image: busybox}]}}`
///
/// Admitted: `{apiVersion: v1, kind: Pod, metadata: {name: p, labels: {koordinator.sh/qosClass: BE, koordinator.sh/priority-class: koord-batch}}, spec: {containers: [{name: c, image: busybox}]}}`
fn pv_2_colocation(req: &Request<Pod>, request: &PodRequest<'_>, ctx: &Context) -> ErrorList {
    let mut errs = ErrorList::new();
    let pod = &req.object;
    let (qos, pc) = (raw_qos(pod), raw_priority_class(pod));
    if req.operation == Operation::Update
        && let Some(old) = &req.old_object
    {
        if raw_qos(old) != qos {
            errs.push(FieldError::invalid(
                "PV-2",
                Path::new("labels").child("koordinator.sh/qosClass"),
                qos.unwrap_or(""),
                "field is immutable",
            ));
        }
        if raw_priority_class(old) != pc {
            errs.push(FieldError::invalid(
                "PV-2",
                Path::new("spec").child("priority"),
                pc.unwrap_or(""),
                "field is immutable",
            ));
        }
        if !ctx
            .gates()
            .enabled("ColocationProfileSkipValidatingPriority")
            && label(old, "koordinator.sh/priority") != label(pod, "koordinator.sh/priority")
        {
            errs.push(FieldError::invalid(
                "PV-2",
                Path::new("labels").child("koordinator.sh/priority"),
                label(pod, "koordinator.sh/priority"),
                "field is immutable",
            ));
        }
    }
    let request = request.lenient();
    let nonzero = |k: &str| request.get(k).is_some_and(|a| !a.is_zero());
    if (nonzero("kubernetes.io/batch-cpu") || nonzero("kubernetes.io/batch-memory"))
        && qos != Some("BE")
    {
        errs.push(FieldError::required(
            "PV-2",
            Path::new("labels").child("koordinator.sh/qosClass"),
            "must specify koordinator QoS BE with koordinator colocation resources",
        ));
    }
    let combo = |q: &str| {
        FieldError::forbidden(
            "PV-2",
            Path::new("Pod"),
            format!(
                "koordinator.sh/qosClass={q} and priorityClass={} cannot be used in combination",
                pc.unwrap_or("")
            ),
        )
    };
    if qos == Some("BE") && matches!(pc, None | Some("koord-prod")) {
        errs.push(combo("BE"));
    }
    if qos == Some("LSR") && matches!(pc, None | Some("koord-mid" | "koord-batch" | "koord-free")) {
        errs.push(combo("LSR"));
    }
    if matches!(qos, Some("LSR" | "LSE")) {
        let path = Path::new("pod.spec.containers[*].resources.requests");
        match request.get("cpu").filter(|a| !a.is_zero()) {
            None => errs.push(FieldError::required(
                "PV-2",
                path,
                "LSR Pod must declare the requested CPUs",
            )),
            Some(a) if !a.is_integer() => errs.push(FieldError::invalid(
                "PV-2",
                path,
                a.canonical(),
                "the requested CPUs of LSR Pod must be integer",
            )),
            _ => {}
        }
    }
    errs
}

/// PV-5: GPU resources are consistent per container.
///
/// Refused: `{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, image: busybox, resources: {requests: {koordinator.sh/gpu.shared: "0"}, limits: {koordinator.sh/gpu.shared: "0"}}}]}}`
///
/// Admitted: `{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, image: busybox, resources: {requests: {koordinator.sh/gpu.shared: "1", koordinator.sh/gpu-memory-ratio: "50"}, limits: {koordinator.sh/gpu.shared: "1", koordinator.sh/gpu-memory-ratio: "50"}}}]}}`
fn pv_5_devices(pod: &Pod) -> ErrorList {
    let mut errs = ErrorList::new();
    let path = || Path::new("pod.spec.containers[*].resources.requests");
    for c in pod.spec.iter().flat_map(|s| s.containers.iter()) {
        let req = amounts(c.resources.as_ref().and_then(|r| r.requests.as_ref()));
        let v = |k: &str| req.get(k).map(Amount::value);
        // Upstream decides on the rounded-up integer values but prints the quantity as
        // written canonically (`500m`, not `1`); an absent one prints as Go's zero, `0`.
        let text = |k: &str| req.get(k).map_or_else(|| "0".to_owned(), Amount::canonical);
        let (gpu, shared) = (v("koordinator.sh/gpu"), v("koordinator.sh/gpu.shared"));
        if gpu.is_some() && shared.is_some() {
            errs.push(FieldError::forbidden(
                "PV-5",
                path(),
                "Forbidden declare GPU and GPU share at same time",
            ));
            continue;
        }
        if let Some(g) = gpu {
            if g == 0 {
                errs.push(FieldError::invalid(
                    "PV-5",
                    path(),
                    "0",
                    "the requested GPU must be greater than zero",
                ));
            } else if g > 100 && g % 100 != 0 {
                errs.push(FieldError::invalid(
                    "PV-5",
                    path(),
                    text("koordinator.sh/gpu"),
                    "the requested GPU must be percentage of 100",
                ));
            }
        }
        if let Some(s) = shared {
            if s == 0 {
                errs.push(FieldError::invalid(
                    "PV-5",
                    path(),
                    "0",
                    "the requested GPU must be greater than zero",
                ));
            }
            if v("huawei.com/npu-core").unwrap_or(0) != 0 {
                continue;
            }
            let (mem, ratio, core) = (
                v("koordinator.sh/gpu-memory").unwrap_or(0),
                v("koordinator.sh/gpu-memory-ratio").unwrap_or(0),
                v("koordinator.sh/gpu-core").unwrap_or(0),
            );
            if mem == 0 && ratio == 0 {
                errs.push(FieldError::forbidden(
                    "PV-5",
                    path(),
                    "GPU memory and GPU memory ratio all is zero",
                ));
            } else if mem != 0 && ratio != 0 {
                errs.push(FieldError::forbidden(
                    "PV-5",
                    path(),
                    "declare GPU memory and GPU memory ratio at same time",
                ));
            }
            if s != 0 {
                if core % s != 0 {
                    errs.push(FieldError::invalid(
                        "PV-5",
                        path(),
                        text("koordinator.sh/gpu-core"),
                        "the requested gpuCore must multiple of shared",
                    ));
                }
                if ratio % s != 0 {
                    errs.push(FieldError::invalid(
                        "PV-5",
                        path(),
                        text("koordinator.sh/gpu-memory-ratio"),
                        "the requested gpuMemoryRatio must multiple of shared",
                    ));
                }
            }
        }
    }
    errs
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct EnhancedRule {
    #[serde(default)]
    required_labels: Vec<String>,
    #[serde(default)]
    namespace_whitelist: Vec<String>,
}

/// PV-6: required labels from the enhanced-validator ConfigMap.
///
/// State: `{apiVersion: v1, kind: ConfigMap, metadata: {name: pod-enhanced-validator-config, namespace: koordinator-system}, data: {enable: "true", rules: '[{"requiredLabels": ["team"]}]'}}`
///
/// Refused: `{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, image: busybox}]}}`
///
/// Admitted: `{apiVersion: v1, kind: Pod, metadata: {name: q, labels: {team: a}}, spec: {containers: [{name: c, image: busybox}]}}`
fn pv_6_enhanced(o: &Options, pod: &Pod, ns: &str, ctx: &Context) -> Result<(), String> {
    if label(pod, "pod.koordinator.sh/skip-enhanced-validation") == "true" {
        return Ok(());
    }
    let Some(cm) = ctx
        .get::<ConfigMap>(
            Some(&o.enhanced_validator_config_namespace),
            &o.enhanced_validator_config_name,
        )
        .ok()
        .flatten()
    else {
        return Ok(());
    };
    let data = &cm.data["data"];
    let enabled = data["enable"]
        .as_str()
        .is_some_and(|s| s.trim().eq_ignore_ascii_case("true"));
    if !enabled {
        return Ok(());
    }
    let Ok(rules) =
        serde_json::from_str::<Vec<EnhancedRule>>(data["rules"].as_str().unwrap_or_default())
    else {
        return Ok(());
    };
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    for r in rules {
        if r.namespace_whitelist.iter().any(|w| w == ns) {
            continue;
        }
        let missing: Vec<&String> = r
            .required_labels
            .iter()
            .filter(|k| !labels.contains_key(*k))
            .collect();
        match missing.as_slice() {
            [] => {}
            [one] => return Err(format!("required label '{one}' is missing")),
            many => {
                return Err(format!(
                    "required labels are missing: [{}]",
                    many.iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(" ")
                ));
            }
        }
    }
    Ok(())
}

/// `/validate-pod`.
pub struct PodValidator(pub std::sync::Arc<crate::Service>);

fn check(rule: &'static str, errs: ErrorList) -> Result<(), (&'static str, String)> {
    if errs.is_empty() {
        Ok(())
    } else {
        Err((rule, aggregate(&errs)))
    }
}

/// PV-S1: with `--quota-label-scope=namespace` a pod charges only a quota its namespace may use.
///
/// Options: `--quota-label-scope=namespace`
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-b, namespace: team-b}, spec: {max: {cpu: "10"}, min: {cpu: "1"}}}`
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: team-a}, spec: {max: {cpu: "10"}, min: {cpu: "1"}}}`
///
/// Refused: `{apiVersion: v1, kind: Pod, metadata: {name: p, namespace: team-a, labels: {quota.scheduling.koordinator.sh/name: team-b}}, spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}, limits: {cpu: "1"}}}]}}`
///
/// Admitted: `{apiVersion: v1, kind: Pod, metadata: {name: q, namespace: team-a, labels: {quota.scheduling.koordinator.sh/name: team-a}}, spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}, limits: {cpu: "1"}}}]}}`
///
/// PV-S1 (ours, FIX row S-FIX-2): with `--quota-label-scope=namespace` (opt-in) a pod's
/// quota label may name only a quota of the pod's own namespace or one whose `namespaces`
/// annotation lists it, and the system, default and root quotas only from the namespaces of
/// `--quota-system-namespaces`. Upstream charges whichever quota the label names, so a tenant
/// could exhaust another tenant's quota, or escape its own through the unchecked system quota.
/// A label naming no quota is left to PV-4 (`elastic quota … not found`). Read from this
/// service's own ElasticQuota watch cache, before anything is reserved.
fn pv_s1_quota_label_scope(
    svc: &crate::Service,
    pod: &Pod,
    ns: &str,
    ctx: &Context,
) -> Result<(), String> {
    let named = label(pod, keys::NAME);
    if named.is_empty() || svc.options.quota_label_scope != LabelScope::Namespace {
        return Ok(());
    }
    let field = format!("metadata.labels[{}]", keys::NAME);
    if [keys::SYSTEM, keys::DEFAULT, keys::ROOT].contains(&named) {
        let system = &svc.options.quota_system_namespaces;
        if entries(system).any(|n| n == ns) {
            return Ok(());
        }
        let system = entries(system).collect::<Vec<_>>().join(",");
        return Err(format!(
            "{field}: Forbidden: quota {named} may be named only by pods of the namespaces {system} (--quota-system-namespaces)"
        ));
    }
    let Ok(quotas) = crate::quota::state_quotas(&svc.quotas, ctx) else {
        return Ok(());
    };
    let Some(q) = quotas
        .objects
        .iter()
        .find(|o| o.metadata.name.as_deref() == Some(named))
    else {
        return Ok(());
    };
    let home = q.metadata.namespace.as_deref().unwrap_or_default();
    if home == ns
        || quota_protocol::tree::bound_namespaces(q)
            .iter()
            .any(|n| n == ns)
    {
        return Ok(());
    }
    Err(format!(
        "{field}: Forbidden: quota {named} lives in namespace {home} and does not list namespace {ns} in its {} annotation",
        keys::NAMESPACES
    ))
}

/// Every check in upstream's order. It waits only for quota-state (PV-3.2 and PV-4), and only
/// when `--quota-state-url` is set.
///
/// PV-3: on UPDATE the Pod's `preemptible` quota label may not change; and a Pod may not be
/// charged to a parent quota unless the `SupportParentQuotaSubmitPod` gate allows it.
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: parent-a, namespace: default, labels: {quota.scheduling.koordinator.sh/is-parent: "true"}}, spec: {max: {cpu: "100"}, min: {cpu: "1"}}}`
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: default, labels: {quota.scheduling.koordinator.sh/parent: parent-a}}, spec: {max: {cpu: "2"}, min: {cpu: "1"}}}`
///
/// State: `{apiVersion: v1, kind: Pod, metadata: {name: old, labels: {quota.scheduling.koordinator.sh/name: team-a, quota.scheduling.koordinator.sh/preemptible: "true"}}, spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}, limits: {cpu: "1"}}}]}}`
///
/// Refused: `{apiVersion: v1, kind: Pod, metadata: {name: p, labels: {quota.scheduling.koordinator.sh/name: parent-a}}, spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}, limits: {cpu: "1"}}}]}}`
///
/// Refused on update: `{apiVersion: v1, kind: Pod, metadata: {name: old, labels: {quota.scheduling.koordinator.sh/name: team-a, quota.scheduling.koordinator.sh/preemptible: "false"}}, spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}, limits: {cpu: "1"}}}]}}`
///
/// Admitted: `{apiVersion: v1, kind: Pod, metadata: {name: q, labels: {quota.scheduling.koordinator.sh/name: team-a}}, spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}, limits: {cpu: "1"}}}]}}`
///
/// PV-4: a Pod charged to a quota fits it and each of its ancestors (requests against `max`,
/// with what is already used and reserved); a quota it names that does not exist refuses it.
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: parent-a, namespace: default, labels: {quota.scheduling.koordinator.sh/is-parent: "true"}}, spec: {max: {cpu: "100"}, min: {cpu: "1"}}}`
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: default, labels: {quota.scheduling.koordinator.sh/parent: parent-a}}, spec: {max: {cpu: "2"}, min: {cpu: "1"}}}`
///
/// Refused: `{apiVersion: v1, kind: Pod, metadata: {name: p, labels: {quota.scheduling.koordinator.sh/name: team-a}}, spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "3"}, limits: {cpu: "3"}}}]}}`
///
/// Refused: `{apiVersion: v1, kind: Pod, metadata: {name: q, labels: {quota.scheduling.koordinator.sh/name: nobody}}, spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}, limits: {cpu: "1"}}}]}}`
///
/// Refused: `{apiVersion: v1, kind: Pod, metadata: {name: big, labels: {quota.scheduling.koordinator.sh/name: team-a}}, spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1e40"}, limits: {cpu: "1e40"}}}]}}`
///
/// Admitted: `{apiVersion: v1, kind: Pod, metadata: {name: r, labels: {quota.scheduling.koordinator.sh/name: team-a}}, spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}, limits: {cpu: "1"}}}]}}`
async fn validate(
    svc: &crate::Service,
    req: &Request<Pod>,
    ctx: &Context,
    warnings: &mut Vec<String>,
) -> Result<(), (&'static str, String)> {
    let pod = &req.object;
    let ns = pod_namespace(pod, req.namespace.as_deref());
    let request = PodRequest::new(pod.spec.as_ref());
    // Each check timed under upstream's plugin name (`koord_manager_webhook_*`).
    let op = req.operation.as_str();
    let plugin = |name, f: &mut dyn FnMut() -> Result<(), (&'static str, String)>| {
        koord::timed("validate", "pod", op, name, f)
    };
    plugin("ClusterReservation", &mut || {
        check("PV-1", pv_1_reserve_pod(pod))
    })?;
    plugin("ClusterColocationProfile", &mut || {
        check("PV-2", pv_2_colocation(req, &request, ctx))
    })?;
    plugin("QuotaMetaChecker", &mut || {
        if req.operation == Operation::Update
            && let Some(old) = &req.old_object
            && label(old, keys::PREEMPTIBLE) != label(pod, keys::PREEMPTIBLE)
        {
            return Err(("PV-3", "Preemptible label is forbidden modify now.".into()));
        }
        Ok(())
    })?;
    pv_s1_quota_label_scope(svc, pod, &ns, ctx).map_err(|e| ("PV-S1", e))?;
    // PV-3.2 and PV-4 are one quota-state call: timed as EvaluateQuota.
    let reserved = koord::timed_async(
        "validate",
        "pod",
        op,
        "EvaluateQuota",
        pv_3_2_and_4(svc, req, &request, &ns, ctx, warnings),
    )
    .await?;
    let rest = (|| {
        if ctx.gates().enabled("ValidatePodDeviceResource") {
            plugin("DeviceResource", &mut || check("PV-5", pv_5_devices(pod)))?;
        }
        if ctx.gates().enabled("EnablePodEnhancedValidator") {
            plugin("EnhancedValidation", &mut || {
                pv_6_enhanced(&svc.options, pod, &ns, ctx).map_err(|e| ("PV-6", e))
            })?;
        }
        Ok(())
    })();
    if rest.is_err() && reserved {
        // A later rule refused the pod: give its reservation back now rather than at expiry.
        quota_client::release(&svc.quota, req, &ns).await;
    }
    rest
}

/// The rules of [`validate`] that read the pod alone (PV-1, PV-2, PV-S1, PV-5, PV-6): what a
/// workload's pod template is held to (WQ-6) before any of its Pods exists. Quota (PV-3.2,
/// PV-4) is the workload check's own; the mutators have not run on a template, so a rule they
/// would satisfy may be reported here.
pub fn template_rules(
    svc: &crate::Service,
    pod: &Pod,
    ns: &str,
    ctx: &Context,
) -> Result<(), (&'static str, String)> {
    // The template's Pods get their class's priority when created, before any webhook sees
    // them; PV-2 reads it, so the template is judged with it too.
    let created;
    let pod = match priority_at_creation(pod, ctx) {
        Some(p) => {
            let mut c = pod.clone();
            if let Some(spec) = c.spec.as_mut() {
                spec.priority = Some(p);
            }
            created = c;
            &created
        }
        None => pod,
    };
    check("PV-1", pv_1_reserve_pod(pod))?;
    let req = Request {
        uid: String::new(),
        kind: Default::default(),
        resource: Default::default(),
        sub_resource: None,
        name: pod.metadata.name.clone().unwrap_or_default(),
        namespace: Some(ns.to_owned()),
        operation: Operation::Create,
        user_info: Default::default(),
        dry_run: true,
        object: pod.clone(),
        old_object: None,
    };
    let request = PodRequest::new(pod.spec.as_ref());
    check("PV-2", pv_2_colocation(&req, &request, ctx))?;
    pv_s1_quota_label_scope(svc, pod, ns, ctx).map_err(|e| ("PV-S1", e))?;
    if ctx.gates().enabled("ValidatePodDeviceResource") {
        check("PV-5", pv_5_devices(pod))?;
    }
    if ctx.gates().enabled("EnablePodEnhancedValidator") {
        pv_6_enhanced(&svc.options, pod, ns, ctx).map_err(|e| ("PV-6", e))?;
    }
    Ok(())
}

/// The value of a PriorityClass every cluster has built in (the API server creates the two
/// system classes with fixed values); `None` for any other name.
pub fn built_in_priority(class: &str) -> Option<i32> {
    match class {
        "system-node-critical" => Some(2_000_001_000),
        "system-cluster-critical" => Some(2_000_000_000),
        _ => None,
    }
}

/// The `spec.priority` the API server's Priority admission plugin gives a Pod of this template
/// when it is created: its PriorityClass's value (the two system classes are built in). `None`
/// when the template sets a priority itself, names no class, or names one the cluster lacks
/// (the API server refuses such Pods; the template is then judged without a priority).
fn priority_at_creation(pod: &Pod, ctx: &Context) -> Option<i32> {
    let spec = pod.spec.as_ref()?;
    if spec.priority.is_some() {
        return None;
    }
    let class = spec
        .priority_class_name
        .as_deref()
        .filter(|c| !c.is_empty())?;
    if let Some(value) = built_in_priority(class) {
        return Some(value);
    }
    let found = ctx
        .get::<k8s_openapi::api::scheduling::v1::PriorityClass>(None, class)
        .ok()??;
    found.data["value"]
        .as_i64()
        .and_then(|v| i32::try_from(v).ok())
}

/// PV-3.2 and PV-4: through quota-state in one call when `--quota-state-url` is set (fail closed
/// unless `--quota-unavailable=allow`), else in-process. `Ok(true)` when quota-state now holds a
/// reservation for the pod.
async fn pv_3_2_and_4(
    svc: &crate::Service,
    req: &Request<Pod>,
    request: &PodRequest<'_>,
    ns: &str,
    ctx: &Context,
    warnings: &mut Vec<String>,
) -> Result<bool, (&'static str, String)> {
    let check_parent = !ctx.gates().enabled("SupportParentQuotaSubmitPod");
    let check_admission = admission_runs(req, ctx);
    if !svc.options.quota_state() {
        pv_3_2_not_on_parent(svc, &req.object, ns, ctx).map_err(|e| ("PV-3", e))?;
        pv_4_quota_admission(svc, req, request, ns, ctx).map_err(|e| ("PV-4", e))?;
        return Ok(false);
    }
    if !check_parent && !check_admission {
        return Ok(false);
    }
    let check = quota_client::check_pod(
        &svc.quota,
        req,
        request,
        ns,
        ctx,
        check_parent,
        check_admission,
    );
    match check.await {
        Ok(PodAnswer::Allowed { reserved }) => Ok(reserved),
        Ok(PodAnswer::Denied(rule, text)) => Err((rule, text)),
        Err(cause) if crate::quota::concerns_no_quota(svc, &req.object, ns, ctx) => {
            quota_client::admitted_without(&svc.quota, &cause);
            Ok(false)
        }
        Err(cause) => {
            // Not a rule's verdict: counted under its own id, not PV-3 or PV-4.
            warnings.push(
                quota_client::unavailable(&svc.quota, "the pod's quota", &cause)
                    .map_err(|m| (quota_client::UNAVAILABLE_RULE, m))?,
            );
            Ok(false)
        }
    }
}

impl Validator for PodValidator {
    type Object = Pod;

    /// No rule reads a Pod's managed fields, the larger part of its decode.
    fn reads_managed_fields(&self) -> bool {
        false
    }

    /// A quantity Go's decoder refuses fails the decode here too.
    fn check_decoded(&self, pod: &Pod) -> Result<(), String> {
        admission_kit::compat::resources::check_pod(pod)
    }

    fn validate(&self, req: &Request<Pod>, ctx: &Context) -> Verdict {
        quota_client::blocking_verdict(self.validate_async(req, ctx))
    }

    /// With quota-state the server awaits its answer on the review's task.
    fn waits(&self, _: &Context) -> bool {
        self.0.options.quota_state()
    }

    async fn validate_async(&self, req: &Request<Pod>, ctx: &Context) -> Verdict {
        if req.resource.resource != "pods"
            || req.sub_resource.as_deref().is_some_and(|s| !s.is_empty())
            || !matches!(req.operation, Operation::Create | Operation::Update)
        {
            return Verdict::default();
        }
        let mut warnings = Vec::new();
        let mut v = match validate(&self.0, req, ctx, &mut warnings).await {
            Ok(()) => Verdict::default(),
            Err((rule, text)) => Verdict::errored(rule, 400, text),
        };
        v.warnings = warnings;
        v
    }

    fn allowed_status(&self) -> Option<Status> {
        Some(Status::allowed())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use admission_kit::cluster::state::StaticState;
    use serde_json::json;

    use super::*;

    fn ctx() -> Context {
        let mut s = StaticState::default();
        for (name, ns, bound) in [
            ("team-a", "team-a", None),
            ("shared", "quotas", Some(r#"["team-a"]"#)),
            ("team-b", "team-b", None),
        ] {
            let mut q = json!({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
                "kind": "ElasticQuota", "metadata": {"name": name, "namespace": ns},
                "spec": {"max": {"cpu": "10"}}});
            if let Some(b) = bound {
                q["metadata"]["annotations"] = json!({ (keys::NAMESPACES): b });
            }
            s.add_value(q).unwrap();
        }
        Context::new(Arc::new(s)).with_gates(Arc::new(crate::app().gates.clone()))
    }

    fn service(scope: &str) -> crate::Service {
        crate::Service::new(
            Options::parse([format!("--quota-label-scope={scope}").as_str()]).unwrap(),
        )
    }

    fn labelled(quota: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p",
            "labels": {(keys::NAME): quota}}}))
        .unwrap()
    }

    #[test]
    fn pv_s1_a_pod_names_only_the_quotas_of_its_namespace() {
        let (c, svc) = (ctx(), service("namespace"));
        for ok in ["team-a", "shared", "no-such-quota"] {
            assert_eq!(
                pv_s1_quota_label_scope(&svc, &labelled(ok), "team-a", &c),
                Ok(()),
                "{ok}"
            );
        }
        assert_eq!(
            pv_s1_quota_label_scope(&svc, &labelled("team-b"), "team-a", &c),
            Err(
                "metadata.labels[quota.scheduling.koordinator.sh/name]: Forbidden: quota team-b \
                 lives in namespace team-b and does not list namespace team-a in its \
                 quota.scheduling.koordinator.sh/namespaces annotation"
                    .into()
            )
        );
        let system = labelled(keys::SYSTEM);
        assert!(
            pv_s1_quota_label_scope(&svc, &system, "team-a", &c)
                .unwrap_err()
                .contains(
                    "may be named only by pods of the namespaces kube-system,koordinator-system"
                )
        );
        assert_eq!(
            pv_s1_quota_label_scope(&svc, &system, "kube-system", &c),
            Ok(())
        );
        assert_eq!(
            pv_s1_quota_label_scope(&svc, &labelled(""), "team-a", &c),
            Ok(()),
            "no label: QN decides"
        );
    }

    #[test]
    fn pv_s1_is_off_by_default_as_upstream() {
        let (c, svc) = (ctx(), service("any"));
        assert_eq!(
            pv_s1_quota_label_scope(&svc, &labelled("team-b"), "team-a", &c),
            Ok(())
        );
        assert_eq!(
            pv_s1_quota_label_scope(&svc, &labelled(keys::SYSTEM), "team-a", &c),
            Ok(())
        );
        assert_eq!(Options::default().quota_label_scope, LabelScope::Any);
    }

    /// PV-5 decides on the rounded-up values but prints each quantity as Go's `String()` does
    /// (found by `cargo xtask differential`: `500m` was printed `1`).
    #[test]
    fn pv_5_prints_quantities_as_written_canonically() {
        let pod = |ratio: &str| -> Pod {
            serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": {"containers": [{
                "name": "c", "image": "i", "resources": {"requests": {
                    "koordinator.sh/gpu.shared": "2", "koordinator.sh/gpu-core": "2500m",
                    "koordinator.sh/gpu-memory-ratio": ratio}}}]}}))
            .unwrap()
        };
        let text = |errs: ErrorList| {
            errs.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        };
        let errs = text(pv_5_devices(&pod("500m")));
        assert!(
            errs.contains(r#"Invalid value: "500m": the requested gpuMemoryRatio"#),
            "{errs}"
        );
        assert!(
            errs.contains(r#"Invalid value: "2500m": the requested gpuCore"#),
            "{errs}"
        );
        let four = text(pv_5_devices(&pod("4")));
        assert!(
            four.contains("gpuCore") && !four.contains("gpuMemoryRatio"),
            "{four}"
        );
    }
}
