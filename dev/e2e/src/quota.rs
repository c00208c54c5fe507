//! quota-state and scheduling-webhook as `cargo xtask up` starts them, with one enforced
//! ElasticQuota: the start of every quota test through the real API server.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use serde_json::json;
use testenv::system::{Options, System};

use crate::cluster::start_services_in;
use crate::{Env, create_eventually, eventually};

/// A pod of one container requesting `cpu` CPUs, charged to `quota` by its label.
pub fn pod(name: &str, quota: &str, cpu: u32) -> Pod {
    let v = json!({
        "metadata": {"name": name, "labels": {"quota.scheduling.koordinator.sh/name": quota}},
        "spec": {"containers": [{"name": "main", "image": "registry.example.com/app:1",
                                 "resources": {"requests": {"cpu": cpu.to_string()}}}]}
    });
    match serde_json::from_value(v) {
        Ok(p) => p,
        Err(e) => panic!("pod: {e}"),
    }
}

/// Creates `p` as a controller does: a refusal that asks to retry (pods admitted but not yet
/// created hold their share of the quota; quota-state caps that share) is retried after 300 ms,
/// up to 100 times. `Ok` with the created pod, or the final refusal's text.
pub async fn create_retrying(pods: &Api<Pod>, p: &Pod) -> Result<Pod, String> {
    for _ in 0..100 {
        match pods.create(&PostParams::default(), p).await {
            Ok(created) => return Ok(created),
            Err(kube::Error::Api(e)) if e.message.contains("retry in a few seconds") => {
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Err(kube::Error::Api(e)) => return Err(e.message),
            Err(e) => return Err(e.to_string()),
        }
    }
    Err("still asked to retry after 100 attempts".into())
}

/// The ElasticQuotas of `env`'s namespace.
pub fn quotas(env: &Env) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "scheduling.sigs.k8s.io",
        "v1alpha1",
        "ElasticQuota",
    ));
    Api::namespaced_with(env.client.clone(), &env.ns, &ar)
}

/// Starts quota-state and scheduling-webhook for `env` (the API server's client certificate
/// required when `client_ca` is set) and creates the quota `q-<namespace>` of `cpu` CPUs; returns
/// once the quota is enforced (a dry run past it is refused), with the quota's name.
pub async fn start(env: &Env, client_ca: Option<PathBuf>, cpu: u32) -> (System, Options, String) {
    start_with(env, client_ca, "cpu", cpu, Vec::new()).await
}

/// A pod of one container requesting (and limited to) `n` of `resource`, charged to `quota`.
pub fn pod_of(name: &str, quota: &str, resource: &str, n: u32) -> Pod {
    let amount = json!({ (resource): n.to_string() });
    let v = json!({
        "metadata": {"name": name, "labels": {"quota.scheduling.koordinator.sh/name": quota}},
        "spec": {"containers": [{"name": "main", "image": "registry.example.com/app:1",
                                 "resources": {"requests": amount, "limits": amount}}]}
    });
    match serde_json::from_value(v) {
        Ok(p) => p,
        Err(e) => panic!("pod: {e}"),
    }
}

/// [`start`] with a quota of `max` of `resource`, and `webhook_args` for the webhook.
pub async fn start_with(
    env: &Env,
    client_ca: Option<PathBuf>,
    resource: &str,
    max: u32,
    webhook_args: Vec<String>,
) -> (System, Options, String) {
    let shared = crate::must(testenv::shared(), "control plane");
    start_in(
        env,
        &shared.kubeconfig,
        client_ca,
        resource,
        max,
        webhook_args,
    )
    .await
}

/// [`start_with`] on the control plane of `kubeconfig` (a test's own, say with
/// [`testenv::cluster::Cluster`] around it); logs beside that kubeconfig.
pub async fn start_in(
    env: &Env,
    kubeconfig: &std::path::Path,
    client_ca: Option<PathBuf>,
    resource: &str,
    max: u32,
    webhook_args: Vec<String>,
) -> (System, Options, String) {
    let (system, opts) = start_services_in(
        env,
        kubeconfig,
        client_ca,
        &["quota-state", "scheduling-webhook"],
        webhook_args,
    )
    .await;
    let quota = enforce_quota(env, resource, max).await;
    (system, opts, quota)
}

/// Creates the quota `q-<namespace>` of `max` of `resource` through the services' own webhooks
/// (quota-state and scheduling-webhook running); returns its name once it is enforced (a dry
/// run past it is refused).
pub async fn enforce_quota(env: &Env, resource: &str, max: u32) -> String {
    let quota = format!("q-{}", env.ns);
    let eq: DynamicObject = crate::must(
        serde_json::from_value(json!({
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": quota}, "spec": {"max": { (resource): max.to_string() }}
        })),
        "quota",
    );
    // Through the services' own QM/QV webhooks (quota-state answers QV once it leads).
    create_eventually(&quotas(env), &eq, Duration::from_secs(60)).await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.ns);
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    eventually(Duration::from_secs(30), || async {
        match pods
            .create(&dry, &pod_of("probe", &quota, resource, max + 1))
            .await
        {
            Err(kube::Error::Api(e)) if e.message.contains("exceeded quota") => Ok(()),
            other => Err(format!("not enforced yet: {:?}", other.map(|_| ()))),
        }
    })
    .await;
    quota
}
