//! What the API server checks of workloads beyond their Pod template: selectors, replica
//! counts, a Job's name (its Pods' label), a PriorityClass's value.

use std::collections::BTreeMap;

use admission_compat::selector::Selector;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

use super::{Finding, finding, quoted};

/// API-10: a Deployment, ReplicaSet, StatefulSet or DaemonSet (and a Job with
/// `manualSelector: true`) has a non-empty `spec.selector` that matches its Pod template's
/// labels, and `spec.replicas` is not negative. Refused with 422 before any webhook: the
/// controller could never find the Pods it creates.
///
/// Refused: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: web}, spec: {selector: {matchLabels: {app: api}}, template: {metadata: {labels: {app: web}}, spec: {containers: [{name: c, image: i}]}}}}`
///
/// Admitted: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: web}, spec: {selector: {matchLabels: {app: web}}, template: {metadata: {labels: {app: web, tier: front}}, spec: {containers: [{name: c, image: i}]}}}}`
pub fn api_10_selector(object: &Value) -> Vec<Finding> {
    let kind = object["kind"].as_str().unwrap_or_default();
    let spec = &object["spec"];
    let mut out = Vec::new();
    let checked = match (object["apiVersion"].as_str().unwrap_or_default(), kind) {
        ("apps/v1", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet") => true,
        ("batch/v1", "Job") => spec["manualSelector"] == Value::Bool(true),
        _ => false,
    };
    if let Some(n) = spec["replicas"].as_i64().filter(|n| *n < 0) {
        out.push(finding(
            "API-10",
            "spec.replicas".into(),
            format!("Invalid value: {n}: must be greater than or equal to 0"),
        ));
    }
    let selector = &spec["selector"];
    if !checked || !selector.is_object() {
        // A missing selector is API-3's.
        return out;
    }
    let Ok(parsed) = serde_json::from_value::<LabelSelector>(selector.clone()) else {
        return out;
    };
    let selector = match Selector::new(&parsed) {
        Ok(s) => s,
        Err(e) => {
            out.push(finding(
                "API-10",
                "spec.selector".into(),
                format!("Invalid value: {selector}: {e}"),
            ));
            return out;
        }
    };
    if selector.is_empty() {
        out.push(finding(
            "API-10",
            "spec.selector".into(),
            format!(
                "Invalid value: {{}}: empty selector is invalid for {}",
                kind.to_lowercase()
            ),
        ));
        return out;
    }
    let labels: BTreeMap<String, String> = spec["template"]["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
        .collect();
    if !selector.matches(&labels) {
        out.push(finding(
            "API-10",
            "spec.template.metadata.labels".into(),
            format!(
                "Invalid value: {}: `selector` does not match template `labels`",
                spec["template"]["metadata"]["labels"]
            ),
        ));
    }
    out
}

/// API-13: a Job's name becomes the value of its Pods' `batch.kubernetes.io/job-name` label
/// (`spec.template.labels` to the API server), so it is at most 63 characters; a
/// PriorityClass's `value` is at most 1,000,000,000 unless it is one of the system classes.
/// Refused with 422 before any webhook.
///
/// Refused: `{apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: urgent}, value: 2000000000}`
///
/// Admitted: `{apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: urgent}, value: 1000000}`
pub fn api_13_limits(object: &Value) -> Option<Finding> {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    match (
        object["apiVersion"].as_str().unwrap_or_default(),
        object["kind"].as_str().unwrap_or_default(),
    ) {
        ("batch/v1", "Job") if name.len() > 63 => Some(finding(
            "API-13",
            "metadata.name".into(),
            format!(
                "Invalid value: {}: must be no more than 63 characters, as its Pods' label batch.kubernetes.io/job-name (spec.template.labels) carries it",
                quoted(name)
            ),
        )),
        ("scheduling.k8s.io/v1", "PriorityClass")
            if object["value"].as_i64().is_some_and(|v| v > 1_000_000_000)
                && !name.starts_with("system-") =>
        {
            Some(finding(
                "API-13",
                "value".into(),
                "Forbidden: maximum allowed value of a user defined priority is 1000000000".into(),
            ))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(selector: Value, labels: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w"},
               "spec": {"selector": selector, "template": {"metadata": {"labels": labels}}}})
    }

    #[test]
    fn api_10_matches_selectors_with_template_labels() {
        let labels = json!({"app": "web"});
        assert!(
            api_10_selector(&deployment(
                json!({"matchLabels": {"app": "web"}}),
                labels.clone()
            ))
            .is_empty()
        );
        let expr = json!({"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]},
                                              {"key": "legacy", "operator": "DoesNotExist"}]});
        assert!(api_10_selector(&deployment(expr, labels.clone())).is_empty());
        let f = api_10_selector(&deployment(
            json!({"matchLabels": {"app": "api"}}),
            labels.clone(),
        ));
        assert_eq!(f[0].field, "spec.template.metadata.labels");
        let empty = api_10_selector(&deployment(json!({}), labels));
        assert_eq!(empty[0].field, "spec.selector");
        let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
            "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": {"metadata": {"labels": {"app": "j"}}}}});
        assert!(
            api_10_selector(&job).is_empty(),
            "the selector of a Job is generated"
        );
        let mut manual = job.clone();
        manual["spec"]["manualSelector"] = json!(true);
        assert_eq!(api_10_selector(&manual).len(), 1);
        let negative =
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": -1}});
        assert_eq!(api_10_selector(&negative)[0].field, "spec.replicas");
    }

    #[test]
    fn api_13_bounds_job_names_and_priority_values() {
        let job = |n: usize| json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j".repeat(n)}});
        assert!(api_13_limits(&job(63)).is_none());
        assert!(api_13_limits(&job(64)).is_some());
        let pc = |name: &str, v: i64| {
            json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": v})
        };
        assert!(api_13_limits(&pc("urgent", 1_000_000_000)).is_none());
        assert_eq!(
            api_13_limits(&pc("urgent", 2_000_000_000)).map(|f| f.field),
            Some("value".into())
        );
    }
}
