//! What a client that is not the API server can do by talking to the webhook ports directly,
//! with quota-state and scheduling-webhook started as `cargo xtask up` starts them, through a
//! real kube-apiserver:
//!
//! - without client authentication (a cluster that cannot present the API server's
//!   certificate), from another address than the API server's: once the API server's first pod
//!   has vouched for its address, a forged review of a whole quota sent every 0.5 s makes no
//!   real pod fail (its reservation gives way); at full speed forged reviews hold at most a
//!   tenth of a quota and 32 reservations; a forged review naming a pending pod gets a
//!   reservation of its own and cannot replace that pod's; a review for a namespace that does
//!   not exist reserves nothing; no outstanding reservation is written back to the quota's
//!   `child-request` annotation;
//! - with `--client-ca-file` and `--allowed-client-names`: a client without a certificate, and
//!   one with the admin's certificate from the same CA (as a tenant's kubectl certificate would
//!   be), are refused; the API server's admission certificate is accepted;
//! - a flood of silent connections on the probe port stays within the memory limit and leaves
//!   `/readyz` and the webhook port answering.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use admission_kit::server::mtls;
use e2e::direct::{Direct, answer, pod_review};
use e2e::quota::{create_retrying, pod, start};
use e2e::{Env, eventually, metric};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use quota_protocol::tree::keys::CHILD_REQUEST;
use testenv::system::{Options, System};

/// The resident memory of process `pid`, in MiB.
fn rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap()
        / 1024
}

/// The webhook's CA, as its self-registration put it in its configuration, written to a file.
async fn webhook_ca(env: &Env, opts: &Options) -> PathBuf {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(env.client.clone());
    let cfg = api
        .get(&format!("scheduling-webhook{}", opts.name_suffix))
        .await
        .unwrap();
    let ca = cfg.webhooks.unwrap()[0]
        .client_config
        .ca_bundle
        .clone()
        .unwrap()
        .0;
    let path = opts.dir.join("scheduling-webhook-ca.crt");
    std::fs::write(&path, ca).unwrap();
    path
}

fn addr(system: &System) -> String {
    system.webhooks[0]
        .1
        .trim_start_matches("https://")
        .to_owned()
}

/// `quota_state_quota_used{quota, resource="cpu"}` on quota-state's metrics.
async fn used_cpu(system: &System, quota: &str) -> f64 {
    let m = system.quota_state_metrics().unwrap();
    let (_, body) = testenv::system::http_get(&m, "/metrics").await.unwrap();
    let series = format!("quota_state_quota_used{{quota=\"{quota}\",resource=\"cpu\"}} ");
    body.lines()
        .find_map(|l| l.strip_prefix(&series)?.parse().ok())
        .unwrap_or(0.0)
}

fn no_certificate(ca: &Path) -> std::sync::Arc<rustls::ClientConfig> {
    mtls::client_without_certificate(ca).unwrap().get()
}

/// Where forged reviews come from: another loopback address than the API server's (127.0.0.1),
/// as another Pod's connections would.
const FORGER: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 2));

/// A pod requesting 100m CPU, charged to `quota`.
fn small_pod(name: &str, quota: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": {"quota.scheduling.koordinator.sh/name": quota}},
        "spec": {"containers": [{"name": "main", "image": "registry.example.com/app:1",
                                 "resources": {"requests": {"cpu": "100m"}}}]}
    }))
    .unwrap()
}

/// Posts `n` forged reviews from [`FORGER`] at full speed, each a new pod of `cpu` that will
/// never exist; how many were admitted and how many were told to retry.
async fn flood(
    direct: &mut Direct,
    ns: &str,
    quota: &str,
    tag: &str,
    n: usize,
    cpu: &str,
) -> (usize, usize) {
    let (mut allowed, mut retry) = (0, 0);
    for i in 0..n {
        let review = pod_review(&format!("{tag}-{i}"), ns, &format!("{tag}-{i}"), quota, cpu);
        let (status, v) = direct.post("/validate-pod", &review).await.unwrap();
        assert_eq!(status, 200);
        match answer(&v) {
            (true, _) => allowed += 1,
            (false, m) if m.contains("retry in a few seconds") => retry += 1,
            (false, m) => panic!("forged review refused otherwise: {m}"),
        }
    }
    (allowed, retry)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forged_reviews_without_client_authentication_are_bounded() {
    let env = Env::new("e2e-forged").await;
    let (system, opts, quota) = start(&env, None, 10).await;
    let ca = webhook_ca(&env, &opts).await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    let qs = system.quota_state_metrics().unwrap();

    // The API server's first pod vouches for its address.
    create_retrying(&pods, &small_pod("first", &quota))
        .await
        .unwrap();
    eventually(Duration::from_secs(20), || async {
        match metric(&qs, "quota_state_trusted_peers").await {
            n if n >= 1.0 => Ok(()),
            n => Err(format!("{n} trusted peers")),
        }
    })
    .await;

    // Every 0.5 s, a forged review of all that is free of the quota (the largest amount in
    // 100m steps that it gets reserved), while 15 real 100m pods are created through the API
    // server, one every 0.5 s: every real pod is admitted.
    let forger = {
        let (addr, tls, ns, quota) = (
            addr(&system),
            no_certificate(&ca),
            env.ns.clone(),
            quota.clone(),
        );
        tokio::spawn(async move {
            let mut d = Direct::connect_from(&addr, tls, Some(FORGER))
                .await
                .unwrap();
            let mut held = Vec::new();
            for i in 0..20 {
                for milli in (1..=99).rev().map(|m| m * 100) {
                    let review = pod_review(
                        &format!("big-{i}-{milli}"),
                        &ns,
                        &format!("big-{i}"),
                        &quota,
                        &format!("{milli}m"),
                    );
                    if answer(&d.post("/validate-pod", &review).await.unwrap().1).0 {
                        held.push(milli);
                        break;
                    }
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            held
        })
    };
    let mut refused = Vec::new();
    for i in 0..15 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if let Err(e) = pods
            .create(
                &PostParams::default(),
                &small_pod(&format!("real-{i}"), &quota),
            )
            .await
        {
            refused.push(e.to_string());
        }
    }
    let held = forger.await.unwrap();
    let preempted = metric(&qs, "quota_state_untrusted_reservations_preempted_total").await;
    eprintln!(
        "all that is free, forged every 0.5 s: {} of 20 reserved (millicpu {held:?}), {preempted} dropped for real pods; real 100m pods refused: {} of 15",
        held.len(),
        refused.len()
    );
    assert!(refused.is_empty(), "{refused:?}");
    assert!(preempted >= 1.0, "the forged reservations gave way");

    // At full speed, once the forged reservations above have expired: 900m pods hold at most
    // a tenth of the quota (one of them), tiny ones at most 32 reservations of the forger's
    // address (the namespace's 5,000 stay for the API server's pods).
    eventually(Duration::from_secs(30), || async {
        match metric(&qs, "quota_state_untrusted_reservations").await {
            0.0 => Ok(()),
            n => Err(format!("{n} untrusted reservations outstanding")),
        }
    })
    .await;
    let mut direct = Direct::connect_from(&addr(&system), no_certificate(&ca), Some(FORGER))
        .await
        .unwrap();
    let started = Instant::now();
    let (allowed, retry) = flood(&mut direct, &env.ns, &quota, "share", 300, "900m").await;
    eprintln!(
        "300 forged 900m reviews in {:.2?}: {allowed} reserved, {retry} refused at the untrusted share",
        started.elapsed()
    );
    assert_eq!(allowed, 1, "a tenth of the 10-CPU quota");
    let (tiny, _) = flood(&mut direct, &env.ns, &quota, "tiny", 300, "1m").await;
    let outstanding = metric(&qs, "quota_state_untrusted_reservations").await;
    eprintln!(
        "300 forged 1m reviews: {tiny} reserved; the forger holds {outstanding} reservations"
    );
    assert_eq!(outstanding, 32.0, "the forger's address holds at most 32");
    // While the forger holds all it may, a real pod is admitted at once.
    pods.create(
        &PostParams::default(),
        &small_pod("real-while-flooded", &quota),
    )
    .await
    .unwrap();

    // A pod the API server is still admitting (its review sent here from the API server's
    // address): a forged review with its name and a tiny request gets a reservation of its own
    // and leaves the pending pod's 3 CPUs reserved.
    let mut api_server = Direct::connect(&addr(&system), no_certificate(&ca))
        .await
        .unwrap();
    let before = used_cpu(&system, &quota).await;
    let pending = pod_review("apiserver-1", &env.ns, "pending", &quota, "3");
    assert!(answer(&api_server.post("/validate-pod", &pending).await.unwrap().1).0);
    let forged = pod_review("forged-pending", &env.ns, "pending", &quota, "1m");
    let _ = direct.post("/validate-pod", &forged).await.unwrap();
    let after = used_cpu(&system, &quota).await;
    assert!(
        after >= before + 3.0 - 1e-9,
        "{before} -> {after}: the pending pod's 3 CPUs stay reserved"
    );

    // A namespace that does not exist: the answer, but nothing reserved.
    let ghost = pod_review("forged-ns", "no-such-namespace", "p", &quota, "5");
    assert!(answer(&api_server.post("/validate-pod", &ghost).await.unwrap().1).0);
    // (The forger's reservations may expire meanwhile: usage can only have gone down.)
    let ghosted = used_cpu(&system, &quota).await;
    assert!(ghosted <= after + 1e-9, "{after} -> {ghosted}");

    // The write-back shows the 17 pods that exist, never the outstanding reservations.
    let quotas = e2e::quota::quotas(&env);
    let rounds = metric(&qs, "quota_state_usage_write_rounds_total").await;
    eventually(Duration::from_secs(30), || async {
        let now = metric(&qs, "quota_state_usage_write_rounds_total").await;
        let q = quotas.get(&quota).await.map_err(|e| e.to_string())?;
        let shown = q
            .metadata
            .annotations
            .unwrap_or_default()
            .get(CHILD_REQUEST)
            .cloned();
        match shown.as_deref() {
            Some(r#"{"cpu":"1700m"}"#) if now >= rounds + 2.0 => Ok(()),
            other => Err(format!(
                "child-request {other:?} after {} rounds",
                now - rounds
            )),
        }
    })
    .await;
}

/// The admin's client certificate and key from the shared control plane's kubeconfig, as PEM.
fn admin_credentials(kubeconfig: &Path) -> (Vec<u8>, Vec<u8>) {
    use base64::Engine as _;
    let text = std::fs::read_to_string(kubeconfig).unwrap();
    let field = |key: &str| {
        let v = text
            .lines()
            .find_map(|l| l.trim().strip_prefix(key))
            .unwrap()
            .trim();
        base64::engine::general_purpose::STANDARD.decode(v).unwrap()
    };
    (field("client-certificate-data:"), field("client-key-data:"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn only_the_api_servers_certificate_opens_the_webhook_port() {
    let env = Env::new("e2e-client-names").await;
    let shared = testenv::shared().unwrap();
    let (system, opts, quota) = start(&env, Some(shared.admission_client_ca.clone()), 10).await;
    let ca = webhook_ca(&env, &opts).await;
    let review = pod_review("forged", &env.ns, "ghost", &quota, "1");
    let posted = |tls| {
        let (addr, review) = (addr(&system), review.clone());
        async move {
            let mut d = Direct::connect(&addr, tls).await?;
            d.post("/validate-pod", &review).await
        }
    };
    let none = posted(no_certificate(&ca)).await;
    assert!(none.is_err(), "no certificate: {none:?}");
    // The admin's certificate chains to the cluster CA, as a tenant's kubectl certificate would.
    let (cert, key) = admin_credentials(&shared.kubeconfig);
    let ca_pem = std::fs::read(&ca).unwrap();
    let admin = posted(mtls::client_config_from_pem(&cert, &key, &ca_pem).unwrap()).await;
    assert!(admin.is_err(), "the admin's certificate: {admin:?}");
    let m = system.webhooks[0].0.metrics.clone().unwrap();
    let forbidden = testenv::system::http_get(&m, "/metrics").await.unwrap().1;
    assert!(
        forbidden.lines().any(|l| l
            .starts_with("admission_webhook_tls_handshakes_refused_total{reason=\"forbidden\"} ")
            && !l.ends_with(" 0")),
        "the refusal is counted"
    );
    // The API server's own certificate opens it (so the refusals above are the names').
    let dir = shared.admission_client_ca.parent().unwrap();
    let (cert, key) = (
        std::fs::read(dir.join("admission-client.crt")).unwrap(),
        std::fs::read(dir.join("admission-client.key")).unwrap(),
    );
    let (status, _) = posted(mtls::client_config_from_pem(&cert, &key, &ca_pem).unwrap())
        .await
        .unwrap();
    assert_eq!(status, 200);
    // And through the API server, pods are admitted as ever.
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    pods.create(&PostParams::default(), &pod("real", &quota, 1))
        .await
        .unwrap();

    // A flood of silent connections on the probe port: the process stays under its 128Mi
    // limit, `/readyz` answers and the webhook port keeps admitting.
    let pid = system.webhooks[0].0.id();
    let rss = || rss_mib(pid);
    let before = rss();
    let mut silent = Vec::new();
    for _ in 0..4000 {
        if let Ok(s) = tokio::net::TcpStream::connect(&m).await {
            silent.push(s);
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count();
    let during = rss();
    eprintln!(
        "{} silent connections on the probe port: RSS {before} -> {during} MiB, {fds} descriptors open",
        silent.len()
    );
    assert!(during < 128, "RSS {during} MiB");
    assert!(fds < 400, "{fds} descriptors");
    let ready = testenv::system::http_status(&m, "/readyz").await;
    assert_eq!(ready, Some(200));
    pods.create(&PostParams::default(), &pod("during-flood", &quota, 1))
        .await
        .unwrap();
    drop(silent);
}

/// A TLS connection to `addr` from [`FORGER`], without a client certificate, speaking `alpn`.
async fn forger_tls(
    addr: &str,
    tls: std::sync::Arc<rustls::ClientConfig>,
    alpn: &[u8],
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    let mut cfg = (*tls).clone();
    cfg.alpn_protocols = vec![alpn.to_vec()];
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(std::net::SocketAddr::new(FORGER, 0)).unwrap();
    let tcp = socket.connect(addr.parse().unwrap()).await.unwrap();
    tokio_rustls::TlsConnector::from(std::sync::Arc::new(cfg))
        .connect(
            rustls::pki_types::ServerName::try_from("localhost").unwrap(),
            tcp,
        )
        .await
        .unwrap()
}

/// Where the API server presents no certificate, one address takes neither the webhook port's
/// in-flight budget (33 HTTP/1.1 reviews and 2 HTTP/2 connections × 250 streams, each declaring
/// a 1 MiB body and sending nothing) nor its memory (4,000 connections that never start TLS):
/// pods created through the API server meanwhile are all admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_address_takes_neither_the_webhook_port_nor_its_memory() {
    use tokio::io::AsyncWriteExt as _;
    let env = Env::new("e2e-port-budget").await;
    let (system, opts, quota) = start(&env, None, 100).await;
    let ca = webhook_ca(&env, &opts).await;
    let addr = addr(&system);
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    let pid = system.webhooks[0].0.id();
    let rss = || rss_mib(pid);
    let before = rss();

    // Reviews whose 1 MiB bodies never come.
    let head = "POST /validate-pod HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 1048576\r\n\r\n{";
    let mut held = Vec::new();
    for _ in 0..33 {
        let mut t = forger_tls(&addr, no_certificate(&ca), b"http/1.1").await;
        t.write_all(head.as_bytes()).await.unwrap();
        held.push(t);
    }
    let mut streams = Vec::new();
    for _ in 0..2 {
        let t = forger_tls(&addr, no_certificate(&ca), b"h2").await;
        let (mut send, conn) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(t),
        )
        .await
        .unwrap();
        tokio::spawn(conn);
        for _ in 0..250 {
            if send.ready().await.is_err() {
                break;
            }
            let body = http_body_util::StreamBody::new(futures::stream::pending::<
                Result<hyper::body::Frame<hyper::body::Bytes>, std::convert::Infallible>,
            >());
            let req = hyper::Request::post("https://localhost/validate-pod")
                .header("content-type", "application/json")
                .header("content-length", "1048576")
                .body(body)
                .unwrap();
            streams.push(send.send_request(req));
        }
    }
    // Connections that never start TLS.
    let mut silent = Vec::new();
    for _ in 0..4000 {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(std::net::SocketAddr::new(FORGER, 0)).unwrap();
        if let Ok(s) = socket.connect(addr.parse().unwrap()).await {
            silent.push(s);
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let during = rss();

    // Meanwhile, through the API server.
    let started = Instant::now();
    let mut failed = Vec::new();
    for i in 0..6 {
        if let Err(e) = pods
            .create(
                &PostParams::default(),
                &pod(&format!("real-{i}"), &quota, 1),
            )
            .await
        {
            failed.push(e.to_string());
        }
    }
    let m = system.webhooks[0].0.metrics.clone().unwrap();
    let busy = metric(&m, "admission_webhook_tls_handshakes_refused_total").await;
    eprintln!(
        "33 stalled 1 MiB reviews, {} stalled HTTP/2 streams and {} silent connections from one address: RSS {before} -> {during} MiB, {busy} handshakes turned away; 6 pods through the API server in {:.2?}, {} failed",
        streams.len(),
        silent.len(),
        started.elapsed(),
        failed.len()
    );
    assert!(failed.is_empty(), "{failed:?}");
    assert!(
        during < 128,
        "RSS {during} MiB (the Deployment's limit is 128Mi)"
    );
    drop((held, streams, silent));
}

/// Finding 7 against quota-state as `cargo xtask up` runs it: a holder of scheduling-webhook's
/// client key opens every connection it may, each with as many calls as it can, each announcing
/// a 4 MiB message and sending nothing more. The server takes at most 64 connections a
/// certificate and 32 calls a connection; its memory stays inside the Deployment's 512Mi limit
/// (before the bounds: 32,000 such calls took it from 55 to 619 MiB).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn calls_announcing_large_messages_keep_quota_state_within_its_limit() {
    let env = Env::new("e2e-qs-flood").await;
    let (system, opts, quota) = start(&env, None, 10).await;
    let files = testenv::system::quota_state_client_files(&env.client, &opts)
        .await
        .unwrap();
    let (addr, qs) = system.quota_state.as_ref().unwrap();
    let mut cfg = (*mtls::client(files, Duration::from_secs(60)).unwrap().get()).clone();
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    let cfg = std::sync::Arc::new(cfg);
    let before = rss_mib(qs.id());
    // A gRPC message header announcing 4 MiB, then nothing.
    let header = {
        let mut h = vec![0u8];
        h.extend_from_slice(&(4u32 << 20).to_be_bytes());
        hyper::body::Bytes::from(h)
    };
    // 32,000 calls in all, as in the finding.
    const CALLS: usize = 500;
    let (mut conns, mut calls) = (Vec::new(), Vec::new());
    for _ in 0..quota_state::auth::MAX_CONNECTIONS_PER_IDENTITY {
        let tcp = tokio::net::TcpStream::connect(addr.trim_start_matches("https://"))
            .await
            .unwrap();
        let server = rustls::pki_types::ServerName::try_from("quota-state").unwrap();
        // The webhook's own connections hold some of the key's places: past them the server
        // closes the connection after its handshake.
        let Ok(tls) = tokio_rustls::TlsConnector::from(cfg.clone())
            .connect(server, tcp)
            .await
        else {
            break;
        };
        let Ok((mut send, conn)) = hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(tls),
        )
        .await
        else {
            break;
        };
        conns.push(tokio::spawn(conn));
        for _ in 0..CALLS {
            if send.ready().await.is_err() {
                break;
            }
            let frames = futures::StreamExt::chain(
                futures::stream::iter([Ok::<_, std::convert::Infallible>(
                    hyper::body::Frame::data(header.clone()),
                )]),
                futures::stream::pending(),
            );
            let req = http::Request::post("https://quota-state/quotastate.v1.QuotaState/AdmitPod")
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .body(http_body_util::StreamBody::new(frames))
                .unwrap();
            calls.push(tokio::spawn(send.send_request(req)));
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let during = rss_mib(qs.id());
    eprintln!(
        "{} connections × {CALLS} calls announcing 4 MiB each: quota-state RSS {before} -> {during} MiB",
        conns.len()
    );
    assert!(conns.len() >= 32, "{} connections opened", conns.len());
    // Half the Deployment's limit: unbounded, these calls took it past the whole limit.
    assert!(during < 256, "RSS {before} -> {during} MiB");
    calls.iter().for_each(|c| c.abort());
    conns.iter().for_each(|c| c.abort());
    // And quota-state still answers the webhook.
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    create_retrying(&pods, &small_pod("after-flood", &quota))
        .await
        .unwrap();
}

/// After a restart (or a fail-over) quota-state trusts the addresses the serving replica saw
/// the API server's pods come from, remembered in its Lease `quota-state-peers`: a forger that
/// takes every share a stranger may have the moment the new one serves cannot make the API
/// server's first pod fail (without the Lease that pod was judged a stranger's, and refused at
/// the share the forger held: "from addresses that no created pod has vouched for (127.0.0.1),
/// cpu=1 is held already …").
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_quota_state_trusts_the_addresses_its_predecessor_saw() {
    use admission_kit::cluster::peers::{ANNOTATION, LEASE};
    let env = Env::new("e2e-remembered").await;
    let (mut system, opts, quota) = start(&env, None, 10).await;
    let ca = webhook_ca(&env, &opts).await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    create_retrying(&pods, &small_pod("first", &quota))
        .await
        .unwrap();
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(env.client.clone(), &opts.namespace);
    let remembered = eventually(Duration::from_secs(20), || async {
        let lease = leases.get_opt(LEASE).await.map_err(|e| e.to_string())?;
        lease
            .and_then(|l| l.metadata.annotations?.get(ANNOTATION).cloned())
            .filter(|a| a.contains("\"127.0.0.1\""))
            .ok_or_else(|| "not remembered yet".to_owned())
    })
    .await;
    eprintln!("{LEASE}: {remembered}");

    // A new quota-state on the same address.
    let (url, old) = system.quota_state.take().unwrap();
    old.kill();
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    let new = testenv::system::spawn_quota_state(&opts, port).unwrap();
    let qs = new.metrics.clone().unwrap();
    system.quota_state = Some((url, new));
    eventually(Duration::from_secs(30), || async {
        match metric(&qs, "quota_state_serving").await {
            1.0 => Ok(()),
            n => Err(format!("serving {n}")),
        }
    })
    .await;
    let trusted = metric(&qs, "quota_state_trusted_peers").await;
    assert!(trusted >= 1.0, "trusted before any pod: {trusted}");

    // The forger takes the strangers' tenth of the quota as soon as the webhook reaches the new
    // quota-state; the API server's next pod is admitted at its first try.
    let mut direct = Direct::connect_from(&addr(&system), no_certificate(&ca), Some(FORGER))
        .await
        .unwrap();
    // Refused while the webhook is not connected again yet.
    let mut held = false;
    for i in 0..100 {
        let review = pod_review(&format!("take-{i}"), &env.ns, "take", &quota, "1");
        held = answer(&direct.post("/validate-pod", &review).await.unwrap().1).0;
        if held {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(held, "the forger holds the strangers' share");
    pods.create(&PostParams::default(), &small_pod("after-restart", &quota))
        .await
        .unwrap();
    eprintln!(
        "restarted quota-state: {trusted} address trusted before any pod; the forger's 1-CPU \
         reservation did not refuse the API server's first pod"
    );
}
