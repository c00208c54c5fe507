//! The ElasticQuota tree (spec §7.1) and the rules that read only the tree: the quota name of a
//! pod (QN), PV-3.2 and the ElasticQuota validation (QV-C, QV-U, QV-D with QV-S and QV-T).
//!
//! quota-state runs them on the tree it keeps from its watches and answers scheduling-webhook
//! over gRPC; `scheduling-webhook review` runs the same functions on a tree built from
//! `--state` files, so both give the same decisions.

use std::collections::{BTreeMap, BTreeSet};

use crate::proto::Operation;
use admission_compat::resources::{Amount, Amounts, add, amounts, cmp_quantities, go_text};

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
#[derive(Debug, Clone, Default, PartialEq)]
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

/// A quota's label `k` ("" when absent).
pub fn label<'a>(o: &'a ElasticQuota, k: &str) -> &'a str {
    o.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(k))
        .map(String::as_str)
        .unwrap_or_default()
}

/// A quota's annotation `k` ("" when absent).
pub fn annotation<'a>(o: &'a ElasticQuota, k: &str) -> &'a str {
    o.metadata
        .annotations
        .as_ref()
        .and_then(|l| l.get(k))
        .map(String::as_str)
        .unwrap_or_default()
}

/// A pod's quota label `quota.scheduling.koordinator.sh/name` ("" when absent).
pub fn pod_quota_label(p: &k8s_openapi::api::core::v1::Pod) -> &str {
    p.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(NAME))
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
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Topology {
    /// Quotas by name.
    pub quotas: BTreeMap<String, QuotaInfo>,
    /// Children by parent name.
    pub children: BTreeMap<String, BTreeSet<String>>,
    /// Namespace → quota (from `namespaces` annotations; the first quota by name wins).
    pub namespaces: BTreeMap<String, String>,
    /// Quotas that live in the namespace of their own name (QN-3).
    pub self_named: BTreeSet<String>,
    /// Whether `koordinator-root-quota` is an object of the cluster: the tree always holds a
    /// root entry (lookups find it), but upstream's quota map, which QV-C1 reads, holds it only
    /// once such an object was added.
    pub root_object: bool,
}

impl Topology {
    /// Builds the tree from quota objects (any order).
    pub fn from_objects<'a>(objects: impl IntoIterator<Item = &'a ElasticQuota>) -> Self {
        Self::build(
            objects
                .into_iter()
                .map(|o| (QuotaInfo::of(o), bound_namespaces(o))),
        )
    }

    /// Builds the tree from entries and the namespaces each binds (any order: sorted here by
    /// name, then namespace, the order upstream's informer list gives).
    pub fn build(entries: impl IntoIterator<Item = (QuotaInfo, Vec<String>)>) -> Self {
        let mut entries: Vec<(QuotaInfo, Vec<String>)> = entries.into_iter().collect();
        entries.sort_by(|a, b| {
            (a.0.name.as_str(), a.0.namespace.as_str())
                .cmp(&(b.0.name.as_str(), b.0.namespace.as_str()))
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
        for (info, namespaces) in entries {
            for ns in namespaces {
                t.namespaces.entry(ns).or_insert_with(|| info.name.clone());
            }
            if info.name == info.namespace {
                t.self_named.insert(info.name.clone());
            }
            if info.name != ROOT {
                t.children
                    .entry(info.parent.clone())
                    .or_default()
                    .insert(info.name.clone());
                t.children.entry(info.name.clone()).or_default();
            } else {
                t.root_object = true;
            }
            t.quotas.insert(info.name.clone(), info);
        }
        t
    }

    /// Adds one quota to a built tree, leaving it as [`Topology::build`] over every entry would
    /// (a tree derived again for each new quota made adding n quotas one at a time quadratic).
    /// Only a quota of a name the tree lacks is added in place; another (a second quota of one
    /// name, the root) is not added (`false`): the caller builds anew.
    #[must_use]
    pub fn insert(&mut self, info: QuotaInfo, namespaces: Vec<String>) -> bool {
        if info.name == ROOT || self.quotas.contains_key(&info.name) {
            return false;
        }
        // `build` binds a namespace to the first quota by name: a new name wins over a later one.
        for ns in namespaces {
            match self.namespaces.get_mut(&ns) {
                Some(bound) if *bound < info.name => {}
                Some(bound) => bound.clone_from(&info.name),
                None => {
                    self.namespaces.insert(ns, info.name.clone());
                }
            }
        }
        if info.name == info.namespace {
            self.self_named.insert(info.name.clone());
        }
        self.children
            .entry(info.parent.clone())
            .or_default()
            .insert(info.name.clone());
        self.children.entry(info.name.clone()).or_default();
        self.quotas.insert(info.name.clone(), info);
        true
    }
}

/// What QN, PV-3.2, PM-3 and QM-3 need to know of a quota.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QuotaRef {
    /// May have children.
    pub is_parent: bool,
    /// Tree id ("" when none).
    pub tree_id: String,
}

/// The lookups of the pod and quota rules: answered by a [`Topology`] in-process, or by a
/// snapshot of quota-state's answer (scheduling-webhook's gRPC client).
pub trait QuotaLookup {
    /// The quota of that name, if known.
    fn quota(&self, name: &str) -> Option<QuotaRef>;
    /// Whether a quota named `namespace` lives in that namespace (QN-3).
    fn self_named(&self, namespace: &str) -> bool;
    /// The quota whose `namespaces` annotation binds `namespace` (QN-4).
    fn bound_to(&self, namespace: &str) -> Option<String>;
}

impl QuotaLookup for Topology {
    fn quota(&self, name: &str) -> Option<QuotaRef> {
        self.quotas.get(name).map(|i| QuotaRef {
            is_parent: i.is_parent,
            tree_id: i.tree_id.clone(),
        })
    }

    fn self_named(&self, namespace: &str) -> bool {
        self.self_named.contains(namespace)
    }

    fn bound_to(&self, namespace: &str) -> Option<String> {
        self.namespaces.get(namespace).cloned()
    }
}

/// QN: the quota a pod in `namespace` with quota label `label` is charged to.
pub fn quota_name(
    view: &dyn QuotaLookup,
    label: Option<&str>,
    namespace: &str,
    disable_default_quota: bool,
) -> String {
    if let Some(l) = label.filter(|l| !l.is_empty()) {
        return l.to_owned(); // QN-1
    }
    if disable_default_quota {
        return String::new(); // QN-2
    }
    if view.self_named(namespace) {
        return namespace.to_owned(); // QN-3
    }
    view.bound_to(namespace) // QN-4
        .unwrap_or_else(|| DEFAULT.to_owned()) // QN-5
}

/// PV-3.2: a pod cannot be charged to a parent quota (`quota` is the pod's QN).
pub fn pv_3_2_not_on_parent(view: &dyn QuotaLookup, quota: &str, pod: &str) -> Result<(), String> {
    if quota.is_empty() || quota == DEFAULT {
        return Ok(());
    }
    match view.quota(quota) {
        Some(q) if q.is_parent => Err(format!(
            "pod can not be linked to a parentQuotaGroup,quota:{quota}, pod:{pod}"
        )),
        _ => Ok(()),
    }
}

/// PV-4.1, 4.2: the quota a pod is admitted against, from the QN of the new pod and, on UPDATE,
/// of the old one; `None` when nothing is checked.
pub fn admission_quota(new: String, old: Option<&str>) -> Option<String> {
    if old.is_some_and(|o| o == new) {
        return None;
    }
    (!new.is_empty() && ![DEFAULT, SYSTEM, ROOT].contains(&new.as_str())).then_some(new)
}

/// The pods QV-T1 and QV-D4 read.
pub trait PodIndex {
    /// Names of the pods labelled with quota `quota`.
    fn labelled(&self, quota: &str) -> Vec<String>;
    /// Whether a pod is labelled `quota`, lives in the namespace named `quota`, or in one of
    /// `namespaces` (QV-T1).
    fn any_bound(&self, quota: &str, namespaces: &[String]) -> bool;
}

/// The feature gates the tree rules read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TreeGates {
    /// `ElasticQuotaEnableUpdateResourceKey`: a child's max keys need only be a subset of its
    /// parent's (QV-T5).
    pub update_resource_key: bool,
}

fn neg_keys(rl: &Option<ResourceList>) -> Vec<String> {
    rl.iter()
        .flatten()
        .filter(|(_, v)| Amount::of(v).nano < 0)
        .map(|(k, _)| k.clone())
        .collect()
}

/// A refusal of the tree's rules: upstream's text and the field it is about, named as the decision
/// log and admission-check name fields (`metadata.labels[quota.scheduling.koordinator.sh/parent]`,
/// `spec.min[cpu]`; empty when the refusal is about no field of the object).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The field.
    pub field: String,
    /// Upstream's text.
    pub message: String,
}

fn at(field: impl Into<String>, message: String) -> Refused {
    Refused {
        field: field.into(),
        message,
    }
}

/// QV-S: checks of the quota on its own.
///
/// Refused: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: team-a}, spec: {min: {cpu: "3"}, max: {cpu: "2"}}}`
///
/// Admitted: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: team-a}, spec: {min: {cpu: "1"}, max: {cpu: "2"}}}`
fn qv_s_self(q: &ElasticQuota) -> Result<(), Refused> {
    let name = q.metadata.name.clone().unwrap_or_default();
    let neg = neg_keys(&q.spec.max);
    if !neg.is_empty() {
        return Err(at(
            "spec.max",
            format!(
                "{name} quota.Spec.Max's value < 0, in dimensions :[{}]",
                neg.join(" ")
            ),
        ));
    }
    let neg = neg_keys(&q.spec.min);
    if !neg.is_empty() {
        return Err(at(
            "spec.min",
            format!(
                "{name} quota.Spec.Min's value < 0, in dimensions :[{}]",
                neg.join(" ")
            ),
        ));
    }
    let sw = annotation(q, SHARED_WEIGHT);
    if !sw.is_empty() {
        // Decoded as Go decodes a ResourceList: its JSON and quantity errors in Go's words.
        let parsed = admission_compat::go::decode_resource_list(sw)
            .map_err(|e| at(format!("metadata.annotations[{SHARED_WEIGHT}]"), e))?;
        let neg: Vec<String> = parsed
            .iter()
            .filter(|(_, q)| q.negative && !q.is_zero())
            .map(|(k, _)| k.clone())
            .collect();
        if !neg.is_empty() {
            return Err(at(
                format!("metadata.annotations[{SHARED_WEIGHT}]"),
                format!(
                    "{name} quota.Annotation[{SHARED_WEIGHT}]'s value < 0, in dimension :[{}]",
                    neg.join(" ")
                ),
            ));
        }
    }
    let max = q.spec.max.clone().unwrap_or_default();
    for (k, v) in q.spec.min.iter().flatten() {
        match max.get(k) {
            None => {
                return Err(at(
                    format!("spec.min[{k}]"),
                    format!(
                        "resourceKey {k} of quota {name} is included in min, which is not included in max"
                    ),
                ));
            }
            Some(m) if cmp_quantities(v, m).is_gt() => {
                return Err(at(
                    format!("spec.min[{k}]"),
                    format!(
                        "resourceKey {k} of quota {name} min {} > max {}",
                        go_text(v),
                        go_text(m)
                    ),
                ));
            }
            _ => {}
        }
    }
    let strict = annotation(q, STRICT_KEYS);
    if !strict.is_empty() {
        let keys: Vec<String> = serde_json::from_str(strict).map_err(|e| {
            at(
                format!("metadata.annotations[{STRICT_KEYS}]"),
                format!("{name} quota.Annotation[{STRICT_KEYS}]'s value is invalid: {e}"),
            )
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
                    return Err(at(
                        "spec.max",
                        format!(
                            "resourceKey {k} of quota {name} is included in used, which is not included in max but should check max >= used"
                        ),
                    ));
                }
                Some(m) if cmp_quantities(m, u).is_lt() => {
                    return Err(at(
                        format!("spec.max[{k}]"),
                        format!(
                            "resourceKey {k} of quota {name} max {} < used {}",
                            go_text(m),
                            go_text(u)
                        ),
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

/// QV-T: checks against the tree.
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: parent-a, namespace: default, labels: {quota.scheduling.koordinator.sh/is-parent: "true"}}, spec: {max: {cpu: "100"}, min: {cpu: "10"}}}`
///
/// Refused: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: default, labels: {quota.scheduling.koordinator.sh/parent: parent-a}}, spec: {max: {cpu: "10", memory: 10Gi}, min: {cpu: "5"}}}`
///
/// Admitted: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-b, namespace: default, labels: {quota.scheduling.koordinator.sh/parent: parent-a}}, spec: {max: {cpu: "10"}, min: {cpu: "5"}}}`
fn qv_t_topology(
    new: &QuotaInfo,
    old: Option<&QuotaInfo>,
    old_namespaces: &[String],
    t: &Topology,
    pods: &dyn PodIndex,
    gates: TreeGates,
) -> Result<(), Refused> {
    let name = &new.name;
    if name == ROOT {
        return Ok(());
    }
    // QV-T1
    if let Some(old) = old
        && old.is_parent != new.is_parent
    {
        if !new.is_parent && t.children.get(name).is_some_and(|c| !c.is_empty()) {
            return Err(at(
                format!("metadata.labels[{IS_PARENT}]"),
                format!(
                    "quota has children, isParent is forbidden to modify as false, quotaName:{name}"
                ),
            ));
        }
        if new.is_parent && pods.any_bound(name, old_namespaces) {
            return Err(at(
                format!("metadata.labels[{IS_PARENT}]"),
                format!(
                    "quota has bound pods, isParent is forbidden to modify as true, quotaName: {name}"
                ),
            ));
        }
    }
    // QV-T2
    if let Some(old) = old
        && old.tree_id != new.tree_id
    {
        return Err(at(
            format!("metadata.labels[{TREE_ID}]"),
            format!(
                "{name} tree id changed [{}] vs [{}]",
                old.tree_id, new.tree_id
            ),
        ));
    }
    if new.parent != ROOT
        && let Some(p) = t.quotas.get(&new.parent)
        && p.tree_id != new.tree_id
    {
        return Err(at(
            format!("metadata.labels[{TREE_ID}]"),
            format!(
                "{name} tree id is different from parent {}, [{}] vs [{}]",
                new.parent, new.tree_id, p.tree_id
            ),
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
            return Err(at(
                format!("metadata.labels[{TREE_ID}]"),
                format!(
                    "{name} tree id is different from child {c}, [{}] vs [{}]",
                    new.tree_id, ci.tree_id
                ),
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
            return Err(at(
                format!("metadata.labels[{PARENT}]"),
                format!(
                    "{name} has parentName {} but not find parentInfo in quotaInfoMap",
                    new.parent
                ),
            ));
        };
        if !t.children.contains_key(&new.parent) {
            return Err(at(
                format!("metadata.labels[{PARENT}]"),
                format!(
                    "{name} has parentName {} but not find parentInfo in quotaHierarchyInfo",
                    new.parent
                ),
            ));
        }
        if !p.is_parent {
            return Err(at(
                format!("metadata.labels[{PARENT}]"),
                format!(
                    "{name} has parentName {} but the parentQuotaInfo's IsParent is false",
                    new.parent
                ),
            ));
        }
        Some(p)
    } else {
        None
    };
    // QV-T5
    let prefix = "failed to check sub and parent group quotaKey, err: checkSubAndParentGroupQuotaKey failed: ";
    let subset_only = gates.update_resource_key;
    let check = |upper: &QuotaInfo, lower: &QuotaInfo| -> Result<(), Refused> {
        let (um, lm) = (keys_of(&upper.max), keys_of(&lower.max));
        if subset_only {
            if !lm.is_subset(&um) {
                return Err(at(
                    "spec.max",
                    format!(
                        "{prefix}{}'s max keys are not all included in {}'s",
                        lower.name, upper.name
                    ),
                ));
            }
        } else if um != lm {
            return Err(at(
                "spec.max",
                format!(
                    "{prefix}{}'s max keys are not the same with {}'s",
                    upper.name, lower.name
                ),
            ));
        }
        if !keys_of(&lower.min).is_subset(&keys_of(&upper.min)) {
            return Err(at(
                "spec.min",
                format!(
                    "{prefix}{}'s min keys are not all included in {}'s",
                    lower.name, upper.name
                ),
            ));
        }
        Ok(())
    };
    if let Some(p) = parent {
        check(p, new)?;
    }
    for c in &children {
        let Some(ci) = t.quotas.get(*c) else {
            return Err(at(
                String::new(),
                format!(
                    "{prefix}internal error: quotaInfoMap and quotaTree information out of sync, losed :{c}"
                ),
            ));
        };
        // A child's max keys are compared with this quota's: the child is the lower side.
        if subset_only {
            if !keys_of(&ci.max).is_subset(&keys_of(&new.max)) {
                return Err(at(
                    "spec.max",
                    format!("{prefix}{c}'s max keys are not all included in {name}'s"),
                ));
            }
        } else if keys_of(&ci.max) != keys_of(&new.max) {
            return Err(at(
                "spec.max",
                format!("{prefix}{c}'s max keys are not the same with {name}'s"),
            ));
        }
        if !keys_of(&ci.min).is_subset(&keys_of(&new.min)) {
            return Err(at(
                "spec.min",
                format!("{prefix}{c}'s min keys are not all included in {name}'s"),
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
                add(&mut sum, &amounts(si.min.as_ref()));
            }
        }
        add(&mut sum, &new_min);
        let pmin = amounts(p.min.as_ref());
        if sum
            .iter()
            .any(|(k, v)| v.nano > pmin.get(k).map(|x| x.nano).unwrap_or(0))
        {
            return Err(at(
                "spec.min",
                format!(
                    "checkMinQuotaSum all brothers' MinQuota > parent MinQuota, parent: {}",
                    p.name
                ),
            ));
        }
    }
    if !children.is_empty() {
        let mut sum = Amounts::new();
        for c in &children {
            if let Some(ci) = t.quotas.get(*c) {
                add(&mut sum, &amounts(ci.min.as_ref()));
            }
        }
        if sum
            .iter()
            .any(|(k, v)| v.nano > new_min.get(k).map(|x| x.nano).unwrap_or(0))
        {
            return Err(at(
                "spec.min",
                format!(
                    "checkMinQuotaSum all children's MinQuota > current MinQuota, current: {name}"
                ),
            ));
        }
    }
    Ok(())
}

fn relevant(q: &ElasticQuota) -> (String, String, String, String, serde_json::Value) {
    (
        label(q, PARENT).to_owned(),
        label(q, IS_PARENT).to_owned(),
        label(q, TREE_ID).to_owned(),
        annotation(q, NAMESPACES).to_owned(),
        serde_json::to_value(&q.spec).unwrap_or_default(),
    )
}

/// QV-C, QV-U, QV-D with QV-S and QV-T: an ElasticQuota create, update or delete against the
/// tree. `q` is the object (on DELETE the old object), `old` the old object on UPDATE. The error
/// carries the rule id and upstream's text (which upstream sends with code 400).
///
/// QV-C1: a quota is not created twice (the root quota's object may be created while none
/// exists).
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: default, annotations: {quota.scheduling.koordinator.sh/namespaces: "[\"ns-a\"]"}}, spec: {max: {cpu: "10"}, min: {cpu: "5"}}}`
///
/// Refused: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: default, annotations: {quota.scheduling.koordinator.sh/namespaces: "[\"ns-a\"]"}}, spec: {max: {cpu: "10"}, min: {cpu: "5"}}}`
///
/// Admitted: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-b, namespace: default, annotations: {quota.scheduling.koordinator.sh/namespaces: "[\"ns-b\"]"}}, spec: {max: {cpu: "10"}, min: {cpu: "5"}}}`
///
/// QV-C2: a new quota binds no namespace (its `namespaces` annotation) another quota binds.
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: default, annotations: {quota.scheduling.koordinator.sh/namespaces: "[\"ns-a\"]"}}, spec: {max: {cpu: "10"}, min: {cpu: "5"}}}`
///
/// Refused: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-b, namespace: default, annotations: {quota.scheduling.koordinator.sh/namespaces: "[\"ns-a\"]"}}, spec: {max: {cpu: "10"}, min: {cpu: "5"}}}`
///
/// Admitted: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-b, namespace: default, annotations: {quota.scheduling.koordinator.sh/namespaces: "[\"ns-b\"]"}}, spec: {max: {cpu: "10"}, min: {cpu: "5"}}}`
///
/// QV-U2: the system and root quotas are not updated (beyond fields no rule reads).
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: koordinator-root-quota, namespace: koordinator-system}, spec: {max: {cpu: "100"}, min: {cpu: "100"}}}`
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: default, annotations: {quota.scheduling.koordinator.sh/namespaces: "[\"ns-a\"]"}}, spec: {max: {cpu: "10"}, min: {cpu: "5"}}}`
///
/// Refused on update: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: koordinator-root-quota, namespace: koordinator-system}, spec: {max: {cpu: "200"}, min: {cpu: "100"}}}`
///
/// Admitted on update: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: default, annotations: {quota.scheduling.koordinator.sh/namespaces: "[\"ns-a\"]"}}, spec: {max: {cpu: "20"}, min: {cpu: "5"}}}`
///
/// QV-U3: an updated quota binds no namespace another quota binds.
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: default, annotations: {quota.scheduling.koordinator.sh/namespaces: "[\"ns-a\"]"}}, spec: {max: {cpu: "10"}, min: {cpu: "5"}}}`
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-b, namespace: default, annotations: {quota.scheduling.koordinator.sh/namespaces: "[\"ns-b\"]"}}, spec: {max: {cpu: "10"}, min: {cpu: "5"}}}`
///
/// Refused on update: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: default, annotations: {quota.scheduling.koordinator.sh/namespaces: "[\"ns-b\"]"}}, spec: {max: {cpu: "10"}, min: {cpu: "5"}}}`
///
/// Admitted on update: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: default, annotations: {quota.scheduling.koordinator.sh/namespaces: "[\"ns-c\"]"}}, spec: {max: {cpu: "10"}, min: {cpu: "5"}}}`
///
/// QV-U4: the quota updated is in the tree.
///
/// QV-D1: the system, root and default quotas are never deleted.
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: koordinator-root-quota, namespace: koordinator-system}, spec: {max: {cpu: "100"}, min: {cpu: "100"}}}`
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: default, annotations: {quota.scheduling.koordinator.sh/namespaces: "[\"ns-a\"]"}}, spec: {max: {cpu: "10"}, min: {cpu: "5"}}}`
///
/// Refused on delete: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: koordinator-root-quota, namespace: koordinator-system}, spec: {max: {cpu: "100"}, min: {cpu: "100"}}}`
///
/// Admitted on delete: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: default, annotations: {quota.scheduling.koordinator.sh/namespaces: "[\"ns-a\"]"}}, spec: {max: {cpu: "10"}, min: {cpu: "5"}}}`
///
/// QV-D2: the quota deleted is in the tree.
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: default, annotations: {quota.scheduling.koordinator.sh/namespaces: "[\"ns-a\"]"}}, spec: {max: {cpu: "10"}, min: {cpu: "5"}}}`
///
/// Refused on delete: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-z, namespace: default}, spec: {max: {cpu: "10"}, min: {cpu: "5"}}}`
///
/// Admitted on delete: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: default, annotations: {quota.scheduling.koordinator.sh/namespaces: "[\"ns-a\"]"}}, spec: {max: {cpu: "10"}, min: {cpu: "5"}}}`
///
/// QV-D3: a quota with child quotas is not deleted.
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: parent-a, namespace: default, labels: {quota.scheduling.koordinator.sh/is-parent: "true"}}, spec: {max: {cpu: "100"}, min: {cpu: "50"}}}`
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-c, namespace: default, labels: {quota.scheduling.koordinator.sh/parent: parent-a}}, spec: {max: {cpu: "10"}, min: {cpu: "5"}}}`
///
/// Refused on delete: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: parent-a, namespace: default, labels: {quota.scheduling.koordinator.sh/is-parent: "true"}}, spec: {max: {cpu: "100"}, min: {cpu: "50"}}}`
///
/// Admitted on delete: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-c, namespace: default, labels: {quota.scheduling.koordinator.sh/parent: parent-a}}, spec: {max: {cpu: "10"}, min: {cpu: "5"}}}`
///
/// QV-D4: a quota that pods are charged to (by label) is not deleted; the first two are named.
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: default, annotations: {quota.scheduling.koordinator.sh/namespaces: "[\"ns-a\"]"}}, spec: {max: {cpu: "10"}, min: {cpu: "5"}}}`
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-b, namespace: default, annotations: {quota.scheduling.koordinator.sh/namespaces: "[\"ns-b\"]"}}, spec: {max: {cpu: "10"}, min: {cpu: "5"}}}`
///
/// State: `{apiVersion: v1, kind: Pod, metadata: {name: p, namespace: default, labels: {quota.scheduling.koordinator.sh/name: team-a}}, spec: {containers: [{name: c, image: busybox}]}}`
///
/// Refused on delete: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: default, annotations: {quota.scheduling.koordinator.sh/namespaces: "[\"ns-a\"]"}}, spec: {max: {cpu: "10"}, min: {cpu: "5"}}}`
///
/// Admitted on delete: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-b, namespace: default, annotations: {quota.scheduling.koordinator.sh/namespaces: "[\"ns-b\"]"}}, spec: {max: {cpu: "10"}, min: {cpu: "5"}}}`
pub fn validate(
    operation: Operation,
    q: &ElasticQuota,
    old: Option<&ElasticQuota>,
    t: &Topology,
    pods: &dyn PodIndex,
    gates: TreeGates,
) -> Result<(), (&'static str, String)> {
    validate_at(operation, q, old, t, pods, gates).map_err(|(rule, r)| (rule, r.message))
}

/// [`validate`], the refusal with the field it names.
pub fn validate_at(
    operation: Operation,
    q: &ElasticQuota,
    old: Option<&ElasticQuota>,
    t: &Topology,
    pods: &dyn PodIndex,
    gates: TreeGates,
) -> Result<(), (&'static str, Refused)> {
    let name = q.metadata.name.clone().unwrap_or_default();
    match operation {
        Operation::Create => {
            // The root entry every tree holds is not a quota upstream's map knows:
            // creating the root object while none exists passes.
            if t.quotas.contains_key(&name) && (name != ROOT || t.root_object) {
                return Err((
                    "QV-C1",
                    at(
                        "metadata.name",
                        format!("AddQuota quota already exist:{name}"),
                    ),
                ));
            }
            for ns in bound_namespaces(q) {
                if let Some(other) = t.namespaces.get(&ns) {
                    return Err((
                        "QV-C2",
                        at(
                            format!("metadata.annotations[{NAMESPACES}]"),
                            format!(
                                "AddQuota quota {name}'s annotation namespace {ns} is already bound to quota {other}"
                            ),
                        ),
                    ));
                }
            }
            qv_s_self(q).map_err(|e| ("QV-S", e))?;
            qv_t_topology(&QuotaInfo::of(q), None, &[], t, pods, gates).map_err(|e| ("QV-T", e))
        }
        Operation::Update => {
            let old = old.cloned().unwrap_or_default();
            if relevant(&old) == relevant(q) {
                return Ok(());
            }
            if name == SYSTEM || name == ROOT {
                return Err((
                    "QV-U2",
                    at("metadata.name", format!("invalid quota {name}")),
                ));
            }
            for ns in bound_namespaces(q) {
                if let Some(other) = t.namespaces.get(&ns)
                    && *other != name
                {
                    return Err((
                        "QV-U3",
                        at(
                            format!("metadata.annotations[{NAMESPACES}]"),
                            format!(
                                "UpdadteQuota, quota {name} update namespaces, but namespace {ns} is already bound to quota {other}"
                            ),
                        ),
                    ));
                }
            }
            let Some(current) = t.quotas.get(&name) else {
                return Err((
                    "QV-U4",
                    at(
                        "metadata.name",
                        format!("UpdateQuota quota not exist in quotaInfoMap:{name}"),
                    ),
                ));
            };
            qv_s_self(q).map_err(|e| ("QV-S", e))?;
            qv_t_topology(
                &QuotaInfo::of(q),
                Some(current),
                &bound_namespaces(&old),
                t,
                pods,
                gates,
            )
            .map_err(|e| ("QV-T", e))
        }
        Operation::Delete => {
            if [SYSTEM, ROOT, DEFAULT].contains(&name.as_str()) {
                return Err((
                    "QV-D1",
                    at(
                        "metadata.name",
                        format!("can not delete quotaGroup :{name}"),
                    ),
                ));
            }
            if !t.quotas.contains_key(&name) {
                return Err((
                    "QV-D2",
                    at("metadata.name", format!("not found quota:{name}")),
                ));
            }
            let n = t.children.get(&name).map(BTreeSet::len).unwrap_or(0);
            if n > 0 {
                return Err((
                    "QV-D3",
                    at(
                        "metadata.name",
                        format!("delete quota failed, quota {name} has {n} child quotas"),
                    ),
                ));
            }
            let mut names = pods.labelled(&name);
            if !names.is_empty() {
                names.sort();
                let n = names.len();
                let mut shown: Vec<String> = names.into_iter().take(2).collect();
                if n > 2 {
                    shown.push("...".into());
                }
                return Err((
                    "QV-D4",
                    at(
                        "metadata.name",
                        format!(
                            "delete quota failed, quota {name} has {n} child pods: {}",
                            shown.join(", ")
                        ),
                    ),
                ));
            }
            Ok(())
        }
        // Never asked (no operation named): nothing to judge.
        Operation::Unspecified => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cluster without pods.
    struct NoPods;

    impl PodIndex for NoPods {
        fn labelled(&self, _: &str) -> Vec<String> {
            Vec::new()
        }
        fn any_bound(&self, _: &str, _: &[String]) -> bool {
            false
        }
    }

    fn eq(name: &str, ns: &str, labels: &[(&str, &str)], namespaces: &str) -> ElasticQuota {
        let mut q = ElasticQuota::default();
        q.metadata.name = Some(name.into());
        q.metadata.namespace = Some(ns.into());
        q.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        if !namespaces.is_empty() {
            q.metadata.annotations = Some([(NAMESPACES.to_owned(), namespaces.to_owned())].into());
        }
        q
    }

    /// Any quotas, added one at a time in any order, make the tree `build` makes of them all.
    #[test]
    fn inserting_quotas_one_at_a_time_builds_the_same_tree() {
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..200 {
            let n = rng.usize(1..12);
            let names = ["a", "b", "c", "d", "e", ROOT, "team"];
            let objects: Vec<ElasticQuota> = (0..n)
                .map(|_| {
                    let name = names[rng.usize(0..names.len())];
                    let ns = ["team", "quotas", "a"][rng.usize(0..3)];
                    let parent = names[rng.usize(0..names.len())];
                    let bound = ["", r#"["apps"]"#, r#"["apps","team"]"#, r#"["x"]"#];
                    eq(
                        name,
                        ns,
                        &[(PARENT, parent), (IS_PARENT, "true")],
                        bound[rng.usize(0..bound.len())],
                    )
                })
                .collect();
            let mut order: Vec<&ElasticQuota> = objects.iter().collect();
            rng.shuffle(&mut order);
            let mut t = Topology::from_objects(std::iter::empty());
            let mut added: Vec<&ElasticQuota> = Vec::new();
            for o in order {
                added.push(o);
                if !t.insert(QuotaInfo::of(o), bound_namespaces(o)) {
                    t = Topology::from_objects(added.iter().copied());
                }
                assert_eq!(t, Topology::from_objects(added.iter().copied()));
            }
        }
    }

    #[test]
    fn qn_label_gate_own_namespace_binding_default() {
        let objects = [
            eq("team-a", "team-a", &[], ""),
            eq(
                "shared",
                "quotas",
                &[(IS_PARENT, "true")],
                r#"["apps","team-a"]"#,
            ),
            eq("zz", "quotas", &[], r#"["apps"]"#),
        ];
        let t = Topology::from_objects(&objects);
        assert_eq!(quota_name(&t, Some("x"), "apps", false), "x", "QN-1");
        assert_eq!(quota_name(&t, None, "apps", true), "", "QN-2");
        assert_eq!(quota_name(&t, None, "team-a", false), "team-a", "QN-3");
        assert_eq!(
            quota_name(&t, Some(""), "apps", false),
            "shared",
            "QN-4: first by name"
        );
        assert_eq!(quota_name(&t, None, "other", false), DEFAULT, "QN-5");
        assert_eq!(
            pv_3_2_not_on_parent(&t, "shared", "p"),
            Err("pod can not be linked to a parentQuotaGroup,quota:shared, pod:p".into())
        );
        assert_eq!(pv_3_2_not_on_parent(&t, "zz", "p"), Ok(()));
    }

    /// QV-C1 on the root quota, as upstream's map knows it: its CREATE passes while
    /// no root object exists, and is "already exist" once one does.
    #[test]
    fn qv_c1_the_root_quota_exists_once_created() {
        let root = eq(ROOT, "koordinator-system", &[(IS_PARENT, "true")], "");
        let create = |t: &Topology| {
            validate(
                Operation::Create,
                &root,
                None,
                t,
                &NoPods,
                TreeGates::default(),
            )
        };
        let empty = Topology::from_objects(&[]);
        assert!(
            empty.quotas.contains_key(ROOT),
            "lookups still find the root"
        );
        assert_eq!(create(&empty), Ok(()));
        let with_root = Topology::from_objects(std::slice::from_ref(&root));
        assert_eq!(
            create(&with_root),
            Err(("QV-C1", format!("AddQuota quota already exist:{ROOT}")))
        );
    }

    /// Each refusal names the field it is about, for the decision log and admission-check.
    #[test]
    fn refusals_name_their_fields() {
        let quota = |v: serde_json::Value| -> ElasticQuota { serde_json::from_value(v).unwrap() };
        let parent = quota(serde_json::json!({
            "metadata": {"name": "p", "namespace": "d", "labels": {IS_PARENT: "true", TREE_ID: "t1"},
                "annotations": {NAMESPACES: "[\"bound\"]"}},
            "spec": {"max": {"cpu": "10"}, "min": {"cpu": "5"}}}));
        let t = Topology::from_objects(std::slice::from_ref(&parent));
        let cases = [
            (
                serde_json::json!({"metadata": {"name": "a", "namespace": "d"},
                    "spec": {"max": {"cpu": "1"}, "min": {"cpu": "2"}}}),
                "QV-S",
                "spec.min[cpu]".to_owned(),
            ),
            (
                serde_json::json!({"metadata": {"name": "a", "namespace": "d", "labels": {PARENT: "nobody"}},
                    "spec": {"max": {"cpu": "1"}, "min": {"cpu": "1"}}}),
                "QV-T",
                format!("metadata.labels[{PARENT}]"),
            ),
            (
                serde_json::json!({"metadata": {"name": "a", "namespace": "d", "labels": {PARENT: "p", TREE_ID: "t2"}},
                    "spec": {"max": {"cpu": "1"}, "min": {"cpu": "1"}}}),
                "QV-T",
                format!("metadata.labels[{TREE_ID}]"),
            ),
            (
                serde_json::json!({"metadata": {"name": "a", "namespace": "d", "labels": {PARENT: "p", TREE_ID: "t1"}},
                    "spec": {"max": {"cpu": "1", "memory": "1Gi"}, "min": {"cpu": "1"}}}),
                "QV-T",
                "spec.max".to_owned(),
            ),
            (
                serde_json::json!({"metadata": {"name": "a", "namespace": "d",
                    "annotations": {NAMESPACES: "[\"bound\"]"}},
                    "spec": {"max": {"cpu": "1"}, "min": {"cpu": "1"}}}),
                "QV-C2",
                format!("metadata.annotations[{NAMESPACES}]"),
            ),
            (
                serde_json::json!({"metadata": {"name": "p", "namespace": "d"}, "spec": {}}),
                "QV-C1",
                "metadata.name".to_owned(),
            ),
        ];
        for (object, rule, field) in cases {
            let q = quota(object);
            let got = validate_at(
                Operation::Create,
                &q,
                None,
                &t,
                &NoPods,
                TreeGates::default(),
            );
            let Err((r, refused)) = got else {
                panic!("{q:?} admitted")
            };
            assert_eq!(
                (r, refused.field.as_str()),
                (rule, field.as_str()),
                "{refused:?}"
            );
        }
    }

    #[test]
    fn pv_4_1_and_4_2_which_quota_is_checked() {
        assert_eq!(admission_quota("q".into(), None), Some("q".into()));
        assert_eq!(
            admission_quota("q".into(), Some("q")),
            None,
            "UPDATE, same quota"
        );
        assert_eq!(admission_quota("q".into(), Some("p")), Some("q".into()));
        for unchecked in ["", DEFAULT, SYSTEM, ROOT] {
            assert_eq!(admission_quota(unchecked.into(), None), None);
        }
    }
}
