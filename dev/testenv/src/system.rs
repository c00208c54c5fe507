//! The services started the way `cargo xtask up` starts them, so that end-to-end tests exercise
//! the same path: the built binaries, quota-state first (scheduling-webhook sends it every quota
//! question), then each webhook service with its CRDs from `<bin> crd`; every service runs with
//! managed certificates, and each webhook registers its own configurations (url form).

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use admission_kit::review::app::EndpointInfo;
use admission_kit::server::mtls::MtlsFiles;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, Patch, PatchParams};

use crate::free_port;

/// Why the services could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SystemError {
    /// Files, processes, ports.
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    /// The API server refused a CRD or a webhook configuration.
    #[error("{0}: {1}")]
    Api(String, kube::Error),
    /// A binary's output or a CRD could not be read.
    #[error("{0}")]
    Invalid(String),
    /// A service never became ready.
    #[error("{0} not ready after {1:?}; see {2}")]
    NotReady(String, Duration, PathBuf),
}

/// A started service process; stopped with SIGTERM (then SIGKILL after 10 s) when dropped.
#[derive(Debug)]
pub struct Running {
    /// Binary name.
    pub name: String,
    /// Where it logs.
    pub log: PathBuf,
    /// Its plain-HTTP probe and metrics address (`host:port`), when known.
    pub metrics: Option<String>,
    child: Child,
}

impl Running {
    /// The process id (footprint measurements read `/proc/<pid>`).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Starts `cmd`, its stdout and stderr appended to `log`.
    pub fn spawn(name: &str, mut cmd: Command, log: PathBuf) -> Result<Self, SystemError> {
        let logf = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(io(log.display().to_string()))?;
        let err = logf.try_clone().map_err(io("log file"))?;
        let child = cmd
            .stdout(logf)
            .stderr(err)
            .spawn()
            .map_err(io(format!("{:?}", cmd.get_program())))?;
        Ok(Self {
            name: name.to_owned(),
            log,
            metrics: None,
            child,
        })
    }

    /// Whether it has not exited.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Stops it now (SIGKILL: a crash, not a graceful stop).
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Running {
    #[allow(unsafe_code)] // libc calls (process and resource controls) with no safe wrapper.
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How to start the services.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where the built binaries are (`target/debug`).
    pub bin_dir: PathBuf,
    /// The services, by binary name.
    pub services: Vec<String>,
    /// The admin kubeconfig the services watch with.
    pub kubeconfig: PathBuf,
    /// Where logs and CA bundles go.
    pub dir: PathBuf,
    /// Which namespaces the webhooks see.
    pub namespace_selector: LabelSelector,
    /// Appended to each webhook configuration's name (tests sharing a control plane).
    pub name_suffix: String,
    /// Namespace of quota-state's leader Lease and of each webhook's managed certificate
    /// Secret and writer Lease.
    pub namespace: String,
    /// Fixed ports from this one on (quota-state's gRPC and metrics ports first, then each
    /// webhook's webhook and metrics ports, in `services` order); free ports when `None`.
    pub port_base: Option<u16>,
    /// The CA of the API server's admission client certificate: when set, every webhook
    /// requires that certificate (`--client-ca-file`) naming
    /// [`crate::control_plane::ADMISSION_CLIENT_NAME`] (`--allowed-client-names`), as in a
    /// cluster that authenticates its API server.
    pub client_ca: Option<PathBuf>,
    /// More arguments for every webhook's `serve` (a test's own options).
    pub webhook_args: Vec<String>,
    /// More arguments for one webhook's `serve`, by service (after `webhook_args`).
    pub args_of: std::collections::BTreeMap<String, Vec<String>>,
    /// Environment of every service, quota-state included (the OTLP exporter's settings, say).
    pub env: Vec<(String, String)>,
}

impl Options {
    /// The services as `cargo xtask up` starts them on `cp`: every namespace but `kube-system`
    /// seen, the Lease and Secrets in `default`, the API server's client certificate required,
    /// free ports, no extra arguments.
    pub fn as_up(cp: &crate::ControlPlane, bin_dir: PathBuf, services: Vec<String>) -> Self {
        Self {
            bin_dir,
            services,
            kubeconfig: cp.kubeconfig.clone(),
            dir: cp.dir().to_path_buf(),
            namespace_selector: admission_kit::cluster::registration::all_namespaces_except(&[
                "kube-system",
            ]),
            name_suffix: String::new(),
            namespace: "default".into(),
            port_base: None,
            client_ca: Some(cp.admission_client_ca.clone()),
            webhook_args: Vec::new(),
            args_of: Default::default(),
            env: Vec::new(),
        }
    }
}

/// Hands out the fixed ports of [`Options::port_base`] in turn, or free ones.
struct Ports(Option<u16>);

impl Ports {
    fn next(&mut self) -> Result<u16, SystemError> {
        match &mut self.0 {
            Some(p) => {
                let port = *p;
                *p = p
                    .checked_add(1)
                    .ok_or_else(|| SystemError::Invalid("port base too high".into()))?;
                Ok(port)
            }
            None => free_port().map_err(|e| SystemError::Invalid(e.to_string())),
        }
    }
}

/// The started services.
#[derive(Debug, Default)]
pub struct System {
    /// quota-state's gRPC URL and process, when it is one of the services.
    pub quota_state: Option<(String, Running)>,
    /// The webhook services with their HTTPS base URL and registered endpoint count.
    pub webhooks: Vec<(Running, String, usize)>,
    /// Services that have no endpoint table (not webhooks), not started.
    pub skipped: Vec<String>,
}

impl System {
    /// quota-state's probe and metrics address, when it is one of the services.
    pub fn quota_state_metrics(&self) -> Option<String> {
        self.quota_state
            .as_ref()
            .and_then(|(_, r)| r.metrics.clone())
    }
}

/// Maps an I/O error to [`SystemError::Io`] naming `what`.
pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> SystemError {
    let what = what.into();
    move |e| SystemError::Io(what, e)
}

/// The Secret quota-state issues scheduling-webhook's client certificate into (managed mode).
pub const QUOTA_STATE_CLIENT_SECRET: &str = "quota-state-client-scheduling-webhook";

/// scheduling-webhook's client credentials as quota-state issued them (the Secret
/// [`QUOTA_STATE_CLIENT_SECRET`] of `o.namespace`), written to files in `o.dir` for tests that
/// call quota-state directly as scheduling-webhook does. Waits up to a minute for the Secret.
pub async fn quota_state_client_files(
    client: &kube::Client,
    o: &Options,
) -> Result<MtlsFiles, SystemError> {
    quota_state_client_files_of(client, o, QUOTA_STATE_CLIENT_SECRET).await
}

/// As [`quota_state_client_files`], from the client Secret `secret` (a fleet member's, say),
/// into files named after it.
pub async fn quota_state_client_files_of(
    client: &kube::Client,
    o: &Options,
    secret: &str,
) -> Result<MtlsFiles, SystemError> {
    let data = quota_state_client_secret(client, &o.namespace, secret).await?;
    let (cert, key) = if secret == QUOTA_STATE_CLIENT_SECRET {
        (
            "scheduling-webhook-client.crt".to_owned(),
            "scheduling-webhook-client.key".to_owned(),
        )
    } else {
        (format!("{secret}.crt"), format!("{secret}.key"))
    };
    let files = MtlsFiles {
        cert: o.dir.join(cert),
        key: o.dir.join(key),
        ca: o.dir.join("quota-state-ca.crt"),
    };
    for (path, key) in [
        (&files.cert, "tls.crt"),
        (&files.key, "tls.key"),
        (&files.ca, "ca.crt"),
    ] {
        let bytes = data.get(key).map(|b| b.0.clone()).unwrap_or_default();
        std::fs::write(path, bytes).map_err(io(path.display().to_string()))?;
    }
    Ok(files)
}

/// The data of quota-state's client Secret `name` in `namespace`, once it holds a certificate
/// (waits up to a minute for quota-state to issue it).
pub async fn quota_state_client_secret(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<std::collections::BTreeMap<String, k8s_openapi::ByteString>, SystemError> {
    use k8s_openapi::api::core::v1::Secret;
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = api
            .get_opt(name)
            .await
            .map_err(|e| SystemError::Api(format!("Secret {name}"), e))?;
        if let Some(d) = s.and_then(|s| s.data).filter(|d| d.contains_key("tls.crt")) {
            return Ok(d);
        }
        if Instant::now() > deadline {
            return Err(SystemError::Invalid(format!(
                "quota-state issued no client certificate into {name} within a minute"
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Starts quota-state listening on `port` with mutual TLS from managed certificates (its CA in
/// the Secret quota-state-certificates of `o.namespace`, kept across restarts, and the client
/// certificate of scheduling-webhook in [`QUOTA_STATE_CLIENT_SECRET`]); also used to restart it
/// on the same address. Its probes and metrics on a free port, named in the log.
pub fn spawn_quota_state(o: &Options, port: u16) -> Result<Running, SystemError> {
    spawn_quota_state_with(o, port, &[])
}

/// As [`spawn_quota_state`], with `extra` arguments (a fleet's `--fleet`, say).
pub fn spawn_quota_state_with(
    o: &Options,
    port: u16,
    extra: &[&str],
) -> Result<Running, SystemError> {
    let mport = free_port().map_err(|e| SystemError::Invalid(e.to_string()))?;
    spawn_quota_state_on(o, port, mport, extra)
}

fn spawn_quota_state_on(
    o: &Options,
    port: u16,
    mport: u16,
    extra: &[&str],
) -> Result<Running, SystemError> {
    let log = o.dir.join("quota-state.log");
    let logf = std::fs::File::create(&log).map_err(io(log.display().to_string()))?;
    let err = logf.try_clone().map_err(io("log file"))?;
    let child = Command::new(o.bin_dir.join("quota-state"))
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--metrics-listen")
        .arg(format!("127.0.0.1:{mport}"))
        .args([
            "--tls-mode",
            "managed",
            "--tls-extra-names",
            "quota-state,127.0.0.1",
        ])
        .args(["--ca-bundle-propagation", "2s", "--lease-duration", "3s"])
        .args(["--cert-check-interval", "1s"])
        // Usage shown on the quotas within a second (10 s in a cluster).
        .args(["--usage-write-interval-secs", "1"])
        .arg("--namespace")
        .arg(&o.namespace)
        .arg("--lease-namespace")
        .arg(&o.namespace)
        .args(extra)
        .env("KUBECONFIG", &o.kubeconfig)
        .envs(o.env.iter().map(|(k, v)| (k, v)))
        .stdout(logf)
        .stderr(err)
        .spawn()
        .map_err(io(o.bin_dir.join("quota-state").display().to_string()))?;
    Ok(Running {
        name: "quota-state".into(),
        log,
        metrics: Some(format!("127.0.0.1:{mport}")),
        child,
    })
}

/// Starts every service of `o.services` and registers the webhooks. Every webhook service's
/// CRDs (from `<bin> crd`) are applied first, so no service starts watching a kind that does not
/// exist yet (quota-state watches the ElasticQuotas scheduling-webhook defines). quota-state's
/// readiness is not awaited: the webhook answers per `--quota-unavailable` until it is.
pub async fn start(client: &kube::Client, o: &Options) -> Result<System, SystemError> {
    let mut system = System::default();
    let mut ports = Ports(o.port_base);
    let mut webhooks = Vec::new();
    for svc in o.services.iter().filter(|s| *s != "quota-state") {
        let bin = o.bin_dir.join(svc);
        let endpoints = Command::new(&bin)
            .arg("endpoints")
            .output()
            .map_err(io(bin.display().to_string()))?;
        if !endpoints.status.success() {
            system.skipped.push(svc.clone());
            continue;
        }
        let crd = Command::new(&bin)
            .arg("crd")
            .output()
            .map_err(io(bin.display().to_string()))?;
        if crd.status.success() {
            apply_crds(client, &String::from_utf8_lossy(&crd.stdout)).await?;
        }
        webhooks.push((svc, bin, endpoints));
    }
    if o.services.iter().any(|s| s == "quota-state") {
        let (port, mport) = (ports.next()?, ports.next()?);
        let r = spawn_quota_state_on(o, port, mport, &[])?;
        system.quota_state = Some((format!("https://127.0.0.1:{port}"), r));
    }
    for (svc, bin, endpoints) in webhooks {
        let (port, mport) = (ports.next()?, ports.next()?);
        let log = o.dir.join(format!("{svc}.log"));
        let logf = std::fs::File::create(&log).map_err(io(log.display().to_string()))?;
        let err = logf.try_clone().map_err(io("log file"))?;
        let base_url = format!("https://127.0.0.1:{port}");
        let selector = serde_json::to_string(&o.namespace_selector)
            .map_err(|e| SystemError::Invalid(format!("namespace selector: {e}")))?;
        // Managed certificates with self-registration in its url form: the service makes its
        // CA, registers its configurations with that caBundle and turns ready once it serves a
        // certificate the configurations trust, as in a cluster.
        let mut cmd = Command::new(&bin);
        cmd.args(["serve", "--log-format", "text", "--shutdown-delay", "0s"])
            .args(["--tls-mode", "managed", "--registration", "self"])
            .args(["--tls-extra-names", "127.0.0.1,localhost"])
            .args(["--ca-bundle-propagation", "2s", "--lease-duration", "3s"])
            .arg("--namespace")
            .arg(&o.namespace)
            .arg("--cert-secret")
            .arg(format!("{svc}{}-certificates", o.name_suffix))
            .arg("--webhook-configuration-name")
            .arg(format!("{svc}{}", o.name_suffix))
            .arg("--registration-url")
            .arg(&base_url)
            .arg("--registration-namespace-selector")
            .arg(&selector)
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .arg("--metrics-listen")
            .arg(format!("127.0.0.1:{mport}"))
            .env("KUBECONFIG", &o.kubeconfig)
            .envs(o.env.iter().map(|(k, v)| (k, v)))
            .stdout(logf)
            .stderr(err);
        if let (Some((url, _)), "scheduling-webhook") = (&system.quota_state, svc.as_str()) {
            cmd.arg("--quota-state-url")
                .arg(url)
                .arg("--quota-state-client-secret")
                .arg(format!("{}/{QUOTA_STATE_CLIENT_SECRET}", o.namespace))
                .arg("--quota-state-server-name")
                .arg("quota-state");
        }
        if let Some(ca) = &o.client_ca {
            cmd.arg("--client-ca-file").arg(ca).args([
                "--allowed-client-names",
                crate::control_plane::ADMISSION_CLIENT_NAME,
            ]);
        }
        cmd.args(&o.webhook_args);
        if let Some(args) = o.args_of.get(svc.as_str()) {
            cmd.args(args);
        }
        let child = cmd.spawn().map_err(io(bin.display().to_string()))?;
        let running = Running {
            name: svc.clone(),
            log: log.clone(),
            metrics: Some(format!("127.0.0.1:{mport}")),
            child,
        };
        let wait = Duration::from_secs(60);
        let deadline = Instant::now() + wait;
        while http_status(&format!("127.0.0.1:{mport}"), "/readyz").await != Some(200) {
            if Instant::now() > deadline {
                return Err(SystemError::NotReady(svc.clone(), wait, log));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let endpoints: Vec<EndpointInfo> = serde_json::from_slice(&endpoints.stdout)
            .map_err(|e| SystemError::Invalid(format!("{svc} endpoints: {e}")))?;
        system.webhooks.push((running, base_url, endpoints.len()));
    }
    Ok(system)
}

/// `GET path` on a plain-HTTP address (probes, metrics, Prometheus's API): the status and the
/// body. HTTP/1.0, so the server closes the connection after the answer.
pub async fn http_get(addr: &str, path: &str) -> Result<(u16, String), String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("{addr}: {e}"))?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .map_err(|e| format!("{addr}: {e}"))?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)
        .await
        .map_err(|e| format!("{addr}: {e}"))?;
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("{addr}{path}: not an HTTP answer: {head}"))?;
    Ok((status, body.to_owned()))
}

/// The HTTP status of `GET path` on a plain-HTTP address (readiness probes).
pub async fn http_status(addr: &str, path: &str) -> Option<u16> {
    http_get(addr, path).await.ok().map(|(status, _)| status)
}

/// Server-side applies the CRDs of a multi-document YAML and waits until each is established.
pub async fn apply_crds(client: &kube::Client, yaml: &str) -> Result<usize, SystemError> {
    use serde::Deserialize;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut names = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(yaml) {
        let crd = CustomResourceDefinition::deserialize(doc)
            .map_err(|e| SystemError::Invalid(format!("CRD: {e}")))?;
        let name = crd
            .metadata
            .name
            .clone()
            .ok_or_else(|| SystemError::Invalid("CRD without a name".into()))?;
        api.patch(
            &name,
            &PatchParams::apply("xtask").force(),
            &Patch::Apply(&crd),
        )
        .await
        .map_err(|e| SystemError::Api(format!("CRD {name}"), e))?;
        names.push(name);
    }
    for name in &names {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let c = api
                .get(name)
                .await
                .map_err(|e| SystemError::Api(format!("CRD {name}"), e))?;
            let established = c
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if established {
                break;
            }
            if Instant::now() > deadline {
                return Err(SystemError::Invalid(format!(
                    "CRD {name} not established after 30 s"
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(names.len())
}

/// `target/<profile>` of the running test or tool binary (`target/<profile>/deps/<test>` or
/// `target/<profile>/<tool>`), where the service binaries are built.
pub fn bin_dir_of_current_exe() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    Some(if dir.file_name().is_some_and(|n| n == "deps") {
        dir.parent()?.to_path_buf()
    } else {
        dir.to_path_buf()
    })
}

/// Whether `dir` holds the binaries of `services`; the error names the missing one and the
/// command that builds it.
pub fn check_binaries(dir: &Path, services: &[String]) -> Result<(), SystemError> {
    for s in services {
        if !dir.join(s).is_file() {
            return Err(SystemError::Invalid(format!(
                "{} is missing: build it with `cargo build -p {s}` (cargo test --workspace does)",
                dir.join(s).display()
            )));
        }
    }
    Ok(())
}
