//! The case runner for `fixtures/{reviews,examples}/<domain>/*.json`, shared by every
//! service's fixture tests. A case runs through the handler in-process ([`check_in_process`]) or
//! through the service binary's `review` command ([`check_with_binary`]); both check the same
//! expectations (`fixtures/README.md`).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use admission_kit::cluster::state::StaticState;
use admission_kit::review::app::{App, DecodeErrors};
use admission_kit::review::envelope::ReviewOut;
use admission_kit::review::handler::{Context, review_body};

/// One fixture case.
#[derive(Debug, Deserialize)]
pub struct Case {
    /// Short name.
    pub name: String,
    /// Endpoint path.
    pub path: String,
    /// Cluster objects the rules may read.
    #[serde(default)]
    pub state: Vec<Value>,
    /// The AdmissionReview as the API server sends it.
    pub review: Value,
    /// What must come back.
    pub expect: Expect,
}

/// A case's expectations.
#[derive(Debug, Deserialize)]
pub struct Expect {
    /// The decision.
    pub allowed: bool,
    /// Substrings of `status.message`, case-insensitive.
    #[serde(default)]
    pub message_contains: Vec<String>,
    /// Substrings of the joined warnings.
    #[serde(default)]
    pub warnings_contain: Vec<String>,
    /// `Some(Null)`: the object must come out unchanged; `Some(ops)`: the patched objects must
    /// be equal; `None`: not checked.
    #[serde(default, deserialize_with = "present")]
    pub patch: Option<Value>,
}

fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// The fixtures root: `$ADMISSION_FIXTURES_DIR`, or the workspace's `fixtures/`.
pub fn fixtures_root() -> PathBuf {
    if let Some(d) = std::env::var_os("ADMISSION_FIXTURES_DIR") {
        return PathBuf::from(d);
    }
    // This crate sits two levels below the workspace root.
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// Every `*.json` case of `reviews/<domain>` and `examples/<domain>`, sorted.
pub fn case_files(root: &Path, domain: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for kind in ["reviews", "examples"] {
        if let Ok(rd) = std::fs::read_dir(root.join(kind).join(domain)) {
            for e in rd.flatten() {
                let p = e.path();
                if p.extension().is_some_and(|x| x == "json") {
                    files.push(p);
                }
            }
        }
    }
    files.sort();
    files
}

/// Reads a case file.
pub fn load(path: &Path) -> Result<Case, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

pub(crate) fn state_of(objects: &[Value]) -> Result<StaticState, String> {
    let mut s = StaticState::default();
    for o in objects {
        s.add_value(o.clone())?;
    }
    Ok(s)
}

/// What the server answers a review body posted to `path` of `app` with `state` as cluster
/// state: the AdmissionReview (an undecodable review answered as the app's [`DecodeErrors`]
/// says), or `Err` with the text of any other answer (Kthena's plain-text HTTP 400, a path the
/// app does not serve, a state object that does not load).
pub fn answer_in_process(
    app: &App,
    path: &str,
    review: &Value,
    state: &[Value],
) -> Result<Value, String> {
    let prepared = app.prepare(None).map_err(|e| e.to_string())?;
    let ep = prepared
        .app
        .endpoint(path)
        .ok_or_else(|| format!("no endpoint {path}"))?;
    let ctx = Context::new(Arc::new(state_of(state)?)).with_gates(prepared.gates.clone());
    let body = serde_json::to_vec(review).map_err(|e| e.to_string())?;
    let out = answer_with(app.decode_errors, ep.handler.as_ref(), &body, &ctx)?;
    serde_json::to_value(&out).map_err(|e| e.to_string())
}

/// The server's answer to `body` (see [`answer_in_process`]): the review, or `Err` with the
/// plain-text HTTP 400 a [`DecodeErrors::PlainText`] app sends.
pub(crate) fn answer_with(
    mode: DecodeErrors,
    handler: &dyn admission_kit::review::handler::Handler,
    body: &[u8],
    ctx: &Context,
) -> Result<ReviewOut, String> {
    match review_body(handler, body, ctx) {
        Ok(answer) => Ok(answer.review),
        Err(e) if mode == DecodeErrors::Errored => Ok(e.errored_review(
            admission_kit::review::envelope::claimed_api_version(body),
            admission_kit::review::envelope::claimed_uid(body),
        )),
        Err(e) => Err(format!("HTTP 400: {}", e.plain_text())),
    }
}

/// Runs a case through the app's handler in-process and checks it.
pub fn check_in_process(app: &App, case: &Case) -> Result<(), String> {
    let out = answer_in_process(app, &case.path, &case.review, &case.state)?;
    check(case, &out)
}

/// Runs a case through `<binary> review --path <path> [--state FILE]` and checks it.
pub fn check_with_binary(binary: &Path, case: &Case) -> Result<(), String> {
    check_with_binary_args(binary, case, &[])
}

/// As [`check_with_binary`], with service options for `review` (`--name value` pairs).
pub fn check_with_binary_args(binary: &Path, case: &Case, args: &[&str]) -> Result<(), String> {
    let dir = tempfile_dir()?;
    let mut cmd = Command::new(binary);
    cmd.arg("review").arg("--path").arg(&case.path).args(args);
    if !case.state.is_empty() {
        let f = dir.join("state.json");
        let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": case.state});
        std::fs::write(&f, serde_json::to_vec(&list).map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
        cmd.arg("--state").arg(&f);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", binary.display()))?;
    let body = serde_json::to_vec(&case.review).map_err(|e| e.to_string())?;
    child
        .stdin
        .take()
        .ok_or("no stdin")?
        .write_all(&body)
        .map_err(|e| e.to_string())?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(&dir);
    if !out.status.success() {
        return Err(format!(
            "review exited {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let v: Value = serde_json::from_slice(&out.stdout).map_err(|e| {
        format!(
            "review printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })?;
    check(case, &v)
}

fn tempfile_dir() -> Result<PathBuf, String> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let d = std::env::temp_dir().join(format!(
        "admission-case-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).map_err(|e| e.to_string())?;
    Ok(d)
}

/// Checks an answer (as JSON) against a case's expectations.
pub fn check(case: &Case, out: &Value) -> Result<(), String> {
    let parsed: ReviewOut = serde_json::from_value(out.clone())
        .map_err(|e| format!("answer is not an AdmissionReview: {e}"))?;
    let want_version = case.review["apiVersion"].as_str().unwrap_or_default();
    if parsed.api_version != want_version {
        return Err(format!(
            "apiVersion {} != {want_version}",
            parsed.api_version
        ));
    }
    let r = parsed.response;
    let uid = case.review["request"]["uid"].as_str().unwrap_or_default();
    if r.uid != uid {
        return Err(format!("uid {:?} != {uid:?}", r.uid));
    }
    let message = r
        .status
        .as_ref()
        .map(|s| s.message.clone())
        .unwrap_or_default();
    if r.allowed != case.expect.allowed {
        return Err(format!(
            "allowed={} (expected {}); message: {message}",
            r.allowed, case.expect.allowed
        ));
    }
    let lower = message.to_lowercase();
    for s in &case.expect.message_contains {
        if !lower.contains(&s.to_lowercase()) {
            return Err(format!("message lacks {s:?}; message: {message}"));
        }
    }
    if case.expect.warnings_contain.is_empty() && !r.warnings.is_empty() {
        return Err(format!("unexpected warnings: {:?}", r.warnings));
    }
    let warnings = r.warnings.join("\n").to_lowercase();
    for s in &case.expect.warnings_contain {
        if !warnings.contains(&s.to_lowercase()) {
            return Err(format!("warnings lack {s:?}; warnings: {:?}", r.warnings));
        }
    }
    if let Some(expected) = &case.expect.patch {
        let object = &case.review["request"]["object"];
        let ours = apply_b64(object, r.patch.as_deref())?;
        let theirs = match expected {
            Value::Null => object.clone(),
            ops => {
                let p: json_patch::Patch = serde_json::from_value(ops.clone())
                    .map_err(|e| format!("bad expected patch: {e}"))?;
                let mut o = object.clone();
                json_patch::patch(&mut o, &p)
                    .map_err(|e| format!("expected patch does not apply: {e}"))?;
                o
            }
        };
        if ours != theirs {
            return Err(format!(
                "patched object differs\n ours:     {}\n expected: {}",
                ours, theirs
            ));
        }
        if expected.is_null() && r.patch.is_some() {
            return Err("a patch was sent although nothing changes".into());
        }
    }
    Ok(())
}

/// `object` with an answer's base64 JSON Patch applied (unchanged without one), or why the
/// patch is not base64, not a JSON Patch, or does not apply.
pub fn apply_b64(object: &Value, patch: Option<&str>) -> Result<Value, String> {
    use base64::Engine as _;
    let mut o = object.clone();
    if let Some(b) = patch {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b)
            .map_err(|e| format!("patch is not base64: {e}"))?;
        let p: json_patch::Patch = serde_json::from_slice(&bytes)
            .map_err(|e| format!("patch is not a JSON Patch: {e}"))?;
        json_patch::patch(&mut o, &p).map_err(|e| format!("our patch does not apply: {e}"))?;
    }
    Ok(o)
}

/// Runs every case of a domain with `run`, failing with every failure listed, and failing when
/// no case file is found.
pub fn run_all(
    root: &Path,
    domain: &str,
    run: impl Fn(&Case) -> Result<(), String>,
) -> Result<usize, String> {
    let files = case_files(root, domain);
    if files.is_empty() {
        return Err(format!(
            "no fixture files under {}/{{reviews,examples}}/{domain}: the workspace's fixtures/ or $ADMISSION_FIXTURES_DIR",
            root.display()
        ));
    }
    let mut failures = Vec::new();
    for f in &files {
        let res = load(f).and_then(|c| run(&c).map_err(|e| format!("[{}] {e}", c.name)));
        if let Err(e) = res {
            failures.push(format!("{}: {e}", f.display()));
        }
    }
    if failures.is_empty() {
        Ok(files.len())
    } else {
        Err(format!(
            "{} of {} cases failed:\n{}",
            failures.len(),
            files.len(),
            failures.join("\n")
        ))
    }
}
