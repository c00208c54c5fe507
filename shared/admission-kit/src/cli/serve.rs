//! The `serve` command: flags, certificates (from files, self-signed or managed) and the server's
//! start and shutdown. Feature `serve`: tools that only run the rules leave it out.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use crate::cli::{duration, service_account_namespace};
use crate::cluster::state::{StaticState, WatchState};
use crate::review::app::App;
use crate::review::handler::Context;
use crate::review::lookup::EmptyState;
use crate::review::mode::{Enforcement, Modes};
use crate::server::http::{ServeOptions, Server};
use crate::server::metrics::Metrics;
use crate::server::mtls::SelfSigned;
use crate::server::telemetry::{LogFormat, LogTarget, Telemetry};
use crate::server::tls::{CertFiles, CertStore, install_crypto_provider};

/// Flags of `serve`.
#[derive(Args, Debug)]
pub(super) struct ServeArgs {
    /// Address of the HTTPS webhook listener.
    #[arg(long, env = "WEBHOOK_LISTEN", default_value = "0.0.0.0:8443")]
    listen: SocketAddr,
    /// Address of the plain-HTTP listener for /metrics, /healthz and /readyz.
    #[arg(long, env = "WEBHOOK_METRICS_LISTEN", default_value = "0.0.0.0:8080")]
    metrics_listen: SocketAddr,
    /// PEM certificate chain served to the API server; reloaded when the file changes.
    #[arg(
        long,
        env = "WEBHOOK_TLS_CERT_FILE",
        default_value = "/etc/webhook/certs/tls.crt"
    )]
    tls_cert_file: PathBuf,
    /// PEM private key of the certificate; reloaded with it.
    #[arg(
        long,
        env = "WEBHOOK_TLS_KEY_FILE",
        default_value = "/etc/webhook/certs/tls.key"
    )]
    tls_private_key_file: PathBuf,
    /// How often the certificate files are checked for changes (Go duration).
    #[arg(long, env = "WEBHOOK_CERT_RELOAD_INTERVAL", default_value = "5s", value_parser = duration)]
    cert_reload_interval: Duration,
    /// Make a CA and a serving certificate in memory instead of reading files (local use).
    #[arg(long, env = "WEBHOOK_SELF_SIGNED")]
    self_signed: bool,
    #[arg(long, env = "WEBHOOK_WORKER_THREADS", default_value_t = 1, help = crate::server::runtime::WORKER_THREADS_HELP)]
    worker_threads: usize,
    #[command(flatten)]
    certs: CertArgs,
    #[command(flatten)]
    registration: RegistrationArgs,
    /// Names the self-signed certificate is valid for (DNS names or IPs, comma-separated).
    #[arg(
        long,
        env = "WEBHOOK_SELF_SIGNED_NAMES",
        value_delimiter = ',',
        default_value = "localhost,127.0.0.1,::1"
    )]
    self_signed_names: Vec<String>,
    /// With --self-signed: write the CA certificate (the webhook's caBundle) to this file.
    #[arg(long, env = "WEBHOOK_CA_BUNDLE_OUT")]
    ca_bundle_out: Option<PathBuf>,
    /// Log line format.
    #[arg(long, env = "WEBHOOK_LOG_FORMAT", value_enum, default_value = "json")]
    log_format: LogFormat,
    /// Largest request body accepted, in bytes (larger: 413).
    #[arg(long, env = "WEBHOOK_BODY_LIMIT", default_value_t = 7 * 1024 * 1024)]
    body_limit: usize,
    /// Time allowed for a request's head from its first byte (and, separately, for its body),
    /// and for the first byte after the TLS handshake.
    #[arg(long, env = "WEBHOOK_READ_TIMEOUT", default_value = "10s", value_parser = duration)]
    read_timeout: Duration,
    /// Close a connection silent this long (no request, no answer being written). After the TLS
    /// handshake the first byte must come within `--read-timeout`. Keep it above the API
    /// server's own idle timeout (90 s) so that it closes resting connections first.
    #[arg(long, env = "WEBHOOK_IDLE_TIMEOUT", default_value = "120s", value_parser = duration)]
    idle_timeout: Duration,
    /// Request bytes all reviews in flight may hold together (each reserves its Content-Length,
    /// or the body limit when it declares none); beyond it, 429 with Retry-After before the body
    /// is read. The default, 32 MiB, suits the Deployments' 128Mi memory limit: a review being
    /// decided holds about three times its bytes (body, raw object, typed object), so a full
    /// budget peaked at 82 MiB in `services/registry-webhook/tests/hostile.rs`.
    #[arg(long, env = "WEBHOOK_MAX_INFLIGHT_BYTES", default_value_t = 32 * 1024 * 1024)]
    max_inflight_bytes: usize,
    /// Open connections at most; at the cap the oldest idle one is closed to make room. Default:
    /// the file descriptor limit less 128.
    #[arg(long, env = "WEBHOOK_MAX_CONNECTIONS")]
    max_connections: Option<usize>,
    /// Reviews in flight at once; beyond it, 429 with Retry-After.
    #[arg(long, env = "WEBHOOK_MAX_CONCURRENT_REVIEWS", default_value_t = 256)]
    max_concurrent_reviews: usize,
    /// Require the API server's client certificate: a PEM CA its certificate must chain to (it
    /// presents one when its admission configuration names a kubeconfig with client credentials
    /// for this webhook). Handshakes without one fail and are counted in
    /// `admission_webhook_tls_handshakes_refused_total`.
    #[arg(long, env = "WEBHOOK_CLIENT_CA_FILE")]
    client_ca_file: Option<PathBuf>,
    /// With --client-ca-file: names (common name, DNS or URI SAN) the client certificate must
    /// carry one of, e.g. the API server's `kube-apiserver-admission`. Where the CA also signs
    /// users' certificates (a kubeadm cluster CA signs kubectl's), the chain alone would admit a
    /// tenant as the API server. Connections with another certificate are closed after the
    /// handshake and counted under `reason="forbidden"`.
    #[arg(
        long,
        env = "WEBHOOK_ALLOWED_CLIENT_NAMES",
        value_delimiter = ',',
        requires = "client_ca_file"
    )]
    allowed_client_names: Vec<String>,
    /// After SIGTERM, how long to keep serving with readiness false before closing the listener.
    #[arg(long, env = "WEBHOOK_SHUTDOWN_DELAY", default_value = "3s", value_parser = duration)]
    shutdown_delay: Duration,
    /// Close a connection gracefully once it is this old (HTTP/2 GOAWAY; the API server
    /// reconnects): spreads load onto new replicas after a scale-up and presents a renewed
    /// certificate. `0s` keeps connections as long as the client does.
    #[arg(long, env = "WEBHOOK_MAX_CONNECTION_AGE", default_value = "10m", value_parser = duration)]
    max_connection_age: Duration,
    /// Share the webhook port with other processes on this host (SO_REUSEPORT): the kernel
    /// spreads connections over them (several replicas on one machine, a hot restart).
    #[arg(long, env = "WEBHOOK_REUSE_PORT")]
    reuse_port: bool,
    /// After the listener closes, how long in-flight reviews may still take.
    #[arg(long, env = "WEBHOOK_SHUTDOWN_GRACE", default_value = "25s", value_parser = duration)]
    shutdown_grace: Duration,
    /// Feature gates, e.g. `Name=false,Other=true` (see `--help` of the service for its gates).
    #[arg(long, env = "WEBHOOK_FEATURE_GATES")]
    feature_gates: Option<String>,
    /// Read cluster state from these files (JSON/YAML objects or Lists) instead of watching the
    /// Kubernetes API: for running without a cluster. Without it, services whose rules read
    /// cluster state need KUBECONFIG or an in-cluster service account.
    #[arg(long)]
    state: Vec<PathBuf>,
    /// What the endpoints do with their decisions: `enforce` (deny, patch), `warn` (admit;
    /// would-be denials returned as warnings), `audit` (admit unchanged; count and log what
    /// enforcing would have done). `MODE` sets every endpoint's, `PATH=MODE` one endpoint's;
    /// repeat the flag or separate with commas. With `--registration=self`, endpoints in `warn`
    /// or `audit` register with failurePolicy Ignore.
    #[arg(
        long,
        env = "WEBHOOK_ENFORCEMENT",
        value_delimiter = ',',
        default_value = "enforce"
    )]
    enforcement: Vec<String>,
    /// Log every admission at INFO. By default a plain admission (admitted unchanged, without a
    /// warning, enforced) is logged at DEBUG only (`RUST_LOG=info,admission::decision=debug`
    /// selects it) and counted in `admission_webhook_decisions_total`; denials, warnings,
    /// mutations and decisions on trial are always logged.
    #[arg(long, env = "WEBHOOK_LOG_ADMISSIONS")]
    log_admissions: bool,
}

/// Where the serving certificate comes from.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsMode {
    /// From `--tls-cert-file` and `--tls-private-key-file` (cert-manager, a secret volume),
    /// reloaded when they change.
    Files,
    /// Kept by the service itself in a Secret of its namespace: CA and serving certificate made,
    /// rotated and put into the webhook configurations' caBundle, no cert-manager needed.
    Managed,
}

/// How the webhook configurations learn the managed CA.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum RegistrationMode {
    /// Patch only the caBundle of the configurations applied from manifests.
    CaBundle,
    /// Create and update the configurations from the endpoint table.
    #[value(name = "self")]
    SelfRegister,
    /// Leave the configurations alone.
    None,
}

/// Flags of managed certificates, shared by every service (quota-state flattens them too).
#[derive(Args, Debug, Clone)]
pub struct CertArgs {
    /// Where the serving certificate comes from: `files` (cert-manager or a secret volume) or
    /// `managed` (the service keeps its own CA in a Secret, rotates it and keeps the webhook
    /// configurations' caBundle current).
    #[arg(long, env = "WEBHOOK_TLS_MODE", value_enum, default_value = "files")]
    pub tls_mode: TlsMode,
    /// Managed mode: the Secret holding CA and serving certificate, also the name of the writer
    /// Lease [default: <service>-certificates].
    #[arg(long, env = "WEBHOOK_CERT_SECRET")]
    pub cert_secret: Option<String>,
    /// Managed mode: the service's namespace (of the Secret, the Lease and the Service)
    /// [default: $POD_NAMESPACE, else the service account's namespace].
    #[arg(long, env = "POD_NAMESPACE")]
    pub namespace: Option<String>,
    /// Managed mode: the Service clients call; the certificate is valid for
    /// <name>.<namespace>.svc and <name>.<namespace>.svc.cluster.local [default: <service>].
    #[arg(long, env = "WEBHOOK_SERVICE_NAME")]
    pub service_name: Option<String>,
    /// Managed mode: more names (DNS names or IP addresses) the certificate is valid for.
    #[arg(long, env = "WEBHOOK_TLS_EXTRA_NAMES", value_delimiter = ',')]
    pub tls_extra_names: Vec<String>,
    /// Managed mode: CA lifetime, renewed at two thirds (8 months). A year keeps the CA that
    /// the API server trusts stable for long while still rotating it yearly, as cert-manager's
    /// and kubeadm's CAs are rotated; each renewal goes through a trusted-both phase.
    #[arg(long, env = "WEBHOOK_CA_LIFETIME", default_value = "8760h", value_parser = duration)]
    pub ca_lifetime: Duration,
    /// Managed mode: serving (and client) certificate lifetime, renewed at two thirds (60
    /// days). 90 days is what cert-manager and public CAs default to: a leaked key is useful for
    /// weeks, not years, and a month of margin survives a long writer outage.
    #[arg(long, env = "WEBHOOK_SERVING_CERT_LIFETIME", default_value = "2160h", value_parser = duration)]
    pub serving_cert_lifetime: Duration,
    /// Managed mode: how long a new CA is trusted before a certificate it signs is served, and
    /// how long the old CA stays trusted afterwards. The API server applies a webhook
    /// configuration change within seconds; a minute covers several API servers and a slow
    /// replica. A client that reads the CA from a mounted Secret instead of the API needs the
    /// kubelet's sync period (about a minute) on top.
    #[arg(long, env = "WEBHOOK_CA_BUNDLE_PROPAGATION", default_value = "1m", value_parser = duration)]
    pub ca_bundle_propagation: Duration,
    /// Managed mode: how often the writer re-checks the Secret and the configurations when
    /// nothing wakes it earlier (it also wakes at every Secret change and when a renewal is due).
    #[arg(long, env = "WEBHOOK_CERT_CHECK_INTERVAL", default_value = "1m", value_parser = duration)]
    pub cert_check_interval: Duration,
    /// Managed mode: duration of the writer Lease; a dead writer is replaced within it. Keep it
    /// well under a third of the serving certificate lifetime.
    #[arg(long, env = "WEBHOOK_LEASE_DURATION", default_value = "15s", value_parser = duration)]
    pub lease_duration: Duration,
    /// Managed mode: this replica's identity in the writer Lease [default: $HOSTNAME].
    #[arg(long, env = "WEBHOOK_IDENTITY")]
    pub lease_identity: Option<String>,
}

impl CertArgs {
    /// The Service clients call: `--service-name`, else `default` (the service's name).
    fn service(&self, default: &str) -> String {
        self.service_name
            .clone()
            .unwrap_or_else(|| default.to_owned())
    }

    /// Whether `--tls-mode=managed`.
    pub fn is_managed(&self) -> bool {
        self.tls_mode == TlsMode::Managed
    }

    /// Where the managed certificates of `service` live and how they are made; `clients` get
    /// client certificates.
    pub fn managed(
        &self,
        service: &str,
        clients: Vec<String>,
    ) -> Result<crate::cluster::managed::Managed, String> {
        use crate::cluster::managed::{Lifetimes, Managed, Policy};
        let namespace = match &self.namespace {
            Some(n) => n.clone(),
            None => service_account_namespace().map_err(|e| {
                format!(
                    "--tls-mode=managed needs the namespace: set --namespace or POD_NAMESPACE ({e})"
                )
            })?,
        };
        let svc = self.service(service);
        let mut names = vec![
            format!("{svc}.{namespace}.svc"),
            format!("{svc}.{namespace}.svc.cluster.local"),
        ];
        names.extend(
            self.tls_extra_names
                .iter()
                .filter(|n| !n.is_empty())
                .cloned(),
        );
        let secret = self
            .cert_secret
            .clone()
            .unwrap_or_else(|| format!("{service}-certificates"));
        let identity = self
            .lease_identity
            .clone()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .unwrap_or_else(|| format!("{service}-{}", std::process::id()));
        Ok(Managed {
            namespace,
            lease: secret.clone(),
            secret,
            identity,
            lease_duration: self.lease_duration,
            check_interval: self.cert_check_interval,
            policy: Policy {
                names,
                service: service.to_owned(),
                lifetimes: Lifetimes {
                    ca: self.ca_lifetime,
                    serving: self.serving_cert_lifetime,
                    propagation: self.ca_bundle_propagation,
                },
                clients,
            },
            more_clients: None,
        })
    }
}

/// Flags of the webhook configurations' registration in managed mode.
#[derive(Args, Debug)]
struct RegistrationArgs {
    /// Managed mode: how the webhook configurations get the CA bundle: `ca-bundle` patches only
    /// the caBundle of configurations applied from manifests; `self` creates and updates them
    /// from the endpoint table; `none` leaves them alone.
    #[arg(
        long,
        env = "WEBHOOK_REGISTRATION",
        value_enum,
        default_value = "ca-bundle"
    )]
    registration: RegistrationMode,
    /// Managed mode: name of the Mutating- and ValidatingWebhookConfiguration [default: <service>].
    #[arg(long, env = "WEBHOOK_CONFIGURATION_NAME")]
    webhook_configuration_name: Option<String>,
    /// `--registration=self`: register `url` clientConfigs with this base (`https://host:port`)
    /// instead of the Service (loopback runs).
    #[arg(long, env = "WEBHOOK_REGISTRATION_URL")]
    registration_url: Option<String>,
    /// `--registration=self`: the namespaceSelector of every webhook, as JSON [default: every
    /// namespace but kube-system, the service's own and those labelled
    /// admission-webhooks.io/exclude].
    #[arg(long, env = "WEBHOOK_NAMESPACE_SELECTOR")]
    registration_namespace_selector: Option<String>,
}

impl RegistrationArgs {
    fn registrar(
        &self,
        app: &App,
        m: &crate::cluster::managed::Managed,
        service: &str,
        settings: &Context,
        modes: &Modes,
    ) -> Result<crate::cluster::registration::Registrar, String> {
        use crate::cluster::registration::{
            ClientTarget, Registrar, Registration, all_namespaces_except,
        };
        let name = self
            .webhook_configuration_name
            .clone()
            .unwrap_or_else(|| app.name.to_owned());
        let field_manager = format!("{}-certificates", app.name);
        Ok(match self.registration {
            RegistrationMode::None => Registrar::Off,
            RegistrationMode::CaBundle => Registrar::CaBundle {
                name,
                field_manager,
            },
            RegistrationMode::SelfRegister => {
                let namespace_selector = match &self.registration_namespace_selector {
                    Some(json) => serde_json::from_str(json)
                        .map_err(|e| format!("--registration-namespace-selector: {e}"))?,
                    None => all_namespaces_except(&["kube-system", &m.namespace]),
                };
                let client = match &self.registration_url {
                    Some(u) => ClientTarget::Url(u.trim_end_matches('/').to_owned()),
                    None => ClientTarget::Service {
                        namespace: m.namespace.clone(),
                        name: service.to_owned(),
                        port: 443,
                    },
                };
                Registrar::Full {
                    registration: Registration {
                        name,
                        client,
                        ca_bundle: Vec::new(),
                        timeout_seconds: app.timeout_seconds,
                        namespace_selector,
                        failure_policy: None,
                        object_labels: Default::default(),
                    },
                    endpoints: {
                        // What the rules can act on under these options and gates.
                        let mut all = crate::review::app::EndpointInfo::registered(app, settings);
                        all.extend(app.extra_endpoints.iter().cloned());
                        for e in &mut all {
                            e.enforce(modes.of(&e.path));
                        }
                        all
                    },
                    field_manager,
                }
            }
        })
    }
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
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
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Starts the managed-certificate loader (every replica) and writer (the Lease holder).
async fn start_managed(
    app: &App,
    a: &ServeArgs,
    certs: &Arc<CertStore>,
    metrics: &Metrics,
    settings: &Context,
    modes: &Modes,
) -> Result<(), Box<dyn std::error::Error>> {
    let managed = a.certs.managed(app.name, Vec::new())?;
    let service = a.certs.service(app.name);
    let registrar = a
        .registration
        .registrar(app, &managed, &service, settings, modes)?;
    tracing::info!(registration = ?a.registration.registration, "webhook configurations");
    crate::cluster::managed::start(managed, registrar, certs.clone(), metrics.registry()).await?;
    Ok(())
}

async fn serve(app: App, a: ServeArgs) -> Result<(), Box<dyn std::error::Error>> {
    install_crypto_provider();
    let telemetry = Telemetry::init(app.name, a.log_format, LogTarget::Stdout)?;
    let prepared = app.prepare(a.feature_gates.as_deref())?;
    for (path, gate) in &prepared.disabled {
        tracing::warn!(
            webhook = path,
            gate = gate,
            "feature gate off: this webhook admits everything"
        );
    }
    let app = prepared.app;
    // The gates in force, for what is decided once at start: which endpoints are registered and
    // which kinds watched (the service's options are in the app's closures).
    let settings = Context::new(Arc::new(EmptyState)).with_gates(prepared.gates.clone());
    let paths: Vec<&str> = app.endpoints.iter().map(|e| e.path).collect();
    let modes = Modes::parse(a.enforcement.iter().map(String::as_str), &paths)?;
    let metrics = Metrics::new()?;
    let certs = CertStore::new();
    for c in certs.collectors() {
        metrics.registry().register(c)?;
    }
    if a.certs.is_managed() {
        start_managed(&app, &a, &certs, &metrics, &settings, &modes).await?;
    } else if a.self_signed {
        let ss = SelfSigned::generate(&a.self_signed_names)?;
        certs.set(ss.certified_key()?);
        if let Some(out) = &a.ca_bundle_out {
            std::fs::write(out, &ss.ca_pem)
                .map_err(|e| format!("cannot write the CA bundle to {}: {e}", out.display()))?;
            tracing::info!(path = %out.display(), "self-signed CA bundle written");
        }
    } else {
        let files = CertFiles {
            cert: a.tls_cert_file.clone(),
            key: a.tls_private_key_file.clone(),
        };
        if let Err(e) = files.load_into(&certs) {
            certs.reject();
            tracing::warn!(error = %e, "serving certificate not loaded yet; not ready until it is");
        }
        files.spawn_reloader(certs.clone(), a.cert_reload_interval);
    }
    let (ctx, synced): (Context, Box<dyn Fn() -> bool + Send + Sync>) = if !a.state.is_empty() {
        let state = StaticState::from_files(&a.state)?;
        tracing::info!(
            objects = state.len(),
            "cluster state read from files; not watching the API"
        );
        (Context::new(Arc::new(state)), Box::new(|| true))
    } else if app.watches.is_empty() {
        (Context::new(Arc::new(EmptyState)), Box::new(|| true))
    } else {
        let client = kube::Client::try_default().await.map_err(|e| {
            format!(
                "the rules read cluster state, which needs the Kubernetes API (set KUBECONFIG, run in a cluster, \
                 or pass --state FILE to serve from files): {e}"
            )
        })?;
        let state = Arc::new(WatchState::start(client, &app.watches, &settings));
        let s2 = state.clone();
        (Context::new(state), Box::new(move || s2.synced()))
    };
    let ctx = ctx.with_gates(prepared.gates.clone());
    for e in &app.endpoints {
        let on = !prepared.disabled.iter().any(|(p, _)| *p == e.path);
        metrics
            .enabled
            .with_label_values(&[e.path])
            .set(i64::from(on));
        let mode = modes.of(e.path);
        metrics
            .enforcement
            .with_label_values(&[e.path, mode.as_str()])
            .set(1);
        if mode != Enforcement::Enforce {
            tracing::warn!(
                webhook = e.path,
                enforcement = mode.as_str(),
                "on trial: this webhook admits every review and records what it would have done"
            );
        }
    }
    let opts = ServeOptions {
        listen: a.listen,
        metrics_listen: Some(a.metrics_listen),
        body_limit: a.body_limit,
        max_inflight_bytes: a.max_inflight_bytes,
        max_concurrent_reviews: a.max_concurrent_reviews,
        max_connections: a
            .max_connections
            .unwrap_or_else(crate::server::conns::default_cap),
        handshake_timeout: a.read_timeout,
        header_timeout: a.read_timeout,
        body_timeout: a.read_timeout,
        idle_timeout: a.idle_timeout,
        client_ca_file: a.client_ca_file.clone(),
        allowed_client_names: a.allowed_client_names.clone(),
        shutdown_delay: a.shutdown_delay,
        shutdown_grace: a.shutdown_grace,
        max_connection_age: (!a.max_connection_age.is_zero()).then_some(a.max_connection_age),
        reuse_port: a.reuse_port,
        enforcement: modes,
        continue_traces: telemetry.exporting(),
        log_admissions: a.log_admissions,
        ..ServeOptions::default()
    };
    let server = Server::bind(&app, ctx, certs, synced, metrics, opts).await?;
    tracing::info!(
        service = app.name,
        listen = ?server.local_addr(),
        metrics = ?server.metrics_addr(),
        endpoints = ?app.endpoints.iter().map(|e| e.path).collect::<Vec<_>>(),
        otlp = telemetry.exporting(),
        "serving"
    );
    server.run(shutdown_signal()).await;
    telemetry.shutdown();
    Ok(())
}

/// Runs `serve` on its own runtime until a shutdown signal.
pub(super) fn run(app: App, a: ServeArgs) -> ExitCode {
    let rt = match crate::server::runtime::build(a.worker_threads) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{}: cannot start the runtime: {e}", app.name);
            return ExitCode::FAILURE;
        }
    };
    let name = app.name;
    match rt.block_on(serve(app, a)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e}");
            ExitCode::FAILURE
        }
    }
}
