//! The ElasticQuota topology (spec §7.1) and the rules that read it: the quota name of a pod (QN),
//! PV-3, PV-4, the ElasticQuota defaulting (QM) and validation (QV).
//!
//! The topology here is built from cluster state (`--state` in `review`, watch caches in
//! `serve`); it is the logic quota-state will hold in memory.

use std::collections::{BTreeMap, BTreeSet};

use admission_kit::state::LookupError;
use admission_kit::{Context, Mutator, Operation, Request, Status, Validator, Verdict};
use k8s_openapi::api::core::v1::Pod;
use kube::api::DynamicObject;

use crate::resources::{Amount, Amounts, amounts, canonical_json, list_text, pod_request};
use crate::types::{ElasticQuota, ResourceList};

/// `quota.scheduling.koordinator.sh/…` keys.
pub mod keys {
    /// Pod label: the quota the pod is charged to.
    pub const NAME: &str = "quota.scheduling.koordinator.sh/name";
    /// Pod label, immutable.
    pub const PREEMPTIBLE: &str = "quota.scheduling.koordinator.sh/preemptible";
    /// Quota label: parent.
    pub const PARENT: &str = "quota.scheduling.koordinator.sh/parent";
    /// Quota label: may have children.
    pub const IS_PARENT: &str = "quota.scheduling.koordinator.sh/is-parent";
    /// Quota label: tree id.
    pub const TREE_ID: &str = "quota.scheduling.koordinator.sh/tree-id";
    /// Quota label: tree root.
    pub const IS_ROOT: &str = "quota.scheduling.koordinator.sh/is-root";
    /// Quota label: skip min-sum checks.
    pub const FORCE_UPDATE: &str = "quota.scheduling.koordinator.sh/allow-force-update";
    /// Quota annotation.
    pub const SHARED_WEIGHT: &str = "quota.scheduling.koordinator.sh/shared-weight";
    /// Quota annotation: bound namespaces.
    pub const NAMESPACES: &str = "quota.scheduling.koordinator.sh/namespaces";
    /// Quota annotation: admitted usage.
    pub const CHILD_REQUEST: &str = "quota.scheduling.koordinator.sh/child-request";
    /// Quota annotation: admission limit.
    pub const ADMISSION: &str = "quota.scheduling.koordinator.sh/admission";
    /// Quota annotation.
    pub const STRICT_KEYS: &str = "quota.scheduling.koordinator.sh/max-strict-check-resource-keys";
    /// The root quota.
    pub const ROOT: &str = "koordinator-root-quota";
    /// The system quota.
    pub const SYSTEM: &str = "koordinator-system-quota";
    /// The default quota.
    pub const DEFAULT: &str = "koordinator-default-quota";
}
use keys::*;

/// One quota as the topology keeps it.
#[derive(Debug, Clone, Default)]
pub struct QuotaInfo {
    /// Name (unique across namespaces).
    pub name: String,
    /// Namespace of the object.
    pub namespace: String,
    /// Parent name.
    pub parent: String,
    /// May have children.
    pub is_parent: bool,
    /// Tree id.
    pub tree_id: String,
    /// Tree root.
    pub is_root: bool,
    /// Skips min-sum checks.
    pub force_update: bool,
    /// `spec.min`.
    pub min: Option<ResourceList>,
    /// `spec.max`.
    pub max: Option<ResourceList>,
}

fn label<'a>(o: &'a ElasticQuota, k: &str) -> &'a str {
    o.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(k))
        .map(String::as_str)
        .unwrap_or_default()
}

fn annotation<'a>(o: &'a ElasticQuota, k: &str) -> &'a str {
    o.metadata
        .annotations
        .as_ref()
        .and_then(|l| l.get(k))
        .map(String::as_str)
        .unwrap_or_default()
}

/// The namespaces a quota's annotation binds (invalid JSON binds none).
pub fn bound_namespaces(o: &ElasticQuota) -> Vec<String> {
    serde_json::from_str(annotation(o, NAMESPACES)).unwrap_or_default()
}

impl QuotaInfo {
    /// The topology entry of a quota object.
    pub fn of(o: &ElasticQuota) -> Self {
        let name = o.metadata.name.clone().unwrap_or_default();
        let parent = match label(o, PARENT) {
            "" if name == ROOT => String::new(),
            "" => ROOT.to_owned(),
            p => p.to_owned(),
        };
        Self {
            namespace: o.metadata.namespace.clone().unwrap_or_default(),
            parent,
            is_parent: label(o, IS_PARENT) == "true",
            tree_id: label(o, TREE_ID).to_owned(),
            is_root: label(o, IS_ROOT) == "true",
            force_update: label(o, FORCE_UPDATE) == "true",
            min: o.spec.min.clone(),
            max: o.spec.max.clone(),
            name,
        }
    }
}

/// The quota tree.
#[derive(Debug, Clone, Default)]
pub struct Topology {
    /// Quotas by name.
    pub quotas: BTreeMap<String, QuotaInfo>,
    /// Children by parent name.
    pub children: BTreeMap<String, BTreeSet<String>>,
    /// Namespace → quota (from `namespaces` annotations).
    pub namespaces: BTreeMap<String, String>,
    /// The quota objects (all namespaces).
    pub objects: Vec<ElasticQuota>,
}

fn to_quota(d: &DynamicObject) -> Option<ElasticQuota> {
    serde_json::to_value(d)
        .ok()
        .and_then(|v| serde_json::from_value(v).ok())
}

/// A pod from cluster state.
pub fn to_pod(d: &DynamicObject) -> Option<Pod> {
    serde_json::to_value(d)
        .ok()
        .and_then(|v| serde_json::from_value(v).ok())
}

impl Topology {
    /// Builds the tree from every ElasticQuota in the cluster state.
    pub fn from_state(ctx: &Context) -> Result<Self, LookupError> {
        let mut objects: Vec<ElasticQuota> = ctx
            .list::<ElasticQuota>(None)?
            .iter()
            .filter_map(|d| to_quota(d))
            .collect();
        objects.sort_by(|a, b| {
            a.metadata
                .name
                .cmp(&b.metadata.name)
                .then(a.metadata.namespace.cmp(&b.metadata.namespace))
        });
        let mut t = Topology::default();
        t.quotas.insert(
            ROOT.to_owned(),
            QuotaInfo {
                name: ROOT.into(),
                is_parent: true,
                ..QuotaInfo::default()
            },
        );
        t.children.insert(ROOT.to_owned(), BTreeSet::new());
        for o in &objects {
            let info = QuotaInfo::of(o);
            for ns in bound_namespaces(o) {
                t.namespaces.entry(ns).or_insert_with(|| info.name.clone());
            }
            if info.name != ROOT {
                t.children
                    .entry(info.parent.clone())
                    .or_default()
                    .insert(info.name.clone());
                t.children.entry(info.name.clone()).or_default();
            }
            t.quotas.insert(info.name.clone(), info);
        }
        t.objects = objects;
        Ok(t)
    }

    /// QN: the quota a pod is charged to.
    pub fn quota_name_of(&self, pod: &Pod, namespace: &str, ctx: &Context) -> String {
        if let Some(n) = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(NAME))
            .filter(|n| !n.is_empty())
        {
            return n.clone();
        }
        if ctx.gates().enabled("DisableDefaultQuota") {
            return String::new();
        }
        if self.objects.iter().any(|o| {
            o.metadata.name.as_deref() == Some(namespace)
                && o.metadata.namespace.as_deref() == Some(namespace)
        }) {
            return namespace.to_owned();
        }
        if let Some(q) = self.namespaces.get(namespace) {
            return q.clone();
        }
        DEFAULT.to_owned()
    }
}

/// The pod's namespace: its own, or the request's when empty (PM-0.3).
pub fn pod_namespace(pod: &Pod, req_ns: Option<&str>) -> String {
    pod.metadata
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .or_else(|| req_ns.map(str::to_owned))
        .unwrap_or_default()
}

/// PV-3.2: a pod cannot be charged to a parent quota.
pub fn pv_3_2_not_on_parent(pod: &Pod, ns: &str, ctx: &Context) -> Result<(), String> {
    if ctx.gates().enabled("SupportParentQuotaSubmitPod") {
        return Ok(());
    }
    let t = Topology::from_state(ctx).map_err(|e| e.to_string())?;
    let q = t.quota_name_of(pod, ns, ctx);
    if q.is_empty() || q == DEFAULT {
        return Ok(());
    }
    match t.quotas.get(&q) {
        Some(info) if info.is_parent => Err(format!(
            "pod can not be linked to a parentQuotaGroup,quota:{q}, pod:{}",
            pod.metadata.name.as_deref().unwrap_or_default()
        )),
        _ => Ok(()),
    }
}

use quota_state::ledger::QUOTA_KEYS;

fn parse_list(text: &str) -> Result<ResourceList, String> {
    if text.is_empty() {
        return Ok(ResourceList::new());
    }
    let v: Option<ResourceList> = serde_json::from_str(text).map_err(|e| e.to_string())?;
    Ok(v.unwrap_or_default())
}

/// PV-4.1, 4.2: the quota a pod is admitted against, or `None` when nothing is checked.
pub fn admission_quota(
    req: &Request<Pod>,
    ns: &str,
    ctx: &Context,
    t: &Topology,
) -> Option<String> {
    let quota = match req.operation {
        Operation::Create => t.quota_name_of(&req.object, ns, ctx),
        Operation::Update if ctx.gates().enabled("EnableQuotaAdmissionOnUpdate") => {
            let new = t.quota_name_of(&req.object, ns, ctx);
            let old = req
                .old_object
                .as_ref()
                .map(|o| t.quota_name_of(o, ns, ctx))
                .unwrap_or_default();
            if new == old {
                return None;
            }
            new
        }
        _ => return None,
    };
    (!quota.is_empty() && ![DEFAULT, SYSTEM, ROOT].contains(&quota.as_str())).then_some(quota)
}

/// PV-4: the pod fits its quota's limit given the admitted usage.
pub fn pv_4_quota_admission(req: &Request<Pod>, ns: &str, ctx: &Context) -> Result<(), String> {
    let t = Topology::from_state(ctx).map_err(|e| e.to_string())?;
    let Some(quota) = admission_quota(req, ns, ctx, &t) else {
        return Ok(());
    };
    let found: Vec<&ElasticQuota> = t
        .objects
        .iter()
        .filter(|o| o.metadata.name.as_deref() == Some(quota.as_str()))
        .collect();
    let eq = match found.as_slice() {
        [] => return Err(format!("elastic quota {quota} not found")),
        [one] => *one,
        _ => return Err(format!("more than one elastic quota {quota} found")),
    };
    let used = amounts(Some(&parse_list(annotation(eq, CHILD_REQUEST))?));
    let admission = parse_list(annotation(eq, ADMISSION))?;
    let max = eq.spec.max.clone().unwrap_or_default();
    let limit = amounts(Some(if admission.is_empty() {
        &max
    } else {
        &admission
    }));
    if !max.keys().any(|k| QUOTA_KEYS.contains(&k.as_str())) {
        return Ok(());
    }
    let pod = &req.object;
    let finished = matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Failed" | "Succeeded")
    );
    let request: Amounts = if finished {
        Amounts::new()
    } else {
        let r = pod.spec.as_ref().map(pod_request).unwrap_or_default();
        r.into_iter()
            .filter(|(k, v)| v.milli != 0 && max.get(k).is_some_and(|m| Amount::of(m).milli != 0))
            .collect()
    };
    if request.is_empty() {
        return Ok(());
    }
    let (mut r_ex, mut u_ex, mut l_ex) = (Amounts::new(), Amounts::new(), Amounts::new());
    for (k, r) in &request {
        let Some(l) = limit.get(k) else { continue };
        let u = used.get(k).copied();
        if u.map(|u| u.milli).unwrap_or(0) + r.milli > l.milli {
            r_ex.insert(k.clone(), *r);
            if let Some(u) = u {
                u_ex.insert(k.clone(), u);
            }
            l_ex.insert(k.clone(), *l);
        }
    }
    if !r_ex.is_empty() {
        return Err(format!(
            "exceeded quota: {}/{quota}, requested: {}, used: {}, limited: {}",
            eq.metadata.namespace.as_deref().unwrap_or_default(),
            list_text(&r_ex),
            list_text(&u_ex),
            list_text(&l_ex)
        ));
    }
    Ok(())
}

fn labels_mut(o: &mut ElasticQuota) -> &mut BTreeMap<String, String> {
    o.metadata.labels.get_or_insert_with(BTreeMap::new)
}

/// `/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota` (QM-0..QM-4).
pub struct QuotaDefaulter;

impl Mutator for QuotaDefaulter {
    type Object = ElasticQuota;

    fn mutate(&self, req: &Request<ElasticQuota>, q: &mut ElasticQuota, ctx: &Context) -> Verdict {
        if req.resource.resource != "elasticquotas"
            || req.sub_resource.as_deref().is_some_and(|s| !s.is_empty())
            || req.operation != Operation::Create
        {
            return Verdict::default();
        }
        let name = q.metadata.name.clone().unwrap_or_default();
        if name == ROOT {
            return Verdict::default(); // QM-1
        }
        let mut applied = Vec::new();
        if label(q, PARENT).is_empty() {
            labels_mut(q).insert(PARENT.into(), ROOT.into()); // QM-2
            applied.push("QM-2");
        }
        let parent = label(q, PARENT).to_owned();
        if label(q, TREE_ID).is_empty() && parent != ROOT {
            // QM-3
            let t = match Topology::from_state(ctx) {
                Ok(t) => t,
                Err(e) => return Verdict::errored("QM-3", 500, e.to_string()),
            };
            match t.quotas.get(&parent) {
                None => {
                    return Verdict::errored(
                        "QM-3",
                        400,
                        format!("fill quota {name} failed, parent not exist"),
                    );
                }
                Some(p) if !p.tree_id.is_empty() => {
                    labels_mut(q).insert(TREE_ID.into(), p.tree_id.clone());
                    applied.push("QM-3");
                }
                _ => {}
            }
        }
        // QM-4
        let max = q.spec.max.clone();
        let current = annotation(q, SHARED_WEIGHT).to_owned();
        let new_text = if current.is_empty() {
            Some(
                max.as_ref()
                    .map(canonical_json)
                    .unwrap_or_else(|| "null".into()),
            )
        } else {
            let mut sw: ResourceList = match serde_json::from_str::<Option<ResourceList>>(&current)
            {
                Ok(v) => v.unwrap_or_default(),
                Err(e) => {
                    return Verdict::errored(
                        "QM-4",
                        400,
                        format!("fillDefaultQuotaInfo unmarshal sharedWeight failed:{e}"),
                    );
                }
            };
            let maxm = max.clone().unwrap_or_default();
            let mut changed = false;
            for (k, v) in &maxm {
                if !sw.contains_key(k) {
                    sw.insert(k.clone(), v.clone());
                    changed = true;
                }
            }
            let before = sw.len();
            sw.retain(|k, _| maxm.contains_key(k));
            changed |= sw.len() != before;
            changed.then(|| canonical_json(&sw))
        };
        if let Some(text) = new_text {
            q.metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(SHARED_WEIGHT.into(), text);
            applied.push("QM-4");
        }
        Verdict {
            applied,
            ..Verdict::default()
        }
    }

    fn denial(&self, _: &Request<ElasticQuota>, errors: &[admission_kit::FieldError]) -> Status {
        Status {
            code: Some(400),
            message: crate::aggregate(errors),
            ..Status::default()
        }
    }
}

fn neg_keys(rl: &Option<ResourceList>) -> Vec<String> {
    rl.iter()
        .flatten()
        .filter(|(_, v)| Amount::of(v).milli < 0)
        .map(|(k, _)| k.clone())
        .collect()
}

/// QV-S: checks of the quota on its own.
fn qv_s_self(q: &ElasticQuota) -> Result<(), String> {
    let name = q.metadata.name.clone().unwrap_or_default();
    let neg = neg_keys(&q.spec.max);
    if !neg.is_empty() {
        return Err(format!(
            "{name} quota.Spec.Max's value < 0, in dimensions :[{}]",
            neg.join(" ")
        ));
    }
    let neg = neg_keys(&q.spec.min);
    if !neg.is_empty() {
        return Err(format!(
            "{name} quota.Spec.Min's value < 0, in dimensions :[{}]",
            neg.join(" ")
        ));
    }
    let sw = annotation(q, SHARED_WEIGHT);
    if !sw.is_empty() {
        let list: Option<ResourceList> = serde_json::from_str(sw).map_err(|e| e.to_string())?;
        let neg = neg_keys(&list);
        if !neg.is_empty() {
            return Err(format!(
                "{name} quota.Annotation[{SHARED_WEIGHT}]'s value < 0, in dimension :[{}]",
                neg.join(" ")
            ));
        }
    }
    let max = q.spec.max.clone().unwrap_or_default();
    for (k, v) in q.spec.min.iter().flatten() {
        match max.get(k) {
            None => {
                return Err(format!(
                    "resourceKey {k} of quota {name} is included in min, which is not included in max"
                ));
            }
            Some(m) if Amount::of(v).milli > Amount::of(m).milli => {
                return Err(format!(
                    "resourceKey {k} of quota {name} min {} > max {}",
                    Amount::of(v).canonical(),
                    Amount::of(m).canonical()
                ));
            }
            _ => {}
        }
    }
    let strict = annotation(q, STRICT_KEYS);
    if !strict.is_empty() {
        let keys: Vec<String> = serde_json::from_str(strict).map_err(|e| {
            format!("{name} quota.Annotation[{STRICT_KEYS}]'s value is invalid: {e}")
        })?;
        let used = q
            .status
            .as_ref()
            .and_then(|s| s.used.clone())
            .unwrap_or_default();
        for k in keys {
            let Some(u) = used.get(&k) else { continue };
            match max.get(&k) {
                None => {
                    return Err(format!(
                        "resourceKey {k} of quota {name} is included in used, which is not included in max but should check max >= used"
                    ));
                }
                Some(m) if Amount::of(m).milli < Amount::of(u).milli => {
                    return Err(format!(
                        "resourceKey {k} of quota {name} max {} < used {}",
                        Amount::of(m).canonical(),
                        Amount::of(u).canonical()
                    ));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

fn keys_of(rl: &Option<ResourceList>) -> BTreeSet<String> {
    rl.iter().flatten().map(|(k, _)| k.clone()).collect()
}

fn bound_pods(name: &str, old_namespaces: &[String], ctx: &Context) -> Result<Vec<Pod>, String> {
    let pods: Vec<Pod> = ctx
        .list::<Pod>(None)
        .map_err(|e| e.to_string())?
        .iter()
        .filter_map(|d| to_pod(d))
        .collect();
    Ok(pods
        .into_iter()
        .filter(|p| {
            let ns = p.metadata.namespace.as_deref().unwrap_or_default();
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(NAME))
                .map(String::as_str)
                == Some(name)
                || ns == name
                || old_namespaces.iter().any(|o| o == ns)
        })
        .collect())
}

/// QV-T: checks against the tree.
fn qv_t_topology(
    new: &QuotaInfo,
    old: Option<&QuotaInfo>,
    old_namespaces: &[String],
    t: &Topology,
    ctx: &Context,
) -> Result<(), String> {
    let name = &new.name;
    if name == ROOT {
        return Ok(());
    }
    // QV-T1
    if let Some(old) = old
        && old.is_parent != new.is_parent
    {
        if !new.is_parent && t.children.get(name).is_some_and(|c| !c.is_empty()) {
            return Err(format!(
                "quota has children, isParent is forbidden to modify as false, quotaName:{name}"
            ));
        }
        if new.is_parent && !bound_pods(name, old_namespaces, ctx)?.is_empty() {
            return Err(format!(
                "quota has bound pods, isParent is forbidden to modify as true, quotaName: {name}"
            ));
        }
    }
    // QV-T2
    if let Some(old) = old
        && old.tree_id != new.tree_id
    {
        return Err(format!(
            "{name} tree id changed [{}] vs [{}]",
            old.tree_id, new.tree_id
        ));
    }
    if new.parent != ROOT
        && let Some(p) = t.quotas.get(&new.parent)
        && p.tree_id != new.tree_id
    {
        return Err(format!(
            "{name} tree id is different from parent {}, [{}] vs [{}]",
            new.parent, new.tree_id, p.tree_id
        ));
    }
    let children: Vec<&String> = t
        .children
        .get(name)
        .map(|c| c.iter().collect())
        .unwrap_or_default();
    for c in &children {
        if let Some(ci) = t.quotas.get(*c)
            && ci.tree_id != new.tree_id
        {
            return Err(format!(
                "{name} tree id is different from child {c}, [{}] vs [{}]",
                new.tree_id, ci.tree_id
            ));
        }
    }
    // QV-T3
    if new.parent == ROOT && !new.is_parent {
        return Ok(());
    }
    // QV-T4
    let parent = if new.parent != ROOT {
        let Some(p) = t.quotas.get(&new.parent) else {
            return Err(format!(
                "{name} has parentName {} but not find parentInfo in quotaInfoMap",
                new.parent
            ));
        };
        if !t.children.contains_key(&new.parent) {
            return Err(format!(
                "{name} has parentName {} but not find parentInfo in quotaHierarchyInfo",
                new.parent
            ));
        }
        if !p.is_parent {
            return Err(format!(
                "{name} has parentName {} but the parentQuotaInfo's IsParent is false",
                new.parent
            ));
        }
        Some(p)
    } else {
        None
    };
    // QV-T5
    let prefix = "failed to check sub and parent group quotaKey, err: checkSubAndParentGroupQuotaKey failed: ";
    let subset_only = ctx.gates().enabled("ElasticQuotaEnableUpdateResourceKey");
    let check = |upper: &QuotaInfo, lower: &QuotaInfo| -> Result<(), String> {
        let (um, lm) = (keys_of(&upper.max), keys_of(&lower.max));
        if subset_only {
            if !lm.is_subset(&um) {
                return Err(format!(
                    "{prefix}{}'s max keys are not all included in {}'s",
                    lower.name, upper.name
                ));
            }
        } else if um != lm {
            return Err(format!(
                "{prefix}{}'s max keys are not the same with {}'s",
                upper.name, lower.name
            ));
        }
        if !keys_of(&lower.min).is_subset(&keys_of(&upper.min)) {
            return Err(format!(
                "{prefix}{}'s min keys are not all included in {}'s",
                lower.name, upper.name
            ));
        }
        Ok(())
    };
    if let Some(p) = parent {
        check(p, new)?;
    }
    for c in &children {
        let Some(ci) = t.quotas.get(*c) else {
            return Err(format!(
                "{prefix}internal error: quotaInfoMap and quotaTree information out of sync, losed :{c}"
            ));
        };
        // A child's max keys are compared with this quota's: the child is the lower side.
        if subset_only {
            if !keys_of(&ci.max).is_subset(&keys_of(&new.max)) {
                return Err(format!(
                    "{prefix}{c}'s max keys are not all included in {name}'s"
                ));
            }
        } else if keys_of(&ci.max) != keys_of(&new.max) {
            return Err(format!(
                "{prefix}{c}'s max keys are not the same with {name}'s"
            ));
        }
        if !keys_of(&ci.min).is_subset(&keys_of(&new.min)) {
            return Err(format!(
                "{prefix}{c}'s min keys are not all included in {name}'s"
            ));
        }
    }
    // QV-T6
    if new.force_update || new.is_root {
        return Ok(());
    }
    let new_min = amounts(new.min.as_ref());
    if let Some(p) = parent {
        let mut sum = Amounts::new();
        for s in t
            .children
            .get(&p.name)
            .into_iter()
            .flatten()
            .filter(|s| *s != name)
        {
            if let Some(si) = t.quotas.get(s) {
                crate::resources::add(&mut sum, &amounts(si.min.as_ref()));
            }
        }
        crate::resources::add(&mut sum, &new_min);
        let pmin = amounts(p.min.as_ref());
        if sum
            .iter()
            .any(|(k, v)| v.milli > pmin.get(k).map(|x| x.milli).unwrap_or(0))
        {
            return Err(format!(
                "checkMinQuotaSum all brothers' MinQuota > parent MinQuota, parent: {}",
                p.name
            ));
        }
    }
    if !children.is_empty() {
        let mut sum = Amounts::new();
        for c in &children {
            if let Some(ci) = t.quotas.get(*c) {
                crate::resources::add(&mut sum, &amounts(ci.min.as_ref()));
            }
        }
        if sum
            .iter()
            .any(|(k, v)| v.milli > new_min.get(k).map(|x| x.milli).unwrap_or(0))
        {
            return Err(format!(
                "checkMinQuotaSum all children's MinQuota > current MinQuota, current: {name}"
            ));
        }
    }
    Ok(())
}

/// `/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota` (QV).
pub struct QuotaValidator;

fn relevant(q: &ElasticQuota) -> (String, String, String, String, serde_json::Value) {
    (
        label(q, PARENT).to_owned(),
        label(q, IS_PARENT).to_owned(),
        label(q, TREE_ID).to_owned(),
        annotation(q, NAMESPACES).to_owned(),
        serde_json::to_value(&q.spec).unwrap_or_default(),
    )
}

fn validate_quota(
    req: &Request<ElasticQuota>,
    ctx: &Context,
) -> Result<(), (&'static str, String)> {
    let t = Topology::from_state(ctx).map_err(|e| ("QV-0", e.to_string()))?;
    let q = &req.object;
    let name = q.metadata.name.clone().unwrap_or_default();
    match req.operation {
        Operation::Create => {
            if t.quotas.contains_key(&name) {
                return Err(("QV-C1", format!("AddQuota quota already exist:{name}")));
            }
            for ns in bound_namespaces(q) {
                if let Some(other) = t.namespaces.get(&ns) {
                    return Err((
                        "QV-C2",
                        format!(
                            "AddQuota quota {name}'s annotation namespace {ns} is already bound to quota {other}"
                        ),
                    ));
                }
            }
            qv_s_self(q).map_err(|e| ("QV-S", e))?;
            qv_t_topology(&QuotaInfo::of(q), None, &[], &t, ctx).map_err(|e| ("QV-T", e))
        }
        Operation::Update => {
            let old = req.old_object.as_ref().cloned().unwrap_or_default();
            if relevant(&old) == relevant(q) {
                return Ok(());
            }
            if name == SYSTEM || name == ROOT {
                return Err(("QV-U2", format!("invalid quota {name}")));
            }
            for ns in bound_namespaces(q) {
                if let Some(other) = t.namespaces.get(&ns)
                    && *other != name
                {
                    return Err((
                        "QV-U3",
                        format!(
                            "UpdadteQuota, quota {name} update namespaces, but namespace {ns} is already bound to quota {other}"
                        ),
                    ));
                }
            }
            let Some(current) = t.quotas.get(&name) else {
                return Err((
                    "QV-U4",
                    format!("UpdateQuota quota not exist in quotaInfoMap:{name}"),
                ));
            };
            qv_s_self(q).map_err(|e| ("QV-S", e))?;
            qv_t_topology(
                &QuotaInfo::of(q),
                Some(current),
                &bound_namespaces(&old),
                &t,
                ctx,
            )
            .map_err(|e| ("QV-T", e))
        }
        Operation::Delete => {
            if [SYSTEM, ROOT, DEFAULT].contains(&name.as_str()) {
                return Err(("QV-D1", format!("can not delete quotaGroup :{name}")));
            }
            if !t.quotas.contains_key(&name) {
                return Err(("QV-D2", format!("not found quota:{name}")));
            }
            let n = t.children.get(&name).map(BTreeSet::len).unwrap_or(0);
            if n > 0 {
                return Err((
                    "QV-D3",
                    format!("delete quota failed, quota {name} has {n} child quotas"),
                ));
            }
            let pods: Vec<Pod> = ctx
                .list::<Pod>(None)
                .map_err(|e| ("QV-D4", e.to_string()))?
                .iter()
                .filter_map(|d| to_pod(d))
                .collect();
            let mut names: Vec<String> = pods
                .iter()
                .filter(|p| {
                    p.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(NAME))
                        .map(String::as_str)
                        == Some(name.as_str())
                })
                .map(|p| p.metadata.name.clone().unwrap_or_default())
                .collect();
            if !names.is_empty() {
                names.sort();
                let n = names.len();
                let mut shown: Vec<String> = names.into_iter().take(2).collect();
                if n > 2 {
                    shown.push("...".into());
                }
                return Err((
                    "QV-D4",
                    format!(
                        "delete quota failed, quota {name} has {n} child pods: {}",
                        shown.join(", ")
                    ),
                ));
            }
            Ok(())
        }
        Operation::Connect => Ok(()),
    }
}

impl Validator for QuotaValidator {
    type Object = ElasticQuota;

    fn validate(&self, req: &Request<ElasticQuota>, ctx: &Context) -> Verdict {
        if req.resource.resource != "elasticquotas"
            || req.sub_resource.as_deref().is_some_and(|s| !s.is_empty())
        {
            return Verdict::default();
        }
        match validate_quota(req, ctx) {
            Ok(()) => Verdict::default(),
            Err((rule, text)) => Verdict::errored(rule, 400, text),
        }
    }

    fn allowed_status(&self) -> Option<Status> {
        Some(Status {
            code: Some(200),
            ..Status::default()
        })
    }
}
