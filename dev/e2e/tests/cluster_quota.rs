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

use std::time::Duration;

use e2e::cluster::{Output, kubectl, kubectl_with};
use e2e::cluster::{OwnCluster, own_cluster};
use e2e::eventually;
use e2e::quota::start_in;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{Api, ListParams};
use serde_json::json;

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

fn apply(kubeconfig: &std::path::Path, ns: &str, manifest: &str) -> Output {
    kubectl_with(kubeconfig, &["apply", "-n", ns, "-f", "-"], manifest)
}

/// How many Pods of Deployment `app` run.
async fn running(pods: &Api<Pod>, app: &str) -> Result<usize, String> {
    e2e::cluster::running(pods, app).await.map(|p| p.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deployment_past_its_quota_waits_for_room_through_the_controllers() {
    let ns = "team-a";
    let OwnCluster {
        cp,
        env,
        cluster: _cluster,
    } = own_cluster(ns, 2, testenv::cluster::PodAddresses::Routable).await;
    let client = env.client.clone();
    let (_system, _opts, quota) = start_in(&env, &cp.kubeconfig, None, "cpu", 5, Vec::new()).await;
    let kc = cp.kubeconfig.clone();
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);

    let o = apply(&kc, ns, &deployment("batch", &quota, 2));
    assert!(o.ok, "{}", o.shown());
    eventually(Duration::from_secs(60), || async {
        match running(&pods, "batch").await? {
            2 => Ok(()),
            n => Err(format!("batch: {n} of 2 running")),
        }
    })
    .await;

    let o = apply(&kc, ns, &deployment("web", &quota, 5));
    assert!(o.ok, "{}", o.shown());
    println!("$ kubectl apply -f web.yaml\n{}", o.shown());
    assert!(
        o.stderr.contains("WQ-3"),
        "the warning names the rule: {}",
        o.stderr
    );
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
    let o = kubectl(
        &kc,
        &["scale", "-n", ns, "deployment", "batch", "--replicas=0"],
    );
    assert!(o.ok, "{}", o.shown());
    println!(
        "$ kubectl scale deployment batch --replicas=0\n{}",
        o.stdout
    );
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
    let o = kubectl(
        &kc,
        &["scale", "-n", ns, "deployment", "web", "--replicas=6"],
    );
    println!("$ kubectl scale deployment web --replicas=6\n{}", o.shown());
    assert!(!o.ok, "{}", o.shown());
    assert!(
        o.stderr.contains("cpu=6") && o.stderr.contains("cpu=5"),
        "{}",
        o.stderr
    );

    // A Job of 10 one-CPU Pods, 5 at once, in the whole quota: finished Pods give their CPU
    // back and the next ones start, until all 10 have succeeded; then the quota is free again.
    let o = kubectl(
        &kc,
        &["scale", "-n", ns, "deployment", "web", "--replicas=0"],
    );
    assert!(o.ok, "{}", o.shown());
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
    let o = apply(&kc, ns, &job);
    assert!(o.ok, "{}", o.shown());
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

/// The ReplicaSets of Deployment `app`, newest last: (image of its template, ready replicas).
async fn replica_sets(client: &kube::Client, ns: &str, app: &str) -> Vec<(String, i32)> {
    let api: Api<k8s_openapi::api::apps::v1::ReplicaSet> = Api::namespaced(client.clone(), ns);
    let mut sets = api
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .unwrap()
        .items;
    sets.sort_by_key(|r| r.metadata.creation_timestamp.clone().map(|t| t.0));
    sets.iter()
        .map(|r| {
            let image = r
                .spec
                .as_ref()
                .and_then(|s| s.template.as_ref())
                .and_then(|t| t.spec.as_ref())
                .and_then(|s| s.containers.first())
                .and_then(|c| c.image.clone())
                .unwrap_or_default();
            let ready = r
                .status
                .as_ref()
                .and_then(|s| s.ready_replicas)
                .unwrap_or(0);
            (image, ready)
        })
        .collect()
}

/// A rolling update in a full quota, through the Deployment and ReplicaSet controllers. With 4
/// replicas the default strategy (maxSurge and maxUnavailable 25%, so 1 and 1) lets an old Pod
/// go first and the rollout completes; with 3 replicas the same defaults resolve maxUnavailable
/// to 0, no old Pod goes first, no new Pod fits, and the rollout waits: WQ-7 says so at
/// `kubectl set image`, naming the setting, and setting it lets the rollout complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rolling_update_in_a_full_quota_completes_or_is_told_what_lets_it() {
    let ns = "team-roll";
    let OwnCluster {
        cp,
        env,
        cluster: _cluster,
    } = own_cluster(ns, 2, testenv::cluster::PodAddresses::Routable).await;
    let client = env.client.clone();
    let (_system, _opts, quota) = start_in(&env, &cp.kubeconfig, None, "cpu", 4, Vec::new()).await;
    let kc = cp.kubeconfig.clone();
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let o = apply(&kc, ns, &deployment("web", &quota, 4));
    assert!(o.ok, "{}", o.shown());
    eventually(Duration::from_secs(60), || async {
        match running(&pods, "web").await? {
            4 => Ok(()),
            n => Err(format!("web: {n} of 4 running")),
        }
    })
    .await;

    // 4 replicas, quota full, default strategy: completes.
    let o = kubectl(
        &kc,
        &[
            "set",
            "image",
            "-n",
            ns,
            "deployment/web",
            "main=registry.example.com/app:2",
        ],
    );
    assert!(o.ok, "{}", o.shown());
    assert!(!o.stderr.contains("WQ-7"), "{}", o.stderr);
    println!(
        "$ kubectl set image deployment/web main=registry.example.com/app:2\n{}",
        o.shown()
    );
    let o = kubectl(
        &kc,
        &[
            "rollout",
            "status",
            "-n",
            ns,
            "deployment/web",
            "--timeout=180s",
        ],
    );
    assert!(o.ok, "{}", o.shown());
    println!("$ kubectl rollout status deployment/web\n{}", o.shown());

    // 3 replicas and a 1-CPU Deployment beside them: full again, and 25% of 3 is 0.
    let o = kubectl(
        &kc,
        &["scale", "-n", ns, "deployment", "web", "--replicas=3"],
    );
    assert!(o.ok, "{}", o.shown());
    let o = apply(&kc, ns, &deployment("filler", &quota, 1));
    assert!(o.ok, "{}", o.shown());
    eventually(Duration::from_secs(60), || async {
        match (
            running(&pods, "web").await?,
            running(&pods, "filler").await?,
        ) {
            (3, 1) => Ok(()),
            (w, f) => Err(format!("web {w} of 3, filler {f} of 1 running")),
        }
    })
    .await;
    let o = kubectl(
        &kc,
        &[
            "set",
            "image",
            "-n",
            ns,
            "deployment/web",
            "main=registry.example.com/app:3",
        ],
    );
    println!(
        "$ kubectl set image deployment/web main=registry.example.com/app:3\n{}",
        o.shown()
    );
    assert!(o.ok, "{}", o.shown());
    assert!(
        o.stderr.contains("WQ-7")
            && o.stderr
                .contains("spec.strategy.rollingUpdate.maxUnavailable"),
        "{}",
        o.stderr
    );
    // It waits: the new ReplicaSet's Pod is refused (its FailedCreate events say why) and no
    // old Pod goes.
    let events: Api<Event> = Api::namespaced(client.clone(), ns);
    eventually(Duration::from_secs(60), || async {
        let sets = replica_sets(&client, ns, "web").await;
        let refused = events
            .list(&ListParams::default().fields("reason=FailedCreate"))
            .await
            .map_err(|e| e.to_string())?
            .items
            .into_iter()
            .filter(|e| {
                e.message
                    .as_deref()
                    .is_some_and(|m| m.contains("exceeded quota"))
            })
            .count();
        match sets.last() {
            Some((image, 0)) if image.ends_with(":3") && refused > 0 => Ok(()),
            _ => Err(format!("replica sets {sets:?}, {refused} refusals")),
        }
    })
    .await;
    assert_eq!(running(&pods, "web").await.unwrap(), 3, "no old Pod went");
    let o = kubectl(
        &kc,
        &[
            "rollout",
            "status",
            "-n",
            ns,
            "deployment/web",
            "--timeout=1s",
        ],
    );
    println!(
        "$ kubectl rollout status deployment/web --timeout=1s\n{}",
        o.shown()
    );
    let o = kubectl(
        &kc,
        &[
            "patch",
            "-n",
            ns,
            "deployment/web",
            "--type=merge",
            "-p",
            r#"{"spec":{"strategy":{"rollingUpdate":{"maxUnavailable":1}}}}"#,
        ],
    );
    assert!(o.ok, "{}", o.shown());
    println!(
        "$ kubectl patch deployment/web --type=merge -p '{{\"spec\":{{\"strategy\":{{\"rollingUpdate\":{{\"maxUnavailable\":1}}}}}}}}'\n{}",
        o.shown()
    );
    let o = kubectl(
        &kc,
        &[
            "rollout",
            "status",
            "-n",
            ns,
            "deployment/web",
            "--timeout=180s",
        ],
    );
    assert!(o.ok, "{}", o.shown());
    println!("$ kubectl rollout status deployment/web\n{}", o.shown());
    let sets = replica_sets(&client, ns, "web").await;
    assert!(
        sets.last()
            .is_some_and(|(i, r)| i.ends_with(":3") && *r == 3),
        "{sets:?}"
    );
}

/// A CronJob whose every run takes the whole quota: each run's Pods finish (simulated), give
/// their CPU back, and the next run starts on schedule. Two runs: up to two minutes (the
/// schedule is minutes).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cronjob_runs_again_once_its_last_run_gave_its_quota_back() {
    let ns = "team-cron";
    let OwnCluster {
        cp,
        env,
        cluster: _cluster,
    } = own_cluster(ns, 1, testenv::cluster::PodAddresses::Routable).await;
    let client = env.client.clone();
    let (_system, _opts, quota) = start_in(&env, &cp.kubeconfig, None, "cpu", 2, Vec::new()).await;
    let kc = cp.kubeconfig.clone();
    let cron = serde_json::to_string(&json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "nightly"},
        "spec": {"schedule": "* * * * *", "concurrencyPolicy": "Forbid",
                 "jobTemplate": {"spec": {"completions": 4, "parallelism": 2,
                     "template": {"metadata": {"labels": {"quota.scheduling.koordinator.sh/name": quota}},
                                  "spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "main", "image": "registry.example.com/report:1",
                                                           "resources": {"requests": {"cpu": "1"}}}]}}}}}
    }))
    .unwrap();
    let o = apply(&kc, ns, &cron);
    assert!(o.ok, "{}", o.shown());
    let jobs: Api<k8s_openapi::api::batch::v1::Job> = Api::namespaced(client.clone(), ns);
    eventually(Duration::from_secs(200), || async {
        let done = jobs
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .items
            .iter()
            .filter(|j| j.status.as_ref().and_then(|s| s.succeeded) == Some(4))
            .count();
        if done >= 2 {
            Ok(())
        } else {
            Err(format!("{done} of 2 runs complete"))
        }
    })
    .await;
    let o = kubectl(&kc, &["get", "jobs", "-n", ns]);
    assert!(o.ok, "{}", o.shown());
    println!("$ kubectl get jobs\n{}", o.stdout);
    // Nothing of the finished runs holds quota.
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let dry = kube::api::PostParams {
        dry_run: true,
        ..Default::default()
    };
    let _ = kubectl(
        &kc,
        &[
            "patch",
            "-n",
            ns,
            "cronjob/nightly",
            "-p",
            r#"{"spec":{"suspend":true}}"#,
        ],
    );
    eventually(Duration::from_secs(60), || async {
        pods.create(&dry, &e2e::quota::pod("whole", &quota, 2))
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;
}
