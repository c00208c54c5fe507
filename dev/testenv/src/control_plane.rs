//! etcd + kube-apiserver on free loopback ports, started the way controller-runtime's envtest
//! does: secure serving with our own CA, an admin client certificate (group `system:masters`),
//! service-account keys, RBAC, and the admission plugins that need controllers disabled.
//!
//! As a production API server can, it presents a client certificate to every admission webhook
//! (an admission configuration naming a kubeconfig with credentials for `*`), signed by the same
//! CA ([`ControlPlane::admission_client_ca`]): webhooks run with `--client-ca-file` are called
//! as in a cluster that authenticates its API server. The API server can be restarted on its
//! address ([`ControlPlane::restart_apiserver`]) to test that watches resume.
//!
//! Teardown: [`ControlPlane`] kills both processes and removes its directory on drop (also when a
//! test panics). The children also get `PR_SET_PDEATHSIG`, so they die with the process that
//! started them even when it is killed, and directories of dead owners are swept on the next
//! start.

use std::fs;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use crate::free_port;
use crate::tools::Binaries;

/// The common name of the client certificate the API server presents to webhooks: what they
/// allow with `--allowed-client-names` (the admin's certificate, from the same CA, is refused).
pub const ADMISSION_CLIENT_NAME: &str = "kube-apiserver-admission";

/// Why the control plane could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Files or processes.
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    /// Certificates.
    #[error("certificates: {0}")]
    Cert(#[from] rcgen::Error),
    /// A process exited or never became ready.
    #[error("{0}")]
    NotReady(String),
    /// The kube client could not be built.
    #[error("kube client: {0}")]
    Client(String),
}

pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> StartError {
    let what = what.into();
    move |e| StartError::Io(what, e)
}

fn root_dir() -> PathBuf {
    std::env::temp_dir().join("admission-testenv")
}

/// Removes directories left by processes that no longer exist.
fn sweep_stale() {
    let Ok(rd) = fs::read_dir(root_dir()) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

#[allow(unsafe_code)] // libc calls (process and resource controls) with no safe wrapper.
pub(crate) fn spawn(cmd: &mut Command, log: &Path) -> Result<Child, StartError> {
    let out = fs::File::create(log).map_err(io(log.display().to_string()))?;
    let err = out.try_clone().map_err(io("log"))?;
    cmd.stdin(Stdio::null()).stdout(out).stderr(err);
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt as _;
        // SAFETY: prctl is async-signal-safe; no allocation between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    cmd.spawn().map_err(io(format!("{:?}", cmd.get_program())))
}

fn tail(path: &Path) -> String {
    let mut s = String::new();
    if let Ok(mut f) = fs::File::open(path) {
        let _ = f.read_to_string(&mut s);
    }
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(25)..].join("\n")
}

/// How [`ControlPlane::restart_apiserver`] went.
#[derive(Debug, Clone, Copy)]
pub struct Restart {
    /// From SIGTERM until the process was gone.
    pub stopped: Duration,
    /// Whether it had to be killed after the grace period.
    pub killed: bool,
    /// From SIGTERM until the new process was ready.
    pub ready: Duration,
}

/// A running etcd + kube-apiserver.
pub struct ControlPlane {
    dir: PathBuf,
    etcd: Option<Child>,
    apiserver: Option<Child>,
    /// How the API server was started, to start it again.
    apiserver_cmd: Option<(PathBuf, Vec<String>)>,
    restarts: u32,
    /// `https://127.0.0.1:<port>`.
    pub server: String,
    /// A kubeconfig with admin (`system:masters`) credentials.
    pub kubeconfig: PathBuf,
    /// A kubeconfig with kube-scheduler's own identity (`system:kube-scheduler`, which the API
    /// server's default RBAC policy binds to what a scheduler needs): the user binding rules see.
    pub scheduler_kubeconfig: PathBuf,
    /// The CA of the client certificate the API server presents to admission webhooks (give it
    /// to a webhook as `--client-ca-file`).
    pub admission_client_ca: PathBuf,
}

struct Pki {
    ca_pem: String,
    serving_cert: String,
    serving_key: String,
    admin_cert: String,
    admin_key: String,
    scheduler_cert: String,
    scheduler_key: String,
    admission_cert: String,
    admission_key: String,
    sa_key: String,
    sa_pub: String,
}

fn pki() -> Result<Pki, StartError> {
    let mut ca = CertificateParams::new(Vec::<String>::new())?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "testenv CA");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::CrlSign,
    ];
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate()?)?;

    let mut serving = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])?;
    serving
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let serving_key = KeyPair::generate()?;
    let serving_cert = serving.signed_by(&serving_key, &ca)?;

    let (admin_cert, admin_key) = client_certificate(&ca, "admin", Some("system:masters"))?;
    let (scheduler_cert, scheduler_key) = client_certificate(&ca, "system:kube-scheduler", None)?;
    // What the API server presents to webhooks that ask for a client certificate.
    let (admission_cert, admission_key) = client_certificate(&ca, ADMISSION_CLIENT_NAME, None)?;

    let sa = KeyPair::generate()?;
    Ok(Pki {
        ca_pem: ca.pem(),
        serving_cert: serving_cert.pem(),
        serving_key: serving_key.serialize_pem(),
        admin_cert,
        admin_key,
        scheduler_cert,
        scheduler_key,
        admission_cert,
        admission_key,
        sa_key: sa.serialize_pem(),
        sa_pub: sa.public_key_pem(),
    })
}

/// A client certificate for `common_name` (in group `organization`) signed by `ca`: PEM
/// certificate and key.
fn client_certificate(
    ca: &CertifiedIssuer<'_, KeyPair>,
    common_name: &str,
    organization: Option<&str>,
) -> Result<(String, String), StartError> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    if let Some(o) = organization {
        params.distinguished_name.push(DnType::OrganizationName, o);
    }
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, ca)?;
    Ok((cert.pem(), key.serialize_pem()))
}

/// A kubeconfig for `server` (trusted through `ca`) with the client certificate `cert`/`key`.
fn kubeconfig(server: &str, ca: &str, cert: &str, key: &str) -> String {
    let b = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: testenv\n  cluster:\n    server: {server}\n    certificate-authority-data: {}\nusers:\n- name: user\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\ncontexts:\n- name: testenv\n  context:\n    cluster: testenv\n    user: user\ncurrent-context: testenv\n",
        b(ca),
        b(cert),
        b(key)
    )
}

/// The admission configuration that makes the API server present `cert`/`key` to every webhook
/// (the kubeconfig user `*` matches any webhook address).
fn admission_files(dir: &Path, cert: &Path, key: &Path) -> (String, String) {
    let kubeconfig = dir.join("admission-kubeconfig");
    let webhook_kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nusers:\n- name: '*'\n  user:\n    client-certificate: {}\n    client-key: {}\n",
        cert.display(),
        key.display()
    );
    let plugin = |name: &str| {
        format!(
            "- name: {name}\n  configuration:\n    apiVersion: apiserver.config.k8s.io/v1\n    kind: WebhookAdmissionConfiguration\n    kubeConfigFile: {}\n",
            kubeconfig.display()
        )
    };
    let config = format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n{}{}",
        plugin("ValidatingAdmissionWebhook"),
        plugin("MutatingAdmissionWebhook")
    );
    (webhook_kubeconfig, config)
}

/// How to start a control plane beyond the defaults.
#[derive(Debug, Clone, Default)]
pub struct StartOptions {
    /// Where the API server sends its spans (OTLP/gRPC, `host:port`), every request sampled:
    /// its spans and the webhooks' then share one trace. No tracing when `None`.
    pub tracing_endpoint: Option<String>,
}

/// The API server's tracing configuration: every request sampled, spans to `endpoint`.
fn tracing_config(endpoint: &str) -> String {
    format!(
        "apiVersion: apiserver.config.k8s.io/v1\n\
         kind: TracingConfiguration\n\
         endpoint: {endpoint}\n\
         samplingRatePerMillion: 1000000\n"
    )
}

impl ControlPlane {
    /// Starts etcd and kube-apiserver and waits until the API server is ready (at most 90 s).
    pub async fn start(bins: &Binaries) -> Result<Self, StartError> {
        Self::start_with(bins, &StartOptions::default()).await
    }

    /// As [`ControlPlane::start`], with `options`.
    pub async fn start_with(bins: &Binaries, options: &StartOptions) -> Result<Self, StartError> {
        sweep_stale();
        let dir = root_dir().join(format!(
            "{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default()
        ));
        fs::create_dir_all(&dir).map_err(io(dir.display().to_string()))?;
        let mut cp = Self {
            dir: dir.clone(),
            etcd: None,
            apiserver: None,
            apiserver_cmd: None,
            restarts: 0,
            server: String::new(),
            kubeconfig: dir.join("kubeconfig"),
            scheduler_kubeconfig: dir.join("scheduler-kubeconfig"),
            admission_client_ca: dir.join("ca.crt"),
        };
        let p = pki()?;
        let write = |name: &str, body: &str| -> Result<PathBuf, StartError> {
            let path = dir.join(name);
            fs::write(&path, body).map_err(io(path.display().to_string()))?;
            Ok(path)
        };
        let ca = write("ca.crt", &p.ca_pem)?;
        let tls_crt = write("apiserver.crt", &p.serving_cert)?;
        let tls_key = write("apiserver.key", &p.serving_key)?;
        let sa_key = write("sa.key", &p.sa_key)?;
        let sa_pub = write("sa.pub", &p.sa_pub)?;
        let admission_crt = write("admission-client.crt", &p.admission_cert)?;
        let admission_key = write("admission-client.key", &p.admission_key)?;
        let (webhook_kubeconfig, admission_config) =
            admission_files(&dir, &admission_crt, &admission_key);
        write("admission-kubeconfig", &webhook_kubeconfig)?;
        let admission_config = write("admission-config.yaml", &admission_config)?;

        let port = || free_port().map_err(io("a free loopback port"));
        let (client_port, peer_port, api_port) = (port()?, port()?, port()?);
        let client_url = format!("http://127.0.0.1:{client_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        cp.etcd = Some(spawn(
            Command::new(&bins.etcd)
                .arg(format!("--data-dir={}", dir.join("etcd").display()))
                .arg(format!("--listen-client-urls={client_url}"))
                .arg(format!("--advertise-client-urls={client_url}"))
                .arg(format!("--listen-peer-urls={peer_url}"))
                .arg(format!("--initial-advertise-peer-urls={peer_url}"))
                .arg(format!("--initial-cluster=default={peer_url}"))
                .arg("--unsafe-no-fsync=true")
                .arg("--log-level=warn"),
            &dir.join("etcd.log"),
        )?);
        cp.server = format!("https://127.0.0.1:{api_port}");
        let mut args = vec![
            format!("--etcd-servers={client_url}"),
            format!("--cert-dir={}", dir.join("certs").display()),
            format!("--tls-cert-file={}", tls_crt.display()),
            format!("--tls-private-key-file={}", tls_key.display()),
            format!("--client-ca-file={}", ca.display()),
            "--bind-address=127.0.0.1".to_owned(),
            "--advertise-address=127.0.0.1".to_owned(),
            format!("--secure-port={api_port}"),
            "--service-cluster-ip-range=10.0.0.0/24".to_owned(),
            "--allow-privileged=true".to_owned(),
            "--authorization-mode=RBAC".to_owned(),
            // Needs the token controller, which does not run here (as envtest).
            "--disable-admission-plugins=ServiceAccount".to_owned(),
            format!(
                "--admission-control-config-file={}",
                admission_config.display()
            ),
            format!("--service-account-issuer={}", cp.server),
            format!("--service-account-key-file={}", sa_pub.display()),
            format!("--service-account-signing-key-file={}", sa_key.display()),
            "--v=1".to_owned(),
        ];
        if let Some(endpoint) = &options.tracing_endpoint {
            let config = write("tracing-config.yaml", &tracing_config(endpoint))?;
            args.push(format!("--tracing-config-file={}", config.display()));
        }
        cp.apiserver = Some(spawn(
            Command::new(&bins.kube_apiserver).args(&args),
            &dir.join("kube-apiserver.log"),
        )?);
        cp.apiserver_cmd = Some((bins.kube_apiserver.clone(), args));
        let admin = kubeconfig(&cp.server, &p.ca_pem, &p.admin_cert, &p.admin_key);
        fs::write(&cp.kubeconfig, admin).map_err(io("kubeconfig"))?;
        let scheduler = kubeconfig(&cp.server, &p.ca_pem, &p.scheduler_cert, &p.scheduler_key);
        fs::write(&cp.scheduler_kubeconfig, scheduler).map_err(io("scheduler-kubeconfig"))?;
        cp.wait_ready().await?;
        Ok(cp)
    }

    /// Stops kube-apiserver (SIGTERM, as a rolling upgrade does; SIGKILL after `grace`) and
    /// starts it again on the same address with the same flags (etcd keeps running); returns
    /// once it is ready, with how the stop went. Its log goes to `kube-apiserver-<n>.log`.
    #[allow(unsafe_code)] // libc calls (process and resource controls) with no safe wrapper.
    pub async fn restart_apiserver(&mut self, grace: Duration) -> Result<Restart, StartError> {
        let Some((program, args)) = self.apiserver_cmd.clone() else {
            return Err(StartError::NotReady(
                "kube-apiserver was not started".into(),
            ));
        };
        let started = Instant::now();
        let mut killed = false;
        if let Some(mut child) = self.apiserver.take() {
            // SAFETY: kill(2) on our own child.
            unsafe {
                libc::kill(child.id() as libc::pid_t, libc::SIGTERM);
            }
            let deadline = started + grace;
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            killed = matches!(child.try_wait(), Ok(None));
            let _ = child.kill();
            let _ = child.wait();
        }
        let stopped = started.elapsed();
        self.restarts += 1;
        let log = self.apiserver_log();
        self.apiserver = Some(spawn(Command::new(&program).args(&args), &log)?);
        self.wait_ready().await?;
        Ok(Restart {
            stopped,
            killed,
            ready: started.elapsed(),
        })
    }

    fn apiserver_log(&self) -> PathBuf {
        match self.restarts {
            0 => self.dir.join("kube-apiserver.log"),
            n => self.dir.join(format!("kube-apiserver-{n}.log")),
        }
    }

    async fn wait_ready(&mut self) -> Result<(), StartError> {
        let client = self.client().await?;
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let apiserver_log = self.apiserver_log();
            for (name, child, log) in [
                ("etcd", &mut self.etcd, self.dir.join("etcd.log")),
                ("kube-apiserver", &mut self.apiserver, apiserver_log),
            ] {
                if let Some(c) = child
                    && let Ok(Some(status)) = c.try_wait()
                {
                    return Err(StartError::NotReady(format!(
                        "{name} exited ({status}):\n{}",
                        tail(&log)
                    )));
                }
            }
            let req = http::Request::get("/readyz").body(Vec::new());
            if let Ok(req) = req
                && let Ok(body) = client.request_text(req).await
                && body.trim() == "ok"
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(StartError::NotReady(format!(
                    "kube-apiserver not ready after 90 s:\n{}",
                    tail(&self.apiserver_log())
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// A kube client with admin credentials.
    pub async fn client(&self) -> Result<kube::Client, StartError> {
        let kc = kube::config::Kubeconfig::read_from(&self.kubeconfig)
            .map_err(|e| StartError::Client(e.to_string()))?;
        let cfg =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| StartError::Client(e.to_string()))?;
        kube::Client::try_from(cfg).map_err(|e| StartError::Client(e.to_string()))
    }

    /// The directory holding certificates, kubeconfig, data and logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Process ids of etcd and kube-apiserver.
    pub fn pids(&self) -> Vec<u32> {
        [&self.etcd, &self.apiserver]
            .into_iter()
            .flatten()
            .map(Child::id)
            .collect()
    }

    /// Stops both processes and removes the directory. Idempotent.
    pub fn stop(&mut self) {
        for child in [self.apiserver.take(), self.etcd.take()]
            .into_iter()
            .flatten()
        {
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}
