//! The gRPC service on loopback: AdmitPod reserves and refuses parent quotas, Release frees,
//! Lookup and ValidateQuota read the tree, health answers SERVING.

use std::sync::Arc;
use std::time::Duration;

use admission_kit::go::QuantityFormat;
use quota_state::ledger::{Amount, Amounts, Ledger, QuotaSpec};
use quota_state::proto::quota_state_client::QuotaStateClient;
use quota_state::proto::quota_state_server::QuotaStateServer;
use quota_state::proto::{
    AdmitPodRequest, LookupRequest, Operation, ReleaseRequest, ValidateQuotaRequest,
};

fn cpu(n: i64) -> Amounts {
    Amounts::from([(
        "cpu".to_owned(),
        Amount {
            milli: n * 1000,
            format: QuantityFormat::DecimalSI,
        },
    )])
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
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_serving::<QuotaStateServer<quota_state::Service>>()
        .await;
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(health)
            .add_service(QuotaStateServer::new(quota_state::Service::new(
                ledger.clone(),
            )))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = QuotaStateClient::new(channel.clone());
    let req = |name: &str, n: i64| AdmitPodRequest {
        namespace: "team".into(),
        name: name.into(),
        quota_label: "q".into(),
        check_parent: true,
        check_admission: true,
        requests: [(
            "cpu".to_owned(),
            quota_state::proto::Amount {
                milli: n * 1000,
                format: 0,
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
