//! Scheduling and node status as a cluster drives them, in the cluster in a box
//! (kube-controller-manager, kube-scheduler, kwok's simulated nodes and kubelets):
//!
//! - kube-scheduler, signed in as itself (`system:kube-scheduler`), binds every Pod of a
//!   Deployment through scheduling-webhook's binding rules (PB) when they are on, while a
//!   Binding of a Pod by another user is refused;
//! - node-config-webhook amplifies the allocatable CPU of the nodes that ask for it (NS) under
//!   every simulated kubelet's status updates, the amplified value stays put heartbeat after
//!   heartbeat, and kube-scheduler places a Pod that only fits an amplified node on one.

use std::time::Duration;

use e2e::cluster::{OwnCluster, own_cluster};
use e2e::cluster::{kubectl_with, start_services_in};
use e2e::quota::start_in;
use e2e::{Env, eventually, own_control_plane};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

/// The sum of metric `name`'s samples whose labels include every one of `labels`
/// (`key="value"`), on the metrics address `addr`.
async fn metric_with(addr: &str, name: &str, labels: &[&str]) -> f64 {
    let body = testenv::system::http_get(addr, "/metrics")
        .await
        .map(|(_, b)| b)
        .unwrap_or_default();
    body.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with('{'))
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kube_scheduler_binds_every_pod_through_the_binding_rules() {
    let ns = "team-bind";
    let OwnCluster {
        cp,
        env,
        cluster: _cluster,
    } = own_cluster(ns, 2, testenv::cluster::PodAddresses::Routable).await;
    let client = env.client.clone();
    // PB on for this namespace: only kube-scheduler may bind its Pods.
    let args = vec![
        "--feature-gates=BindingAdmissionWebhook=true".to_owned(),
        "--binding-admission-user-name=system:kube-scheduler".to_owned(),
        format!("--binding-admission-namespaces={ns}"),
    ];
    let (system, _opts, quota) = start_in(&env, &cp.kubeconfig, None, "cpu", 8, args).await;
    let metrics = system
        .webhooks
        .iter()
        .find_map(|(r, _, _)| r.metrics.clone())
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let bound_before = metric_with(
        &metrics,
        "admission_webhook_decisions_total",
        &["webhook=\"/validate-pod-binding\"", "decision=\"allowed\""],
    )
    .await;

    let deployment = serde_json::to_string(&json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web", "quota.scheduling.koordinator.sh/name": quota}},
                              "spec": {"containers": [{"name": "main", "image": "registry.example.com/app:1",
                                       "resources": {"requests": {"cpu": "1"}}}]}}}
    }))
    .unwrap();
    let o = kubectl_with(&cp.kubeconfig, &["apply", "-n", ns, "-f", "-"], &deployment);
    assert!(o.ok, "{}", o.shown());
    let running = eventually(Duration::from_secs(60), || async {
        match e2e::cluster::running(&pods, "web").await? {
            r if r.len() == 4 => Ok(r),
            r => Err(format!("web: {} of 4 bound and running", r.len())),
        }
    })
    .await;
    let bound = metric_with(
        &metrics,
        "admission_webhook_decisions_total",
        &["webhook=\"/validate-pod-binding\"", "decision=\"allowed\""],
    )
    .await;
    assert!(
        bound - bound_before >= 4.0,
        "every Binding went through the binding rules: {bound_before} → {bound}"
    );
    println!(
        "kube-scheduler bound {} Pods through /validate-pod-binding ({} allowed Bindings)",
        running.len(),
        bound - bound_before
    );

    // The same Binding by anyone else (here the admin) is refused, and the Pod stays unbound. It
    // names a scheduler that does not run so that kube-scheduler leaves it alone.
    let manual: Pod = serde_json::from_value(json!({
        "metadata": {"name": "manual", "labels": {"quota.scheduling.koordinator.sh/name": quota}},
        "spec": {"schedulerName": "nobody",
                 "containers": [{"name": "main", "image": "registry.example.com/app:1",
                                 "resources": {"requests": {"cpu": "1"}}}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &manual).await.unwrap();
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "manual"},
                         "target": {"apiVersion": "v1", "kind": "Node", "name": "kwok-node-0"}});
    let refused = pods
        .create_subresource::<_, serde_json::Value>(
            "binding",
            "manual",
            &PostParams::default(),
            &binding,
        )
        .await;
    let msg = match refused {
        Err(kube::Error::Api(e)) => e.message,
        other => panic!("a Binding by the admin was not refused: {other:?}"),
    };
    println!("Binding of team-bind/manual by the admin: {msg}");
    assert!(
        msg.contains("binding denied: username is not in the allowed list"),
        "{msg}"
    );
    let stored = pods.get("manual").await.unwrap();
    assert_eq!(
        stored.spec.unwrap().node_name,
        None,
        "the Pod stays unbound"
    );
}

/// The allocatable CPU of `node`, as stored.
fn allocatable_cpu(node: &Node) -> String {
    node.status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .and_then(|a| a.get("cpu"))
        .map(|q| q.0.clone())
        .unwrap_or_default()
}

/// The newest heartbeat of `node` (its Ready condition's `lastHeartbeatTime`).
fn heartbeat(node: &Node) -> Option<String> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")?
        .last_heartbeat_time
        .as_ref()
        .map(|t| t.0.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn node_status_is_amplified_under_every_kubelets_heartbeats() {
    const NODES: usize = 24;
    let ns = "team-nodes";
    let (cp, client) = own_control_plane(ns).await;
    let env = Env {
        client: client.clone(),
        ns: ns.to_owned(),
    };
    // The webhook first, so that every node's first status update goes through it.
    let (system, _opts) = start_services_in(
        &env,
        &cp.kubeconfig,
        Some(cp.admission_client_ca.clone()),
        &["node-config-webhook"],
        Vec::new(),
    )
    .await;
    let metrics = system
        .webhooks
        .iter()
        .find_map(|(r, _, _)| r.metrics.clone())
        .unwrap();
    // The API server picks up a new webhook configuration within a second or so.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let bins = testenv::tools::locate_cluster().unwrap();
    let _cluster = testenv::cluster::Cluster::start(&cp, &bins, NODES)
        .await
        .unwrap();
    // Every other node asks for 1.5 times its CPU (the annotation Koordinator's koordlet writes).
    let nodes: Api<Node> = Api::all(client.clone());
    let amplified = |i: usize| i.is_multiple_of(2);
    let index = |name: &str| -> usize {
        name.trim_start_matches("kwok-node-")
            .parse()
            .unwrap_or(usize::MAX)
    };
    for i in (0..NODES).filter(|i| amplified(*i)) {
        let patch = json!({"metadata": {"annotations": {
            "node.koordinator.sh/resource-amplification-ratio": "{\"cpu\":1.5}"}}});
        nodes
            .patch(
                &format!("kwok-node-{i}"),
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(patch),
            )
            .await
            .unwrap();
    }
    // Each node's status goes through the webhook at least twice after its annotation is set
    // (kwok's heartbeats come every 10 to 22 s); the amplified value is computed from the raw
    // one each time and never grows.
    let first: std::collections::BTreeMap<String, Option<String>> = nodes
        .list(&ListParams::default().labels("type=kwok"))
        .await
        .unwrap()
        .items
        .iter()
        .map(|n| (n.metadata.name.clone().unwrap_or_default(), heartbeat(n)))
        .collect();
    let seen = eventually(Duration::from_secs(90), || async {
        let list = nodes
            .list(&ListParams::default().labels("type=kwok"))
            .await
            .map_err(|e| e.to_string())?
            .items;
        let mut beats = 0;
        for n in &list {
            let name = n.metadata.name.clone().unwrap_or_default();
            let want = if amplified(index(&name)) { "48" } else { "32" };
            if allocatable_cpu(n) != want {
                return Err(format!("{name}: cpu {} (want {want})", allocatable_cpu(n)));
            }
            if heartbeat(n).is_some() && heartbeat(n) != first.get(&name).cloned().flatten() {
                beats += 1;
            }
        }
        if beats < list.len() {
            return Err(format!("{beats} of {} nodes beat again", list.len()));
        }
        Ok(list)
    })
    .await;
    for n in &seen {
        let raw = n
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("node.koordinator.sh/raw-allocatable"))
            .cloned();
        if amplified(index(n.metadata.name.as_deref().unwrap_or_default())) {
            assert_eq!(
                raw.as_deref(),
                Some("{\"cpu\":\"32\",\"memory\":\"128Gi\"}")
            );
        }
    }
    let allowed = metric_with(
        &metrics,
        "admission_webhook_decisions_total",
        &["webhook=\"/mutate-node-status\"", "decision=\"allowed\""],
    )
    .await;
    let failed = metric_with(
        &metrics,
        "admission_webhook_decisions_total",
        &["webhook=\"/mutate-node-status\"", "decision=\"error\""],
    )
    .await
        + metric_with(
            &metrics,
            "admission_webhook_decisions_total",
            &["webhook=\"/mutate-node-status\"", "decision=\"denied\""],
        )
        .await;
    assert!(
        allowed >= 2.0 * NODES as f64,
        "at least two status updates per node: {allowed}"
    );
    assert_eq!(failed, 0.0, "no status update refused or failed");
    println!(
        "{NODES} simulated kubelets: {allowed} node status updates through /mutate-node-status, none refused; \
         allocatable cpu 48 on the {} amplified nodes, 32 on the others",
        NODES / 2
    );

    // A Pod asking for 40 CPUs fits only an amplified node, and kube-scheduler puts it on one.
    let big: Pod = serde_json::from_value(json!({
        "metadata": {"name": "big"},
        "spec": {"containers": [{"name": "main", "image": "registry.example.com/app:1",
                                 "resources": {"requests": {"cpu": "40"}}}]}
    }))
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    pods.create(&PostParams::default(), &big).await.unwrap();
    let node = eventually(Duration::from_secs(60), || async {
        pods.get("big")
            .await
            .map_err(|e| e.to_string())?
            .spec
            .and_then(|s| s.node_name)
            .ok_or_else(|| "big: not bound yet".to_owned())
    })
    .await;
    assert!(
        amplified(index(&node)),
        "big bound to {node}, not amplified"
    );
    println!("Pod big (40 CPUs) bound to {node} (allocatable cpu 48)");
}
