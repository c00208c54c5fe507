//! What the overlays let this project's own service accounts and a namespace admin do, applied
//! for real (`kustomize/all`: RBAC, the shipped Secrets and Leases, the ValidatingAdmission-
//! Policies; of the webhook configurations only registry-webhook's, whose rules touch nothing
//! this test creates) and exercised through the real API server by impersonation:
//!
//! - no service account can create a Secret or a Lease, so none can plant another service's
//!   (registry-webhook's account tried `quota-state-certificates` and the `quota-state` Lease);
//!   each still updates its own;
//! - a service account may change the caBundle of its own webhook configurations and nothing
//!   else of them (rules, address, failure policy, labels, ownerReferences, finalizers);
//! - lifecycle-webhook's account updates its drain record and creates nothing; no other account
//!   or tenant writes the record (nobody else moves a drain's deadline);
//! - quota-state may change an ElasticQuota's usage annotations (`child-request`, and a fleet
//!   hub's `child-request-by-member`) and nothing else;
//! - only administrators may set a namespace's opt-out labels (`admission-webhooks.io/exclude`,
//!   `control-plane`), through the namespace or its status;
//! - the cert-manager variant of scheduling-webhook still lets it read the client certificate
//!   quota-state's side issues to it, and mounts every file its flags name.

use std::path::Path;
use std::process::Command;

use e2e::{Env, refused};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::json;

const NS: &str = "admission-webhooks";

/// An owner reference to an object that does not exist: garbage collection would delete what
/// carries it.
static OWNER: std::sync::LazyLock<serde_json::Value> = std::sync::LazyLock::new(|| {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "gone",
           "uid": "6b1e0f6e-0000-4000-8000-000000000001"})
});

/// Creates (or replaces) `obj` for real (the overlay names every namespaced object's namespace).
async fn apply(client: &kube::Client, obj: &DynamicObject) {
    let api = e2e::dynamic_api(client, obj, "default").await;
    let name = obj.metadata.name.clone().unwrap();
    let pp = PatchParams::apply("e2e-access").force();
    api.patch(&name, &pp, &Patch::Apply(obj))
        .await
        .unwrap_or_else(|e| panic!("{:?} {name}: {e}", obj.types));
}

async fn service_account(name: &str) -> kube::Client {
    e2e::as_user(
        &format!("system:serviceaccount:{NS}:{name}"),
        &[
            "system:serviceaccounts",
            &format!("system:serviceaccounts:{NS}"),
            "system:authenticated",
        ],
    )
    .await
}

/// Starts `service`'s binary as its service account (a kubeconfig that impersonates it), with
/// managed certificates in namespace admission-webhooks as its Deployment runs it; returns
/// once it is ready and its validating configuration carries a CA it made.
async fn run_as_service_account(env: &Env, dir: &Path, service: &str) -> testenv::system::Running {
    let shared = testenv::shared().unwrap();
    let admin = std::fs::read_to_string(&shared.kubeconfig).unwrap();
    let key_line = admin
        .lines()
        .find(|l| l.trim_start().starts_with("client-key-data:"))
        .unwrap()
        .to_owned();
    let indent = &key_line[..key_line.len() - key_line.trim_start().len()];
    let kubeconfig = admin.replace(
        &key_line,
        &format!(
            "{key_line}\n{indent}as: system:serviceaccount:{NS}:{service}\n{indent}as-groups: \
             [system:serviceaccounts, system:serviceaccounts:{NS}, system:authenticated]"
        ),
    );
    let path = dir.join(format!("{service}.kubeconfig"));
    std::fs::write(&path, kubeconfig).unwrap();
    let bin_dir = testenv::system::bin_dir_of_current_exe().unwrap();
    let (port, mport) = (testenv::free_port().unwrap(), testenv::free_port().unwrap());
    let mut cmd = Command::new(bin_dir.join(service));
    cmd.args(["serve", "--log-format", "text", "--tls-mode", "managed"])
        .args([
            "--tls-extra-names",
            "127.0.0.1,localhost",
            "--shutdown-delay",
            "0s",
        ])
        .args(["--namespace", NS])
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--metrics-listen")
        .arg(format!("127.0.0.1:{mport}"))
        .env("KUBECONFIG", &path);
    let running =
        testenv::system::Running::spawn(service, cmd, dir.join(format!("{service}.log"))).unwrap();
    let hooks: Api<ValidatingWebhookConfiguration> = Api::all(env.client.clone());
    e2e::eventually(std::time::Duration::from_secs(60), || async {
        let ready = testenv::system::http_status(&format!("127.0.0.1:{mport}"), "/readyz").await;
        let cfg = hooks.get(service).await.map_err(|e| e.to_string())?;
        let bundle = cfg.webhooks.unwrap_or_default()[0]
            .client_config
            .ca_bundle
            .clone()
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
            .unwrap_or_default();
        if ready == Some(200) && bundle.contains("BEGIN CERTIFICATE") {
            Ok(())
        } else {
            let log =
                std::fs::read_to_string(dir.join(format!("{service}.log"))).unwrap_or_default();
            let tail: String = log.lines().rev().take(5).collect::<Vec<_>>().join(" | ");
            Err(format!(
                "readyz {ready:?}, caBundle {} bytes; log: {tail}",
                bundle.len()
            ))
        }
    })
    .await;
    running
}

fn merge(v: serde_json::Value) -> Patch<serde_json::Value> {
    Patch::Merge(v)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_accounts_and_namespace_admins_get_only_what_they_need() {
    let env = Env::new("e2e-access").await;
    env.install_crds(&scheduling_webhook::app()).await;
    let objects = e2e::render_overlay("kustomize/all");
    for o in &objects {
        let kind = o.types.as_ref().unwrap().kind.as_str();
        let name = o.metadata.name.as_deref().unwrap_or_default();
        if kind.ends_with("WebhookConfiguration") && name != "registry-webhook" {
            continue;
        }
        apply(&env.client, o).await;
    }
    let pp = PostParams::default();

    // 1. Planting another service's Secret or Lease: no account may create either.
    let registry = service_account("registry-webhook").await;
    let secrets: Api<Secret> = Api::namespaced(registry.clone(), NS);
    let leases: Api<Lease> = Api::namespaced(registry.clone(), NS);
    let planted: Secret = serde_json::from_value(json!({
        "metadata": {"name": "quota-state-certificates-2"},
        "stringData": {"ca.crt": "attacker's"}
    }))
    .unwrap();
    let (code, _) = refused(secrets.create(&pp, &planted).await, "create a Secret");
    assert_eq!(code, 403);
    let lease: Lease =
        serde_json::from_value(json!({"metadata": {"name": "quota-state-2"}})).unwrap();
    let (code, _) = refused(leases.create(&pp, &lease).await, "create a Lease");
    assert_eq!(code, 403);
    let plant = merge(json!({"stringData": {"ca.crt": "attacker's"}}));
    let (code, _) = refused(
        secrets
            .patch("quota-state-certificates", &PatchParams::default(), &plant)
            .await,
        "write quota-state's Secret",
    );
    assert_eq!(code, 403);
    let (code, _) = refused(
        leases
            .patch(
                "quota-state",
                &PatchParams::default(),
                &merge(json!({"spec": {"holderIdentity": "attacker"}})),
            )
            .await,
        "take quota-state's Lease",
    );
    assert_eq!(code, 403);
    // Its own, shipped empty, it fills (update) and holds.
    let mut own = secrets.get("registry-webhook-certificates").await.unwrap();
    assert_eq!(
        own.metadata.annotations.as_ref().unwrap()["admission-webhooks.io/owner"],
        "registry-webhook"
    );
    own.string_data = Some([("ca.crt".to_owned(), "ours".to_owned())].into());
    secrets
        .replace("registry-webhook-certificates", &pp, &own)
        .await
        .unwrap();
    leases
        .patch(
            "registry-webhook-certificates",
            &PatchParams::default(),
            &merge(json!({"metadata": {"labels": {"checked": "yes"}}})),
        )
        .await
        .unwrap();

    // The drain record: lifecycle-webhook's account updates it (compare-and-swap on its
    // resourceVersion) and creates no ConfigMap; no other account, and no tenant, writes it, so
    // nobody but the service moves a drain's deadline.
    let drains: Api<ConfigMap> = Api::namespaced(service_account("lifecycle-webhook").await, NS);
    let mut record = drains.get("lifecycle-webhook-drains").await.unwrap();
    record.data = Some([("a-pod-uid".to_owned(), "{}".to_owned())].into());
    drains
        .replace("lifecycle-webhook-drains", &pp, &record)
        .await
        .unwrap();
    let other: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "lifecycle-webhook-drains-2"}}))
            .unwrap();
    let (code, _) = refused(drains.create(&pp, &other).await, "create a ConfigMap");
    assert_eq!(code, 403);
    let later = merge(json!({"data": {"a-pod-uid": "{\"deadline\": \"2999-01-01T00:00:00Z\"}"}}));
    for who in [
        service_account("registry-webhook").await,
        e2e::as_user("tenant-admin", &["system:authenticated"]).await,
    ] {
        let (code, _) = refused(
            Api::<ConfigMap>::namespaced(who, NS)
                .patch("lifecycle-webhook-drains", &PatchParams::default(), &later)
                .await,
            "move a drain's deadline",
        );
        assert_eq!(code, 403);
    }

    // The service itself, run as its service account (no `create` anywhere): it fills the
    // shipped Secret, holds the Lease, patches its configurations' caBundle and turns ready.
    let dir = testenv::shared()
        .unwrap()
        .kubeconfig
        .with_file_name(&env.ns);
    std::fs::create_dir_all(&dir).unwrap();
    let _service = run_as_service_account(&env, &dir, "registry-webhook").await;

    // 2. Its own webhook configurations (RBAC: `patch` by name): the caBundle, nothing else.
    let hooks: Api<ValidatingWebhookConfiguration> = Api::all(registry.clone());
    let current = serde_json::to_value(hooks.get("registry-webhook").await.unwrap()).unwrap();
    let with = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut v = current["webhooks"].clone();
        for w in v.as_array_mut().unwrap() {
            f(w);
        }
        merge(json!({ "webhooks": v }))
    };
    let patched = |p: Patch<serde_json::Value>| {
        let hooks = hooks.clone();
        async move {
            hooks
                .patch("registry-webhook", &PatchParams::default(), &p)
                .await
        }
    };
    patched(with(&|w| {
        w["clientConfig"]["caBundle"] = json!("Y2EgYnVuZGxl")
    }))
    .await
    .unwrap();
    // The API server takes in new policies asynchronously: wait until a dry run is refused.
    let wide = with(&|w| {
        w["rules"] = json!([{"apiGroups": ["*"], "apiVersions": ["*"],
        "resources": ["*"], "operations": ["*"], "scope": "*"}])
    });
    e2e::eventually(std::time::Duration::from_secs(30), || async {
        let dry = PatchParams {
            dry_run: true,
            ..PatchParams::default()
        };
        match hooks.patch("registry-webhook", &dry, &wide).await {
            Err(kube::Error::Api(e)) if e.code == 403 => Ok(()),
            other => Err(format!("policy not in force yet: {:?}", other.map(|_| ()))),
        }
    })
    .await;
    for (what, changed) in [
        (
            "rules widened to */*",
            with(&|w| {
                w["rules"] = json!([{"apiGroups": ["*"], "apiVersions": ["*"],
                    "resources": ["*"], "operations": ["*"], "scope": "*"}])
            }),
        ),
        (
            "sent elsewhere",
            with(&|w| {
                w["clientConfig"] = json!({"url": "https://attacker.example:443/steal",
                    "caBundle": w["clientConfig"]["caBundle"].clone()})
            }),
        ),
        (
            "failure policy Ignore",
            with(&|w| w["failurePolicy"] = json!("Ignore")),
        ),
        (
            "an ownerReference (garbage collection would delete it with its owner)",
            merge(json!({"metadata": {"ownerReferences": [OWNER.clone()]}})),
        ),
        (
            "a finalizer",
            merge(json!({"metadata": {"finalizers": ["example.com/hold"]}})),
        ),
        (
            "a label",
            merge(json!({"metadata": {"labels": {"team": "a"}}})),
        ),
    ] {
        let (code, msg) = refused(patched(changed).await, what);
        assert_eq!(code, 403, "{what}: {msg}");
        assert!(
            msg.contains("may change only the caBundle of its webhook configurations"),
            "{what}: {msg}"
        );
    }

    // 3. quota-state on ElasticQuotas: the usage annotation only.
    let quota_ns = format!("{}-quotas", env.ns);
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": quota_ns,
        "labels": {"admission-webhooks.io/exclude": "true"}}}))
    .unwrap();
    Api::<Namespace>::all(env.client.clone())
        .create(&pp, &ns)
        .await
        .unwrap();
    let ar = kube::api::ApiResource::erase::<scheduling_webhook::types::ElasticQuota>(&());
    let eq: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
        "metadata": {"name": "team", "annotations": {"team": "a"}},
        "spec": {"max": {"cpu": "10"}}
    }))
    .unwrap();
    Api::<DynamicObject>::namespaced_with(env.client.clone(), &quota_ns, &ar)
        .create(&pp, &eq)
        .await
        .unwrap();
    let quotas: Api<DynamicObject> =
        Api::namespaced_with(service_account("quota-state").await, &quota_ns, &ar);
    let usage = "quota.scheduling.koordinator.sh/child-request";
    let by_member = "fleet.admission-webhooks.io/child-request-by-member";
    quotas
        .patch(
            "team",
            &PatchParams::default(),
            &merge(json!({"metadata": {"annotations": {
                usage: "{\"cpu\":\"1\"}",
                by_member: "{\"east\":{\"cpu\":\"1\"}}",
            }}})),
        )
        .await
        .unwrap();
    for (what, patch) in [
        ("spec.max", json!({"spec": {"max": {"cpu": "1000"}}})),
        (
            "another annotation",
            json!({"metadata": {"annotations": {"team": "b"}}}),
        ),
        (
            "a label",
            json!({"metadata": {"labels": {"quota.scheduling.koordinator.sh/is-parent": "true"}}}),
        ),
        (
            "an ownerReference",
            json!({"metadata": {"ownerReferences": [OWNER.clone()]}}),
        ),
        (
            "a finalizer",
            json!({"metadata": {"finalizers": ["example.com/hold"]}}),
        ),
    ] {
        let (code, msg) = refused(
            quotas
                .patch("team", &PatchParams::default(), &merge(patch))
                .await,
            what,
        );
        assert_eq!(code, 403, "{what}: {msg}");
        assert!(
            msg.contains("may change only the usage annotations of an ElasticQuota"),
            "{what}: {msg}"
        );
    }

    // 4. The opt-out label: a namespace admin (who may patch namespaces) cannot set it.
    let admin_role: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": format!("{}-ns-admin", env.ns)},
        "rules": [{"apiGroups": [""], "resources": ["namespaces", "namespaces/status"],
                   "verbs": ["get", "patch", "update"]}]
    }))
    .unwrap();
    apply(&env.client, &admin_role).await;
    let binding: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": format!("{}-ns-admin", env.ns)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": format!("{}-ns-admin", env.ns)},
        "subjects": [{"kind": "User", "name": "tenant-admin", "apiGroup": "rbac.authorization.k8s.io"}]
    }))
    .unwrap();
    apply(&env.client, &binding).await;
    let tenant: Api<Namespace> =
        Api::all(e2e::as_user("tenant-admin", &["system:authenticated"]).await);
    let label = |v: serde_json::Value| {
        merge(json!({"metadata": {"labels": {"admission-webhooks.io/exclude": v}}}))
    };
    // The binding reaches the API server's authorizer a moment after it is written; until then
    // RBAC refuses the patch before any webhook sees it.
    let (code, msg) = e2e::eventually(std::time::Duration::from_secs(30), || async {
        let (code, msg) = refused(
            tenant
                .patch(&env.ns, &PatchParams::default(), &label(json!("true")))
                .await,
            "set the opt-out label",
        );
        if msg.contains("cannot patch resource") {
            Err(msg)
        } else {
            Ok((code, msg))
        }
    })
    .await;
    assert_eq!(code, 403, "{msg}");
    assert!(msg.contains("admission-webhooks.io/exclude"), "{msg}");
    // Nor Koordinator's opt-out of the Pod webhooks, nor either through the status.
    let (code, msg) = refused(
        tenant
            .patch(
                &env.ns,
                &PatchParams::default(),
                &merge(json!({"metadata": {"labels": {"control-plane": "x"}}})),
            )
            .await,
        "set the control-plane label",
    );
    assert_eq!(code, 403, "{msg}");
    assert!(msg.contains("control-plane labels"), "{msg}");
    for l in ["admission-webhooks.io/exclude", "control-plane"] {
        let (code, msg) = refused(
            tenant
                .patch_status(
                    &env.ns,
                    &PatchParams::default(),
                    &merge(json!({"metadata": {"labels": {l: "x"}}})),
                )
                .await,
            "set an opt-out label through namespaces/status",
        );
        assert_eq!(code, 403, "{l}: {msg}");
    }
    let (code, _) = refused(
        tenant
            .patch(&quota_ns, &PatchParams::default(), &label(json!(null)))
            .await,
        "remove the opt-out label",
    );
    assert_eq!(code, 403);
    // Other labels are the admin's to set; administrators may set this one.
    tenant
        .patch(
            &env.ns,
            &PatchParams::default(),
            &merge(json!({"metadata": {"labels": {"team": "a"}}})),
        )
        .await
        .unwrap();
    Api::<Namespace>::all(env.client.clone())
        .patch(&env.ns, &PatchParams::default(), &label(json!("true")))
        .await
        .unwrap();

    // 5. The cert-manager variant of scheduling-webhook: it still reads its quota-state client
    // certificate, and every file a flag names is mounted.
    let variant = e2e::render_overlay("kustomize/with-cert-manager/scheduling-webhook");
    // As installed alone: only the variant's Roles and bindings of scheduling-webhook.
    let roles: Api<k8s_openapi::api::rbac::v1::Role> = Api::namespaced(env.client.clone(), NS);
    let bindings: Api<k8s_openapi::api::rbac::v1::RoleBinding> =
        Api::namespaced(env.client.clone(), NS);
    for r in roles.list(&Default::default()).await.unwrap() {
        let name = r.metadata.name.unwrap_or_default();
        if name.starts_with("scheduling-webhook") {
            roles.delete(&name, &Default::default()).await.unwrap();
            let _ = bindings.delete(&name, &Default::default()).await;
        }
    }
    for o in variant.iter().filter(|o| {
        let k = o.types.as_ref().unwrap().kind.as_str();
        k == "Role" || k == "RoleBinding"
    }) {
        apply(&env.client, o).await;
    }
    let scheduling = service_account("scheduling-webhook").await;
    let client_secret = Api::<Secret>::namespaced(scheduling, NS);
    // RBAC takes in the new Role asynchronously.
    e2e::eventually(std::time::Duration::from_secs(30), || async {
        client_secret
            .get("quota-state-client-scheduling-webhook")
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;
    for d in variant
        .iter()
        .filter(|o| o.types.as_ref().unwrap().kind == "Deployment")
    {
        let spec = &d.data["spec"]["template"]["spec"];
        for c in spec["containers"].as_array().unwrap() {
            let mounts: Vec<&str> = c["volumeMounts"]
                .as_array()
                .map(|m| m.iter().filter_map(|m| m["mountPath"].as_str()).collect())
                .unwrap_or_default();
            let values = c["env"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| e["value"].as_str())
                .chain(
                    c["args"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|a| a.as_str()),
                );
            for v in values.filter(|v| v.starts_with("/etc/") || v.contains("=/etc/")) {
                let path = v.rsplit('=').next().unwrap();
                assert!(
                    mounts.iter().any(|m| path.starts_with(m)),
                    "{}: {path} is not mounted ({mounts:?})",
                    d.metadata.name.as_deref().unwrap_or_default()
                );
            }
        }
    }
}
