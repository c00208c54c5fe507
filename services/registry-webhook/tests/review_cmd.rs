//! `registry-webhook review`: bad input is a clear message on stderr naming where it came from,
//! and exit 2 (a YAML manifest, a review of another kind than the endpoint serves); `--state` takes
//! YAML as well as JSON.

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

fn review(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_registry-webhook"))
        .arg("review")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The command may refuse its arguments and exit before reading stdin; a closed pipe is then
    // expected, not a failure of the test.
    match child.stdin.take().unwrap().write_all(stdin) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        other => other.unwrap(),
    }
    child.wait_with_output().unwrap()
}

const BINDING: &str = "/validate-registry-volcano-sh-v1alpha1-autoscalingpolicybinding";

fn binding_review(policy: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview",
        "request": {"uid": "r-1", "operation": "CREATE", "namespace": "default",
                    "object": {"metadata": {"name": "b", "namespace": "default"},
                               "spec": {"policyRef": {"name": policy},
                                        "scalingConfiguration": {"minReplicas": 1, "maxReplicas": 2,
                                            "target": {"targetRef": {"name": "x"}}}}}}
    }))
    .unwrap()
}

#[test]
fn malformed_input_exits_2_with_a_message() {
    for (args, input, want) in [
        (
            vec!["--path", BINDING],
            &b"{not json"[..],
            "cannot decode the AdmissionReview",
        ),
        (
            vec!["--path", BINDING],
            &b"{\"apiVersion\":\"admission.k8s.io/v1\"}"[..],
            "admission review request is nil",
        ),
        (vec!["--path", "/nope"], &b"{}"[..], "no endpoint \"/nope\""),
        (
            vec!["--path", BINDING, "/does/not/exist.json"],
            &b""[..],
            "cannot read the review from /does/not/exist.json",
        ),
        (
            vec!["--path", BINDING],
            &b"apiVersion: registry.volcano.sh/v1alpha1\nkind: Model\n"[..],
            "standard input: cannot decode the AdmissionReview: expected value at line 1 column 1 (review takes one AdmissionReview in JSON",
        ),
        (
            vec!["--path", "/validate-registry-volcano-sh-v1alpha1-autoscalingpolicy"],
            &br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE","kind":{"group":"registry.volcano.sh","version":"v1alpha1","kind":"Model"},"resource":{"group":"registry.volcano.sh","version":"v1alpha1","resource":"models"},"object":{"metadata":{"name":"m"}}}}"#[..],
            "standard input: /validate-registry-volcano-sh-v1alpha1-autoscalingpolicy serves registry.volcano.sh autoscalingpolicies; this review is for registry.volcano.sh models (kind Model)",
        ),
        (
            vec!["--path", BINDING, "--state", "/does/not/exist.yaml"],
            &b"{}"[..],
            "cannot read state file",
        ),
    ] {
        let out = review(&args, input);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn yaml_state_is_read_and_answer_keeps_the_version() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.yaml");
    std::fs::write(
        &state,
        "apiVersion: registry.volcano.sh/v1alpha1\nkind: AutoscalingPolicy\nmetadata: {name: p, namespace: default}\nspec: {metrics: []}\n",
    )
    .unwrap();
    let out = review(
        &["--path", BINDING, "--state", state.to_str().unwrap()],
        &binding_review("p"),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(v["response"]["uid"], "r-1");
    assert_eq!(v["response"]["allowed"], true);
    let out = review(
        &["--path", BINDING, "--state", state.to_str().unwrap()],
        &binding_review("q"),
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["response"]["allowed"], false);
    assert!(
        v["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .contains("autoscaling policy resource q does not exist")
    );
}
