//! Kthena v1.0 through the real kube-apiserver with upstream's CRDs
//! (`fixtures/crds/kthena-v1.0.0`): every published example manifest of our kinds
//! (`fixtures/examples/raw/kthena-v1.0.0`) is created (dry run) with registry-webhook
//! registered, and admitted, mutated or refused as upstream's handlers at v1.0.0 decide it.
//!
//! The expected answers (`kthena_v1_examples.json`) are upstream's: each example, as the API
//! server hands it to the webhooks (the CRD's defaults applied, which this test writes to
//! `target/e2e-kthena-v1/defaulted.json` before registering ours), was answered by Kthena's own
//! handlers built at the tag (`docs/spec/kthena-v1.md` §14 says how).

use std::collections::BTreeMap;
use std::time::Duration;

use e2e::{Env, Webhook, eventually};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde::Deserialize;
use serde_json::{Value, json};

const GROUPS: [&str; 2] = [
    "workload.serving.volcano.sh",
    "networking.serving.volcano.sh",
];

/// One example document of a Kthena kind: `<file>#<index of the document in the file>`.
struct Example {
    id: String,
    object: Value,
}

fn examples(root: &std::path::Path) -> Vec<Example> {
    let dir = root.join("examples/raw/kthena-v1.0.0");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        for (i, doc) in serde_yaml_ng::Deserializer::from_str(&text).enumerate() {
            let Ok(v) = Value::deserialize(doc) else {
                continue;
            };
            let group = v["apiVersion"].as_str().unwrap_or_default();
            if GROUPS.iter().any(|g| group.starts_with(&format!("{g}/"))) {
                out.push(Example {
                    id: format!("{name}#{i}"),
                    object: v,
                });
            }
        }
    }
    out
}

fn api_for(env: &Env, obj: &Value) -> Api<DynamicObject> {
    let (group, version) = obj["apiVersion"]
        .as_str()
        .and_then(|a| a.split_once('/'))
        .unwrap_or_default();
    let kind = obj["kind"].as_str().unwrap_or_default();
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let plural = match kind {
        "AutoscalingPolicy" => "autoscalingpolicies".to_owned(),
        k => format!("{}s", k.to_lowercase()),
    };
    Api::namespaced_with(
        env.client.clone(),
        &env.ns,
        &ApiResource::from_gvk_with_plural(&gvk, &plural),
    )
}

/// What the API server answered: the object it would store, or the refusal.
#[derive(Debug)]
enum Outcome {
    Admitted(Value),
    Refused(u16, String),
}

async fn dry_run_create(env: &Env, obj: &Value) -> Outcome {
    let mut obj = obj.clone();
    obj["metadata"]["namespace"] = json!(env.ns);
    let o: DynamicObject = serde_json::from_value(obj.clone()).unwrap();
    let pp = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    match api_for(env, &obj).create(&pp, &o).await {
        Ok(stored) => Outcome::Admitted(serde_json::to_value(stored).unwrap()),
        Err(kube::Error::Api(e)) => Outcome::Refused(e.code, e.message),
        Err(e) => panic!("create: {e}"),
    }
}

/// The value at a JSON pointer of `v`, for comparing what upstream's mutators set.
fn at<'a>(v: &'a Value, pointer: &str) -> &'a Value {
    v.pointer(pointer).unwrap_or(&Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kthena_v1_examples_are_decided_as_upstream() {
    let env = Env::new("e2e-kthena-v1").await;
    let root = admission_testing::fixtures::fixtures_root();
    // Upstream's v1.0 CRDs, and the pinned registry's (the service also watches those).
    let mut files: Vec<_> = ["crds/kthena-v1.0.0", "crds/kthena"]
        .iter()
        .flat_map(|d| std::fs::read_dir(root.join(d)).unwrap())
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    for f in &files {
        let yaml = std::fs::read_to_string(f).unwrap();
        testenv::system::apply_crds(&env.client, &yaml)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
    }
    let examples = examples(&root);
    assert!(examples.len() >= 40, "only {} examples", examples.len());

    // What the webhooks are sent: each example after the API server's decoding and the CRD's
    // defaults (the input from which upstream's answers were taken).
    let mut defaulted = BTreeMap::new();
    for ex in &examples {
        let v = match dry_run_create(&env, &ex.object).await {
            Outcome::Admitted(v) => json!({"object": v}),
            Outcome::Refused(code, msg) => json!({"refused": code, "message": msg}),
        };
        defaulted.insert(ex.id.clone(), v);
    }
    let dump = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/e2e-kthena-v1");
    std::fs::create_dir_all(&dump).unwrap();
    std::fs::write(
        dump.join("defaulted.json"),
        serde_json::to_string_pretty(&defaulted).unwrap(),
    )
    .unwrap();

    let app = registry_webhook::app();
    let hook = Webhook::start(&app, &env.client).await;
    env.register("kthena-v1", &app, &hook, None, 10).await;
    let probe = json!({"apiVersion": "networking.serving.volcano.sh/v1alpha1", "kind": "ModelRoute",
                       "metadata": {"name": "probe"},
                       "spec": {"modelName": "m", "rules": [{"targetModels": [{"modelServerName": "s", "weight": 0}]}]}});
    eventually(Duration::from_secs(30), || async {
        match dry_run_create(&env, &probe).await {
            Outcome::Refused(_, m) if m.contains("total weight must be greater than zero") => {
                Ok(())
            }
            other => Err(format!("webhooks not active yet: {other:?}")),
        }
    })
    .await;

    let expected: BTreeMap<String, Value> =
        serde_json::from_str(include_str!("kthena_v1_examples.json")).unwrap();
    let mut problems = Vec::new();
    let (mut admitted, mut refused) = (0, 0);
    for ex in &examples {
        let Some(want) = expected.get(&ex.id) else {
            problems.push(format!("{}: no expected answer", ex.id));
            continue;
        };
        let got = dry_run_create(&env, &ex.object).await;
        match (&got, want["allowed"].as_bool()) {
            (Outcome::Admitted(obj), Some(true)) => {
                admitted += 1;
                // The spec stored is the defaulted one with upstream's changes, and no other.
                let mut want_obj = defaulted[&ex.id]["object"].clone();
                for (pointer, value) in want["set"].as_object().into_iter().flatten() {
                    if at(obj, pointer) != value {
                        problems.push(format!(
                            "{}: {pointer} is {}, upstream sets {value}",
                            ex.id,
                            at(obj, pointer)
                        ));
                    }
                    if let Some(slot) = want_obj.pointer_mut(pointer) {
                        *slot = value.clone();
                    }
                }
                if obj["spec"] != want_obj["spec"] {
                    problems.push(format!("{}: the spec was changed beyond upstream's", ex.id));
                }
            }
            (Outcome::Refused(_, msg), Some(false)) => {
                refused += 1;
                for part in want["message_contains"].as_array().into_iter().flatten() {
                    let part = part.as_str().unwrap_or_default();
                    if !msg.contains(part) {
                        problems.push(format!("{}: refusal {msg:?} lacks {part:?}", ex.id));
                    }
                }
            }
            _ => problems.push(format!("{}: got {got:?}, upstream {want}", ex.id)),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert_eq!(admitted + refused, examples.len());
    assert!(expected.len() == examples.len(), "stale expectations");
    eprintln!("{admitted} admitted, {refused} refused as upstream");
}
