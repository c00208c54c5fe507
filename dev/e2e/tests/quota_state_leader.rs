//! Two quota-state replicas against the real API server, with mutual TLS as deployed: exactly one
//! holds the Lease and is ready (`/readyz` on the probe port, as the Deployment's readiness probe
//! asks, so only it receives admissions); when it stops, the other takes over.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use e2e::{Env, eventually};

fn binary() -> std::path::PathBuf {
    // target/<profile>/deps/<test> → target/<profile>/quota-state
    let exe = std::env::current_exe().unwrap_or_default();
    let bin = exe
        .parent()
        .and_then(|d| d.parent())
        .map(|d| d.join("quota-state"))
        .unwrap_or_default();
    assert!(
        bin.is_file(),
        "{} is missing: build it with `cargo build -p quota-state` (cargo test --workspace does)",
        bin.display()
    );
    bin
}

struct Replica(Child, u16);

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(
    kubeconfig: &std::path::Path,
    tls: &admission_kit::server::mtls::MtlsFiles,
    ns: &str,
    id: &str,
) -> Replica {
    let (port, probes) = (testenv::free_port().unwrap(), testenv::free_port().unwrap());
    let child = Command::new(binary())
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--metrics-listen",
            &format!("127.0.0.1:{probes}"),
            "--lease-namespace",
            ns,
            "--identity",
            id,
            "--lease-name",
            "quota-state-e2e",
        ])
        .arg("--tls-cert-file")
        .arg(&tls.cert)
        .arg("--tls-key-file")
        .arg(&tls.key)
        .arg("--client-ca-file")
        .arg(&tls.ca)
        .env("KUBECONFIG", kubeconfig)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Replica(child, probes)
}

async fn serving(probes: u16) -> bool {
    testenv::system::http_status(&format!("127.0.0.1:{probes}"), "/readyz").await == Some(200)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_serves_and_the_other_takes_over() {
    let env = Env::new("e2e-lease").await;
    let shared = testenv::shared().unwrap();
    let app = scheduling_webhook::app();
    env.install_crds(&app).await; // quota-state watches ElasticQuotas
    let dir = shared.kubeconfig.with_file_name(&env.ns);
    std::fs::create_dir_all(&dir).unwrap();
    let pki = admission_kit::server::mtls::Pki::new("quota-state e2e CA").unwrap();
    let tls = pki
        .write(&dir, "quota-state", &["quota-state".into()], true, false)
        .unwrap();
    let a = start(&shared.kubeconfig, &tls, &env.ns, "replica-a");
    let b = start(&shared.kubeconfig, &tls, &env.ns, "replica-b");
    let (leader, follower) = eventually(Duration::from_secs(40), || async {
        match (serving(a.1).await, serving(b.1).await) {
            (true, false) => Ok((a.1, b.1)),
            (false, true) => Ok((b.1, a.1)),
            other => Err(format!("serving: {other:?}")),
        }
    })
    .await;
    let (mut a, mut b) = (Some(a), Some(b));
    // Stop the leader; the follower acquires the Lease once it expires.
    if a.as_ref().is_some_and(|r| r.1 == leader) {
        a.take();
    } else {
        b.take();
    }
    eventually(Duration::from_secs(60), || async {
        if serving(follower).await {
            Ok(())
        } else {
            Err("follower not serving yet".to_owned())
        }
    })
    .await;
    drop((a, b));
}
