//! The Pods a workload's controller creates from its templates. The API server admits a
//! Deployment whose template no Pod webhook would admit: its ReplicaSet then never gets a Pod.
//! A checker that stops at the Deployment passes what the cluster refuses, so each template is
//! also checked as the Pod its controller sends: the template's labels, annotations and spec, in
//! the workload's namespace, created by the controller's service account.
//!
//! Where the templates are comes from scheduling-webhook's workload kinds (the same table its
//! WQ rules read: Deployments, ReplicaSets, StatefulSets, Jobs, CronJobs, Kubeflow's jobs…),
//! plus the kinds whose Pods no quota rule counts ahead (DaemonSets, ReplicationControllers).

use scheduling_webhook::workload::kinds::{self, Kind};
use serde_json::{Map, Value, json};

/// One Pod a workload's controller would create.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplatePod {
    /// The template's field path in the workload (`spec.template`), which every finding about
    /// the Pod is reported under.
    pub path: String,
    /// The Pod as the controller sends it.
    pub pod: Value,
    /// The controller's identity (`userInfo`).
    pub user_info: Value,
}

/// The kinds with Pod templates.
fn template_kinds() -> Vec<Kind> {
    let mut all = kinds::builtin();
    for (group, kind, resource) in [
        ("apps", "DaemonSet", "daemonsets"),
        ("", "ReplicationController", "replicationcontrollers"),
    ] {
        all.push(Kind {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            resource: resource.into(),
            policy: kinds::Policy::Warn,
            scale: None,
            groups: vec![kinds::Group {
                each: None,
                role: None,
                name: None,
                replicas: Vec::new(),
                default_replicas: 1,
                at_most: None,
                template: "/spec/template".into(),
            }],
        });
    }
    all
}

/// The controller that creates the Pods of `kind` (the service account kube-controller-manager
/// runs it as; the training operator's for Kubeflow's jobs).
fn controller(group: &str, kind: &str) -> (&'static str, &'static str) {
    match (group, kind) {
        ("apps", "Deployment" | "ReplicaSet") => ("kube-system", "replicaset-controller"),
        ("apps", "StatefulSet") => ("kube-system", "statefulset-controller"),
        ("apps", "DaemonSet") => ("kube-system", "daemon-set-controller"),
        ("batch", _) => ("kube-system", "job-controller"),
        ("", "ReplicationController") => ("kube-system", "replication-controller"),
        ("kubeflow.org", _) => ("kubeflow", "training-operator"),
        _ => ("kube-system", "generic-garbage-collector"),
    }
}

/// The Pods `object` (of `group`/`version` `kind`, in `namespace`) has templates for; none for
/// a kind without templates or a template that cannot be read (the workload's own rules, WQ-1,
/// name that field).
pub fn pods_of(object: &Value, namespace: &str) -> Vec<TemplatePod> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let kind_name = object["kind"].as_str().unwrap_or_default();
    let Some(kind) = template_kinds()
        .into_iter()
        .find(|k| k.group == group && k.version == version && k.kind == kind_name)
    else {
        return Vec::new();
    };
    let Ok(found) = kinds::groups(&kind, object) else {
        return Vec::new();
    };
    let name = object["metadata"]["name"].as_str().unwrap_or("workload");
    let (sa_namespace, sa) = controller(group, kind_name);
    let user_info = json!({
        "username": format!("system:serviceaccount:{sa_namespace}:{sa}"),
        "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{sa_namespace}"), "system:authenticated"],
    });
    found
        .into_iter()
        .filter(|f| f.template.is_object())
        .map(|f| {
            let mut metadata = match &f.template["metadata"] {
                Value::Object(m) => m.clone(),
                _ => Map::new(),
            };
            metadata.insert("namespace".into(), namespace.into());
            metadata.insert("generateName".into(), format!("{name}-").into());
            metadata.remove("name");
            metadata.insert(
                "ownerReferences".into(),
                json!([{
                    "apiVersion": api_version,
                    "kind": kind_name,
                    "name": name,
                    "uid": object["metadata"]["uid"].as_str().unwrap_or_default(),
                    "controller": true,
                    "blockOwnerDeletion": true,
                }]),
            );
            let spec = f.template.get("spec").cloned().unwrap_or_else(|| json!({}));
            TemplatePod {
                path: f.path,
                pod: json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}),
                user_info: user_info.clone(),
            }
        })
        .collect()
}

/// A field of the Pod as a field of the workload (`spec.containers[0]` under `spec.template`).
pub fn workload_field(template_path: &str, pod_field: &str) -> String {
    if pod_field.is_empty() {
        template_path.to_owned()
    } else {
        format!("{template_path}.{pod_field}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deployment_has_one_pod_from_its_template() {
        let d = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "team"},
            "spec": {"replicas": 3, "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "x"}]}}}});
        let pods = pods_of(&d, "team");
        assert_eq!(pods.len(), 1);
        assert_eq!(pods[0].path, "spec.template");
        assert_eq!(pods[0].pod["metadata"]["generateName"], "web-");
        assert_eq!(pods[0].pod["metadata"]["namespace"], "team");
        assert_eq!(pods[0].pod["metadata"]["labels"]["app"], "web");
        assert_eq!(pods[0].pod["spec"]["containers"][0]["name"], "c");
        assert_eq!(
            pods[0].user_info["username"],
            "system:serviceaccount:kube-system:replicaset-controller"
        );
    }

    #[test]
    fn each_replica_spec_and_cron_job_template_is_found() {
        let job = json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "p"},
            "spec": {"pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": {"spec": {"containers": []}}},
                "Worker": {"replicas": 2, "template": {"spec": {"containers": []}}}}}});
        let paths: Vec<String> = pods_of(&job, "default")
            .into_iter()
            .map(|p| p.path)
            .collect();
        assert_eq!(
            paths,
            [
                "spec.pytorchReplicaSpecs.Master.template",
                "spec.pytorchReplicaSpecs.Worker.template"
            ]
        );
        let cron = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
            "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": []}}}}}});
        assert_eq!(
            pods_of(&cron, "default")[0].path,
            "spec.jobTemplate.spec.template"
        );
        let ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d"},
            "spec": {"template": {"spec": {"containers": []}}}});
        assert_eq!(pods_of(&ds, "default")[0].path, "spec.template");
    }

    #[test]
    fn kinds_without_templates_have_no_pods() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
        assert!(pods_of(&cm, "default").is_empty());
        assert_eq!(workload_field("spec.template", ""), "spec.template");
        assert_eq!(
            workload_field("spec.template", "spec.priority"),
            "spec.template.spec.priority"
        );
    }
}
