//! Every service's OCI image (`cargo xtask image`, listed in `target/images/images.json`) run
//! with podman against the real API server as the kustomize overlay deploys it.
//!
//! The overlay `kustomize/all` is rendered and applied (namespace, CRDs, service accounts, RBAC,
//! the pre-created Secrets and Leases, the webhook configurations and the policy guarding them);
//! the objects that need controllers or nodes (Deployment, Service, PodDisruptionBudget,
//! HorizontalPodAutoscaler, NetworkPolicy) are left out. Each container gets its Deployment's
//! arguments and environment, its service account's token and the cluster CA where a Pod has
//! them, and podman's flags for the Deployment's securityContext: read-only root filesystem, user
//! 65532, every capability dropped, no new privileges. What loopback changes, and only that: host
//! network, so each listens on a free 127.0.0.1 port (the `*_LISTEN` variables), the webhook
//! configurations' `service` becomes the matching `url` (the API server has no Service network
//! here) and the serving certificates also name 127.0.0.1 for it; quota-state keeps its DNS name,
//! resolved through `/etc/hosts` (`--add-host`, as a Pod's hostAliases would) by the image's glibc.
//!
//! Then the samples of every service (`services/*/examples/samples`) are admitted or refused as
//! their file names say, which `cargo xtask up` shows with the plain binaries.
//!
//! A second test rebuilds every image from the same inputs and finds the same layer digests.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use images::{Built, Tools};
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde::Deserialize;
use serde_json::{Value, json};

/// The overlay's namespace.
const NS: &str = "admission-webhooks";

/// Kinds of the overlay left out: they need controllers or nodes this control plane lacks.
const NEEDS_CONTROLLERS: &[&str] = &[
    "Deployment",
    "Service",
    "PodDisruptionBudget",
    "HorizontalPodAutoscaler",
    "NetworkPolicy",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// What `cargo xtask image` built; fails naming the command when nothing was.
fn built() -> Built {
    let dir = std::env::var_os("ADMISSION_IMAGES_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/images"));
    Built::read(&dir).unwrap_or_else(|e| {
        panic!(
            "no images to test ({e}): build them with `cargo xtask image` (the test command does)"
        )
    })
}

fn tools() -> Tools {
    Tools::locate(&testenv::tools::containers_conf())
        .unwrap_or_else(|e| panic!("container tools: {e}"))
}

/// A container started by the test, removed (after a graceful stop) when dropped.
struct Container {
    name: String,
    tools: Tools,
}

impl Container {
    fn logs(&self) -> String {
        let out = self
            .tools
            .podman()
            .args(["logs", &self.name])
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout).into_owned()
                    + &String::from_utf8_lossy(&o.stderr)
            })
            .unwrap_or_default();
        // The end says why.
        let lines: Vec<&str> = out.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    fn inspect(&self, format: &str) -> String {
        let out = self
            .tools
            .podman()
            .args(["inspect", "--format", format, &self.name])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = self
            .tools
            .podman()
            .args(["rm", "--force", "--time", "10", &self.name])
            .output();
    }
}

/// `podman run` of `image` to completion, with no network and a read-only root: `flags` before
/// the image, `args` after it.
fn run_once(tools: &Tools, image: &str, flags: &[&str], args: &[&str]) -> std::process::Output {
    tools
        .podman()
        .args([
            "run",
            "--rm",
            "--pull=never",
            "--network=none",
            "--read-only",
        ])
        .args(flags)
        .arg(image)
        .args(args)
        .output()
        .unwrap()
}

/// The first container of a rendered Deployment: arguments and environment.
struct Spec {
    args: Vec<String>,
    env: Vec<(String, String)>,
    service_account: String,
}

fn spec_of(deployment: &Value, pod_name: &str) -> Spec {
    let pod = &deployment["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    let args = c["args"]
        .as_array()
        .map(|a| a.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default();
    let mut env = Vec::new();
    for e in c["env"].as_array().into_iter().flatten() {
        let name = e["name"].as_str().unwrap().to_owned();
        let value = if let Some(v) = e["value"].as_str() {
            v.to_owned()
        } else {
            match e["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
                Some("metadata.namespace") => NS.to_owned(),
                Some("metadata.name") => pod_name.to_owned(),
                other => panic!("{name}: valueFrom {other:?} not handled"),
            }
        };
        env.push((name, value));
    }
    Spec {
        args,
        env,
        service_account: pod["serviceAccountName"].as_str().unwrap().to_owned(),
    }
}

/// Applies `obj` (server-side, as `kubectl apply --server-side` would).
async fn apply(client: &kube::Client, obj: &DynamicObject) {
    let api = e2e::dynamic_api(client, obj, NS).await;
    let name = obj.metadata.name.clone().unwrap();
    api.patch(
        &name,
        &PatchParams::apply("e2e-images").force(),
        &Patch::Apply(obj),
    )
    .await
    .unwrap_or_else(|e| panic!("{} {name}: {e}", kind(obj)));
}

/// A token of `sa` and the cluster CA, where a Pod has them
/// (`/var/run/secrets/kubernetes.io/serviceaccount`).
async fn service_account_dir(client: &kube::Client, sa: &str, ca: &Path, dir: &Path) {
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), NS);
    let request: TokenRequest =
        serde_json::from_value(json!({"spec": {"audiences": [], "expirationSeconds": 3600}}))
            .unwrap();
    let issued: TokenRequest = api
        .create_subresource("token", sa, &PostParams::default(), &request)
        .await
        .unwrap_or_else(|e| panic!("token of {sa}: {e}"));
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("token"), issued.status.unwrap().token).unwrap();
    std::fs::copy(ca, dir.join("ca.crt")).unwrap();
    std::fs::write(dir.join("namespace"), NS).unwrap();
    // Readable by user 65532, as the kubelet's projected volume makes them.
    for f in ["token", "ca.crt", "namespace"] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.join(f), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
}

/// The overlay's webhook configuration with each `service` clientConfig turned into the `url`
/// of that service's container.
fn to_urls(obj: &mut DynamicObject, ports: &BTreeMap<String, u16>) {
    for w in obj.data["webhooks"].as_array_mut().into_iter().flatten() {
        let service = w["clientConfig"]["service"].take();
        let name = service["name"].as_str().unwrap();
        let path = service["path"].as_str().unwrap_or("/");
        let port = ports[name];
        w["clientConfig"] = json!({"url": format!("https://127.0.0.1:{port}{path}")});
    }
}

fn docs(yaml: &str) -> Vec<DynamicObject> {
    serde_yaml_ng::Deserializer::from_str(yaml)
        .map(|d| DynamicObject::deserialize(d).unwrap())
        .collect()
}

fn kind(o: &DynamicObject) -> &str {
    o.types.as_ref().map(|t| t.kind.as_str()).unwrap_or("")
}

/// The samples of `svc` with what their file names expect: `(file, object, refused)`.
fn samples(svc: &str) -> Vec<(String, DynamicObject, bool)> {
    let dir = root().join("services").join(svc).join("examples/samples");
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.contains("admitted") || name.contains("refused"),
            "{name}: a sample's name says admitted or refused"
        );
        for o in docs(&std::fs::read_to_string(&f).unwrap()) {
            out.push((name.clone(), o, name.contains("refused")));
        }
    }
    out
}

/// Creates a sample; `Err(message)` when refused.
async fn create(client: &kube::Client, obj: &DynamicObject) -> Result<(), String> {
    let api = e2e::dynamic_api(client, obj, "default").await;
    match api.create(&PostParams::default(), obj).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) => Err(e.message),
        Err(e) => panic!("creating {:?}: {e}", obj.metadata.name),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_image_runs_as_deployed_against_the_api_server() {
    let built = built();
    let tools = tools();
    let shared = testenv::shared().unwrap();
    let client = testenv::client_for(&shared.kubeconfig).await.unwrap();
    let api_port: u16 = shared.server.rsplit(':').next().unwrap().parse().unwrap();
    let image = |svc: &str| -> String {
        built
            .images
            .iter()
            .find(|i| i.service == svc)
            .unwrap_or_else(|| panic!("{svc}: not in images.json; run `cargo xtask image`"))
            .reference
            .clone()
    };
    let services: Vec<String> = built.images.iter().map(|i| i.service.clone()).collect();
    let mut crates: Vec<String> = std::fs::read_dir(root().join("services"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("Cargo.toml").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    crates.sort();
    let mut imaged = services.clone();
    imaged.sort();
    assert_eq!(imaged, crates, "every service has an image");

    // What the images say of themselves.
    for i in &built.images {
        assert!(
            images::exists(&tools, &i.reference),
            "{}: in podman's store",
            i.reference
        );
        let c = images::ImageRef(&i.reference).image_config(&tools).unwrap();
        assert_eq!(c.user, images::USER, "{}", i.reference);
        assert_eq!(c.entrypoint, [images::ENTRYPOINT], "{}", i.reference);
        for k in ["source", "revision", "licenses", "created", "title"] {
            let key = format!("org.opencontainers.image.{k}");
            assert!(
                c.labels.get(&key).is_some_and(|v| !v.is_empty()),
                "{}: label {key}",
                i.reference
            );
        }
        assert_eq!(
            i.diff_ids.len(),
            2,
            "{}: base and binary layers",
            i.reference
        );
        assert_eq!(
            i.diff_ids[0], built.images[0].diff_ids[0],
            "{}: one base layer under every image",
            i.reference
        );
        // No shell to start.
        let sh = run_once(
            &tools,
            &i.reference,
            &["--entrypoint", "/bin/sh"],
            &["-c", "true"],
        );
        assert!(!sh.status.success(), "{}: has no /bin/sh", i.reference);
    }

    // The overlay, as `kubectl apply -k kustomize/all` would send it.
    let objects = e2e::render_overlay("kustomize/all");
    let mut ports: BTreeMap<String, u16> = BTreeMap::new();
    let mut metrics_ports: BTreeMap<String, u16> = BTreeMap::new();
    for s in &services {
        ports.insert(s.clone(), testenv::free_port().unwrap());
        metrics_ports.insert(s.clone(), testenv::free_port().unwrap());
    }
    // Namespace and CRDs first, then the rest, webhook configurations last.
    let order = |o: &DynamicObject| match kind(o) {
        "Namespace" => 0,
        "CustomResourceDefinition" => 1,
        "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration" => 3,
        _ => 2,
    };
    let mut to_apply: Vec<DynamicObject> = objects
        .iter()
        .filter(|o| !NEEDS_CONTROLLERS.contains(&kind(o)))
        .cloned()
        .collect();
    to_apply.sort_by_key(order);
    let mut crds_from_images = false;
    for mut o in to_apply {
        if order(&o) == 3 && !crds_from_images {
            // Each webhook's CRDs as its image prints them (`crd`), for the kinds the overlay
            // leaves to the upstream installations.
            for svc in services.iter().filter(|s| s.ends_with("-webhook")) {
                let out = run_once(&tools, &image(svc), &[], &["crd"]);
                if out.status.success() {
                    testenv::system::apply_crds(&client, &String::from_utf8_lossy(&out.stdout))
                        .await
                        .unwrap();
                }
            }
            crds_from_images = true;
        }
        if order(&o) == 3 {
            to_urls(&mut o, &ports);
        }
        apply(&client, &o).await;
    }

    // The containers, quota-state first (scheduling-webhook asks it every quota question).
    let deployments: BTreeMap<String, Value> = objects
        .iter()
        .filter(|o| kind(o) == "Deployment")
        .map(|o| {
            (
                o.metadata.name.clone().unwrap(),
                serde_json::to_value(o).unwrap(),
            )
        })
        .collect();
    let dir = std::env::temp_dir().join(format!("e2e-images-{}", std::process::id()));
    let mut order: Vec<&String> = services.iter().collect();
    order.sort_by_key(|s| (s.as_str() != "quota-state", s.as_str()));
    let mut running = Vec::new();
    let mut ready_after = Vec::new();
    for svc in order {
        let spec = spec_of(&deployments[svc.as_str()], &format!("{svc}-0"));
        let sa_dir = dir.join(svc);
        service_account_dir(
            &client,
            &spec.service_account,
            &shared.admission_client_ca,
            &sa_dir,
        )
        .await;
        let (port, mport) = (ports[svc.as_str()], metrics_ports[svc.as_str()]);
        let mut env: Vec<(String, String)> = spec
            .env
            .into_iter()
            .map(|(k, v)| {
                let v = match k.as_str() {
                    "WEBHOOK_LISTEN" | "QUOTA_STATE_LISTEN" => format!("127.0.0.1:{port}"),
                    "WEBHOOK_METRICS_LISTEN" | "QUOTA_STATE_METRICS_LISTEN" => {
                        format!("127.0.0.1:{mport}")
                    }
                    _ => v,
                };
                (k, v)
            })
            .collect();
        if svc.ends_with("-webhook") {
            // The API server calls the url form by address.
            env.push(("WEBHOOK_TLS_EXTRA_NAMES".into(), "127.0.0.1".into()));
        }
        env.push(("KUBERNETES_SERVICE_HOST".into(), "127.0.0.1".into()));
        env.push(("KUBERNETES_SERVICE_PORT".into(), api_port.to_string()));
        let quota_port = ports["quota-state"];
        let args: Vec<String> = spec
            .args
            .iter()
            .map(|a| a.replace("quota-state:9090", &format!("quota-state:{quota_port}")))
            .collect();
        let name = format!("e2e-images-{svc}-{}", std::process::id());
        let mut run = tools.podman();
        run.args(["run", "--detach", "--pull=never", "--name", &name])
            .args(["--network", "host", "--read-only", "--user", images::USER])
            .args(["--cap-drop", "all", "--security-opt", "no-new-privileges"])
            .args(["--add-host", "quota-state:127.0.0.1"])
            .arg("--volume")
            .arg(format!(
                "{}:/var/run/secrets/kubernetes.io/serviceaccount:ro",
                sa_dir.display()
            ));
        for (k, v) in &env {
            run.arg("--env").arg(format!("{k}={v}"));
        }
        run.arg(image(svc)).args(&args);
        let started = Instant::now();
        let out = run.output().unwrap();
        assert!(
            out.status.success(),
            "podman run {svc}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let c = Container {
            name,
            tools: tools.clone(),
        };
        let addr = format!("127.0.0.1:{mport}");
        let deadline = started + Duration::from_secs(60);
        while testenv::system::http_status(&addr, "/readyz").await != Some(200) {
            assert!(
                Instant::now() < deadline,
                "{svc}: /readyz not 200 within 60 s; its log:\n{}",
                c.logs()
            );
            assert_eq!(
                c.inspect("{{.State.Running}}"),
                "true",
                "{svc} exited:\n{}",
                c.logs()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        ready_after.push((svc.clone(), started.elapsed()));
        // The kernel's view of the process: the user and no privileges.
        let pid = c.inspect("{{.State.Pid}}");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let field = |k: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(k))
                .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
                .unwrap_or_default()
        };
        assert_eq!(field("Uid:"), "65532 65532 65532 65532", "{svc}");
        assert_eq!(field("CapEff:"), "0000000000000000", "{svc}");
        assert_eq!(field("CapPrm:"), "0000000000000000", "{svc}");
        assert_eq!(field("NoNewPrivs:"), "1", "{svc}");
        assert_eq!(c.inspect("{{.HostConfig.ReadonlyRootfs}}"), "true", "{svc}");
        running.push((svc.clone(), c));
    }
    for (svc, t) in &ready_after {
        println!(
            "{svc}: /readyz 200 {:.0} ms after podman run",
            t.as_secs_f64() * 1000.0
        );
    }

    // The samples, as `cargo xtask up` creates them.
    for svc in &services {
        for (file, obj, refused) in samples(svc) {
            let what = format!("{svc} {file} {}/{:?}", kind(&obj), obj.metadata.name);
            let mut result = create(&client, &obj).await;
            // A rule reading a just-created object sees it once the watch has.
            let deadline = Instant::now() + Duration::from_secs(20);
            while result.is_err() && !refused && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(250)).await;
                result = create(&client, &obj).await;
            }
            match (result, refused) {
                (Ok(()), false) => println!("admitted  {what}"),
                (Err(m), true) => {
                    assert!(
                        m.contains("admission webhook") || m.contains("denied"),
                        "{what}: refused by a webhook, not by {m}"
                    );
                    println!("refused   {what}: {m}");
                }
                (Ok(()), true) => panic!("{what}: admitted, expected refused"),
                (Err(m), false) => {
                    let logs: Vec<String> = running
                        .iter()
                        .map(|(s, c)| format!("--- {s}\n{}", c.logs()))
                        .collect();
                    panic!("{what}: refused: {m}\n{}", logs.join("\n"))
                }
            }
        }
    }
    // scheduling-webhook asked quota-state, by its name, over mutual TLS.
    let calls = e2e::metric(
        &format!("127.0.0.1:{}", metrics_ports["quota-state"]),
        "quota_state_calls_total",
    )
    .await;
    assert!(calls > 0.0, "quota-state answered no call");
    drop(running);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_same_inputs_give_the_same_layers() {
    let built = built();
    let tools = tools();
    let tag = format!("repro-{}", std::process::id());
    let work = std::env::temp_dir().join(format!("e2e-images-{tag}"));
    let base_ref = format!("localhost/admission-webhooks-base:{tag}");
    let base = images::build_base(
        &tools,
        &work,
        built.base.packages.clone(),
        built.timestamp,
        Some(&base_ref),
    )
    .unwrap();
    assert_eq!(base.created_by, built.base.created_by);
    let mut names = vec![base_ref.clone()];
    for i in &built.images {
        let binary = std::fs::read(&i.binary).unwrap();
        assert_eq!(
            images::sha256_hex(&binary),
            i.binary_sha256,
            "{} changed since `cargo xtask image`; run it again",
            i.binary.display()
        );
        let reference = format!("localhost/{}:{tag}", i.service);
        images::commit_service(
            &tools,
            &images::ServiceImage {
                service: &i.service,
                base: &base_ref,
                binary: &i.binary,
                sbom: &i.sbom,
                labels: &i.labels,
                reference: &reference,
                timestamp: built.timestamp,
            },
        )
        .unwrap();
        names.push(reference.clone());
        assert_eq!(
            images::ImageRef(&reference).diff_ids(&tools).unwrap(),
            i.diff_ids,
            "{}: layer digests of a rebuild",
            i.service
        );
        let archive = work.join(format!("{}.oci.tar", i.service));
        images::save_archive(&tools, &reference, &archive).unwrap();
        assert_eq!(
            images::archive_layers(&tools, &archive).unwrap(),
            i.layers,
            "{}: compressed layers of a rebuild",
            i.service
        );
    }
    for n in names.iter().rev() {
        images::remove(&tools, n).unwrap();
    }
    let _ = std::fs::remove_dir_all(&work);
}
