//! Each service's overlay (`kubectl apply -k kustomize/<service>`) renders with the pinned
//! kustomize and every object passes the real API server's validation (server-side dry run),
//! with no cert-manager object in it (managed certificates need none). Each cert-manager variant
//! (`kustomize/with-cert-manager/<service>`: the overlay plus its cert-manager component) passes
//! the same dry run with cert-manager's CRDs installed (`fixtures/crds/cert-manager`),
//! so its Issuers and Certificates are validated for real; and so does the monitoring variant
//! (`kustomize/with-monitoring`) with the Prometheus operator's CRDs.

use std::path::Path;
use std::process::Command;

use admission_kit::review::app::EndpointInfo;
use e2e::Env;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use serde::Deserialize;

/// Renders `overlay` and dry-runs every object; returns the rendered text and the kinds.
async fn render_and_dry_run(env: &Env, kustomize: &Path, overlay: &Path) -> (String, Vec<String>) {
    let name = overlay.display().to_string();
    let out = Command::new(kustomize)
        .arg("build")
        .arg(overlay)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kustomize build {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let mut kinds = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let obj = DynamicObject::deserialize(doc).unwrap();
        let tm = obj.types.clone().unwrap();
        kinds.push(tm.kind.clone());
        let (group, version) = tm
            .api_version
            .rsplit_once('/')
            .unwrap_or(("", tm.api_version.as_str()));
        let (ar, caps) = kube::discovery::pinned_kind(
            &env.client,
            &GroupVersionKind::gvk(group, version, &tm.kind),
        )
        .await
        .unwrap_or_else(|e| panic!("{name}: {}: {e}", tm.kind));
        let api: Api<DynamicObject> = match (caps.scope, obj.metadata.namespace.as_deref()) {
            (kube::discovery::Scope::Namespaced, Some(ns)) => {
                Api::namespaced_with(env.client.clone(), ns, &ar)
            }
            (kube::discovery::Scope::Namespaced, None) => {
                panic!(
                    "{name}: {} {:?} has no namespace",
                    tm.kind, obj.metadata.name
                )
            }
            _ => Api::all_with(env.client.clone(), &ar),
        };
        // The namespace is created for real so the namespaced objects can be dry-run into it.
        let params = PostParams {
            dry_run: tm.kind != "Namespace",
            ..PostParams::default()
        };
        match api.create(&params, &obj).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.reason == "AlreadyExists" => {}
            Err(e) => panic!("{name}: {} {:?} refused: {e}", tm.kind, obj.metadata.name),
        }
    }
    (text, kinds)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlays_render_and_pass_server_dry_run() {
    let env = Env::new("e2e-kustomize").await;
    let bins = testenv::tools::locate().unwrap_or_else(|e| panic!("{e}"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut checked = 0;
    for svc in std::fs::read_dir(root.join("services")).unwrap().flatten() {
        let name = svc.file_name().to_string_lossy().into_owned();
        let overlay = root.join("kustomize").join(&name);
        assert!(
            overlay.join("kustomization.yaml").is_file(),
            "{name} has no kustomize overlay"
        );
        let (text, kinds) = render_and_dry_run(&env, &bins.kustomize, &overlay).await;
        checked += kinds.len();
        assert!(
            !text.contains("cert-manager.io"),
            "{name}: the default overlay needs no cert-manager"
        );
        let expected: &[&str] = if app_of(&name).is_some() {
            &[
                "Deployment",
                "Service",
                "ValidatingWebhookConfiguration",
                "PodDisruptionBudget",
                "Role",
                "RoleBinding",
                "HorizontalPodAutoscaler",
                "NetworkPolicy",
            ]
        } else {
            &[
                "Deployment",
                "Service",
                "PodDisruptionBudget",
                "NetworkPolicy",
            ]
        };
        for k in expected {
            assert!(kinds.iter().any(|x| x == k), "{name}: overlay has no {k}");
        }
        registered_as_served(&name, &text);
        reachable_only_as_intended(&name, &text);
        // quota-state's gRPC is mutual TLS only, and the webhook calls it that way.
        if name == "quota-state" {
            assert!(
                text.contains("name: WEBHOOK_TLS_MODE\n          value: managed")
                    && !text.to_lowercase().contains("insecure"),
                "quota-state must require client certificates, from its managed CA"
            );
        }
        if name == "scheduling-webhook" {
            // One working unit: its Fail-policy Pod webhooks never point at a missing quota-state.
            assert!(
                text.contains("name: quota-state\n  namespace: admission-webhooks"),
                "the scheduling overlay brings quota-state"
            );
            assert!(
                text.contains("--quota-state-url=https://quota-state:9090")
                    && text.contains(
                        "--quota-state-client-secret=quota-state-client-scheduling-webhook"
                    ),
                "scheduling-webhook must call quota-state with mutual TLS"
            );
        }
        if app_of(&name).is_some() {
            assert!(
                text.contains("name: WEBHOOK_TLS_MODE\n          value: managed"),
                "{name}: managed certificates by default"
            );
        }
    }
    assert!(checked > 0, "no object checked");

    // The webhook ports narrowed to the control plane: each webhook's rule names the example's
    // CIDR, and the ConfigMap that carried it is not applied.
    let (text, _) = render_and_dry_run(
        &env,
        &bins.kustomize,
        &root.join("kustomize/examples/control-plane-only"),
    )
    .await;
    let mut narrowed = 0;
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let v = serde_json::Value::deserialize(doc).unwrap();
        assert!(v["kind"] != "ConfigMap" || v["metadata"]["name"] != "control-plane");
        if v["kind"] != "NetworkPolicy" {
            continue;
        }
        for rule in v["spec"]["ingress"].as_array().unwrap() {
            if rule["ports"][0]["port"] == "webhook" {
                assert_eq!(rule["from"][0]["ipBlock"]["cidr"], "192.0.2.10/32");
                narrowed += 1;
            }
        }
    }
    // One per webhook service (quota-state's gRPC port is open to scheduling-webhook only).
    let webhook_services = std::fs::read_dir(root.join("services"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with("-webhook"))
        .count();
    assert_eq!(narrowed, webhook_services, "every webhook service's port");

    // Everything at once: each service once, one namespace, restricted Pod Security.
    let (text, kinds) =
        render_and_dry_run(&env, &bins.kustomize, &root.join("kustomize/all")).await;
    assert_eq!(kinds.iter().filter(|k| *k == "Namespace").count(), 1);
    assert!(text.contains("pod-security.kubernetes.io/enforce: restricted"));
    for svc in std::fs::read_dir(root.join("services")).unwrap().flatten() {
        let name = svc.file_name().to_string_lossy().into_owned();
        assert!(
            text.contains(&format!("kind: Deployment\nmetadata:\n  labels:\n    app.kubernetes.io/managed-by: kustomize\n    app.kubernetes.io/name: {name}")),
            "kustomize/all installs {name}"
        );
        registered_as_served(&name, &text);
    }

    // The high-availability component on everything: 3+ replicas per webhook, one per node,
    // two kept through voluntary disruptions.
    let (text, _) = render_and_dry_run(
        &env,
        &bins.kustomize,
        &root.join("kustomize/with-high-availability"),
    )
    .await;
    for (want, n) in [
        ("minReplicas: 3", webhook_services),
        ("whenUnsatisfiable: DoNotSchedule", webhook_services),
        ("minAvailable: 2", webhook_services),
    ] {
        assert_eq!(
            text.matches(want).count(),
            n,
            "with-high-availability: {want}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cert_manager_and_monitoring_variants_pass_server_dry_run_with_their_crds() {
    let env = Env::new("e2e-kustomize-cm").await;
    let bins = testenv::tools::locate().unwrap_or_else(|e| panic!("{e}"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let fixtures = admission_testing::fixtures::fixtures_root();
    for set in ["crds/cert-manager", "crds/prometheus-operator"] {
        for f in std::fs::read_dir(fixtures.join(set)).unwrap().flatten() {
            if f.path().extension().is_some_and(|e| e == "yaml") {
                let yaml = std::fs::read_to_string(f.path()).unwrap();
                testenv::system::apply_crds(&env.client, &yaml)
                    .await
                    .unwrap_or_else(|e| panic!("{}: {e}", f.path().display()));
            }
        }
    }
    // The monitoring component on everything: PodMonitor, PrometheusRule, dashboard ConfigMap.
    let (text, kinds) = render_and_dry_run(
        &env,
        &bins.kustomize,
        &root.join("kustomize/with-monitoring"),
    )
    .await;
    for k in ["PodMonitor", "PrometheusRule", "ConfigMap"] {
        assert!(kinds.iter().any(|x| x == k), "with-monitoring: no {k}");
    }
    assert!(text.contains("grafana_dashboard: \"1\""));
    // The fleet hub with monitoring: the services' and the fleet's alerts.
    let (text, kinds) = render_and_dry_run(
        &env,
        &bins.kustomize,
        &root.join("kustomize/multi-cluster/hub-with-monitoring"),
    )
    .await;
    assert_eq!(
        kinds.iter().filter(|k| *k == "PrometheusRule").count(),
        2,
        "hub-with-monitoring"
    );
    assert!(text.contains("alert: QuotaStateMemberWatchDown"));
    let mut variants = 0;
    for svc in std::fs::read_dir(root.join("services")).unwrap().flatten() {
        let name = svc.file_name().to_string_lossy().into_owned();
        let overlay = root.join("kustomize/with-cert-manager").join(&name);
        assert!(
            overlay.join("kustomization.yaml").is_file(),
            "{name} has no cert-manager variant"
        );
        let (text, kinds) = render_and_dry_run(&env, &bins.kustomize, &overlay).await;
        for k in ["Issuer", "Certificate"] {
            assert!(kinds.iter().any(|x| x == k), "{name}: no {k}");
        }
        // A proper chain: a self-signed issuer only bootstraps the CA that signs the rest.
        assert!(text.contains("isCA: true"), "{name}: a CA certificate");
        if app_of(&name).is_some() {
            assert!(
                text.contains("cert-manager.io/inject-ca-from: admission-webhooks/"),
                "{name}: cainjector sets the caBundle"
            );
            assert!(
                text.contains("name: WEBHOOK_TLS_MODE\n          value: files"),
                "{name}: files mode"
            );
            assert!(
                !text.contains(&format!("name: {name}-certificates")),
                "{name}: no managed-certificate permissions"
            );
            registered_as_served(&name, &text);
        }
        variants += 1;
    }
    assert!(variants > 0);
}

/// The enforcement components (`kustomize/components/{audit,warn}`, used by
/// `kustomize/examples/{audit,warn}`): every webhook of the overlay registers with failurePolicy
/// Ignore, every webhook Deployment runs in the mode, the local ConfigMap is not applied, and the
/// API server's dry run accepts every object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enforcement_components_render_and_pass_server_dry_run() {
    let env = Env::new("e2e-kustomize-modes").await;
    let bins = testenv::tools::locate().unwrap_or_else(|e| panic!("{e}"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for mode in ["audit", "warn"] {
        let overlay = root.join("kustomize/examples").join(mode);
        let (text, _) = render_and_dry_run(&env, &bins.kustomize, &overlay).await;
        let (mut hooks, mut deployments) = (0, 0);
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            let v = serde_json::Value::deserialize(doc).unwrap();
            let kind = v["kind"].as_str().unwrap_or_default();
            let name = v["metadata"]["name"].as_str().unwrap_or_default();
            assert!(
                !(kind == "ConfigMap" && name.starts_with("enforcement-")),
                "{mode}: the component's local ConfigMap is applied"
            );
            if kind.ends_with("WebhookConfiguration") {
                for hook in v["webhooks"].as_array().unwrap() {
                    assert_eq!(hook["failurePolicy"], "Ignore", "{mode}: {}", hook["name"]);
                    hooks += 1;
                }
            }
            if kind == "Deployment" && name.ends_with("-webhook") {
                let env = &v["spec"]["template"]["spec"]["containers"][0]["env"];
                assert!(
                    env.as_array()
                        .unwrap()
                        .iter()
                        .any(|e| { e["name"] == "WEBHOOK_ENFORCEMENT" && e["value"] == mode }),
                    "{mode}: {name} runs without the mode: {env}"
                );
                deployments += 1;
            }
        }
        assert!(hooks > 0 && deployments > 0, "{mode}: nothing checked");
    }
}

/// `kustomize/examples/binding-admission` (the base overlay with the binding-admission
/// component): PB's gate and users on the Deployment, `/validate-pod-binding` registered as
/// served, and the API server's dry run accepts it; the base overlay leaves that webhook out
/// (checked by `registered_as_served` in `overlays_render_and_pass_server_dry_run`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binding_admission_component_registers_the_binding_webhook() {
    let env = Env::new("e2e-kustomize-binding").await;
    let bins = testenv::tools::locate().unwrap_or_else(|e| panic!("{e}"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let overlay = root.join("kustomize/examples/binding-admission");
    let (text, _) = render_and_dry_run(&env, &bins.kustomize, &overlay).await;
    assert!(
        text.contains("path: /validate-pod-binding"),
        "the component registers the binding webhook"
    );
    registered_as_served("scheduling-webhook", &text);
}

fn app_of(service: &str) -> Option<admission_kit::App> {
    Some(match service {
        "registry-webhook" => registry_webhook::app(),
        "node-config-webhook" => node_config_webhook::app(),
        "training-webhook" => training_webhook::app(),
        "scheduling-webhook" => scheduling_webhook::app(),
        "lifecycle-webhook" => lifecycle_webhook::app().unwrap(),
        // Not a webhook: a gRPC service the scheduling webhook calls.
        "quota-state" => return None,
        other => panic!("{other}: add it to app_of in this test"),
    })
}

/// Every endpoint is registered once, at its path, in the right configuration kind, with its
/// failure policy, target and object selector.
/// The service's NetworkPolicy: the metrics port only from Prometheus Pods, quota-state's gRPC
/// port only from scheduling-webhook's, the webhook port from anywhere (the API server), and no
/// rule without ports.
fn reachable_only_as_intended(service: &str, rendered: &str) {
    let peers = |rule: &serde_json::Value| -> Vec<String> {
        rule["from"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|p| p["podSelector"]["matchLabels"]["app.kubernetes.io/name"].to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut seen = 0;
    for doc in serde_yaml_ng::Deserializer::from_str(rendered) {
        let v = serde_json::Value::deserialize(doc).unwrap();
        if v["kind"] != "NetworkPolicy" || v["metadata"]["name"] != service {
            continue;
        }
        seen += 1;
        for rule in v["spec"]["ingress"].as_array().unwrap() {
            let ports = rule["ports"]
                .as_array()
                .expect("every rule names its ports");
            for port in ports {
                let from = peers(rule);
                match port["port"].as_str().unwrap() {
                    "metrics" => {
                        assert_eq!(from, [r#""prometheus""#], "{service}: metrics");
                        // A namespace, not only a Pod label any tenant can set.
                        assert_eq!(
                            rule["from"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
                            "monitoring",
                            "{service}: metrics from the monitoring namespace"
                        );
                    }
                    "grpc" => assert_eq!(from, [r#""scheduling-webhook""#], "{service}: grpc"),
                    "webhook" => assert!(from.is_empty(), "{service}: the API server calls"),
                    other => panic!("{service}: unexpected port {other}"),
                }
            }
        }
    }
    assert_eq!(seen, 1, "{service}: one NetworkPolicy");
}

/// `service`'s endpoint table under the options its Deployment in `rendered` passes as
/// `--name=value` args, and a context with the gates it passes.
fn deployed(service: &str, rendered: &str) -> Option<(admission_kit::App, admission_kit::Context)> {
    use admission_kit::cli::declared;
    let mut args = Vec::new();
    let mut gates = None;
    for doc in serde_yaml_ng::Deserializer::from_str(rendered) {
        let v = serde_json::Value::deserialize(doc).unwrap();
        if v["kind"] != "Deployment" || v["metadata"]["name"] != service {
            continue;
        }
        let given = v["spec"]["template"]["spec"]["containers"][0]["args"].as_array();
        for arg in given.into_iter().flatten().filter_map(|a| a.as_str()) {
            let Some((name, value)) = arg.strip_prefix("--").and_then(|a| a.split_once('=')) else {
                continue;
            };
            if name == "feature-gates" {
                gates = Some(value.to_owned());
            } else {
                args.push((name.to_owned(), arg.to_owned()));
            }
        }
    }
    // The service's own flags; the others are the kit's.
    let own = |declared: Vec<String>| -> Vec<String> {
        args.iter()
            .filter(|(name, _)| declared.contains(name))
            .map(|(_, arg)| arg.clone())
            .collect()
    };
    let built = match service {
        "registry-webhook" => Ok(registry_webhook::app()),
        "node-config-webhook" => {
            let flags = own(declared::<node_config_webhook::Options>());
            node_config_webhook::app_from_flags(flags.iter().map(String::as_str))
        }
        "training-webhook" => {
            let flags = own(declared::<training_webhook::Options>());
            training_webhook::app_from_flags(flags.iter().map(String::as_str))
        }
        "scheduling-webhook" => {
            let flags = own(declared::<scheduling_webhook::options::Options>());
            scheduling_webhook::app_from_flags(flags.iter().map(String::as_str))
        }
        "lifecycle-webhook" => {
            let flags = own(declared::<lifecycle_webhook::options::Flags>());
            admission_kit::cli::parse_options(flags.iter().map(String::as_str))
                .and_then(lifecycle_webhook::app_from)
        }
        _ => return None,
    };
    let app = built.unwrap_or_else(|e| panic!("{service}: its Deployment's options: {e}"));
    let gates = app.prepare(gates.as_deref()).unwrap().gates;
    let settings = admission_kit::Context::new(std::sync::Arc::new(
        admission_kit::review::lookup::EmptyState,
    ))
    .with_gates(gates);
    Some((app, settings))
}

/// Every webhook of `service`'s configurations in `rendered` is an endpoint it serves, registered
/// as the endpoint table says, and every endpoint its Deployment's flags turn on is registered
/// once (`/validate-pod-binding` only with PB on).
fn registered_as_served(service: &str, rendered: &str) {
    let Some((app, settings)) = deployed(service, rendered) else {
        return;
    };
    let served = EndpointInfo::registered(&app, &settings);
    let mut registered = 0;
    for doc in serde_yaml_ng::Deserializer::from_str(rendered) {
        let v = serde_json::Value::deserialize(doc).unwrap();
        let kind = v["kind"].as_str().unwrap_or_default();
        if !kind.ends_with("WebhookConfiguration") || v["metadata"]["name"] != service {
            continue;
        }
        for hook in v["webhooks"].as_array().unwrap() {
            let path = hook["clientConfig"]["service"]["path"].as_str().unwrap();
            // Never the control plane, our own namespace, or an opted-out namespace.
            let exprs = hook["namespaceSelector"]["matchExpressions"].to_string();
            for must in [
                r#""operator":"NotIn","values":["kube-system","admission-webhooks"]"#,
                r#"{"key":"admission-webhooks.io/exclude","operator":"DoesNotExist"}"#,
            ] {
                assert!(
                    exprs.contains(must),
                    "{service} {path}: namespaceSelector {exprs}"
                );
            }
            let ep = served
                .iter()
                .find(|e| e.path == path)
                .unwrap_or_else(|| panic!("{service}: {path} is registered but not served"));
            assert_eq!(
                kind,
                format!("{}WebhookConfiguration", ep.kind),
                "{service} {path}"
            );
            assert_eq!(
                hook["failurePolicy"].as_str(),
                Some(ep.failure_policy.as_str()),
                "{service} {path}"
            );
            assert_eq!(
                hook["sideEffects"].as_str(),
                Some(ep.side_effects.as_str()),
                "{service} {path}"
            );
            assert_eq!(
                hook["timeoutSeconds"].as_i64(),
                Some(i64::from(app.timeout_seconds)),
                "{service} {path}: the timeout self-registration uses"
            );
            assert_eq!(
                hook["rules"][0]["resources"][0].as_str(),
                Some(ep.resource.as_str()),
                "{service} {path}"
            );
            assert_eq!(
                hook["rules"][0]["apiGroups"][0].as_str(),
                Some(ep.group.as_str()),
                "{service} {path}"
            );
            let ops: Vec<&str> = hook["rules"][0]["operations"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|o| o.as_str())
                .collect();
            assert_eq!(ops, ep.operations, "{service} {path}");
            if let Some(sel) = &ep.object_selector {
                let expr = &hook["objectSelector"]["matchExpressions"][0];
                assert_eq!(
                    expr["key"].as_str(),
                    Some(sel.key.as_str()),
                    "{service} {path}"
                );
                assert_eq!(
                    expr["operator"].as_str(),
                    Some(sel.operator.as_str()),
                    "{service} {path}"
                );
                assert_eq!(
                    expr["values"],
                    serde_json::json!(sel.values),
                    "{service} {path}"
                );
            }
            registered += 1;
        }
    }
    assert_eq!(
        registered,
        served.len(),
        "{service}: every endpoint is registered once"
    );
}

/// One quota across clusters: the hub and member overlays render and pass the server's dry
/// run; the hub runs quota-state in fleet mode with its own ElasticQuota CRD (the one
/// scheduling-webhook generates), the member's webhook asks the hub as its cluster, both inputs
/// in one generated ConfigMap each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_cluster_overlays_pass_server_dry_run() {
    let env = Env::new("e2e-kustomize-fleet").await;
    let bins = testenv::tools::locate().unwrap_or_else(|e| panic!("{e}"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let (hub, kinds) = render_and_dry_run(
        &env,
        &bins.kustomize,
        &root.join("kustomize/multi-cluster/hub"),
    )
    .await;
    for k in ["CustomResourceDefinition", "Deployment", "Service", "Role"] {
        assert!(kinds.iter().any(|x| x == k), "hub: no {k}");
    }
    for want in [
        "name: QUOTA_STATE_FLEET\n          value: \"true\"",
        "value: quota-state,$(FLEET_ADDRESS)",
        "name: QUOTA_STATE_MEMBER_CLIENT_SECRET\n          value: admission-webhooks/quota-state-client-scheduling-webhook",
        "type: LoadBalancer",
        "address: quota-state.hub.example.com",
    ] {
        assert!(hub.contains(want), "hub: no {want:?}");
    }
    assert!(
        !hub.contains("scheduling-webhook:latest"),
        "the hub runs quota-state alone"
    );
    // The CRD shipped is the one the webhook generates.
    let shipped: serde_json::Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(root.join("kustomize/multi-cluster/hub/elasticquota-crd.yaml"))
            .unwrap(),
    )
    .unwrap();
    let generated = scheduling_webhook::app()
        .custom_resource_definitions()
        .into_iter()
        .find(|c| c.metadata.name.as_deref() == Some("elasticquotas.scheduling.sigs.k8s.io"))
        .unwrap();
    assert_eq!(
        shipped,
        serde_json::to_value(&generated).unwrap(),
        "regenerate kustomize/multi-cluster/hub/elasticquota-crd.yaml"
    );

    let (member, kinds) = render_and_dry_run(
        &env,
        &bins.kustomize,
        &root.join("kustomize/multi-cluster/member"),
    )
    .await;
    for k in [
        "ServiceAccount",
        "ClusterRole",
        "MutatingWebhookConfiguration",
    ] {
        assert!(kinds.iter().any(|x| x == k), "member: no {k}");
    }
    for want in [
        "- --quota-state-url=https://$(FLEET_HUB)",
        "- --quota-state-cluster=$(FLEET_CLUSTER)",
        "- --quota-state-calls-in-flight=4",
        "hub: quota-state.hub.example.com:9090",
        "cluster: east",
        "type: kubernetes.io/service-account-token",
        "resourceNames:\n  - quota-state-client-scheduling-webhook",
    ] {
        assert!(member.contains(want), "member: no {want:?}");
    }
    assert!(
        !member.contains("quota-state:latest"),
        "members run no quota-state"
    );
}

/// The tracing component (`kustomize/components/tracing`, used by `kustomize/examples/tracing`):
/// every service's Deployment, quota-state's included, exports to the collector the overlay
/// names, the local ConfigMap is not applied, and the API server's dry run accepts every object.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tracing_component_renders_and_passes_server_dry_run() {
    let env = Env::new("e2e-kustomize-tracing").await;
    let bins = testenv::tools::locate().unwrap_or_else(|e| panic!("{e}"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let overlay = root.join("kustomize/examples/tracing");
    let (text, _) = render_and_dry_run(&env, &bins.kustomize, &overlay).await;
    let mut exporting = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let v = serde_json::Value::deserialize(doc).unwrap();
        let kind = v["kind"].as_str().unwrap_or_default();
        let name = v["metadata"]["name"].as_str().unwrap_or_default();
        assert!(
            !(kind == "ConfigMap" && name == "tracing-collector"),
            "the component's local ConfigMap is applied"
        );
        if kind == "Deployment" {
            let env = &v["spec"]["template"]["spec"]["containers"][0]["env"];
            let endpoint: Vec<&serde_json::Value> = env
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["name"] == "OTEL_EXPORTER_OTLP_ENDPOINT")
                .collect();
            assert_eq!(
                endpoint,
                [&serde_json::json!({"name": "OTEL_EXPORTER_OTLP_ENDPOINT",
                                     "value": "http://jaeger-collector.tracing.svc:4317"})],
                "{name}"
            );
            exporting.push(name.to_owned());
        }
    }
    exporting.sort();
    assert_eq!(
        exporting,
        [
            "lifecycle-webhook",
            "node-config-webhook",
            "quota-state",
            "registry-webhook",
            "scheduling-webhook",
            "training-webhook"
        ]
    );
}
