//! `kubectl apply -k` of `kustomize/all` and of each service's overlay with the real kubectl (and
//! the kustomize built into it), in the cluster in a box: every object is accepted, every
//! Deployment's Pods are created by the controllers, placed by kube-scheduler on simulated nodes
//! (their requests, affinities and spread constraints met) and turn Ready, every Service selects
//! ready endpoints, and every PodDisruptionBudget counts its Pods. Then `kubectl delete -k` takes
//! it all away again before the next overlay.
//!
//! What this cannot show: no container runs (kwok marks the Pods Running and Ready), so the
//! images, probes, certificates and the webhooks' own answers are not exercised here; those are
//! the image and end-to-end tests' work.

use std::path::Path;
use std::time::Duration;

use e2e::cluster::kubectl;
use e2e::cluster::{OwnCluster, own_cluster};
use e2e::eventually;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ListParams};

/// The namespace every overlay installs into.
const NS: &str = "admission-webhooks";

/// What became of one overlay: its Deployments (name, ready/replicas, nodes).
async fn settled(client: &kube::Client) -> Result<Vec<String>, String> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let list = deployments
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?
        .items;
    if list.is_empty() {
        return Err("no Deployment yet".into());
    }
    let mut seen = Vec::new();
    for d in &list {
        let name = d.metadata.name.clone().unwrap_or_default();
        let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        let ready = d
            .status
            .as_ref()
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0);
        if ready != want {
            return Err(format!("{name}: {ready} of {want} ready"));
        }
        let selector = d
            .spec
            .as_ref()
            .and_then(|s| s.selector.match_labels.clone())
            .unwrap_or_default()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        let mut nodes: Vec<String> = pods
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| e.to_string())?
            .items
            .iter()
            .filter_map(|p| p.spec.as_ref()?.node_name.clone())
            .collect();
        nodes.sort();
        seen.push(format!("{name} {ready}/{want} on {}", nodes.join(", ")));
    }
    // Every Service selects ready endpoints: its selector matches the Pods.
    let services: Api<Service> = Api::namespaced(client.clone(), NS);
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), NS);
    for s in services
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?
        .items
    {
        let name = s.metadata.name.unwrap_or_default();
        let ready = slices
            .list(&ListParams::default().labels(&format!("kubernetes.io/service-name={name}")))
            .await
            .map_err(|e| e.to_string())?
            .items
            .iter()
            .flat_map(|sl| sl.endpoints.iter())
            .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
            .count();
        if ready == 0 {
            return Err(format!("Service {name}: no ready endpoint"));
        }
    }
    // Every budget counts its Pods.
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), NS);
    for b in budgets
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?
        .items
    {
        let name = b.metadata.name.unwrap_or_default();
        let healthy = b.status.map(|s| s.current_healthy).unwrap_or(0);
        if healthy == 0 {
            return Err(format!(
                "PodDisruptionBudget {name}: no healthy Pod counted"
            ));
        }
    }
    Ok(seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_overlay_applies_with_kubectl_and_its_pods_are_placed() {
    let OwnCluster {
        cp,
        env,
        cluster: _cluster,
    } = own_cluster("e2e-apply", 3, testenv::cluster::PodAddresses::Routable).await;
    let client = env.client.clone();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut overlays = vec!["all".to_owned()];
    let mut services: Vec<String> = std::fs::read_dir(root.join("services"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    services.sort();
    overlays.extend(services);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for overlay in &overlays {
        let dir = root.join("kustomize").join(overlay);
        let dir = dir.display().to_string();
        let o = kubectl(&cp.kubeconfig, &["apply", "-k", &dir]);
        assert!(o.ok, "kubectl apply -k kustomize/{overlay}: {}", o.shown());
        if overlay == "all" {
            println!("$ kubectl apply -k kustomize/all\n{}", o.shown());
        }
        let t = std::time::Instant::now();
        let seen = eventually(Duration::from_secs(120), || settled(&client)).await;
        println!(
            "kustomize/{overlay}: {} (settled in {:.1?})",
            seen.join("; "),
            t.elapsed()
        );
        let t = std::time::Instant::now();
        let o = kubectl(&cp.kubeconfig, &["delete", "-k", &dir, "--wait=false"]);
        assert!(o.ok, "kubectl delete -k kustomize/{overlay}: {}", o.shown());
        eventually(Duration::from_secs(120), || async {
            match namespaces.get_opt(NS).await.map_err(|e| e.to_string())? {
                None => Ok(()),
                Some(_) => Err(format!("namespace {NS} still there")),
            }
        })
        .await;
        println!("kustomize/{overlay}: deleted in {:.1?}", t.elapsed());
    }
}
