//! ClusterColocationProfiles (PM-1, RM-1): which profiles match, and applying one to object
//! metadata and a pod spec.

use std::collections::BTreeMap;

use admission_kit::Context;
use admission_kit::compat::selector::Selector;
use k8s_openapi::api::core::v1::{Namespace, PodSpec};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use crate::types::{ClusterColocationProfile, ClusterColocationProfileSpec};

/// Annotation on a profile that turns the resource translation (PM-1.7) off.
pub const SKIP_UPDATE_RESOURCES: &str = "config.koordinator.sh/skip-update-resources";

fn selector_matches(sel: &Option<LabelSelector>, labels: &BTreeMap<String, String>) -> bool {
    let Some(sel) = sel else { return true };
    let empty = sel.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && sel.match_expressions.as_ref().is_none_or(|e| e.is_empty());
    if empty {
        return true;
    }
    // Quirk kept: an unparsable selector counts as matching.
    Selector::new(sel)
        .map(|s| s.matches(labels))
        .unwrap_or(true)
}

/// The profiles matching an object, in name order (PM-1.2..4). `namespace` = None ignores the
/// namespace selector (RM-1).
pub fn matching(
    ctx: &Context,
    labels: &BTreeMap<String, String>,
    namespace: Option<&str>,
) -> Result<Vec<ClusterColocationProfile>, String> {
    let mut profiles: Vec<ClusterColocationProfile> = ctx
        .list::<ClusterColocationProfile>(None)
        .map_err(|e| e.to_string())?
        .iter()
        .filter_map(|d| {
            serde_json::to_value(&**d)
                .ok()
                .and_then(|v| serde_json::from_value(v).ok())
        })
        .collect();
    profiles.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let ns_labels = match namespace {
        Some(ns) => ctx
            .get::<Namespace>(None, ns)
            .ok()
            .flatten()
            .map(|d| d.metadata.labels.clone().unwrap_or_default()),
        None => None,
    };
    Ok(profiles
        .into_iter()
        .filter(|p| {
            let ns_ok = match (namespace, &ns_labels) {
                (None, _) => true,
                // Quirk kept: a namespace that cannot be found counts as matching.
                (Some(_), None) => true,
                (Some(_), Some(l)) => selector_matches(&p.spec.namespace_selector, l),
            };
            ns_ok && selector_matches(&p.spec.selector, labels)
        })
        .collect())
}

/// PM-1.5: whether a profile is applied. `Err` for an unparsable percentage.
pub fn applies(spec: &ClusterColocationProfileSpec) -> Result<bool, String> {
    let n: i64 = match &spec.probability {
        None | Some(serde_json::Value::Null) => 100,
        Some(serde_json::Value::Number(n)) => n.as_i64().unwrap_or(100),
        Some(serde_json::Value::String(s)) => s
            .trim_end_matches('%')
            .parse()
            .map_err(|_| format!("invalid value for IntOrString: invalid value {s:?}"))?,
        Some(other) => return Err(format!("invalid probability {other}")),
    };
    Ok(match n {
        n if n <= 0 => false,
        n if n >= 100 => true,
        // Not reproducible by design; a time-derived draw keeps it cheap and dependency-free.
        n => {
            i64::from(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.subsec_nanos() % 100)
                    .unwrap_or(0),
            ) <= n
        }
    })
}

/// PM-1.6.1..5, 7, 9: labels and annotations of the object.
pub fn apply_metadata(spec: &ClusterColocationProfileSpec, meta: &mut ObjectMeta) {
    if let Some(l) = &spec.labels {
        let m = meta.labels.get_or_insert_with(BTreeMap::new);
        m.extend(l.clone());
    }
    if let Some(a) = &spec.annotations {
        let m = meta.annotations.get_or_insert_with(BTreeMap::new);
        m.extend(a.clone());
    }
    if let Some(map) = &spec.label_keys_mapping {
        let m = meta.labels.get_or_insert_with(BTreeMap::new);
        for (from, to) in map {
            let v = m.get(from).cloned().unwrap_or_default();
            m.insert(to.clone(), v);
        }
    }
    if let Some(map) = &spec.annotation_keys_mapping {
        let m = meta.annotations.get_or_insert_with(BTreeMap::new);
        for (from, to) in map {
            let v = m.get(from).cloned().unwrap_or_default();
            m.insert(to.clone(), v);
        }
    }
    if let Some(sfx) = &spec.label_suffixes
        && let Some(m) = meta.labels.as_mut()
    {
        for (k, s) in sfx {
            if let Some(v) = m.get_mut(k) {
                v.push_str(s);
            }
        }
    }
}

/// PM-1.6.6 and 8: scheduler and priority of a pod spec. `Err` when the PriorityClass is missing.
pub fn apply_pod_spec(
    spec: &ClusterColocationProfileSpec,
    pod: &mut PodSpec,
    ctx: &Context,
) -> Result<(), String> {
    if let Some(s) = spec.scheduler_name.as_ref().filter(|s| !s.is_empty()) {
        pod.scheduler_name = Some(s.clone());
    }
    if let Some(pc) = spec.priority_class_name.as_ref().filter(|s| !s.is_empty()) {
        let class: PriorityClass = ctx
            .get::<PriorityClass>(None, pc)
            .map_err(|e| e.to_string())?
            .and_then(|d| {
                serde_json::to_value(&*d)
                    .ok()
                    .and_then(|v| serde_json::from_value(v).ok())
            })
            .ok_or_else(|| {
                format!(
                    "priorityclasses.scheduling.k8s.io {} not found",
                    admission_kit::compat::go::go_quote(pc)
                )
            })?;
        pod.priority_class_name = Some(pc.clone());
        pod.priority = Some(class.value);
        pod.preemption_policy = class.preemption_policy.clone();
    }
    Ok(())
}

/// PM-1.6.10: a strategic-merge patch as a merge patch (maps merge; `containers` merge by name).
pub fn merge_patch(target: &mut serde_json::Value, patch: &serde_json::Value) {
    use serde_json::Value;
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, pv) in p {
                if pv.is_null() {
                    t.remove(k);
                    continue;
                }
                let by_name = (k == "containers" || k == "initContainers") && pv.is_array();
                match t.get_mut(k) {
                    Some(Value::Array(items)) if by_name => {
                        for pc in pv.as_array().into_iter().flatten() {
                            let name = pc.get("name");
                            match items.iter_mut().find(|c| c.get("name") == name) {
                                Some(c) => merge_patch(c, pc),
                                None => items.push(pc.clone()),
                            }
                        }
                    }
                    Some(tv) if tv.is_object() && pv.is_object() => merge_patch(tv, pv),
                    _ => {
                        t.insert(k.clone(), pv.clone());
                    }
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}
