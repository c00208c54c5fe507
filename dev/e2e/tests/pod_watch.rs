//! quota-state's Pod watch in protobuf against the real kube-apiserver: what it lists and what its
//! events carry is, pod for pod, what kube's JSON reading of the same pods gives (identity,
//! resource version, quota label, charge), for pods that exercise every field of the charge.

use std::time::Duration;

use e2e::Env;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::Resource;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher::Event;
use quota_state::feed::WatchedPod;
use serde_json::json;

/// Pods whose charges differ in every way the formula reads.
fn pods() -> Vec<serde_json::Value> {
    let label = json!({"quota.scheduling.koordinator.sh/name": "q", "app": "x"});
    vec![
        json!({"metadata": {"name": "plain", "labels": label},
               "spec": {"containers": [{"name": "c", "image": "i",
                        "env": [{"name": "E", "value": "v"}],
                        "resources": {"requests": {"cpu": "100m", "memory": "1Gi"}, "limits": {"cpu": "1"}}}]}}),
        json!({"metadata": {"name": "sidecars", "labels": label},
               "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}],
                        "initContainers": [
                            {"name": "s", "image": "i", "restartPolicy": "Always", "resources": {"requests": {"cpu": "50m"}}},
                            {"name": "i", "image": "i", "resources": {"requests": {"cpu": "2", "memory": "10Mi"}}}]}}),
        json!({"metadata": {"name": "extended"},
               "spec": {"containers": [{"name": "c", "image": "i",
                        "resources": {"requests": {"example.com/gpu": "2"}, "limits": {"example.com/gpu": "2"}}}]}}),
        json!({"metadata": {"name": "pod-level", "labels": label},
               "spec": {"resources": {"requests": {"cpu": "3"}, "limits": {"cpu": "3"}},
                        "containers": [{"name": "c", "image": "i"}]}}),
        json!({"metadata": {"name": "bare"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
    ]
}

fn same(a: &WatchedPod, b: &WatchedPod) -> bool {
    format!("{a:?}") == format!("{b:?}")
}

#[tokio::test]
async fn protobuf_pod_watch_reads_what_the_json_reading_gives() {
    let env = Env::new("pod-watch").await;
    let api: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    for p in pods() {
        let pod: Pod = serde_json::from_value(p).unwrap();
        api.create(&PostParams::default(), &pod).await.unwrap();
    }
    // The kube-runtime reading: JSON, through the same type.
    let json_api: Api<WatchedPod> = Api::namespaced(env.client.clone(), &env.ns);
    let json_pods = json_api.list(&Default::default()).await.unwrap().items;
    assert_eq!(json_pods.len(), pods().len());

    let stream = quota_state::feed::protobuf::pods(env.client.clone());
    futures::pin_mut!(stream);
    let mut listed = Vec::new();
    let next = async |s: &mut std::pin::Pin<&mut _>| {
        tokio::time::timeout(Duration::from_secs(60), StreamExt::next(s))
            .await
            .expect("a watch event within 60 s")
            .expect("the watch goes on")
    };
    assert!(matches!(next(&mut stream).await, Ok(Event::Init)));
    loop {
        match next(&mut stream).await {
            Ok(Event::InitApply(p)) => {
                if p.meta().namespace.as_deref() == Some(&env.ns) {
                    listed.push(p);
                }
            }
            Ok(Event::InitDone) => break,
            other => panic!("listing: {other:?}"),
        }
    }
    assert_eq!(listed.len(), json_pods.len());
    for p in &json_pods {
        let q = listed
            .iter()
            .find(|q| q.meta().name == p.meta().name)
            .unwrap_or_else(|| panic!("{:?} not listed", p.meta().name));
        assert!(same(p, q), "listed {q:?}, JSON {p:?}");
    }

    // Events: a pod finishes (it is charged nothing), another is deleted.
    api.patch_status(
        "sidecars",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Succeeded"}})),
    )
    .await
    .unwrap();
    api.delete("plain", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let finished = json_api.get("sidecars").await.unwrap();
    let (mut modified, mut deleted) = (false, false);
    while !(modified && deleted) {
        match next(&mut stream).await {
            Ok(Event::Apply(p)) if p.meta().namespace.as_deref() == Some(&env.ns) => {
                if p.meta().name.as_deref() == Some("sidecars") {
                    assert!(same(&p, &finished), "event {p:?}, JSON {finished:?}");
                    modified = true;
                }
            }
            Ok(Event::Delete(p)) if p.meta().namespace.as_deref() == Some(&env.ns) => {
                assert_eq!(p.meta().name.as_deref(), Some("plain"));
                deleted = true;
            }
            Ok(_) => {}
            Err(e) => panic!("watch: {e}"),
        }
    }
}
