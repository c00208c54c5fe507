//! `/mutate-pod` (spec §3, PM-0..PM-4).

use std::collections::BTreeMap;

use admission_kit::compat::go::QuantityFormat;
use admission_kit::compat::resources::NANO_PER_UNIT;
use admission_kit::{Context, Mutator, Operation, Request, Verdict};
use k8s_openapi::api::core::v1::{
    Affinity, Container, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, Pod,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::effective_priority_class;
use crate::profile::{self, SKIP_UPDATE_RESOURCES};
use std::cell::RefCell;

use admission_kit::server::metrics::koord;
use quota_protocol::tree::QuotaLookup;

use crate::quota::{keys, pod_namespace, state_quotas};
use crate::quota_client;
use crate::types::{ElasticQuotaProfile, ResourceList};
use admission_kit::compat::resources::Amount;

/// Annotation written by PM-2.
pub const EXTENDED_RESOURCE_SPEC: &str = "node.koordinator.sh/extended-resource-spec";

/// PM-1: apply matching ClusterColocationProfiles, then translate resources (PM-1.7).
///
/// State: `{apiVersion: config.koordinator.sh/v1alpha1, kind: ClusterColocationProfile, metadata: {name: colocate}, spec: {selector: {matchLabels: {colocate: "true"}}, labels: {team: a}}}`
///
/// Mutated: `{apiVersion: v1, kind: Pod, metadata: {name: p, labels: {colocate: "true"}}, spec: {containers: [{name: c, image: busybox}]}}`
///
/// Admitted: `{apiVersion: v1, kind: Pod, metadata: {name: q}, spec: {containers: [{name: c, image: busybox}]}}`
fn pm_1_profiles(pod: &mut Pod, ns: &str, ctx: &Context) -> Result<bool, String> {
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    let profiles = profile::matching(ctx, &labels, Some(ns))?;
    if profiles.is_empty() {
        return Ok(false);
    }
    let skip_resources = ctx
        .gates()
        .enabled("ColocationProfileSkipMutatingResources")
        || profiles.iter().any(|p| {
            p.metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(SKIP_UPDATE_RESOURCES))
        });
    for p in &profiles {
        if !profile::applies(&p.spec)? {
            continue;
        }
        profile::apply_metadata(&p.spec, &mut pod.metadata);
        let spec = pod.spec.get_or_insert_with(Default::default);
        if let Some(s) = p.spec.scheduler_name.as_ref().filter(|s| !s.is_empty()) {
            spec.scheduler_name = Some(s.clone());
        }
        if let Some(q) = p.spec.qos_class.as_ref().filter(|s| !s.is_empty()) {
            pod.metadata
                .labels
                .get_or_insert_with(BTreeMap::new)
                .insert("koordinator.sh/qosClass".into(), q.clone());
        }
        let only_priority = crate::types::ClusterColocationProfileSpec {
            priority_class_name: p.spec.priority_class_name.clone(),
            ..Default::default()
        };
        profile::apply_pod_spec(
            &only_priority,
            pod.spec.get_or_insert_with(Default::default),
            ctx,
        )?;
        if let Some(kp) = p.spec.koordinator_priority {
            pod.metadata
                .labels
                .get_or_insert_with(BTreeMap::new)
                .insert("koordinator.sh/priority".into(), kp.to_string());
        }
        if let Some(patch) = &p.spec.patch {
            let mut v = serde_json::to_value(&*pod).map_err(|e| e.to_string())?;
            profile::merge_patch(&mut v, patch);
            *pod = serde_json::from_value(v)
                .map_err(|e| format!("failed to apply profile patch: {e}"))?;
        }
    }
    if !skip_resources {
        pm_1_7_translate(pod);
    }
    Ok(true)
}

/// PM-1.7's batch cpu: the milli-value as a whole number (upstream's `NewQuantity(MilliValue)`).
/// Saturating: a value past 1.7e35 cpus (the variant fuzzer sent one) would overflow the
/// product; Go's int64 wraps far earlier.
pub(crate) fn milli_text(q: &Quantity) -> Quantity {
    let a = Amount::of(q);
    Quantity(
        Amount {
            nano: a.milli().saturating_mul(NANO_PER_UNIT),
            format: QuantityFormat::DecimalSI,
        }
        .canonical(),
    )
}

fn canonical(q: &Quantity) -> Quantity {
    Quantity(admission_kit::compat::resources::go_text(q))
}

fn move_resources(rl: &mut ResourceList, cpu: &str, mem: &str) {
    if let Some(q) = rl.remove("cpu") {
        rl.insert(cpu.to_owned(), milli_text(&q));
    }
    if let Some(q) = rl.remove("memory") {
        rl.insert(mem.to_owned(), canonical(&q));
    }
}

/// PM-1.7: cpu/memory become batch or mid resources for koord-batch / koord-mid pods.
fn pm_1_7_translate(pod: &mut Pod) {
    let (cpu, mem) = match effective_priority_class(pod).as_deref() {
        Some("koord-batch") => ("kubernetes.io/batch-cpu", "kubernetes.io/batch-memory"),
        Some("koord-mid") => ("kubernetes.io/mid-cpu", "kubernetes.io/mid-memory"),
        _ => return,
    };
    let Some(spec) = pod.spec.as_mut() else {
        return;
    };
    let translate = |c: &mut Container| {
        let Some(r) = c.resources.as_mut() else {
            return;
        };
        if let Some(req) = r.requests.as_mut() {
            move_resources(req, cpu, mem);
        }
        if let Some(lim) = r.limits.as_mut() {
            move_resources(lim, cpu, mem);
        }
        let limits = r.limits.clone().unwrap_or_default();
        for name in [cpu, mem] {
            if let Some(l) = limits.get(name)
                && !r.requests.as_ref().is_some_and(|q| q.contains_key(name))
            {
                r.requests
                    .get_or_insert_with(BTreeMap::new)
                    .insert(name.to_owned(), l.clone());
            }
        }
    };
    for c in spec.init_containers.iter_mut().flatten() {
        translate(c);
    }
    for c in &mut spec.containers {
        translate(c);
    }
    if let Some(o) = spec.overhead.as_mut() {
        move_resources(o, cpu, mem);
    }
}

const BATCH: [&str; 2] = ["kubernetes.io/batch-cpu", "kubernetes.io/batch-memory"];

fn extended_spec(pod: &Pod, canonical_text: bool) -> serde_json::Value {
    let mut containers = serde_json::Map::new();
    for c in pod.spec.iter().flat_map(|s| s.containers.iter()) {
        let mut entry = serde_json::Map::new();
        for (field, list) in [
            (
                "limits",
                c.resources.as_ref().and_then(|r| r.limits.as_ref()),
            ),
            (
                "requests",
                c.resources.as_ref().and_then(|r| r.requests.as_ref()),
            ),
        ] {
            let picked: serde_json::Map<String, serde_json::Value> = list
                .iter()
                .flat_map(|l| l.iter())
                .filter(|(k, _)| BATCH.contains(&k.as_str()))
                .map(|(k, v)| {
                    (
                        k.clone(),
                        serde_json::Value::String(if canonical_text {
                            admission_kit::compat::resources::go_text(v)
                        } else {
                            v.0.clone()
                        }),
                    )
                })
                .collect();
            if !picked.is_empty() {
                entry.insert(field.into(), serde_json::Value::Object(picked));
            }
        }
        if !entry.is_empty() {
            containers.insert(c.name.clone(), serde_json::Value::Object(entry));
        }
    }
    if containers.is_empty() {
        serde_json::json!({})
    } else {
        serde_json::json!({ "containers": containers })
    }
}

/// The extended-resource-spec annotation read as upstream's `json.Unmarshal` into
/// `extension.ExtendedResourceSpec` reads it: its JSON value, or Go's error (a syntax error, a
/// member of the wrong JSON type, a quantity apimachinery refuses; a number there
/// used to be overwritten, where upstream fails the request).
fn decode_extended_spec(text: &str) -> Result<serde_json::Value, String> {
    use admission_kit::compat::go::{decode_resource_list, go_json_kind, go_json_syntax_error};
    use serde_json::Value;
    let v: Value = serde_json::from_str(text).map_err(|e| go_json_syntax_error(&e, text))?;
    let wrong = |v: &Value, field: &str, ty: &str| {
        Err(format!(
            "json: cannot unmarshal {} into Go {field} of type {ty}",
            go_json_kind(v)
        ))
    };
    let containers = match &v {
        Value::Null => None,
        Value::Object(m) => m.get("containers"),
        other => return wrong(other, "value", "extension.ExtendedResourceSpec"),
    };
    let field = "struct field ExtendedResourceSpec.containers";
    let specs = match containers {
        None | Some(Value::Null) => return Ok(v.clone()),
        Some(Value::Object(specs)) => specs,
        Some(other) => {
            return wrong(
                other,
                field,
                "map[string]extension.ExtendedResourceContainerSpec",
            );
        }
    };
    for spec in specs.values() {
        let lists = match spec {
            Value::Null => continue,
            Value::Object(lists) => lists,
            other => return wrong(other, field, "extension.ExtendedResourceContainerSpec"),
        };
        for key in ["limits", "requests"] {
            match lists.get(key) {
                None | Some(Value::Null) => {}
                Some(list @ Value::Object(_)) => {
                    decode_resource_list(&list.to_string())?;
                }
                Some(other) => {
                    let at = format!("struct field ExtendedResourceContainerSpec.containers.{key}");
                    return wrong(other, &at, "v1.ResourceList");
                }
            }
        }
    }
    Ok(v)
}

/// PM-2: the extended-resource-spec annotation mirrors the containers' batch resources.
///
/// Mutated: `{apiVersion: v1, kind: Pod, metadata: {name: p, labels: {koordinator.sh/qosClass: BE}}, spec: {priorityClassName: koord-batch, containers: [{name: c, image: busybox, resources: {requests: {kubernetes.io/batch-cpu: "1000", kubernetes.io/batch-memory: 1Gi}, limits: {kubernetes.io/batch-cpu: "1000", kubernetes.io/batch-memory: 1Gi}}}]}}`
///
/// Admitted: `{apiVersion: v1, kind: Pod, metadata: {name: q}, spec: {containers: [{name: c, image: busybox}]}}`
fn pm_2_extended_resource_spec(pod: &mut Pod) -> Result<bool, String> {
    let current = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(EXTENDED_RESOURCE_SPEC))
        .cloned();
    let want = extended_spec(pod, true).to_string();
    let current_value: serde_json::Value = match &current {
        None => serde_json::json!({}),
        Some(t) => decode_extended_spec(t)
            .map_err(|e| format!("failed to get current extended resource spec, err: {e}"))?,
    };
    if current.as_deref() == Some(want.as_str()) || current_value == extended_spec(pod, false) {
        return Ok(false);
    }
    if current.is_none() && want == "{}" {
        return Ok(false);
    }
    pod.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(EXTENDED_RESOURCE_SPEC.into(), want);
    Ok(true)
}

/// PM-3: pods of a quota tree get the tree's node affinity.
///
/// State: `{"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota", "metadata": {"name": "root-quota-a", "namespace": "kube-system", "labels": {"quota.scheduling.koordinator.sh/tree-id": "tree1", "quota.scheduling.koordinator.sh/is-parent": "true"}}, "spec": {"max": {"cpu": "100", "memory": "400Gi"}, "min": {"cpu": "100", "memory": "400Gi"}}}`
///
/// State: `{"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota", "metadata": {"name": "root-quota-a-child1", "namespace": "kube-system", "labels": {"quota.scheduling.koordinator.sh/tree-id": "tree1", "quota.scheduling.koordinator.sh/parent": "root-quota-a"}}, "spec": {"max": {"cpu": "50", "memory": "200Gi"}, "min": {"cpu": "10", "memory": "40Gi"}}}`
///
/// State: `{"apiVersion": "quota.koordinator.sh/v1alpha1", "kind": "ElasticQuotaProfile", "metadata": {"name": "profile-a", "namespace": "kube-system", "labels": {"quota.scheduling.koordinator.sh/tree-id": "tree1"}}, "spec": {"quotaName": "root-quota-a", "nodeSelector": {"matchLabels": {"node-pool": "nodePoolA"}}}}`
///
/// Mutated: `{apiVersion: v1, kind: Pod, metadata: {name: p, labels: {quota.scheduling.koordinator.sh/name: root-quota-a-child1}}, spec: {containers: [{name: c, image: busybox}]}}`
///
/// Admitted: `{apiVersion: v1, kind: Pod, metadata: {name: q}, spec: {containers: [{name: c, image: busybox}]}}`
///
/// The tree id comes from quota-state when `--quota-state-url` is set; when it cannot answer and
/// `--quota-unavailable=allow`, the pod is left as is with a warning.
fn pm_3_multi_quota_tree(
    svc: &crate::Service,
    pod: &mut Pod,
    ns: &str,
    ctx: &Context,
    warnings: &RefCell<Vec<String>>,
) -> Result<bool, String> {
    let name = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(keys::NAME))
        .filter(|n| !n.is_empty())
        .cloned()
        .unwrap_or_else(|| ns.to_owned());
    let tree_id = |view: &dyn QuotaLookup| {
        view.quota(&name)
            .or_else(|| view.bound_to(ns).and_then(|q| view.quota(&q)))
            .map(|q| q.tree_id)
            .filter(|t| !t.is_empty())
    };
    // The rule acts only through a profile of the pod's tree. When no profile names a tree (most
    // clusters have none), the tree does not matter: quota-state is not asked (a round trip per
    // pod, and an outage would refuse pods for an answer that cannot change them).
    let listed = ctx.list::<ElasticQuotaProfile>(None);
    if let Ok(all) = &listed
        && !all.iter().any(|p| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(keys::TREE_ID))
                .is_some_and(|t| !t.is_empty())
        })
    {
        return Ok(false);
    }
    let found = if svc.options.quota_state() {
        match quota_client::blocking(quota_client::lookup(&svc.quota, vec![name.clone()], ns)) {
            Ok(s) => tree_id(&s),
            Err(cause) if crate::quota::concerns_no_quota(svc, pod, ns, ctx) => {
                quota_client::admitted_without(&svc.quota, &cause);
                return Ok(false);
            }
            Err(cause) => {
                let w = quota_client::unavailable(&svc.quota, "the pod's quota tree", &cause)?;
                warnings.borrow_mut().push(w);
                return Ok(false);
            }
        }
    } else {
        tree_id(
            &state_quotas(&svc.quotas, ctx)
                .map_err(|e| e.to_string())?
                .topology,
        )
    };
    let Some(tree) = found else {
        return Ok(false);
    };
    let mut profiles: Vec<ElasticQuotaProfile> = listed
        .map_err(|e| e.to_string())?
        .iter()
        .filter_map(|d| {
            serde_json::to_value(&**d)
                .ok()
                .and_then(|v| serde_json::from_value(v).ok())
        })
        .filter(|p: &ElasticQuotaProfile| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(keys::TREE_ID))
                == Some(&tree)
        })
        .collect();
    profiles.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    let Some(sel) = profiles.first().and_then(|p| p.spec.node_selector.clone()) else {
        return Ok(false);
    };
    let mut reqs: Vec<NodeSelectorRequirement> = sel
        .match_labels
        .iter()
        .flatten()
        .map(|(k, v)| NodeSelectorRequirement {
            key: k.clone(),
            operator: "In".into(),
            values: Some(vec![v.clone()]),
        })
        .collect();
    reqs.extend(
        sel.match_expressions
            .iter()
            .flatten()
            .map(|e| NodeSelectorRequirement {
                key: e.key.clone(),
                operator: e.operator.clone(),
                values: e.values.clone(),
            }),
    );
    let spec = pod.spec.get_or_insert_with(Default::default);
    let affinity = spec.affinity.get_or_insert_with(Affinity::default);
    let na = affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    let required = na
        .required_during_scheduling_ignored_during_execution
        .get_or_insert_with(NodeSelector::default);
    if required.node_selector_terms.is_empty() {
        required.node_selector_terms.push(NodeSelectorTerm {
            match_expressions: Some(reqs),
            match_fields: None,
        });
    } else {
        for term in &mut required.node_selector_terms {
            term.match_expressions
                .get_or_insert_with(Vec::new)
                .extend(reqs.clone());
        }
    }
    Ok(true)
}

const GPU: &str = "koordinator.sh/gpu";
const GPU_CORE: &str = "koordinator.sh/gpu-core";
const GPU_MEMORY: &str = "koordinator.sh/gpu-memory";
const GPU_RATIO: &str = "koordinator.sh/gpu-memory-ratio";
const GPU_SHARED: &str = "koordinator.sh/gpu.shared";

/// PM-4: `koordinator.sh/gpu` split into core + memory ratio; `gpu.shared` filled in.
///
/// Mutated: `{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, image: busybox, resources: {requests: {koordinator.sh/gpu: "50"}, limits: {koordinator.sh/gpu: "50"}}}]}}`
///
/// Admitted: `{apiVersion: v1, kind: Pod, metadata: {name: q}, spec: {containers: [{name: c, image: busybox}]}}`
fn pm_4_devices(pod: &mut Pod) -> Result<bool, String> {
    let mut changed = false;
    let Some(spec) = pod.spec.as_mut() else {
        return Ok(false);
    };
    for c in &mut spec.containers {
        let has = |l: Option<&ResourceList>| {
            l.is_some_and(|l| {
                [GPU, GPU_CORE, GPU_MEMORY, GPU_RATIO, GPU_SHARED]
                    .iter()
                    .any(|k| l.contains_key(*k))
            })
        };
        // No resources, no devices: nothing is written (inserting an empty `resources` would
        // be a patch operation that changes nothing).
        let Some(res) = c.resources.as_mut() else {
            continue;
        };
        if !has(res.requests.as_ref()) && !has(res.limits.as_ref()) {
            continue;
        }
        let missing = |which: &str| {
            format!(
                "container {} has no resources.{which} to write GPU resources into (upstream: assignment to entry in nil map)",
                c.name
            )
        };
        let int = |n: i128| Quantity(n.to_string());
        if let Some(g) = res
            .requests
            .as_ref()
            .and_then(|r| r.get(GPU))
            .map(|q| Amount::of(q).value())
        {
            for (which, list) in [("requests", &mut res.requests), ("limits", &mut res.limits)] {
                let l = list.as_mut().ok_or_else(|| missing(which))?;
                l.insert(GPU_CORE.into(), int(g));
                l.insert(GPU_RATIO.into(), int(g));
                l.remove(GPU);
            }
            changed = true;
        }
        if !res
            .requests
            .as_ref()
            .is_some_and(|r| r.contains_key(GPU_SHARED))
        {
            let req = res.requests.clone().unwrap_or_default();
            let per_card = |v: i128| (v > 100 && v % 100 == 0).then_some(v / 100);
            let shared = if let Some(r) = req.get(GPU_RATIO) {
                per_card(Amount::of(r).value()).unwrap_or(1)
            } else if let Some(c) = req.get(GPU_CORE) {
                per_card(Amount::of(c).value()).unwrap_or(1)
            } else {
                1
            };
            for (which, list) in [("requests", &mut res.requests), ("limits", &mut res.limits)] {
                let l = list.as_mut().ok_or_else(|| missing(which))?;
                l.insert(GPU_SHARED.into(), int(shared));
            }
            changed = true;
        }
    }
    Ok(changed)
}

/// One mutation step: `Ok(true)` when it changed the pod, `Err` answers 500.
type Step<'a> = &'a dyn Fn(&mut Pod) -> Result<bool, String>;

/// `/mutate-pod`.
pub struct PodMutator(pub std::sync::Arc<crate::Service>);

impl Mutator for PodMutator {
    type Object = Pod;

    /// No rule reads a Pod's managed fields, the larger part of its decode.
    fn reads_managed_fields(&self) -> bool {
        false
    }

    /// A quantity Go's decoder refuses fails the decode here too.
    fn check_decoded(&self, pod: &Pod) -> Result<(), String> {
        admission_kit::compat::resources::check_pod(pod)
    }

    fn mutate(&self, req: &Request<Pod>, pod: &mut Pod, ctx: &Context) -> Verdict {
        // PM-0
        if req.resource.resource != "pods"
            || req.sub_resource.as_deref().is_some_and(|s| !s.is_empty())
            || req.operation != Operation::Create
        {
            return Verdict::default();
        }
        let ns = pod_namespace(pod, req.namespace.as_deref());
        let mut applied = Vec::new();
        let warnings = RefCell::new(Vec::new());
        // Rule id and upstream's plugin name (for `koord_manager_webhook_*`).
        let steps: [(&'static str, &str, Step); 4] = [
            ("PM-1", "ClusterColocationProfile", &|p: &mut Pod| {
                pm_1_profiles(p, &ns, ctx)
            }),
            ("PM-2", "ExtendedResourceSpec", &|p: &mut Pod| {
                if ctx.gates().enabled("DisableExtendedResourceSpec") {
                    Ok(false)
                } else {
                    pm_2_extended_resource_spec(p)
                }
            }),
            ("PM-3", "MultiQuotaTree", &|p: &mut Pod| {
                if ctx.gates().enabled("MultiQuotaTree") {
                    pm_3_multi_quota_tree(&self.0, p, &ns, ctx, &warnings)
                } else {
                    Ok(false)
                }
            }),
            ("PM-4", "DeviceResourceSpec", &|p: &mut Pod| {
                if ctx.gates().enabled("DisableDeviceResourceSpec") {
                    Ok(false)
                } else {
                    pm_4_devices(p)
                }
            }),
        ];
        let op = req.operation.as_str();
        for (rule, plugin, step) in steps {
            match koord::timed("mutate", "pod", op, plugin, || step(pod)) {
                Ok(true) => applied.push(rule),
                Ok(false) => {}
                Err(e) => return Verdict::errored(rule, 500, e),
            }
        }
        Verdict {
            applied,
            warnings: warnings.into_inner(),
            ..Verdict::default()
        }
    }
}
