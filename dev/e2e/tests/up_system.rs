//! quota-state and scheduling-webhook as `cargo xtask up` starts them ([`testenv::system`]: the
//! built binaries, managed certificates and self-registration, CRDs from `crd`), through the real
//! API server: 200 pods created at once against 100 CPUs (a refusal that asks to retry is retried,
//! as a controller does) end with exactly 100 admitted; a pod asking for 9.2e15 CPUs is refused
//! naming the value, and the full quota keeps refusing; a refused pod fits once another is deleted;
//! quota-state killed refuses (fail closed), restarted rebuilds its usage from the cluster and
//! admits again; the usage is written back to the quota's `child-request` annotation in rounds
//! (never one write per pod); its gRPC port refuses every call without scheduling-webhook's client
//! certificate, and a negative amount.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use e2e::quota::{create_retrying, pod};
use e2e::{Env, eventually, metric};
use futures::StreamExt;
use futures::future::join_all;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use quota_protocol::proto::quota_state_client::QuotaStateClient;
use quota_protocol::tree::keys::CHILD_REQUEST;
use serde_json::json;
use testenv::system::{Options, spawn_quota_state};

async fn refusal(pods: &Api<Pod>, p: &Pod) -> Result<String, String> {
    match pods.create(&PostParams::default(), p).await {
        Err(kube::Error::Api(e)) => Ok(e.message),
        Ok(_) => Err("admitted".into()),
        Err(e) => Err(e.to_string()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn quota_through_both_services_started_as_up_does() {
    let env = Env::new("e2e-up").await;
    let shared = testenv::shared().unwrap();
    let (mut system, opts, quota_name) =
        e2e::quota::start(&env, Some(shared.admission_client_ca.clone()), 100).await;
    assert_eq!(system.webhooks.len(), 1, "scheduling-webhook serves");
    let quotas = e2e::quota::quotas(&env);
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);

    // Every change of the quota's usage annotation, as a watch sees it.
    let shown = Arc::new(Mutex::new(Vec::<String>::new()));
    let watching = tokio::spawn(watch_usage(
        quotas.clone(),
        quota_name.clone(),
        shown.clone(),
    ));

    let results = join_all((0..200).map(|i| {
        let (pods, q) = (pods.clone(), quota_name.clone());
        async move { create_retrying(&pods, &pod(&format!("p-{i}"), &q, 1)).await }
    }))
    .await;
    let admitted: Vec<String> = results
        .iter()
        .flatten()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    let first_refusal = results.iter().find_map(|r| r.as_ref().err());
    assert_eq!(admitted.len(), 100, "first refusal: {first_refusal:?}");
    // The usage is written back to the quota's child-request annotation in rounds, never once
    // per pod: each round writes a quota at most once.
    let qs_metrics = system.quota_state_metrics().unwrap();
    eventually(Duration::from_secs(30), || async {
        let q = quotas.get(&quota_name).await.map_err(|e| e.to_string())?;
        match q
            .metadata
            .annotations
            .unwrap_or_default()
            .get(CHILD_REQUEST)
        {
            Some(v) if v == r#"{"cpu":"100"}"# => Ok(()),
            other => Err(format!("child-request: {other:?}")),
        }
    })
    .await;
    // How long the burst's reservations waited for their pods (what the reservation window
    // must cover; docs/quota-state.md, quota-state's security model).
    let (_, body) = testenv::system::http_get(&qs_metrics, "/metrics")
        .await
        .unwrap_or_default();
    let backed: Vec<&str> = body
        .lines()
        .filter(|l| l.starts_with("quota_state_reservation_backed_seconds"))
        .collect();
    eprintln!("reservation to pod event, 200-pod burst: {backed:?}");
    let rounds = metric(&qs_metrics, "quota_state_usage_write_rounds_total").await;
    let changes = shown.lock().unwrap().len();
    eprintln!(
        "usage write-back: {changes} annotation changes for 100 admitted pods in {rounds} rounds"
    );
    assert!(
        changes >= 1 && changes as f64 <= rounds,
        "{changes} changes in {rounds} rounds: {:?}",
        shown.lock().unwrap()
    );
    watching.abort();

    let msg = refusal(&pods, &pod("late", &quota_name, 1)).await.unwrap();
    assert!(
        msg.contains(&format!(
            "exceeded quota: {}/{quota_name}, requested: cpu=1, used: cpu=100, limited: cpu=100",
            env.ns
        )),
        "{msg}"
    );
    // One pod asking for 9,223,372,036,854,775 CPUs (a valid quantity; with the usage its
    // thousandths pass 2^63) is refused, naming the value, and the quota keeps refusing after it.
    let mut overflow = pod("overflow", &quota_name, 1);
    if let Some(c) = overflow.spec.as_mut().map(|s| &mut s.containers[0]) {
        c.resources = serde_json::from_value(
            json!({"requests": {"cpu": "9223372036854775"}, "limits": {"cpu": "9223372036854775"}}),
        )
        .unwrap();
    }
    let msg = refusal(&pods, &overflow).await.unwrap();
    assert!(
        msg.contains("requested: cpu=9223372036854775, used: cpu=100, limited: cpu=100"),
        "{msg}"
    );
    let msg = refusal(&pods, &pod("after-overflow", &quota_name, 1))
        .await
        .unwrap();
    assert!(msg.contains("used: cpu=100, limited: cpu=100"), "{msg}");
    pods.delete(
        &admitted[0],
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        },
    )
    .await
    .unwrap();
    eventually(Duration::from_secs(20), || async {
        pods.create(&PostParams::default(), &pod("late", &quota_name, 1))
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;

    // quota-state crashes: the webhook (fail closed) refuses, naming the cause.
    let logged_before = std::fs::read_to_string(&system.webhooks[0].0.log)
        .unwrap()
        .len();
    let (url, qs) = system.quota_state.take().unwrap();
    qs.kill();
    let msg = eventually(Duration::from_secs(20), || async {
        refusal(&pods, &pod("while-down", &quota_name, 1))
            .await
            .and_then(|m| {
                if m.contains("quota-state unavailable") {
                    Ok(m)
                } else {
                    Err(m)
                }
            })
    })
    .await;
    assert!(msg.contains("cannot check the pod's quota"), "{msg}");
    // A pod no quota concerns (no quota label, no quota named like or listing its namespace) is
    // admitted all the same; the outage is logged once at WARN.
    let plain: Pod = serde_json::from_value(json!({
        "metadata": {"name": "plain-while-down"},
        "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &plain).await.unwrap();
    let log = std::fs::read_to_string(&system.webhooks[0].0.log).unwrap();
    assert_eq!(
        log[logged_before..]
            .matches("quota-state unavailable: pods no quota concerns are admitted")
            .count(),
        1,
        "one WARN line per outage"
    );

    // Restarted on the same address with empty memory: it rebuilds the usage (100 CPUs) from
    // the pod list, takes the Lease again, and answers.
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    let _qs = spawn_quota_state(&opts, port).unwrap();
    callers_are_authenticated(&env.client, &opts, &url, &quota_name, &env.ns).await;
    let msg = eventually(Duration::from_secs(60), || async {
        refusal(&pods, &pod("after-restart", &quota_name, 1))
            .await
            .and_then(|m| {
                if m.contains("exceeded quota") {
                    Ok(m)
                } else {
                    Err(m)
                }
            })
    })
    .await;
    assert!(msg.contains("used: cpu=100, limited: cpu=100"), "{msg}");
    pods.delete("late", &DeleteParams::default()).await.unwrap();
    eventually(Duration::from_secs(20), || async {
        pods.create(
            &PostParams::default(),
            &pod("after-restart", &quota_name, 1),
        )
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
    })
    .await;
}

/// Appends each new value of `name`'s child-request annotation to `shown`.
async fn watch_usage(quotas: Api<DynamicObject>, name: String, shown: Arc<Mutex<Vec<String>>>) {
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let mut last = None;
    let mut events = std::pin::pin!(watcher::watcher(quotas, config).applied_objects());
    while let Some(Ok(q)) = events.next().await {
        let v = q
            .metadata
            .annotations
            .unwrap_or_default()
            .get(CHILD_REQUEST)
            .cloned();
        if v != last {
            if let Some(v) = &v {
                shown.lock().unwrap().push(v.clone());
            }
            last = v;
        }
    }
}

/// A client of the real quota-state binary presenting `client` (or no certificate).
fn grpc_client(
    url: &str,
    client: Option<&admission_kit::server::mtls::MtlsFiles>,
    server_ca: &std::path::Path,
) -> QuotaStateClient<tonic::transport::Channel> {
    let cfg = match client {
        Some(files) => {
            admission_kit::server::mtls::client(files.clone(), Duration::from_secs(1)).unwrap()
        }
        None => admission_kit::server::mtls::client_without_certificate(server_ca).unwrap(),
    };
    let endpoint = tonic::transport::Endpoint::from_shared(url.to_owned()).unwrap();
    QuotaStateClient::new(
        quota_protocol::channel::mtls_channel(endpoint, cfg.source(), "quota-state").unwrap(),
    )
}

/// Every RPC of the real binary with the wrong client certificate, none, or another identity is
/// refused; with scheduling-webhook's certificate a negative amount is refused.
async fn callers_are_authenticated(
    client: &kube::Client,
    opts: &Options,
    url: &str,
    quota: &str,
    ns: &str,
) {
    use quota_protocol::proto::{
        AdmitPodRequest, Amount, LookupRequest, ReleaseRequest, ValidateQuotaRequest,
    };
    let webhook = testenv::system::quota_state_client_files(client, opts)
        .await
        .unwrap();
    let rogue_dir = opts.dir.join("rogue");
    std::fs::create_dir_all(&rogue_dir).unwrap();
    let rogue_ca = admission_kit::server::mtls::Pki::new("rogue CA").unwrap();
    let mut rogue = rogue_ca
        .write(
            &rogue_dir,
            "rogue",
            &["scheduling-webhook".into()],
            false,
            true,
        )
        .unwrap();
    rogue.ca = webhook.ca.clone();
    let admit = |milli: i64| AdmitPodRequest {
        namespace: ns.into(),
        name: "direct".into(),
        quota_label: quota.into(),
        check_admission: true,
        requests: [(
            "cpu".to_owned(),
            Amount {
                milli,
                ..Amount::default()
            },
        )]
        .into(),
        ..AdmitPodRequest::default()
    };
    for (what, files) in [
        ("no certificate", None),
        ("a rogue CA's certificate", Some(&rogue)),
    ] {
        let mut c = grpc_client(url, files, &webhook.ca);
        let codes = [
            c.admit_pod(admit(1000)).await.map(|_| ()),
            c.release(ReleaseRequest {
                namespace: ns.into(),
                name: "p-0".into(),
                ..ReleaseRequest::default()
            })
            .await
            .map(|_| ()),
            c.lookup(LookupRequest::default()).await.map(|_| ()),
            c.validate_quota(ValidateQuotaRequest::default())
                .await
                .map(|_| ()),
        ];
        for r in codes {
            assert!(r.is_err(), "{what}: a call was answered");
        }
    }
    let mut c = grpc_client(url, Some(&webhook), &webhook.ca);
    let neg = eventually(Duration::from_secs(30), || {
        let mut c = c.clone();
        let req = admit(-5_000_000);
        async move {
            c.admit_pod(req)
                .await
                .map(|r| r.into_inner())
                .map_err(|e| e.to_string())
        }
    })
    .await;
    assert_eq!(
        (neg.allowed, neg.message.as_str()),
        (
            false,
            format!("pod {ns}/direct: cpu=-5k is negative").as_str()
        )
    );
    let denied = c
        .lookup(LookupRequest {
            names: vec!["bad name".into()],
            namespace: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(denied.code(), tonic::Code::InvalidArgument);
}
