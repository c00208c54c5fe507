//! `admission-check --kubeconfig` against a real API server: the state the rules read (an
//! AutoscalingPolicy, a namespace's opt-out label) is listed from the cluster.

use std::process::Command;

use e2e::Env;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};

const GROUP_VERSION: &str = "registry.volcano.sh/v1alpha1";

fn check(args: &[&str], manifest: &str) -> (Option<i32>, Value) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("manifest.yaml");
    std::fs::write(&file, manifest).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_admission-check"))
        .args(args)
        .args(["-o", "json"])
        .arg(&file)
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), v)
}

#[tokio::test]
async fn the_state_comes_from_the_cluster() {
    let env = Env::new("check").await;
    let app = registry_webhook::app();
    env.install_crds(&app).await;
    let policies: Api<DynamicObject> = Api::namespaced_with(
        env.client.clone(),
        &env.ns,
        &ApiResource::erase::<registry_webhook::types::AutoscalingPolicy>(&()),
    );
    let policy: DynamicObject = serde_json::from_value(json!({
        "apiVersion": GROUP_VERSION, "kind": "AutoscalingPolicy",
        "metadata": {"name": "live-policy"},
        "spec": {"metrics": [{"metricName": "kthena:num_requests_waiting", "targetValue": "10"}]}
    }))
    .unwrap();
    policies
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();
    let binding = format!(
        "apiVersion: {GROUP_VERSION}\nkind: AutoscalingPolicyBinding\nmetadata: {{name: b, namespace: {}}}\n\
         spec:\n  policyRef: {{name: live-policy}}\n  scalingConfiguration:\n    target:\n      targetRef: {{name: m}}\n    minReplicas: 1\n    maxReplicas: 2\n",
        env.ns
    );
    let kubeconfig = testenv::shared().unwrap().kubeconfig.display().to_string();

    // Offline the policy is not in the state: BV-03's refusal rests on it, undecided (exit 4);
    // the cluster's state decides it.
    let (code, offline) = check(&[], &binding);
    assert_eq!(code, Some(4), "{offline:#}");
    assert_eq!(offline["results"][0]["result"], "undecided", "{offline:#}");
    assert_eq!(
        offline["results"][0]["refusals"][0]["findings"][0]["rule"],
        "BV-03"
    );

    let (code, live) = check(&["--kubeconfig", &kubeconfig], &binding);
    assert_eq!(code, Some(0), "{live:#}");
    assert_eq!(live["results"][0]["result"], "admitted", "{live:#}");

    // A namespace that opts out of the webhooks, as its label says in the cluster.
    let opted = format!("{}-out", env.ns);
    let ns: Namespace = serde_json::from_value(json!({
        "metadata": {"name": opted, "labels": {"admission-webhooks.io/exclude": "true"}}
    }))
    .unwrap();
    Api::<Namespace>::all(env.client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let model = format!(
        "apiVersion: {GROUP_VERSION}\nkind: Model\nmetadata: {{name: m, namespace: {opted}}}\n\
         spec:\n  backends:\n  - {{name: main, type: vLLM, modelURI: 'hf://x/y', minReplicas: 1, maxReplicas: 3, workers: [{{type: server, image: 'vllm/vllm-openai:v0.10.1'}}]}}\n"
    );
    let (code, _) = check(&[], &model);
    assert_eq!(
        code,
        Some(1),
        "denied (MV-11) where the namespace is not known to opt out"
    );
    let (code, live) = check(&["--kubeconfig", &kubeconfig], &model);
    assert_eq!(code, Some(0), "{live:#}");
    let skipped = live["results"][0]["skipped"].as_str().unwrap_or_default();
    assert!(
        skipped.contains("carries the label admission-webhooks.io/exclude"),
        "{live:#}"
    );
}
