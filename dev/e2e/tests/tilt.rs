//! The Tiltfile, evaluated by the real tilt (built with Go like the other tools):
//! `tilt alpha tiltfile-result` loads it without errors (no duplicate objects), and every service
//! is a Tilt resource of its own, built by `cargo xtask image` (no Docker engine) and deploying
//! its own Deployment.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

#[test]
fn the_tiltfile_loads_with_one_resource_per_service() {
    let bins = testenv::tools::locate().unwrap_or_else(|e| panic!("{e}"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // Tilt's kustomize() runs the kustomize binary from PATH: the pinned one.
    let path = std::env::join_paths(
        std::iter::once(bins.kustomize.parent().unwrap().to_path_buf()).chain(
            std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
        ),
    )
    .unwrap();
    let home = std::env::temp_dir().join(format!("admission-tilt-{}", std::process::id()));
    let out = Command::new(&bins.tilt)
        .args(["alpha", "tiltfile-result", "-f"])
        .arg(root.join("Tiltfile"))
        .current_dir(&root)
        .env("PATH", path)
        .env("TILT_DEV_DIR", &home)
        .env("TILT_DISABLE_ANALYTICS", "1")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&home);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "tilt: {stderr}");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    let manifests = result["Manifests"].as_array().unwrap();
    let services: Vec<String> = std::fs::read_dir(root.join("services"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    for svc in &services {
        let m = manifests
            .iter()
            .find(|m| m["Name"] == svc.as_str())
            .unwrap_or_else(|| panic!("{svc} is not a Tilt resource"));
        let image = &m["ImageTargets"][0];
        let details = &image["BuildDetails"];
        // A custom build: the command every other build uses, naming the image as Tilt expects.
        let command = details["args"]
            .as_array()
            .and_then(|a| a.last())
            .and_then(|c| c.as_str())
            .unwrap_or_default();
        assert_eq!(
            command,
            format!("cargo xtask image --services {svc} --tag $EXPECTED_REF --push"),
            "{svc}: {details}"
        );
        assert_eq!(
            details["outputMode"], "remote",
            "{svc}: no Docker engine asked"
        );
        let yaml = m["DeployTarget"]["yaml"].as_str().unwrap_or_default();
        assert!(
            yaml.contains("kind: Deployment") && yaml.contains(&format!("name: {svc}\n")),
            "{svc}: deploys its own Deployment"
        );
    }
    assert!(!stderr.contains("Duplicate"), "{stderr}");
}
