//! The world around the API server: kube-controller-manager and kube-scheduler (v1.34.4, the
//! API server's module) and kwok, which plays the kubelets of simulated nodes, started against a
//! [`ControlPlane`]. With them a Deployment gets Pods, the scheduler binds them, they turn
//! Running with IPs, a Job's Pods finish, and every node sends heartbeats; no container runs.
//!
//! kwok's behaviour is our stage file (`kwok/stages.yaml`, compiled in). The processes die with
//! the [`Cluster`] (and, like the control plane's, with the process that started them).

use std::path::PathBuf;
use std::process::{Child, Command};

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, PostParams};

use crate::control_plane::{io, spawn};
use crate::tools::ClusterBinaries;
use crate::{ControlPlane, StartError};

/// The annotation by which kwok takes a node as one of its own.
pub const KWOK_NODE_ANNOTATION: &str = "kwok.x-k8s.io/node";

/// What kwok does to nodes and Pods.
const STAGES: &str = include_str!("../kwok/stages.yaml");

/// Where simulated Pods' IPs come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PodAddresses {
    /// `10.244.0.0/16`, as a cluster's Pod network: Services get endpoints (nothing answers at
    /// them).
    #[default]
    Routable,
    /// `127.1.0.0/16`: a process of the test listening on every address answers at each Pod's
    /// IP, as the Pod's container would (say, a model server's drain endpoint). EndpointSlices
    /// refuse loopback addresses, so Services get no endpoints.
    Loopback,
}

impl PodAddresses {
    fn cidr(self) -> &'static str {
        match self {
            Self::Routable => "10.244.0.0/16",
            Self::Loopback => "127.1.0.0/16",
        }
    }
}

/// How a [`Cluster`] is started, beyond its node count.
#[derive(Debug, Clone, Copy, Default)]
pub struct Settings {
    /// Where simulated Pods' IPs come from.
    pub pod_addresses: PodAddresses,
    /// Requests per second kube-controller-manager and kube-scheduler may send (burst twice
    /// that). `None` keeps their defaults (20 and 50), which hold a thousand-Pod scale run to
    /// the controllers' pace rather than the API server's and the webhooks'.
    pub client_qps: Option<u32>,
}

/// kube-controller-manager, kube-scheduler and kwok running against one control plane.
pub struct Cluster {
    children: Vec<(&'static str, Child)>,
    /// Where their logs are (`<name>.log`).
    pub dir: PathBuf,
}

impl Cluster {
    /// Starts the three against `cp` and creates `nodes` simulated nodes (`kwok-node-<i>`,
    /// 32 CPUs and 128 GiB each) that kwok turns Ready.
    pub async fn start(
        cp: &ControlPlane,
        bins: &ClusterBinaries,
        nodes: usize,
    ) -> Result<Self, StartError> {
        Self::start_with(cp, bins, nodes, Settings::default()).await
    }

    /// [`Cluster::start`] with `settings`.
    pub async fn start_with(
        cp: &ControlPlane,
        bins: &ClusterBinaries,
        nodes: usize,
        settings: Settings,
    ) -> Result<Self, StartError> {
        let dir = cp.dir().to_path_buf();
        let kubeconfig = cp.kubeconfig.display().to_string();
        let stages = dir.join("kwok-stages.yaml");
        std::fs::write(&stages, STAGES).map_err(io(stages.display().to_string()))?;
        // What both components take: the admin's kubeconfig for checking their callers, one
        // instance (no leader election), no serving port.
        let mut component = vec![
            format!("--authentication-kubeconfig={kubeconfig}"),
            format!("--authorization-kubeconfig={kubeconfig}"),
            "--leader-elect=false".to_owned(),
            "--bind-address=127.0.0.1".to_owned(),
            "--secure-port=0".to_owned(),
            "--v=1".to_owned(),
        ];
        if let Some(qps) = settings.client_qps {
            component.push(format!("--kube-api-qps={qps}"));
            component.push(format!("--kube-api-burst={}", qps.saturating_mul(2)));
        }
        let mut cluster = Self {
            children: Vec::new(),
            dir: dir.clone(),
        };
        let cm = spawn(
            Command::new(&bins.controller_manager)
                .args(&component)
                .arg(format!("--kubeconfig={kubeconfig}"))
                .arg(format!(
                    "--service-account-private-key-file={}",
                    dir.join("sa.key").display()
                ))
                .arg(format!("--root-ca-file={}", dir.join("ca.crt").display()))
                // The controllers act as the admin (one identity to read in the API's audit), not
                // through a service account each: no token controller is needed for them.
                .arg("--use-service-account-credentials=false"),
            &dir.join("kube-controller-manager.log"),
        )?;
        cluster.children.push(("kube-controller-manager", cm));
        // The scheduler binds as itself (`system:kube-scheduler`), as in a real cluster: the
        // user that binding rules (PB) check.
        let scheduler = spawn(
            Command::new(&bins.scheduler).args(&component).arg(format!(
                "--kubeconfig={}",
                cp.scheduler_kubeconfig.display()
            )),
            &dir.join("kube-scheduler.log"),
        )?;
        cluster.children.push(("kube-scheduler", scheduler));
        let kwok = spawn(
            Command::new(&bins.kwok)
                .arg(format!("--kubeconfig={kubeconfig}"))
                .arg(format!("--config={}", stages.display()))
                .arg(format!(
                    "--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake"
                ))
                .arg(format!("--cidr={}", settings.pod_addresses.cidr()))
                .arg("--node-ip=127.0.0.1")
                .arg("--node-lease-duration-seconds=40"),
            &dir.join("kwok.log"),
        )?;
        cluster.children.push(("kwok", kwok));
        let client = cp.client().await?;
        let api: Api<Node> = Api::all(client);
        for i in 0..nodes {
            let node: Node = serde_json::from_value(serde_json::json!({
                "metadata": {
                    "name": format!("kwok-node-{i}"),
                    "annotations": {KWOK_NODE_ANNOTATION: "fake"},
                    "labels": {"type": "kwok", "kubernetes.io/hostname": format!("kwok-node-{i}")}
                },
                "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                           "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"}}
            }))
            .map_err(|e| StartError::NotReady(format!("node: {e}")))?;
            match api.create(&PostParams::default(), &node).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(StartError::NotReady(format!("node kwok-node-{i}: {e}"))),
            }
        }
        Ok(cluster)
    }

    /// Process ids, by name.
    pub fn pids(&self) -> Vec<(&'static str, u32)> {
        self.children.iter().map(|(n, c)| (*n, c.id())).collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for (_, c) in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
