//! `quota-state serve`: the gRPC service with the standard health service.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

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
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().json().init();
    let args = Args::parse();
    let ledger = Arc::new(Ledger::new(Duration::from_secs(args.reservation_ttl_secs)));
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_serving::<QuotaStateServer<quota_state::Service>>()
        .await;
    tracing::info!(listen = %args.listen, "serving");
    tonic::transport::Server::builder()
        .add_service(health)
        .add_service(QuotaStateServer::new(quota_state::Service::new(ledger)))
        .serve_with_shutdown(args.listen, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
