//! Koordinator's own webhook server, the peer our scheduling-webhook and node-config-webhook are
//! measured beside (`cargo xtask cluster-bench --peer koordinator`): koord-manager at
//! [`crate::tools::KOORDINATOR_PIN`] ([`crate::tools::koord_manager`]) with no controller
//! enabled, so that only its webhooks work, as upstream deploys them: its own webhook
//! configurations (the checkout's `config/webhook`, rendered with kustomize), its own
//! certificates (it writes them and the configurations' CA bundle itself), and its CRDs (the
//! checkout's `config/crd/bases`).
//!
//! Reached by the API server at `https://localhost:<port>`: koord-manager turns the
//! configurations' service references into that URL when `WEBHOOK_HOST` is set, and its
//! certificate names the host.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};

use crate::free_port;
use crate::system::{Running, SystemError, apply_crds, http_get, io};

/// The namespace koord-manager runs in (its default; the leader-election and certificate
/// writers are off, so nothing is written there).
pub const NAMESPACE: &str = "koordinator-system";

/// How koord-manager runs.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Its feature gates (`--feature-gates`), by name; the others keep upstream's defaults.
    /// A webhook whose gate is off is taken out of the configurations by koord-manager itself.
    pub gates: Vec<(String, bool)>,
}

/// A running koord-manager; stopped when dropped.
#[derive(Debug)]
pub struct KoordManager {
    /// The process (its `metrics` is the Prometheus endpoint).
    pub running: Running,
    /// The webhook server's port on localhost.
    pub webhook_port: u16,
}

fn invalid(e: impl std::fmt::Display) -> SystemError {
    SystemError::Invalid(e.to_string())
}

/// The checkout's CRD files, each a YAML text.
fn crds(checkout: &Path) -> Result<Vec<String>, SystemError> {
    let dir = checkout.join("config/crd/bases");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map_err(io(dir.display().to_string()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|f| std::fs::read_to_string(f).map_err(io(f.display().to_string())))
        .collect()
}

/// The checkout's webhook configurations, rendered as upstream renders them.
fn webhook_configurations(
    kustomize: &Path,
    checkout: &Path,
) -> Result<Vec<DynamicObject>, SystemError> {
    let out = Command::new(kustomize)
        .arg("build")
        .arg(checkout.join("config/webhook"))
        .output()
        .map_err(io("kustomize build"))?;
    if !out.status.success() {
        return Err(invalid(format!(
            "kustomize build config/webhook: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let mut objects = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        use serde::Deserialize;
        let o = DynamicObject::deserialize(doc).map_err(invalid)?;
        let kind = o.types.as_ref().map(|t| t.kind.as_str()).unwrap_or("");
        if kind.ends_with("WebhookConfiguration") {
            objects.push(o);
        }
    }
    if objects.len() != 2 {
        return Err(invalid(format!(
            "config/webhook rendered {} webhook configurations, not 2",
            objects.len()
        )));
    }
    Ok(objects)
}

fn configuration_api(client: &kube::Client, kind: &str) -> Api<DynamicObject> {
    let gvk = kube::core::GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind);
    Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk))
}

/// Whether every webhook of the configuration calls a URL with a CA bundle (koord-manager has
/// written its part).
fn is_wired(o: &DynamicObject) -> bool {
    o.data["webhooks"].as_array().is_some_and(|w| {
        !w.is_empty()
            && w.iter().all(|h| {
                h["clientConfig"]["url"].is_string()
                    && h["clientConfig"]["caBundle"]
                        .as_str()
                        .is_some_and(|b| !b.is_empty())
            })
    })
}

impl KoordManager {
    /// Installs the checkout's CRDs and webhook configurations in the cluster of `client`
    /// (whose kubeconfig is `kubeconfig`), starts koord-manager with its files in `dir`, and
    /// waits until it is ready and has wired both configurations to itself (at most 120 s).
    pub async fn start(
        client: &kube::Client,
        kubeconfig: &Path,
        bin: &Path,
        kustomize: &Path,
        checkout: &Path,
        dir: &Path,
        options: &Options,
    ) -> Result<Self, SystemError> {
        for crd in crds(checkout)? {
            apply_crds(client, &crd).await?;
        }
        let mut names = Vec::new();
        for o in webhook_configurations(kustomize, checkout)? {
            let kind = o.types.as_ref().map(|t| t.kind.clone()).unwrap_or_default();
            let name = o.metadata.name.clone().unwrap_or_default();
            configuration_api(client, &kind)
                .patch(
                    &name,
                    &PatchParams::apply("xtask").force(),
                    &Patch::Apply(&o),
                )
                .await
                .map_err(|e| SystemError::Api(format!("{kind} {name}"), e))?;
            names.push((kind, name));
        }
        let port = |what: &str| free_port().map_err(|e| invalid(format!("{what}: {e}")));
        let (webhook_port, metrics, health) = (port("webhook")?, port("metrics")?, port("health")?);
        let certs = dir.join("koord-manager-certs");
        std::fs::create_dir_all(&certs).map_err(io(certs.display().to_string()))?;
        let gates: Vec<String> = std::iter::once("WebhookFramework=true".to_owned())
            .chain(options.gates.iter().map(|(g, on)| format!("{g}={on}")))
            .collect();
        let mut cmd = Command::new(bin);
        cmd.arg(format!("--kubeconfig={}", kubeconfig.display()))
            // No controller: a name none has.
            .arg("--controllers=none")
            .arg("--enable-leader-election=false")
            .arg("--enable-pprof=false")
            .arg(format!("--metrics-addr=127.0.0.1:{metrics}"))
            .arg(format!("--health-probe-addr=127.0.0.1:{health}"))
            .arg(format!("--feature-gates={}", gates.join(",")))
            .env("WEBHOOK_HOST", "localhost")
            .env("WEBHOOK_PORT", webhook_port.to_string())
            .env("WEBHOOK_CERT_DIR", &certs)
            .env("WEBHOOK_CERT_WRITER", "fs")
            .env("POD_NAMESPACE", NAMESPACE);
        for (kind, name) in &names {
            let var = if kind.starts_with("Mutating") {
                "MUTATING_WEBHOOK_NAME"
            } else {
                "VALIDATING_WEBHOOK_NAME"
            };
            cmd.env(var, name);
        }
        let log = dir.join("koord-manager.log");
        let mut running = Running::spawn("koord-manager", cmd, log.clone())?;
        running.metrics = Some(format!("127.0.0.1:{metrics}"));
        let wait = Duration::from_secs(120);
        let deadline = Instant::now() + wait;
        let health = format!("127.0.0.1:{health}");
        loop {
            let ready = matches!(http_get(&health, "/readyz").await, Ok((200, _)));
            let mut wired = ready;
            for (kind, name) in names.iter().filter(|_| ready) {
                let o = configuration_api(client, kind)
                    .get(name)
                    .await
                    .map_err(|e| SystemError::Api(format!("{kind} {name}"), e))?;
                wired &= is_wired(&o);
            }
            if wired {
                break;
            }
            if !running.running() || Instant::now() > deadline {
                return Err(SystemError::NotReady("koord-manager".into(), wait, log));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Ok(Self {
            running,
            webhook_port,
        })
    }
}
