//! scheduling-webhook's quota paths against a real quota-state service on a loopback port
//! (plaintext): the pod and workload rules as the webhook runs them, the ledger as quota-state
//! keeps it. Here rather than in the webhook's crate, which links only the quota protocol.

use std::sync::Arc;

use admission_kit::cluster::state::StaticState;
use admission_kit::review::envelope::Gvk;
use admission_kit::{Context, Operation, Request, Validator};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use admission_testing::request as req;

fn containers(requests: Value) -> Value {
    json!({"containers": [{"name": "main", "resources": {"requests": requests, "limits": requests}}]})
}

/// A context, and the scheduling webhook's handlers' service asking the quota-state at `url`
/// under `flags` besides.
fn quota_state_at(url: String, flags: &[&str]) -> (Context, Arc<scheduling_webhook::Service>) {
    let app = scheduling_webhook::app();
    let url = format!("--quota-state-url={url}");
    let flags = std::iter::once(url.as_str()).chain(flags.iter().copied());
    let options = scheduling_webhook::options::Options::parse(flags).unwrap();
    let ctx =
        Context::new(Arc::new(StaticState::default())).with_gates(Arc::new(app.gates.clone()));
    (ctx, Arc::new(scheduling_webhook::Service::new(options)))
}

/// Serves `svc` as a plaintext quota-state on a loopback port (as one that predates AdmitPods
/// and CheckWorkload when `older`); a context asking it.
async fn loopback_quota_state(
    svc: quota_state::Service,
    older: bool,
) -> (Context, Arc<scheduling_webhook::Service>) {
    use quota_protocol::proto::quota_state_server::QuotaStateServer;
    // Held from bind to serve: no other socket can take the port in between.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    let server = tonic::transport::Server::builder();
    tokio::spawn(if older {
        server
            .clone()
            .add_service(QuotaStateServer::new(BeforeBatches(svc)))
            .serve_with_incoming(incoming)
    } else {
        server
            .clone()
            .add_service(QuotaStateServer::new(svc))
            .serve_with_incoming(incoming)
    });
    quota_state_at(format!("http://{addr}"), &[])
}

/// quota-state as it was before AdmitPods: the method unknown.
struct BeforeBatches(quota_state::Service);

#[tonic::async_trait]
impl quota_protocol::proto::quota_state_server::QuotaState for BeforeBatches {
    async fn admit_pod(
        &self,
        r: tonic::Request<quota_protocol::proto::AdmitPodRequest>,
    ) -> Result<tonic::Response<quota_protocol::proto::AdmitPodResponse>, tonic::Status> {
        self.0.admit_pod(r).await
    }
    async fn admit_pods(
        &self,
        _: tonic::Request<quota_protocol::proto::AdmitPodsRequest>,
    ) -> Result<tonic::Response<quota_protocol::proto::AdmitPodsResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented("unknown method AdmitPods"))
    }
    async fn release(
        &self,
        r: tonic::Request<quota_protocol::proto::ReleaseRequest>,
    ) -> Result<tonic::Response<quota_protocol::proto::ReleaseResponse>, tonic::Status> {
        self.0.release(r).await
    }
    async fn lookup(
        &self,
        r: tonic::Request<quota_protocol::proto::LookupRequest>,
    ) -> Result<tonic::Response<quota_protocol::proto::LookupResponse>, tonic::Status> {
        self.0.lookup(r).await
    }
    async fn validate_quota(
        &self,
        r: tonic::Request<quota_protocol::proto::ValidateQuotaRequest>,
    ) -> Result<tonic::Response<quota_protocol::proto::ValidateQuotaResponse>, tonic::Status> {
        self.0.validate_quota(r).await
    }
    async fn check_workload(
        &self,
        _: tonic::Request<quota_protocol::proto::CheckWorkloadRequest>,
    ) -> Result<tonic::Response<quota_protocol::proto::CheckWorkloadResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented("unknown method CheckWorkload"))
    }
}

/// WQ through a plaintext quota-state on loopback: the current one judges the workload against
/// the usage it holds (a pod admitted and reserved counts); an older one, without
/// CheckWorkload, leaves it admitted with a warning; none at all likewise, counted as an outage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workloads_through_quota_state_current_older_and_absent() {
    use quota_state::ledger::{Amount, Ledger, QuotaSpec};
    let gpus = |n: i128| -> quota_state::ledger::Amounts {
        [(
            "nvidia.com/gpu".to_owned(),
            Amount {
                nano: n * 1_000_000_000,
                format: admission_kit::compat::go::QuantityFormat::DecimalSI,
            },
        )]
        .into()
    };
    let job = |workers: u32| {
        let t = json!({"spec": {"containers": [{"name": "m", "image": "i",
            "resources": {"requests": {"nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}}]}});
        json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "llama-ft", "namespace": "team-a"},
            "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": workers, "template": t}}}})
    };
    let review = |o: Value| {
        let mut r = req::<Value>("pytorchjobs", Operation::Create, o, None);
        r.kind = Gvk {
            group: "kubeflow.org".into(),
            version: "v1".into(),
            kind: "PyTorchJob".into(),
        };
        r.namespace = Some("team-a".into());
        r
    };
    for older in [false, true] {
        let ledger = Arc::new(Ledger::new(std::time::Duration::from_secs(30)));
        ledger.upsert_quota(QuotaSpec::simple("team-a", "team-a", None, gpus(32)));
        ledger.observe_pod("team-a", "running", "team-a", gpus(24));
        let svc = quota_state::Service::new(
            ledger.clone(),
            quota_state::auth::Policy::Anyone,
            quota_state::metrics::Metrics::new().unwrap(),
        );
        let (c, webhook) = loopback_quota_state(svc, older).await;
        let validator = scheduling_webhook::workload::WorkloadValidator(webhook);
        let v = validator.validate_async(&review(job(8)), &c).await;
        let w = validator.validate_async(&review(job(2)), &c).await;
        if older {
            assert!(v.allowed() && w.allowed());
            assert!(
                v.warnings[0].contains("an older version"),
                "{:?}",
                v.warnings
            );
        } else {
            let (rule, status) = v.refusal.clone().unwrap();
            assert_eq!(
                (rule, status.message.as_str()),
                (
                    "WQ-2",
                    "PyTorchJob team-a/llama-ft needs nvidia.com/gpu=64 (Worker 8×8); quota team-a allows at most nvidia.com/gpu=32"
                )
            );
            assert!(w.allowed());
            assert_eq!(
                w.warnings,
                [
                    "WQ-3: PyTorchJob team-a/llama-ft needs nvidia.com/gpu=16 (Worker 2×8); quota team-a has nvidia.com/gpu=8 free now: some of its pods will be refused until quota frees up"
                ]
            );
            assert_eq!(
                ledger.reservations(),
                0,
                "a workload check reserves nothing"
            );
        }
    }
    // Nobody listening: admitted, with a warning (WQ is registered Ignore in any case).
    let (c, webhook) = quota_state_at(
        "http://127.0.0.1:9".into(),
        &["--quota-state-timeout-ms=300"],
    );
    let v = scheduling_webhook::workload::WorkloadValidator(webhook)
        .validate_async(&review(job(8)), &c)
        .await;
    assert!(v.allowed());
    assert!(
        v.warnings[0].contains("quota-state unavailable"),
        "{:?}",
        v.warnings
    );
}

/// Twelve pods of one CPU validated at once against a quota of ten, through a plaintext
/// quota-state on loopback, current and older: exactly ten admitted, the others refused by
/// PV-4. The current one gets them in fewer calls than pods; the older one one by one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_pods_through_quota_state_are_admitted_exactly_up_to_the_quota() {
    use quota_state::ledger::{Amount, Ledger, QuotaSpec};
    for older in [false, true] {
        let ledger = Arc::new(Ledger::new(std::time::Duration::from_secs(30)));
        let ten = [(
            "cpu".to_owned(),
            Amount {
                nano: 10_000_000_000,
                format: admission_kit::compat::go::QuantityFormat::DecimalSI,
            },
        )]
        .into();
        ledger.upsert_quota(QuotaSpec::simple("q", "team", None, ten));
        let metrics = quota_state::metrics::Metrics::new().unwrap();
        let svc = quota_state::Service::new(
            ledger.clone(),
            quota_state::auth::Policy::Anyone,
            metrics.clone(),
        );
        let (c, webhook) = loopback_quota_state(svc, older).await;
        let validator = scheduling_webhook::pod_validate::PodValidator(webhook);
        assert!(validator.waits(&c));
        let requests: Vec<Request<Pod>> = (0..12)
            .map(|i| {
                let p = json!({"metadata": {"name": format!("p{i}"), "namespace": "team",
                    "labels": {"quota.scheduling.koordinator.sh/name": "q"}},
                    "spec": containers(json!({"cpu": "1"}))});
                let mut r = req::<Pod>("pods", Operation::Create, p, None);
                r.namespace = Some("team".into());
                r
            })
            .collect();
        let verdicts =
            futures::future::join_all(requests.iter().map(|r| validator.validate_async(r, &c)))
                .await;
        let refused: Vec<String> = verdicts
            .iter()
            .filter_map(|v| v.refusal.as_ref())
            .map(|(rule, s)| format!("{rule} {}", s.message))
            .collect();
        assert_eq!(
            verdicts.len() - refused.len(),
            10,
            "older: {older}, {refused:?}"
        );
        assert!(
            refused
                .iter()
                .all(|r| r.starts_with("PV-4 ") && r.contains("exceeded quota")),
            "{refused:?}"
        );
        assert_eq!(ledger.reservations(), 10);
        let text = String::from_utf8(metrics.render()).unwrap();
        let calls = |method: &str| {
            text.lines()
                .find(|l| {
                    l.starts_with("quota_state_calls_total{")
                        && l.contains(&format!("method=\"{method}\""))
                        && l.contains("code=\"Ok\"")
                })
                .and_then(|l| l.rsplit(' ').next())
                .and_then(|n| n.parse::<u32>().ok())
                .unwrap_or(0)
        };
        if older {
            assert_eq!(calls("AdmitPod"), 12, "{text}");
        } else {
            assert_eq!(calls("AdmitPod"), 0, "{text}");
            assert!((1..12).contains(&calls("AdmitPods")), "{text}");
        }
    }
}
