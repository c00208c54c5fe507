//! The monitoring artefacts (`kustomize/components/monitoring`) against a real Prometheus
//! (Debian's package, installed by `cargo xtask tools`):
//!
//! - `promtool check rules` on the PrometheusRule's rules, and `promtool test rules` with series
//!   for every alert (`monitoring/alerts_test.yaml`);
//! - every service (as `cargo xtask up` starts them) scraped by Prometheus, with those rules
//!   loaded, while reviews flow through the real API server: every dashboard query returns
//!   series, and every metric (and label) an alert reads is among what was scraped.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use e2e::{Env, eventually};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};
use testenv::system::{Options, Running, bin_dir_of_current_exe, check_binaries};

fn component() -> PathBuf {
    component_named("monitoring")
}

fn component_named(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../kustomize/components")
        .join(name)
}

/// The rules of `component`'s PrometheusRule, as a Prometheus rules file.
fn rules_file(dir: &Path, component: &Path) -> PathBuf {
    let text = std::fs::read_to_string(component.join("prometheusrule.yaml")).unwrap();
    let rule: Value = serde_yaml_ng::from_str(&text).unwrap();
    let path = dir.join("rules.yaml");
    std::fs::write(&path, serde_yaml_ng::to_string(&rule["spec"]).unwrap()).unwrap();
    path
}

fn alerts() -> Vec<(String, String)> {
    alerts_of(&component())
}

fn alerts_of(component: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(component.join("prometheusrule.yaml")).unwrap();
    let rule: Value = serde_yaml_ng::from_str(&text).unwrap();
    rule["spec"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().clone())
        .map(|r| {
            (
                r["alert"].as_str().unwrap().to_owned(),
                r["expr"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn dashboard_queries() -> Vec<String> {
    let d: Value =
        serde_json::from_slice(&std::fs::read(component().join("dashboard.json")).unwrap())
            .unwrap();
    d["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().unwrap().clone())
        .map(|t| t["expr"].as_str().unwrap().to_owned())
        .collect()
}

/// Every component's rules pass `promtool check rules`, its tests `promtool test rules`, and
/// each alert has a test: the services' alerts, and the fleet hub's
/// (`components/fleet-monitoring`, whose series only a fleet's quota-state exports: its metric
/// is checked in `fleet.rs`).
#[test]
fn rules_pass_promtool_check_and_every_alert_has_a_unit_test() {
    let p = testenv::tools::prometheus().unwrap_or_else(|e| panic!("{e}"));
    for (name, tests) in [
        ("monitoring", "alerts_test.yaml"),
        ("fleet-monitoring", "fleet_alerts_test.yaml"),
    ] {
        let component = component_named(name);
        let dir = tempfile_dir(&format!("promtool-{name}"));
        let rules = rules_file(&dir, &component);
        let tests = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/monitoring")
            .join(tests);
        std::fs::copy(&tests, dir.join("alerts_test.yaml")).unwrap();
        let check = Command::new(&p.promtool)
            .args(["check", "rules"])
            .arg(&rules)
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "{name}: promtool check rules: {}{}",
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        );
        let test = Command::new(&p.promtool)
            .args(["test", "rules"])
            .arg(dir.join("alerts_test.yaml"))
            .output()
            .unwrap();
        assert!(
            test.status.success(),
            "{name}: promtool test rules: {}{}",
            String::from_utf8_lossy(&test.stdout),
            String::from_utf8_lossy(&test.stderr)
        );
        let _ = std::fs::remove_dir_all(&dir);
        let tested = std::fs::read_to_string(&tests).unwrap();
        let alerts = alerts_of(&component);
        assert!(!alerts.is_empty(), "{name}: no alerts");
        for (alert, _) in alerts {
            assert!(
                tested.contains(&format!("alertname: {alert}\n")),
                "{name}: {alert} has no promtool test"
            );
        }
    }
}

fn tempfile_dir(what: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("admission-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The metric names and the label names an expression reads.
fn selectors(expr: &str) -> Vec<(String, BTreeSet<String>)> {
    const NOT_METRICS: &[&str] = &[
        "sum",
        "max",
        "min",
        "avg",
        "count",
        "by",
        "without",
        "rate",
        "increase",
        "histogram_quantile",
        "time",
        "and",
        "or",
        "unless",
        "on",
        "ignoring",
        "bool",
        "offset",
    ];
    let mut out = Vec::new();
    let bytes = expr.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i] as char;
        if c == '[' {
            // Skip range selectors (`[5m]`).
            while i < bytes.len() && bytes[i] != b']' {
                i += 1;
            }
            continue;
        }
        if c.is_ascii_digit() {
            // Skip numbers (`0.05`, `7`, `86400`).
            while i < bytes.len()
                && ((bytes[i] as char).is_ascii_alphanumeric() || bytes[i] == b'.')
            {
                i += 1;
            }
            continue;
        }
        if c == '"' {
            // Skip string literals.
            i += 1;
            while i < bytes.len() && bytes[i] != b'"' {
                i += 1;
            }
            i += 1;
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < bytes.len()
                && ((bytes[i] as char).is_ascii_alphanumeric()
                    || bytes[i] == b'_'
                    || bytes[i] == b':')
            {
                i += 1;
            }
            let word = &expr[start..i];
            let rest = expr[i..].trim_start();
            // Grouping labels `by (a, b)`: skip the parenthesis.
            if word == "by" || word == "without" {
                if let Some(close) = expr[i..].find(')') {
                    i += close + 1;
                }
                continue;
            }
            if NOT_METRICS.contains(&word) || rest.starts_with('(') {
                continue;
            }
            let mut labels = BTreeSet::new();
            if rest.starts_with('{') {
                let open = i + expr[i..].find('{').unwrap_or(0);
                let close = open + expr[open..].find('}').unwrap_or(0);
                for m in expr[open + 1..close].split(',') {
                    let name: String = m
                        .trim()
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() {
                        labels.insert(name);
                    }
                }
                i = close + 1;
            }
            out.push((word.to_owned(), labels));
            continue;
        }
        i += 1;
    }
    out
}

#[test]
fn selectors_are_read_from_expressions() {
    assert_eq!(
        selectors(
            "sum by (job, webhook) (rate(admission_webhook_decisions_total{decision=\"error\"}[5m])) / sum(up) > 0.05"
        ),
        vec![
            (
                "admission_webhook_decisions_total".to_owned(),
                BTreeSet::from(["decision".to_owned()])
            ),
            ("up".to_owned(), BTreeSet::new()),
        ]
    );
}

/// GET on Prometheus's HTTP API; the JSON `data`.
async fn api(addr: &str, path_and_query: &str) -> Result<Value, String> {
    let (_, body) = testenv::system::http_get(addr, path_and_query).await?;
    let v: Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
    if v["status"] != "success" {
        return Err(v.to_string());
    }
    Ok(v["data"].clone())
}

fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn prometheus_scrapes_every_service_and_every_query_has_series() {
    let p = testenv::tools::prometheus().unwrap_or_else(|e| panic!("{e}"));
    let env = Env::new("e2e-monitoring").await;
    let shared = testenv::shared().unwrap();
    let bin_dir = bin_dir_of_current_exe().unwrap();
    let services: Vec<String> = [
        "quota-state",
        "scheduling-webhook",
        "registry-webhook",
        "training-webhook",
        "node-config-webhook",
        "lifecycle-webhook",
    ]
    .map(str::to_owned)
    .to_vec();
    if let Err(e) = check_binaries(&bin_dir, &services) {
        panic!("{e}");
    }
    let dir = shared.kubeconfig.with_file_name(&env.ns);
    std::fs::create_dir_all(&dir).unwrap();
    let opts = Options {
        bin_dir,
        services,
        kubeconfig: shared.kubeconfig.clone(),
        dir: dir.clone(),
        namespace_selector: admission_kit::cluster::registration::only_namespace(&env.ns),
        name_suffix: format!("-{}", env.ns),
        namespace: env.ns.clone(),
        port_base: None,
        client_ca: Some(shared.admission_client_ca.clone()),
        webhook_args: Vec::new(),
        // One endpoint on trial, so the audit series the dashboard and alerts read exist (the
        // AutoscalingPolicy created below is decided there).
        args_of: [(
            "registry-webhook".to_owned(),
            vec![
                "--enforcement".to_owned(),
                "enforce,/validate-registry-volcano-sh-v1alpha1-autoscalingpolicy=audit".to_owned(),
            ],
        )]
        .into(),
        env: Vec::new(),
    };
    let system = testenv::system::start(&env.client, &opts).await.unwrap();
    // Prometheus scrapes each service as the PodMonitor does: job = the service's name.
    let mut targets: Vec<(String, String)> = system
        .webhooks
        .iter()
        .map(|(r, _, _)| (r.name.clone(), r.metrics.clone().unwrap()))
        .collect();
    let (_, qs) = system.quota_state.as_ref().unwrap();
    targets.push(("quota-state".into(), qs.metrics.clone().unwrap()));
    let rules = rules_file(&dir, &component());
    let scrape: Vec<Value> = targets
        .iter()
        .map(|(job, addr)| json!({"job_name": job, "scrape_interval": "1s", "static_configs": [{"targets": [addr]}]}))
        .collect();
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        serde_yaml_ng::to_string(&json!({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [rules],
            "scrape_configs": scrape,
        }))
        .unwrap(),
    )
    .unwrap();
    let web = format!("127.0.0.1:{}", testenv::free_port().unwrap());
    let mut cmd = Command::new(&p.server);
    cmd.arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("tsdb").display()
        ))
        .arg(format!("--web.listen-address={web}"));
    let _prometheus = Running::spawn("prometheus", cmd, dir.join("prometheus.log")).unwrap();

    // Reviews through every kind of decision: a quota, pods admitted and refused by it, a
    // workload refused by it, a policy, a refused Model.
    let quotas: Api<DynamicObject> = Api::namespaced_with(
        env.client.clone(),
        &env.ns,
        &ApiResource::erase::<scheduling_webhook::types::ElasticQuota>(&()),
    );
    let quota: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
        "metadata": {"name": format!("q-{}", env.ns)}, "spec": {"max": {"cpu": "2"}}
    }))
    .unwrap();
    eventually(Duration::from_secs(60), || async {
        quotas
            .create(&PostParams::default(), &quota)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    let pod = |name: &str, cpu: &str| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"quota.scheduling.koordinator.sh/name": format!("q-{}", env.ns)}},
            "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": cpu}}}]}
        }))
        .unwrap()
    };
    eventually(Duration::from_secs(30), || async {
        pods.create(&PostParams::default(), &pod("fits", "1"))
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;
    assert!(
        pods.create(&PostParams::default(), &pod("too-big", "5"))
            .await
            .is_err()
    );
    // A workload judged whole against the quota (WQ): refused, 3 CPUs against a limit of 2.
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(env.client.clone(), &env.ns);
    let deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web",
                "quota.scheduling.koordinator.sh/name": format!("q-{}", env.ns)}},
                "spec": {"containers": [{"name": "c", "image": "nginx",
                    "resources": {"requests": {"cpu": "1"}}}]}}}
    }))
    .unwrap();
    assert!(
        deployments
            .create(&PostParams::default(), &deployment)
            .await
            .is_err()
    );
    let policies: Api<DynamicObject> = Api::namespaced_with(
        env.client.clone(),
        &env.ns,
        &ApiResource::erase::<registry_webhook::types::AutoscalingPolicy>(&()),
    );
    let policy: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "registry.volcano.sh/v1alpha1", "kind": "AutoscalingPolicy",
        "metadata": {"name": "p"},
        "spec": {"metrics": [{"metricName": "kthena:num_requests_waiting", "targetValue": "10"}]}
    }))
    .unwrap();
    policies
        .create(&PostParams::default(), &policy)
        .await
        .unwrap();

    // Every dashboard query returns series.
    for q in dashboard_queries() {
        let path = format!("/api/v1/query?query={}", encode(&q));
        eventually(Duration::from_secs(60), || async {
            let data = api(&web, &path).await?;
            if data["result"].as_array().is_some_and(|r| !r.is_empty()) {
                Ok(())
            } else {
                Err(format!("no series for {q}"))
            }
        })
        .await;
    }
    // Every metric an alert reads was scraped, with every label the alert names.
    for (alert, expr) in alerts() {
        for (metric, labels) in selectors(&expr) {
            let path = format!("/api/v1/series?match[]={}", encode(&metric));
            let series = eventually(Duration::from_secs(30), || async {
                let data = api(&web, &path).await?;
                match data.as_array() {
                    Some(s) if !s.is_empty() => Ok(s.clone()),
                    _ => Err(format!("{alert}: no series of {metric}")),
                }
            })
            .await;
            for l in labels {
                assert!(
                    series.iter().any(|s| s.get(&l).is_some()),
                    "{alert}: {metric} has no label {l}"
                );
            }
        }
    }
    // Prometheus loaded and evaluates the rules.
    let groups = api(&web, "/api/v1/rules").await.unwrap();
    let loaded = groups["groups"][0]["rules"].as_array().map_or(0, Vec::len);
    assert_eq!(loaded, alerts().len());
}
