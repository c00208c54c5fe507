//! `quota-state`: the gRPC service with the standard health service. It reports SERVING only
//! after the initial lists of ElasticQuotas and Pods are in.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use quota_state::ledger::Ledger;
use quota_state::proto::quota_state_server::QuotaStateServer;

#[derive(Parser, Debug)]
#[command(
    name = "quota-state",
    about = "ElasticQuota tree and usage in memory, with atomic check-and-reserve over gRPC."
)]
struct Args {
    /// gRPC listen address.
    #[arg(long, env = "QUOTA_STATE_LISTEN", default_value = "0.0.0.0:9090")]
    listen: SocketAddr,
    /// How long a reservation waits for its pod to appear before it expires (seconds).
    #[arg(long, env = "QUOTA_STATE_RESERVATION_TTL", default_value_t = 30)]
    reservation_ttl_secs: u64,
    /// Hold a coordination.k8s.io Lease so that of several replicas only one (the leader) is
    /// SERVING, and so receives the admissions; the others keep their ledgers warm.
    #[arg(long, env = "QUOTA_STATE_LEADER_ELECTION", default_value_t = true, action = clap::ArgAction::Set)]
    leader_election: bool,
    /// Lease name.
    #[arg(long, env = "QUOTA_STATE_LEASE_NAME", default_value = "quota-state")]
    lease_name: String,
    /// Lease namespace (the pod's own, from the downward API, in a cluster).
    #[arg(long, env = "POD_NAMESPACE", default_value = "default")]
    lease_namespace: String,
    /// This replica's identity in the Lease.
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Benchmarks only: fill the ledger with this many synthetic quotas (100 per parent) instead
    /// of watching a cluster.
    #[arg(long, default_value_t = 0)]
    synthetic_quotas: usize,
    /// Benchmarks only: and this many synthetic running pods spread over them.
    #[arg(long, default_value_t = 0)]
    synthetic_pods: usize,
}

async fn shutdown() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {},
                _ = tokio::signal::ctrl_c() => {},
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().json().init();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let args = Args::parse();
    let ledger = Arc::new(Ledger::new(Duration::from_secs(args.reservation_ttl_secs)));
    let leader = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let (quotas_ready, pods_ready) = if args.synthetic_quotas > 0 {
        quota_state::synthetic::fill(&ledger, args.synthetic_quotas, args.synthetic_pods);
        let done = Arc::new(std::sync::atomic::AtomicBool::new(true));
        (done.clone(), done)
    } else {
        let client = kube::Client::try_default().await.context(
            "quota-state watches ElasticQuotas and Pods: set KUBECONFIG or run in a cluster",
        )?;
        if args.leader_election {
            leader.store(false, Ordering::Release);
            let identity = args
                .identity
                .clone()
                .or_else(|| std::env::var("HOSTNAME").ok())
                .unwrap_or_else(|| format!("quota-state-{}", std::process::id()));
            let manager =
                kube_lease_manager::LeaseManagerBuilder::new(client.clone(), &args.lease_name)
                    .with_namespace(&args.lease_namespace)
                    .with_identity(identity.clone())
                    .with_duration(15)
                    .with_grace(5)
                    .build()
                    .await
                    .context("cannot set up leader election")?;
            let (mut channel, _task) = manager.watch().await;
            let flag = leader.clone();
            tokio::spawn(async move {
                loop {
                    let is_leader = *channel.borrow_and_update();
                    flag.store(is_leader, Ordering::Release);
                    tracing::info!(identity = %identity, leader = is_leader, "leadership");
                    if channel.changed().await.is_err() {
                        flag.store(false, Ordering::Release);
                        break;
                    }
                }
            });
        }
        quota_state::feed::start(client, ledger.clone())
    };
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_not_serving::<QuotaStateServer<quota_state::Service>>()
        .await;
    // SERVING only while the initial lists are in and this replica leads; calls are answered
    // only then.
    let serving_flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = serving_flag.clone();
    tokio::spawn(async move {
        let mut serving = false;
        loop {
            let now = quotas_ready.load(Ordering::Acquire)
                && pods_ready.load(Ordering::Acquire)
                && leader.load(Ordering::Acquire);
            if now != serving {
                serving = now;
                flag.store(serving, Ordering::Release);
                if serving {
                    reporter
                        .set_serving::<QuotaStateServer<quota_state::Service>>()
                        .await;
                } else {
                    reporter
                        .set_not_serving::<QuotaStateServer<quota_state::Service>>()
                        .await;
                }
                tracing::info!(serving, "readiness changed");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    tracing::info!(listen = %args.listen, "starting");
    tonic::transport::Server::builder()
        .add_service(health)
        .add_service(QuotaStateServer::new(
            quota_state::Service::new(ledger).with_serving(serving_flag),
        ))
        .serve_with_shutdown(args.listen, shutdown())
        .await?;
    Ok(())
}
