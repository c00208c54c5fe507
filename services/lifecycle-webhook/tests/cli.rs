//! The binary as an operator runs it: the endpoint table it registers, `review` deciding offline
//! (its own runtime, no server), and a bad option refused before anything is served.

use std::io::Write;
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_lifecycle-webhook");

#[test]
fn endpoints_are_the_deletion_and_eviction_webhooks() {
    let out = Command::new(BIN).arg("endpoints").output().unwrap();
    assert!(out.status.success());
    let eps: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let paths: Vec<(&str, &str, &str)> = eps
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["path"].as_str().unwrap(),
                e["resource"].as_str().unwrap(),
                e["failurePolicy"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        paths,
        [
            ("/validate-pod-deletion", "pods", "Ignore"),
            ("/validate-pod-eviction", "pods/eviction", "Ignore")
        ]
    );
    assert_eq!(
        eps[0]["objectSelector"]["key"],
        "drain.admission-webhooks.io/enabled"
    );
    assert!(
        eps[1].get("objectSelector").is_none(),
        "evictions carry no Pod labels"
    );
    assert!(
        eps.as_array()
            .unwrap()
            .iter()
            .all(|e| e["sideEffects"] == "NoneOnDryRun")
    );
}

fn review(path: &str, review: &serde_json::Value) -> serde_json::Value {
    let mut child = Command::new(BIN)
        .args(["review", "--path", path, "--drain-record-namespace", "ops"])
        .env("KUBECONFIG", "/nonexistent")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(review.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    serde_json::from_slice(&out.stdout).unwrap()
}

fn deletion(status: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "r-1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": "llm-0", "namespace": "serving", "operation": "DELETE",
            "userInfo": {"username": "alice"},
            "oldObject": {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "llm-0", "namespace": "serving", "uid": "u-1",
                             "labels": {"drain.admission-webhooks.io/enabled": "true"},
                             "annotations": {"drain.admission-webhooks.io/port": "8080"}},
                "spec": {"containers": [{"name": "server", "image": "x"}]},
                "status": status}
        }
    })
}

#[test]
fn review_decides_offline() {
    // Nothing to drain.
    let answer = review(
        "/validate-pod-deletion",
        &deletion(serde_json::json!({"phase": "Pending"})),
    );
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    assert!(answer["response"].get("warnings").is_none(), "{answer}");
    // Running, but no API to read the Pod from (LD-12): proceeds, saying why.
    let answer = review(
        "/validate-pod-deletion",
        &deletion(serde_json::json!({"phase": "Running", "podIP": "127.0.0.1"})),
    );
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    let warning = answer["response"]["warnings"][0].as_str().unwrap();
    assert!(
        warning.starts_with("Pod not read (no Kubernetes API client"),
        "{warning}"
    );
}

#[test]
fn bad_options_stop_the_service_before_it_serves() {
    let out = Command::new(BIN)
        .args(["serve", "--self-signed", "--review-deadline", "2s"])
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--review-deadline: must be more than 0 and at most 1s"),
        "{err}"
    );
}
