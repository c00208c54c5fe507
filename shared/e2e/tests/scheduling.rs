//! scheduling-webhook with quota-state through the real kube-apiserver: quota checks go over gRPC
//! to quota-state, which reserves atomically; 200 pods created at once against a quota of 100 CPUs
//! end with exactly 100 admitted; a refused pod fits once another is deleted.

use std::sync::Arc;
use std::time::Duration;

use e2e::{Env, Webhook, eventually};
use futures::future::join_all;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use quota_state::ledger::Ledger;
use quota_state::proto::quota_state_server::QuotaStateServer;
use serde_json::json;

/// quota-state in-process: ledger fed by watches of the test's API server, gRPC on loopback.
async fn quota_state(client: &kube::Client) -> String {
    let ledger = Arc::new(Ledger::new(Duration::from_secs(30)));
    let (q, p) = quota_state::feed::start(client.clone(), ledger.clone());
    eventually(Duration::from_secs(30), || async {
        if q.load(std::sync::atomic::Ordering::Acquire)
            && p.load(std::sync::atomic::Ordering::Acquire)
        {
            Ok(())
        } else {
            Err("initial lists not in".to_owned())
        }
    })
    .await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(QuotaStateServer::new(quota_state::Service::new(ledger)))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    format!("http://{addr}")
}

fn pod(name: &str, quota: &str, cpu: u32) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"quota.scheduling.koordinator.sh/name": quota}},
        "spec": {"containers": [{"name": "main", "image": "registry.example.com/app:1",
                                 "resources": {"requests": {"cpu": cpu.to_string()}, "limits": {"cpu": cpu.to_string()}}}]}
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn quota_is_enforced_atomically_through_quota_state() {
    let env = Env::new("e2e-quota").await;
    let app = scheduling_webhook::app();
    env.install_crds(&app).await;
    let url = quota_state(&env.client).await;
    let mut options = app.default_options();
    options.insert("quota-state-url", url);
    let _hook = Webhook::start_with(&app, &env.client, options).await;
    env.register("scheduling", &app, &_hook, None, 10).await;

    let quotas: Api<DynamicObject> = Api::namespaced_with(
        env.client.clone(),
        &env.ns,
        &ApiResource::erase::<scheduling_webhook::types::ElasticQuota>(&()),
    );
    let quota_name = format!("q-{}", env.ns);
    let eq: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
        "metadata": {"name": quota_name},
        "spec": {"max": {"cpu": "100"}, "min": {"cpu": "10"}}
    }))
    .unwrap();
    quotas.create(&PostParams::default(), &eq).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    // Wait until the webhooks are active and quota-state knows the quota.
    eventually(Duration::from_secs(30), || async {
        match pods.create(&dry, &pod("probe", &quota_name, 101)).await {
            Err(kube::Error::Api(e)) if e.message.contains("exceeded quota") => Ok(()),
            other => Err(format!(
                "not enforced yet: {:?}",
                other.map(|p| p.metadata.name)
            )),
        }
    })
    .await;

    // 200 pods of 1 CPU at once against 100 CPUs: exactly 100 admitted.
    let results = join_all((0..200).map(|i| {
        let pods = pods.clone();
        let q = quota_name.clone();
        async move {
            pods.create(&PostParams::default(), &pod(&format!("p-{i}"), &q, 1))
                .await
        }
    }))
    .await;
    let admitted = results.iter().filter(|r| r.is_ok()).count();
    let refused: Vec<String> = results
        .iter()
        .filter_map(|r| match r {
            Err(kube::Error::Api(e)) => Some(e.message.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(admitted, 100, "refusals: {:?}", refused.first());
    assert_eq!(refused.len(), 100);
    assert!(
        refused.iter().all(|m| m.contains("exceeded quota")),
        "{:?}",
        refused.first()
    );

    // Over the quota now; fits once a pod is deleted (after quota-state sees the deletion).
    let err = pods
        .create(&PostParams::default(), &pod("late", &quota_name, 1))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains(&format!(
            "exceeded quota: {}/{quota_name}, requested: cpu=1, used: cpu=100, limited: cpu=100",
            env.ns
        )),
        "{err}"
    );
    let first = results
        .iter()
        .flatten()
        .next()
        .and_then(|p| p.metadata.name.clone())
        .unwrap();
    pods.delete(
        &first,
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
}
