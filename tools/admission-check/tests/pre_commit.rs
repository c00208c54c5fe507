//! The pre-commit hook (`.pre-commit-hooks.yaml` at the repository root) run by the real
//! `pre-commit` from PyPI (`cargo xtask tools` installs it): `pre-commit try-repo` clones this
//! repository as a project's config would name it, runs the hook on the files given, and passes
//! or fails as admission-check decides.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn try_repo(project: &Path, cache: &Path, file: &str) -> Output {
    let pre_commit = testenv::tools::pre_commit().unwrap_or_else(|e| panic!("{e}"));
    Command::new(pre_commit)
        .args(["try-repo", repo().to_str().unwrap(), "admission-check"])
        .args(["--files", file])
        .current_dir(project)
        .env("PRE_COMMIT_HOME", cache)
        // The binary this test build made; without it the hook builds one in its clone.
        .env("ADMISSION_CHECK", env!("CARGO_BIN_EXE_admission-check"))
        .env_remove("GIT_DIR")
        .env_remove("GIT_INDEX_FILE")
        .output()
        .unwrap()
}

#[test]
fn the_pre_commit_hook_passes_admitted_manifests_and_fails_refused_ones() {
    let project = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let dir = project.path();
    git(dir, &["init", "-q"]);
    let deploy = dir.join("deploy");
    std::fs::create_dir_all(&deploy).unwrap();
    let samples = repo().join("services/registry-webhook/examples/samples");
    std::fs::copy(
        samples.join("02-model-static-admitted.yaml"),
        deploy.join("good.yaml"),
    )
    .unwrap();
    std::fs::copy(
        samples.join("05-model-prefill-worker-refused.yaml"),
        deploy.join("bad.yaml"),
    )
    .unwrap();
    git(dir, &["add", "deploy"]);

    let good = try_repo(dir, cache.path(), "deploy/good.yaml");
    let said = String::from_utf8_lossy(&good.stdout).into_owned();
    assert!(
        good.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&good.stderr)
    );
    assert!(
        said.contains("admission-check (admission webhook rules, offline)"),
        "{said}"
    );
    assert!(said.contains("Passed"), "{said}");

    let bad = try_repo(dir, cache.path(), "deploy/bad.yaml");
    let said = String::from_utf8_lossy(&bad.stdout).into_owned();
    assert_eq!(bad.status.code(), Some(1), "{said}");
    assert!(said.contains("Failed"), "{said}");
    // The hook's output is admission-check's: the rule, the field and its place.
    assert!(
        said.contains("MV-19  spec.backends[0].workers[0].type (line 14, column 11)"),
        "{said}"
    );
}
