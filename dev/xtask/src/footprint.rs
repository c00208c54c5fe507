//! `cargo xtask footprint`: what each service uses on a real control plane, the figures behind the
//! Deployments' resource requests and limits. Every service runs as `cargo xtask up` runs it
//! (built with `--profile`, default `image`, what the images ship); then `--pods` pods charged to
//! ten ElasticQuotas go through scheduling-webhook and quota-state into their Pod caches, and
//! `--nodes` Nodes are created and have their status updated once (node-config-webhook's Node
//! cache and its status mutation). Printed per service: RSS at rest and after, peak RSS, and the
//! CPU time spent while the objects went through, per object; under the table, `lone-message`'s
//! floor on this machine now (the CPU of a bare tokio server per message that arrives alone).
//!
//! A pod then lives as it would with a scheduler and a kubelet, which the test control plane
//! lacks: it is bound to a node (the scheduler's Binding, through `/validate-pod-binding` when PB
//! is on), and its status is written twice (the kubelet's "containers being created", then
//! "running and ready"). So each pod's watches see the events a real start gives them: added,
//! scheduled, two status updates. Then every pod is deleted as a kubelet finishes a deletion:
//! marked for deletion, the kubelet's last status, removed (three more events; the `delete`
//! column, per pod, not part of `whole`).
//!
//! With `--stages`, `perf record` samples scheduling-webhook and quota-state while the pods go
//! through, and a table gives each stage's share of their CPU and its microseconds per pod
//! ([`crate::stages`] classifies the samples).

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;

/// One reading of a process.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// Resident set now.
    pub rss_kib: u64,
    /// Largest resident set so far.
    pub peak_kib: u64,
    /// User and system CPU time so far.
    pub cpu_secs: f64,
}

/// Clock ticks per second, the unit of `/proc/<pid>/stat`'s CPU times.
pub fn clock_ticks() -> f64 {
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

/// Reads `pid`'s memory and CPU time (`ticks` from [`clock_ticks`]).
pub fn sample(pid: u32, ticks: f64) -> Result<Sample> {
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

/// The node pod `i` is bound to.
fn node_of(i: usize) -> String {
    format!("gpu-node-{}", i % 200)
}

/// The scheduler's Binding of pod `i`.
fn binding(i: usize) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Binding",
           "metadata": {"name": format!("worker-{i}")},
           "target": {"apiVersion": "v1", "kind": "Node", "name": node_of(i)}})
}

/// The kubelet's status of pod `i`: containers being created (`running` false), or running and
/// ready, as the kubelet writes them.
fn kubelet_status(i: usize, running: bool) -> serde_json::Value {
    let at = "2026-11-27T00:00:00Z";
    let cond = |t: &str, ok: bool| {
        json!({"type": t, "status": if ok { "True" } else { "False" }, "lastProbeTime": null,
               "lastTransitionTime": at})
    };
    let container = |name: &str, image: &str| {
        if running {
            json!({"name": name, "image": image, "ready": true, "started": true, "restartCount": 0,
                   "imageID": format!("{image}@sha256:{:064x}", i),
                   "containerID": format!("containerd://{:064x}", i * 2 + name.len()),
                   "state": {"running": {"startedAt": at}}})
        } else {
            json!({"name": name, "image": image, "ready": false, "started": false, "restartCount": 0,
                   "imageID": "", "state": {"waiting": {"reason": "ContainerCreating"}}})
        }
    };
    let ip = format!("10.1.{}.{}", i / 250 % 250, i % 250);
    let mut status = json!({
        "phase": if running { "Running" } else { "Pending" },
        "hostIP": "10.0.0.1", "hostIPs": [{"ip": "10.0.0.1"}], "startTime": at, "qosClass": "Burstable",
        "conditions": [cond("PodReadyToStartContainers", running), cond("Initialized", true),
                       cond("Ready", running), cond("ContainersReady", running), cond("PodScheduled", true)],
        "containerStatuses": [container("main", "registry.example.com/ml/trainer:2.4.1"),
                              container("sidecar", "registry.example.com/ml/log-shipper:1.3")]
    });
    if running {
        status["podIP"] = json!(ip);
        status["podIPs"] = json!([{"ip": ip}]);
    }
    json!({ "status": status })
}

/// Binds each pod and writes its status twice, as a scheduler and a kubelet would; returns how
/// many calls failed.
async fn start_pods(client: &kube::Client, teams: &[String], pods: usize) -> usize {
    let api = |i: usize| Api::<Pod>::namespaced(client.clone(), &teams[i % teams.len()]);
    let mut failed = failures((0..pods).map(|i| {
        let api = api(i);
        async move {
            api.create_subresource::<_, serde_json::Value>(
                "binding",
                &format!("worker-{i}"),
                &PostParams::default(),
                &binding(i),
            )
            .await
        }
    }))
    .await;
    for running in [false, true] {
        failed += failures((0..pods).map(|i| {
            let api = api(i);
            async move {
                api.patch_status(
                    &format!("worker-{i}"),
                    &PatchParams::default(),
                    &Patch::Merge(kubelet_status(i, running)),
                )
                .await
            }
        }))
        .await;
    }
    failed
}

/// Deletes each pod as the API server and a kubelet do: the delete marks it (its grace period
/// starts), the kubelet writes its last status (containers stopped, phase Failed, as kubelets
/// since 1.27 give a deleted pod a terminal phase) and deletes it for good; three events for the
/// watches. Returns how many calls failed.
async fn delete_pods(client: &kube::Client, teams: &[String], pods: usize) -> usize {
    let api = |i: usize| Api::<Pod>::namespaced(client.clone(), &teams[i % teams.len()]);
    let name = |i: usize| format!("worker-{i}");
    let mut failed = failures((0..pods).map(|i| {
        let api = api(i);
        async move {
            api.delete(&name(i), &DeleteParams::default())
                .await
                .map(|_| ())
        }
    }))
    .await;
    failed += failures((0..pods).map(|i| {
        let api = api(i);
        let stopped = |c: &str| {
            json!({"name": c, "ready": false, "started": false, "restartCount": 0,
                   "state": {"terminated": {"exitCode": 143, "reason": "Error",
                             "startedAt": "2026-11-27T00:00:00Z", "finishedAt": "2026-11-27T00:01:00Z"}}})
        };
        let last = json!({"status": {"phase": "Failed",
            "containerStatuses": [stopped("main"), stopped("sidecar")]}});
        async move {
            api.patch_status(&name(i), &PatchParams::default(), &Patch::Merge(last))
                .await
                .map(|_| ())
        }
    }))
    .await;
    failed += failures((0..pods).map(|i| {
        let api = api(i);
        async move {
            api.delete(&name(i), &DeleteParams::default().grace_period(0))
                .await
                .map(|_| ())
        }
    }))
    .await;
    failed
}

/// `lone-message`'s line: the CPU a bare one-worker tokio server spends per message that
/// arrives alone, the floor under each Pod event and review in the table (or why it is missing).
fn lone_message(bin_dir: &std::path::Path) -> String {
    let bin = bin_dir.join("lone-message");
    match std::process::Command::new(&bin).output() {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        Ok(o) => format!(
            "lone-message failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => format!("lone-message not run ({}): {e}", bin.display()),
    }
}

/// `perf record` of the processes to profile, running until [`Recording::finish`].
struct Recording {
    perf: Vec<(String, std::process::Child, std::path::PathBuf)>,
    dir: std::path::PathBuf,
}

impl Recording {
    fn start(procs: &[(String, u32)]) -> Result<Self> {
        let dir = crate::root().join("target").join("footprint");
        std::fs::create_dir_all(&dir)?;
        let mut perf = Vec::new();
        for (name, pid) in procs
            .iter()
            .filter(|(n, _)| n == "scheduling-webhook" || n == "quota-state")
        {
            let data = dir.join(format!("{name}.data"));
            let child = std::process::Command::new("perf")
                .args(["record", "--call-graph", "dwarf,16384", "-F", "997", "-q"])
                .arg("-o")
                .arg(&data)
                .args(["-p", &pid.to_string()])
                .stdout(std::process::Stdio::null())
                .spawn()
                .context("running perf record (is perf installed?)")?;
            perf.push((name.clone(), child, data));
        }
        Ok(Self { perf, dir })
    }

    /// Stops perf and classifies each process's samples; the recordings stay in
    /// `target/footprint/` for `perf report -i`.
    fn finish(self) -> Result<Vec<(String, crate::stages::Counts)>> {
        let mut out = Vec::new();
        for (name, mut child, data) in self.perf {
            // perf writes its file on SIGINT.
            std::process::Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status()?;
            child.wait()?;
            out.push((name, crate::stages::classify_file(&data)?));
        }
        eprintln!("perf recordings kept in {}", self.dir.display());
        Ok(out)
    }
}

/// What a run creates, how it is watched, and the services' extra arguments.
pub struct Load {
    /// Pods created, bound and started.
    pub pods: usize,
    /// Nodes created and heartbeated.
    pub nodes: usize,
    /// Profile scheduling-webhook and quota-state with perf.
    pub stages: bool,
    /// More `serve` arguments by service.
    pub args_of: std::collections::BTreeMap<String, Vec<String>>,
}

/// Runs the measurement and prints the table.
pub async fn run(
    bins: &testenv::Binaries,
    bin_dir: std::path::PathBuf,
    services: Vec<String>,
    load: Load,
) -> Result<()> {
    let Load {
        pods,
        nodes,
        stages,
        args_of,
    } = load;
    // Before the control plane starts, on a quiet machine.
    let floor = lone_message(&bin_dir);
    let mut cp = testenv::ControlPlane::start(bins).await?;
    let client = cp.client().await?;
    let opts = testenv::system::Options {
        args_of,
        ..testenv::system::Options::as_up(&cp, bin_dir, services)
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
    let recording = if stages {
        let r = Recording::start(&procs)?;
        // perf needs a moment to attach before the pods go.
        tokio::time::sleep(Duration::from_secs(1)).await;
        Some(r)
    } else {
        None
    };
    let started = Instant::now();
    let before = read(&procs)?;
    let mut refused = 0;
    for (t, team) in teams.iter().enumerate() {
        let api: Api<Pod> = Api::namespaced(client.clone(), team);
        let mine = (0..pods).filter(|i| i % teams.len() == t);
        refused += create_all(&api, mine.map(|i| pod(i, team))).await;
    }
    let pods_secs = started.elapsed().as_secs_f64();
    let after_create = read(&procs)?;
    let lifecycle_failed = start_pods(&client, &teams, pods).await;
    let lifecycle_secs = started.elapsed().as_secs_f64() - pods_secs;
    // The watches' last events.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after_pods = read(&procs)?;
    let profiles = match recording {
        Some(r) => r.finish()?,
        None => Vec::new(),
    };
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
    // Last, so that the figures above are of a cluster holding the pods.
    let deleting = Instant::now();
    let delete_failed = delete_pods(&client, &teams, pods).await;
    let delete_secs = deleting.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after_delete = read(&procs)?;

    println!(
        "\n{pods} pods in {} quotas created in {pods_secs:.1} s ({:.0}/s), bound and their status written twice in {lifecycle_secs:.1} s ({lifecycle_failed} calls failed), deleted in {delete_secs:.1} s ({delete_failed} calls failed), {nodes} nodes created and heartbeated, {refused} refused\n",
        teams.len(),
        pods as f64 / pods_secs
    );
    println!(
        "| service | RSS at rest | RSS after | RSS per pod | peak RSS | CPU per pod: create | bind, 2 status updates | whole | delete (3 events) | CPU per node (create + status) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let mib = |k: u64| format!("{:.1} MiB", k as f64 / 1024.0);
    let per = |secs: f64, n: usize| {
        if n == 0 {
            "-".to_owned()
        } else {
            format!("{:.0} µs", secs / n as f64 * 1e6)
        }
    };
    for (i, (name, _)) in procs.iter().enumerate() {
        let grown = after_pods[i].rss_kib as f64 - before[i].rss_kib as f64;
        println!(
            "| {name} | {} | {} | {:.2} KiB | {} | {} | {} | {} | {} | {} |",
            mib(rest[i].rss_kib),
            mib(settled[i].rss_kib),
            grown / pods.max(1) as f64,
            mib(settled[i].peak_kib),
            per(after_create[i].cpu_secs - before[i].cpu_secs, pods),
            per(after_pods[i].cpu_secs - after_create[i].cpu_secs, pods),
            per(after_pods[i].cpu_secs - before[i].cpu_secs, pods),
            per(after_delete[i].cpu_secs - settled[i].cpu_secs, pods),
            per(after_nodes[i].cpu_secs - after_pods[i].cpu_secs, nodes),
        );
    }
    println!("\nThis machine now: {floor}");
    for (name, counts) in &profiles {
        let i = procs.iter().position(|(n, _)| n == name).unwrap_or(0);
        let cpu = after_pods[i].cpu_secs - before[i].cpu_secs;
        println!(
            "\n{name}: where a pod's CPU goes ({} samples)\n",
            counts.values().sum::<usize>()
        );
        crate::stages::print_one(counts, cpu * 1e6 / pods.max(1) as f64, "pod");
    }
    if !profiles.is_empty() {
        println!(
            "\nperf record --call-graph dwarf at 997 Hz on each process from the first pod created to the last status written; µs per pod = share × the process's CPU per pod in this run (which perf's unwinding raises: compare shares, and take the CPU figures from a run without --stages)."
        );
    }
    drop(system);
    cp.stop();
    Ok(())
}
