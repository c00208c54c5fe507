//! Kubeflow Trainer v2.3 through the real kube-apiserver with upstream's CRDs
//! (`fixtures/crds/kubeflow-trainer-v2.3.0`): every published example manifest
//! (`fixtures/examples/raw/kubeflow-trainer-v2.3.0`) is created with training-webhook
//! registered, and admitted, mutated or refused as upstream's handlers at v2.3.0 decide it: the
//! runtimes first (created, since TrainJobs name them), then the TrainJobs (dry run). Two more
//! TrainJobs show the refusals a user meets first: one naming a runtime that does not exist, and
//! one setting what its runtime reserves.
//!
//! The expected answers (`trainer_v2_examples.json`) are upstream's: each example as the API
//! server hands it to the webhooks (the CRD's defaults applied; this test writes them to
//! `target/e2e-trainer-v2/defaulted.json` before registering ours) was answered by Trainer's own
//! handlers built at the tag, with the example runtimes as cluster state
//! (`tools/upstream-oracle/trainer-v2.3.0/examples.py`; `docs/spec/trainer-v2.md` §9).

use std::collections::BTreeMap;
use std::time::Duration;

use e2e::{Env, Webhook, eventually};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde::Deserialize;
use serde_json::{Value, json};

/// One example document: `<file>#<index of the document in the file>`.
struct Example {
    id: String,
    object: Value,
}

/// Two TrainJobs besides the examples: a missing runtime, and an override the runtime forbids.
fn extra_trainjobs() -> Vec<Example> {
    let job = |name: &str, spec: Value| {
        json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
               "metadata": {"name": name}, "spec": spec})
    };
    vec![
        Example {
            id: "extra#missing-runtime".into(),
            object: job(
                "missing-runtime",
                json!({"runtimeRef": {"name": "torch-nowhere"}, "trainer": {"numNodes": 1}}),
            ),
        },
        Example {
            id: "extra#reserved-env".into(),
            object: job(
                "reserved-env",
                json!({"runtimeRef": {"name": "torch-distributed"},
                       "trainer": {"env": [{"name": "PET_NNODES", "value": "4"}, {"name": "PET_MASTER_PORT", "value": "1"}]}}),
            ),
        },
    ]
}

fn examples(root: &std::path::Path) -> Vec<Example> {
    let dir = root.join("examples/raw/kubeflow-trainer-v2.3.0");
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
            if v["apiVersion"].as_str() == Some("trainer.kubeflow.org/v1alpha1") {
                out.push(Example {
                    id: format!("{name}#{i}"),
                    object: v,
                });
            }
        }
    }
    out.extend(extra_trainjobs());
    out
}

fn is_runtime(obj: &Value) -> bool {
    obj["kind"] != "TrainJob"
}

fn api_for(env: &Env, obj: &Value) -> Api<DynamicObject> {
    let kind = obj["kind"].as_str().unwrap_or_default();
    let gvk = GroupVersionKind::gvk("trainer.kubeflow.org", "v1alpha1", kind);
    let ar = ApiResource::from_gvk_with_plural(&gvk, &format!("{}s", kind.to_lowercase()));
    if kind == "ClusterTrainingRuntime" {
        Api::all_with(env.client.clone(), &ar)
    } else {
        Api::namespaced_with(env.client.clone(), &env.ns, &ar)
    }
}

/// What the API server answered: the object it stored (or would store), or the refusal.
#[derive(Debug)]
enum Outcome {
    Admitted(Value),
    Refused(u16, String),
}

async fn create(env: &Env, obj: &Value, dry_run: bool) -> Outcome {
    let mut obj = obj.clone();
    if obj["kind"] != "ClusterTrainingRuntime" {
        obj["metadata"]["namespace"] = json!(env.ns);
    }
    let o: DynamicObject = serde_json::from_value(obj.clone()).unwrap();
    let pp = PostParams {
        dry_run,
        ..PostParams::default()
    };
    match api_for(env, &obj).create(&pp, &o).await {
        Ok(stored) => Outcome::Admitted(serde_json::to_value(stored).unwrap()),
        Err(kube::Error::Api(e)) => Outcome::Refused(e.code, e.message),
        Err(e) => panic!("create: {e}"),
    }
}

fn at<'a>(v: &'a Value, pointer: &str) -> &'a Value {
    v.pointer(pointer).unwrap_or(&Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trainer_v2_examples_are_decided_as_upstream() {
    let env = Env::new("e2e-trainer-v2").await;
    let root = admission_testing::fixtures::fixtures_root();
    let mut files: Vec<_> = std::fs::read_dir(root.join("crds/kubeflow-trainer-v2.3.0"))
        .unwrap()
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
    assert!(examples.len() >= 20, "only {} examples", examples.len());

    // What the webhooks are sent: each example after the API server's decoding and the CRD's
    // defaults (the input from which upstream's answers were taken).
    let mut defaulted = BTreeMap::new();
    for ex in &examples {
        let v = match create(&env, &ex.object, true).await {
            Outcome::Admitted(v) => json!({"object": v}),
            Outcome::Refused(code, msg) => json!({"refused": code, "message": msg}),
        };
        defaulted.insert(ex.id.clone(), v);
    }
    let dump = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/e2e-trainer-v2");
    std::fs::create_dir_all(&dump).unwrap();
    std::fs::write(
        dump.join("defaulted.json"),
        serde_json::to_string_pretty(&defaulted).unwrap(),
    )
    .unwrap();

    let app = training_webhook::app();
    let hook = Webhook::start(&app, &env.client).await;
    env.register("trainer-v2", &app, &hook, None, 10).await;
    let probe = json!({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                       "metadata": {"name": "probe"},
                       "spec": {"runtimeRef": {"name": "probe", "apiGroup": "example.com", "kind": "Probe"}}});
    eventually(Duration::from_secs(30), || async {
        match create(&env, &probe, true).await {
            Outcome::Refused(_, m) if m.contains("unsupported runtime: Probe.example.com") => {
                Ok(())
            }
            other => Err(format!("webhooks not active yet: {other:?}")),
        }
    })
    .await;

    let expected: BTreeMap<String, Value> =
        serde_json::from_str(include_str!("trainer_v2_examples.json")).unwrap();
    let mut problems = Vec::new();
    let (mut admitted, mut refused) = (0, 0);
    // Runtimes are created for real: the TrainJobs after them are judged against them.
    let (runtimes, jobs): (Vec<_>, Vec<_>) = examples.iter().partition(|e| is_runtime(&e.object));
    for ex in runtimes.into_iter().chain(jobs) {
        let Some(want) = expected.get(&ex.id) else {
            problems.push(format!("{}: no expected answer", ex.id));
            continue;
        };
        let got = create(&env, &ex.object, !is_runtime(&ex.object)).await;
        match (&got, want["allowed"].as_bool()) {
            (Outcome::Admitted(obj), Some(true)) => {
                admitted += 1;
                let mut want_obj = defaulted[&ex.id]["object"].clone();
                for (pointer, value) in want["set"].as_object().into_iter().flatten() {
                    // Upstream's times come from its fixed clock; ours from the real one.
                    let is_time = pointer.ends_with("/time");
                    let got_v = at(obj, pointer);
                    if (is_time && !got_v.is_string()) || (!is_time && got_v != value) {
                        problems.push(format!(
                            "{}: {pointer} is {got_v}, upstream sets {value}",
                            ex.id
                        ));
                    }
                    if let Some(slot) = want_obj.pointer_mut(pointer) {
                        *slot = got_v.clone();
                    } else if let Some((parent, key)) = pointer.rsplit_once('/')
                        && let Some(Value::Object(m)) = want_obj.pointer_mut(parent)
                    {
                        m.insert(key.to_owned(), got_v.clone());
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
