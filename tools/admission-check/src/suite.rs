//! Test suites, in the spirit of `kyverno test`: a YAML file lists manifests, the cluster state
//! they are checked against and the result expected of each; `admission-check --test` reports
//! every mismatch and exits 1 when there is one.
//!
//! ```yaml
//! name: registry examples
//! base: ../examples            # where `resources` are, relative to this file (default: here)
//! state: [state.yaml]          # objects in the cluster for every test, relative to this file
//! excludeNamespaces: []        # default: kube-system and admission-webhooks
//! tests:
//!   - name: a Model whose replicas are out of range is refused
//!     why: a note for readers
//!     resources: [model.yaml]  # every object of these files is checked
//!     operation: UPDATE        # default CREATE
//!     subresource: status
//!     namespace: dev           # for objects that name none (default: default)
//!     user: {username: system:node:n1}
//!     endpoints: [/validate-registry-volcano-sh-v1alpha1-model]   # only these (default: all)
//!     documents: [2]           # only these documents of the resources (default: all)
//!     render: {"{{.Image}}": "pause:3.10"}      # text replaced before reading (templates)
//!     labels: {team: a}        # set on every object before the check
//!     old: {apiVersion: v1, kind: Node, ...}   # the object replaced (UPDATE)
//!     state: [{apiVersion: ..., kind: ...}]    # more objects in the cluster, this test only
//!     expect:
//!       result: denied         # admitted | warned | denied
//!       rules: [MV-05]         # each must be among the denial's rules
//!       messageContains: [minReplicas]   # case-insensitive, in the denial messages
//!       warningsContain: []
//!       patch: [{op: add, path: /spec/x, value: 1}]   # the admitted object is the input with
//!                                                    # these ops applied ([] = unchanged)
//!       apiServer: [API-14]    # the API server's own rules refuse it first (say why); result
//!                              # is then the webhooks' verdict
//! ```

use std::path::{Path, PathBuf};

use admission_kit::App;
use admission_kit::Operation;
use admission_kit::cluster::state::StaticState;
use serde::Deserialize;
use serde_json::Value;

use crate::catalog::{Catalog, Subject};
use crate::input;
use crate::report::{Checked, Verdict};

/// A suite file.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Suite {
    /// What the suite covers.
    pub name: String,
    /// The directory `resources` are relative to, itself relative to the suite file.
    #[serde(default)]
    pub base: Option<String>,
    /// State files for every test, relative to the suite file.
    #[serde(default)]
    pub state: Vec<String>,
    /// Namespaces kept away from the webhooks (default: the installation's).
    #[serde(default)]
    pub exclude_namespaces: Option<Vec<String>>,
    /// The tests.
    pub tests: Vec<Test>,
}

/// One test: manifests and what is expected of each of their objects.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Test {
    /// What it shows.
    pub name: String,
    /// Why it differs from the plain case, for readers (not checked).
    #[serde(default)]
    pub why: Option<String>,
    /// Manifest files (or directories), relative to the suite's `base`.
    pub resources: Vec<String>,
    /// The operation (default CREATE, UPDATE when `old` is given).
    #[serde(default)]
    pub operation: Option<Operation>,
    /// The subresource addressed.
    #[serde(default)]
    pub subresource: Option<String>,
    /// The namespace of objects that name none.
    #[serde(default)]
    pub namespace: Option<String>,
    /// The requesting user (`userInfo`).
    #[serde(default)]
    pub user: Option<Value>,
    /// Only these endpoints are called.
    #[serde(default)]
    pub endpoints: Vec<String>,
    /// Only these documents (numbered from 1) of the resources are checked.
    #[serde(default)]
    pub documents: Vec<usize>,
    /// Text replacements made in the resources before they are read: renders a templated
    /// manifest (`{{.PauseImage}}`) the way its own tooling would.
    #[serde(default)]
    pub render: std::collections::BTreeMap<String, String>,
    /// Labels set on every object before the check.
    #[serde(default)]
    pub labels: std::collections::BTreeMap<String, String>,
    /// The object replaced.
    #[serde(default)]
    pub old: Option<Value>,
    /// More cluster objects, for this test only.
    #[serde(default)]
    pub state: Vec<Value>,
    /// What is expected of every object.
    pub expect: Expect,
}

/// Expectations of one object.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expect {
    /// The verdict.
    pub result: Verdict,
    /// Rule ids that must be among the denial's.
    #[serde(default)]
    pub rules: Vec<String>,
    /// Substrings of the denial messages (case-insensitive).
    #[serde(default)]
    pub message_contains: Vec<String>,
    /// Substrings of the joined warnings (case-insensitive).
    #[serde(default)]
    pub warnings_contain: Vec<String>,
    /// JSON Patch operations whose application to the input gives the admitted object.
    #[serde(default)]
    pub patch: Option<Vec<Value>>,
    /// Rule ids of the API server's own checks that refuse the object before any webhook
    /// (an upstream example older than its CRD): each must be among them, and `result` is then
    /// the webhooks' verdict, as if the API server had let the object through.
    #[serde(default)]
    pub api_server: Vec<String>,
}

/// Why a suite could not be run (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    /// The suite file could not be read or parsed.
    #[error("test suite {path}: {message}")]
    Suite {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// A manifest it names could not be read.
    #[error("test suite {path}, test {test:?}: {source}")]
    Input {
        /// The suite file.
        path: String,
        /// The test.
        test: String,
        /// The cause.
        source: input::InputError,
    },
}

/// The outcome of one test.
#[derive(Debug, Clone)]
pub struct TestResult {
    /// The suite's name.
    pub suite: String,
    /// The test's name.
    pub name: String,
    /// Every mismatch, empty when the test passed.
    pub failures: Vec<String>,
    /// The objects checked.
    pub checked: Vec<Checked>,
}

/// Reads a suite file.
pub fn load(path: &Path) -> Result<Suite, SuiteError> {
    let err = |message: String| SuiteError::Suite {
        path: path.display().to_string(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    serde_yaml_ng::from_str(&text).map_err(|e| err(e.to_string()))
}

/// Runs every test of the suite at `path` against the endpoints of `apps`, each test's state
/// holding `extra_state` (the command's `--state`) besides the suite's and its own.
pub fn run(
    path: &Path,
    apps: &[App],
    extra_state: &[Value],
) -> Result<Vec<TestResult>, SuiteError> {
    let suite = load(path)?;
    let dir = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    let base = suite.base.as_ref().map_or(dir.clone(), |b| dir.join(b));
    let fail = |message: String| SuiteError::Suite {
        path: path.display().to_string(),
        message,
    };
    let state_files: Vec<PathBuf> = suite.state.iter().map(|f| dir.join(f)).collect();
    let mut results = Vec::new();
    for test in &suite.tests {
        let mut state = StaticState::from_files(&state_files).map_err(|e| fail(e.to_string()))?;
        for obj in extra_state.iter().chain(&test.state) {
            state
                .add_value(obj.clone())
                .map_err(|e| fail(format!("test {:?}: state: {e}", test.name)))?;
        }
        let mut catalog = Catalog::new(apps.to_vec(), state).map_err(|e| fail(e.to_string()))?;
        // A test's state is the whole cluster it describes: what it lacks is absent.
        catalog.state_complete = true;
        if let Some(ns) = &suite.exclude_namespaces {
            catalog.excluded_namespaces = ns.clone();
        }
        if let Some(ns) = &test.namespace {
            catalog.default_namespace = ns.clone();
        }
        let paths: Vec<PathBuf> = test.resources.iter().map(|r| base.join(r)).collect();
        let input_err = |source| SuiteError::Input {
            path: path.display().to_string(),
            test: test.name.clone(),
            source,
        };
        let mut manifests = Vec::new();
        for f in input::files(&paths).map_err(input_err)? {
            let name = f.display().to_string();
            let mut text = std::fs::read_to_string(&f).map_err(|source| {
                input_err(input::InputError::Read {
                    path: name.clone(),
                    source,
                })
            })?;
            for (from, to) in &test.render {
                text = text.replace(from, to);
            }
            manifests.extend(input::parse(&name, &text).map_err(input_err)?);
        }
        if !test.documents.is_empty() {
            manifests.retain(|m| test.documents.contains(&m.source.document));
        }
        let operation = test.operation.unwrap_or(if test.old.is_some() {
            Operation::Update
        } else {
            Operation::Create
        });
        let mut failures = Vec::new();
        if manifests.is_empty() {
            failures.push("its resources hold no object".to_owned());
        }
        // An endpoint the services do not serve is a typo in the suite, not a finding.
        let known = catalog.paths();
        for e in &test.endpoints {
            if !known.contains(&e.as_str()) {
                failures.push(format!("no endpoint {e:?}; known: {}", known.join(", ")));
            }
        }
        let mut checked = Vec::new();
        for mut m in manifests {
            if !test.labels.is_empty()
                && let Some(meta) = m.object["metadata"].as_object_mut()
            {
                let labels = meta
                    .entry("labels")
                    .or_insert_with(|| Value::Object(Default::default()));
                for (k, v) in &test.labels {
                    labels[k] = Value::String(v.clone());
                }
            }
            let subject = Subject {
                object: &m.object,
                old: test.old.as_ref(),
                operation,
                sub_resource: test.subresource.as_deref(),
                namespace: None,
                user_info: test.user.as_ref(),
                only: &test.endpoints,
                retyped: &m.retyped,
            };
            let mut outcome = catalog.check(&subject);
            outcome.warnings.extend(m.reader_warnings());
            let c = Checked {
                source: m.source,
                operation: operation.as_str(),
                elapsed: std::time::Duration::ZERO,
                outcome,
            };
            // A test naming its endpoints passes only if they were called: an object no
            // endpoint sees is admitted, which would make any "admitted" test pass.
            let mut found = Vec::new();
            for e in &test.endpoints {
                if !c.outcome.endpoints.contains(e) {
                    found.push(format!(
                        "endpoint {e} was not called{}",
                        c.outcome
                            .skipped
                            .as_ref()
                            .map(|w| format!(" ({w})"))
                            .unwrap_or_default()
                    ));
                }
            }
            found.extend(mismatches(&test.expect, &c));
            // "admitted" of an object nothing checked would pass whatever the rules say.
            if c.outcome.endpoints.is_empty() && c.verdict() != Verdict::Denied {
                found.push(format!(
                    "nothing checked it{}",
                    c.outcome
                        .unknown_version
                        .as_ref()
                        .or(c.outcome.skipped.as_ref())
                        .map(|w| format!(" ({w})"))
                        .unwrap_or_default()
                ));
            }
            for f in found {
                failures.push(format!("{} {}: {f}", c.source, c.title()));
            }
            checked.push(c);
        }
        results.push(TestResult {
            suite: suite.name.clone(),
            name: test.name.clone(),
            failures,
            checked,
        });
    }
    Ok(results)
}

/// How an object's result differs from what is expected.
pub fn mismatches(expect: &Expect, c: &Checked) -> Vec<String> {
    let mut out = Vec::new();
    let o = &c.outcome;
    let by_api_server: Vec<&str> = o
        .refusals
        .iter()
        .filter(|r| r.service == crate::catalog::API_SERVER)
        .flat_map(|r| r.findings.iter().map(|f| f.rule.as_str()))
        .collect();
    for r in &expect.api_server {
        if !by_api_server.contains(&r.as_str()) {
            out.push(format!(
                "expected the API server's rule {r} among its refusals {by_api_server:?}"
            ));
        }
    }
    // With the API server's refusals stated, the result is the webhooks' alone.
    let webhooks_only;
    let c = if expect.api_server.is_empty() {
        c
    } else {
        let mut w = c.clone();
        w.outcome
            .refusals
            .retain(|r| r.service != crate::catalog::API_SERVER);
        w.outcome.admitted = w.outcome.refusals.is_empty();
        webhooks_only = w;
        &webhooks_only
    };
    let o = &c.outcome;
    if c.verdict() != expect.result {
        let why: Vec<&str> = o.refusals.iter().map(|r| r.message.as_str()).collect();
        out.push(format!(
            "expected {}, got {}{}",
            expect.result.label(),
            c.verdict().label(),
            if why.is_empty() {
                String::new()
            } else {
                format!(" ({})", why.join("; "))
            }
        ));
    }
    let rules: Vec<&str> = o
        .refusals
        .iter()
        .flat_map(|r| r.findings.iter().map(|f| f.rule.as_str()))
        .collect();
    for r in &expect.rules {
        if !rules.contains(&r.as_str()) {
            out.push(format!(
                "expected rule {r} among the denial's rules {rules:?}"
            ));
        }
    }
    let messages = o
        .refusals
        .iter()
        .map(|r| r.message.as_str())
        .collect::<Vec<_>>()
        .join("\n")
        .to_lowercase();
    for m in &expect.message_contains {
        if !messages.contains(&m.to_lowercase()) {
            out.push(format!("the denial message does not contain {m:?}"));
        }
    }
    let warnings = o.warnings.join("\n").to_lowercase();
    for w in &expect.warnings_contain {
        if !warnings.contains(&w.to_lowercase()) {
            out.push(format!("the warnings do not contain {w:?}"));
        }
    }
    if let Some(ops) = &expect.patch {
        let mut want = o.sent.clone();
        let applied = serde_json::from_value::<json_patch::Patch>(Value::Array(ops.clone()))
            .map_err(|e| e.to_string())
            .and_then(|p| json_patch::patch(&mut want, &p).map_err(|e| e.to_string()));
        match applied {
            Err(e) => out.push(format!(
                "the expected patch does not apply to the input: {e}"
            )),
            Ok(()) if want != *o.admitted_object() => out.push(format!(
                "the admitted object differs from the expected one:\n{}",
                crate::report::diff(&want, o.admitted_object())
            )),
            Ok(()) => {}
        }
    }
    out
}
