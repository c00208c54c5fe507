//! Workloads judged whole against their ElasticQuota when they are submitted (WQ,
//! `docs/workload-quota.md`), through a real kube-apiserver, with quota-state and
//! scheduling-webhook started as `cargo xtask up` starts them and a quota of 32 GPUs:
//!
//! - a PyTorchJob of 1 Master + 7 Workers × 8 GPUs (upstream's CRD from
//!   `fixtures/crds/training`) is refused at creation with the arithmetic; one of
//!   4 × 8 is created;
//! - with 24 GPUs held by pods, a job of 2 × 8 is created with a warning naming 8 free;
//! - a Deployment scaled from 2 to 40 one-GPU replicas is refused, from 2 to 3 admitted; the
//!   same through its scale subresource (`kubectl scale`: 3 to 40 refused, 3 to 4 admitted);
//! - a kind known only from `--workload-kinds-file` (a CRD of this test's own), registered by
//!   self-registration on `/validate-workload`, is judged the same way, its gang policy too;
//! - with quota-state killed, a workload is still created (failure policy Ignore, and the
//!   webhook's own answer) and the outage is counted.
//!
//! What `kubectl apply` would print is what the API server sends: the refusal's message, and
//! each warning in a `Warning` header, read here from the raw responses.

use std::time::Duration;

use e2e::quota::{pod_of, start_with};
use e2e::raw::send;
use e2e::{Env, eventually, metric};
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

const GPU: &str = "nvidia.com/gpu";

fn template(quota: &str, gpus: u32) -> Value {
    json!({"metadata": {"labels": {"quota.scheduling.koordinator.sh/name": quota}},
        "spec": {"containers": [{"name": "main", "image": "registry.example.com/train:1",
            "resources": {"requests": {GPU: gpus.to_string()}, "limits": {GPU: gpus.to_string()}}}]}})
}

fn pytorch_job(name: &str, quota: &str, workers: u32) -> Value {
    json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template(quota, 8)},
            "Worker": {"replicas": workers, "restartPolicy": "OnFailure", "template": template(quota, 8)}}}})
}

/// A CRD of this test's own: a kind no built-in description knows.
const BATCH_RUN_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: batchruns.example.com}
spec:
  group: example.com
  names: {kind: BatchRun, plural: batchruns, singular: batchrun, listKind: BatchRunList}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
"#;

/// Its description, as a platform team would mount it from a ConfigMap.
const KINDS: &str = r#"
kinds:
  - group: example.com
    version: v1
    kind: BatchRun
    resource: batchruns
    policy: gang
    groups:
      - each: /spec/stages
        role: /name
        replicas: [/parallelism]
        template: /template
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workloads_are_judged_whole_at_submission() {
    let env = Env::new("e2e-workload").await;
    let fixtures = admission_testing::fixtures::fixtures_root();
    let pytorch_crd =
        std::fs::read_to_string(fixtures.join("crds/training/kubeflow.org_pytorchjobs.yaml"))
            .unwrap();
    for yaml in [pytorch_crd.as_str(), BATCH_RUN_CRD] {
        testenv::system::apply_crds(&env.client, yaml)
            .await
            .unwrap();
    }
    let shared = testenv::shared().unwrap();
    let kinds_file = shared
        .kubeconfig
        .with_file_name(format!("{}-workload-kinds.yaml", env.ns));
    std::fs::write(&kinds_file, KINDS).unwrap();
    let args = vec![
        "--workload-kinds-file".to_owned(),
        kinds_file.display().to_string(),
    ];
    let (mut system, opts, quota) = start_with(&env, None, GPU, 32, args).await;
    let ns = env.ns.clone();
    let jobs = format!("/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs");

    // Can never fit: refused at creation, with the arithmetic.
    let big = eventually(Duration::from_secs(30), || async {
        let a = send(
            &env.client,
            "POST",
            &jobs,
            "application/json",
            &pytorch_job("llama-ft", &quota, 7),
        )
        .await;
        if a.status == 404 {
            Err("PyTorchJob not served yet".to_owned())
        } else {
            Ok(a)
        }
    })
    .await;
    println!("8×8 PyTorchJob: {} {}", big.status, big.message());
    assert_eq!(big.status, 403, "{}", big.body);
    assert!(
        big.message().ends_with(&format!(
            "denied the request: PyTorchJob {ns}/llama-ft needs nvidia.com/gpu=64 (Master 1×8, Worker 7×8); quota {quota} allows at most nvidia.com/gpu=32"
        )),
        "{}",
        big.message()
    );

    // Fits: created, nothing to say.
    let fits = send(
        &env.client,
        "POST",
        &jobs,
        "application/json",
        &pytorch_job("small", &quota, 3),
    )
    .await;
    println!("4×8 PyTorchJob: {} {:?}", fits.status, fits.warnings);
    assert_eq!(fits.status, 201, "{}", fits.body);
    assert!(fits.warnings.is_empty(), "{:?}", fits.warnings);

    // 24 GPUs held by pods: a 2×8 job is created with a warning naming the 8 free.
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &ns);
    for i in 0..3 {
        pods.create(
            &PostParams::default(),
            &pod_of(&format!("gpu-{i}"), &quota, GPU, 8),
        )
        .await
        .unwrap();
    }
    let warned = send(
        &env.client,
        "POST",
        &jobs,
        "application/json",
        &pytorch_job("warned", &quota, 1),
    )
    .await;
    println!(
        "2×8 PyTorchJob with 24 in use: {} {:?}",
        warned.status, warned.warnings
    );
    assert_eq!(warned.status, 201, "{}", warned.body);
    assert_eq!(
        warned.warnings,
        [format!(
            "WQ-3: PyTorchJob {ns}/warned needs nvidia.com/gpu=16 (Master 1×8, Worker 1×8); quota {quota} has nvidia.com/gpu=8 free now: some of its pods will be refused until quota frees up"
        )]
    );

    // A Deployment of 2 one-GPU replicas, scaled to 40 (refused) and to 3 (admitted).
    let deployments = format!("/apis/apps/v1/namespaces/{ns}/deployments");
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web", "quota.scheduling.koordinator.sh/name": quota}},
                "spec": {"containers": [{"name": "main", "image": "registry.example.com/web:1",
                    "resources": {"requests": {GPU: "1"}, "limits": {GPU: "1"}}}]}}}});
    let created = send(
        &env.client,
        "POST",
        &deployments,
        "application/json",
        &deployment,
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let replicas = |n: u32| json!({"spec": {"replicas": n}});
    let web = format!("{deployments}/web");
    let to_40 = send(
        &env.client,
        "PATCH",
        &web,
        "application/merge-patch+json",
        &replicas(40),
    )
    .await;
    println!("Deployment 2 → 40: {} {}", to_40.status, to_40.message());
    assert_eq!(to_40.status, 403, "{}", to_40.body);
    assert!(
        to_40.message().ends_with(&format!(
            "Deployment {ns}/web needs nvidia.com/gpu=40 (40×1) (nvidia.com/gpu=38 more than now); quota {quota} allows at most nvidia.com/gpu=32"
        )),
        "{}",
        to_40.message()
    );
    let to_3 = send(
        &env.client,
        "PATCH",
        &web,
        "application/merge-patch+json",
        &replicas(3),
    )
    .await;
    println!("Deployment 2 → 3: {} {:?}", to_3.status, to_3.warnings);
    assert_eq!(to_3.status, 200, "{}", to_3.body);
    assert!(to_3.warnings.is_empty(), "{:?}", to_3.warnings);

    // The same through the scale subresource, as `kubectl scale` and an HPA write it: the
    // Deployment (now 3) read as it is and judged at the new count.
    let scale = |n: u32| json!({"spec": {"replicas": n}});
    let web_scale = format!("{web}/scale");
    let scaled_40 = send(
        &env.client,
        "PATCH",
        &web_scale,
        "application/merge-patch+json",
        &scale(40),
    )
    .await;
    println!(
        "kubectl scale 3 → 40: {} {}",
        scaled_40.status,
        scaled_40.message()
    );
    assert_eq!(scaled_40.status, 403, "{}", scaled_40.body);
    assert!(
        scaled_40.message().ends_with(&format!(
            "Deployment {ns}/web needs nvidia.com/gpu=40 (40×1) (nvidia.com/gpu=37 more than now); quota {quota} allows at most nvidia.com/gpu=32"
        )),
        "{}",
        scaled_40.message()
    );
    let scaled_4 = send(
        &env.client,
        "PATCH",
        &web_scale,
        "application/merge-patch+json",
        &scale(4),
    )
    .await;
    println!(
        "kubectl scale 3 → 4: {} {:?}",
        scaled_4.status, scaled_4.warnings
    );
    assert_eq!(scaled_4.status, 200, "{}", scaled_4.body);
    assert!(scaled_4.warnings.is_empty(), "{:?}", scaled_4.warnings);

    // A kind added only through the mapping: self-registration gave it its own webhook on
    // /validate-workload.
    let own: Api<ValidatingWebhookConfiguration> = Api::all(env.client.clone());
    let registered = own
        .get(&format!("scheduling-webhook{}", opts.name_suffix))
        .await
        .unwrap();
    let mapped_hook = registered
        .webhooks
        .unwrap_or_default()
        .into_iter()
        .find(|w| {
            w.name
                .starts_with("validate-workload-example-com-v1-batchruns.")
        })
        .expect("the mapped kind is registered");
    assert_eq!(mapped_hook.failure_policy.as_deref(), Some("Ignore"));
    assert_eq!(
        mapped_hook
            .client_config
            .url
            .as_deref()
            .map(|u| u.ends_with("/validate-workload")),
        Some(true)
    );
    let runs = format!("/apis/example.com/v1/namespaces/{ns}/batchruns");
    let run = |name: &str, parallelism: u32| {
        json!({"apiVersion": "example.com/v1", "kind": "BatchRun", "metadata": {"name": name},
            "spec": {"stages": [{"name": "train", "parallelism": parallelism, "template": template(&quota, 8)}]}})
    };
    let mapped = eventually(Duration::from_secs(30), || async {
        let a = send(
            &env.client,
            "POST",
            &runs,
            "application/json",
            &run("huge", 5),
        )
        .await;
        if a.status == 403 {
            Ok(a)
        } else {
            let _ = send(
                &env.client,
                "DELETE",
                &format!("{runs}/huge"),
                "application/json",
                &json!({}),
            )
            .await;
            Err(format!("not judged yet: {} {}", a.status, a.body))
        }
    })
    .await;
    println!(
        "mapped BatchRun 5×8: {} {}",
        mapped.status,
        mapped.message()
    );
    assert!(
        mapped
            .message()
            .contains("\"validate-workload-example-com-v1-batchruns."),
        "{}",
        mapped.message()
    );
    assert!(
        mapped.message().ends_with(&format!(
            "BatchRun {ns}/huge needs nvidia.com/gpu=40 (train 5×8); quota {quota} allows at most nvidia.com/gpu=32"
        )),
        "{}",
        mapped.message()
    );
    // Gang policy from the mapping: above what is free now (8) is refused, not warned.
    let gang = send(
        &env.client,
        "POST",
        &runs,
        "application/json",
        &run("gang", 2),
    )
    .await;
    println!(
        "mapped BatchRun 2×8 (gang): {} {}",
        gang.status,
        gang.message()
    );
    assert_eq!(gang.status, 403, "{}", gang.body);
    assert!(
        gang.message().contains("has nvidia.com/gpu=8 free now"),
        "{}",
        gang.message()
    );
    let one = send(
        &env.client,
        "POST",
        &runs,
        "application/json",
        &run("one", 1),
    )
    .await;
    assert_eq!(one.status, 201, "{}", one.body);

    // quota-state down: the workload is created, and the outage counted.
    if let Some((_, qs)) = system.quota_state.take() {
        qs.kill();
    }
    let webhook_metrics = system.webhooks[0].0.metrics.clone().unwrap();
    let outage = "admission_webhook_dependency_unavailable_total";
    let before = metric(&webhook_metrics, outage).await;
    let down = send(
        &env.client,
        "POST",
        &jobs,
        "application/json",
        &pytorch_job("while-down", &quota, 7),
    )
    .await;
    println!(
        "8×8 PyTorchJob, quota-state down: {} {:?}",
        down.status, down.warnings
    );
    assert_eq!(down.status, 201, "{}", down.body);
    assert!(
        down.warnings
            .iter()
            .any(|w| w.contains("quota-state unavailable")),
        "{:?}",
        down.warnings
    );
    assert!(metric(&webhook_metrics, outage).await > before);
    let decisions = "admission_webhook_workload_quota_decisions_total";
    assert!(metric(&webhook_metrics, decisions).await >= 8.0);
}
