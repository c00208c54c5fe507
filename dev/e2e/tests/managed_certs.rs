//! Certificates through the real API server, with the built registry-webhook binary and a
//! steady stream of AutoscalingPolicy creations (each one mutated and validated by it):
//!
//! - managed mode, two replicas sharing one port (SO_REUSEPORT: the kernel spreads the API
//!   server's connections over both), lifetimes of seconds: three serving-certificate rotations
//!   and a CA rotation fail no creation, and the caBundle holds both CAs during the CA rotation;
//!   the writer killed, the other replica takes over rotation;
//! - managed mode, long lifetimes: every replica restarted keeps the CA (no caBundle change); the
//!   Secret deleted, a new CA is issued and creations go on succeeding, without a restart;
//!   self-registration creates configurations equal to the endpoint table;
//! - patch-only mode leaves every other field of configurations applied by another manager
//!   untouched;
//! - files mode: a certificate and key written in place one after the other, a mismatched pair,
//!   and a secret-volume symlink swap fail no creation.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use admission_kit::cluster::registration::{
    ClientTarget, Registration, configurations, only_namespace,
};
use admission_kit::review::app::EndpointInfo;
use admission_kit::server::mtls::Pki;
use e2e::{Env, eventually, metric};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;
use testenv::system::{Running, bin_dir_of_current_exe, check_binaries, http_status};

const BIN: &str = "registry-webhook";

struct Setup {
    env: Env,
    bin: PathBuf,
    dir: PathBuf,
    kubeconfig: PathBuf,
    port: u16,
}

impl Setup {
    async fn new(test: &str) -> Self {
        let env = Env::new(test).await;
        env.install_crds(&registry_webhook::app()).await;
        let shared = testenv::shared().unwrap();
        let bin_dir = bin_dir_of_current_exe().unwrap();
        if let Err(e) = check_binaries(&bin_dir, &[BIN.to_owned()]) {
            panic!("{e}");
        }
        let dir = shared.kubeconfig.with_file_name(&env.ns);
        std::fs::create_dir_all(&dir).unwrap();
        Self {
            bin: bin_dir.join(BIN),
            kubeconfig: shared.kubeconfig.clone(),
            port: testenv::free_port().unwrap(),
            env,
            dir,
        }
    }

    fn config_name(&self) -> String {
        format!("registry-{}", self.env.ns)
    }

    fn selector(&self) -> String {
        serde_json::to_string(&only_namespace(&self.env.ns)).unwrap()
    }

    /// One replica on the shared port; its metrics address is returned with it.
    fn replica(&self, id: &str, mode_args: &[String]) -> (Running, String) {
        let mport = testenv::free_port().unwrap();
        let mut cmd = Command::new(&self.bin);
        cmd.args(["serve", "--log-format", "text", "--shutdown-delay", "0s"])
            .args(["--reuse-port", "--max-connection-age", "1s"])
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", self.port))
            .arg("--metrics-listen")
            .arg(format!("127.0.0.1:{mport}"))
            .args(mode_args)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("WEBHOOK_IDENTITY", id);
        let log = self.dir.join(format!("{id}.log"));
        let r = Running::spawn(id, cmd, log).unwrap();
        (r, format!("127.0.0.1:{mport}"))
    }

    /// Managed-mode flags with self-registration for this test's namespace.
    fn managed(&self, ca: &str, serving: &str, registration: &str) -> Vec<String> {
        [
            "--tls-mode",
            "managed",
            "--namespace",
            &self.env.ns,
            "--cert-secret",
            "registry-certs",
            "--tls-extra-names",
            "127.0.0.1",
            "--registration",
            registration,
            "--webhook-configuration-name",
            &self.config_name(),
            "--registration-url",
            &format!("https://127.0.0.1:{}", self.port),
            "--registration-namespace-selector",
            &self.selector(),
            "--ca-lifetime",
            ca,
            "--serving-cert-lifetime",
            serving,
            "--ca-bundle-propagation",
            "2s",
            "--cert-check-interval",
            "500ms",
            "--lease-duration",
            "2s",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
    }

    fn policies(&self) -> Api<DynamicObject> {
        Api::namespaced_with(
            self.env.client.clone(),
            &self.env.ns,
            &ApiResource::erase::<registry_webhook::types::AutoscalingPolicy>(&()),
        )
    }

    fn secrets(&self) -> Api<Secret> {
        self.secrets_in(&self.env.ns)
    }

    fn secrets_in(&self, ns: &str) -> Api<Secret> {
        Api::namespaced(self.env.client.clone(), ns)
    }

    fn mutating(&self) -> Api<MutatingWebhookConfiguration> {
        Api::all(self.env.client.clone())
    }
}

async fn ready(metrics: &str) {
    eventually(Duration::from_secs(60), || async {
        match http_status(metrics, "/readyz").await {
            Some(200) => Ok(()),
            s => Err(format!("{metrics} /readyz: {s:?}")),
        }
    })
    .await;
}

/// A policy the mutating webhook completes (PM-01) and the validating one admits.
fn policy(name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "registry.volcano.sh/v1alpha1", "kind": "AutoscalingPolicy",
        "metadata": {"name": name},
        "spec": {"metrics": [{"metricName": "kthena:num_requests_waiting", "targetValue": "10"}]}
    }))
    .unwrap()
}

/// Creations at 25 per second until stopped; each must be admitted and carry the webhook's
/// mutation. Returns (admitted, failures with their time).
struct Stream {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<(usize, Vec<(Instant, String)>)>,
}

impl Stream {
    fn start(api: Api<DynamicObject>, prefix: &str) -> Self {
        let (stop, mut rx) = tokio::sync::watch::channel(false);
        let prefix = prefix.to_owned();
        let task = tokio::spawn(async move {
            let results = Arc::new(Mutex::new((0usize, Vec::new())));
            let mut tick = tokio::time::interval(Duration::from_millis(40));
            let mut handles = Vec::new();
            for i in 0.. {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = rx.changed() => break,
                }
                let (api, results) = (api.clone(), results.clone());
                let name = format!("{prefix}-{i}");
                handles.push(tokio::spawn(async move {
                    let r = api.create(&PostParams::default(), &policy(&name)).await;
                    let outcome = match r {
                        Ok(o) if o.data["spec"]["behavior"].is_object() => Ok(()),
                        Ok(_) => Err(format!("{name}: admitted without the webhook's mutation")),
                        Err(e) => Err(format!("{name}: {e}")),
                    };
                    let mut g = results.lock().unwrap();
                    match outcome {
                        Ok(()) => g.0 += 1,
                        Err(e) => g.1.push((Instant::now(), e)),
                    }
                }));
            }
            for h in handles {
                let _ = h.await;
            }
            let g = results.lock().unwrap();
            (g.0, g.1.clone())
        });
        Self { stop, task }
    }

    async fn finish(self) -> (usize, Vec<(Instant, String)>) {
        let _ = self.stop.send(true);
        self.task.await.unwrap()
    }
}

fn text(s: &Secret, key: &str) -> String {
    s.data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .unwrap_or_default()
}

fn ca_bundles(m: &MutatingWebhookConfiguration) -> Vec<String> {
    m.webhooks
        .iter()
        .flatten()
        .map(|w| {
            String::from_utf8_lossy(
                &w.client_config
                    .ca_bundle
                    .as_ref()
                    .map(|b| b.0.clone())
                    .unwrap_or_default(),
            )
            .into_owned()
        })
        .collect()
}

fn cas_in(bundle: &str) -> usize {
    bundle.matches("BEGIN CERTIFICATE").count()
}

/// What an observer saw of the Secret and the configuration while a stream ran.
#[derive(Default, Debug)]
struct Seen {
    serving: BTreeSet<String>,
    cas: BTreeSet<String>,
    most_cas_in_bundle: usize,
}

fn observe(
    s: &Setup,
) -> (
    tokio::sync::watch::Sender<bool>,
    tokio::task::JoinHandle<Seen>,
) {
    let (stop, mut rx) = tokio::sync::watch::channel(false);
    let (secrets, mutating, name) = (s.secrets(), s.mutating(), s.config_name());
    let task = tokio::spawn(async move {
        let mut seen = Seen::default();
        loop {
            if let Ok(Some(sec)) = secrets.get_opt("registry-certs").await {
                seen.serving.insert(text(&sec, "tls.crt"));
                seen.cas.insert(text(&sec, "ca.crt"));
            }
            if let Ok(m) = mutating.get(&name).await {
                for b in ca_bundles(&m) {
                    seen.most_cas_in_bundle = seen.most_cas_in_bundle.max(cas_in(&b));
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                _ = rx.changed() => break,
            }
        }
        seen.serving.remove("");
        seen.cas.remove("");
        seen
    });
    (stop, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rotations_under_a_steady_stream_fail_no_creation_and_the_writer_is_replaced() {
    let s = Setup::new("e2e-rotate").await;
    // Serving certificates renewed every 8 s, the CA at about 27 s.
    let args = s.managed("40s", "12s", "self");
    let (a, ma) = s.replica("replica-a", &args);
    let (b, mb) = s.replica("replica-b", &args);
    ready(&ma).await;
    ready(&mb).await;

    let (stop_obs, obs) = observe(&s);
    let stream = Stream::start(s.policies(), "steady");
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(45)).await;
    let (admitted, failures) = stream.finish().await;
    let elapsed = started.elapsed().as_secs_f64();
    let _ = stop_obs.send(true);
    let seen = obs.await.unwrap();
    eprintln!(
        "steady stream: {admitted} admitted in {elapsed:.1} s ({:.1}/s), {} failed; {} serving certificates, {} CAs, at most {} CAs in the caBundle",
        admitted as f64 / elapsed,
        failures.len(),
        seen.serving.len(),
        seen.cas.len(),
        seen.most_cas_in_bundle
    );
    assert!(failures.is_empty(), "failed creations: {failures:?}");
    // The stream kept creating through the rotations (paced at 25/s, so about 1,100 on an idle
    // machine); a floor far below that, not a rate, so a busy machine does not fail it.
    assert!(admitted >= 100, "{admitted} in {elapsed} s");
    assert!(seen.serving.len() >= 4, "three serving rotations: {seen:?}");
    assert!(seen.cas.len() >= 2, "a CA rotation: {seen:?}");
    assert_eq!(seen.most_cas_in_bundle, 2, "both CAs trusted together");
    for m in [&ma, &mb] {
        assert!(
            metric(m, "admission_webhook_decisions_total").await > 0.0,
            "replica {m} answered reviews"
        );
    }

    // The writer dies; the other replica takes the Lease and goes on rotating.
    let (writer, survivor, ms) = if metric(&ma, "admission_webhook_certificate_writer").await == 1.0
    {
        (a, b, mb)
    } else {
        (b, a, ma)
    };
    let before = metric(&ms, "admission_webhook_certificate_rotations_total").await;
    let stream = Stream::start(s.policies(), "takeover");
    let killed = Instant::now();
    writer.kill();
    eventually(Duration::from_secs(30), || async {
        let w = metric(&ms, "admission_webhook_certificate_writer").await;
        let r = metric(&ms, "admission_webhook_certificate_rotations_total").await;
        if w == 1.0 && r > before {
            Ok(())
        } else {
            Err(format!("survivor writer={w}, rotations {before} -> {r}"))
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let (admitted, failures) = stream.finish().await;
    // Only reviews in flight on the killed replica's connections may fail.
    let late: Vec<_> = failures
        .iter()
        .filter(|(t, _)| t.duration_since(killed) > Duration::from_secs(2))
        .collect();
    eprintln!(
        "after killing the writer: {admitted} admitted, {} failed (all within 2 s of the kill: {})",
        failures.len(),
        late.is_empty()
    );
    assert!(late.is_empty(), "failures after the takeover: {late:?}");
    assert!(admitted > 200, "{admitted}");
    drop(survivor);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn restarts_keep_the_ca_and_a_deleted_secret_is_reissued() {
    let s = Setup::new("e2e-restart").await;
    let args = s.managed("1h", "20m", "self");
    let (a, ma) = s.replica("replica-a", &args);
    let (b, mb) = s.replica("replica-b", &args);
    ready(&ma).await;
    ready(&mb).await;
    let before = s.mutating().get(&s.config_name()).await.unwrap();

    // Self-registration: the configurations are the endpoint table's.
    let endpoints = EndpointInfo::of(&registry_webhook::app());
    let reg = Registration {
        name: s.config_name(),
        client: ClientTarget::Url(format!("https://127.0.0.1:{}", s.port)),
        ca_bundle: ca_bundles(&before)[0].clone().into_bytes(),
        timeout_seconds: 10,
        namespace_selector: only_namespace(&s.env.ns),
        failure_policy: None,
        object_labels: Default::default(),
    };
    let (want_m, want_v) = configurations(&reg, &endpoints);
    let got_v: ValidatingWebhookConfiguration = Api::all(s.env.client.clone())
        .get(&s.config_name())
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&before.webhooks).unwrap(),
        with_defaults(want_m.webhooks)
    );
    assert_eq!(
        serde_json::to_value(&got_v.webhooks).unwrap(),
        with_defaults(want_v.webhooks)
    );

    // Every replica restarted: same CA, same caBundle.
    drop(a);
    drop(b);
    let (a, ma) = s.replica("replica-a2", &args);
    let (_b, mb) = s.replica("replica-b2", &args);
    ready(&ma).await;
    ready(&mb).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = s.mutating().get(&s.config_name()).await.unwrap();
    assert_eq!(
        ca_bundles(&before),
        ca_bundles(&after),
        "caBundle unchanged"
    );
    assert_eq!(
        before.metadata.resource_version,
        after.metadata.resource_version
    );
    s.policies()
        .create(&PostParams::default(), &policy("after-restart"))
        .await
        .unwrap();

    // The Secret deleted: a new CA, trusted before it is served; creations never fail.
    let old_ca = text(&s.secrets().get("registry-certs").await.unwrap(), "ca.crt");
    let stream = Stream::start(s.policies(), "deleted");
    tokio::time::sleep(Duration::from_secs(2)).await;
    s.secrets()
        .delete("registry-certs", &DeleteParams::default())
        .await
        .unwrap();
    let secrets = s.secrets();
    let new_ca = eventually(Duration::from_secs(30), || async {
        let sec = secrets
            .get_opt("registry-certs")
            .await
            .map_err(|e| e.to_string())?;
        let ca = sec.map(|s| text(&s, "ca.crt")).unwrap_or_default();
        if !ca.is_empty() && ca != old_ca {
            Ok(ca)
        } else {
            Err("no new CA yet".to_owned())
        }
    })
    .await;
    // The old CA leaves the caBundle once the new one signs.
    let mutating = s.mutating();
    let name = s.config_name();
    eventually(Duration::from_secs(30), || async {
        let m = mutating.get(&name).await.map_err(|e| e.to_string())?;
        if ca_bundles(&m).iter().all(|b| *b == new_ca) {
            Ok(())
        } else {
            Err("caBundle still holds the old CA".to_owned())
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (admitted, failures) = stream.finish().await;
    eprintln!(
        "Secret deleted: {admitted} admitted, {} failed",
        failures.len()
    );
    assert!(failures.is_empty(), "failed creations: {failures:?}");
    drop(a);
}

/// The webhooks of a configuration as JSON, with the fields the API server defaults filled in
/// as it does, to compare.
fn with_defaults(webhooks: impl serde::Serialize) -> serde_json::Value {
    let mut v = serde_json::to_value(webhooks).unwrap();
    for w in v.as_array_mut().into_iter().flatten() {
        let w = w.as_object_mut().unwrap();
        w.entry("matchPolicy").or_insert(json!("Equivalent"));
        w.entry("objectSelector").or_insert(json!({}));
        for r in w["rules"].as_array_mut().into_iter().flatten() {
            r.as_object_mut()
                .unwrap()
                .entry("scope")
                .or_insert(json!("*"));
        }
    }
    v
}

/// A configuration as another manager (kubectl, a GitOps tool) applied it, without caBundle.
fn strip(v: &mut serde_json::Value) {
    if let Some(m) = v["metadata"].as_object_mut() {
        for k in ["managedFields", "resourceVersion", "generation"] {
            m.remove(k);
        }
    }
    for w in v["webhooks"].as_array_mut().into_iter().flatten() {
        if let Some(c) = w["clientConfig"].as_object_mut() {
            c.remove("caBundle");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn patch_only_mode_sets_the_ca_bundle_alone() {
    let s = Setup::new("e2e-patchonly").await;
    let endpoints = EndpointInfo::of(&registry_webhook::app());
    let reg = Registration {
        name: s.config_name(),
        client: ClientTarget::Url(format!("https://127.0.0.1:{}", s.port)),
        ca_bundle: Vec::new(),
        timeout_seconds: 7,
        namespace_selector: only_namespace(&s.env.ns),
        failure_policy: None,
        object_labels: Default::default(),
    };
    let (mut m, mut v) = configurations(&reg, &endpoints);
    for w in m.webhooks.iter_mut().flatten() {
        w.client_config.ca_bundle = None;
    }
    for w in v.webhooks.iter_mut().flatten() {
        w.client_config.ca_bundle = None;
    }
    let pp = PatchParams::apply("gitops-tool");
    let mapi = s.mutating();
    let vapi: Api<ValidatingWebhookConfiguration> = Api::all(s.env.client.clone());
    mapi.patch(&s.config_name(), &pp, &Patch::Apply(&m))
        .await
        .unwrap();
    vapi.patch(&s.config_name(), &pp, &Patch::Apply(&v))
        .await
        .unwrap();
    let before_m = serde_json::to_value(mapi.get(&s.config_name()).await.unwrap()).unwrap();
    let before_v = serde_json::to_value(vapi.get(&s.config_name()).await.unwrap()).unwrap();

    let args = s.managed("1h", "20m", "ca-bundle");
    let (_a, ma) = s.replica("replica-a", &args);
    ready(&ma).await;
    s.policies()
        .create(&PostParams::default(), &policy("patched"))
        .await
        .unwrap();
    let after_m = mapi.get(&s.config_name()).await.unwrap();
    assert!(ca_bundles(&after_m).iter().all(|b| cas_in(b) == 1));
    let after_v = vapi.get(&s.config_name()).await.unwrap();
    let managers: Vec<String> = after_m
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|f| f.manager.clone())
        .collect();
    assert!(
        managers.contains(&"registry-webhook-certificates".to_owned()),
        "{managers:?}"
    );
    for (mut before, after) in [
        (before_m, serde_json::to_value(after_m).unwrap()),
        (before_v, serde_json::to_value(after_v).unwrap()),
    ] {
        let mut after = after;
        strip(&mut before);
        strip(&mut after);
        assert_eq!(before, after, "only caBundle changed");
    }
    // The tool applies again: no conflict, the caBundle stays.
    mapi.patch(&s.config_name(), &pp, &Patch::Apply(&m))
        .await
        .unwrap();
    let again = mapi.get(&s.config_name()).await.unwrap();
    assert!(ca_bundles(&again).iter().all(|b| cas_in(b) == 1));
}

/// Writes `cert` and `key` as kubelet's atomic writer does: a new timestamped directory, then
/// the `..data` symlink swapped by rename.
fn atomic_write(dir: &Path, gen_name: &str, cert: &str, key: &str) {
    let ts = dir.join(gen_name);
    std::fs::create_dir_all(&ts).unwrap();
    std::fs::write(ts.join("tls.crt"), cert).unwrap();
    std::fs::write(ts.join("tls.key"), key).unwrap();
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(gen_name, &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn files_mode_takes_only_whole_pairs_under_a_steady_stream() {
    let s = Setup::new("e2e-files").await;
    let names = vec!["127.0.0.1".to_owned(), "localhost".to_owned()];
    let ca = Pki::new("files-mode CA").unwrap();
    let issue = || ca.issue(&names, true, false).unwrap();
    // In place: plain files.
    let inplace = s.dir.join("inplace");
    std::fs::create_dir_all(&inplace).unwrap();
    let (c0, k0) = issue();
    std::fs::write(inplace.join("tls.crt"), &c0).unwrap();
    std::fs::write(inplace.join("tls.key"), &k0).unwrap();
    // A secret volume: files are symlinks through `..data`.
    let volume = s.dir.join("volume");
    std::fs::create_dir_all(&volume).unwrap();
    let (c1, k1) = issue();
    atomic_write(&volume, "..gen1", &c1, &k1);
    for f in ["tls.crt", "tls.key"] {
        std::os::unix::fs::symlink(format!("..data/{f}"), volume.join(f)).unwrap();
    }
    let files = |d: &Path| {
        vec![
            "--tls-cert-file".to_owned(),
            d.join("tls.crt").display().to_string(),
            "--tls-private-key-file".to_owned(),
            d.join("tls.key").display().to_string(),
            "--cert-reload-interval".to_owned(),
            "100ms".to_owned(),
        ]
    };
    let (_a, ma) = s.replica("inplace", &files(&inplace));
    let (_b, mb) = s.replica("volume", &files(&volume));
    ready(&ma).await;
    ready(&mb).await;
    let endpoints = EndpointInfo::of(&registry_webhook::app());
    let reg = Registration {
        name: s.config_name(),
        client: ClientTarget::Url(format!("https://127.0.0.1:{}", s.port)),
        ca_bundle: ca.ca_pem().into_bytes(),
        timeout_seconds: 10,
        namespace_selector: only_namespace(&s.env.ns),
        failure_policy: None,
        object_labels: Default::default(),
    };
    admission_kit::cluster::registration::apply(&s.env.client, &reg, &endpoints, "e2e")
        .await
        .unwrap();
    eventually(Duration::from_secs(30), || async {
        s.policies()
            .create(&PostParams::default(), &policy("first"))
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;

    let stream = Stream::start(s.policies(), "files");
    for round in 0..3 {
        // The certificate first, its key 0.3 s later, in place.
        let (c, k) = issue();
        std::fs::write(inplace.join("tls.crt"), &c).unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        std::fs::write(inplace.join("tls.key"), &k).unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        // A mismatched pair: another certificate's key.
        let (c2, _) = issue();
        let (_, k2) = issue();
        std::fs::write(inplace.join("tls.crt"), &c2).unwrap();
        std::fs::write(inplace.join("tls.key"), &k2).unwrap();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (c3, k3) = issue();
        std::fs::write(inplace.join("tls.key"), &k3).unwrap();
        std::fs::write(inplace.join("tls.crt"), &c3).unwrap();
        // A secret-volume update.
        let (cv, kv) = issue();
        atomic_write(&volume, &format!("..gen{}", round + 2), &cv, &kv);
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let (admitted, failures) = stream.finish().await;
    let rejected = metric(&ma, "admission_webhook_certificate_rejected_total").await;
    eprintln!(
        "files mode: {admitted} admitted, {} failed; inplace replica rejected {rejected} pairs",
        failures.len()
    );
    assert!(failures.is_empty(), "failed creations: {failures:?}");
    assert!(rejected >= 3.0, "the mismatched pairs were refused");
    assert!(admitted > 300, "{admitted}");
}

/// The overlay's RBAC is all managed certificates need: registry-webhook runs with a token of
/// its own ServiceAccount bound only to the rendered Role and ClusterRoles, fills the Secret and
/// holds the Lease the overlay ships empty (it may create neither), watches the Secret by name,
/// patches the caBundle of its own configurations, and turns ready; another Secret stays out of
/// its reach.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_overlays_rbac_is_enough_and_no_more() {
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    use k8s_openapi::api::core::v1::ServiceAccount;
    use serde::Deserialize;
    let s = Setup::new("e2e-rbac").await;
    let ns = "admission-webhooks";
    let client = &s.env.client;
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let _ = namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
        )
        .await;
    // The overlay's RBAC objects and its empty Secret and Lease, created for real.
    let bins = testenv::tools::locate().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(&bins.kustomize)
        .arg("build")
        .arg(root.join("kustomize/registry-webhook"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let rendered = String::from_utf8(out.stdout).unwrap();
    for doc in serde_yaml_ng::Deserializer::from_str(&rendered) {
        let obj = DynamicObject::deserialize(doc).unwrap();
        let tm = obj.types.clone().unwrap();
        if ![
            "ServiceAccount",
            "Role",
            "RoleBinding",
            "ClusterRole",
            "ClusterRoleBinding",
            "Secret",
            "Lease",
        ]
        .contains(&tm.kind.as_str())
        {
            continue;
        }
        let (group, version) = tm
            .api_version
            .rsplit_once('/')
            .unwrap_or(("", &tm.api_version));
        let gvk = kube::core::GroupVersionKind::gvk(group, version, &tm.kind);
        let (ar, caps) = kube::discovery::pinned_kind(client, &gvk).await.unwrap();
        let api: Api<DynamicObject> = if caps.scope == kube::discovery::Scope::Namespaced {
            Api::namespaced_with(client.clone(), ns, &ar)
        } else {
            Api::all_with(client.clone(), &ar)
        };
        let name = obj.metadata.name.clone().unwrap();
        api.patch(
            &name,
            &PatchParams::apply("e2e-rbac").force(),
            &Patch::Apply(&obj),
        )
        .await
        .unwrap_or_else(|e| panic!("{} {name}: {e}", tm.kind));
    }
    // Its own configurations, selecting no namespace (never called): the caBundle target.
    let never = json!({"matchLabels": {"e2e.admission.local/never": "true"}});
    let hook = |kind: &str| {
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": "registry-webhook"},
            "webhooks": [{"name": "never.registry.e2e", "admissionReviewVersions": ["v1"],
                "sideEffects": "None", "namespaceSelector": never,
                "clientConfig": {"url": "https://127.0.0.1:1/never"},
                "rules": [{"apiGroups": ["registry.volcano.sh"], "apiVersions": ["v1alpha1"],
                           "resources": ["models"], "operations": ["CREATE"]}]}]
        })
    };
    let mapi = s.mutating();
    mapi.patch(
        "registry-webhook",
        &PatchParams::apply("e2e-rbac").force(),
        &Patch::Apply(hook("MutatingWebhookConfiguration")),
    )
    .await
    .unwrap();
    // A token of the ServiceAccount, and a kubeconfig with it.
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), ns);
    let token = sas
        .create_token_request(
            "registry-webhook",
            &PostParams::default(),
            &TokenRequest {
                spec: TokenRequestSpec {
                    audiences: vec![],
                    expiration_seconds: Some(3600),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    let admin = kube::config::Kubeconfig::read_from(&s.kubeconfig).unwrap();
    let cluster = admin.clusters[0].cluster.clone().unwrap();
    let kubeconfig = s.dir.join("sa.kubeconfig");
    std::fs::write(
        &kubeconfig,
        serde_json::to_string(&json!({
            "apiVersion": "v1", "kind": "Config", "current-context": "sa",
            "clusters": [{"name": "c", "cluster": {
                "server": cluster.server,
                "certificate-authority-data": cluster.certificate_authority_data,
                "certificate-authority": cluster.certificate_authority}}],
            "users": [{"name": "sa", "user": {"token": token}}],
            "contexts": [{"name": "sa", "context": {"cluster": "c", "user": "sa"}}]
        }))
        .unwrap(),
    )
    .unwrap();
    let sa = testenv::client_for(&kubeconfig).await.unwrap();
    let denied = Api::<Secret>::namespaced(sa.clone(), ns)
        .get("some-other-secret")
        .await
        .unwrap_err();
    assert!(denied.to_string().contains("forbidden"), "{denied}");

    let mport = testenv::free_port().unwrap();
    let mut cmd = Command::new(&s.bin);
    cmd.args(["serve", "--log-format", "text", "--shutdown-delay", "0s"])
        .args(["--tls-mode", "managed", "--namespace", ns])
        .args(["--ca-bundle-propagation", "2s"])
        .arg("--listen")
        .arg(format!("127.0.0.1:{}", s.port))
        .arg("--metrics-listen")
        .arg(format!("127.0.0.1:{mport}"))
        .env("KUBECONFIG", &kubeconfig);
    let _r = Running::spawn("rbac", cmd, s.dir.join("rbac.log")).unwrap();
    ready(&format!("127.0.0.1:{mport}")).await;
    let m = mapi.get("registry-webhook").await.unwrap();
    assert!(ca_bundles(&m).iter().all(|b| cas_in(b) == 1));
    let secret = s
        .secrets_in(ns)
        .get("registry-webhook-certificates")
        .await
        .unwrap();
    assert!(!text(&secret, "tls.crt").is_empty());
    assert_eq!(
        metric(
            &format!("127.0.0.1:{mport}"),
            "admission_webhook_registration_errors_total"
        )
        .await,
        0.0
    );
    mapi.delete("registry-webhook", &DeleteParams::default())
        .await
        .unwrap();
}

/// The API server unreachable at start: the replica keeps running (no crash loop), stays not
/// ready and says why; once the API server can be reached it issues, registers and serves. The
/// kubeconfig points at a loopback port where, for the first seconds, nothing listens; then a
/// plain TCP relay to the real API server opens there.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unreachable_api_server_at_start_is_waited_for() {
    let s = Setup::new("e2e-unreachable").await;
    let admin = kube::config::Kubeconfig::read_from(&s.kubeconfig).unwrap();
    let real: http::Uri = admin.clusters[0]
        .cluster
        .as_ref()
        .unwrap()
        .server
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    let target = format!(
        "{}:{}",
        real.host().unwrap(),
        real.port_u16().unwrap_or(443)
    );
    let relay_port = testenv::free_port().unwrap();
    let mut kc = admin.clone();
    for c in kc.clusters.iter_mut() {
        if let Some(c) = c.cluster.as_mut() {
            // The API server's certificate names 127.0.0.1, which the relay port keeps.
            c.server = Some(format!("https://127.0.0.1:{relay_port}"));
        }
    }
    let kubeconfig = s.dir.join("relay.kubeconfig");
    std::fs::write(&kubeconfig, serde_yaml_ng::to_string(&kc).unwrap()).unwrap();

    let mport = testenv::free_port().unwrap();
    let mut cmd = Command::new(&s.bin);
    cmd.args(["serve", "--log-format", "text", "--shutdown-delay", "0s"])
        .args(s.managed("1h", "20m", "self"))
        .arg("--listen")
        .arg(format!("127.0.0.1:{}", s.port))
        .arg("--metrics-listen")
        .arg(format!("127.0.0.1:{mport}"))
        .env("KUBECONFIG", &kubeconfig);
    let log = s.dir.join("unreachable.log");
    let mut r = Running::spawn("unreachable", cmd, log.clone()).unwrap();
    let metrics = format!("127.0.0.1:{mport}");
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(r.running(), "no crash: the replica keeps running");
    assert_eq!(http_status(&metrics, "/healthz").await, Some(200));
    assert_eq!(http_status(&metrics, "/readyz").await, Some(503));
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(said.contains("retrying"), "{said}");

    let listener = tokio::net::TcpListener::bind(("127.0.0.1", relay_port))
        .await
        .unwrap();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            let target = target.clone();
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    ready(&metrics).await;
    s.policies()
        .create(&PostParams::default(), &policy("after-the-wait"))
        .await
        .unwrap();
}
