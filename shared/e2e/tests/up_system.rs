//! quota-state and scheduling-webhook as `cargo xtask up` starts them ([`testenv::system`]: the
//! built binaries, self-signed TLS, CRDs from `crd`, webhooks registered from `endpoints`),
//! through the real API server: 200 pods created at once against 100 CPUs end with exactly 100
//! admitted; a refused pod fits once another is deleted; quota-state killed refuses (fail
//! closed), restarted rebuilds its usage from the cluster and admits again.

use std::time::Duration;

use e2e::{Env, eventually};
use futures::future::join_all;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use serde_json::json;
use testenv::system::{Options, bin_dir_of_current_exe, check_binaries, spawn_quota_state};

fn pod(name: &str, quota: &str, cpu: u32) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"quota.scheduling.koordinator.sh/name": quota}},
        "spec": {"containers": [{"name": "main", "image": "registry.example.com/app:1",
                                 "resources": {"requests": {"cpu": cpu.to_string()}}}]}
    }))
    .unwrap()
}

async fn refusal(pods: &Api<Pod>, p: &Pod) -> Result<String, String> {
    match pods.create(&PostParams::default(), p).await {
        Err(kube::Error::Api(e)) => Ok(e.message),
        Ok(_) => Err("admitted".into()),
        Err(e) => Err(e.to_string()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn quota_through_both_services_started_as_up_does() {
    let env = Env::new("e2e-up").await;
    let shared = testenv::shared().unwrap();
    let services = vec!["quota-state".to_owned(), "scheduling-webhook".to_owned()];
    let bin_dir = bin_dir_of_current_exe().unwrap();
    if let Err(e) = check_binaries(&bin_dir, &services) {
        panic!("{e}");
    }
    // Logs and CA bundles beside the control plane's files: removed with them at exit.
    let dir = shared.kubeconfig.with_file_name(&env.ns);
    std::fs::create_dir_all(&dir).unwrap();
    let opts = Options {
        bin_dir,
        services,
        kubeconfig: shared.kubeconfig.clone(),
        dir,
        namespace_selector: admission_kit::registration::only_namespace(&env.ns),
        name_suffix: format!("-{}", env.ns),
        lease_namespace: env.ns.clone(),
    };
    let mut system = testenv::system::start(&env.client, &opts).await.unwrap();
    assert_eq!(system.webhooks.len(), 1, "scheduling-webhook serves");

    let quotas: Api<DynamicObject> = Api::namespaced_with(
        env.client.clone(),
        &env.ns,
        &ApiResource::erase::<scheduling_webhook::types::ElasticQuota>(&()),
    );
    let quota_name = format!("q-{}", env.ns);
    let eq: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
        "metadata": {"name": quota_name}, "spec": {"max": {"cpu": "100"}}
    }))
    .unwrap();
    // Through the services' own QM/QV webhooks (quota-state answers QV once it leads).
    eventually(Duration::from_secs(60), || async {
        quotas
            .create(&PostParams::default(), &eq)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    eventually(Duration::from_secs(30), || async {
        match pods.create(&dry, &pod("probe", &quota_name, 101)).await {
            Err(kube::Error::Api(e)) if e.message.contains("exceeded quota") => Ok(()),
            other => Err(format!("not enforced yet: {:?}", other.map(|_| ()))),
        }
    })
    .await;

    let results = join_all((0..200).map(|i| {
        let (pods, q) = (pods.clone(), quota_name.clone());
        async move {
            pods.create(&PostParams::default(), &pod(&format!("p-{i}"), &q, 1))
                .await
        }
    }))
    .await;
    let admitted: Vec<String> = results
        .iter()
        .flatten()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    let first_refusal = results.iter().find_map(|r| r.as_ref().err());
    assert_eq!(admitted.len(), 100, "first refusal: {first_refusal:?}");
    let msg = refusal(&pods, &pod("late", &quota_name, 1)).await.unwrap();
    assert!(
        msg.contains(&format!(
            "exceeded quota: {}/{quota_name}, requested: cpu=1, used: cpu=100, limited: cpu=100",
            env.ns
        )),
        "{msg}"
    );
    pods.delete(
        &admitted[0],
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        },
    )
    .await
    .unwrap();
    eventually(Duration::from_secs(20), || async {
        pods.create(&PostParams::default(), &pod("late", &quota_name, 1))
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;

    // quota-state crashes: the webhook (fail closed) refuses, naming the cause.
    let (url, qs) = system.quota_state.take().unwrap();
    qs.kill();
    let msg = eventually(Duration::from_secs(20), || async {
        refusal(&pods, &pod("while-down", &quota_name, 1))
            .await
            .and_then(|m| {
                if m.contains("quota-state unavailable") {
                    Ok(m)
                } else {
                    Err(m)
                }
            })
    })
    .await;
    assert!(msg.contains("cannot check the pod's quota"), "{msg}");

    // Restarted on the same address with empty memory: it rebuilds the usage (100 CPUs) from
    // the pod list, takes the Lease again, and answers.
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    let _qs = spawn_quota_state(&opts, port).unwrap();
    let msg = eventually(Duration::from_secs(60), || async {
        refusal(&pods, &pod("after-restart", &quota_name, 1))
            .await
            .and_then(|m| {
                if m.contains("exceeded quota") {
                    Ok(m)
                } else {
                    Err(m)
                }
            })
    })
    .await;
    assert!(msg.contains("used: cpu=100, limited: cpu=100"), "{msg}");
    pods.delete("late", &DeleteParams::default()).await.unwrap();
    eventually(Duration::from_secs(20), || async {
        pods.create(
            &PostParams::default(),
            &pod("after-restart", &quota_name, 1),
        )
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
    })
    .await;
}
