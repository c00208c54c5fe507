//! Koordinator's handlers (controller-runtime) answer an
//! object they cannot decode with the review refused, `status.code` 400 and the decoder's error,
//! so the API server refuses the Node even though these webhooks' failure policy is `Ignore`
//! (an HTTP error would have let it through). `review` prints that answer and exits 0.

use std::io::Write as _;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

fn review(path: &str, body: &Value) -> (Option<i32>, Value, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_node-config-webhook"))
        .args(["review", "--path", path])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&serde_json::to_vec(body).unwrap())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let answer = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (
        out.status.code(),
        answer,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn an_undecodable_node_is_refused_with_code_400() {
    for (path, sub) in [("/validate-node", ""), ("/mutate-node-status", "status")] {
        let body = json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "n-1", "operation": "UPDATE", "subResource": sub,
                        "kind": {"group": "", "version": "v1", "kind": "Node"},
                        "resource": {"group": "", "version": "v1", "resource": "nodes"},
                        "object": {"metadata": {"name": "n"}, "spec": {"unschedulable": "yes"}, "status": 7},
                        "oldObject": {"metadata": {"name": "n"}}}
        });
        let (code, answer, err) = review(path, &body);
        assert_eq!(code, Some(0), "{path}: {err}");
        let r = &answer["response"];
        assert_eq!(r["uid"], "n-1", "{path}: {answer}");
        assert_eq!(r["allowed"], false, "{path}: {answer}");
        assert_eq!(r["status"]["code"], 400, "{path}: {answer}");
        assert!(
            r["status"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("invalid type"),
            "{path}: {answer}"
        );
    }
}
