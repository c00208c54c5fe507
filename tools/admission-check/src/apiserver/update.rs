//! API-16: what the API server refuses in an UPDATE whatever the webhooks say: fields its
//! validation holds immutable once an object exists.

use serde_json::Value;

use super::{Finding, finding};

/// API-16: an UPDATE changes no field the API server holds immutable: a Deployment's,
/// ReplicaSet's or DaemonSet's `spec.selector`; a StatefulSet's `spec` beyond `replicas`,
/// `ordinals`, `template`, `updateStrategy`, `revisionHistoryLimit`,
/// `persistentVolumeClaimRetentionPolicy` and `minReadySeconds`; a Job's `spec.selector` and
/// `spec.template` (a suspended Job's template is left to the cluster: some of it may change
/// then); a Pod's `spec` beyond its containers' images, `activeDeadlineSeconds`, added
/// tolerations and a negative `terminationGracePeriodSeconds` set to 1; an immutable ConfigMap's
/// or Secret's data, and its `immutable`; a PriorityClass's `value`. `object` is the object as
/// sent (the manifest merged into the stored object, as `kubectl apply` sends it), `old` the
/// object as stored. Refused with 422 before any webhook.
///
/// Each is held to the API server's answers by the update corpus
/// (`tests/api-server-corpus/updates/`).
///
/// State: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: d, namespace: default}, spec: {replicas: 1, selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a}}, spec: {containers: [{name: c, image: "busybox:1"}]}}}}`
///
/// Refused on update: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: d, namespace: default}, spec: {replicas: 1, selector: {matchLabels: {app: b}}, template: {metadata: {labels: {app: b}}, spec: {containers: [{name: c, image: "busybox:1"}]}}}}`
///
/// Admitted on update: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: d, namespace: default}, spec: {replicas: 1, selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a}}, spec: {containers: [{name: c, image: "busybox:2"}]}}}}`
pub fn api_16_immutable(object: &Value, old: &Value) -> Vec<Finding> {
    let mut out = Vec::new();
    let changed = |path: &str| object.pointer(path) != old.pointer(path);
    let immutable = |field: &str, value: &Value| {
        finding(
            "API-16",
            field.into(),
            format!("Invalid value: {value}: field is immutable"),
        )
    };
    match (
        object["apiVersion"].as_str().unwrap_or_default(),
        object["kind"].as_str().unwrap_or_default(),
    ) {
        ("apps/v1", "Deployment" | "ReplicaSet" | "DaemonSet") if changed("/spec/selector") => {
            out.push(immutable("spec.selector", &object["spec"]["selector"]));
        }
        ("apps/v1", "StatefulSet") => {
            const MUTABLE: [&str; 7] = [
                "replicas",
                "ordinals",
                "template",
                "updateStrategy",
                "revisionHistoryLimit",
                "persistentVolumeClaimRetentionPolicy",
                "minReadySeconds",
            ];
            let rest = |o: &Value| {
                let mut spec = o["spec"].as_object().cloned().unwrap_or_default();
                spec.retain(|k, _| !MUTABLE.contains(&k.as_str()));
                spec
            };
            if rest(object) != rest(old) {
                out.push(finding(
                    "API-16",
                    "spec".into(),
                    format!(
                        "Forbidden: updates to statefulset spec for fields other than {} and 'minReadySeconds' are forbidden",
                        MUTABLE[..6]
                            .iter()
                            .map(|f| format!("'{f}'"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
        }
        ("batch/v1", "Job") => {
            if changed("/spec/selector") {
                out.push(immutable("spec.selector", &object["spec"]["selector"]));
            }
            let suspended = |o: &Value| o["spec"]["suspend"] == Value::Bool(true);
            if changed("/spec/template") && !(suspended(object) && suspended(old)) {
                out.push(finding(
                    "API-16",
                    "spec.template".into(),
                    "Invalid value: the new template: field is immutable".into(),
                ));
            }
        }
        ("v1", "Pod") => out.extend(pod_spec(object, old)),
        ("v1", "ConfigMap" | "Secret") if old["immutable"] == Value::Bool(true) => {
            let forbidden = |field: &str| {
                finding(
                    "API-16",
                    field.into(),
                    "Forbidden: field is immutable when `immutable` is set".into(),
                )
            };
            if object["immutable"] != Value::Bool(true) {
                out.push(forbidden("immutable"));
            } else {
                for field in ["data", "binaryData", "stringData"] {
                    if object.get(field).filter(|v| !v.is_null())
                        != old.get(field).filter(|v| !v.is_null())
                    {
                        out.push(forbidden(field));
                    }
                }
            }
        }
        ("scheduling.k8s.io/v1", "PriorityClass") if changed("/value") => {
            out.push(finding(
                "API-16",
                "value".into(),
                "Forbidden: may not be changed in an update.".into(),
            ));
        }
        _ => {}
    }
    out
}

/// A Pod's spec may change only in what the API server lets an update change: each
/// container's image (when the containers are the same in number), `activeDeadlineSeconds`,
/// tolerations added to the existing ones, and a negative `terminationGracePeriodSeconds` set
/// to 1. Anything else is refused whole, at `spec`.
fn pod_spec(object: &Value, old: &Value) -> Vec<Finding> {
    let (Some(new), Some(before)) = (object["spec"].as_object(), old["spec"].as_object()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut munged = new.clone();
    for list in ["containers", "initContainers"] {
        if let (Some(Value::Array(n)), Some(Value::Array(o))) =
            (munged.get_mut(list), before.get(list))
            && n.len() == o.len()
        {
            for (n, o) in n.iter_mut().zip(o) {
                if let Some(image) = o.get("image") {
                    n["image"] = image.clone();
                } else if let Some(m) = n.as_object_mut() {
                    m.remove("image");
                }
            }
        }
    }
    let copy = |munged: &mut serde_json::Map<String, Value>, key: &str| match before.get(key) {
        Some(v) => {
            munged.insert(key.into(), v.clone());
        }
        None => {
            munged.remove(key);
        }
    };
    copy(&mut munged, "activeDeadlineSeconds");
    let tolerations = |m: &serde_json::Map<String, Value>| {
        m.get("tolerations")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let (now, then) = (tolerations(new), tolerations(before));
    if then.iter().all(|t| now.contains(t)) {
        copy(&mut munged, "tolerations");
    } else {
        out.push(finding(
            "API-16",
            "spec.tolerations".into(),
            "Forbidden: existing toleration can not be modified except its tolerationSeconds"
                .into(),
        ));
        copy(&mut munged, "tolerations");
    }
    let grace = |m: &serde_json::Map<String, Value>| {
        m.get("terminationGracePeriodSeconds")
            .and_then(Value::as_i64)
    };
    if grace(before).is_some_and(|g| g < 0) && grace(new) == Some(1) {
        copy(&mut munged, "terminationGracePeriodSeconds");
    }
    if &munged != before {
        out.push(finding(
            "API-16",
            "spec".into(),
            "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)".into(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::apiserver::tests::fields;

    #[test]
    fn a_deployment_keeps_its_selector() {
        let d = |app: &str, image: &str| {
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                "spec": {"selector": {"matchLabels": {"app": app}},
                         "template": {"spec": {"containers": [{"name": "c", "image": image}]}}}})
        };
        assert_eq!(
            fields(&api_16_immutable(&d("a", "i:2"), &d("a", "i:1"))),
            Vec::<&str>::new()
        );
        let f = api_16_immutable(&d("b", "i:1"), &d("a", "i:1"));
        assert_eq!(fields(&f), ["spec.selector"]);
        assert_eq!(
            f[0].message,
            r#"Invalid value: {"matchLabels":{"app":"b"}}: field is immutable"#
        );
    }

    #[test]
    fn a_pod_changes_only_images_deadlines_and_added_tolerations() {
        let p = |image: &str, command: &str, tolerations: Value| {
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c", "image": image, "command": [command]}],
                         "tolerations": tolerations, "priority": 0}})
        };
        let old = p("i:1", "sleep", json!([{"key": "a"}]));
        let ok = p("i:2", "sleep", json!([{"key": "a"}, {"key": "b"}]));
        assert_eq!(fields(&api_16_immutable(&ok, &old)), Vec::<&str>::new());
        let command = p("i:1", "sh", json!([{"key": "a"}]));
        assert_eq!(fields(&api_16_immutable(&command, &old)), ["spec"]);
        let dropped = p("i:1", "sleep", json!([]));
        assert_eq!(
            fields(&api_16_immutable(&dropped, &old)),
            ["spec.tolerations"]
        );
    }

    #[test]
    fn an_immutable_config_map_stays_so() {
        let cm = |immutable: bool, a: &str| {
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                   "immutable": immutable, "data": {"a": a}})
        };
        assert_eq!(
            fields(&api_16_immutable(&cm(true, "2"), &cm(true, "1"))),
            ["data"]
        );
        assert_eq!(
            fields(&api_16_immutable(&cm(false, "1"), &cm(true, "1"))),
            ["immutable"]
        );
        assert_eq!(
            fields(&api_16_immutable(&cm(false, "2"), &cm(false, "1"))),
            Vec::<&str>::new()
        );
    }
}
