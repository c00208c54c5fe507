//! One trace per request, read back from a real trace store: the API server (every request
//! sampled) and every service export to Jaeger; a Pod charged to a quota, a Pod the quota
//! refuses and a PyTorchJob are created through the API server, and each one's trace holds the
//! API server's span, the webhooks' spans in the order the API server called them, and
//! quota-state's, with the attributes a reader needs (docs/monitoring.md#traces).

use std::time::Duration;

use e2e::cluster::start_services_with;
use e2e::quota::{create_retrying, enforce_quota, pod};
use e2e::{Env, eventually, own_control_plane_with};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::json;
use testenv::jaeger::{Jaeger, Span, Trace};

/// The tags [`Trace::render`] shows: what a reader looks for.
const SHOWN: &[&str] = &[
    "kind",
    "name",
    "operation",
    "allowed",
    "rules",
    "applied",
    "patch_bytes",
    "quota",
    "quota.wait_us",
    "pods",
    "quotas",
    "webhook",
];

/// The trace that holds `service`'s review span (`endpoint`) of the object `name` answered
/// `allowed` (a refusal that asked to retry leaves a trace of its own), once it also
/// holds a span of every service in `services` and the API server's root span (spans arrive in
/// batches; the root ends last, after every span of the request, and so arrives last).
async fn trace_of(
    jaeger: &Jaeger,
    service: &str,
    endpoint: &str,
    name: &str,
    allowed: bool,
    services: &[&str],
) -> Trace {
    eventually(Duration::from_secs(60), || async {
        let traces = jaeger.traces_of(service).await?;
        let t = traces
            .into_iter()
            .find(|t| {
                t.span(service, endpoint, |s| {
                    s.tag("name") == name && s.tag("allowed") == allowed.to_string()
                })
                .is_some()
            })
            .ok_or_else(|| format!("no trace of {name} at {service}{endpoint} yet"))?;
        if let Some(missing) = services
            .iter()
            .find(|svc| !t.spans.iter().any(|s| s.service == **svc))
        {
            return Err(format!("trace {} has no {missing} span yet", t.id));
        }
        if !t
            .spans
            .iter()
            .any(|s| s.service == "apiserver" && s.parent.is_empty())
        {
            return Err(format!("trace {} has no root span yet", t.id));
        }
        Ok(t)
    })
    .await
}

/// The span, or a failure that shows the trace.
fn must<'a>(t: &'a Trace, found: Option<&'a Span>, what: &str) -> &'a Span {
    match found {
        Some(s) => s,
        None => panic!("{what} not in\n{}", t.render(SHOWN)),
    }
}

/// quota-state's span of the AdmitPod(s) call in the trace.
fn quota_call(t: &Trace) -> &Span {
    must(
        t,
        t.spans
            .iter()
            .find(|s| s.service == "quota-state" && s.operation.contains("AdmitPod")),
        "quota-state's AdmitPod(s) call",
    )
}

/// The API server's root span of the trace: the request.
fn request(t: &Trace) -> &Span {
    must(
        t,
        t.spans
            .iter()
            .find(|s| s.service == "apiserver" && s.parent.is_empty()),
        "the API server's request span",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_from_the_api_server_through_every_webhook_and_quota_state() {
    let ns = "e2e-traces";
    let dir = std::env::temp_dir().join(format!("e2e-jaeger-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bin = testenv::tools::jaeger().unwrap();
    let jaeger = Jaeger::start(&bin, &dir).await.unwrap();
    let (cp, client) = own_control_plane_with(
        ns,
        &testenv::StartOptions {
            tracing_endpoint: Some(jaeger.otlp_address.clone()),
        },
    )
    .await;
    let env = Env {
        client,
        ns: ns.to_owned(),
    };
    let (_system, _) = start_services_with(
        &env,
        &cp.kubeconfig,
        Some(cp.admission_client_ca.clone()),
        &["quota-state", "scheduling-webhook", "training-webhook"],
        Vec::new(),
        jaeger.exporter_env(),
    )
    .await;
    let quota = enforce_quota(&env, "cpu", 4).await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), ns);

    // Admitted: charged to the quota.
    // As a controller would: a refusal asking to retry is retried (docs/quota-state.md).
    create_retrying(&pods, &pod("traced", &quota, 1))
        .await
        .unwrap();
    let all = ["apiserver", "scheduling-webhook", "quota-state"];
    let t = trace_of(
        &jaeger,
        "scheduling-webhook",
        "/validate-pod",
        "traced",
        true,
        &all,
    )
    .await;
    eprintln!("{}", t.render(SHOWN));
    let root = request(&t);
    let mutate = must(
        &t,
        t.span("scheduling-webhook", "/mutate-pod", |s| {
            s.tag("name") == "traced"
        }),
        "the mutating review",
    );
    let validate = must(
        &t,
        t.span("scheduling-webhook", "/validate-pod", |s| {
            s.tag("name") == "traced"
        }),
        "the validating review",
    );
    for review in [mutate, validate] {
        assert!(t.descends(review, root), "{}", t.render(SHOWN));
        assert_eq!(review.tag("kind"), "Pod");
        assert_eq!(review.tag("namespace"), ns);
        assert_eq!(review.tag("operation"), "CREATE");
        assert_eq!(review.tag("allowed"), "true");
    }
    assert!(
        root.start_us <= mutate.start_us && mutate.start_us <= validate.start_us,
        "request, then mutation, then validation:\n{}",
        t.render(SHOWN)
    );
    assert_eq!(validate.tag("quota"), quota, "{:?}", validate.tags);
    assert!(
        validate.tag("quota.wait_us").parse::<u64>().is_ok(),
        "{:?}",
        validate.tags
    );
    let decided = quota_call(&t);
    assert!(t.descends(decided, validate), "{}", t.render(SHOWN));
    assert_eq!(decided.tag("quotas"), quota, "{:?}", decided.tags);
    assert_eq!(decided.tag("allowed"), "1", "{:?}", decided.tags);
    // No object bodies in any span.
    for s in &t.spans {
        for v in s.tags.values() {
            assert!(!v.contains("registry.example.com"), "{s:?}");
        }
    }

    // Refused by the quota: the trace says which rule.
    let message = match pods
        .create(&PostParams::default(), &pod("too-big", &quota, 10))
        .await
    {
        Err(kube::Error::Api(e)) => e.message,
        other => panic!("admitted past the quota: {:?}", other.map(|_| ())),
    };
    let t = trace_of(
        &jaeger,
        "scheduling-webhook",
        "/validate-pod",
        "too-big",
        false,
        &all,
    )
    .await;
    eprintln!("{}", t.render(SHOWN));
    let refused = must(
        &t,
        t.span("scheduling-webhook", "/validate-pod", |s| {
            s.tag("name") == "too-big"
        }),
        "the refusing review",
    );
    assert!(t.descends(refused, request(&t)));
    assert_eq!(refused.tag("allowed"), "false");
    // PV-4: the quota's check, in quota-state's span too.
    assert!(message.contains("exceeded quota"), "{message}");
    assert_eq!(refused.tag("rules"), "PV-4", "{:?}", refused.tags);
    let decided = quota_call(&t);
    assert!(t.descends(decided, refused), "{}", t.render(SHOWN));
    assert_eq!(decided.tag("rules"), "PV-4", "{:?}", decided.tags);

    // A PyTorchJob: the training webhook's review in the same trace as the request.
    let jobs: Api<DynamicObject> = Api::namespaced_with(
        env.client.clone(),
        ns,
        &kube::api::ApiResource::erase::<training_webhook::types::PyTorchJob>(&()),
    );
    let container = json!({"name": "pytorch", "image": "registry.example.com/mnist:1"});
    let job: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "traced-job"},
        "spec": {"pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": {"spec": {"containers": [container.clone()]}}},
            "Worker": {"replicas": 1, "template": {"spec": {"containers": [container]}}}}}
    }))
    .unwrap();
    jobs.create(&PostParams::default(), &job).await.unwrap();
    let endpoint = "/validate-kubeflow-org-v1-pytorchjob";
    let t = trace_of(
        &jaeger,
        "training-webhook",
        endpoint,
        "traced-job",
        true,
        &["apiserver"],
    )
    .await;
    eprintln!("{}", t.render(SHOWN));
    let review = must(
        &t,
        t.span("training-webhook", endpoint, |s| {
            s.tag("name") == "traced-job"
        }),
        "the PyTorchJob review",
    );
    assert!(t.descends(review, request(&t)));
    assert_eq!(review.tag("kind"), "PyTorchJob");
    assert_eq!(review.tag("allowed"), "true");

    drop(_system);
    drop(cp);
    drop(jaeger);
    let _ = std::fs::remove_dir_all(&dir);
}
