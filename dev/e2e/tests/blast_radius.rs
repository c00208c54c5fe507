//! Blast radius through the real API server, with the webhook configurations exactly as
//! `kustomize/all` renders them (each service reference rewritten to a loopback URL, nothing
//! else). This test binary has a control plane of its own, so cluster-wide configurations touch
//! no other test.
//!
//! - Every webhook stopped: Pods in kube-system, in the webhooks' own namespace and in an
//!   opted-out namespace are still admitted; elsewhere the Fail-policy Pod webhooks refuse.
//! - scheduling-webhook running (managed certificates, caBundle patched into the rendered
//!   configurations), quota-state stopped: a Pod in a namespace without quota is admitted; a Pod
//!   charged to a quota gets `--quota-unavailable`'s answer (refused, naming the cause).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use e2e::{Env, eventually};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use serde::Deserialize;
use serde_json::{Value, json};
use testenv::system::{Running, bin_dir_of_current_exe, check_binaries, http_status};

/// The webhook configurations of `kustomize/all`, each `service` clientConfig replaced by
/// `url` (`https://127.0.0.1:<port of that service><path>`).
fn rendered_configurations(ports: &dyn Fn(&str) -> u16) -> Vec<Value> {
    let bins = testenv::tools::locate().unwrap_or_else(|e| panic!("{e}"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(&bins.kustomize)
        .arg("build")
        .arg(root.join("kustomize/all"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let mut configs = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let mut v = Value::deserialize(doc).unwrap();
        if !v["kind"]
            .as_str()
            .unwrap_or_default()
            .ends_with("WebhookConfiguration")
        {
            continue;
        }
        for w in v["webhooks"].as_array_mut().unwrap() {
            let svc = w["clientConfig"]["service"].take();
            let url = format!(
                "https://127.0.0.1:{}{}",
                ports(svc["name"].as_str().unwrap()),
                svc["path"].as_str().unwrap()
            );
            w["clientConfig"] = json!({ "url": url });
        }
        configs.push(v);
    }
    assert!(configs.len() >= 6, "{} configurations", configs.len());
    configs
}

async fn apply(client: &kube::Client, v: &Value) {
    let name = v["metadata"]["name"].as_str().unwrap();
    let pp = PatchParams::apply("kustomize").force();
    if v["kind"] == "MutatingWebhookConfiguration" {
        let c: MutatingWebhookConfiguration = serde_json::from_value(v.clone()).unwrap();
        Api::<MutatingWebhookConfiguration>::all(client.clone())
            .patch(name, &pp, &Patch::Apply(&c))
            .await
            .unwrap();
    } else {
        let c: ValidatingWebhookConfiguration = serde_json::from_value(v.clone()).unwrap();
        Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .patch(name, &pp, &Patch::Apply(&c))
            .await
            .unwrap();
    }
}

async fn namespace(client: &kube::Client, name: &str, labels: Value) {
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.reason == "AlreadyExists" => {}
        Err(e) => panic!("namespace {name}: {e}"),
    }
}

fn pod(name: &str, labels: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27",
                                 "resources": {"requests": {"cpu": "100m"}}}]}
    }))
    .unwrap()
}

async fn create(client: &kube::Client, ns: &str, p: &Pod) -> Result<(), String> {
    Api::<Pod>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), p)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Every webhook down: only Pods outside the excluded namespaces are refused.
async fn every_webhook_stopped(client: &kube::Client) {
    // Nothing listens on this port: every webhook is down.
    let dead = testenv::free_port().unwrap();
    for c in rendered_configurations(&|_| dead) {
        apply(client, &c).await;
    }
    namespace(client, "admission-webhooks", json!({})).await;
    namespace(
        client,
        "opted-out",
        json!({"admission-webhooks.io/exclude": "true"}),
    )
    .await;
    namespace(client, "tenant", json!({})).await;
    // The configurations are in force: an ordinary namespace's Pod is refused (Fail policy).
    let refused = eventually(Duration::from_secs(20), || async {
        match create(client, "tenant", &pod("refused", json!({}))).await {
            Err(e) => Ok(e),
            Ok(()) => Err("admitted before the configurations applied".to_owned()),
        }
    })
    .await;
    assert!(refused.contains("failed calling webhook"), "{refused}");
    for ns in ["kube-system", "admission-webhooks", "opted-out"] {
        create(client, ns, &pod("still-admitted", json!({})))
            .await
            .unwrap_or_else(|e| panic!("a Pod in {ns} with every webhook down: {e}"));
    }
}

/// One test, two phases in order: the configurations are cluster-wide.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopped_webhook_or_quota_state_blocks_only_what_needs_it() {
    let env = Env::new("e2e-blast").await;
    let client = &env.client;
    let bin_dir = bin_dir_of_current_exe().unwrap();
    if let Err(e) = check_binaries(&bin_dir, &["scheduling-webhook".to_owned()]) {
        panic!("{e}");
    }
    env.install_crds(&scheduling_webhook::app()).await;
    namespace(client, "admission-webhooks", json!({})).await;
    namespace(client, "team-a", json!({})).await;
    namespace(client, "plain", json!({})).await;
    // A quota, made before the webhooks are in force (its own webhook asks quota-state).
    let quotas: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "team-a",
        &ApiResource::erase::<scheduling_webhook::types::ElasticQuota>(&()),
    );
    let q: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
        "metadata": {"name": "team-a", "labels": {"quota.scheduling.koordinator.sh/parent": "koordinator-root-quota"}},
        "spec": {"max": {"cpu": "10"}}
    }))
    .unwrap();
    quotas.create(&PostParams::default(), &q).await.unwrap();

    every_webhook_stopped(client).await;

    let port = testenv::free_port().unwrap();
    let dead = testenv::free_port().unwrap();
    // Only scheduling-webhook's configurations (the others' services are not running).
    for c in rendered_configurations(&|_| port) {
        if c["metadata"]["name"] == "scheduling-webhook" {
            apply(client, &c).await;
        }
    }
    let mport = testenv::free_port().unwrap();
    let shared = testenv::shared().unwrap();
    let dir = shared.kubeconfig.with_file_name(&env.ns);
    std::fs::create_dir_all(&dir).unwrap();
    let mut cmd = Command::new(bin_dir.join("scheduling-webhook"));
    cmd.args(["serve", "--log-format", "text", "--shutdown-delay", "0s"])
        .args(["--tls-mode", "managed", "--namespace", "admission-webhooks"])
        .args(["--tls-extra-names", "127.0.0.1"])
        .args(["--ca-bundle-propagation", "2s"])
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--metrics-listen")
        .arg(format!("127.0.0.1:{mport}"))
        // quota-state is stopped: nothing listens there.
        .arg("--quota-state-url")
        .arg(format!("https://127.0.0.1:{dead}"))
        .args(["--quota-state-client-secret", "admission-webhooks/none"])
        .args(["--quota-state-timeout-ms", "500"])
        .env("KUBECONFIG", &shared.kubeconfig);
    let _hook = Running::spawn("scheduling-webhook", cmd, dir.join("scheduling.log")).unwrap();
    eventually(Duration::from_secs(60), || async {
        match http_status(&format!("127.0.0.1:{mport}"), "/readyz").await {
            Some(200) => Ok(()),
            s => Err(format!("{s:?}")),
        }
    })
    .await;
    // A Pod no quota concerns: admitted, through the webhook (its certificate is trusted).
    eventually(Duration::from_secs(30), || async {
        create(client, "plain", &pod("nginx", json!({}))).await
    })
    .await;
    // A Pod charged to a quota: refused, naming the cause (fail closed by default).
    let err = create(
        client,
        "team-a",
        &pod(
            "charged",
            json!({"quota.scheduling.koordinator.sh/name": "team-a"}),
        ),
    )
    .await
    .unwrap_err();
    assert!(err.contains("quota-state unavailable"), "{err}");
    // So is one in the quota's namespace without a label (QN-3: the quota named like it).
    let err = create(client, "team-a", &pod("implicit", json!({})))
        .await
        .unwrap_err();
    assert!(err.contains("quota-state unavailable"), "{err}");
}
