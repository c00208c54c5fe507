//! The cluster in a box itself, with none of our webhooks: kube-controller-manager makes a
//! Deployment's Pods, kube-scheduler binds them to simulated nodes, kwok runs them (Running, an
//! IP) and finishes a Job's, and the nodes send heartbeats. What the other tests drive through
//! controllers stands on this.

use std::time::Duration;

use e2e::cluster::{OwnCluster, own_cluster};
use e2e::eventually;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controllers_a_scheduler_and_simulated_nodes_run_workloads() {
    let ns = "box";
    let OwnCluster {
        cp: _cp,
        env,
        cluster: _cluster,
    } = own_cluster(ns, 2, testenv::cluster::PodAddresses::Routable).await;
    let client = env.client.clone();
    let nodes: Api<Node> = Api::all(client.clone());
    eventually(Duration::from_secs(60), || async {
        let ready = nodes
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .items
            .iter()
            .filter(|n| ready(n).is_some())
            .count();
        if ready == 2 {
            Ok(())
        } else {
            Err(format!("{ready} of 2 nodes Ready"))
        }
    })
    .await;

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
    deployments
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "web"},
                "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                         "template": {"metadata": {"labels": {"app": "web"}},
                                      "spec": {"containers": [{"name": "web", "image": "registry.example.com/web:1",
                                               "resources": {"requests": {"cpu": "100m"}}}]}}}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
    jobs.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "metadata": {"name": "batch"},
            "spec": {"completions": 2, "parallelism": 1,
                     "template": {"spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "work", "image": "registry.example.com/work:1"}]}}}
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    eventually(Duration::from_secs(60), || async {
        let running: Vec<Pod> = pods
            .list(&ListParams::default().labels("app=web"))
            .await
            .map_err(|e| e.to_string())?
            .items
            .into_iter()
            .filter(|p| {
                let s = p.status.as_ref();
                s.and_then(|s| s.phase.as_deref()) == Some("Running")
                    && s.and_then(|s| s.pod_ip.as_deref()).is_some()
                    && p.spec
                        .as_ref()
                        .and_then(|s| s.node_name.as_deref())
                        .is_some()
            })
            .collect();
        if running.len() == 3 {
            Ok(())
        } else {
            Err(format!("{} of 3 Pods running", running.len()))
        }
    })
    .await;
    eventually(Duration::from_secs(60), || async {
        let job = jobs.get("batch").await.map_err(|e| e.to_string())?;
        match job.status.and_then(|s| s.succeeded) {
            Some(2) => Ok(()),
            n => Err(format!("{n:?} of 2 succeeded")),
        }
    })
    .await;
    // Heartbeats: a node's Ready condition is reported again.
    let first = ready(&nodes.get("kwok-node-0").await.unwrap()).unwrap();
    eventually(Duration::from_secs(60), || async {
        let now = ready(&nodes.get("kwok-node-0").await.map_err(|e| e.to_string())?);
        if now.is_some() && now != Some(first.clone()) {
            Ok(())
        } else {
            Err("no heartbeat yet".to_owned())
        }
    })
    .await;
    println!(
        "2 simulated nodes Ready and beating; Deployment web: 3 Pods Running; Job batch: 2 succeeded"
    );
}

/// The Ready condition's last heartbeat, when the node is Ready.
fn ready(n: &Node) -> Option<String> {
    n.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")
        .map(|c| {
            c.last_heartbeat_time
                .as_ref()
                .map(|t| t.0.to_string())
                .unwrap_or_default()
        })
}
