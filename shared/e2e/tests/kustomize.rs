//! Each service's overlay (`kubectl apply -k kustomize/<service>`) renders with the pinned
//! kustomize and every object passes the real API server's validation (server-side dry run).
//! cert-manager objects are left out: their CRDs are not installed in the test control plane.

use std::path::Path;
use std::process::Command;

use e2e::Env;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use serde::Deserialize;

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
        let out = Command::new(&bins.kustomize)
            .arg("build")
            .arg(&overlay)
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
            if tm.api_version.starts_with("cert-manager.io/") {
                continue;
            }
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
            checked += 1;
        }
        for k in [
            "Deployment",
            "Service",
            "ValidatingWebhookConfiguration",
            "PodDisruptionBudget",
        ] {
            assert!(kinds.iter().any(|x| x == k), "{name}: overlay has no {k}");
        }
    }
    assert!(checked > 0, "no object checked");
}
