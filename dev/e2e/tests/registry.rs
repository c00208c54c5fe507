//! registry-webhook through the real kube-apiserver: mutation stored, denials with field paths,
//! the binding rule reading cluster state, UPDATE, dry-run, failure policies and timeouts.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use admission_kit::review::handler::{Context, Request, Validator, Verdict};
use admission_kit::{App, FailurePolicy, Target};
use e2e::{Env, Webhook, eventually};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use registry_webhook::types::{AutoscalingPolicy, AutoscalingPolicyBinding, Model};
use serde_json::{Value, json};

fn api<K: kube::Resource<DynamicType = ()>>(env: &Env) -> Api<DynamicObject> {
    Api::namespaced_with(env.client.clone(), &env.ns, &ApiResource::erase::<K>(&()))
}

fn obj(v: Value) -> DynamicObject {
    serde_json::from_value(v).unwrap_or_else(|e| panic!("test object: {e}"))
}

/// Model-level autoscaling without the two fields the mutating webhook defaults (MM-01, MM-02).
fn autoscaled_model(name: &str) -> DynamicObject {
    obj(json!({
        "apiVersion": "registry.volcano.sh/v1alpha1", "kind": "Model", "metadata": {"name": name},
        "spec": {
            "autoscalingPolicy": {"metrics": [{"metricName": "kthena:num_requests_waiting", "targetValue": "10"}]},
            "backends": [{"name": "main", "type": "vLLM", "modelURI": "hf://example/chat-8b",
                          "minReplicas": 1, "maxReplicas": 3, "scalingCost": 10,
                          "workers": [{"type": "server", "image": "vllm/vllm-openai:v0.10.1",
                                       "config": {"max-model-len": 8192}}]}]
        }
    }))
}

/// Static model whose replicas differ: MV-11.
fn static_model(name: &str, min: i32, max: i32) -> DynamicObject {
    obj(json!({
        "apiVersion": "registry.volcano.sh/v1alpha1", "kind": "Model", "metadata": {"name": name},
        "spec": {"backends": [{"name": "main", "type": "vLLM", "modelURI": "hf://example/chat-8b",
                               "minReplicas": min, "maxReplicas": max,
                               "workers": [{"type": "server", "image": "vllm/vllm-openai:v0.10.1"}]}]}
    }))
}

fn api_error(r: Result<DynamicObject, kube::Error>) -> (u16, String) {
    match r {
        Err(kube::Error::Api(e)) => (e.code, e.message),
        Err(e) => panic!("expected an API refusal, got {e}"),
        Ok(o) => panic!(
            "expected a refusal, object {:?} was admitted",
            o.metadata.name
        ),
    }
}

fn dry_run() -> PostParams {
    PostParams {
        dry_run: true,
        ..PostParams::default()
    }
}

/// Serves and registers the registry webhook for the test's namespace and waits until the API
/// server calls both the mutating and the validating webhooks.
async fn registry(env: &Env, policy: Option<FailurePolicy>) -> Webhook {
    let app = registry_webhook::app();
    env.install_crds(&app).await;
    let hook = Webhook::start(&app, &env.client).await;
    env.register("registry", &app, &hook, policy, 10).await;
    let models = api::<Model>(env);
    eventually(Duration::from_secs(30), || async {
        let mutated = models
            .create(&dry_run(), &autoscaled_model("probe"))
            .await
            .map_err(|e| e.to_string())?;
        if mutated.data["spec"]["costExpansionRatePercent"] != 200 {
            return Err("mutating webhook not active yet".into());
        }
        match models
            .create(&dry_run(), &static_model("probe", 1, 2))
            .await
        {
            Err(kube::Error::Api(e)) if e.message.contains("validation failed") => Ok(()),
            other => Err(format!("validating webhook not active yet: {other:?}")),
        }
    })
    .await;
    hook
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_defaults_denials_update_and_dry_run() {
    let env = Env::new("e2e-model").await;
    let _hook = registry(&env, None).await;
    let models = api::<Model>(&env);

    // Created, and read back with the defaults applied; a field our types keep opaque survives.
    models
        .create(&PostParams::default(), &autoscaled_model("chat"))
        .await
        .unwrap();
    let stored = models.get("chat").await.unwrap();
    assert_eq!(stored.data["spec"]["costExpansionRatePercent"], 200);
    assert_eq!(
        stored.data["spec"]["backends"][0]["scaleToZeroGracePeriod"],
        "30s"
    );
    assert_eq!(
        stored.data["spec"]["backends"][0]["workers"][0]["config"]["max-model-len"],
        8192
    );

    // Refused, the API error naming the field path and the webhook.
    let (code, msg) = api_error(
        models
            .create(&PostParams::default(), &static_model("bad", 1, 2))
            .await,
    );
    assert_eq!(code, 400);
    assert!(msg.contains("denied the request"), "{msg}");
    assert!(
        msg.contains("spec.backends[0]: Invalid value: \"minReplicas=1, maxReplicas=2\": minReplicas and maxReplicas must be equal"),
        "{msg}"
    );

    // UPDATE: a valid static model replaced by an invalid one is refused; the stored one stays.
    models
        .create(&PostParams::default(), &static_model("fixed", 2, 2))
        .await
        .unwrap();
    let mut changed = models.get("fixed").await.unwrap();
    changed.data["spec"]["backends"][0]["maxReplicas"] = json!(5);
    let (_, msg) = api_error(
        models
            .replace("fixed", &PostParams::default(), &changed)
            .await,
    );
    assert!(
        msg.contains("spec.backends[0]: Invalid value: \"minReplicas=2, maxReplicas=5\""),
        "{msg}"
    );
    assert_eq!(
        models.get("fixed").await.unwrap().data["spec"]["backends"][0]["maxReplicas"],
        2
    );

    // dryRun=All: the same decisions, nothing stored.
    let dry = models
        .create(&dry_run(), &autoscaled_model("dry"))
        .await
        .unwrap();
    assert_eq!(dry.data["spec"]["costExpansionRatePercent"], 200);
    assert!(
        models.get_opt("dry").await.unwrap().is_none(),
        "a dry run stored the object"
    );
    let (_, dry_msg) = api_error(models.create(&dry_run(), &static_model("bad", 1, 2)).await);
    assert!(
        dry_msg.contains("minReplicas and maxReplicas must be equal"),
        "{dry_msg}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binding_needs_its_policy_from_the_watch_cache() {
    let env = Env::new("e2e-binding").await;
    let _hook = registry(&env, None).await;
    let bindings = api::<AutoscalingPolicyBinding>(&env);
    let binding = obj(json!({
        "apiVersion": "registry.volcano.sh/v1alpha1", "kind": "AutoscalingPolicyBinding",
        "metadata": {"name": "chat-scaling"},
        "spec": {"policyRef": {"name": "chat-policy"},
                 "scalingConfiguration": {"minReplicas": 1, "maxReplicas": 4,
                     "target": {"targetRef": {"kind": "ModelServing", "name": "chat"}}}}
    }));
    let (_, msg) = api_error(bindings.create(&PostParams::default(), &binding).await);
    assert!(
        msg.contains("spec.PolicyRef: Invalid value: \"chat-policy\": autoscaling policy resource chat-policy does not exist"),
        "{msg}"
    );
    let policy = obj(json!({
        "apiVersion": "registry.volcano.sh/v1alpha1", "kind": "AutoscalingPolicy",
        "metadata": {"name": "chat-policy"},
        "spec": {"metrics": [{"metricName": "kthena:num_requests_waiting", "targetValue": 10}]}
    }));
    let created = api::<AutoscalingPolicy>(&env)
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();
    // The policy mutator filled in the whole behaviour (PM-01).
    assert_eq!(
        created.data["spec"]["behavior"]["scaleUp"]["stablePolicy"]["instances"],
        4
    );
    // The webhook reads policies from its watch cache, which follows the API server closely.
    eventually(Duration::from_secs(20), || async {
        bindings
            .create(&PostParams::default(), &binding)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_policy_refuses_when_the_service_is_down() {
    let env = Env::new("e2e-fail").await;
    let mut hook = registry(&env, None).await;
    hook.stop().await;
    let (code, msg) = api_error(
        api::<Model>(&env)
            .create(&PostParams::default(), &static_model("m", 1, 1))
            .await,
    );
    assert_eq!(code, 500, "{msg}");
    assert!(msg.contains("failed calling webhook"), "{msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignore_policy_admits_when_the_service_is_down() {
    let env = Env::new("e2e-ignore").await;
    let mut hook = registry(&env, Some(FailurePolicy::Ignore)).await;
    hook.stop().await;
    // Invalid and not defaulted: with Ignore, an unreachable webhook lets it through untouched.
    let models = api::<Model>(&env);
    models
        .create(&PostParams::default(), &static_model("through", 1, 2))
        .await
        .unwrap();
    let stored = models.get("through").await.unwrap();
    assert_eq!(stored.data["spec"]["backends"][0]["maxReplicas"], 2);
    models
        .delete("through", &DeleteParams::default())
        .await
        .unwrap();
}

/// A validator slower than any timeout the test registers; counts the reviews it receives.
struct Slow(Arc<AtomicUsize>);
impl Validator for Slow {
    type Object = Value;
    fn validate(&self, _: &Request<Value>, _: &Context) -> Verdict {
        self.0.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_secs(3));
        Verdict::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_webhook_is_treated_per_failure_policy() {
    for policy in [FailurePolicy::Fail, FailurePolicy::Ignore] {
        let calls = Arc::new(AtomicUsize::new(0));
        let app = App::new("slow", "slow").validate(
            "/slow",
            Target::of::<Model>(),
            policy,
            Slow(calls.clone()),
        );
        let env = Env::new(&format!("e2e-slow-{}", policy.as_str().to_lowercase())).await;
        env.install_crds(&registry_webhook::app()).await;
        let hook = Webhook::start(&app, &env.client).await;
        env.register("slow", &app, &hook, None, 1).await;
        let models = api::<Model>(&env);
        // Registration takes effect asynchronously: retry until a request reached the webhook.
        eventually(Duration::from_secs(30), || async {
            let before = calls.load(Ordering::SeqCst);
            let result = models.create(&dry_run(), &static_model("m", 1, 1)).await;
            let called = calls.load(Ordering::SeqCst) > before;
            match (policy, result) {
                (FailurePolicy::Fail, Err(kube::Error::Api(e))) if called => {
                    assert!(
                        e.message.contains("failed calling webhook"),
                        "{}",
                        e.message
                    );
                    assert!(
                        e.message.contains("deadline") || e.message.contains("timeout"),
                        "{}",
                        e.message
                    );
                    Ok(())
                }
                // Ignore: the webhook was called, timed out after 1 s, and the object went through.
                (FailurePolicy::Ignore, Ok(_)) if called => Ok(()),
                (_, r) => Err(format!(
                    "not through the timeout path yet (called={called}): {:?}",
                    r.map(|o| o.metadata.name)
                )),
            }
        })
        .await;
    }
}

/// On the kit's state: a lookup the watch cache cannot
/// answer goes to the API server. The cache here watches one ConfigMap by name (as
/// `App::watch_one` does), so every other name is a cache miss by construction: found through
/// the live read, an absent one confirmed by it (and remembered, so asked once, then renewed
/// in the background while lookups go on), each counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_miss_is_read_from_the_api_server() {
    use admission_kit::cluster::state::WatchState;
    use admission_kit::review::app::WatchSpec;
    use admission_kit::review::lookup::{ClusterState, TypeKey};
    use k8s_openapi::api::core::v1::ConfigMap;

    let env = Env::new("e2e-live-read").await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "made-after"}, "data": {"k": "v"}}))
            .unwrap();
    let state = WatchState::start(
        env.client.clone(),
        &[WatchSpec {
            resource: ApiResource::erase::<ConfigMap>(&()),
            only: Some((env.ns.clone(), "watched".to_owned())),
            needed: None,
            metadata_only: false,
            keep: None,
            optional: false,
        }],
        &admission_kit::Context::new(std::sync::Arc::new(
            admission_kit::review::lookup::EmptyState,
        )),
    );
    eventually(Duration::from_secs(30), || async {
        if state.synced() {
            Ok(())
        } else {
            Err("not synced".to_owned())
        }
    })
    .await;
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let metrics = admission_kit::server::metrics::Metrics::new().unwrap();
    let reads = |result: &str| {
        let text = String::from_utf8(metrics.render()).unwrap();
        let line = format!(
            "admission_webhook_state_live_reads_total{{kind=\"ConfigMap\",result=\"{result}\"}} "
        );
        text.lines()
            .find_map(|l| l.strip_prefix(&line)?.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let ty = TypeKey::of::<ConfigMap>();
    let (found0, absent0) = (reads("found"), reads("absent"));
    let found = tokio::task::block_in_place(|| state.get(&ty, Some(&env.ns), "made-after"));
    let found = found.unwrap().expect("found through the live read");
    assert_eq!(found.data["data"]["k"], "v");
    for _ in 0..3 {
        let missing = tokio::task::block_in_place(|| state.get(&ty, Some(&env.ns), "missing"));
        assert!(missing.unwrap().is_none());
    }
    assert_eq!(reads("found"), found0 + 1);
    // Asked once: the absence is remembered for a second.
    assert_eq!(reads("absent"), absent0 + 1);

    // Past half of that, a lookup answers from the confirmation and renews it on a task of its
    // own: asked again without a second blocking read, and once only however many look.
    tokio::time::sleep(admission_kit::cluster::state::REFRESH_AFTER).await;
    for _ in 0..3 {
        let missing = tokio::task::block_in_place(|| state.get(&ty, Some(&env.ns), "missing"));
        assert!(missing.unwrap().is_none());
    }
    eventually(Duration::from_secs(10), || async {
        match reads("absent") - absent0 {
            2 => Ok(()),
            n => Err(format!("{n} absent reads")),
        }
    })
    .await;

    // Created meanwhile: a lookup that keeps renewing the absence finds it.
    let made: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "missing"}, "data": {"k": "w"}}))
            .unwrap();
    cms.create(&PostParams::default(), &made).await.unwrap();
    eventually(Duration::from_secs(10), || async {
        let got = tokio::task::block_in_place(|| state.get(&ty, Some(&env.ns), "missing"));
        match got {
            Ok(Some(o)) if o.data["data"]["k"] == "w" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}
