//! The gRPC service on loopback: AdmitPod reserves and refuses parent quotas, Release frees,
//! Lookup and ValidateQuota read the tree, health answers SERVING.

use std::sync::Arc;
use std::time::Duration;

use admission_kit::compat::go::QuantityFormat;
use admission_kit::server::mtls::Pki;
use quota_protocol::proto::quota_state_client::QuotaStateClient;
use quota_protocol::proto::quota_state_server::QuotaStateServer;
use quota_protocol::proto::{
    AdmitPodRequest, AdmitPodsRequest, CheckWorkloadRequest, LookupRequest, Operation,
    ReleaseRequest, ValidateQuotaRequest,
};
use quota_state::auth::Policy;
use quota_state::ledger::{Amount, Amounts, Ledger, QuotaSpec};
use quota_state::metrics::Metrics;

fn cpu(n: i64) -> Amounts {
    Amounts::from([(
        "cpu".to_owned(),
        Amount {
            nano: i128::from(n) * 1_000_000_000,
            format: QuantityFormat::DecimalSI,
        },
    )])
}

/// quota-state served over mutual TLS on loopback, with a CA of its own.
struct Served {
    addr: std::net::SocketAddr,
    pki: Pki,
    dir: tempfile::TempDir,
    metrics: Metrics,
}

async fn serve(ledger: Arc<Ledger>, allowed: &[&str]) -> Served {
    admission_kit::server::tls::install_crypto_provider();
    let dir = tempfile::tempdir().unwrap();
    let pki = Pki::new("quota-state test CA").unwrap();
    let files = pki
        .write(dir.path(), "server", &["quota-state".into()], true, false)
        .unwrap();
    let tls = admission_kit::server::mtls::server(files, Duration::from_secs(1)).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_serving::<QuotaStateServer<quota_state::Service>>()
        .await;
    let metrics = Metrics::new().unwrap();
    let policy = Policy::Names(allowed.iter().map(|s| s.to_string()).collect());
    tokio::spawn(
        quota_state::grpc_server()
            .add_service(health)
            .add_service(QuotaStateServer::new(quota_state::Service::new(
                ledger,
                policy,
                metrics.clone(),
            )))
            .serve_with_incoming(quota_state::auth::incoming(listener, tls, metrics.clone())),
    );
    Served {
        addr,
        pki,
        dir,
        metrics,
    }
}

impl Served {
    /// A client presenting a certificate for `name` issued by `pki` (or none).
    fn client_with(
        &self,
        pki: Option<&Pki>,
        name: &str,
    ) -> QuotaStateClient<tonic::transport::Channel> {
        let cfg = match pki {
            Some(pki) => {
                let mut files = pki
                    .write(self.dir.path(), name, &[name.to_owned()], false, true)
                    .unwrap();
                // Trust the server's CA whoever issued the client certificate.
                files.ca = self.dir.path().join("server-ca.crt");
                admission_kit::server::mtls::client(files, Duration::from_secs(1)).unwrap()
            }
            None => admission_kit::server::mtls::client_without_certificate(
                &self.dir.path().join("server-ca.crt"),
            )
            .unwrap(),
        };
        let endpoint =
            tonic::transport::Endpoint::from_shared(format!("https://{}", self.addr)).unwrap();
        QuotaStateClient::new(
            quota_protocol::channel::mtls_channel(endpoint, cfg.source(), "quota-state").unwrap(),
        )
    }

    fn client(&self, name: &str) -> QuotaStateClient<tonic::transport::Channel> {
        self.client_with(Some(&self.pki), name)
    }
}

#[tokio::test]
async fn admit_release_and_health_over_grpc() {
    let ledger = Arc::new(Ledger::new(Duration::from_secs(30)));
    let mut parent = QuotaSpec::simple("p", "team", None, cpu(10));
    parent.info.is_parent = true;
    parent.info.tree_id = "t1".into();
    ledger.upsert_quota(parent);
    let mut q = QuotaSpec::simple("q", "team", Some("p"), cpu(2));
    q.info.tree_id = "t1".into();
    q.namespaces = vec!["apps".into()];
    ledger.upsert_quota(q);
    let served = serve(ledger.clone(), &["scheduling-webhook"]).await;
    let endpoint =
        tonic::transport::Endpoint::from_shared(format!("https://{}", served.addr)).unwrap();
    let files = served
        .pki
        .write(
            served.dir.path(),
            "webhook",
            &["scheduling-webhook".into()],
            false,
            true,
        )
        .unwrap();
    let cfg = admission_kit::server::mtls::client(files, Duration::from_secs(1)).unwrap();
    let channel =
        quota_protocol::channel::mtls_channel(endpoint, cfg.source(), "quota-state").unwrap();
    let mut client = QuotaStateClient::new(channel.clone());
    let req = |name: &str, n: i64| AdmitPodRequest {
        namespace: "team".into(),
        name: name.into(),
        quota_label: "q".into(),
        check_parent: true,
        check_admission: true,
        requests: [(
            "cpu".to_owned(),
            quota_protocol::proto::Amount {
                milli: n * 1000,
                ..Default::default()
            },
        )]
        .into(),
        ..AdmitPodRequest::default()
    };
    let a = client.admit_pod(req("a", 2)).await.unwrap().into_inner();
    assert!(a.allowed, "{}", a.message);
    let b = client.admit_pod(req("b", 1)).await.unwrap().into_inner();
    assert!(!b.allowed);
    assert_eq!(
        b.message,
        "exceeded quota: team/q, requested: cpu=1, used: cpu=2, limited: cpu=2"
    );
    client
        .release(ReleaseRequest {
            namespace: "team".into(),
            name: "a".into(),
            ..ReleaseRequest::default()
        })
        .await
        .unwrap();
    assert!(
        client
            .admit_pod(req("b", 1))
            .await
            .unwrap()
            .into_inner()
            .allowed
    );

    let on_parent = client
        .admit_pod(AdmitPodRequest {
            quota_label: "p".into(),
            ..req("c", 1)
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (
            on_parent.allowed,
            on_parent.rule.as_str(),
            on_parent.message.as_str()
        ),
        (
            false,
            "PV-3",
            "pod can not be linked to a parentQuotaGroup,quota:p, pod:c"
        )
    );
    let unlabelled = client
        .admit_pod(AdmitPodRequest {
            namespace: "apps".into(),
            quota_label: String::new(),
            ..req("d", 0)
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(unlabelled.quota, "q", "QN-4: the namespace binding");

    let l = client
        .lookup(LookupRequest {
            names: vec!["p".into(), "nope".into()],
            namespace: "apps".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(l.bound, "q");
    assert!(!l.self_named);
    let names: Vec<(&str, bool, &str)> = l
        .quotas
        .iter()
        .map(|q| (q.name.as_str(), q.is_parent, q.tree_id.as_str()))
        .collect();
    assert_eq!(
        names,
        [("p", true, "t1"), ("q", false, "t1")],
        "the asked quota that exists, then the namespace's"
    );

    let delete_parent = client
        .validate_quota(ValidateQuotaRequest {
            operation: Operation::Delete as i32,
            object: br#"{"metadata":{"name":"p","namespace":"team"},"spec":{}}"#.to_vec(),
            ..ValidateQuotaRequest::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (delete_parent.allowed, delete_parent.rule.as_str()),
        (false, "QV-D3")
    );
    assert_eq!(
        delete_parent.message,
        "delete quota failed, quota p has 1 child quotas"
    );
    assert_eq!(delete_parent.field, "metadata.name");
    // A refusal about a field names it: a child of a quota that is not there.
    let orphan = client
        .validate_quota(ValidateQuotaRequest {
            operation: Operation::Create as i32,
            object: br#"{"metadata":{"name":"o","namespace":"other","labels":{"quota.scheduling.koordinator.sh/parent":"nobody"}},"spec":{"max":{"cpu":"1"},"min":{"cpu":"1"}}}"#.to_vec(),
            ..ValidateQuotaRequest::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (orphan.allowed, orphan.rule.as_str(), orphan.field.as_str()),
        (
            false,
            "QV-T",
            "metadata.labels[quota.scheduling.koordinator.sh/parent]"
        ),
        "{orphan:?}"
    );
    let garbage = client
        .validate_quota(ValidateQuotaRequest {
            operation: Operation::Create as i32,
            object: b"{not json".to_vec(),
            ..ValidateQuotaRequest::default()
        })
        .await;
    assert_eq!(
        garbage.map(|_| ()).map_err(|s| s.code()),
        Err(tonic::Code::InvalidArgument)
    );

    let mut h = tonic_health::pb::health_client::HealthClient::new(channel);
    let status = h
        .check(tonic_health::pb::HealthCheckRequest {
            service: "quotastate.v1.QuotaState".into(),
        })
        .await
        .unwrap()
        .into_inner()
        .status;
    assert_eq!(
        status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );
}

fn admit(ns: &str, name: &str, quota: &str, cpu_milli: i128) -> AdmitPodRequest {
    admit_nano(ns, name, quota, cpu_milli * 1_000_000)
}

/// Pod `name` in namespace `team`, quota `q`, asking for `cpu` as the wire carries it.
fn admit_wire(name: &str, cpu: quota_protocol::proto::Amount) -> AdmitPodRequest {
    AdmitPodRequest {
        requests: [("cpu".to_owned(), cpu)].into(),
        ..admit_nano("team", name, "q", 0)
    }
}

fn admit_nano(ns: &str, name: &str, quota: &str, cpu_nano: i128) -> AdmitPodRequest {
    let a = quota_protocol::wire::wire_amount(&Amount {
        nano: cpu_nano,
        format: QuantityFormat::DecimalSI,
    });
    AdmitPodRequest {
        namespace: ns.into(),
        name: name.into(),
        quota_label: quota.into(),
        check_admission: true,
        requests: [("cpu".to_owned(), a)].into(),
        ..AdmitPodRequest::default()
    }
}

#[tokio::test]
async fn only_the_allowed_identity_over_mutual_tls_is_answered() {
    let ledger = Arc::new(Ledger::new(Duration::from_secs(30)));
    ledger.upsert_quota(QuotaSpec::simple("q", "team", None, cpu(10)));
    let served = serve(ledger.clone(), &["scheduling-webhook", "second-webhook"]).await;
    let every_call = |mut c: QuotaStateClient<tonic::transport::Channel>| async move {
        vec![
            c.admit_pod(admit("team", "a", "q", 1000)).await.map(|_| ()),
            c.admit_pods(AdmitPodsRequest {
                pods: vec![admit("team", "b", "q", 1000)],
            })
            .await
            .map(|_| ()),
            c.release(ReleaseRequest {
                namespace: "team".into(),
                name: "a".into(),
                ..ReleaseRequest::default()
            })
            .await
            .map(|_| ()),
            c.lookup(LookupRequest::default()).await.map(|_| ()),
            c.validate_quota(ValidateQuotaRequest::default())
                .await
                .map(|_| ()),
            c.check_workload(workload("team", "q", 1000))
                .await
                .map(|_| ()),
        ]
    };
    // No client certificate, or one from another CA: the handshake fails, no call gets through.
    let rogue = Pki::new("rogue CA").unwrap();
    for client in [
        served.client_with(None, "scheduling-webhook"),
        served.client_with(Some(&rogue), "scheduling-webhook"),
    ] {
        for r in every_call(client).await {
            let code = r.unwrap_err().code();
            assert!(
                matches!(code, tonic::Code::Unavailable | tonic::Code::Unknown),
                "{code:?}"
            );
        }
    }
    // A certificate from the right CA for another identity: every call PERMISSION_DENIED.
    for r in every_call(served.client("registry-webhook")).await {
        assert_eq!(r.unwrap_err().code(), tonic::Code::PermissionDenied);
    }
    assert_eq!(ledger.reservations(), 0);
    let text = String::from_utf8(served.metrics.render()).unwrap();
    assert!(
        text.contains(r#"quota_state_refused_calls_total{method="AdmitPod",reason="forbidden"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"quota_state_refused_calls_total{method="handshake",reason="tls"}"#),
        "{text}"
    );

    // The allowed identity reserves; another allowed identity cannot release its reservation.
    let mut webhook = served.client("scheduling-webhook");
    let ok = webhook
        .admit_pod(admit("team", "a", "q", 6000))
        .await
        .unwrap()
        .into_inner();
    assert!(ok.allowed, "{}", ok.message);
    let mut second = served.client("second-webhook");
    second
        .release(ReleaseRequest {
            namespace: "team".into(),
            name: "a".into(),
            ..ReleaseRequest::default()
        })
        .await
        .unwrap();
    assert_eq!(ledger.reservations(), 1, "not released by another caller");
    webhook
        .release(ReleaseRequest {
            namespace: "team".into(),
            name: "a".into(),
            ..ReleaseRequest::default()
        })
        .await
        .unwrap();
    assert_eq!(ledger.reservations(), 0, "released by its owner");
}

fn workload(ns: &str, quota: &str, cpu_milli: i64) -> CheckWorkloadRequest {
    CheckWorkloadRequest {
        namespace: ns.into(),
        quota_label: quota.into(),
        name: "job".into(),
        requests: [(
            "cpu".to_owned(),
            quota_protocol::proto::Amount {
                milli: cpu_milli,
                ..Default::default()
            },
        )]
        .into(),
        ..CheckWorkloadRequest::default()
    }
}

/// CheckWorkload over the wire: WQ-2 and WQ-3 answers with their amounts, nothing reserved,
/// each answer counted; malformed input refused as for the other calls.
#[tokio::test]
async fn check_workload_answers_fits_and_refuses_bad_input() {
    use quota_protocol::proto::WorkloadFit;
    let ledger = Arc::new(Ledger::new(Duration::from_secs(30)));
    ledger.upsert_quota(QuotaSpec::simple("q", "team", None, cpu(10)));
    ledger.observe_pod("team", "running", "q", cpu(8));
    let served = serve(ledger.clone(), &["scheduling-webhook"]).await;
    let mut c = served.client("scheduling-webhook");
    let ask = |m| {
        let mut c = c.clone();
        async move { c.check_workload(m).await.map(|r| r.into_inner()) }
    };
    let never = ask(workload("team", "q", 12_000)).await.unwrap();
    assert_eq!(never.fit, WorkloadFit::Never as i32);
    assert_eq!(never.limiting_quota, "q");
    assert_eq!(never.amounts["cpu"].milli, 10_000);
    let not_now = ask(workload("team", "q", 3_000)).await.unwrap();
    assert_eq!(not_now.fit, WorkloadFit::NotNow as i32);
    assert_eq!(not_now.amounts["cpu"].milli, 2_000);
    // A scale-up: the increase against what is free, the whole peak against the limit.
    let mut up = workload("team", "q", 2_000);
    up.total = workload("team", "q", 11_000).requests;
    assert_eq!(ask(up).await.unwrap().fit, WorkloadFit::Never as i32);
    assert_eq!(
        ask(workload("team", "q", 2_000)).await.unwrap().fit,
        WorkloadFit::Fits as i32
    );
    assert_eq!(
        ask(workload("team", "", 2_000)).await.unwrap().fit,
        WorkloadFit::Unchecked as i32
    );
    assert_eq!(ledger.reservations(), 0);
    for bad in [
        workload("Team_A", "q", 1),
        workload("team", "not a label!", 1),
        workload("team", "q", -1),
        CheckWorkloadRequest {
            requests: (0..65)
                .map(|i| (format!("r{i}"), quota_protocol::proto::Amount::default()))
                .collect(),
            ..workload("team", "q", 1)
        },
    ] {
        assert_eq!(
            c.check_workload(bad).await.unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
    }
    let text = String::from_utf8(served.metrics.render()).unwrap();
    for fit in ["never", "not_now", "fits", "unchecked"] {
        assert!(
            text.contains(&format!(
                "quota_state_workload_checks_total{{fit=\"{fit}\"}}"
            )),
            "{text}"
        );
    }
}

#[tokio::test]
async fn amounts_are_exact_and_bad_input_is_refused() {
    let ledger = Arc::new(Ledger::new(Duration::from_secs(30)));
    ledger.upsert_quota(QuotaSpec::simple("q", "team", None, cpu(10_000)));
    let served = serve(ledger.clone(), &["scheduling-webhook"]).await;
    let mut c = served.client("scheduling-webhook");
    let ok = c
        .admit_pod(admit("team", "filler", "q", 9_901_000))
        .await
        .unwrap()
        .into_inner();
    assert!(ok.allowed);
    // The overflow pod: a valid quantity whose sum with the usage passes 2^63 thousandths.
    let huge = c
        .admit_pod(admit("team", "huge", "q", 9_223_372_036_854_775_000))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        huge.message,
        "exceeded quota: team/q, requested: cpu=9223372036854775, used: cpu=9901, limited: cpu=10k"
    );
    let more = c
        .admit_pod(admit("team", "next", "q", 100_000))
        .await
        .unwrap()
        .into_inner();
    assert!(!more.allowed, "the quota keeps refusing once full");
    let negative = c
        .admit_pod(admit("team", "neg", "q", -5_000_000))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (negative.allowed, negative.message.as_str()),
        (false, "pod team/neg: cpu=-5k is negative")
    );
    let beyond = c
        .admit_pod(admit("team", "beyond", "q", (1i128 << 100) + 1))
        .await
        .unwrap()
        .into_inner();
    assert!(
        beyond
            .message
            .contains("above the largest amount quota-state counts"),
        "{}",
        beyond.message
    );
    assert_eq!(
        ledger.used("q")["cpu"].milli(),
        9_901_000,
        "nothing else charged"
    );
    for bad in [
        admit("Team", "p", "q", 1),
        admit("team", "p/../x", "q", 1),
        admit_wire(
            "p",
            quota_protocol::proto::Amount {
                format: 9,
                ..Default::default()
            },
        ),
        admit_wire(
            "p",
            quota_protocol::proto::Amount {
                milli: 1,
                sub_milli_nano: 1_000_000,
                ..Default::default()
            },
        ),
    ] {
        assert_eq!(
            c.admit_pod(bad).await.unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
    }
    let many = LookupRequest {
        names: vec!["q".into(); 65],
        namespace: String::new(),
    };
    assert_eq!(
        c.lookup(many).await.unwrap_err().code(),
        tonic::Code::InvalidArgument
    );
}

/// Over the wire: sub-milli requests count exactly (four `500u` pods fill `2m`), and a
/// request from a peer that predates `sub_milli_nano` counts its rounded thousandths.
#[tokio::test]
async fn sub_milli_requests_count_exactly_over_grpc() {
    let ledger = Arc::new(Ledger::new(Duration::from_secs(30)));
    let two_milli = Amounts::from([(
        "cpu".to_owned(),
        Amount::from_milli(2, QuantityFormat::DecimalSI),
    )]);
    ledger.upsert_quota(QuotaSpec::simple("q", "team", None, two_milli));
    let served = serve(ledger.clone(), &["scheduling-webhook"]).await;
    let mut c = served.client("scheduling-webhook");
    for p in ["a", "b", "c"] {
        let r = c
            .admit_pod(admit_nano("team", p, "q", 500_000))
            .await
            .unwrap()
            .into_inner();
        assert!(r.allowed, "{p}: {}", r.message);
    }
    let older_peer = admit_wire(
        "d",
        quota_protocol::proto::Amount {
            milli: 1,
            ..Default::default()
        },
    );
    let r = c.admit_pod(older_peer).await.unwrap().into_inner();
    assert_eq!(
        (r.allowed, r.message.as_str()),
        (
            false,
            "exceeded quota: team/q, requested: cpu=1m, used: cpu=1500u, limited: cpu=2m"
        )
    );
    let r = c
        .admit_pod(admit_nano("team", "e", "q", 500_000))
        .await
        .unwrap()
        .into_inner();
    assert!(r.allowed, "{}", r.message);
    assert_eq!(ledger.used("q")["cpu"].nano, 2_000_000);
}

/// A batch is decided pod by pod exactly as AdmitPod decides each alone, in order: what the
/// batch reserves counts against the pods after it, a bad pod is refused on its own, and a batch
/// over the limit is refused whole.
#[tokio::test]
async fn admit_pods_answers_each_pod_as_admit_pod_would() {
    let pods = || {
        vec![
            admit("team", "a", "q", 4000),
            admit("team", "b", "q", 4000),
            admit("team", "c", "q", 4000),
            admit("team", "Not_A_Name", "q", 1000),
            admit("team", "d", "q", 2000),
        ]
    };
    let batched = Arc::new(Ledger::new(Duration::from_secs(30)));
    let alone = Arc::new(Ledger::new(Duration::from_secs(30)));
    for l in [&batched, &alone] {
        l.upsert_quota(QuotaSpec::simple("q", "team", None, cpu(10)));
    }
    let batch_served = serve(batched.clone(), &["scheduling-webhook"]).await;
    let alone_served = serve(alone.clone(), &["scheduling-webhook"]).await;
    let answers = batch_served
        .client("scheduling-webhook")
        .admit_pods(AdmitPodsRequest { pods: pods() })
        .await
        .unwrap()
        .into_inner()
        .answers;
    let mut one = alone_served.client("scheduling-webhook");
    assert_eq!(answers.len(), 5);
    for (got, pod) in answers.iter().zip(pods()) {
        match one.admit_pod(pod).await {
            Ok(r) => {
                assert_eq!(got.response.as_ref(), Some(&r.into_inner()));
                assert_eq!(got.invalid, "");
            }
            Err(s) => {
                assert_eq!(s.code(), tonic::Code::InvalidArgument);
                assert_eq!(got.response, None);
                assert_eq!(got.invalid, s.message());
            }
        }
    }
    let allowed: Vec<bool> = answers
        .iter()
        .map(|a| a.response.as_ref().is_some_and(|r| r.allowed))
        .collect();
    assert_eq!(allowed, [true, true, false, false, true]);
    assert_eq!(batched.reservations(), 3);
    assert_eq!(alone.reservations(), 3);

    let too_many = (0..65)
        .map(|i| admit("team", &format!("p{i}"), "q", 1))
        .collect();
    let refused = batch_served
        .client("scheduling-webhook")
        .admit_pods(AdmitPodsRequest { pods: too_many })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    assert!(
        refused.message().contains("65 pods"),
        "{}",
        refused.message()
    );
    assert_eq!(
        batched.reservations(),
        3,
        "nothing of a refused batch is reserved"
    );
}

/// A holder of a client key holds at most 64 connections: the next is refused after its
/// handshake, while another identity is still served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_key_holds_a_bounded_number_of_connections() {
    let ledger = Arc::new(Ledger::new(Duration::from_secs(30)));
    ledger.upsert_quota(QuotaSpec::simple("q", "team", None, cpu(10)));
    let served = serve(ledger, &["scheduling-webhook", "second-webhook"]).await;
    let mut held = Vec::new();
    for _ in 0..quota_state::auth::MAX_CONNECTIONS_PER_IDENTITY {
        let mut c = served.client("scheduling-webhook");
        c.lookup(LookupRequest::default()).await.unwrap();
        held.push(c);
    }
    let mut one_more = served.client("scheduling-webhook");
    let code = one_more
        .lookup(LookupRequest::default())
        .await
        .unwrap_err()
        .code();
    // Closed after its handshake: the client sees the connection fail, or its call cancelled.
    assert!(
        matches!(
            code,
            tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Cancelled
        ),
        "{code:?}"
    );
    let mut other = served.client("second-webhook");
    other.lookup(LookupRequest::default()).await.unwrap();
    let text = String::from_utf8(served.metrics.render()).unwrap();
    assert!(
        text.contains(
            r#"quota_state_refused_calls_total{method="handshake",reason="connections"} 1"#
        ),
        "{text}"
    );
    // A connection that ends frees its place.
    drop(held.pop());
    quota_state_eventually(|| async {
        let mut c = served.client("scheduling-webhook");
        c.lookup(LookupRequest::default()).await.map(|_| ())
    })
    .await;
}

/// Retries `f` for up to 5 s.
async fn quota_state_eventually<F, Fut>(mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), tonic::Status>>,
{
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        match f().await {
            Ok(()) => return,
            Err(e) if std::time::Instant::now() > deadline => panic!("{e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}
