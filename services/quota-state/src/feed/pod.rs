//! A Pod as quota-state's ledger reads it from the watch: its identity, its quota label and what
//! it is charged, decoded from the JSON or (see [`super::protobuf`]) the protobuf of a Pod.

use admission_kit::compat::resources::try_pod_request;
use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::ledger::Amounts;

/// What a pod is charged: its request (Kubernetes' pod-request formula), exactly; nothing once it
/// has finished. `Err` names the amount that cannot be counted.
pub fn pod_requests(p: &Pod) -> Result<Amounts, String> {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Failed" | "Succeeded")) {
        return Ok(Amounts::new());
    }
    p.spec
        .as_ref()
        .map(try_pod_request)
        .transpose()
        .map(Option::unwrap_or_default)
        .map_err(|e| e.to_string())
}

/// A Pod as the ledger reads it, decoded from the watch with nothing else: its identity, its quota
/// label and what it is charged. A full `Pod` is 5 to 10 KiB of JSON (managed fields, status,
/// environment, volumes) that every event of every pod of the cluster would otherwise build into
/// objects only to drop them; here serde (JSON) or prost (protobuf) skips them as it reads.
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(from = "wire::Pod")]
pub struct WatchedPod {
    /// Namespace, name, uid (what vouches for a reservation's peer) and resource version (the
    /// watch resumes from it).
    metadata: ObjectMeta,
    /// The quota label's value (`""` when absent).
    pub(super) quota: String,
    /// [`pod_requests`] of the pod.
    pub(super) requests: Result<Amounts, String>,
}

/// The parts of a Pod's JSON that [`WatchedPod`] reads; the protobuf reading fills them too.
pub(super) mod wire {
    use super::*;

    #[derive(serde::Deserialize)]
    pub struct Pod {
        #[serde(default)]
        pub metadata: Meta,
        pub spec: Option<Spec>,
        pub status: Option<Status>,
    }

    #[derive(serde::Deserialize, Default)]
    #[serde(rename_all = "camelCase")]
    pub struct Meta {
        pub name: Option<String>,
        pub namespace: Option<String>,
        pub uid: Option<String>,
        pub resource_version: Option<String>,
        pub labels: Option<std::collections::BTreeMap<String, String>>,
    }

    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Spec {
        #[serde(default)]
        pub containers: Vec<Resources>,
        pub init_containers: Option<Vec<Resources>>,
        pub resources: Option<ResourceRequirements>,
        pub overhead: Option<std::collections::BTreeMap<String, Quantity>>,
    }

    /// A container's fields that count: its resources, and whether it is a sidecar.
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Resources {
        pub resources: Option<ResourceRequirements>,
        pub restart_policy: Option<String>,
    }

    #[derive(serde::Deserialize)]
    pub struct Status {
        pub phase: Option<String>,
    }
}

impl From<wire::Pod> for WatchedPod {
    fn from(p: wire::Pod) -> Self {
        let container = |c: wire::Resources| Container {
            resources: c.resources,
            restart_policy: c.restart_policy,
            ..Container::default()
        };
        // The same pod as `pod_requests` reads it: the fields of the request formula.
        let pod = Pod {
            spec: p.spec.map(|s| PodSpec {
                containers: s.containers.into_iter().map(container).collect(),
                init_containers: s
                    .init_containers
                    .map(|v| v.into_iter().map(container).collect()),
                resources: s.resources,
                overhead: s.overhead,
                ..PodSpec::default()
            }),
            status: p.status.map(|s| k8s_openapi::api::core::v1::PodStatus {
                phase: s.phase,
                ..Default::default()
            }),
            ..Pod::default()
        };
        let mut labels = p.metadata.labels.unwrap_or_default();
        let quota = labels
            .remove(quota_protocol::tree::keys::NAME)
            .unwrap_or_default();
        Self {
            metadata: ObjectMeta {
                name: p.metadata.name,
                namespace: p.metadata.namespace,
                uid: p.metadata.uid,
                resource_version: p.metadata.resource_version,
                ..ObjectMeta::default()
            },
            quota,
            requests: pod_requests(&pod),
        }
    }
}

impl kube::Resource for WatchedPod {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        "Pod".into()
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        "".into()
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        "pods".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl WatchedPod {
    /// Its uid (`""` when absent).
    pub(super) fn uid(&self) -> &str {
        self.metadata.uid.as_deref().unwrap_or_default()
    }

    /// Its namespace and name.
    pub(super) fn key(&self) -> (String, String) {
        (
            self.metadata.namespace.clone().unwrap_or_default(),
            self.metadata.name.clone().unwrap_or_default(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A pod's quota label and charge.
    type Charge = (String, Result<Amounts, String>);

    /// What the watch's decode gives, and what the full `Pod` gives through the functions the
    /// ledger used to read.
    fn both(v: &serde_json::Value) -> (Charge, Charge) {
        let slim: WatchedPod = serde_json::from_value(v.clone()).unwrap();
        let full: Pod = serde_json::from_value(v.clone()).unwrap();
        (
            (slim.quota.clone(), slim.requests.clone()),
            (
                quota_protocol::tree::pod_quota_label(&full).to_owned(),
                pod_requests(&full),
            ),
        )
    }

    #[test]
    fn watched_pod_charges_what_the_full_pod_charges() {
        let pods = [
            json!({"metadata": {"name": "a", "namespace": "n", "resourceVersion": "7",
                   "labels": {"quota.scheduling.koordinator.sh/name": "q", "app": "x"},
                   "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]},
                   "spec": {"containers": [{"name": "c", "image": "i", "env": [{"name": "E", "value": "v"}],
                            "resources": {"requests": {"cpu": "100m", "memory": "1Gi"}, "limits": {"cpu": "1"}}}],
                            "initContainers": [
                                {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "50m"}}},
                                {"name": "i", "resources": {"requests": {"cpu": "2", "memory": "10Mi"}}}],
                            "overhead": {"cpu": "10m"}},
                   "status": {"phase": "Running", "podIP": "10.0.0.1"}}),
            json!({"metadata": {"name": "b", "namespace": "n"},
                   "spec": {"containers": [{"name": "c"}], "resources": {"requests": {"cpu": "3", "example.com/gpu": "1"}}}}),
            json!({"metadata": {"name": "done", "namespace": "n", "labels": {"quota.scheduling.koordinator.sh/name": "q"}},
                   "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
                   "status": {"phase": "Succeeded"}}),
            json!({"metadata": {"name": "huge", "namespace": "n"},
                   "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1e40"}}}]}}),
            json!({"metadata": {"name": "bare", "namespace": "n"}}),
        ];
        for p in &pods {
            let (slim, full) = both(p);
            assert_eq!(slim, full, "{p}");
        }
        // Every Pod of the review fixtures too.
        let root = admission_testing::fixtures::fixtures_root().join("reviews");
        let mut seen = 0;
        for dir in std::fs::read_dir(&root).unwrap().flatten() {
            for f in std::fs::read_dir(dir.path()).unwrap().flatten() {
                let Ok(v) = serde_json::from_str::<serde_json::Value>(
                    &std::fs::read_to_string(f.path()).unwrap_or_default(),
                ) else {
                    continue;
                };
                let req = &v["review"]["request"];
                for o in [&req["object"], &req["oldObject"]] {
                    if o["kind"] == "Pod" && serde_json::from_value::<Pod>(o.clone()).is_ok() {
                        let (slim, full) = both(o);
                        assert_eq!(slim, full, "{}", f.path().display());
                        seen += 1;
                    }
                }
            }
        }
        assert!(seen > 50, "{seen} pods in the fixtures");
    }

    #[test]
    fn watched_pod_keeps_what_the_watch_resumes_from() {
        let p: WatchedPod = serde_json::from_value(json!({"metadata": {"name": "a", "namespace": "n", "resourceVersion": "42", "uid": "u"}})).unwrap();
        assert_eq!(
            kube::ResourceExt::resource_version(&p).as_deref(),
            Some("42")
        );
        assert_eq!(p.key(), ("n".to_owned(), "a".to_owned()));
        // A watch bookmark carries only a resource version.
        let b: WatchedPod =
            serde_json::from_value(json!({"metadata": {"resourceVersion": "43"}})).unwrap();
        assert_eq!(
            kube::ResourceExt::resource_version(&b).as_deref(),
            Some("43")
        );
    }
}
