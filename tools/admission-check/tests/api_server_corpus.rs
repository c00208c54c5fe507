//! The API server's own verdicts: every manifest of `tests/api-server-corpus/` (one object per
//! file, written for this test) is created with `kubectl create --dry-run=server
//! --validate=strict` on the project's control plane (kube-apiserver v1.34.4 with the upstream
//! CRDs of `fixtures/crds/` installed, no webhook registered), and admission-check must decide
//! each as that API server did: a refused one refused by the API server's own rules (`API-*`),
//! each finding naming what the API server's message names; an admitted one refused by none of
//! them (the webhooks' own decisions are judged by the example suites and the end-to-end tests).
//!
//! The verdicts are recorded in `tests/api-server-corpus/verdicts.json`, and this test also
//! checks that the API server still answers so. To record them again (after adding a manifest
//! or moving the pinned Kubernetes):
//!
//! ```sh
//! ADMISSION_CHECK_RECORD=1 cargo test -p admission-check --test api_server_corpus
//! ```
//!
//! The same command records the built-in kinds' schemas admission-check validates against
//! (`src/openapi.json`: the API server's OpenAPI v3 documents, pruned), which the second test
//! checks are still the API server's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use e2e::Env;
use serde::{Deserialize, Serialize};
use serde_json::Value;

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/api-server-corpus")
}

/// What `kubectl create --dry-run=server` answered for one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Verdict {
    /// Whether the object was created.
    allowed: bool,
    /// kubectl's error, the test's namespace written `NAMESPACE`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    message: String,
    /// The API server's warnings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
}

fn files() -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(corpus())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    out.sort();
    out
}

/// Asks the API server about each of `files` (relative to `dir`), four at a time, with `kubectl
/// <verb> --dry-run=server` (`create`, or `apply` for a change of an object); `ns` is the
/// namespace of objects that name none (the kubeconfig's, `default`, when `None`).
fn ask_api_server(
    kubeconfig: &Path,
    dir: &Path,
    ns: Option<&str>,
    files: &[String],
    verb: &str,
) -> BTreeMap<String, Verdict> {
    let kubectl = testenv::tools::locate_cluster().unwrap().kubectl;
    let ask = |file: &String| {
        let out = Command::new(&kubectl)
            .args(["--kubeconfig"])
            .arg(kubeconfig)
            .args([verb, "--dry-run=server", "--validate=strict", "-o", "name"])
            .args(ns.map(|ns| ["-n", ns]).into_iter().flatten())
            .args(["-f", file])
            .current_dir(dir)
            .output()
            .unwrap();
        let mut stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if let Some(ns) = ns {
            stderr = stderr.replace(ns, "NAMESPACE");
        }
        stderr = redact_uids(&stderr);
        // A generated name's random suffix, written `GENERATED`.
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        if let Some(prefix) = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("generateName: "))
        {
            let mut out = String::new();
            let mut rest = stderr.as_str();
            while let Some(i) = rest.find(prefix) {
                let after = &rest[i + prefix.len()..];
                let suffix = after
                    .chars()
                    .take(5)
                    .filter(char::is_ascii_alphanumeric)
                    .count();
                out.push_str(&rest[..i + prefix.len()]);
                if suffix == 5 {
                    out.push_str("GENERATED");
                    rest = &after[5..];
                } else {
                    rest = after;
                }
            }
            out.push_str(rest);
            stderr = out;
        }
        let (warnings, errors): (Vec<&str>, Vec<&str>) =
            stderr.lines().partition(|l| l.starts_with("Warning: "));
        Verdict {
            allowed: out.status.success(),
            message: errors.join("\n"),
            warnings: warnings.iter().map(|w| w.to_string()).collect(),
        }
    };
    let chunks: Vec<&[String]> = files.chunks(files.len().div_ceil(4).max(1)).collect();
    std::thread::scope(|s| {
        let handles: Vec<_> = chunks
            .iter()
            .map(|chunk| {
                s.spawn(|| {
                    chunk
                        .iter()
                        .map(|f| (f.clone(), ask(f)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    })
}

/// `text` with each UID the API server made (`8-4-4-4-12` hex digits: a Job's `controller-uid`
/// label in its message) written `UID`, so a verdict is the same on every run.
fn redact_uids(text: &str) -> String {
    let b = text.as_bytes();
    let uid_at = |i: usize| {
        let shape = [8, 4, 4, 4, 12];
        let mut j = i;
        for (n, len) in shape.into_iter().enumerate() {
            if n > 0 {
                if b.get(j) != Some(&b'-') {
                    return false;
                }
                j += 1;
            }
            if !(j..j + len).all(|k| {
                b.get(k)
                    .is_some_and(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
            }) {
                return false;
            }
            j += len;
        }
        true
    };
    let mut out = String::new();
    let mut i = 0;
    while i < b.len() {
        if text.is_char_boundary(i) && uid_at(i) {
            out.push_str("UID");
            i += 36;
        } else {
            let c = text[i..].chars().next().unwrap_or_default();
            out.push(c);
            i += c.len_utf8().max(1);
        }
    }
    out
}

/// The upstream CRDs a cluster running our services installs (`fixtures/crds/`), established.
fn install_upstream_crds(kubeconfig: &Path) {
    let root = admission_testing::fixtures::fixtures_root().join("crds");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    dirs.sort();
    for dir in dirs {
        let dir = dir.display().to_string();
        let out = e2e::cluster::kubectl(kubeconfig, &["apply", "--server-side", "-f", &dir]);
        assert!(out.ok, "{dir}: {}", out.stderr);
    }
    let out = e2e::cluster::kubectl(
        kubeconfig,
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd",
            "--all",
        ],
    );
    assert!(out.ok, "{}", out.stderr);
}

fn check(file: &str) -> Value {
    check_in(&corpus(), file, "default")
}

fn check_in(dir: &Path, file: &str, ns: &str) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_admission-check"))
        .args(["-o", "json", "-n", ns, file])
        .current_dir(dir)
        .output()
        .unwrap();
    if out.status.code() == Some(2) {
        // Unreadable: what kubectl cannot parse either.
        return serde_json::json!({"unreadable": String::from_utf8_lossy(&out.stderr)});
    }
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{file}: {e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// A field as admission-check names it (`metadata.labels[team]`), as the API server's message
/// may write it: the map key is part of the value there (`metadata.labels: Invalid value: "a b"`).
fn field_forms(field: &str) -> Vec<String> {
    let mut forms = vec![field.to_owned()];
    if let Some((head, _)) = field.rsplit_once('[')
        && field.ends_with(']')
    {
        forms.push(head.to_owned());
    }
    forms
}

/// The fields an API server message names: each `field: <error type>`.
fn api_fields(message: &str) -> Vec<String> {
    const TYPES: [&str; 8] = [
        "Invalid value",
        "Required value",
        "Unsupported value",
        "Duplicate value",
        "Not found",
        "Forbidden",
        "Too long",
        "Too many",
    ];
    let mut out: Vec<(usize, String)> = Vec::new();
    for t in TYPES {
        for (i, _) in message.match_indices(&format!(": {t}")) {
            let head = &message[..i];
            let start = head.rfind([' ', '\n']).map_or(0, |s| s + 1);
            out.push((i, head[start..].to_owned()));
        }
    }
    out.sort();
    out.into_iter().map(|(_, f)| f).collect()
}

/// Whether a finding of ours and the API server's message name the same thing: our field is
/// in the message, or our message names one of its fields, or (a message naming no field: a
/// kind kubectl cannot map, a value that cannot be decoded) a part of our message is its words.
fn same_thing(field: &str, message: &str, api_message: &str) -> bool {
    field_forms(field)
        .iter()
        .any(|f| api_message.contains(f.as_str()))
        || api_fields(api_message)
            .iter()
            .any(|f| message.contains(f.as_str()))
        || message
            .split(": ")
            .any(|part| part.len() > 20 && api_message.contains(part))
}

#[tokio::test]
async fn every_manifest_is_decided_as_the_api_server_decides_it() {
    let files = files();
    assert!(
        files.len() >= 50,
        "the corpus holds {} manifests",
        files.len()
    );
    let env = Env::new("corpus").await;
    let kubeconfig = testenv::shared().unwrap().kubeconfig;
    install_upstream_crds(&kubeconfig);
    let live = ask_api_server(&kubeconfig, &corpus(), Some(&env.ns), &files, "create");
    let mut problems = Vec::new();
    let recorded = recorded_verdicts(
        &corpus().join("verdicts.json"),
        &files,
        &live,
        &mut problems,
    );
    for (file, want) in &recorded {
        let report = check(file);
        let results = report["results"].as_array().cloned().unwrap_or_default();
        let [r] = results.as_slice() else {
            problems.push(format!("{file}: {} results, expected one", results.len()));
            continue;
        };
        judge(file, r, want, &mut problems);
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Updates: each file of `tests/api-server-corpus/updates/` holds an object and a changed
/// manifest of it. The object is applied (for real) in the test's namespace, then the changed
/// manifest with `kubectl apply --dry-run=server --validate=strict`; admission-check, given the
/// file, takes the second document as what `kubectl apply` makes of it (an UPDATE of the first
/// as stored, the manifest merged in) and must decide it as the API server did. The verdicts are
/// recorded in `updates/verdicts.json` by the same command as the corpus's.
#[tokio::test]
async fn every_update_is_decided_as_the_api_server_decides_it() {
    let dir = corpus().join("updates");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    files.sort();
    let env = Env::new("updates").await;
    let kubeconfig = testenv::shared().unwrap().kubeconfig;
    let scratch = tempfile::tempdir().unwrap();
    let mut live = BTreeMap::new();
    let mut cluster_scoped = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        let docs: Vec<&str> = text.split("\n---\n").collect();
        let [first, second] = docs.as_slice() else {
            panic!("{file}: two documents, the object and its change");
        };
        let (a, b) = (
            scratch.path().join("first.yaml"),
            scratch.path().join("second.yaml"),
        );
        std::fs::write(&a, first).unwrap();
        std::fs::write(&b, second).unwrap();
        let applied = e2e::cluster::kubectl(
            &kubeconfig,
            &["apply", "-n", &env.ns, "-f", &a.display().to_string()],
        );
        assert!(applied.ok, "{file}: {}", applied.stderr);
        // A cluster-scoped object outlives the namespace: deleted at the end.
        if first.contains("kind: PriorityClass") {
            cluster_scoped.push(first.to_string());
        }
        let verdict = ask_api_server(
            &kubeconfig,
            scratch.path(),
            Some(&env.ns),
            &["second.yaml".into()],
            "apply",
        )
        .remove("second.yaml")
        .unwrap();
        live.insert(file.clone(), verdict);
    }
    for (i, object) in cluster_scoped.iter().enumerate() {
        let f = scratch.path().join(format!("cluster-scoped-{i}.yaml"));
        std::fs::write(&f, object).unwrap();
        let f = f.display().to_string();
        e2e::cluster::kubectl(&kubeconfig, &["delete", "--ignore-not-found", "-f", &f]);
    }
    let mut problems = Vec::new();
    let recorded = recorded_verdicts(&dir.join("verdicts.json"), &files, &live, &mut problems);
    for (file, want) in &recorded {
        let report = check_in(&dir, file, "default");
        let results = report["results"].as_array().cloned().unwrap_or_default();
        let [created, updated] = results.as_slice() else {
            problems.push(format!("{file}: {} results, expected two", results.len()));
            continue;
        };
        let ok = Verdict {
            allowed: true,
            message: String::new(),
            warnings: Vec::new(),
        };
        judge(file, created, &ok, &mut problems);
        if updated["operation"] != "UPDATE" {
            problems.push(format!(
                "{file}: the change is checked as {}",
                updated["operation"]
            ));
        }
        judge(file, updated, want, &mut problems);
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The verdicts recorded at `path` (written from `live` first under `ADMISSION_CHECK_RECORD`),
/// with a problem for each file they do not list exactly and each verdict the API server no
/// longer gives.
fn recorded_verdicts(
    path: &Path,
    files: &[String],
    live: &BTreeMap<String, Verdict>,
    problems: &mut Vec<String>,
) -> BTreeMap<String, Verdict> {
    if std::env::var_os("ADMISSION_CHECK_RECORD").is_some() {
        let text = serde_json::to_string_pretty(live).unwrap() + "\n";
        std::fs::write(path, text).unwrap();
    }
    let recorded: BTreeMap<String, Verdict> =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    if recorded.keys().collect::<Vec<_>>() != files.iter().collect::<Vec<_>>() {
        problems.push(format!(
            "{} does not list exactly its files: record them",
            path.display()
        ));
    }
    for (file, verdict) in live {
        if recorded.get(file) != Some(verdict) {
            problems.push(format!(
                "{file}: the API server now answers {verdict:?}, recorded {:?}",
                recorded.get(file)
            ));
        }
    }
    recorded
}

/// Whether admission-check's result `r` for `file` decides as the API server did (`want`): a
/// refusal by the API server's rules here exactly when it refused, each finding naming what its
/// message names, and the first field it names named here too.
fn judge(file: &str, r: &Value, want: &Verdict, problems: &mut Vec<String>) {
    let result = r["result"].as_str().unwrap_or_default();
    let by_api_server = r["refusals"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|x| x["service"] == "kube-apiserver");
    if want.allowed {
        if by_api_server {
            problems.push(format!(
                "{file}: admitted by the API server, refused by its rules here: {r}"
            ));
        }
        return;
    }
    if result != "denied" {
        problems.push(format!(
            "{file}: refused by the API server ({}), {result} here",
            want.message
        ));
        return;
    }
    let ours: Vec<&Value> = r["refusals"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|x| x["service"] == "kube-apiserver")
        .flat_map(|x| x["findings"].as_array().into_iter().flatten())
        .collect();
    if ours.is_empty() {
        problems.push(format!(
            "{file}: refused here by webhooks only, by the API server itself there ({})",
            want.message
        ));
    }
    for f in &ours {
        let field = f["field"].as_str().unwrap_or_default();
        let message = f["message"].as_str().unwrap_or_default();
        if !same_thing(field, message, &want.message) {
            problems.push(format!(
                "{file}: {} names {field:?} ({message}), which the API server's message does not: {}",
                f["rule"], want.message
            ));
        }
    }
    // The first field the API server names is named here too.
    if let Some(first) = api_fields(&want.message).first()
        && !ours.iter().any(|f| {
            let field = f["field"].as_str().unwrap_or_default();
            field_forms(field).contains(first)
                || f["message"]
                    .as_str()
                    .unwrap_or_default()
                    .contains(first.as_str())
        })
    {
        problems.push(format!(
            "{file}: the API server names {first}, nothing here does"
        ));
    }
}

/// The OpenAPI v3 documents of the built-in group-versions, as the API server serves them.
async fn built_in_documents(client: &kube::Client) -> Vec<Value> {
    let get = |path: String| async move {
        let req = http::Request::get(path).body(Vec::new()).unwrap();
        let text = client.request_text(req).await.unwrap();
        serde_json::from_str::<Value>(&text).unwrap()
    };
    let index = get("/openapi/v3".into()).await;
    let mut docs = Vec::new();
    for (path, entry) in index["paths"].as_object().unwrap() {
        let group = path
            .strip_prefix("apis/")
            .map(|gv| gv.split('/').next().unwrap_or_default());
        let built_in = match group {
            None => path == "api/v1",
            Some(g) => admission_check::schema::is_built_in_group(g),
        };
        if built_in {
            docs.push(get(entry["serverRelativeURL"].as_str().unwrap().to_owned()).await);
        }
    }
    docs
}

#[tokio::test]
async fn the_built_in_schemas_are_the_api_servers() {
    let env = Env::new("schemas").await;
    let docs = built_in_documents(&env.client).await;
    let live = admission_check::schema::Schemas::from_openapi(&docs);
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/openapi.json");
    if std::env::var_os("ADMISSION_CHECK_RECORD").is_some() {
        std::fs::write(&path, serde_json::to_string(&live).unwrap() + "\n").unwrap();
    }
    let recorded: admission_check::schema::Schemas =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(live.kinds.contains_key("v1/Pod") && live.kinds.contains_key("apps/v1/Deployment"));
    assert!(
        recorded == live,
        "src/openapi.json is not what the API server serves: ADMISSION_CHECK_RECORD=1 cargo test -p admission-check --test api_server_corpus"
    );
}

/// Every upstream example of `fixtures/examples/raw/` (files nobody here wrote) is refused by
/// the API server's rules here exactly when the API server refuses it (with the upstream CRDs:
/// several examples are older than their CRD, and strict field validation refuses them).
#[tokio::test]
async fn upstream_examples_are_refused_where_the_api_server_refuses_them() {
    let env = Env::new("examples").await;
    let kubeconfig = testenv::shared().unwrap().kubeconfig;
    install_upstream_crds(&kubeconfig);
    let root = admission_testing::fixtures::fixtures_root().join("examples/raw");
    let mut files = Vec::new();
    for dir in std::fs::read_dir(&root).unwrap().flatten() {
        for f in std::fs::read_dir(dir.path()).unwrap().flatten() {
            let p = f.path();
            if p.extension().is_some_and(|e| e == "yaml") {
                files.push(p.strip_prefix(&root).unwrap().display().to_string());
            }
        }
    }
    files.sort();
    // The namespaces the examples name exist, as in the cluster they were written for.
    let mut namespaces = std::collections::BTreeSet::new();
    for f in &files {
        for line in std::fs::read_to_string(root.join(f)).unwrap().lines() {
            if let Some(ns) = line.strip_prefix("  namespace: ") {
                namespaces.insert(ns.trim().trim_matches('"').to_owned());
            }
        }
    }
    let client = env.client.clone();
    for ns in namespaces {
        let namespace: k8s_openapi::api::core::v1::Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": ns}})).unwrap();
        let _ = kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
            .create(&Default::default(), &namespace)
            .await;
    }
    let live = ask_api_server(&kubeconfig, &root, None, &files, "create");
    let mut problems = Vec::new();
    let (mut refused, mut elsewhere) = (0, 0);
    for (file, want) in &live {
        let report = check_in(&root, file, "default");
        let ours: Vec<String> = report["results"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|r| r["refusals"].as_array().into_iter().flatten())
            .filter(|x| x["service"] == "kube-apiserver")
            .map(|x| x["message"].as_str().unwrap_or_default().to_owned())
            .collect();
        // A template kubectl cannot parse is named unreadable here.
        if want.message.contains("error parsing") && report["unreadable"].is_string() {
            refused += 1;
            continue;
        }
        // The Priority plugin's refusal rests on a PriorityClass this cluster lacks: here it is
        // missing from the state, and the refusal undecided.
        if let Some(class) = want
            .message
            .split("no PriorityClass with name ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
        {
            let missing = report["results"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|r| r["missing"].as_array().into_iter().flatten())
                .any(|m| m == &Value::String(format!("PriorityClass {class}")));
            if !missing {
                problems.push(format!("{file}: the API server lacks PriorityClass {class}, the state here does not say so: {report}"));
            }
            refused += 1;
            continue;
        }
        // A kind of a CRD not installed here (Gateway API, KEDA): a cluster with them has them.
        if want.message.contains("ensure CRDs are installed first")
            && !ours.iter().any(|m| m.contains("no matches for kind"))
        {
            elsewhere += 1;
            continue;
        }
        if !want.allowed {
            refused += 1;
        }
        if want.allowed == ours.is_empty() {
            continue;
        }
        // The API server stops at a file's first refused object; a file refused
        // for an object of another kind than ours, by a rule not here, is still named.
        problems.push(format!(
            "{file}: the API server {}, here {}",
            if want.allowed {
                "admits it".to_owned()
            } else {
                format!("refuses it ({})", want.message)
            },
            if ours.is_empty() {
                "nothing refuses it".to_owned()
            } else {
                format!("the API server's rules refuse it: {}", ours.join("; "))
            }
        ));
    }
    eprintln!(
        "{} upstream example files: {refused} refused by the API server, {elsewhere} of kinds whose CRDs are not installed here",
        live.len()
    );
    assert!(
        live.len() >= 170 && refused >= 10,
        "{} files, {refused} refused",
        live.len()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
