//! `cargo xtask footprint`: what each service uses on a real control plane, the figures behind the
//! Deployments' resource requests and limits. Every service runs as `cargo xtask up` runs it
//! (built with `--profile`, default `image`, what the images ship); then `--pods` pods charged to
//! ten ElasticQuotas go through scheduling-webhook and quota-state into their Pod caches, and
//! `--nodes` Nodes are created and have their status updated once (node-config-webhook's Node
//! cache and its status mutation). Printed per service: RSS at rest and after, peak RSS, and the
//! CPU time spent while the objects went through, per object.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;

/// One reading of a process.
#[derive(Debug, Clone, Copy)]
struct Sample {
    rss_kib: u64,
    peak_kib: u64,
    cpu_secs: f64,
}

fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// RSS of `pid` in MiB, 0 when it is gone (the soak's rows; `ticks` only scales CPU time).
pub fn rss_mib(pid: u32) -> f64 {
    sample(pid, 1.0).map_or(0.0, |s| s.rss_kib as f64 / 1024.0)
}

fn sample(pid: u32, ticks: f64) -> Result<Sample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("process {pid} is gone"))?;
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // After the command and its parenthesised name: state is field 3, utime and stime 14 and 15.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    Ok(Sample {
        rss_kib: kib("VmRSS:"),
        peak_kib: kib("VmHWM:"),
        cpu_secs: (tick(11) + tick(12)) / ticks,
    })
}

fn pod(i: usize, quota: &str) -> Pod {
    let env: Vec<_> = (0..6)
        .map(|k| json!({"name": format!("SETTING_{k}"), "value": format!("value-{i}-{k}")}))
        .collect();
    serde_json::from_value(json!({
        "metadata": {
            "name": format!("worker-{i}"),
            "labels": {"app": "trainer", "pod-template-hash": "7d9c5b6f8", "team": quota,
                       "quota.scheduling.koordinator.sh/name": quota},
            "annotations": {"example.com/commit": "4f0c2a9e1b7d", "example.com/owner": "ml-platform"}
        },
        "spec": {
            "containers": [
                {"name": "main", "image": "registry.example.com/ml/trainer:2.4.1",
                 "args": ["--epochs=10", "--batch-size=64"], "env": env,
                 "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                               "limits": {"memory": "256Mi"}},
                 "volumeMounts": [{"name": "data", "mountPath": "/data"}]},
                {"name": "sidecar", "image": "registry.example.com/ml/log-shipper:1.3",
                 "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}
            ],
            "volumes": [{"name": "data", "emptyDir": {}}]
        }
    }))
    .unwrap_or_default()
}

fn node(i: usize) -> Node {
    let images: Vec<_> = (0..10)
        .map(|k| json!({"names": [format!("registry.example.com/image-{k}@sha256:{:064x}", k * 7919 + i), format!("registry.example.com/image-{k}:v{k}")], "sizeBytes": 100_000_000 + k}))
        .collect();
    serde_json::from_value(json!({
        "metadata": {
            "name": format!("gpu-node-{i}"),
            "labels": {"kubernetes.io/hostname": format!("gpu-node-{i}"), "kubernetes.io/os": "linux",
                       "kubernetes.io/arch": "amd64", "node.kubernetes.io/instance-type": "gpu-8x",
                       "topology.kubernetes.io/zone": format!("zone-{}", i % 3),
                       "nvidia.com/gpu.product": "H100"}
        },
        "status": {
            "capacity": {"cpu": "96", "memory": "1056Gi", "nvidia.com/gpu": "8", "pods": "110"},
            "allocatable": {"cpu": "94", "memory": "1040Gi", "nvidia.com/gpu": "8", "pods": "110"},
            "addresses": [{"type": "InternalIP", "address": format!("10.0.{}.{}", i / 250, i % 250)},
                          {"type": "Hostname", "address": format!("gpu-node-{i}")}],
            "nodeInfo": {"machineID": format!("{i:032x}"), "systemUUID": format!("{i:032x}"),
                         "bootID": format!("{i:032x}"), "kernelVersion": "6.8.0", "osImage": "Ubuntu 24.04",
                         "containerRuntimeVersion": "containerd://2.0.0", "kubeletVersion": "v1.34.4",
                         "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"},
            "images": images
        }
    }))
    .unwrap_or_default()
}

/// Runs `calls` with 16 in flight; returns how many failed.
async fn failures<F, T>(calls: impl IntoIterator<Item = F>) -> usize
where
    F: std::future::Future<Output = Result<T, kube::Error>>,
{
    futures::stream::iter(calls)
        .buffer_unordered(16)
        .filter(|r| futures::future::ready(r.is_err()))
        .count()
        .await
}

/// Creates `items`; returns how many were refused.
async fn create_all<K, I>(api: &Api<K>, items: I) -> usize
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
    I: IntoIterator<Item = K>,
{
    failures(items.into_iter().map(|o| {
        let api = api.clone();
        async move { api.create(&PostParams::default(), &o).await }
    }))
    .await
}

/// Runs the measurement and prints the table.
pub async fn run(
    bins: &testenv::Binaries,
    bin_dir: std::path::PathBuf,
    services: Vec<String>,
    pods: usize,
    nodes: usize,
) -> Result<()> {
    let mut cp = testenv::ControlPlane::start(bins).await?;
    let client = cp.client().await?;
    let opts = testenv::system::Options {
        bin_dir,
        services,
        kubeconfig: cp.kubeconfig.clone(),
        dir: cp.dir().to_path_buf(),
        namespace_selector: admission_kit::cluster::registration::all_namespaces_except(&[
            "kube-system",
        ]),
        name_suffix: String::new(),
        namespace: "default".into(),
        port_base: None,
        client_ca: Some(cp.admission_client_ca.clone()),
        webhook_args: Vec::new(),
        args_of: Default::default(),
    };
    let system = testenv::system::start(&client, &opts).await?;
    let mut procs: Vec<(String, u32)> = system
        .webhooks
        .iter()
        .map(|(r, _, _)| (r.name.clone(), r.id()))
        .collect();
    if let Some((_, r)) = &system.quota_state {
        procs.push((r.name.clone(), r.id()));
    }
    procs.sort();
    let ticks = clock_ticks();
    let read = |procs: &[(String, u32)]| -> Result<Vec<Sample>> {
        procs.iter().map(|(_, pid)| sample(*pid, ticks)).collect()
    };
    // Webhook configurations are picked up asynchronously; quota-state takes its Lease.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let rest = read(&procs)?;

    let eq = ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(
        "scheduling.sigs.k8s.io",
        "v1alpha1",
        "ElasticQuota",
    ));
    let teams: Vec<String> = (0..10).map(|t| format!("team-{t}")).collect();
    for t in &teams {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": t}}))?;
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await?;
        let q: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": t, "namespace": t},
            "spec": {"max": {"cpu": "100000", "memory": "100000Gi"}, "min": {"cpu": "10", "memory": "10Gi"}}
        }))?;
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), t, &eq);
        // quota-state answers QV once it leads: retry for a while.
        let deadline = Instant::now() + Duration::from_secs(60);
        while let Err(e) = api.create(&PostParams::default(), &q).await {
            if Instant::now() > deadline {
                anyhow::bail!("ElasticQuota {t}: {e}");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    let started = Instant::now();
    let before = read(&procs)?;
    let mut refused = 0;
    for (t, team) in teams.iter().enumerate() {
        let api: Api<Pod> = Api::namespaced(client.clone(), team);
        let mine = (0..pods).filter(|i| i % teams.len() == t);
        refused += create_all(&api, mine.map(|i| pod(i, team))).await;
    }
    let pods_secs = started.elapsed().as_secs_f64();
    let after_pods = read(&procs)?;
    let nodes_api: Api<Node> = Api::all(client.clone());
    refused += create_all(&nodes_api, (0..nodes).map(node)).await;
    // One kubelet heartbeat each: a status update through /mutate-node-status.
    let now = "2026-11-22T00:00:00Z";
    refused += failures((0..nodes).map(|i| {
        let api = nodes_api.clone();
        async move {
            let patch = json!({"status": {"conditions": [{"type": "Ready", "status": "True",
                "reason": "KubeletReady", "lastHeartbeatTime": now, "lastTransitionTime": now}]}});
            api.patch_status(
                &format!("gpu-node-{i}"),
                &PatchParams::default(),
                &Patch::Strategic(&patch),
            )
            .await
        }
    }))
    .await;
    let after_nodes = read(&procs)?;
    // Let caches and the usage write-back settle.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let settled = read(&procs)?;

    println!(
        "\n{pods} pods in {} quotas created in {pods_secs:.1} s ({:.0}/s), {nodes} nodes created and heartbeated, {refused} refused\n",
        teams.len(),
        pods as f64 / pods_secs
    );
    println!(
        "| service | RSS at rest | RSS after | peak RSS | CPU per pod | CPU per node (create + status) |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    let mib = |k: u64| format!("{:.1} MiB", k as f64 / 1024.0);
    let per = |secs: f64, n: usize| {
        if n == 0 {
            "-".to_owned()
        } else {
            format!("{:.0} µs", secs / n as f64 * 1e6)
        }
    };
    for (i, (name, _)) in procs.iter().enumerate() {
        println!(
            "| {name} | {} | {} | {} | {} | {} |",
            mib(rest[i].rss_kib),
            mib(settled[i].rss_kib),
            mib(settled[i].peak_kib),
            per(after_pods[i].cpu_secs - before[i].cpu_secs, pods),
            per(after_nodes[i].cpu_secs - after_pods[i].cpu_secs, nodes),
        );
    }
    drop(system);
    cp.stop();
    Ok(())
}
