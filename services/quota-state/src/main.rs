//! `quota-state`: the gRPC service with the standard health service. It reports SERVING only
//! after the initial lists of ElasticQuotas and Pods are in.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use std::path::PathBuf;

use admission_kit::server::mtls::MtlsFiles;
use anyhow::Context as _;
use clap::Parser;
use quota_protocol::proto::quota_state_server::QuotaStateServer;
use quota_state::auth::Policy;
use quota_state::ledger::{Ledger, ReservationLimits};
use quota_state::metrics::Metrics;

#[derive(Parser, Debug)]
#[command(
    name = "quota-state",
    about = "ElasticQuota tree and usage in memory, with atomic check-and-reserve over gRPC."
)]
struct Args {
    /// Log lines: one JSON object per line (the default), or text for people; traces go to
    /// OTLP when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, as every service's do.
    #[arg(
        long,
        env = "QUOTA_STATE_LOG_FORMAT",
        value_enum,
        default_value = "json"
    )]
    log_format: admission_kit::server::telemetry::LogFormat,
    /// gRPC listen address.
    #[arg(long, env = "QUOTA_STATE_LISTEN", default_value = "0.0.0.0:9090")]
    listen: SocketAddr,
    #[arg(
        long,
        env = "QUOTA_STATE_WORKER_THREADS",
        default_value_t = 1,
        help = admission_kit::server::runtime::WORKER_THREADS_HELP,
    )]
    worker_threads: usize,
    /// How long a reservation waits for its pod to appear in the Pod watch before it expires
    /// (seconds): the longest a forged review's reservation lives. It must cover the rest of the
    /// pod's admission after this answer (the other validating webhooks of the request, which
    /// run beside this one and may take their timeout, 10 s by default) and the API server's
    /// persist and watch latency (at most 0.5 s in the 200-pod burst of
    /// `dev/e2e/tests/up_system.rs`; `quota_state_reservation_backed_seconds` measures it
    /// where it runs). A pod that appears later still counts from then on.
    #[arg(long, env = "QUOTA_STATE_RESERVATION_TTL", default_value_t = 15)]
    reservation_ttl_secs: u64,
    /// Hold a coordination.k8s.io Lease so that of several replicas only one (the leader) is
    /// SERVING, and so receives the admissions; the others keep their ledgers warm.
    #[arg(
        long,
        env = "QUOTA_STATE_LEADER_ELECTION",
        default_value_t = true,
        action = clap::ArgAction::Set,
    )]
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
    /// How long the leader's Lease lasts without renewal (whole seconds, at least 3): after
    /// the leader is lost, the standby takes over within this time, and until then creations
    /// of quota-charged Pods get `--quota-unavailable`'s answer. The leader renews a third of
    /// it before expiry. Shorter means a shorter gap and more Lease writes (one per 2/3 of it).
    #[arg(
        long,
        env = "QUOTA_STATE_LEADER_LEASE_DURATION",
        default_value = "15s",
        value_parser = admission_kit::cli::duration,
    )]
    leader_lease_duration: Duration,
    /// `--tls-mode=files`: PEM certificate served to callers (mutual TLS; reloaded when the
    /// file changes).
    #[arg(long, env = "QUOTA_STATE_TLS_CERT_FILE")]
    tls_cert_file: Option<PathBuf>,
    /// `--tls-mode=files`: PEM private key of `--tls-cert-file`.
    #[arg(long, env = "QUOTA_STATE_TLS_KEY_FILE")]
    tls_key_file: Option<PathBuf>,
    /// `--tls-mode=files`: PEM CA that callers' client certificates must chain to (reloaded
    /// when the file changes).
    #[arg(long, env = "QUOTA_STATE_CLIENT_CA_FILE")]
    client_ca_file: Option<PathBuf>,
    /// Mutual-TLS certificates: from files (above), or managed (`--tls-mode=managed`): a CA of
    /// quota-state's own in a Secret, its serving certificate, and a client certificate for each
    /// `--allowed-clients` identity in the Secret quota-state-client-<identity> (tls.crt,
    /// tls.key, ca.crt), all rotated by the replica holding the certificate Lease.
    #[command(flatten)]
    certs: admission_kit::cli::CertArgs,
    /// Identities allowed to call: a client certificate must carry one of these names (as its
    /// common name, a DNS or a URI subject alternative name). Comma-separated.
    #[arg(
        long,
        env = "QUOTA_STATE_ALLOWED_CLIENTS",
        value_delimiter = ',',
        default_value = "scheduling-webhook"
    )]
    allowed_clients: Vec<String>,
    /// Serve gRPC in plaintext and answer anyone: for benchmarks and local runs only, never in a
    /// cluster (any Pod could then reserve or release quota).
    #[arg(long, env = "QUOTA_STATE_INSECURE_PLAINTEXT")]
    insecure_plaintext: bool,
    /// Probes and Prometheus metrics (`/healthz`, `/readyz`, `/metrics`), plain HTTP.
    #[arg(
        long,
        env = "QUOTA_STATE_METRICS_LISTEN",
        default_value = "0.0.0.0:8080"
    )]
    metrics_listen: SocketAddr,
    /// Outstanding reservations (pods admitted, not yet created) allowed per namespace.
    #[arg(
        long,
        env = "QUOTA_STATE_MAX_RESERVATIONS_PER_NAMESPACE",
        default_value_t = ReservationLimits::default().per_namespace,
    )]
    max_reservations_per_namespace: usize,
    /// Outstanding reservations allowed in all.
    #[arg(
        long,
        env = "QUOTA_STATE_MAX_RESERVATIONS",
        default_value_t = ReservationLimits::default().total,
    )]
    max_reservations: usize,
    /// What pods admitted but not yet seen in the Pod watch may hold of a quota (and of each
    /// ancestor), in percent of its limit per resource: a client that forges reviews holds at
    /// most this share with pods that never come. 100 turns the bound off. One pod larger than
    /// the share still passes while nothing else is outstanding on that quota.
    #[arg(
        long,
        env = "QUOTA_STATE_MAX_UNBACKED_PERCENT",
        default_value_t = ReservationLimits::SERVICE_SHARE_PERMILLE / 10,
        value_parser = clap::value_parser!(u32).range(1..=100),
    )]
    max_unbacked_percent: u32,
    /// The same share for one namespace's outstanding pods on the quota they charge: under a
    /// quota shared by several namespaces, one namespace cannot take what the others need.
    #[arg(
        long,
        env = "QUOTA_STATE_MAX_UNBACKED_PERCENT_PER_NAMESPACE",
        default_value_t = ReservationLimits::SERVICE_SHARE_PERMILLE / 10,
        value_parser = clap::value_parser!(u32).range(1..=100),
    )]
    max_unbacked_percent_per_namespace: u32,
    /// Outstanding reservations allowed to one address that no created pod has vouched for
    /// yet (where the API server presents no client certificate, anyone may post reviews; see
    /// docs/threat-model.md). A trusted address's pod drops those in its way.
    #[arg(
        long,
        env = "QUOTA_STATE_MAX_UNTRUSTED_PER_PEER",
        default_value_t = ReservationLimits::default().untrusted_per_peer,
    )]
    max_untrusted_per_peer: usize,
    /// The same for all such addresses together.
    #[arg(
        long,
        env = "QUOTA_STATE_MAX_UNTRUSTED",
        default_value_t = ReservationLimits::default().untrusted_total,
    )]
    max_untrusted: usize,
    /// What the outstanding reservations of such addresses together may hold of a quota (and
    /// of each ancestor), in percent of its limit per resource.
    #[arg(
        long,
        env = "QUOTA_STATE_MAX_UNTRUSTED_PERCENT",
        default_value_t = ReservationLimits::default().untrusted_share_permille / 10,
        value_parser = clap::value_parser!(u32).range(1..=100),
    )]
    max_untrusted_percent: u32,
    /// Lease (in `--lease-namespace`) where the serving replica remembers the addresses the API
    /// server's pods came from, so that the next leader trusts them from its first answer
    /// (docs/threat-model.md); lifecycle-webhook reads them too. Empty: nothing remembered.
    #[arg(
        long,
        env = "QUOTA_STATE_PEERS_LEASE",
        default_value = admission_kit::cluster::peers::LEASE,
    )]
    peers_lease: String,
    /// Seconds between usage write-back rounds: the serving replica writes each quota's usage
    /// (admitted pods and reservations) to its `child-request` annotation, at most once a round
    /// and only when it changed. 0 turns the write-back off.
    #[arg(long, env = "QUOTA_STATE_USAGE_WRITE_INTERVAL", default_value_t = 10)]
    usage_write_interval_secs: u64,
    /// Quotas written per round at most (the rest wait for the next rounds, in turn).
    #[arg(
        long,
        env = "QUOTA_STATE_USAGE_WRITES_PER_ROUND",
        default_value_t = 100
    )]
    usage_writes_per_round: usize,
    /// Serve a fleet (docs/fleet-quota.md): ElasticQuotas from this cluster (the hub), pods
    /// from every member cluster declared by a Secret labelled
    /// `fleet.admission-webhooks.io/member=true` in `--namespace`/POD_NAMESPACE (a kubeconfig
    /// under `kubeconfig`, the cluster name under `name`, else the Secret's name), watched at
    /// run time. Callers are the members' scheduling-webhooks, each with a client certificate
    /// naming `member-<cluster>` (managed mode issues one per member into
    /// quota-state-client-member-<cluster>), and each acts for its own cluster only.
    /// `--allowed-clients` is then not used.
    #[arg(
        long,
        env = "QUOTA_STATE_FLEET",
        default_value_t = false,
        action = clap::ArgAction::Set,
        num_args = 0..=1,
        default_missing_value = "true",
    )]
    fleet: bool,
    /// In a fleet: how long a member's usage stays in the ledger after its Secret is deleted
    /// (its calls are refused at once). A Secret deleted by mistake and restored within it
    /// loses nothing.
    #[arg(
        long,
        env = "QUOTA_STATE_MEMBER_REMOVAL_GRACE",
        default_value = "10m",
        value_parser = admission_kit::cli::duration,
    )]
    member_removal_grace: Duration,
    /// In a fleet: keep a copy of each member's client Secret in the member itself, as
    /// `namespace/name` (where its scheduling-webhook reads it with
    /// `--quota-state-client-secret`), renewed whenever quota-state renews it; the member's
    /// kubeconfig must then allow writing that Secret. Empty: copy it yourself (and again after
    /// each renewal).
    #[arg(long, env = "QUOTA_STATE_MEMBER_CLIENT_SECRET", default_value = "")]
    member_client_secret: String,
    /// Benchmarks only: fill the ledger with this many synthetic quotas (100 per parent) instead
    /// of watching a cluster (nothing is then rebuilt after a restart). Needs
    /// `--insecure-plaintext`.
    #[cfg(feature = "testing")]
    #[arg(long, default_value_t = 0, requires = "insecure_plaintext")]
    synthetic_quotas: usize,
    /// Benchmarks only: and this many synthetic running pods spread over them.
    #[cfg(feature = "testing")]
    #[arg(long, default_value_t = 0)]
    synthetic_pods: usize,
    /// Benchmarks only: and the pods spread over this many member clusters (`m0`, `m1`, …; a
    /// plaintext caller then acts for the cluster its calls name).
    #[cfg(feature = "testing")]
    #[arg(long, default_value_t = 0)]
    synthetic_members: usize,
}

/// Benchmarks (`--synthetic-*`, with the `testing` feature): fills the ledger instead of
/// watching a cluster; whether it did.
#[cfg(feature = "testing")]
fn fill_synthetic(args: &Args, ledger: &quota_state::ledger::Ledger) -> bool {
    if args.synthetic_quotas == 0 {
        return false;
    }
    quota_state::synthetic::fill_fleet(
        ledger,
        args.synthetic_quotas,
        args.synthetic_pods,
        args.synthetic_members,
    );
    true
}

/// Without the `testing` feature there is nothing to fill.
#[cfg(not(feature = "testing"))]
fn fill_synthetic(_: &Args, _: &quota_state::ledger::Ledger) -> bool {
    false
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

fn main() -> anyhow::Result<()> {
    // Before any thread exists: it may execute the binary again.
    admission_kit::server::trim::tune_malloc();
    let args = Args::parse();
    admission_kit::server::runtime::build(args.worker_threads)
        .context("starting the runtime")?
        .block_on(serve(args))
}

/// Serves with the kit's telemetry (logs, and traces when configured), flushed at the end.
async fn serve(args: Args) -> anyhow::Result<()> {
    use admission_kit::server::telemetry::{LogTarget, Telemetry};
    let telemetry = Telemetry::init("quota-state", args.log_format, LogTarget::Stdout)?;
    let served = serve_with(args).await;
    telemetry.shutdown();
    served
}

async fn serve_with(args: Args) -> anyhow::Result<()> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let ledger = Arc::new(
        Ledger::new(Duration::from_secs(args.reservation_ttl_secs)).with_limits(
            ReservationLimits {
                per_namespace: args.max_reservations_per_namespace,
                total: args.max_reservations,
                quota_share_permille: args.max_unbacked_percent * 10,
                namespace_share_permille: args.max_unbacked_percent_per_namespace * 10,
                untrusted_per_peer: args.max_untrusted_per_peer,
                untrusted_total: args.max_untrusted,
                untrusted_share_permille: args.max_untrusted_percent * 10,
            },
        ),
    );
    // Quota changes rebuild the tree off the admissions' path.
    ledger
        .spawn_rebuilder()
        .context("starting the quota tree's rebuilder thread")?;
    let metrics = Metrics::new().context("metrics")?;
    let members = Arc::new(quota_state::fleet::Members::default());
    // `loaded` gates readiness: a managed pair arrives after start.
    let (tls, loaded): (_, Box<dyn Fn() -> bool + Send + Sync>) = if args.insecure_plaintext {
        tracing::warn!(
            "--insecure-plaintext: gRPC in plaintext, every caller allowed; never do this in a cluster"
        );
        (None, Box::new(|| true))
    } else if args.certs.is_managed() {
        let clients = if args.fleet {
            Vec::new()
        } else {
            args.allowed_clients.clone()
        };
        let mut managed = args
            .certs
            .managed("quota-state", clients)
            .map_err(anyhow::Error::msg)?;
        if args.fleet {
            let m = members.clone();
            managed.more_clients = Some(admission_kit::cluster::managed::ClientSource {
                list: Arc::new(move || m.identities()),
                changed: members.changed.clone(),
            });
        }
        let mtls = admission_kit::cluster::managed::MutualTls::new().context("mutual TLS")?;
        admission_kit::cluster::managed::start(
            managed,
            admission_kit::cluster::registration::Registrar::Off,
            mtls.clone(),
            metrics.registry(),
        )
        .await
        .context("managed certificates")?;
        let config = mtls.config.clone();
        (Some(config), Box::new(move || mtls.loaded()))
    } else {
        let (Some(cert), Some(key), Some(ca)) = (
            &args.tls_cert_file,
            &args.tls_key_file,
            &args.client_ca_file,
        ) else {
            anyhow::bail!(
                "mutual TLS needs --tls-cert-file, --tls-key-file and --client-ca-file (or --tls-mode=managed); --insecure-plaintext only for benchmarks"
            );
        };
        let files = MtlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            ca: ca.clone(),
        };
        let tls = admission_kit::server::mtls::server(files, Duration::from_secs(5))
            .context("mutual TLS")?;
        (Some(tls), Box::new(|| true))
    };
    let policy = match (tls.is_some(), args.fleet) {
        (true, true) => Policy::Fleet(members.clone()),
        (true, false) => Policy::Names(args.allowed_clients.iter().cloned().collect()),
        (false, _) => Policy::Anyone,
    };
    if args.fleet && tls.is_none() {
        anyhow::bail!("--fleet needs mutual TLS: each member is known by its client certificate");
    }
    let leader = Arc::new(std::sync::atomic::AtomicBool::new(true));
    // SERVING: initial lists in, leader, certificate loaded (set below).
    let serving_flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut remember: Option<(kube::Client, quota_state::remembered::LeaseAt)> = None;
    let (quotas_ready, pods_ready) = if fill_synthetic(&args, &ledger) {
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
            admission_kit::cluster::managed::check_lease_owner(
                &client,
                &args.lease_namespace,
                &args.lease_name,
                "quota-state",
            )
            .await
            .map_err(anyhow::Error::msg)
            .context("refusing the leader Lease")?;
            let lease_secs = args.leader_lease_duration.as_secs().max(3);
            let manager =
                kube_lease_manager::LeaseManagerBuilder::new(client.clone(), &args.lease_name)
                    .with_namespace(&args.lease_namespace)
                    .with_identity(identity.clone())
                    .with_duration(lease_secs)
                    .with_grace((lease_secs / 3).max(1))
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
        if !args.peers_lease.is_empty() {
            let at = quota_state::remembered::LeaseAt {
                namespace: args.lease_namespace.clone(),
                name: args.peers_lease.clone(),
            };
            tokio::spawn(quota_state::remembered::run(
                client.clone(),
                ledger.clone(),
                at.clone(),
                serving_flag.clone(),
            ));
            remember = Some((client.clone(), at));
        }
        if args.usage_write_interval_secs > 0 {
            tokio::spawn(quota_state::usage::run(
                client.clone(),
                ledger.clone(),
                quota_state::usage::WriteBack {
                    interval: Duration::from_secs(args.usage_write_interval_secs),
                    per_round: args.usage_writes_per_round.max(1),
                },
                metrics.clone(),
                serving_flag.clone(),
            ));
        }
        if args.fleet {
            let client_secret_copy = match args.member_client_secret.split_once('/') {
                _ if args.member_client_secret.is_empty() => None,
                Some((ns, name)) if !ns.is_empty() && !name.is_empty() => {
                    Some((ns.to_owned(), name.to_owned()))
                }
                _ => anyhow::bail!(
                    "--member-client-secret {:?}: give it as namespace/name",
                    args.member_client_secret
                ),
            };
            let namespace = match &args.certs.namespace {
                Some(n) => n.clone(),
                None => args.lease_namespace.clone(),
            };
            tokio::spawn(quota_state::fleet::run(
                client.clone(),
                ledger.clone(),
                members.clone(),
                metrics.clone(),
                quota_state::fleet::FleetOptions {
                    namespace,
                    removal_grace: args.member_removal_grace,
                    client_secret_copy,
                },
            ));
            quota_state::feed::start_quotas(client, ledger.clone())
        } else {
            quota_state::feed::start(client, ledger.clone())
        }
    };
    let leading = leader.clone();
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter
        .set_not_serving::<QuotaStateServer<quota_state::Service>>()
        .await;
    // SERVING only while the initial lists are in and this replica leads; calls are answered
    // only then.
    let flag = serving_flag.clone();
    let gauge = metrics.serving.clone();
    let ledger_r = ledger.clone();
    tokio::spawn(async move {
        let mut serving = false;
        loop {
            let now = quotas_ready.load(Ordering::Acquire)
                && pods_ready.load(Ordering::Acquire)
                && leader.load(Ordering::Acquire)
                && loaded();
            if now != serving {
                if now && let Some((client, at)) = &remember {
                    // The addresses the last leader trusted, before the first answer; an API
                    // server that does not answer in time only delays trust until a pod.
                    let read = quota_state::remembered::load(client, &ledger_r, at);
                    match tokio::time::timeout(Duration::from_secs(2), read).await {
                        Ok(Ok(_)) => {}
                        Ok(Err(e)) => {
                            tracing::warn!(error = %e, "remembered API server addresses not read")
                        }
                        Err(_) => tracing::warn!("remembered API server addresses not read in 2 s"),
                    }
                }
                serving = now;
                flag.store(serving, Ordering::Release);
                gauge.set(i64::from(serving));
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
    let probes = tokio::net::TcpListener::bind(args.metrics_listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.metrics_listen))?;
    {
        let (m, l, ready) = (metrics.clone(), ledger.clone(), serving_flag.clone());
        tokio::spawn(admission_kit::server::http::probes::serve_probes(
            probes,
            Arc::new(move || {
                m.leader.set(i64::from(leading.load(Ordering::Acquire)));
                m.observe_ledger(&l.stats());
                m.render()
            }),
            Arc::new(move || {
                if ready.load(Ordering::Acquire) {
                    Ok(())
                } else {
                    Err(
                        "not serving: initial lists not in yet, not the leader, or no certificate yet",
                    )
                }
            }),
        ));
    }
    tracing::info!(
        listen = %args.listen,
        metrics = %args.metrics_listen,
        mtls = tls.is_some(),
        "starting",
    );
    let service = QuotaStateServer::new(
        quota_state::Service::new(ledger, policy, metrics.clone()).with_serving(serving_flag),
    )
    .max_decoding_message_size(4 * quota_state::input::MAX_OBJECT_BYTES);
    let router = quota_state::grpc_server()
        .add_service(health)
        .add_service(service);
    match tls {
        Some(tls) => {
            let listener = tokio::net::TcpListener::bind(args.listen)
                .await
                .with_context(|| format!("cannot listen on {}", args.listen))?;
            router
                .serve_with_incoming_shutdown(
                    quota_state::auth::incoming(listener, tls, metrics),
                    shutdown(),
                )
                .await?
        }
        None => router.serve_with_shutdown(args.listen, shutdown()).await?,
    }
    Ok(())
}
