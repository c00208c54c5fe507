//! Workloads judged whole against their quota when they are submitted (`docs/workload-quota.md`,
//! rules WQ-1 … WQ-7): a Deployment, Job or PyTorchJob whose pods can never all fit their
//! ElasticQuota is refused at `kubectl apply`, with the arithmetic, instead of leaving some pods
//! admitted and the rest refused for ever.
//!
//! Registered with failure policy Ignore: a quota-state outage never blocks a workload (PV-4
//! still judges each pod).

pub mod kinds;
pub mod rollout;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use admission_kit::compat::resources::{
    Amount, Amounts, check_pod_spec, list_text, try_pod_request,
};
use admission_kit::{Context, Operation, Request, Status, Validator, Verdict};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use quota_protocol::proto::{CheckWorkloadRequest, WorkloadFit};
use quota_protocol::wire::{amount_of_wire, wire_amount};
use quota_protocol::workload::{Fit, WorkloadCheck, WorkloadOutcome};
use serde_json::Value;

use crate::quota::StateWorkloadQuotas;
use crate::quota_client;
use kinds::{Kind, Policy};

/// `/validate-workload-*`: one validator for every workload kind; the kind of the review picks
/// its description (built in, or from `--workload-kinds-file`).
pub struct WorkloadValidator(pub Arc<crate::Service>);

/// The pods of one template: its place, name, count and the request of one pod.
#[derive(Debug, Clone)]
struct Template {
    path: String,
    role: String,
    replicas: i64,
    request: Amounts,
    pod: Pod,
}

/// A workload's templates grouped by the quota label of their pods, with the peak of each.
type ByLabel = BTreeMap<String, (Amounts, Vec<usize>)>;

/// The kinds of the file as last read, and its modification time then.
type Loaded = (Option<SystemTime>, Arc<Vec<Kind>>);

/// The kinds of `--workload-kinds-file` as last read, and what the file was when read (its
/// modification time): read again when it changes.
#[derive(Default)]
pub struct KindsFile(Mutex<Option<Loaded>>);

/// The kinds of `--workload-kinds-file`, read at first use and again whenever the file changes
/// (a mounted ConfigMap is replaced in place). A file that cannot be read or is refused keeps
/// the kinds read before, logged at ERROR (a bad file at start stops the service first, see
/// [`mapped_endpoints`]).
pub fn mapped(svc: &crate::Service) -> Arc<Vec<Kind>> {
    let Some(path) = &svc.options.workload_kinds_file else {
        return Arc::default();
    };
    let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok();
    let mut g = svc.kinds.0.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((m, kinds)) = g.as_ref()
        && *m == modified
    {
        return kinds.clone();
    }
    let kept = g.as_ref().map(|(_, k)| k.clone());
    let kinds = match kinds::read(path) {
        Ok(k) => {
            tracing::info!(file = %path.display(), kinds = k.len(), "workload kinds read");
            Arc::new(k)
        }
        Err(e) => {
            tracing::error!(
                error = %e,
                "workload kinds file refused; the kinds read before are kept",
            );
            kept.unwrap_or_default()
        }
    };
    *g = Some((modified, kinds.clone()));
    kinds
}

/// Self-registration of the file's kinds: one webhook each on `/validate-workload`, as the
/// built-in kinds have (CREATE and UPDATE, Ignore). Read at start, where a file that cannot be
/// read or parsed stops the service with the reason: a kind added later is judged once the file
/// changes but registered at the next start.
pub fn mapped_endpoints(
    options: &crate::options::Options,
) -> Result<Vec<admission_kit::review::app::EndpointInfo>, String> {
    let endpoint = |k: &Kind, sub: &str| admission_kit::review::app::EndpointInfo {
        path: "/validate-workload".into(),
        kind: "Validating".into(),
        failure_policy: "Ignore".into(),
        name: Some(format!(
            "validate-workload-{}-{}-{}{}",
            k.group.replace('.', "-"),
            k.version,
            k.resource,
            if sub.is_empty() { "" } else { "-scale" }
        )),
        group: k.group.clone(),
        version: k.version.clone(),
        resource: format!("{}{sub}", k.resource),
        operations: if sub.is_empty() {
            vec!["CREATE".into(), "UPDATE".into()]
        } else {
            vec!["UPDATE".into()]
        },
        object_selector: None,
        side_effects: "None".into(),
    };
    let Some(path) = &options.workload_kinds_file else {
        return Ok(Vec::new());
    };
    let kinds = kinds::read(path).map_err(|e| e.to_string())?;
    tracing::info!(kinds = kinds.len(), "workload kinds file accepted");
    let mut out = Vec::new();
    for k in kinds {
        out.push(endpoint(&k, ""));
        if k.scale.is_some() {
            out.push(endpoint(&k, "/scale"));
        }
    }
    Ok(out)
}

/// The description of the review's kind: by its kind, or for a `scale` review (whose object
/// is an `autoscaling/v1` Scale) by the resource it scales.
fn find_kind(req: &Request<Value>, svc: &crate::Service) -> Option<Kind> {
    let (k, r) = (&req.kind, &req.resource);
    let matches = |d: &Kind| {
        if is_scale(req) {
            d.scale.is_some()
                && d.group == r.group
                && d.version == r.version
                && d.resource == r.resource
        } else {
            d.group == k.group && d.version == k.version && d.kind == k.kind
        }
    };
    BUILTIN
        .iter()
        .find(|d| matches(d))
        .cloned()
        .or_else(|| mapped(svc).iter().find(|d| matches(d)).cloned())
}

/// The built-in kinds, described once.
static BUILTIN: std::sync::LazyLock<Vec<Kind>> = std::sync::LazyLock::new(kinds::builtin);

fn is_scale(req: &Request<Value>) -> bool {
    req.sub_resource.as_deref() == Some("scale")
}

/// `spec.replicas` of a Scale.
fn scale_replicas(scale: Option<&Value>) -> i64 {
    scale
        .and_then(|s| s.pointer("/spec/replicas"))
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// WQ-4 for a `scale` review: the workload as it is, read from the API server, at the new and
/// the old count. `Ok(None)`: not a scale-up, or not of that workload (its uid), nothing to
/// judge.
fn scaled_objects(
    req: &Request<Value>,
    ctx: &Context,
    kind: &Kind,
    ns: &str,
) -> Result<Option<(Value, Value)>, String> {
    let (new, old) = (
        scale_replicas(Some(&req.object)),
        scale_replicas(req.old_object.as_ref()),
    );
    let Some(pointer) = kind.scale.as_deref() else {
        return Ok(None);
    };
    if new <= old {
        return Ok(None);
    }
    let resource = kube::api::ApiResource {
        group: kind.group.clone(),
        version: kind.version.clone(),
        api_version: if kind.group.is_empty() {
            kind.version.clone()
        } else {
            format!("{}/{}", kind.group, kind.version)
        },
        kind: kind.kind.clone(),
        plural: kind.resource.clone(),
    };
    let current = ctx
        .read_now(&resource, Some(ns), &req.name)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("{} {ns}/{} not found", kind.kind, req.name))?;
    // The Scale the API server sends carries its workload's uid. A review that cannot name it
    // was not sent for that workload (a forged one would have another tenant's workload read
    // back in its answer): nothing to judge.
    let claimed = [req.old_object.as_ref(), Some(&req.object)]
        .into_iter()
        .flatten()
        .find_map(|s| s.pointer("/metadata/uid").and_then(Value::as_str));
    if claimed.is_none() || claimed != current.metadata.uid.as_deref() {
        return Ok(None);
    }
    let object = serde_json::to_value(&*current).map_err(|e| e.to_string())?;
    let at = |n: i64| -> Result<Value, String> {
        let mut o = object.clone();
        let slot = o.pointer_mut(pointer).ok_or_else(|| {
            format!(
                "{}: not in the {} (its scale path)",
                kinds::dotted(pointer),
                kind.kind
            )
        })?;
        *slot = Value::from(n);
        Ok(o)
    };
    Ok(Some((at(new)?, at(old)?)))
}

/// Whether `kind` is named in the comma list `list` (`Kind`, `group/Kind`, or `*`).
fn listed(list: &[String], kind: &Kind) -> bool {
    crate::options::entries(list)
        .any(|n| n == "*" || n == kind.kind || n == format!("{}/{}", kind.group, kind.kind))
}

/// WQ-1: every template of the object, decoded, with the request of one of its pods; or the
/// first field that cannot be read, named.
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: default}, spec: {max: {cpu: "2"}, min: {cpu: "1"}}}`
///
/// Refused: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: d}, spec: {replicas: 1, selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a, quota.scheduling.koordinator.sh/name: null}}, spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}, limits: {cpu: "1"}}}]}}}}`
///
/// Admitted: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: e}, spec: {replicas: 1, selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a, quota.scheduling.koordinator.sh/name: team-a}}, spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}, limits: {cpu: "1"}}}]}}}}`
fn templates(kind: &Kind, object: &Value, ns: &str) -> Result<Vec<Template>, String> {
    let mut out = Vec::new();
    for f in kinds::groups(kind, object)? {
        let t: PodTemplateSpec = serde_json::from_value(f.template.clone())
            .map_err(|e| format!("{}: Invalid value: {e}", f.path))?;
        let spec = t.spec.unwrap_or_default();
        if spec.containers.is_empty() {
            return Err(format!("{}.spec.containers: Required value", f.path));
        }
        check_pod_spec(&format!("{}.spec", f.path), &spec).map_err(|e| e.to_string())?;
        let request = try_pod_request(&spec).map_err(|e| format!("{}.spec: {e}", f.path))?;
        let mut metadata = t.metadata.unwrap_or_default();
        metadata.namespace = Some(ns.to_owned());
        out.push(Template {
            path: f.path,
            role: f.role,
            replicas: f.replicas,
            request,
            pod: Pod {
                metadata,
                spec: Some(spec),
                status: None,
            },
        });
    }
    Ok(out)
}

/// `a × n`, exact, or the resource whose product leaves the countable range.
fn times(a: &Amounts, n: i64) -> Result<Amounts, String> {
    a.iter()
        .map(|(k, v)| {
            v.nano
                .checked_mul(i128::from(n))
                .filter(|p| p.abs() <= admission_kit::compat::resources::MAX_NANO)
                .map(|nano| (k.clone(), Amount { nano, ..*v }))
                .ok_or_else(|| format!("the total of {k} is too large to be counted"))
        })
        .collect()
}

/// The peak of each quota label's templates (WQ-1: Σ replicas × pod request).
fn by_label(ts: &[Template]) -> Result<ByLabel, String> {
    let mut out = ByLabel::new();
    for (i, t) in ts.iter().enumerate() {
        let label = quota_protocol::tree::pod_quota_label(&t.pod).to_owned();
        let e = out.entry(label).or_default();
        admission_kit::compat::resources::try_add(&mut e.0, &times(&t.request, t.replicas)?)
            .map_err(|e| e.to_string())?;
        e.1.push(i);
    }
    Ok(out)
}

/// `new − old` per resource, positive parts only (WQ-4: only an increase is checked).
fn increase(new: &Amounts, old: Option<&Amounts>) -> Amounts {
    new.iter()
        .filter_map(|(k, v)| {
            let before = old.and_then(|o| o.get(k)).map_or(0, |a| a.nano);
            (v.nano > before).then(|| {
                (
                    k.clone(),
                    Amount {
                        nano: v.nano - before,
                        ..*v
                    },
                )
            })
        })
        .collect()
}

/// `cpu=80 (Master 1×10, Worker 7×10)` for each resource of `which`.
fn arithmetic(which: &Amounts, peak: &Amounts, ts: &[Template], idx: &[usize]) -> String {
    which
        .keys()
        .filter_map(|k| {
            let total = peak.get(k)?;
            let parts: Vec<String> = idx
                .iter()
                .map(|&i| &ts[i])
                .filter_map(|t| {
                    let per = t.request.get(k).filter(|a| a.nano != 0)?;
                    let role = if t.role.is_empty() {
                        String::new()
                    } else {
                        format!("{} ", t.role)
                    };
                    Some(format!("{role}{}×{}", t.replicas, per.canonical()))
                })
                .collect();
            Some(format!("{k}={} ({})", total.canonical(), parts.join(", ")))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The answer for one quota label's pods: quota-state's when `--quota-state-url` is set,
/// else the in-process state's. `Ok(None)`: quota-state cannot answer this question (older).
async fn ask(
    svc: &crate::Service,
    ctx: &Context,
    w: &WorkloadCheck<'_>,
) -> Result<Option<WorkloadOutcome>, String> {
    if !svc.options.quota_state() {
        let quotas = StateWorkloadQuotas::of(&svc.quotas, ctx).map_err(|e| e.to_string())?;
        return Ok(Some(quota_protocol::workload::decide(
            quotas.topology(),
            &quotas,
            w,
        )));
    }
    let wire = |a: &Amounts| a.iter().map(|(k, v)| (k.clone(), wire_amount(v))).collect();
    let msg = CheckWorkloadRequest {
        namespace: w.namespace.to_owned(),
        quota_label: w.label.to_owned(),
        name: w.pod.to_owned(),
        requests: wire(w.peak),
        total: wire(w.total),
        disable_default_quota: w.disable_default_quota,
        check_parent: w.check_parent,
    };
    let Some(r) = quota_client::check_workload(&svc.quota, msg).await? else {
        return Ok(None);
    };
    let amounts = r
        .amounts
        .iter()
        .map(|(k, a)| Ok((k.clone(), amount_of_wire(k, a)?)))
        .collect::<Result<Amounts, String>>()?;
    let quota = r.quota;
    Ok(Some(match WorkloadFit::try_from(r.fit) {
        Ok(WorkloadFit::Fits) => WorkloadOutcome::Checked {
            quota,
            fit: Fit::Fits,
        },
        Ok(WorkloadFit::NotNow) => WorkloadOutcome::Checked {
            quota,
            fit: Fit::NotNow {
                quota: r.limiting_quota,
                free: amounts,
            },
        },
        Ok(WorkloadFit::Never) => WorkloadOutcome::Checked {
            quota,
            fit: Fit::Never {
                quota: r.limiting_quota,
                allowed: amounts,
            },
        },
        Ok(WorkloadFit::Refused) => WorkloadOutcome::Refused {
            quota,
            rule: if r.rule == "PV-3" { "PV-3" } else { "PV-4" },
            message: r.message,
        },
        Ok(WorkloadFit::Unchecked) => WorkloadOutcome::Unchecked { quota },
        _ => return Err(format!("quota-state answered an unknown fit {}", r.fit)),
    }))
}

/// The decision for a review, its rule id and the outcome counted.
struct Decision {
    verdict: Verdict,
    outcome: &'static str,
}

impl Decision {
    fn allow(outcome: &'static str) -> Self {
        Self {
            verdict: Verdict::default(),
            outcome,
        }
    }

    fn deny(rule: &'static str, outcome: &'static str, text: String) -> Self {
        Self {
            verdict: Verdict::errored(rule, 403, text),
            outcome,
        }
    }
}

/// The review's namespace (the object's when the review names none).
fn namespace_of(req: &Request<Value>) -> String {
    req.namespace
        .clone()
        .or_else(|| {
            req.object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_default()
}

/// WQ for `object` (and on UPDATE `old`) of `kind` in namespace `ns`.
///
/// WQ-2: a workload whose peak (all its pods at once) is above a quota's limit along its chain
/// can never run whole: refused, with the arithmetic.
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: default}, spec: {max: {cpu: "2"}, min: {cpu: "1"}}}`
///
/// Refused: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: d}, spec: {replicas: 3, selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a, quota.scheduling.koordinator.sh/name: team-a}}, spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}, limits: {cpu: "1"}}}]}}}}`
///
/// Admitted: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: e}, spec: {replicas: 1, selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a, quota.scheduling.koordinator.sh/name: team-a}}, spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}, limits: {cpu: "1"}}}]}}}}`
///
/// WQ-3: a workload that fits the limits but not what is free now is admitted with a warning
/// (or refused where configured so).
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: default, annotations: {quota.scheduling.koordinator.sh/child-request: '{"cpu":"1500m"}'}}, spec: {max: {cpu: "2"}, min: {cpu: "1"}}, status: {used: {cpu: "1500m"}}}`
///
/// Warned: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: d}, spec: {replicas: 1, selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a, quota.scheduling.koordinator.sh/name: team-a}}, spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}, limits: {cpu: "1"}}}]}}}}`
///
/// Admitted: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: e}, spec: {replicas: 1, selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a, quota.scheduling.koordinator.sh/name: team-a}}, spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "100m"}, limits: {cpu: "100m"}}}]}}}}`
///
/// WQ-5: pods that would be refused whatever their number (charged to a parent quota, or to a
/// quota that does not exist) admit the workload with a warning naming the pod rule.
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: parent-a, namespace: default, labels: {quota.scheduling.koordinator.sh/is-parent: "true"}}, spec: {max: {cpu: "100"}, min: {cpu: "1"}}}`
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: default}, spec: {max: {cpu: "2"}, min: {cpu: "1"}}}`
///
/// Warned: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: d}, spec: {replicas: 1, selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a, quota.scheduling.koordinator.sh/name: parent-a}}, spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}, limits: {cpu: "1"}}}]}}}}`
///
/// Warned: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: f}, spec: {replicas: 1, selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a, quota.scheduling.koordinator.sh/name: nobody}}, spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}, limits: {cpu: "1"}}}]}}}}`
///
/// Admitted: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: e}, spec: {replicas: 1, selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a, quota.scheduling.koordinator.sh/name: team-a}}, spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}, limits: {cpu: "1"}}}]}}}}`
///
/// WQ-6: the pod rules that read a pod alone run on each template; what they would refuse is a
/// warning, or a refusal for the kinds of `--workload-template-rules-deny-kinds`.
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: default}, spec: {max: {cpu: "2"}, min: {cpu: "1"}}}`
///
/// Warned: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: d}, spec: {replicas: 1, selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a, quota.scheduling.koordinator.sh/name: team-a, koordinator.sh/qosClass: BE, koordinator.sh/priority-class: koord-prod}}, spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}, limits: {cpu: "1"}}}]}}}}`
///
/// Admitted: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: e}, spec: {replicas: 1, selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a, quota.scheduling.koordinator.sh/name: team-a}}, spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}, limits: {cpu: "1"}}}]}}}}`
async fn decide(
    svc: &crate::Service,
    ctx: &Context,
    kind: &Kind,
    ns: &str,
    object: &Value,
    old: Option<&Value>,
    fallback_name: &str,
) -> Decision {
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .unwrap_or(fallback_name)
        .to_owned();
    let ns = ns.to_owned();
    let who = format!("{} {ns}/{name}", kind.kind);
    let ts = match templates(kind, object, &ns) {
        Ok(ts) => ts,
        Err(e) => return Decision::deny("WQ-1", "invalid", format!("{who}: {e}")),
    };
    let mut warnings = Vec::new();
    // WQ-6: the pod rules on each template.
    let deny_templates = listed(&svc.options.workload_template_rules_deny_kinds, kind);
    for t in &ts {
        if let Err((rule, text)) = crate::pod_validate::template_rules(svc, &t.pod, &ns, ctx) {
            let text = format!(
                "{who}: pods of {} would be refused by {rule}: {text}",
                t.path
            );
            if deny_templates {
                return Decision::deny("WQ-6", "template_refused", text);
            }
            warnings.push(format!("WQ-6: {text}"));
        }
    }
    let new = match by_label(&ts) {
        Ok(b) => b,
        Err(e) => return Decision::deny("WQ-1", "invalid", format!("{who}: {e}")),
    };
    let old_object = old;
    let old = old.and_then(|o| templates(kind, o, &ns).and_then(|ts| by_label(&ts)).ok());
    let gang = kind.policy == Policy::Gang || listed(&svc.options.workload_gang_kinds, kind);
    let mut outcome = "unchanged";
    for (label, (peak, idx)) in &new {
        let more = increase(peak, old.as_ref().and_then(|o| o.get(label)).map(|e| &e.0));
        if more.is_empty() {
            continue;
        }
        let w = WorkloadCheck {
            namespace: &ns,
            label,
            pod: &name,
            peak: &more,
            total: peak,
            disable_default_quota: ctx.gates().enabled("DisableDefaultQuota"),
            check_parent: !ctx.gates().enabled("SupportParentQuotaSubmitPod"),
        };
        let answer = match ask(svc, ctx, &w).await {
            Ok(Some(a)) => a,
            Ok(None) => {
                warnings.push(format!(
                    "WQ: {who} not checked against its quota: quota-state does not answer workload questions yet (an older version)"
                ));
                outcome = "unavailable";
                continue;
            }
            Err(cause) => {
                // Never refused for want of quota-state: each pod is still judged by PV-4.
                crate::quota_client::counted_unavailable(&cause, "allowed");
                warnings.push(format!(
                    "WQ: {who} not checked against its quota: quota-state unavailable ({cause}); each pod is still checked when it is created"
                ));
                outcome = "unavailable";
                continue;
            }
        };
        let needs = |which: &Amounts| arithmetic(which, peak, &ts, idx);
        let scaled = if old.is_some() {
            format!(" ({} more than now)", list_text(&more))
        } else {
            String::new()
        };
        match answer {
            WorkloadOutcome::Unchecked { .. } => {
                if outcome == "unchanged" {
                    outcome = "unchecked";
                }
            }
            WorkloadOutcome::Refused { rule, message, .. } => {
                // WQ-5: its pods would be refused whatever their number.
                warnings.push(format!(
                    "WQ-5: {who}: its pods will be refused by {rule}: {message}"
                ));
                outcome = "pods_refused";
            }
            WorkloadOutcome::Checked { fit: Fit::Fits, .. } => {
                if matches!(outcome, "unchanged" | "unchecked") {
                    outcome = "fits";
                }
            }
            WorkloadOutcome::Checked {
                fit: Fit::Never { quota, allowed },
                ..
            } => {
                let mut v = Decision::deny(
                    "WQ-2",
                    "never_fits",
                    format!(
                        "{who} needs {}{scaled}; quota {quota} allows at most {}",
                        needs(&allowed),
                        list_text(&allowed)
                    ),
                );
                v.verdict.warnings = warnings;
                return v;
            }
            WorkloadOutcome::Checked {
                fit: Fit::NotNow { quota, free },
                ..
            } => {
                let text = format!(
                    "{who} needs {}{scaled}; quota {quota} has {} free now",
                    needs(&free),
                    list_text(&free)
                );
                if gang {
                    let mut v = Decision::deny("WQ-3", "not_now_refused", text);
                    v.verdict.warnings = warnings;
                    return v;
                }
                warnings.push(format!(
                    "WQ-3: {text}: some of its pods will be refused until quota frees up"
                ));
                outcome = "not_now_warned";
            }
        }
    }
    // WQ-7: a Deployment's rollout that cannot start in its quota as it is now.
    if kind.group == "apps"
        && kind.kind == "Deployment"
        && let Some(r) = rollout::wq_7_rollout_without_room(object, old_object)
    {
        for (label, (peak, idx)) in &new {
            let Some(t) = idx.first().and_then(|i| ts.get(*i)) else {
                continue;
            };
            let w = WorkloadCheck {
                namespace: &ns,
                label,
                pod: &name,
                peak: &t.request,
                total: peak,
                disable_default_quota: ctx.gates().enabled("DisableDefaultQuota"),
                check_parent: !ctx.gates().enabled("SupportParentQuotaSubmitPod"),
            };
            // Unanswered (quota-state down or older): each Pod is still judged by PV-4.
            if let Ok(Some(WorkloadOutcome::Checked {
                fit: Fit::NotNow { quota, free },
                ..
            })) = ask(svc, ctx, &w).await
            {
                let one: Amounts = t
                    .request
                    .iter()
                    .filter(|(k, _)| free.contains_key(*k))
                    .map(|(k, v)| (k.clone(), *v))
                    .collect();
                warnings.push(format!(
                        "WQ-7: {who}: its rolling update cannot start: a new Pod needs {} and quota {quota} has {} free now, and maxUnavailable {} of {} replicas is 0, so no old Pod goes before a new one runs (maxSurge {} is {}); it waits until quota frees up. spec.strategy.rollingUpdate.maxUnavailable of 1 or more (or spec.strategy.type Recreate) lets it complete",
                        list_text(&one),
                        list_text(&free),
                        r.max_unavailable,
                        r.replicas,
                        r.max_surge.0,
                        r.max_surge.1
                    ));
                if matches!(outcome, "unchanged" | "unchecked" | "fits") {
                    outcome = "rollout_waits_warned";
                }
            }
        }
    }
    let mut d = Decision::allow(outcome);
    if !warnings.is_empty() && d.outcome == "unchanged" {
        d.outcome = "warned";
    }
    d.verdict.warnings = warnings;
    d
}

impl Validator for WorkloadValidator {
    type Object = Value;

    fn validate(&self, req: &Request<Value>, ctx: &Context) -> Verdict {
        quota_client::blocking_verdict(self.validate_async(req, ctx))
    }

    fn waits(&self, _: &Context) -> bool {
        self.0.options.quota_state()
    }

    async fn validate_async(&self, req: &Request<Value>, ctx: &Context) -> Verdict {
        let sub = req.sub_resource.as_deref().filter(|s| !s.is_empty());
        if !(sub.is_none() || is_scale(req))
            || !matches!(req.operation, Operation::Create | Operation::Update)
        {
            return Verdict::default();
        }
        let svc = &self.0;
        let Some(kind) = find_kind(req, svc) else {
            return Verdict::default();
        };
        let ns = namespace_of(req);
        let d = if is_scale(req) {
            match scaled_objects(req, ctx, &kind, &ns) {
                Ok(None) => Decision::allow("unchanged"),
                Ok(Some((new, old))) => {
                    decide(svc, ctx, &kind, &ns, &new, Some(&old), &req.name).await
                }
                Err(cause) => {
                    let mut d = Decision::allow("unavailable");
                    d.verdict.warnings.push(format!(
                        "WQ: {} {ns}/{} not checked against its quota: {cause}",
                        kind.kind, req.name
                    ));
                    d
                }
            }
        } else {
            let old = match req.operation {
                Operation::Update => req.old_object.as_ref(),
                _ => None,
            };
            decide(svc, ctx, &kind, &ns, &req.object, old, &req.name).await
        };
        admission_kit::server::metrics::workload_quota_decision(&kind.kind, d.outcome);
        let mut v = d.verdict;
        // The decision log names the rule behind a warning.
        match d.outcome {
            "not_now_warned" => v.applied.push("WQ-3"),
            "pods_refused" => v.applied.push("WQ-5"),
            "rollout_waits_warned" => v.applied.push("WQ-7"),
            _ if v.allowed() && v.warnings.iter().any(|w| w.starts_with("WQ-6")) => {
                v.applied.push("WQ-6")
            }
            _ => {}
        }
        v
    }

    fn allowed_status(&self) -> Option<Status> {
        Some(Status::allowed())
    }
}

#[cfg(test)]
mod tests;
