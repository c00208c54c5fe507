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
    let (quotas_ready, pods_ready) = if args.synthetic_quotas > 0 {
        quota_state::synthetic::fill(&ledger, args.synthetic_quotas, args.synthetic_pods);
        let done = Arc::new(std::sync::atomic::AtomicBool::new(true));
        (done.clone(), done)
    } else {
        let client = kube::Client::try_default().await.context(
            "quota-state watches ElasticQuotas and Pods: set KUBECONFIG or run in a cluster",
        )?;
        quota_state::feed::start(client, ledger.clone())
    };
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_not_serving::<QuotaStateServer<quota_state::Service>>()
        .await;
    tokio::spawn(async move {
        while !(quotas_ready.load(Ordering::Acquire) && pods_ready.load(Ordering::Acquire)) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        reporter
            .set_serving::<QuotaStateServer<quota_state::Service>>()
            .await;
        tracing::info!("initial lists in: serving");
    });
    tracing::info!(listen = %args.listen, "starting");
    tonic::transport::Server::builder()
        .add_service(health)
        .add_service(QuotaStateServer::new(quota_state::Service::new(ledger)))
        .serve_with_shutdown(args.listen, shutdown())
        .await?;
    Ok(())
}
