//! scheduling-webhook with quota-state through the real kube-apiserver: every quota question goes
//! over gRPC to quota-state, which reserves atomically; 200 pods created at once against a quota
//! of 100 CPUs end with exactly 100 admitted; a refused pod fits once another is deleted;
//! quota-state restarted rebuilds its usage; the tree invariants hold on create, update, delete;
//! PB reads the bound pod from the service's metadata-only Pod cache.

use std::sync::Arc;
use std::time::Duration;

use e2e::quota::{create_retrying, pod_of};
use e2e::{Env, Webhook, eventually};
use futures::future::join_all;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use quota_protocol::proto::quota_state_server::QuotaStateServer;
use quota_state::ledger::Ledger;
use serde_json::json;

/// quota-state in-process: ledger fed by watches of the test's API server, gRPC on loopback in
/// plaintext (its mutual TLS is exercised with the real binaries in `up_system.rs`).
async fn quota_state(client: &kube::Client) -> String {
    let (url, _stop) = quota_state_at(client, "127.0.0.1:0").await;
    std::mem::forget(_stop);
    url
}

/// quota-state on `addr`; dropping or firing the sender stops its gRPC server.
async fn quota_state_at(
    client: &kube::Client,
    addr: &str,
) -> (String, tokio::sync::oneshot::Sender<()>) {
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
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(QuotaStateServer::new(quota_state::Service::new(
                ledger,
                quota_state::auth::Policy::Anyone,
                quota_state::metrics::Metrics::new().unwrap(),
            )))
            .serve_with_incoming_shutdown(
                tokio_stream::wrappers::TcpListenerStream::new(listener),
                async {
                    let _ = rx.await;
                },
            ),
    );
    (format!("http://{addr}"), tx)
}

/// A pod requesting and limited to `cpu` CPUs, charged to `quota`.
fn pod(name: &str, quota: &str, cpu: u32) -> Pod {
    pod_of(name, quota, "cpu", cpu)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn quota_is_enforced_atomically_through_quota_state() {
    let env = Env::new("e2e-quota").await;
    let app = scheduling_webhook::app();
    env.install_crds(&app).await;
    let url = quota_state(&env.client).await;
    let flag = format!("--quota-state-url={url}");
    let app = scheduling_webhook::app_from_flags([flag.as_str()]).unwrap();
    let _hook = Webhook::start(&app, &env.client).await;
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
        async move { create_retrying(&pods, &pod(&format!("p-{i}"), &q, 1)).await }
    }))
    .await;
    let admitted = results.iter().filter(|r| r.is_ok()).count();
    let refused: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn quota_state_restart_rebuilds_usage_from_the_cluster() {
    let env = Env::new("e2e-restart").await;
    let app = scheduling_webhook::app();
    env.install_crds(&app).await;
    let (url, stop) = quota_state_at(&env.client, "127.0.0.1:0").await;
    let addr = url.trim_start_matches("http://").to_owned();
    let flag = format!("--quota-state-url={url}");
    let app = scheduling_webhook::app_from_flags([flag.as_str()]).unwrap();
    let hook = Webhook::start(&app, &env.client).await;
    env.register("scheduling", &app, &hook, None, 10).await;
    let quota_name = format!("q-{}", env.ns);
    let quotas: Api<DynamicObject> = Api::namespaced_with(
        env.client.clone(),
        &env.ns,
        &ApiResource::erase::<scheduling_webhook::types::ElasticQuota>(&()),
    );
    let eq: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
        "metadata": {"name": quota_name}, "spec": {"max": {"cpu": "3"}}
    }))
    .unwrap();
    quotas.create(&PostParams::default(), &eq).await.unwrap();
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    eventually(Duration::from_secs(30), || async {
        pods.create(&PostParams::default(), &pod("a", &quota_name, 2))
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;

    // quota-state goes away: the Fail-closed webhook refuses, naming the cause.
    let _ = stop.send(());
    let msg = eventually(Duration::from_secs(20), || async {
        match pods
            .create(&PostParams::default(), &pod("b", &quota_name, 1))
            .await
        {
            Err(kube::Error::Api(e)) if e.message.contains("quota-state unavailable") => {
                Ok(e.message)
            }
            other => Err(format!("{:?}", other.map(|p| p.metadata.name))),
        }
    })
    .await;
    assert!(msg.contains("cannot check the pod's quota"), "{msg}");

    // Restarted (same address, empty memory): usage is rebuilt from the pod list.
    let (_, _stop2) = quota_state_at(&env.client, &addr).await;
    let msg = eventually(Duration::from_secs(30), || async {
        match pods
            .create(&PostParams::default(), &pod("c", &quota_name, 2))
            .await
        {
            Err(kube::Error::Api(e)) if e.message.contains("exceeded quota") => Ok(e.message),
            other => Err(format!("{:?}", other.map(|p| p.metadata.name))),
        }
    })
    .await;
    // The rebuilt usage is what the cluster holds: pod a (2 CPUs), plus b (1 CPU) when it got
    // admitted over a connection that outlived the first server's shutdown.
    let b_exists = pods.get_opt("b").await.unwrap().is_some();
    let used = if b_exists { 3 } else { 2 };
    assert!(
        msg.contains(&format!("used: cpu={used}, limited: cpu=3")),
        "{msg}"
    );
    if !b_exists {
        pods.create(&PostParams::default(), &pod("d", &quota_name, 1))
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_tree_invariants_and_colocation_profile() {
    let env = Env::new("e2e-tree").await;
    let app = scheduling_webhook::app();
    env.install_crds(&app).await;
    // The tree rules run in quota-state, on the tree its watches keep.
    let url = quota_state(&env.client).await;
    let flag = format!("--quota-state-url={url}");
    let app = scheduling_webhook::app_from_flags([flag.as_str()]).unwrap();
    let hook = Webhook::start(&app, &env.client).await;
    env.register("scheduling", &app, &hook, None, 10).await;
    let quotas: Api<DynamicObject> = Api::namespaced_with(
        env.client.clone(),
        &env.ns,
        &ApiResource::erase::<scheduling_webhook::types::ElasticQuota>(&()),
    );
    let q = |name: &str, parent: Option<&str>, is_parent: bool, min: &str| -> DynamicObject {
        let mut labels = serde_json::Map::new();
        if let Some(p) = parent {
            labels.insert("quota.scheduling.koordinator.sh/parent".into(), json!(p));
        }
        if is_parent {
            labels.insert(
                "quota.scheduling.koordinator.sh/is-parent".into(),
                json!("true"),
            );
        }
        serde_json::from_value(json!({
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": name, "labels": labels},
            "spec": {"max": {"cpu": "10"}, "min": {"cpu": min}}
        }))
        .unwrap()
    };
    let (parent, child) = (format!("parent-{}", env.ns), format!("child-{}", env.ns));
    // Create: a child of an unknown parent is refused (once the webhooks are active).
    let msg = eventually(Duration::from_secs(30), || async {
        match quotas
            .create(
                &PostParams::default(),
                &q(&child, Some(&parent), false, "2"),
            )
            .await
        {
            Err(kube::Error::Api(e)) => Ok(e.message),
            Ok(_) => Err("created".to_owned()),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
    assert!(
        msg.contains("parent not exist") || msg.contains("not find parentInfo"),
        "{msg}"
    );
    quotas
        .create(&PostParams::default(), &q(&parent, None, true, "4"))
        .await
        .unwrap();
    // quota-state's watch follows the API server: retry until the parent is known.
    eventually(Duration::from_secs(20), || async {
        quotas
            .create(
                &PostParams::default(),
                &q(&child, Some(&parent), false, "3"),
            )
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;
    // Update: the child's min may not exceed what the parent guarantees.
    let mut c = quotas.get(&child).await.unwrap();
    c.data["spec"]["min"]["cpu"] = json!("5");
    let err = quotas
        .replace(&child, &PostParams::default(), &c)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("checkMinQuotaSum all brothers' MinQuota > parent MinQuota"),
        "{err}"
    );
    // Delete: a quota with children cannot go.
    let err = quotas
        .delete(&parent, &DeleteParams::default())
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains(&format!(
            "delete quota failed, quota {parent} has 1 child quotas"
        )),
        "{err}"
    );

    // QM-5's shared-weight gauge names only quotas that exist: 50 dry-run creates through the
    // API server and 50 forged create reviews posted to the webhook port (quotas that will
    // never exist) add no series; the parent's, created for real, is there.
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    for i in 0..50 {
        quotas
            .create(&dry, &q(&format!("dry-{i}-{}", env.ns), None, false, "1"))
            .await
            .unwrap();
    }
    let ca = std::env::temp_dir().join(format!("{}-scheduling-ca.pem", env.ns));
    std::fs::write(&ca, &hook.ca_pem).unwrap();
    let tls = admission_kit::server::mtls::client_without_certificate(&ca)
        .unwrap()
        .get();
    let _ = std::fs::remove_file(&ca);
    let mut forger = e2e::direct::Direct::connect(&hook.addr.to_string(), tls)
        .await
        .unwrap();
    for i in 0..50 {
        let name = format!("forged-{i}-{}", env.ns);
        let review = json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": format!("forged-quota-{i}"),
                "kind": {"group": "scheduling.sigs.k8s.io", "version": "v1alpha1", "kind": "ElasticQuota"},
                "resource": {"group": "scheduling.sigs.k8s.io", "version": "v1alpha1", "resource": "elasticquotas"},
                "name": name, "namespace": env.ns, "operation": "CREATE",
                "userInfo": {"username": "system:serviceaccount:tenant:forger"},
                "object": serde_json::to_value(q(&name, None, false, "1")).unwrap(), "dryRun": false
            }
        });
        let (status, answer) = forger
            .post(
                "/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota",
                &review,
            )
            .await
            .unwrap();
        assert_eq!(status, 200);
        assert_eq!(answer["response"]["allowed"], true, "{answer}");
    }
    let weights = |name: String| async move {
        let series = String::from_utf8(
            admission_kit::server::metrics::Metrics::new()
                .unwrap()
                .render(),
        )
        .unwrap();
        series
            .lines()
            .filter(|l| {
                l.starts_with("koord_manager_webhook_quota_shared_weight{")
                    && l.contains(&format!("elasticquota_name=\"{name}\""))
            })
            .count()
    };
    eventually(Duration::from_secs(20), || async {
        match weights(parent.clone()).await {
            1 => Ok(()),
            n => Err(format!("{n} series of {parent}")),
        }
    })
    .await;
    // A forged deletion of the child, which exists, removes none of its series.
    eventually(Duration::from_secs(20), || async {
        match weights(child.clone()).await {
            1 => Ok(()),
            n => Err(format!("{n} series of {child}")),
        }
    })
    .await;
    let old = serde_json::to_value(quotas.get(&child).await.unwrap()).unwrap();
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "forged-quota-delete",
            "kind": {"group": "scheduling.sigs.k8s.io", "version": "v1alpha1", "kind": "ElasticQuota"},
            "resource": {"group": "scheduling.sigs.k8s.io", "version": "v1alpha1", "resource": "elasticquotas"},
            "name": child, "namespace": env.ns, "operation": "DELETE",
            "userInfo": {"username": "system:serviceaccount:tenant:forger"},
            "oldObject": old, "dryRun": false
        }
    });
    let (status, answer) = forger
        .post(
            "/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota",
            &review,
        )
        .await
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    // Past the second look for the forged ones (0.5 s, then 2 s after it).
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        weights(child.clone()).await,
        1,
        "a forged deletion removed a series"
    );
    assert_eq!(
        weights(format!("dry-0-{}", env.ns)).await,
        0,
        "a dry run added a series"
    );
    assert_eq!(
        weights(format!("forged-0-{}", env.ns)).await,
        0,
        "a forged review added a series"
    );
    println!(
        "50 dry-run ElasticQuota creates and 50 forged create reviews: no shared-weight series added; a forged deletion removed none"
    );

    // A ClusterColocationProfile's mutation shows on a created pod.
    let profiles: Api<DynamicObject> = Api::all_with(
        env.client.clone(),
        &ApiResource::erase::<scheduling_webhook::types::ClusterColocationProfile>(&()),
    );
    let profile: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "config.koordinator.sh/v1alpha1", "kind": "ClusterColocationProfile",
        "metadata": {"name": format!("colocation-{}", env.ns)},
        "spec": {"selector": {"matchLabels": {"e2e-colocation": env.ns.clone()}},
                 "qosClass": "BE", "schedulerName": "koord-scheduler",
                 "labels": {"colocated": "true", "koordinator.sh/priority-class": "koord-batch"}}
    }))
    .unwrap();
    profiles
        .create(&PostParams::default(), &profile)
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": "colocated", "labels": {"e2e-colocation": env.ns.clone()}},
        "spec": {"containers": [{"name": "main", "image": "registry.example.com/app:1"}]}
    }))
    .unwrap();
    let created = eventually(Duration::from_secs(20), || async {
        let dry = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        let c = pods.create(&dry, &p).await.map_err(|e| e.to_string())?;
        if c.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("colocated"))
            .is_some()
        {
            Ok(c)
        } else {
            Err("profile not applied yet".to_owned())
        }
    })
    .await;
    let labels = created.metadata.labels.unwrap();
    assert_eq!(labels["koordinator.sh/qosClass"], "BE");
    assert_eq!(
        created.spec.unwrap().scheduler_name.as_deref(),
        Some("koord-scheduler")
    );
    let stored = pods.create(&PostParams::default(), &p).await.unwrap();
    assert_eq!(stored.metadata.labels.unwrap()["colocated"], "true");
}

/// PB from the service's Pod cache (metadata only): binding a pod is refused for a user not in
/// the allowed list, unless the bound pod carries a bypass label, which the cache must hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_binding_reads_the_bound_pod_from_the_cache() {
    let env = Env::new("e2e-binding").await;
    let namespaces = format!("--binding-admission-namespaces={}", env.ns);
    let mut app = scheduling_webhook::app_from_flags([
        "--binding-admission-user-name=system:kube-scheduler",
        namespaces.as_str(),
        "--binding-admission-bypass-labels=example.com/bind-freely",
    ])
    .unwrap();
    app.gates.apply("BindingAdmissionWebhook=true").unwrap();
    env.install_crds(&app).await;
    let hook = Webhook::start(&app, &env.client).await;
    env.register("scheduling", &app, &hook, None, 10).await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    let plain = |name: &str, labels: serde_json::Value| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "spec": {"containers": [{"name": "main", "image": "registry.example.com/app:1"}]}
        }))
        .unwrap()
    };
    let bind = |name: &str| {
        let pods = pods.clone();
        let name = name.to_owned();
        async move {
            let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                                 "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}});
            pods.create_subresource::<_, serde_json::Value>(
                "binding",
                &name,
                &PostParams::default(),
                &binding,
            )
            .await
        }
    };
    pods.create(&PostParams::default(), &plain("held", json!({})))
        .await
        .unwrap();
    let msg = eventually(Duration::from_secs(30), || async {
        match bind("held").await {
            Err(kube::Error::Api(e)) => Ok(e.message),
            Ok(_) => Err("bound".to_owned()),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
    assert!(
        msg.contains("binding denied: username is not in the allowed list"),
        "{msg}"
    );
    pods.create(
        &PostParams::default(),
        &plain("free", json!({"example.com/bind-freely": "yes"})),
    )
    .await
    .unwrap();
    // Bound once the pod (its labels) is in the cache.
    eventually(Duration::from_secs(30), || async {
        bind("free").await.map(|_| ()).map_err(|e| e.to_string())
    })
    .await;
    assert_eq!(
        pods.get("free")
            .await
            .unwrap()
            .spec
            .unwrap()
            .node_name
            .as_deref(),
        Some("node-1")
    );
}
