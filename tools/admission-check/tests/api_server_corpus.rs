//! The API server's own verdicts: every manifest of `tests/api-server-corpus/` (one object per
//! file, written for this test) is created with `kubectl create --dry-run=server
//! --validate=strict` on the project's control plane (kube-apiserver v1.34.4, the CRDs of every
//! service installed, no webhook registered), and admission-check must decide each as that API
//! server did: refused ones denied by the API server's own rules (`API-*`), each finding's field
//! named in the API server's message, admitted ones admitted.
//!
//! The verdicts are recorded in `tests/api-server-corpus/verdicts.json`, and this test also
//! checks that the API server still answers so. To record them again (after adding a manifest
//! or moving the pinned Kubernetes):
//!
//! ```sh
//! ADMISSION_CHECK_RECORD=1 cargo test -p admission-check --test api_server_corpus
//! ```

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

/// Asks the API server, `threads` files at a time.
fn ask_api_server(kubeconfig: &Path, ns: &str, files: &[String]) -> BTreeMap<String, Verdict> {
    let kubectl = testenv::tools::locate_cluster().unwrap().kubectl;
    let ask = |file: &String| {
        let out = Command::new(&kubectl)
            .args(["--kubeconfig"])
            .arg(kubeconfig)
            .args([
                "create",
                "--dry-run=server",
                "--validate=strict",
                "-o",
                "name",
                "-n",
                ns,
                "-f",
                file,
            ])
            .current_dir(corpus())
            .output()
            .unwrap();
        let mut stderr = String::from_utf8_lossy(&out.stderr).replace(ns, "NAMESPACE");
        // A generated name's random suffix, written `GENERATED`.
        let text = std::fs::read_to_string(corpus().join(file)).unwrap();
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

fn check(file: &str) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_admission-check"))
        .args(["-o", "json", file])
        .current_dir(corpus())
        .output()
        .unwrap();
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
    for app in admission_check::services() {
        env.install_crds(&app).await;
    }
    let kubeconfig = testenv::shared().unwrap().kubeconfig;
    let live = ask_api_server(&kubeconfig, &env.ns, &files);
    let recorded_path = corpus().join("verdicts.json");
    if std::env::var_os("ADMISSION_CHECK_RECORD").is_some() {
        let text = serde_json::to_string_pretty(&live).unwrap() + "\n";
        std::fs::write(&recorded_path, text).unwrap();
    }
    let recorded: BTreeMap<String, Verdict> =
        serde_json::from_str(&std::fs::read_to_string(&recorded_path).unwrap()).unwrap();
    let mut problems = Vec::new();
    if recorded.keys().collect::<Vec<_>>() != files.iter().collect::<Vec<_>>() {
        problems.push("verdicts.json does not list exactly the corpus's files: record them".into());
    }
    for (file, verdict) in &live {
        if recorded.get(file) != Some(verdict) {
            problems.push(format!(
                "{file}: the API server now answers {verdict:?}, recorded {:?}",
                recorded.get(file)
            ));
        }
    }
    for (file, want) in &recorded {
        let report = check(file);
        let results = report["results"].as_array().cloned().unwrap_or_default();
        let [r] = results.as_slice() else {
            problems.push(format!("{file}: {} results, expected one", results.len()));
            continue;
        };
        let result = r["result"].as_str().unwrap_or_default();
        if want.allowed {
            if !matches!(result, "admitted" | "warned") {
                problems.push(format!(
                    "{file}: admitted by the API server, {result} here: {r}"
                ));
            }
            continue;
        }
        if result != "denied" {
            problems.push(format!(
                "{file}: refused by the API server ({}), {result} here",
                want.message
            ));
            continue;
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
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
