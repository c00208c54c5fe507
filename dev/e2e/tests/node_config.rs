//! node-config-webhook through the real kube-apiserver: Node status amplification read back, an
//! invalid ratio refused, the SLO ConfigMap checked (CM-7 against a Node from the service's
//! metadata-only Node cache), and each webhook's own failure policy when
//! the service is down (Ignore for node status, Fail for the ConfigMap).

use std::time::Duration;

use e2e::{Env, Webhook, eventually};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

fn status_patch(cpu: &str, memory: &str) -> Patch<serde_json::Value> {
    Patch::Merge(
        json!({"status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
                                   "capacity": {"cpu": cpu, "memory": memory, "pods": "110"}}}),
    )
}

fn allocatable(n: &Node, r: &str) -> String {
    n.status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .and_then(|a| a.get(r))
        .map(|q| q.0.clone())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_status_is_amplified_and_ignored_when_the_service_is_down() {
    let env = Env::new("e2e-nodes").await;
    let app = node_config_webhook::app();
    let mut hook = Webhook::start(&app, &env.client).await;
    env.register_labelled("node-config", &app, &hook, None)
        .await;
    let nodes: Api<Node> = Api::all(env.client.clone());
    let name = format!("node-{}", env.ns);
    let (lk, lv) = env.label();
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {lk: lv},
                     "annotations": {"node.koordinator.sh/resource-amplification-ratio": "{\"cpu\":1.5,\"memory\":2}"}}
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();

    // The kubelet-like status update comes back amplified (once the registration is active).
    let pp = PatchParams::default();
    let stored = eventually(Duration::from_secs(30), || async {
        let n = nodes
            .patch_status(&name, &pp, &status_patch("8", "16Gi"))
            .await
            .map_err(|e| e.to_string())?;
        if allocatable(&n, "cpu") == "12" {
            Ok(n)
        } else {
            Err(format!("not amplified yet: {}", allocatable(&n, "cpu")))
        }
    })
    .await;
    let read = nodes.get(&name).await.unwrap();
    assert_eq!(allocatable(&read, "cpu"), "12");
    assert_eq!(allocatable(&read, "memory"), "32Gi");
    assert_eq!(allocatable(&read, "pods"), "110");
    assert_eq!(
        read.metadata.annotations.as_ref().unwrap()["node.koordinator.sh/raw-allocatable"],
        "{\"cpu\":\"8\",\"memory\":\"16Gi\"}"
    );
    assert_eq!(
        stored.status.unwrap().capacity.unwrap()["cpu"].0,
        "8",
        "capacity is never changed"
    );

    // An invalid ratio annotation: the status update is refused (an answer, not a failure).
    nodes
        .patch(&name, &pp, &Patch::Merge(json!({"metadata": {"annotations": {"node.koordinator.sh/resource-amplification-ratio": "not-json"}}})))
        .await
        .unwrap();
    let err = nodes
        .patch_status(&name, &pp, &status_patch("8", "16Gi"))
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("failed to unmarshal node resource amplification ratio"),
        "{msg}"
    );

    // Service down: the Ignore webhook lets node status updates through.
    hook.stop().await;
    let n = nodes
        .patch_status(&name, &pp, &status_patch("6", "8Gi"))
        .await
        .unwrap();
    assert_eq!(allocatable(&n, "cpu"), "6", "stored as sent, not amplified");
}

fn slo_configmap(env: &Env, data: serde_json::Value) -> ConfigMap {
    let (lk, lv) = env.label();
    serde_json::from_value(json!({
        "metadata": {"name": "slo-controller-config", "namespace": "koordinator-system",
                     "labels": {"koordinator.sh/configmap-type": "slo-controller-config", lk: lv}},
        "data": data
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slo_configmap_is_checked_and_refused_when_the_service_is_down() {
    let env = Env::new("e2e-slo").await;
    let namespaces: Api<Namespace> = Api::all(env.client.clone());
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "koordinator-system"}})).unwrap();
    match namespaces.create(&PostParams::default(), &ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("{e}"),
    }
    let app = node_config_webhook::app();
    let mut hook = Webhook::start(&app, &env.client).await;
    env.register_labelled("node-config", &app, &hook, None)
        .await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), "koordinator-system");
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };

    let bad_threshold = slo_configmap(
        &env,
        json!({"resource-threshold-config": "{\"clusterStrategy\": {\"cpuSuppressThresholdPercent\": 101}}"}),
    );
    let msg = eventually(Duration::from_secs(30), || async {
        match cms.create(&dry, &bad_threshold).await {
            Err(kube::Error::Api(e)) if e.message.contains("ConfigParamInvalid") => Ok(e.message),
            other => Err(format!(
                "webhook not active yet: {:?}",
                other.map(|c| c.metadata.name)
            )),
        }
    })
    .await;
    assert!(
        msg.contains("\"ResourceThresholdCfg.ClusterStrategy.CPUSuppressThresholdPercent\":\"CPUSuppressThresholdPercent must be 100 or less\""),
        "{msg}"
    );
    let err = cms
        .create(
            &PostParams::default(),
            &slo_configmap(&env, json!({"colocation-config": "garbage"})),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("Failed to parse colocation config in configmap koordinator-system/slo-controller-config"), "{err}");

    let good = slo_configmap(
        &env,
        json!({"colocation-config": "{\"enable\": true, \"metricAggregateDurationSeconds\": 60}",
                                          "system-config": "{\"clusterStrategy\": {\"minFreeKbytesFactor\": 100}}"}),
    );
    cms.create(&PostParams::default(), &good).await.unwrap();

    // CM-7 from the service's Node cache (metadata only): a Node whose labels match two
    // strategies of the new config is named in the refusal.
    let nodes: Api<Node> = Api::all(env.client.clone());
    let (a, b) = (format!("a-{}", env.ns), format!("b-{}", env.ns));
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": format!("n-{}", env.ns), "labels": {&a: "1", &b: "1"}},
        "status": {"capacity": {"cpu": "8"}, "images": [{"names": ["registry.example.com/big:1"], "sizeBytes": 1}]}
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let strategies = json!({"enable": true, "nodeConfigs": [
        {"name": "s1", "nodeSelector": {"matchLabels": {&a: "1"}}},
        {"name": "s2", "nodeSelector": {"matchLabels": {&b: "1"}}}
    ]});
    let conflicting = slo_configmap(&env, json!({"colocation-config": strategies.to_string()}));
    let want = format!(
        r#"{{"config":"colocation-config","strategies":["s1","s2"],"exampleNodes":["n-{}"]}}"#,
        env.ns
    );
    eventually(Duration::from_secs(30), || async {
        match cms
            .patch(
                "slo-controller-config",
                &PatchParams {
                    dry_run: true,
                    ..PatchParams::default()
                },
                &Patch::Merge(json!({"data": conflicting.data})),
            )
            .await
        {
            Err(kube::Error::Api(e)) if e.message.contains(&want) => Ok(()),
            other => Err(format!("no CM-7 refusal yet: {:?}", other.map(|c| c.data))),
        }
    })
    .await;

    // Service down: the Fail webhook refuses ConfigMap changes.
    hook.stop().await;
    let err = cms
        .patch(
            "slo-controller-config",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"cpu-burst-config": "{}"}})),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("failed calling webhook"), "{err}");
}
