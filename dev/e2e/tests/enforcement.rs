//! Enforcement modes through the real API server (`--enforcement`), registry-webhook's binary
//! run as `cargo xtask up` runs it (managed certificates, self-registration), started again in
//! each mode on one namespace:
//!
//! - `audit`: every webhook registers with failurePolicy Ignore; a Model MV-11 denies is created
//!   without a word to the client and counted by rule id; a Model the mutator would default is
//!   stored unchanged, its withheld patch counted and logged;
//! - `warn`: the same Model is created and the API server passes each would-be denial to the
//!   client as a `Warning` header (what `kubectl` prints);
//! - `enforce` again: refused, registered with the table's failure policy.

use std::path::PathBuf;
use std::time::Duration;

use e2e::raw::{Answer, send};
use e2e::{Env, eventually};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::Api;
use serde_json::{Value, json};
use testenv::system::{Options, System, bin_dir_of_current_exe, check_binaries, http_get};

const SERVICE: &str = "registry-webhook";
const VALIDATE: &str = "/validate-registry-volcano-sh-v1alpha1-model";
const MUTATE: &str = "/mutate-registry-volcano-sh-v1alpha1-model";

/// A static Model whose replicas differ: MV-11 denies it.
fn denied_model(name: &str) -> Value {
    json!({
        "apiVersion": "registry.volcano.sh/v1alpha1", "kind": "Model", "metadata": {"name": name},
        "spec": {"backends": [{"name": "main", "type": "vLLM", "modelURI": "hf://example/chat-8b",
                               "minReplicas": 1, "maxReplicas": 2,
                               "workers": [{"type": "server", "image": "vllm/vllm-openai:v0.10.1"}]}]}
    })
}

/// Model-level autoscaling without the fields the mutator defaults (MM-01, MM-02).
fn defaulted_model(name: &str) -> Value {
    json!({
        "apiVersion": "registry.volcano.sh/v1alpha1", "kind": "Model", "metadata": {"name": name},
        "spec": {
            "autoscalingPolicy": {"metrics": [{"metricName": "kthena:num_requests_waiting", "targetValue": "10"}]},
            "backends": [{"name": "main", "type": "vLLM", "modelURI": "hf://example/chat-8b",
                          "minReplicas": 1, "maxReplicas": 3, "scalingCost": 10,
                          "workers": [{"type": "server", "image": "vllm/vllm-openai:v0.10.1"}]}]
        }
    })
}

/// Creates a Model (a dry run with `dry_run`), reading the API server's warnings too.
async fn create(env: &Env, model: &Value, dry_run: bool) -> Answer {
    let mut uri = format!(
        "/apis/registry.volcano.sh/v1alpha1/namespaces/{}/models",
        env.ns
    );
    if dry_run {
        uri.push_str("?dryRun=All");
    }
    send(&env.client, "POST", &uri, "application/json", model).await
}

/// Starts registry-webhook in `mode`, registered for this namespace only.
async fn start(env: &Env, dir: &std::path::Path, mode: &str) -> System {
    let shared = testenv::shared().unwrap();
    let bin_dir = bin_dir_of_current_exe().unwrap();
    let services = vec![SERVICE.to_owned()];
    check_binaries(&bin_dir, &services).unwrap_or_else(|e| panic!("{e}"));
    let opts = Options {
        bin_dir,
        services,
        kubeconfig: shared.kubeconfig.clone(),
        dir: dir.join(mode),
        namespace_selector: admission_kit::cluster::registration::only_namespace(&env.ns),
        name_suffix: format!("-{}", env.ns),
        namespace: env.ns.clone(),
        port_base: None,
        client_ca: None,
        webhook_args: vec!["--enforcement".into(), mode.into()],
        args_of: Default::default(),
        env: Vec::new(),
    };
    std::fs::create_dir_all(&opts.dir).unwrap();
    testenv::system::start(&env.client, &opts).await.unwrap()
}

fn stop(system: System) {
    for (r, _, _) in system.webhooks {
        r.kill();
    }
}

/// Every webhook's failure policy in this test's two configurations.
async fn failure_policies(env: &Env) -> Vec<String> {
    let name = format!("{SERVICE}-{}", env.ns);
    let m = Api::<MutatingWebhookConfiguration>::all(env.client.clone())
        .get(&name)
        .await
        .unwrap();
    let v = Api::<ValidatingWebhookConfiguration>::all(env.client.clone())
        .get(&name)
        .await
        .unwrap();
    let mut out: Vec<String> = m
        .webhooks
        .unwrap_or_default()
        .into_iter()
        .filter_map(|w| w.failure_policy)
        .collect();
    out.extend(
        v.webhooks
            .unwrap_or_default()
            .into_iter()
            .filter_map(|w| w.failure_policy),
    );
    out.sort();
    out.dedup();
    out
}

/// Waits until every webhook of the two configurations has failure policy `policy` (a
/// service started again applies its configurations once it runs).
async fn registered_with(env: &Env, policy: &str) {
    eventually(Duration::from_secs(30), || async {
        match failure_policies(env).await {
            p if p == [policy] => Ok(()),
            p => Err(format!("failure policies {p:?}")),
        }
    })
    .await;
}

/// The value of the series of `name` carrying every label of `labels`, 0 when absent.
async fn series(system: &System, name: &str, labels: &[(&str, &str)]) -> f64 {
    let addr = system.webhooks[0].0.metrics.clone().unwrap();
    let (_, body) = http_get(&addr, "/metrics").await.unwrap();
    body.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Waits until the API server calls the webhook in its new mode: a dry run of the denied Model
/// answered as `ready` says.
async fn until(env: &Env, ready: impl Fn(&Answer) -> bool) {
    eventually(Duration::from_secs(60), || async {
        let c = create(env, &denied_model("probe"), true).await;
        if ready(&c) {
            Ok(())
        } else {
            Err(format!("{} {:?} {}", c.status, c.warnings, c.body))
        }
    })
    .await;
}

/// Refused by MV-11, naming the field (Kthena answers its denials with code 400).
fn refused(c: &Answer) -> bool {
    c.status == 400 && c.message().contains("spec.backends[0]: Invalid value")
}

fn log_of(system: &System) -> PathBuf {
    system.webhooks[0].0.log.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_warn_and_enforce_through_the_api_server() {
    let env = Env::new("e2e-enforcement").await;
    let dir = testenv::shared()
        .unwrap()
        .kubeconfig
        .with_file_name(&env.ns);

    // Enforce first: the probe is refused, so the webhook is in the path.
    let system = start(&env, &dir, "enforce").await;
    until(&env, refused).await;
    registered_with(&env, "Fail").await;
    stop(system);

    // Audit: created silently, counted; the mutator's patch withheld and recorded.
    let system = start(&env, &dir, "audit").await;
    // An endpoint on trial never refuses a write.
    registered_with(&env, "Ignore").await;
    until(&env, |c| c.status == 201).await;
    let would_deny = [
        ("webhook", VALIDATE),
        ("rule", "MV-11"),
        ("outcome", "would_deny"),
    ];
    let before = series(&system, "admission_webhook_audit_total", &would_deny).await;
    let c = create(&env, &denied_model("audited"), false).await;
    assert_eq!(c.status, 201, "{}", c.body);
    assert!(
        c.warnings.is_empty(),
        "audit says nothing: {:?}",
        c.warnings
    );
    let after = series(&system, "admission_webhook_audit_total", &would_deny).await;
    assert_eq!(
        after - before,
        1.0,
        "the would-be denial counted by rule id"
    );
    assert_eq!(
        series(
            &system,
            "admission_webhook_denials_total",
            &[("webhook", VALIDATE)]
        )
        .await,
        0.0,
        "nothing was denied"
    );

    let c = create(&env, &defaulted_model("unchanged"), false).await;
    assert_eq!(c.status, 201, "{}", c.body);
    assert!(
        c.body["spec"].get("costExpansionRatePercent").is_none(),
        "audit returns no patch: {}",
        c.body["spec"]
    );
    assert!(
        series(
            &system,
            "admission_webhook_audit_total",
            &[("webhook", MUTATE), ("outcome", "would_patch")]
        )
        .await
            >= 1.0
    );
    let log = std::fs::read_to_string(log_of(&system)).unwrap();
    let line = log
        .lines()
        .find(|l| l.contains("name=unchanged") && l.contains(MUTATE))
        .unwrap_or_else(|| panic!("no decision line for the defaulted Model in:\n{log}"));
    assert!(
        line.contains("enforcement=\"audit\"") || line.contains("enforcement=audit"),
        "{line}"
    );
    assert!(
        line.contains("costExpansionRatePercent"),
        "the withheld patch: {line}"
    );
    let denied_line = log
        .lines()
        .find(|l| l.contains("name=audited") && l.contains(VALIDATE))
        .unwrap_or_else(|| panic!("no decision line for the audited Model in:\n{log}"));
    assert!(
        denied_line.contains("MV-11") && denied_line.contains("would_deny=true"),
        "{denied_line}"
    );
    stop(system);

    // Warn: created, the denial text returned as a warning.
    let system = start(&env, &dir, "warn").await;
    registered_with(&env, "Ignore").await;
    until(&env, |c| c.status == 201 && !c.warnings.is_empty()).await;
    let c = create(&env, &denied_model("warned"), false).await;
    assert_eq!(c.status, 201, "{}", c.body);
    let warned = c.warnings.join("\n");
    assert!(
        warned.contains("would be denied (MV-11)") && warned.contains("spec.backends[0]"),
        "{warned}"
    );
    // The mutator still defaults in warn.
    let c = create(&env, &defaulted_model("defaulted"), false).await;
    assert_eq!(c.body["spec"]["costExpansionRatePercent"], 200);
    stop(system);

    // Enforce again: refused, registered as the table says.
    let system = start(&env, &dir, "enforce").await;
    until(&env, refused).await;
    registered_with(&env, "Fail").await;
    let c = create(&env, &denied_model("refused"), false).await;
    assert!(refused(&c), "{} {}", c.status, c.body);
    stop(system);
}
