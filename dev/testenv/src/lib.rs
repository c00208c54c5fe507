//! A real Kubernetes control plane for end-to-end tests and `cargo xtask up`: kube-apiserver and
//! etcd built from the Go module proxy ([`tools`]) and run on loopback ([`control_plane`]).

pub mod cluster;
pub mod control_plane;
pub mod jaeger;
pub mod koordinator;
pub mod lb;
pub mod ports;
pub mod system;
pub mod tools;

use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

pub use control_plane::{ControlPlane, StartError, StartOptions};
pub use ports::free_port;
pub use tools::{BUILD_COMMAND, Binaries, ToolsError};

/// What tests need of the process-wide control plane.
#[derive(Debug, Clone)]
pub struct Shared {
    /// API server URL.
    pub server: String,
    /// Admin kubeconfig.
    pub kubeconfig: PathBuf,
    /// CA of the client certificate the API server presents to webhooks
    /// ([`ControlPlane::admission_client_ca`]).
    pub admission_client_ca: PathBuf,
}

static SHARED: OnceLock<Result<Shared, String>> = OnceLock::new();
static CLEANUP: Mutex<Option<(Vec<u32>, PathBuf)>> = Mutex::new(None);

#[allow(unsafe_code)] // kill(2): libc has no safe wrapper.
extern "C" fn cleanup_at_exit() {
    if let Ok(mut g) = CLEANUP.lock()
        && let Some((pids, dir)) = g.take()
    {
        for pid in pids {
            // SAFETY: plain kill(2) on our own children.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGKILL);
            }
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// One control plane for the whole test process, started on first use.
///
/// It is started from a thread that lives as long as the process, so the children's
/// parent-death signal fires only when the process ends; an `atexit` hook kills them and
/// removes their directory when the test binary exits, failed tests included. Tests share it
/// and isolate themselves by namespace.
#[allow(unsafe_code)] // libc calls (process and resource controls) with no safe wrapper.
pub fn shared() -> Result<Shared, String> {
    SHARED
        .get_or_init(|| {
            let bins = tools::locate().map_err(|e| e.to_string())?;
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::Builder::new()
                .name("testenv-control-plane".into())
                .spawn(move || {
                    let rt = match tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                    {
                        Ok(rt) => rt,
                        Err(e) => {
                            let _ = tx.send(Err(e.to_string()));
                            return;
                        }
                    };
                    match rt.block_on(ControlPlane::start(&bins)) {
                        Ok(cp) => {
                            if let Ok(mut g) = CLEANUP.lock() {
                                *g = Some((cp.pids(), cp.dir().to_path_buf()));
                            }
                            // SAFETY: registering a plain extern "C" function.
                            unsafe {
                                libc::atexit(cleanup_at_exit);
                            }
                            let _ = tx.send(Ok(Shared {
                                server: cp.server.clone(),
                                kubeconfig: cp.kubeconfig.clone(),
                                admission_client_ca: cp.admission_client_ca.clone(),
                            }));
                            // Keep the control plane (and this thread) alive until exit.
                            let _cp = cp;
                            loop {
                                std::thread::park();
                            }
                        }
                        Err(e) => {
                            let _ = tx.send(Err(e.to_string()));
                        }
                    }
                })
                .map_err(|e| e.to_string())?;
            rx.recv().map_err(|e| e.to_string())?
        })
        .clone()
}

/// A kube client for a kubeconfig file.
pub async fn client_for(kubeconfig: &std::path::Path) -> Result<kube::Client, String> {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).map_err(|e| e.to_string())?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    kube::Client::try_from(cfg).map_err(|e| e.to_string())
}
