//! The gRPC service on loopback: AdmitPod reserves, Release frees, health answers SERVING.

use std::sync::Arc;
use std::time::Duration;

use admission_kit::go::QuantityFormat;
use quota_state::ledger::{Amount, Amounts, Ledger, QuotaSpec};
use quota_state::proto::quota_state_client::QuotaStateClient;
use quota_state::proto::quota_state_server::QuotaStateServer;
use quota_state::proto::{AdmitPodRequest, ReleaseRequest};

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
    ledger.upsert_quota(QuotaSpec {
        name: "q".into(),
        namespace: "team".into(),
        parent: None,
        max: cpu(2),
        limit: cpu(2),
        namespaces: Vec::new(),
    });
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
        quota: "q".into(),
        requests: [(
            "cpu".to_owned(),
            quota_state::proto::Amount {
                milli: n * 1000,
                format: 0,
            },
        )]
        .into(),
        dry_run: false,
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
