//! Helpers for end-to-end tests through the real API server: a namespace per test on the shared
//! control plane, webhook services served in-process on free loopback ports, and their webhook
//! configurations registered for that namespace only, so tests run in parallel without
//! affecting each other.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use admission_kit::cluster::registration::{
    ClientTarget, Registration, configurations, only_namespace,
};
use admission_kit::cluster::state::WatchState;
use admission_kit::review::app::EndpointInfo;
use admission_kit::review::handler::Context;
use admission_kit::server::http::{ServeOptions, Server};
use admission_kit::server::metrics::Metrics;
use admission_kit::server::mtls::SelfSigned;
use admission_kit::server::tls::{CertStore, install_crypto_provider};
use admission_kit::{App, FailurePolicy};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio::sync::oneshot;

pub mod cluster;
pub mod direct;
pub mod quota;
pub mod raw;
pub mod stream;

/// One test's view of the shared control plane.
pub struct Env {
    /// Admin client.
    pub client: kube::Client,
    /// This test's namespace.
    pub ns: String,
}

/// Panics with the reason (naming the command that builds the tools when they are missing).
fn must<T, E: std::fmt::Display>(r: Result<T, E>, what: &str) -> T {
    match r {
        Ok(v) => v,
        Err(e) => panic!("{what}: {e}"),
    }
}

impl Env {
    /// The label that marks this test's cluster-scoped objects (and only those reach its
    /// webhooks): `e2e.admission.local/test=<namespace>`.
    pub fn label(&self) -> (&'static str, String) {
        ("e2e.admission.local/test", self.ns.clone())
    }

    /// Connects to the shared control plane (starting it on first use) and creates a fresh
    /// namespace named after the test.
    pub async fn new(test: &str) -> Self {
        install_crypto_provider();
        let shared = must(testenv::shared(), "control plane");
        let client = must(testenv::client_for(&shared.kubeconfig).await, "kube client");
        let ns = format!(
            "{test}-{}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or_default()
        );
        create_namespace(&client, &ns).await;
        Self { client, ns }
    }

    /// Installs (server-side apply, idempotent) the CRDs of `app` and waits until established.
    pub async fn install_crds(&self, app: &App) {
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        for crd in &app.custom_resource_definitions() {
            let name = crd.metadata.name.clone().unwrap_or_default();
            must(
                api.patch(
                    &name,
                    &PatchParams::apply("e2e").force(),
                    &Patch::Apply(crd),
                )
                .await,
                "apply CRD",
            );
            eventually(Duration::from_secs(30), || async {
                let c = api.get(&name).await.map_err(|e| e.to_string())?;
                let ok = c
                    .status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True");
                if ok {
                    Ok(())
                } else {
                    Err("not established".to_owned())
                }
            })
            .await;
        }
    }

    /// Registers `app`'s endpoints served by `hook` for this namespace only.
    pub async fn register(
        &self,
        name: &str,
        app: &App,
        hook: &Webhook,
        policy: Option<FailurePolicy>,
        timeout_seconds: i32,
    ) {
        self.register_with(name, app, hook, policy, timeout_seconds, false)
            .await
    }

    /// As [`Env::register`], and objects (cluster-scoped ones included) are sent only when they
    /// carry [`Env::label`]: for kinds like Node that namespaces cannot separate.
    pub async fn register_labelled(
        &self,
        name: &str,
        app: &App,
        hook: &Webhook,
        policy: Option<FailurePolicy>,
    ) {
        self.register_with(name, app, hook, policy, 10, true).await
    }

    async fn register_with(
        &self,
        name: &str,
        app: &App,
        hook: &Webhook,
        policy: Option<FailurePolicy>,
        timeout_seconds: i32,
        labelled: bool,
    ) {
        let url = format!("https://{}", hook.addr);
        self.register_url(
            name,
            app,
            (&url, &hook.ca_pem),
            policy,
            timeout_seconds,
            labelled,
        )
        .await
    }

    /// Registers `app`'s endpoints for this namespace only, served at `base_url`
    /// (`https://host:port`) with a certificate `ca_pem` signed: replicas behind a load balancer.
    pub async fn register_at(
        &self,
        name: &str,
        app: &App,
        base_url: &str,
        ca_pem: &str,
        policy: Option<FailurePolicy>,
    ) {
        self.register_url(name, app, (base_url, ca_pem), policy, 10, false)
            .await
    }

    async fn register_url(
        &self,
        name: &str,
        app: &App,
        (base_url, ca_pem): (&str, &str),
        policy: Option<FailurePolicy>,
        timeout_seconds: i32,
        labelled: bool,
    ) {
        let reg = Registration {
            name: format!("{name}-{}", self.ns),
            client: ClientTarget::Url(base_url.to_owned()),
            ca_bundle: ca_pem.as_bytes().to_vec(),
            timeout_seconds,
            // Cluster-scoped kinds ignore namespace selectors; labelled registrations select by
            // object label instead, in any namespace.
            namespace_selector: if labelled {
                Default::default()
            } else {
                only_namespace(&self.ns)
            },
            failure_policy: policy,
            object_labels: if labelled {
                [self.label()]
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v))
                    .collect()
            } else {
                Default::default()
            },
        };
        let (m, v) = configurations(&reg, &EndpointInfo::of(app));
        let pp = PatchParams::apply("e2e").force();
        if m.webhooks.as_ref().is_some_and(|w| !w.is_empty()) {
            must(
                Api::<MutatingWebhookConfiguration>::all(self.client.clone())
                    .patch(&reg.name, &pp, &Patch::Apply(&m))
                    .await,
                "register mutating webhooks",
            );
        }
        if v.webhooks.as_ref().is_some_and(|w| !w.is_empty()) {
            must(
                Api::<ValidatingWebhookConfiguration>::all(self.client.clone())
                    .patch(&reg.name, &pp, &Patch::Apply(&v))
                    .await,
                "register validating webhooks",
            );
        }
    }
}

/// A control plane of the test's own (not the shared one: a test that restarts it, or needs
/// several clusters), with namespace `ns` created in it, and an admin client.
pub async fn own_control_plane(ns: &str) -> (testenv::ControlPlane, kube::Client) {
    own_control_plane_with(ns, &testenv::StartOptions::default()).await
}

/// [`own_control_plane`] started with `options` (its API server tracing, say).
pub async fn own_control_plane_with(
    ns: &str,
    options: &testenv::StartOptions,
) -> (testenv::ControlPlane, kube::Client) {
    let bins = must(testenv::tools::locate(), "tools");
    let cp = must(
        testenv::ControlPlane::start_with(&bins, options).await,
        "control plane",
    );
    let client = must(cp.client().await, "kube client");
    create_namespace(&client, ns).await;
    (cp, client)
}

/// Creates namespace `ns` (panics, naming it, when the API server refuses).
async fn create_namespace(client: &kube::Client, ns: &str) {
    let namespace: Namespace = must(
        serde_json::from_value(serde_json::json!({"metadata": {"name": ns}})),
        "namespace",
    );
    must(
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await,
        &format!("create namespace {ns}"),
    );
}

/// A webhook service running in-process, as `serve` runs it: self-signed TLS on a free loopback
/// port, cluster state from watches of the test's API server.
pub struct Webhook {
    /// Listening address.
    pub addr: std::net::SocketAddr,
    /// CA bundle for the webhook configuration.
    pub ca_pem: String,
    stop: Option<oneshot::Sender<()>>,
    done: Option<tokio::task::JoinHandle<()>>,
}

impl Webhook {
    /// Serves `app` (built under the service options the test wants); returns once its watch
    /// caches have synced.
    pub async fn start(app: &App, client: &kube::Client) -> Self {
        install_crypto_provider();
        let ss = must(
            SelfSigned::generate(&["127.0.0.1".into(), "localhost".into()]),
            "certificate",
        );
        let certs = CertStore::new();
        certs.set(must(ss.certified_key(), "certificate"));
        let settings = Context::new(Arc::new(admission_kit::review::lookup::EmptyState))
            .with_gates(Arc::new(app.gates.clone()));
        let state = Arc::new(WatchState::start(client.clone(), &app.watches, &settings));
        let synced = state.clone();
        let opts = ServeOptions {
            listen: "127.0.0.1:0"
                .parse()
                .unwrap_or_else(|_| std::net::SocketAddr::from(([127, 0, 0, 1], 0))),
            metrics_listen: None,
            shutdown_delay: Duration::ZERO,
            shutdown_grace: Duration::from_secs(5),
            ..ServeOptions::default()
        };
        let server = must(
            Server::bind(
                app,
                Context::new(state.clone()).with_gates(Arc::new(app.gates.clone())),
                certs,
                move || synced.synced(),
                must(Metrics::new(), "metrics"),
                opts,
            )
            .await,
            "bind",
        );
        let addr = server
            .local_addr()
            .unwrap_or_else(|| panic!("no local address"));
        eventually(Duration::from_secs(30), || async {
            if state.synced() {
                Ok(())
            } else {
                Err("watch caches not synced".to_owned())
            }
        })
        .await;
        let (tx, rx) = oneshot::channel::<()>();
        let done = tokio::spawn(server.run(async {
            let _ = rx.await;
        }));
        Self {
            addr,
            ca_pem: ss.ca_pem,
            stop: Some(tx),
            done: Some(done),
        }
    }

    /// Stops the server (graceful shutdown) and waits until the port is closed.
    pub async fn stop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(d) = self.done.take() {
            let _ = d.await;
        }
    }
}

/// Creates `obj` through `api`, retrying until the API server admits it or `limit` passes
/// (webhooks and caches that are still starting): then panics with the last refusal.
pub async fn create_eventually(
    api: &Api<kube::api::DynamicObject>,
    obj: &kube::api::DynamicObject,
    limit: Duration,
) {
    eventually(limit, || async {
        api.create(&PostParams::default(), obj)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await
}

/// A client of the shared control plane with its configuration edited by `edit`.
pub async fn client_with(edit: impl FnOnce(&mut kube::Config)) -> kube::Client {
    let shared = must(testenv::shared(), "control plane");
    let kc = must(
        kube::config::Kubeconfig::read_from(&shared.kubeconfig),
        "kubeconfig",
    );
    let mut cfg = must(
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default()).await,
        "kubeconfig",
    );
    edit(&mut cfg);
    must(kube::Client::try_from(cfg), "kube client")
}

/// A client of the shared control plane acting as `user` in `groups` (impersonation).
pub async fn as_user(user: &str, groups: &[&str]) -> kube::Client {
    client_with(|cfg| {
        cfg.auth_info.impersonate = Some(user.to_owned());
        cfg.auth_info.impersonate_groups = Some(groups.iter().map(|g| (*g).to_owned()).collect());
    })
    .await
}

/// The API error of `r`: (code, message); panics when it succeeded.
pub fn refused<T>(r: Result<T, kube::Error>, what: &str) -> (u16, String) {
    match r {
        Err(kube::Error::Api(e)) => (e.code, e.message),
        Err(e) => panic!("{what}: {e}"),
        Ok(_) => panic!("{what}: allowed"),
    }
}

/// Retries `f` until it succeeds or `limit` passes (then panics with the last error).
pub async fn eventually<T, F, Fut>(limit: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + limit;
    loop {
        match f().await {
            Ok(v) => return v,
            Err(e) if Instant::now() > deadline => panic!("gave up after {limit:?}: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// The value of a metric (summed over its label sets) on a metrics address; 0 when absent or
/// unreachable.
pub async fn metric(addr: &str, name: &str) -> f64 {
    let body = testenv::system::http_get(addr, "/metrics")
        .await
        .map(|(_, b)| b)
        .unwrap_or_default();
    body.lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter(|l| l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The API of `obj`'s kind, found by discovery, in its namespace (`default_namespace` when it
/// names none) or cluster-wide as the kind is scoped; for objects read from manifests.
pub async fn dynamic_api(
    client: &kube::Client,
    obj: &kube::api::DynamicObject,
    default_namespace: &str,
) -> Api<kube::api::DynamicObject> {
    let tm = must(
        obj.types.clone().ok_or("no apiVersion or kind"),
        "manifest object",
    );
    let (group, version) = tm
        .api_version
        .rsplit_once('/')
        .unwrap_or(("", tm.api_version.as_str()));
    let gvk = kube::core::GroupVersionKind::gvk(group, version, &tm.kind);
    let (ar, caps) = must(kube::discovery::pinned_kind(client, &gvk).await, &tm.kind);
    match caps.scope {
        kube::discovery::Scope::Namespaced => Api::namespaced_with(
            client.clone(),
            obj.metadata
                .namespace
                .as_deref()
                .unwrap_or(default_namespace),
            &ar,
        ),
        kube::discovery::Scope::Cluster => Api::all_with(client.clone(), &ar),
    }
}

/// The objects of a kustomize overlay (`overlay` relative to the workspace root), rendered with
/// the pinned kustomize as `kubectl apply -k` would send them.
pub fn render_overlay(overlay: &str) -> Vec<kube::api::DynamicObject> {
    use serde::Deserialize;
    let bins = must(testenv::tools::locate(), "tools");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = must(
        std::process::Command::new(&bins.kustomize)
            .arg("build")
            .arg(root.join(overlay))
            .output(),
        "kustomize build",
    );
    assert!(
        out.status.success(),
        "kustomize build {overlay}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = must(std::str::from_utf8(&out.stdout), "kustomize output");
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|d| must(kube::api::DynamicObject::deserialize(d), overlay))
        .collect()
}
