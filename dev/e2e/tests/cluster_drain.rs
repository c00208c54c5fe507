//! `kubectl drain` in the cluster in a box: a Deployment's Pods opted in to drain before delete
//! (lifecycle-webhook as `cargo xtask up` starts it) with a PodDisruptionBudget, on a node that is
//! drained with the real kubectl. kwok gives Pods loopback IPs, so one server of this test
//! listening on every address plays each Pod's drain endpoint, told apart by the address it was
//! called at. Each eviction waits for its Pod's drain (429 naming the progress), then for the
//! budget (the replacement Pods cannot run while the other node is cordoned); once they can,
//! the node empties and `kubectl drain` succeeds.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use e2e::cluster::{OwnCluster, own_cluster};
use e2e::cluster::{kubectl, kubectl_with, start_services_in};
use e2e::eventually;
use http_body_util::Full;
use hyper::body::Bytes;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, ListParams, PostParams};
use lifecycle_webhook::{LABEL, PATH_ANNOTATION, PORT_ANNOTATION};
use serde_json::json;

/// Drain endpoints of every Pod: answers 202 ("<n> requests in flight") to the first two calls
/// at an address and 200 from the third on, counting the calls per address.
#[derive(Clone)]
struct DrainEndpoints {
    port: u16,
    calls: Arc<Mutex<BTreeMap<IpAddr, u32>>>,
}

impl DrainEndpoints {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind(("0.0.0.0", 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let calls = Arc::new(Mutex::new(BTreeMap::new()));
        let counted = calls.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let Ok(local) = stream.local_addr() else {
                    continue;
                };
                let counted = counted.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(
                        move |_req: hyper::Request<hyper::body::Incoming>| {
                            let n = {
                                let mut c = counted.lock().unwrap();
                                let n = c.entry(local.ip()).or_insert(0);
                                *n += 1;
                                *n
                            };
                            async move {
                                let (status, body) = if n < 3 {
                                    (202, format!("in-flight requests: {}\n", 3 - n))
                                } else {
                                    (200, String::new())
                                };
                                let mut resp = hyper::Response::new(Full::new(Bytes::from(body)));
                                *resp.status_mut() = http::StatusCode::from_u16(status).unwrap();
                                Ok::<_, std::convert::Infallible>(resp)
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self { port, calls }
    }

    /// Calls seen at the address `ip`.
    fn calls_at(&self, ip: &str) -> u32 {
        let Ok(ip) = ip.parse::<IpAddr>() else {
            return 0;
        };
        self.calls.lock().unwrap().get(&ip).copied().unwrap_or(0)
    }
}

/// The Pods of Deployment `llm`: (name, node, phase, IP).
async fn llm_pods(pods: &Api<Pod>) -> Vec<(String, String, String, String)> {
    pods.list(&ListParams::default().labels("app=llm"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let spec = p.spec.unwrap_or_default();
            let status = p.status.unwrap_or_default();
            (
                p.metadata.name.unwrap_or_default(),
                spec.node_name.unwrap_or_default(),
                status.phase.unwrap_or_default(),
                status.pod_ip.unwrap_or_default(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_drain_waits_for_each_pods_drain_and_for_the_budget() {
    let ns = "serving";
    let OwnCluster {
        cp,
        env,
        cluster: _cluster,
    } = own_cluster(ns, 2, testenv::cluster::PodAddresses::Loopback).await;
    let client = env.client.clone();
    // The drain record, as the overlay ships it (empty), in the test's namespace.
    let record: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "lifecycle-webhook-drains"}})).unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &record)
        .await
        .unwrap();
    // The API server's client certificate is required, so every eviction it sends drains (LD-13).
    let (_system, _opts) = start_services_in(
        &env,
        &cp.kubeconfig,
        Some(cp.admission_client_ca.clone()),
        &["lifecycle-webhook"],
        vec![format!("--drain-record-namespace={ns}")],
    )
    .await;
    let endpoints = DrainEndpoints::start().await;
    let kc = cp.kubeconfig.clone();
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);

    // Both replicas on kwok-node-0 (node 1 cordoned while they are placed).
    let o = kubectl(&kc, &["cordon", "kwok-node-1"]);
    assert!(o.ok, "{}", o.shown());
    let manifest = format!(
        "{}\n---\n{}",
        serde_json::to_string(&json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "llm"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "llm"}},
                     "template": {"metadata": {"labels": {"app": "llm", LABEL: "true"},
                                               "annotations": {PORT_ANNOTATION: endpoints.port.to_string(),
                                                               PATH_ANNOTATION: "/drain"}},
                                  "spec": {"containers": [{"name": "server", "image": "registry.example.com/model-server:1"}]}}}
        }))
        .unwrap(),
        serde_json::to_string(&json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "llm"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "llm"}}}
        }))
        .unwrap()
    );
    let o = kubectl_with(&kc, &["apply", "-n", ns, "-f", "-"], &manifest);
    assert!(o.ok, "{}", o.shown());
    let first = eventually(Duration::from_secs(60), || async {
        let p = llm_pods(&pods).await;
        if p.len() == 2
            && p.iter()
                .all(|(_, n, ph, ip)| n == "kwok-node-0" && ph == "Running" && !ip.is_empty())
        {
            Ok(p)
        } else {
            Err(format!("llm: {p:?}"))
        }
    })
    .await;
    // The budget must have counted both before the drain starts.
    let budgets: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> =
        Api::namespaced(client.clone(), ns);
    eventually(Duration::from_secs(60), || async {
        let s = budgets
            .get("llm")
            .await
            .map_err(|e| e.to_string())?
            .status
            .unwrap_or_default();
        match s.disruptions_allowed {
            1 => Ok(()),
            n => Err(format!("budget allows {n} disruptions")),
        }
    })
    .await;

    // kubectl drain, as a user runs it, while node 1 is still cordoned.
    let drain_kc = kc.clone();
    let drain = std::thread::spawn(move || {
        kubectl(
            &drain_kc,
            &[
                "drain",
                "kwok-node-0",
                "--ignore-daemonsets",
                "--timeout=300s",
            ],
        )
    });
    // Both Pods drain (each is called until it says done); one is evicted, and its replacement
    // cannot run, so the budget holds the other: it is still there after saying done (its third
    // call), and kubectl's next attempt calls it a fourth time.
    eventually(Duration::from_secs(120), || async {
        let now = llm_pods(&pods).await;
        let on_0: Vec<_> = now
            .iter()
            .filter(|(_, n, _, _)| n == "kwok-node-0")
            .collect();
        let pending = now.iter().filter(|(_, _, ph, _)| ph == "Pending").count();
        let held = match on_0.as_slice() {
            [(_, _, _, ip)] => endpoints.calls_at(ip) >= 4,
            _ => false,
        };
        if held && pending >= 1 {
            Ok(())
        } else {
            Err(format!(
                "held by the budget {held}, pending {pending}: {now:?}"
            ))
        }
    })
    .await;
    // Room for the replacements: the budget lets the last Pod go and the node empties.
    let o = kubectl(&kc, &["uncordon", "kwok-node-1"]);
    assert!(o.ok, "{}", o.shown());
    let o = drain.join().unwrap();
    println!(
        "$ kubectl drain kwok-node-0 --ignore-daemonsets\n{}",
        o.shown()
    );
    assert!(o.ok, "{}", o.shown());
    assert!(
        o.stderr.contains("draining llm-"),
        "each eviction waited for a drain: {}",
        o.stderr
    );
    assert!(
        o.stderr.contains("disruption budget"),
        "an eviction waited for the budget: {}",
        o.stderr
    );
    let after = llm_pods(&pods).await;
    assert!(
        after.iter().all(|(_, n, _, _)| n == "kwok-node-1"),
        "node 0 is empty: {after:?}"
    );
    for (name, _, _, ip) in &first {
        println!(
            "{name} ({ip}): drain endpoint called {} times",
            endpoints.calls_at(ip)
        );
    }
}
