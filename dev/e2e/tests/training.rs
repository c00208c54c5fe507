//! training-webhook through the real kube-apiserver: a valid PyTorchJob is stored, an invalid
//! one is refused naming the field, a managedBy change is refused, and the MXJob deprecation
//! warning reaches the client as a `Warning` header.

use std::time::Duration;

use e2e::{Env, Webhook, eventually};
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};
use training_webhook::types::PyTorchJob;

fn pytorch_job(name: &str, master_replicas: i32, managed_by: Option<&str>) -> DynamicObject {
    let container = json!({"name": "pytorch", "image": "docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727",
                           "command": ["python3", "/opt/pytorch-mnist/mnist.py", "--epochs=1"]});
    let mut run_policy = json!({"cleanPodPolicy": "None"});
    if let Some(m) = managed_by {
        run_policy["managedBy"] = json!(m);
    }
    serde_json::from_value(json!({
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name},
        "spec": {"runPolicy": run_policy, "pytorchReplicaSpecs": {
            "Master": {"replicas": master_replicas, "restartPolicy": "OnFailure", "template": {"spec": {"containers": [container.clone()]}}},
            "Worker": {"replicas": 2, "restartPolicy": "OnFailure", "template": {"spec": {"containers": [container]}}}}}
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pytorchjobs_through_the_api_server() {
    let env = Env::new("e2e-training").await;
    let app = training_webhook::app();
    env.install_crds(&app).await;
    let _hook = Webhook::start(&app, &env.client).await;
    env.register("training", &app, &_hook, None, 10).await;
    let jobs: Api<DynamicObject> = Api::namespaced_with(
        env.client.clone(),
        &env.ns,
        &ApiResource::erase::<PyTorchJob>(&()),
    );
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };

    // Two Masters asked for: refused with the field path (once the registration is active).
    let msg = eventually(Duration::from_secs(30), || async {
        match jobs
            .create(&dry, &pytorch_job("two-masters", 2, None))
            .await
        {
            Err(kube::Error::Api(e)) => Ok(e.message),
            other => Err(format!(
                "webhook not active yet: {:?}",
                other.map(|o| o.metadata.name)
            )),
        }
    })
    .await;
    assert!(
        msg.contains(
            "denied the request: spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1"
        ),
        "{msg}"
    );

    // A valid job is stored.
    jobs.create(
        &PostParams::default(),
        &pytorch_job("mnist", 1, Some("kubeflow.org/training-operator")),
    )
    .await
    .unwrap();
    let mut stored = jobs.get("mnist").await.unwrap();
    assert_eq!(
        stored.data["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"],
        2
    );

    // UPDATE that changes runPolicy.managedBy: refused (FIX-1: enforced for PyTorchJob too).
    stored.data["spec"]["runPolicy"]["managedBy"] = json!("kueue.x-k8s.io/multikueue");
    let err = jobs
        .replace("mnist", &PostParams::default(), &stored)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("spec.runPolicy.managedBy: Invalid value: \"kueue.x-k8s.io/multikueue\": field is immutable"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mxjob_deprecation_warning_reaches_the_client() {
    let env = Env::new("e2e-mxjob").await;
    let app = training_webhook::app();
    env.install_crds(&app).await;
    let hook = Webhook::start(&app, &env.client).await;
    env.register("training", &app, &hook, None, 10).await;
    let body: Value = json!({
        "apiVersion": "kubeflow.org/v1", "kind": "MXJob", "metadata": {"name": "mx"},
        "spec": {"jobMode": "MXTrain", "mxReplicaSpecs": {"Worker": {"replicas": 1,
            "template": {"spec": {"containers": [{"name": "mxnet", "image": "kubeflow/mxnet-gpu:latest"}]}}}}}
    });
    let url = format!(
        "/apis/kubeflow.org/v1/namespaces/{}/mxjobs?dryRun=All",
        env.ns
    );
    let warning = eventually(Duration::from_secs(30), || async {
        let req = http::Request::post(&url)
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body).unwrap())
            .map_err(|e| e.to_string())?;
        let resp = env
            .client
            .send(req.map(kube::client::Body::from))
            .await
            .map_err(|e| e.to_string())?;
        let warnings: Vec<String> = resp
            .headers()
            .get_all("warning")
            .iter()
            .map(|v| v.to_str().unwrap_or_default().to_owned())
            .collect();
        if resp.status().is_success() && !warnings.is_empty() {
            Ok(warnings.join("\n"))
        } else {
            Err(format!("status {} warnings {warnings:?}", resp.status()))
        }
    })
    .await;
    assert!(
        warning.contains(
            "MXJob is deprecated, and the MXJob will be removed in the release v1.9.0. Please see"
        ),
        "{warning}"
    );
}

/// With our CRDs installed (`training-webhook crd`), the API server types a TrainingRuntime's
/// JobSet fields as upstream's CRD does: `dependsOn: [1]` is refused by the schema before any
/// webhook, a well-formed `dependsOn` is stored with the field kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_runtime_crd_types_jobset_fields_as_upstream() {
    let env = Env::new("e2e-trainer-crd").await;
    env.install_crds(&training_webhook::app()).await;
    let runtimes: Api<DynamicObject> = Api::namespaced_with(
        env.client.clone(),
        &env.ns,
        &ApiResource::erase::<training_webhook::v2::types::TrainingRuntime>(&()),
    );
    let runtime = |depends_on: Value| -> DynamicObject {
        let job = |name: &str| {
            json!({"name": name, "template": {"spec": {"template": {"spec": {
            "containers": [{"name": "node", "image": "busybox"}]}}}}})
        };
        let mut second = job("b");
        second["dependsOn"] = depends_on;
        serde_json::from_value(json!({
            "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime",
            "metadata": {"name": "rt"},
            "spec": {"template": {"spec": {"replicatedJobs": [job("a"), second]}}}
        }))
        .unwrap()
    };
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    match runtimes.create(&dry, &runtime(json!([1]))).await {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 422, "{e:?}");
            assert!(e.message.contains("dependsOn"), "{}", e.message);
        }
        other => panic!("dependsOn: [1] was not refused by the schema: {other:?}"),
    }
    let stored = runtimes
        .create(&dry, &runtime(json!([{"name": "a", "status": "Ready"}])))
        .await
        .unwrap_or_else(|e| panic!("a well-formed dependsOn: {e}"));
    let depends_on =
        stored.data["spec"]["template"]["spec"]["replicatedJobs"][1]["dependsOn"].clone();
    assert_eq!(depends_on, json!([{"name": "a", "status": "Ready"}]));
}
