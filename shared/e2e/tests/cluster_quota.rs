//! Quota as users meet it through controllers: quota-state and scheduling-webhook as `cargo xtask
//! up` starts them, in the cluster in a box (kube-controller-manager, kube-scheduler, kwok's
//! simulated nodes) and driven with the real kubectl.
//!
//! A quota of 5 CPUs, 2 of them held by Deployment `batch`. Deployment `web` of 5 one-CPU Pods is
//! admitted with WQ-3's warning; its ReplicaSet creates 3 Pods and its `FailedCreate` events carry
//! the webhook's refusal of the rest; `kubectl scale deployment batch --replicas=0` frees 2 CPUs
//! and the ReplicaSet's next retry creates the 2 missing Pods, nobody acting on `web`;
//! `kubectl scale deployment web --replicas=6` (6 CPUs, more than the quota allows) is refused at
//! once with the arithmetic (WQ-2). Then a Job of 10 one-CPU Pods, 5 at once, in the whole quota:
//! finished Pods give their CPU back, all 10 succeed, and the quota is free again.

use std::process::Command;
use std::time::Duration;

use e2e::quota::start_in;
use e2e::{Env, eventually, own_control_plane};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams};
use serde_json::json;

/// Runs the real kubectl against `kubeconfig`: its exit status, stdout and stderr.
fn kubectl(kubeconfig: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    kubectl_with(kubeconfig, args, "")
}

/// As [`kubectl`], with `stdin` as its input (a manifest for `-f -`).
fn kubectl_with(
    kubeconfig: &std::path::Path,
    args: &[&str],
    stdin: &str,
) -> (bool, String, String) {
    use std::io::Write as _;
    let bins = testenv::tools::locate_cluster().unwrap();
    let mut child = Command::new(&bins.kubectl)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A Deployment of `replicas` one-CPU Pods charged to `quota`, as YAML for `kubectl apply -f -`.
fn deployment(name: &str, quota: &str, replicas: u32) -> String {
    serde_json::to_string(&json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name, "quota.scheduling.koordinator.sh/name": quota}},
                              "spec": {"containers": [{"name": "main", "image": "registry.example.com/app:1",
                                       "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}}]}}}
    }))
    .unwrap()
}

fn apply(kubeconfig: &std::path::Path, ns: &str, manifest: &str) -> (bool, String, String) {
    kubectl_with(kubeconfig, &["apply", "-n", ns, "-f", "-"], manifest)
}

/// Running Pods of Deployment `app`.
async fn running(pods: &Api<Pod>, app: &str) -> Result<usize, String> {
    Ok(pods
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .map_err(|e| e.to_string())?
        .items
        .iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .count())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deployment_past_its_quota_waits_for_room_through_the_controllers() {
    let ns = "team-a";
    let (cp, client) = own_control_plane(ns).await;
    let bins = testenv::tools::locate_cluster().unwrap();
    let _cluster = testenv::cluster::Cluster::start(&cp, &bins, 2)
        .await
        .unwrap();
    let env = Env {
        client: client.clone(),
        ns: ns.to_owned(),
    };
    let (_system, _opts, quota) = start_in(&env, &cp.kubeconfig, None, "cpu", 5, Vec::new()).await;
    let kc = cp.kubeconfig.clone();
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);

    let (ok, out, err) = apply(&kc, ns, &deployment("batch", &quota, 2));
    assert!(ok, "{out}{err}");
    eventually(Duration::from_secs(60), || async {
        match running(&pods, "batch").await? {
            2 => Ok(()),
            n => Err(format!("batch: {n} of 2 running")),
        }
    })
    .await;

    let (ok, out, err) = apply(&kc, ns, &deployment("web", &quota, 5));
    assert!(ok, "{out}{err}");
    println!("$ kubectl apply -f web.yaml\n{err}{out}");
    assert!(err.contains("WQ-3"), "the warning names the rule: {err}");
    eventually(Duration::from_secs(60), || async {
        match running(&pods, "web").await? {
            3 => Ok(()),
            n => Err(format!("web: {n} of 3 running")),
        }
    })
    .await;
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    let failed = eventually(Duration::from_secs(60), || async {
        events
            .list(&ListParams::default().fields("reason=FailedCreate"))
            .await
            .map_err(|e| e.to_string())?
            .items
            .into_iter()
            .find_map(|e| e.message.filter(|m| m.contains("exceeded quota")))
            .ok_or_else(|| "no FailedCreate event yet".to_owned())
    })
    .await;
    println!("ReplicaSet event FailedCreate: {failed}");
    assert_eq!(running(&pods, "web").await.unwrap(), 3);

    // Room is made elsewhere: web's ReplicaSet creates the rest on its next retry.
    let (ok, out, err) = kubectl(
        &kc,
        &["scale", "-n", ns, "deployment", "batch", "--replicas=0"],
    );
    assert!(ok, "{out}{err}");
    println!("$ kubectl scale deployment batch --replicas=0\n{out}");
    let freed = std::time::Instant::now();
    eventually(Duration::from_secs(120), || async {
        match running(&pods, "web").await? {
            5 => Ok(()),
            n => Err(format!("web: {n} of 5 running")),
        }
    })
    .await;
    println!(
        "web: 5 of 5 running {:.1?} after batch scaled to 0",
        freed.elapsed()
    );

    // Past what the quota can ever hold: refused at once, with the arithmetic.
    let (ok, out, err) = kubectl(
        &kc,
        &["scale", "-n", ns, "deployment", "web", "--replicas=6"],
    );
    println!("$ kubectl scale deployment web --replicas=6\n{out}{err}");
    assert!(!ok, "{out}{err}");
    assert!(err.contains("cpu=6") && err.contains("cpu=5"), "{err}");

    // A Job of 10 one-CPU Pods, 5 at once, in the whole quota: finished Pods give their CPU
    // back and the next ones start, until all 10 have succeeded; then the quota is free again.
    let (ok, out, err) = kubectl(
        &kc,
        &["scale", "-n", ns, "deployment", "web", "--replicas=0"],
    );
    assert!(ok, "{out}{err}");
    eventually(Duration::from_secs(60), || async {
        match pods
            .list(&ListParams::default().labels("app=web"))
            .await
            .map_err(|e| e.to_string())?
            .items
            .len()
        {
            0 => Ok(()),
            n => Err(format!("web: {n} Pods left")),
        }
    })
    .await;
    let job = serde_json::to_string(&json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "train"},
        "spec": {"completions": 10, "parallelism": 5,
                 "template": {"metadata": {"labels": {"quota.scheduling.koordinator.sh/name": quota}},
                              "spec": {"restartPolicy": "Never",
                                       "containers": [{"name": "main", "image": "registry.example.com/train:1",
                                                       "resources": {"requests": {"cpu": "1"}}}]}}}
    }))
    .unwrap();
    let (ok, out, err) = apply(&kc, ns, &job);
    assert!(ok, "{out}{err}");
    let started = std::time::Instant::now();
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(client.clone(), ns);
    eventually(Duration::from_secs(120), || async {
        let status = jobs
            .get("train")
            .await
            .map_err(|e| e.to_string())?
            .status
            .unwrap_or_default();
        match status.succeeded {
            Some(10) => Ok(()),
            n => Err(format!("train: {n:?} of 10 succeeded")),
        }
    })
    .await;
    let dry = kube::api::PostParams {
        dry_run: true,
        ..Default::default()
    };
    pods.create(&dry, &e2e::quota::pod("whole", &quota, 5))
        .await
        .unwrap();
    println!(
        "Job train: 10 of 10 one-CPU Pods succeeded, 5 at once in a 5-CPU quota, in {:.1?}; the quota is free again",
        started.elapsed()
    );
}
