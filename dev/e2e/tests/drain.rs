//! lifecycle-webhook through the real kube-apiserver: Pods opted in to drain before delete, their
//! status set through the API (`podIP: 127.0.0.1`), and a loopback HTTP server playing the model
//! server. Deletions and evictions are refused naming the progress until the server says done;
//! a dry run calls nothing; past the deadline the deletion proceeds; an administrator group is
//! never held; annotations naming another host are never called; the service down lets
//! deletions through (failure policy Ignore).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use e2e::{Env, Webhook, eventually, refused};
use http_body_util::Full;
use hyper::body::Bytes;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::api::{Api, DeleteParams, EvictParams, Patch, PatchParams, PostParams};
use lifecycle_webhook::{LABEL, PATH_ANNOTATION, PORT_ANNOTATION, TIMEOUT_ANNOTATION};
use serde_json::json;

/// What the model server answers per path, and every POST it saw (path, Host header).
#[derive(Default)]
struct Script {
    answers: BTreeMap<String, (u16, String)>,
    posts: Vec<(String, String)>,
}

/// A loopback HTTP server playing the Pods' drain endpoints.
#[derive(Clone)]
struct ModelServer {
    addr: SocketAddr,
    script: Arc<Mutex<Script>>,
}

impl ModelServer {
    async fn start(ip: &str) -> Self {
        let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let script = Arc::new(Mutex::new(Script::default()));
        let s = script.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let s = s.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(
                        move |req: hyper::Request<hyper::body::Incoming>| {
                            let s = s.clone();
                            async move {
                                let path = req.uri().path().to_owned();
                                let host = req
                                    .headers()
                                    .get(http::header::HOST)
                                    .and_then(|h| h.to_str().ok())
                                    .unwrap_or_default()
                                    .to_owned();
                                let (status, body) = {
                                    let mut s = s.lock().unwrap();
                                    if req.method() == http::Method::POST {
                                        s.posts.push((path.clone(), host));
                                    }
                                    s.answers
                                        .get(&path)
                                        .cloned()
                                        .unwrap_or((404, String::new()))
                                };
                                let mut resp = hyper::Response::new(Full::new(Bytes::from(body)));
                                *resp.status_mut() = http::StatusCode::from_u16(status).unwrap();
                                Ok::<_, std::convert::Infallible>(resp)
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self { addr, script }
    }

    fn answer(&self, pod: &str, status: u16, body: &str) {
        self.script
            .lock()
            .unwrap()
            .answers
            .insert(format!("/drain/{pod}"), (status, body.to_owned()));
    }

    /// The POSTs seen for `pod`'s path, with their Host headers.
    fn posts(&self, pod: &str) -> Vec<String> {
        let path = format!("/drain/{pod}");
        let s = self.script.lock().unwrap();
        s.posts
            .iter()
            .filter(|(p, _)| *p == path)
            .map(|(_, h)| h.clone())
            .collect()
    }

    fn all_posts(&self) -> usize {
        self.script.lock().unwrap().posts.len()
    }
}

/// Creates Pod `name`, opted in with `annotations` (a drain at the server's `/drain/<name>`
/// unless they say otherwise), on `node`, then sets its status as a kubelet would.
async fn running_pod(
    pods: &Api<Pod>,
    name: &str,
    node: &str,
    server: &ModelServer,
    annotations: serde_json::Value,
) {
    let mut ann = json!({PORT_ANNOTATION: server.addr.port().to_string(), PATH_ANNOTATION: format!("/drain/{name}")});
    json_patch::merge(&mut ann, &annotations);
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {LABEL: "true"}, "annotations": ann},
        "spec": {"nodeName": node, "containers": [{"name": "server", "image": "model-server:1"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let status = json!({"status": {"phase": "Running", "podIP": "127.0.0.1", "podIPs": [{"ip": "127.0.0.1"}]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .unwrap();
}

/// Lists `ip` as the API server's address in `env`'s namespace, as quota-state writes it.
async fn list_api_server(env: &Env, ip: &str) {
    use admission_kit::cluster::peers::{ANNOTATION, LEASE, encode};
    let text = encode(
        &[(ip.to_owned(), Duration::ZERO)],
        std::time::SystemTime::now(),
    );
    Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(env.client.clone(), &env.ns)
        .create(
            &PostParams::default(),
            &serde_json::from_value(
                json!({"metadata": {"name": LEASE, "annotations": {ANNOTATION: text}}}),
            )
            .unwrap(),
        )
        .await
        .unwrap();
}

/// lifecycle-webhook in this process with `overrides` of its options, registered for `env`'s
/// namespaces through the real API server and active (probed with throwaway Pods); Pods of
/// `env`'s namespace through a client that does not retry refusals (as kubectl), and a Node.
async fn serve(
    env: &Env,
    server: &ModelServer,
    overrides: &[(&'static str, &str)],
) -> (Webhook, admission_kit::App, Api<Pod>, String) {
    let options = lifecycle_webhook::options::Options::with(overrides).unwrap();
    let app = lifecycle_webhook::app_with(lifecycle_webhook::rules::Drainer::new(
        Arc::new(lifecycle_webhook::cluster::Kube::with_client(
            env.client.clone(),
        )),
        Arc::new(lifecycle_webhook::call::Http::default()),
        options,
    ));
    let hook = Webhook::start(&app, &env.client).await;
    env.register("drain", &app, &hook, None, app.timeout_seconds)
        .await;
    // As kubectl: a refusal is an answer, not retried by the client (kube-rs retries 429s).
    let once = e2e::client_with(|c| c.default_retry = false).await;
    let pods: Api<Pod> = Api::namespaced(once, &env.ns);
    let node = format!("node-{}", env.ns);
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(env.client.clone());
    let (lk, lv) = env.label();
    nodes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": node, "labels": {lk: lv}}}))
                .unwrap(),
        )
        .await
        .unwrap();
    // Until the registration is active a deletion goes through: probe with throwaway Pods.
    let mut n = 0;
    eventually(Duration::from_secs(30), || {
        n += 1;
        let (pods, server, node) = (pods.clone(), server.clone(), node.clone());
        async move {
            let name = format!("probe-{n}");
            server.answer(&name, 202, "");
            running_pod(&pods, &name, &node, &server, json!({})).await;
            match pods
                .delete(&name, &DeleteParams::default().grace_period(0))
                .await
            {
                Err(kube::Error::Api(e)) if e.code == 403 => Ok(()),
                other => Err(format!("not active yet: {:?}", other.map(|_| ()))),
            }
        }
    })
    .await;
    (hook, app, pods, node)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletions_and_evictions_wait_for_the_drain() {
    let env = Env::new("e2e-drain").await;
    let server = ModelServer::start("127.0.0.1").await;
    let decoy = ModelServer::start("127.0.0.2").await;
    let (mut hook, _, pods, node) = serve(
        &env,
        &server,
        &[
            ("drain-record-namespace", env.ns.as_str()),
            ("admin-groups", "drain-admins"),
        ],
    )
    .await;
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(env.client.clone());
    let dp = DeleteParams::default();

    // A model server draining: deletion refused naming the progress, again on retry, then
    // allowed once it says done.
    server.answer("llm-0", 202, "12 requests in flight\n");
    running_pod(&pods, "llm-0", &node, &server, json!({})).await;
    let (code, msg) = refused(pods.delete("llm-0", &dp).await, "delete llm-0");
    assert_eq!(code, 403, "{msg}");
    assert!(
        msg.contains("denied the request: draining llm-0: 12 requests in flight, started ")
            && msg.ends_with("; deletion proceeds when drained or at 10m0s"),
        "{msg}"
    );
    println!("kubectl delete pod llm-0 → Error from server (Forbidden): {msg}");
    let (code, _) = refused(pods.delete("llm-0", &dp).await, "delete llm-0 again");
    assert_eq!(code, 403);
    server.answer("llm-0", 200, "");
    pods.delete("llm-0", &dp).await.unwrap();
    assert!(
        pods.get("llm-0")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    let posts = server.posts("llm-0");
    assert_eq!(posts.len(), 3, "one drain call per review: {posts:?}");
    assert!(
        posts
            .iter()
            .all(|h| *h == format!("127.0.0.1:{}", server.addr.port())),
        "{posts:?}"
    );

    // The eviction API: 429 (kubectl drain retries), then allowed. The API server's address
    // listed as quota-state lists it once a pod admitted from it was created (LD-13; quota-state's
    // side: `forged_reviews::a_new_quota_state_trusts_the_addresses_its_predecessor_saw`).
    list_api_server(&env, "127.0.0.1").await;
    server.answer("trainer-0", 202, "writing checkpoint step 1200");
    running_pod(&pods, "trainer-0", &node, &server, json!({})).await;
    let (code, msg) = refused(
        pods.evict("trainer-0", &EvictParams::default()).await,
        "evict",
    );
    assert_eq!(code, 429, "{msg}");
    assert!(
        msg.contains("draining trainer-0: writing checkpoint step 1200, started "),
        "{msg}"
    );
    println!("kubectl drain → error when evicting pods/\"trainer-0\" (will retry after 5s): {msg}");
    server.answer("trainer-0", 200, "");
    pods.evict("trainer-0", &EvictParams::default())
        .await
        .unwrap();

    // Dry runs, of a deletion and of an eviction, start nothing.
    server.answer("dry-0", 202, "");
    running_pod(&pods, "dry-0", &node, &server, json!({})).await;
    pods.delete(
        "dry-0",
        &DeleteParams {
            dry_run: true,
            ..DeleteParams::default()
        },
    )
    .await
    .unwrap();
    let dry_evict = EvictParams {
        delete_options: Some(DeleteParams {
            dry_run: true,
            ..DeleteParams::default()
        }),
        post_options: PostParams {
            dry_run: true,
            ..PostParams::default()
        },
    };
    pods.evict("dry-0", &dry_evict).await.unwrap();
    assert!(server.posts("dry-0").is_empty(), "a dry run called the Pod");
    assert!(
        pods.get("dry-0")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_none()
    );

    // Past the deadline the deletion proceeds although the server still says draining.
    server.answer("slow-0", 202, "still busy");
    running_pod(
        &pods,
        "slow-0",
        &node,
        &server,
        json!({TIMEOUT_ANNOTATION: "3s"}),
    )
    .await;
    let (code, msg) = refused(pods.delete("slow-0", &dp).await, "delete slow-0");
    assert!(code == 403 && msg.ends_with("or at 3s"), "{msg}");
    eventually(Duration::from_secs(30), || async {
        pods.delete("slow-0", &dp)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;
    assert!(
        server.posts("slow-0").len() >= 2,
        "called until the deadline"
    );

    // An administrator group deletes at once; the same deletion by another user waits.
    server.answer("admin-0", 202, "");
    running_pod(&pods, "admin-0", &node, &server, json!({})).await;
    let rbac: Api<k8s_openapi::api::rbac::v1::RoleBinding> =
        Api::namespaced(env.client.clone(), &env.ns);
    rbac.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "metadata": {"name": "pod-deleters"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"},
                         {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"}]
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    let bob: Api<Pod> = Api::namespaced(
        e2e::as_user("bob", &["system:authenticated"]).await,
        &env.ns,
    );
    // The binding reaches the authorizer a moment after it is written: until bob may read the
    // Pod, RBAC would refuse the deletion before the webhook sees it.
    eventually(Duration::from_secs(30), || async {
        bob.get("admin-0")
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;
    let (code, msg) = refused(bob.delete("admin-0", &dp).await, "delete by bob");
    assert!(
        code == 403 && !msg.contains("cannot delete resource"),
        "{msg}"
    );
    let alice: Api<Pod> = Api::namespaced(
        e2e::as_user("alice", &["drain-admins", "system:authenticated"]).await,
        &env.ns,
    );
    alice.delete("admin-0", &dp).await.unwrap();

    // Annotations naming another host: the only address called is the Pod's own IP.
    let elsewhere = format!("127.0.0.2:{}", decoy.addr.port());
    decoy.answer("evil-0", 202, "");
    server.answer("evil-0", 202, "");
    running_pod(
        &pods,
        "evil-0",
        &node,
        &server,
        json!({"drain.admission-webhooks.io/host": "127.0.0.2",
               "drain.admission-webhooks.io/url": format!("http://{elsewhere}/drain/evil-0")}),
    )
    .await;
    refused(pods.delete("evil-0", &dp).await, "delete evil-0");
    running_pod(
        &pods,
        "evil-1",
        &node,
        &server,
        json!({PATH_ANNOTATION: format!("http://{elsewhere}/drain/evil-1")}),
    )
    .await;
    pods.delete("evil-1", &dp).await.unwrap();
    assert_eq!(decoy.all_posts(), 0, "another host was called");
    assert_eq!(server.posts("evil-0").len(), 1);

    // Forged DELETE reviews, posted to the webhook port from another address as any Pod could
    // where the API server presents no certificate (LD-12): one naming a real opted-in Pod with
    // another uid, one with its uid but the decoy's IP. Both proceed, nothing is called and no
    // drain starts.
    server.answer("forged-0", 202, "");
    decoy.answer("forged-0", 202, "");
    running_pod(&pods, "forged-0", &node, &server, json!({})).await;
    let real = pods.get("forged-0").await.unwrap();
    let uid = real.metadata.uid.clone().unwrap();
    let ca = std::env::temp_dir().join(format!("{}-drain-ca.pem", env.ns));
    std::fs::write(&ca, &hook.ca_pem).unwrap();
    let tls = admission_kit::server::mtls::client_without_certificate(&ca)
        .unwrap()
        .get();
    let mut forger = e2e::direct::Direct::connect_from(
        &hook.addr.to_string(),
        tls,
        Some("127.0.0.3".parse().unwrap()),
    )
    .await
    .unwrap();
    for (what, forged_uid, ip) in [
        (
            "another uid",
            "00000000-0000-4000-8000-000000000000",
            "127.0.0.1",
        ),
        ("the decoy's IP", uid.as_str(), "127.0.0.2"),
    ] {
        let mut pod = serde_json::to_value(&real).unwrap();
        pod["metadata"]["uid"] = json!(forged_uid);
        pod["status"]["podIP"] = json!(ip);
        pod["metadata"]["annotations"][PORT_ANNOTATION] = json!(decoy.addr.port().to_string());
        let review = json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": format!("forged-{what}"),
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "name": "forged-0", "namespace": env.ns, "operation": "DELETE",
                "userInfo": {"username": "system:serviceaccount:tenant:forger"},
                "oldObject": pod, "dryRun": false
            }
        });
        let (status, answer) = forger
            .post("/validate-pod-deletion", &review)
            .await
            .unwrap();
        assert_eq!(status, 200, "{what}");
        assert_eq!(answer["response"]["allowed"], true, "{what}: {answer}");
        assert!(
            answer["response"].get("warnings").is_none(),
            "{what}: {answer}"
        );
    }
    // A forged eviction of the same Pod (LD-13): the address is not the API server's.
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "forged-eviction",
            "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "eviction",
            "name": "forged-0", "namespace": env.ns, "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:tenant:forger"},
            "object": {"apiVersion": "policy/v1", "kind": "Eviction",
                       "metadata": {"name": "forged-0", "namespace": env.ns}},
            "dryRun": false
        }
    });
    let (status, answer) = forger
        .post("/validate-pod-eviction", &review)
        .await
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(answer["response"]["allowed"], true, "{answer}");
    assert_eq!(
        answer["response"]["warnings"],
        json!([
            "eviction of forged-0 proceeds without a drain: it did not come from an address known as the API server's"
        ]),
        "{answer}"
    );
    assert_eq!(
        decoy.all_posts(),
        0,
        "a forged review had another address called"
    );
    assert!(
        server.posts("forged-0").is_empty(),
        "a forged review started a drain"
    );
    let record: Api<ConfigMap> = Api::namespaced(env.client.clone(), &env.ns);
    let drains = record
        .get("lifecycle-webhook-drains")
        .await
        .map(|c| c.data.unwrap_or_default())
        .unwrap_or_default();
    assert!(
        !drains.contains_key(&uid),
        "a forged review recorded a drain"
    );
    let _ = std::fs::remove_file(&ca);
    println!(
        "forged DELETE and eviction reviews from 127.0.0.3: admitted, nothing called, no drain recorded"
    );

    // A Pod whose Node is gone is deleted at once.
    server.answer("orphan-0", 202, "");
    running_pod(
        &pods,
        "orphan-0",
        &format!("gone-{}", env.ns),
        &server,
        json!({}),
    )
    .await;
    pods.delete("orphan-0", &dp).await.unwrap();
    assert!(server.posts("orphan-0").is_empty());

    // The record: in the service's namespace, one entry per drained Pod, keyed by UID.
    let record = Api::<ConfigMap>::namespaced(env.client.clone(), &env.ns)
        .get("lifecycle-webhook-drains")
        .await
        .unwrap();
    let entries: Vec<String> = record.data.unwrap_or_default().into_values().collect();
    assert!(
        entries
            .iter()
            .any(|e| e.contains("/llm-0\"") && e.contains("\"ended\":\"done\"")),
        "{entries:?}"
    );
    assert!(
        entries
            .iter()
            .any(|e| e.contains("/slow-0\"") && e.contains("\"ended\":\"timed_out\"")),
        "{entries:?}"
    );

    // With the service down the deletion proceeds (failure policy Ignore).
    server.answer("down-0", 202, "");
    running_pod(&pods, "down-0", &node, &server, json!({})).await;
    hook.stop().await;
    pods.delete("down-0", &dp).await.unwrap();
    assert!(server.posts("down-0").is_empty());
    nodes.delete(&node, &DeleteParams::default()).await.unwrap();
}

/// Finding 10: a tenant deleting its own opted-in Pods with long names without end (each a
/// drain in progress) fills the record up to its bound, never past it, and another tenant's
/// next drain is still recorded: its Pod waits for its drain instead of being deleted at once.
/// The record is bounded to 8 KiB here so that a few dozen Pods fill it (the shipped 512 KiB
/// takes about 1,700 such Pods; before the bound, 3,115 deletions filled the 1 MiB ConfigMap
/// and from then on every tenant's drain went unrecorded).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_tenant_filling_the_record_leaves_anothers_drains_recorded() {
    let env = Env::new("e2e-drain-fill").await;
    let server = ModelServer::start("127.0.0.1").await;
    let (hook, app, pods, node) = serve(
        &env,
        &server,
        &[
            ("drain-record-namespace", env.ns.as_str()),
            ("drain-record-max-bytes", "8192"),
        ],
    )
    .await;
    let dp = DeleteParams::default();
    let drains = || async {
        Api::<ConfigMap>::namespaced(env.client.clone(), &env.ns)
            .get("lifecycle-webhook-drains")
            .await
            .unwrap()
            .data
            .unwrap_or_default()
    };
    let bytes = |d: &BTreeMap<String, String>| d.iter().map(|(k, v)| k.len() + v.len()).sum();

    // The other tenant: its own namespace, in the webhook's namespaces.
    let other = Env::new("e2e-drain-other").await;
    other
        .register("drain", &app, &hook, None, app.timeout_seconds)
        .await;

    // The filling tenant: 40 Pods of 200-character names, each still draining.
    let long = "x".repeat(190);
    let mut most = 0;
    for i in 0..40 {
        let name = format!("fill-{i:03}-{long}");
        server.answer(&name, 202, "busy");
        running_pod(&pods, &name, &node, &server, json!({})).await;
        let (code, msg) = refused(pods.delete(&name, &dp).await, "delete a filling Pod");
        assert_eq!(code, 403, "{msg}");
        let d = drains().await;
        most = most.max(bytes(&d));
    }
    assert!(most <= 8192, "the record took {most} bytes");

    // The other tenant's Pod: its drain is recorded, the deletion waits for it.
    let theirs: Api<Pod> = Api::namespaced(pods.clone().into_client(), &other.ns);
    server.answer("victim-0", 202, "serving its last requests");
    running_pod(&theirs, "victim-0", &node, &server, json!({})).await;
    let (code, msg) = refused(theirs.delete("victim-0", &dp).await, "delete victim-0");
    assert_eq!(code, 403, "{msg}");
    assert!(msg.contains("draining victim-0"), "{msg}");
    let uid = theirs.get("victim-0").await.unwrap().metadata.uid.unwrap();
    let d = drains().await;
    assert!(
        d.contains_key(&uid),
        "the other tenant's drain is not recorded"
    );
    let filler = d.values().filter(|v| v.contains("/fill-")).count();
    println!(
        "40 filling drains: record at most {most} of 8192 bytes, {filler} of them kept; \
         the other tenant's drain recorded ({} bytes in all)",
        bytes(&d)
    );
    Api::<k8s_openapi::api::core::v1::Node>::all(env.client.clone())
        .delete(&node, &DeleteParams::default())
        .await
        .unwrap();
}
