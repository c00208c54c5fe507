//! The cluster in a box as tests drive it: services started as `cargo xtask up` starts them on a
//! test's own control plane, and the real kubectl.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use testenv::system::{Options, System, bin_dir_of_current_exe, check_binaries};

use crate::{Env, must, own_control_plane};

/// Starts `services` (binary names) as `cargo xtask up` does on the control plane of
/// `kubeconfig`, their webhooks seeing only `env`'s namespace (cluster-scoped objects all),
/// `webhook_args` given to every webhook; logs beside that kubeconfig.
pub async fn start_services_in(
    env: &Env,
    kubeconfig: &Path,
    client_ca: Option<PathBuf>,
    services: &[&str],
    webhook_args: Vec<String>,
) -> (System, Options) {
    start_services_with(
        env,
        kubeconfig,
        client_ca,
        services,
        webhook_args,
        Vec::new(),
    )
    .await
}

/// [`start_services_in`], every service (quota-state included) with the environment `vars`
/// (the OTLP exporter's settings, say).
pub async fn start_services_with(
    env: &Env,
    kubeconfig: &Path,
    client_ca: Option<PathBuf>,
    services: &[&str],
    webhook_args: Vec<String>,
    vars: Vec<(String, String)>,
) -> (System, Options) {
    let services: Vec<String> = services.iter().map(|s| (*s).to_owned()).collect();
    let bin_dir = must(
        bin_dir_of_current_exe().ok_or("no directory of the test binary"),
        "binaries",
    );
    must(check_binaries(&bin_dir, &services), "binaries");
    // Logs and CA bundles beside the control plane's files: removed with them at exit.
    let dir = kubeconfig.with_file_name(&env.ns);
    must(std::fs::create_dir_all(&dir), "log directory");
    let opts = Options {
        bin_dir,
        services,
        kubeconfig: kubeconfig.to_path_buf(),
        dir,
        namespace_selector: admission_kit::cluster::registration::only_namespace(&env.ns),
        name_suffix: format!("-{}", env.ns),
        namespace: env.ns.clone(),
        port_base: None,
        client_ca,
        webhook_args,
        args_of: Default::default(),
        env: vars,
    };
    let system = must(
        testenv::system::start(&env.client, &opts).await,
        "start the services",
    );
    (system, opts)
}

/// A test's own cluster in a box: a control plane with the test's namespace, and around it
/// kube-controller-manager, kube-scheduler and kwok's simulated nodes. Dropped, the components
/// stop before the control plane.
pub struct OwnCluster {
    /// The components around the control plane.
    pub cluster: testenv::cluster::Cluster,
    /// The admin client and the test's namespace.
    pub env: Env,
    /// etcd and kube-apiserver.
    pub cp: testenv::ControlPlane,
}

/// Starts an [`OwnCluster`] with namespace `ns` and `nodes` simulated nodes whose Pods get
/// addresses from `pods`.
pub async fn own_cluster(
    ns: &str,
    nodes: usize,
    pods: testenv::cluster::PodAddresses,
) -> OwnCluster {
    let (cp, client) = own_control_plane(ns).await;
    let bins = must(testenv::tools::locate_cluster(), "cluster tools");
    let cluster = must(
        testenv::cluster::Cluster::start_with(
            &cp,
            &bins,
            nodes,
            testenv::cluster::Settings {
                pod_addresses: pods,
                ..Default::default()
            },
        )
        .await,
        "cluster in a box",
    );
    OwnCluster {
        cluster,
        env: Env {
            client,
            ns: ns.to_owned(),
        },
        cp,
    }
}

/// The Running Pods labelled `app=<app>` (a Running Pod is bound to a node).
pub async fn running(
    pods: &kube::Api<k8s_openapi::api::core::v1::Pod>,
    app: &str,
) -> Result<Vec<k8s_openapi::api::core::v1::Pod>, String> {
    Ok(pods
        .list(&kube::api::ListParams::default().labels(&format!("app={app}")))
        .await
        .map_err(|e| e.to_string())?
        .items
        .into_iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .collect())
}

/// What a kubectl run gave.
#[derive(Debug, Clone)]
pub struct Output {
    /// Exit status 0.
    pub ok: bool,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error (warnings and refusals).
    pub stderr: String,
}

impl Output {
    /// Both streams, as a terminal shows them (standard error first: warnings precede results).
    pub fn shown(&self) -> String {
        format!("{}{}", self.stderr, self.stdout)
    }
}

/// Runs the built kubectl against `kubeconfig`.
pub fn kubectl(kubeconfig: &Path, args: &[&str]) -> Output {
    kubectl_with(kubeconfig, args, "")
}

/// As [`kubectl`], with `stdin` as its input (a manifest for `-f -`).
pub fn kubectl_with(kubeconfig: &Path, args: &[&str], stdin: &str) -> Output {
    let bins = must(testenv::tools::locate_cluster(), "kubectl");
    let mut child = must(
        Command::new(&bins.kubectl)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn(),
        "start kubectl",
    );
    if let Some(mut input) = child.stdin.take() {
        must(input.write_all(stdin.as_bytes()), "kubectl's input");
    }
    let out = must(child.wait_with_output(), "kubectl");
    Output {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}
