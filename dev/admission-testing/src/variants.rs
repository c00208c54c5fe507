//! The mutation fuzzer: seeded variants of every given case (the fixture reviews of a domain),
//! each decided in-process exactly as the server decides it, and checked for what must hold
//! without knowing upstream's answer:
//!
//! - no panic, and an answer (a watchdog aborts the process, naming the variant, if one review
//!   takes over a minute: a hang, not a slow answer);
//! - a review answer in the request's apiVersion echoing its uid (Kthena's services may answer
//!   an undecodable review with its plain-text HTTP 400 instead, in its words);
//! - a decode failure answered as the service's upstream answers it;
//! - a refusal carries a message;
//! - a patch only on an admission, typed `JSONPatch`, that applies to the object, changes it,
//!   and holds no operation that changes nothing.
//!
//! The variants are the kinds of input the differential comparison with upstream used: edge
//! numbers, removed, null or duplicated fields, odd quantities, surrounding white space, wrong
//! JSON types, and odd operations. `per_case` and `seed` bound and reproduce a run; the test
//! command runs a few seconds per domain, `ADMISSION_VARIANTS_PER_CASE` makes a longer run.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value};

use crate::fixtures::{Case, answer_with, case_files, load, state_of};
use admission_kit::review::app::{App, DecodeErrors};
use admission_kit::review::handler::Context;

/// Variants per case in the test command.
pub const DEFAULT_PER_CASE: usize = 40;

/// The seed of the test command's run (any other reproduces another run).
pub const DEFAULT_SEED: u64 = 14;

/// What a run did.
#[derive(Debug, Default)]
pub struct Report {
    /// Cases read.
    pub cases: usize,
    /// Variants decided.
    pub variants: usize,
    /// Answered with a review.
    pub reviews: usize,
    /// Of those, admitted.
    pub admitted: usize,
    /// Admitted with a patch (each applied and checked).
    pub patched: usize,
    /// Refused with code 400 (decode failures and 400 refusals).
    pub code_400: usize,
    /// Answered with plain text (Kthena's decode errors).
    pub plain_text: usize,
    /// Broken properties, each with the variant that broke it.
    pub failures: Vec<String>,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} cases, {} variants: {} reviews ({} admitted, {} patched, {} refused with 400), {} plain-text answers, {} failures",
            self.cases,
            self.variants,
            self.reviews,
            self.admitted,
            self.patched,
            self.code_400,
            self.plain_text,
            self.failures.len()
        )
    }
}

/// Variants per case and seed from `ADMISSION_VARIANTS_PER_CASE` / `ADMISSION_VARIANTS_SEED`,
/// else the defaults.
pub fn bounds_from_env() -> (usize, u64) {
    let get = |k: &str| std::env::var(k).ok().and_then(|v| v.parse().ok());
    (
        get("ADMISSION_VARIANTS_PER_CASE")
            .and_then(|v: u64| usize::try_from(v).ok())
            .unwrap_or(DEFAULT_PER_CASE),
        get("ADMISSION_VARIANTS_SEED").unwrap_or(DEFAULT_SEED),
    )
}

/// Generates `per_case` variants of every case of `domain` under `root` and checks each.
/// `Err` only when the cases cannot be read; broken properties are in the report.
pub fn run(
    app: &App,
    root: &Path,
    domain: &str,
    per_case: usize,
    seed: u64,
) -> Result<Report, String> {
    let files = case_files(root, domain);
    if files.is_empty() {
        return Err(format!("no cases of {domain} under {}", root.display()));
    }
    let prepared = app.prepare(None).map_err(|e| e.to_string())?;
    let watchdog = Watchdog::start(Duration::from_secs(60));
    let mut report = Report::default();
    for (i, file) in files.iter().enumerate() {
        let case = load(file)?;
        let Some(endpoint) = prepared.app.endpoint(&case.path) else {
            return Err(format!("{}: no endpoint {}", file.display(), case.path));
        };
        let ctx = Context::new(Arc::new(state_of(&case.state)?)).with_gates(prepared.gates.clone());
        report.cases += 1;
        for (n, (body, what)) in bodies(&case, i, per_case, seed).into_iter().enumerate() {
            let name = format!("{} variant {n} ({what})", case.name);
            watchdog.entered(&name, &body);
            report.variants += 1;
            let answered = catch_unwind(AssertUnwindSafe(|| {
                answer_with(app.decode_errors, endpoint.handler.as_ref(), &body, &ctx)
            }));
            let problem = match answered {
                Err(_) => Some("panicked".to_owned()),
                Ok(answer) => check(
                    app.decode_errors,
                    endpoint.handler.keeps_empty_additions(),
                    &body,
                    answer,
                    &mut report,
                ),
            };
            if let Some(p) = problem {
                report.failures.push(format!(
                    "{name}: {p}\n  body: {}",
                    String::from_utf8_lossy(&body)
                ));
            }
        }
    }
    drop(watchdog);
    Ok(report)
}

/// The `per_case` variants of the `index`-th case of a domain under `seed`, as [`run`] makes
/// them: each request body with what was changed. For differential runs against an upstream's
/// own handlers (the same bodies, decided by both).
pub fn bodies(case: &Case, index: usize, per_case: usize, seed: u64) -> Vec<(Vec<u8>, String)> {
    let mut rng =
        fastrand::Rng::with_seed(seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    (0..per_case).map(|_| variant(&mut rng, case)).collect()
}

/// Writes the variants of every case of `root/{reviews,examples}/<domain>` (or `root/<domain>`)
/// into `dir` as case files (`{"path", "state", "review"}`, the case's cluster state kept), for a
/// differential run against upstream's handlers (`tools/upstream-oracle/*`). Bodies that are
/// not JSON texts are left out: they fit no case file (and are decode failures either way).
/// `per_case` and `seed` choose the variants, as in [`run`]. Returns how many files were
/// written.
pub fn write_for_comparison(
    root: &Path,
    domain: &str,
    dir: &Path,
    per_case: usize,
    seed: u64,
) -> std::io::Result<usize> {
    std::fs::create_dir_all(dir)?;
    let mut written = 0;
    for (i, file) in crate::fixtures::case_files(root, domain).iter().enumerate() {
        let case = crate::fixtures::load(file).map_err(std::io::Error::other)?;
        let head = format!(
            "{{\"path\": {}, \"state\": {}, \"review\": ",
            Value::from(case.path.as_str()),
            Value::from(case.state.clone())
        );
        for (n, (body, _)) in bodies(&case, i, per_case, seed).into_iter().enumerate() {
            // The body's own text, so a duplicated key stays duplicated.
            let Ok(text) = String::from_utf8(body) else {
                continue;
            };
            if serde_json::from_str::<serde::de::IgnoredAny>(&text).is_err() {
                continue;
            }
            std::fs::write(
                dir.join(format!("{i:03}-{n:03}.json")),
                format!("{head}{text}}}"),
            )?;
            written += 1;
        }
    }
    Ok(written)
}

/// The test each service runs: [`run`] over its domain's cases with [`bounds_from_env`],
/// printing the report and panicking with every broken property (and when too few variants
/// ran to mean anything).
pub fn check_domain(app: &App, domain: &str) {
    check_cases(app, &crate::fixtures::fixtures_root(), domain);
}

/// [`check_domain`] on the cases under `root/{reviews,examples}/<domain>` (a service's own).
pub fn check_cases(app: &App, root: &Path, domain: &str) {
    let (per_case, seed) = bounds_from_env();
    let report = run(app, root, domain, per_case, seed).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{domain} (seed {seed}, {per_case} per case): {report}");
    assert!(report.variants >= 1000, "{report}");
    assert!(
        report.failures.is_empty(),
        "{report}\n{}",
        report.failures.join("\n")
    );
}

/// Checks one answer; `Some(why)` when a property is broken.
fn check(
    mode: DecodeErrors,
    empty_additions: bool,
    body: &[u8],
    answer: Result<admission_kit::review::envelope::ReviewOut, String>,
    report: &mut Report,
) -> Option<String> {
    let out = match answer {
        Ok(out) => out,
        Err(text) => {
            report.plain_text += 1;
            const KTHENA: [&str; 4] = [
                "HTTP 400: failed to decode body: ",
                "HTTP 400: admission review request is nil",
                "HTTP 400: empty object in admission request",
                "HTTP 400: failed to decode object: ",
            ];
            return (mode != DecodeErrors::PlainText
                || !KTHENA.iter().any(|k| text.starts_with(k)))
            .then(|| format!("answered without a review: {text}"));
        }
    };
    report.reviews += 1;
    let version = admission_kit::review::envelope::claimed_api_version(body);
    if out.api_version != version {
        return Some(format!(
            "apiVersion {} for a {version} review",
            out.api_version
        ));
    }
    let uid = admission_kit::review::envelope::claimed_uid(body);
    if out.response.uid != uid {
        return Some(format!("uid {:?} for {uid:?}", out.response.uid));
    }
    let r = &out.response;
    let code = r.status.as_ref().and_then(|s| s.code);
    if code == Some(400) {
        report.code_400 += 1;
    }
    if !r.allowed {
        let message = r.status.as_ref().map(|s| s.message.as_str()).unwrap_or("");
        if message.is_empty() {
            return Some("refused without a message".into());
        }
        if r.patch.is_some() {
            return Some("a patch on a refusal".into());
        }
        return None;
    }
    report.admitted += 1;
    let patch = r.patch.as_deref()?;
    report.patched += 1;
    if r.patch_type.as_deref() != Some("JSONPatch") {
        return Some(format!("patch type {:?}", r.patch_type));
    }
    let review: Value = serde_json::from_slice(body).unwrap_or_default();
    let request = &review["request"];
    let object = if request["operation"] == "DELETE" {
        &request["oldObject"]
    } else {
        &request["object"]
    };
    patch_problem(object, patch, empty_additions)
}

/// Why a base64 JSON Patch is not one that applies to `object`, changes it, and changes
/// something with every operation (an empty value added under an absent key counts as a change
/// only for a handler that keeps such additions on purpose, `empty_additions`).
fn patch_problem(object: &Value, patch_b64: &str, empty_additions: bool) -> Option<String> {
    use base64::Engine as _;
    let bytes = match base64::engine::general_purpose::STANDARD.decode(patch_b64) {
        Ok(b) => b,
        Err(e) => return Some(format!("patch is not base64: {e}")),
    };
    let patch: json_patch::Patch = match serde_json::from_slice(&bytes) {
        Ok(p) => p,
        Err(e) => return Some(format!("not a JSON Patch: {e}")),
    };
    if patch.0.is_empty() {
        return Some("an empty patch".into());
    }
    let mut doc = object.clone();
    for op in &patch.0 {
        let before = doc.clone();
        if let Err(e) = json_patch::patch(&mut doc, std::slice::from_ref(op)) {
            return Some(format!("patch does not apply at {op:?}: {e}"));
        }
        // Adding an empty value (`resources: {}`) where there was none changes the text but
        // nothing Go decodes: as much a no-op as an operation that leaves the object equal.
        if doc == before
            || (!empty_additions && admission_kit::review::diff::adds_nothing(&before, op))
        {
            return Some(format!(
                "an operation that changes nothing: {}",
                serde_json::to_string(op).unwrap_or_default()
            ));
        }
    }
    (doc == *object).then(|| "a patch that changes nothing".to_owned())
}

/// One variant of a case: its body, and what was changed.
fn variant(rng: &mut fastrand::Rng, case: &Case) -> (Vec<u8>, String) {
    let mut review = case.review.clone();
    let mut changes = Vec::new();
    let mut duplicate = None;
    for _ in 0..rng.usize(1..=3) {
        let target = match rng.u8(0..10) {
            0 => "request",
            1 => "oldObject",
            _ => "object",
        };
        let root = match review.get_mut("request") {
            Some(r) if target == "request" => r,
            Some(r) => match r.get_mut(target) {
                Some(o) if !o.is_null() => o,
                _ => continue,
            },
            None => continue,
        };
        if target == "request" && rng.bool() {
            changes.push(odd_request(rng, root));
            continue;
        }
        // An object without its spec or metadata (custom resources reach mutating webhooks
        // before their schema does).
        if target != "request" && rng.u8(0..12) == 0 {
            let key = if rng.bool() { "spec" } else { "metadata" };
            if let Some(m) = root.as_object_mut() {
                m.remove(key);
            }
            changes.push(format!("{target} without {key}"));
            continue;
        }
        let paths = paths(root);
        // A regular expression field (Kthena's ModelRoute) gets a text from Go's grammar.
        let regexes: Vec<&Vec<Step>> = paths
            .iter()
            .filter(|p| matches!(p.last(), Some(Step::Key(k)) if k == "regex"))
            .collect();
        if let Some(path) = pick(rng, &regexes).filter(|_| rng.u8(0..3) > 0)
            && let Some(v) = get_mut(root, path)
        {
            *v = Value::String(regex_text(rng));
            changes.push(format!("regex from Go's grammar at {target}{}", show(path)));
            continue;
        }
        // A quantity (requests, limits, a size limit, a divisor) as a JSON number or in a
        // form that is not canonical: what Go's re-encoding rewrites.
        let quantities: Vec<&Vec<Step>> = paths.iter().filter(|p| is_quantity_path(p)).collect();
        if let Some(path) = pick(rng, &quantities).filter(|_| rng.u8(0..3) == 0)
            && let Some(v) = get_mut(root, path)
        {
            *v = pick(rng, &QUANTITY_FORMS)
                .and_then(|q| serde_json::from_str(q).ok())
                .unwrap_or(Value::Null);
            changes.push(format!("quantity form at {target}{}", show(path)));
            continue;
        }
        let Some(path) = pick(rng, &paths) else {
            continue;
        };
        let at = format!("{target}{}", show(path));
        if rng.u8(0..12) == 0 && duplicate.is_none() {
            duplicate = Some((target, path.clone()));
            changes.push(format!("duplicated key at {at}"));
            continue;
        }
        changes.push(format!("{} at {at}", mutate(rng, root, path)));
    }
    let body = match duplicate {
        Some((target, path)) => with_duplicate(rng, &review, target, &path),
        None => serde_json::to_vec(&review).unwrap_or_default(),
    };
    (body, changes.join(", "))
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Key(String),
    Index(usize),
}

fn show(path: &[Step]) -> String {
    path.iter()
        .map(|s| match s {
            Step::Key(k) => format!(".{k}"),
            Step::Index(i) => format!("[{i}]"),
        })
        .collect()
}

/// Every path below `v` (not `v` itself).
fn paths(v: &Value) -> Vec<Vec<Step>> {
    fn walk(v: &Value, prefix: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
        match v {
            Value::Object(m) => {
                for (k, child) in m {
                    prefix.push(Step::Key(k.clone()));
                    out.push(prefix.clone());
                    walk(child, prefix, out);
                    prefix.pop();
                }
            }
            Value::Array(a) => {
                for (i, child) in a.iter().enumerate() {
                    prefix.push(Step::Index(i));
                    out.push(prefix.clone());
                    walk(child, prefix, out);
                    prefix.pop();
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(v, &mut Vec::new(), &mut out);
    out
}

fn pick<'a, T>(rng: &mut fastrand::Rng, items: &'a [T]) -> Option<&'a T> {
    (!items.is_empty()).then(|| &items[rng.usize(..items.len())])
}

fn get_mut<'a>(v: &'a mut Value, path: &[Step]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |v, s| match s {
        Step::Key(k) => v.get_mut(k.as_str()),
        Step::Index(i) => v.get_mut(*i),
    })
}

const EDGE_NUMBERS: [&str; 14] = [
    "0",
    "-1",
    "1",
    "2147483647",
    "2147483648",
    "-2147483649",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551616",
    "1.5",
    "-0.0",
    "1e308",
    "1e-320",
    "4294967296",
];

const ODD_QUANTITIES: [&str; 24] = [
    "abc",
    "",
    "1e",
    "0x10",
    "500u",
    "100n",
    "+1",
    "1E3",
    " 1 ",
    "-100m",
    "8Ei",
    "1.5Gi",
    "-",
    ".",
    "1K",
    "9223372036854775807",
    "1e400",
    "0.1n",
    "-1",
    "1.",
    "16Ei",
    "m",
    "Ei",
    "10E",
];

/// Texts a Go duration field may receive: not durations (no unit, an unknown unit, none at
/// all), and durations at the edges.
const ODD_DURATIONS: [&str; 10] = [
    "1d",
    "x",
    "1",
    "-1s",
    "1.5.5s",
    "1h-1m",
    "9223372036854775807ns",
    "2562048h",
    "0",
    "1µs",
];

/// Quantities past Go's int64 arithmetic: BinarySI values capped at 2^63-1, and values whose
/// thousandths or units pass 2^63.
const HUGE_QUANTITIES: [&str; 6] = [
    "9Ei",
    "10Ei",
    "10000000000000000",
    "20000000000000000000",
    "9223372036854775808",
    "-9Ei",
];

const ODD_STRINGS: [&str; 8] = [
    "",
    " ",
    "\t",
    "\u{a0}x",
    "ünïcödé",
    "a\u{0}b",
    "x\ny",
    "\u{1F600}",
];

/// Changes the value at `path`; says how.
fn mutate(rng: &mut fastrand::Rng, root: &mut Value, path: &[Step]) -> String {
    let Some((last, parent_path)) = path.split_last() else {
        return "nothing".into();
    };
    if rng.u8(0..6) == 0 {
        // Remove it.
        if let Some(parent) = get_mut(root, parent_path) {
            match (parent, last) {
                (Value::Object(m), Step::Key(k)) => {
                    m.remove(k);
                }
                (Value::Array(a), Step::Index(i)) if *i < a.len() => {
                    a.remove(*i);
                }
                _ => {}
            }
        }
        return "removed".into();
    }
    let Some(v) = get_mut(root, path) else {
        return "nothing".into();
    };
    let (new, how): (Value, &str) = match rng.u8(0..7) {
        0 => (Value::Null, "null"),
        1 => (
            serde_json::from_str(pick(rng, &EDGE_NUMBERS).copied().unwrap_or("0"))
                .unwrap_or(Value::Null),
            "edge number",
        ),
        2 => (
            Value::String(pick(rng, &ODD_QUANTITIES).copied().unwrap_or("").to_owned()),
            "odd quantity",
        ),
        3 => match v {
            Value::String(s) => (
                Value::String(match rng.u8(0..4) {
                    0 => format!(" {s}"),
                    1 => format!("{s} "),
                    2 => format!("\t{s}\n"),
                    _ => format!("{s}\u{a0}"),
                }),
                "white space",
            ),
            _ => (
                Value::String(pick(rng, &ODD_STRINGS).copied().unwrap_or("").to_owned()),
                "odd string",
            ),
        },
        6 => match v {
            // What Go reads leniently where serde would not: a null item of a list.
            Value::Array(a) => {
                let mut a = a.clone();
                a.insert(rng.usize(..=a.len()), Value::Null);
                (Value::Array(a), "null item")
            }
            Value::String(_) if rng.bool() => (
                Value::String(pick(rng, &ODD_DURATIONS).copied().unwrap_or("").to_owned()),
                "odd duration",
            ),
            _ => (
                Value::String(
                    pick(rng, &HUGE_QUANTITIES)
                        .copied()
                        .unwrap_or("")
                        .to_owned(),
                ),
                "huge quantity",
            ),
        },
        4 => (
            match v {
                Value::String(s) => s.parse::<f64>().map_or(json_one(), |_| Value::Bool(true)),
                Value::Number(n) => Value::String(n.to_string()),
                Value::Object(_) => Value::Array(vec![]),
                Value::Array(_) => Value::Object(Map::new()),
                Value::Bool(b) => Value::String(b.to_string()),
                Value::Null => Value::Object(Map::new()),
            },
            "wrong type",
        ),
        _ => match v {
            Value::Array(a) if !a.is_empty() => {
                let item = a[rng.usize(..a.len())].clone();
                let mut a = a.clone();
                a.push(item);
                (Value::Array(a), "duplicated element")
            }
            Value::Object(m) => {
                let mut m = m.clone();
                m.insert("zz-unknown".into(), Value::String("x".into()));
                (Value::Object(m), "unknown field")
            }
            _ => (
                Value::String("x".repeat(rng.usize(64..4096))),
                "long string",
            ),
        },
    };
    *v = new;
    how.into()
}

/// Quantities as JSON texts: numbers, and strings Go's re-encoding writes otherwise.
const QUANTITY_FORMS: [&str; 10] = [
    "1",
    "0.5",
    "2048",
    "1e3",
    "\"1024Mi\"",
    "\"1000m\"",
    "\"0.5\"",
    "\"1e3\"",
    "\"2048Ki\"",
    "\"1.5Gi\"",
];

/// Whether a leaf holds a quantity: an entry of `limits` or `requests`, or a `sizeLimit`,
/// `divisor` or `storage` member.
fn is_quantity_path(path: &[Step]) -> bool {
    match path {
        [.., Step::Key(parent), Step::Key(_)] if parent == "limits" || parent == "requests" => true,
        [.., Step::Key(k)] => matches!(k.as_str(), "sizeLimit" | "divisor" | "storage"),
        _ => false,
    }
}

/// A pattern composed from Go's regular-expression grammar: literals, escapes of any ASCII
/// character, classes with every kind of item and range end, Unicode class names (some Go
/// does not know), counted and plain repeats (some doubled or out of range), flags and group
/// forms (some only other dialects have), nesting, and now and then a broken bracket.
fn regex_text(rng: &mut fastrand::Rng) -> String {
    const NAMES: [&str; 10] = [
        "L",
        "Lu",
        "Greek",
        "greek",
        "^Greek",
        "IsGreek",
        "Old_Italic",
        "Letter",
        "Any",
        "Nope",
    ];
    const GROUPS: [&str; 12] = [
        "(", "(?:", "(?i)", "(?i:", "(?P<g>", "(?<g>", "(?s-i:", "(?=", "(?P=g", "(?#", "(?'g'",
        "(?<=",
    ];
    const REPEATS: [&str; 14] = [
        "", "", "*", "+", "?", "*?", "{2}", "{2,}", "{1,1000}", "{1001}", "{3,2}", "{,4}", "**",
        "{2}*",
    ];
    fn piece(rng: &mut fastrand::Rng, depth: u8, out: &mut String) {
        match rng.u8(0..9) {
            0..=2 => out.push(rng.alphanumeric()),
            3 => {
                out.push('\\');
                out.push(char::from(rng.u8(0x21..0x7f)));
            }
            4 => {
                let name = pick(rng, &NAMES).copied().unwrap_or("L");
                out.push_str(if rng.bool() { "\\p{" } else { "\\P{" });
                out.push_str(name);
                out.push('}');
            }
            5 | 6 => {
                out.push_str(if rng.bool() { "[" } else { "[^" });
                for _ in 0..rng.u8(1..4) {
                    match rng.u8(0..6) {
                        0 => out.push_str("a-z"),
                        1 => out.push_str("\\w-"),
                        2 => out.push_str("[:alpha:]"),
                        3 => out.push_str("\\p{Greek}"),
                        4 => out.push_str("z-a"),
                        _ => out.push(char::from(rng.u8(0x21..0x7f))),
                    }
                }
                if rng.u8(0..8) > 0 {
                    out.push(']');
                }
            }
            _ if depth < 3 => {
                out.push_str(pick(rng, &GROUPS).copied().unwrap_or("("));
                for _ in 0..rng.u8(1..4) {
                    piece(rng, depth + 1, out);
                }
                if rng.u8(0..8) > 0 {
                    out.push(')');
                }
            }
            _ => out.push('.'),
        }
        out.push_str(pick(rng, &REPEATS).copied().unwrap_or(""));
        if rng.u8(0..10) == 0 {
            out.push('|');
        }
    }
    let mut out = String::new();
    for _ in 0..rng.u8(1..6) {
        piece(rng, 0, &mut out);
    }
    out
}

fn json_one() -> Value {
    Value::from(1)
}

/// An odd request-level change: operation, apiVersion, kind or uid. Earlier changes may have
/// left any JSON here, so only objects are written into.
fn odd_request(rng: &mut fastrand::Rng, request: &mut Value) -> String {
    let Some(r) = request.as_object_mut() else {
        return "nothing (request is not an object)".into();
    };
    let mut set = |k: &str, v: Value| {
        r.insert(k.to_owned(), v);
    };
    match rng.u8(0..6) {
        0 => {
            set("operation", Value::String("CONNECT".into()));
            "operation CONNECT".into()
        }
        1 => {
            set("operation", Value::String("DELETE".into()));
            "operation DELETE".into()
        }
        2 => {
            set("operation", Value::String("UPDATE".into()));
            if r.get("oldObject").is_none_or(Value::is_null) {
                let object = r.get("object").cloned().unwrap_or(Value::Null);
                r.insert("oldObject".into(), object);
            }
            "operation UPDATE".into()
        }
        3 => match r.get_mut("object").and_then(Value::as_object_mut) {
            Some(o) => {
                o.insert("apiVersion".into(), Value::String("wrong/v9".into()));
                o.insert("kind".into(), Value::String("Wrong".into()));
                "object apiVersion and kind wrong".into()
            }
            None => "nothing (object is not an object)".into(),
        },
        4 => {
            set("uid", Value::String("ü-\u{1F600}".into()));
            "odd uid".into()
        }
        _ => {
            set("dryRun", Value::Bool(true));
            "dry run".into()
        }
    }
}

/// The review as JSON text with the key at `path` (under `request.<target>`, or `request`)
/// written twice: first with another value, then the original (Go keeps the last).
fn with_duplicate(rng: &mut fastrand::Rng, review: &Value, target: &str, path: &[Step]) -> Vec<u8> {
    let mut full: Vec<Step> = vec![Step::Key("request".into())];
    if target != "request" {
        full.push(Step::Key(target.into()));
    }
    full.extend_from_slice(path);
    let decoy = Value::String(pick(rng, &ODD_QUANTITIES).copied().unwrap_or("").to_owned());
    let mut out = String::new();
    write_dup(review, &full, &decoy, &mut out);
    out.into_bytes()
}

fn write_dup(v: &Value, path: &[Step], decoy: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            out.push('{');
            for (n, (k, child)) in m.iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                let key = Value::String(k.clone()).to_string();
                let here = matches!(path.first(), Some(Step::Key(p)) if p == k);
                if here && path.len() == 1 {
                    out.push_str(&format!("{key}:{decoy},"));
                }
                out.push_str(&key);
                out.push(':');
                if here {
                    write_dup(child, &path[1..], decoy, out);
                } else {
                    out.push_str(&child.to_string());
                }
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, child) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if matches!(path.first(), Some(Step::Index(p)) if *p == i) {
                    write_dup(child, &path[1..], decoy, out);
                } else {
                    out.push_str(&child.to_string());
                }
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Aborts the process when one review runs for longer than `limit`: a hang would otherwise
/// stall the test command without saying which variant caused it.
struct Watchdog {
    progress: Arc<AtomicU64>,
    current: Arc<Mutex<String>>,
    done: Arc<std::sync::atomic::AtomicBool>,
}

impl Watchdog {
    fn start(limit: Duration) -> Self {
        let w = Self {
            progress: Arc::new(AtomicU64::new(0)),
            current: Arc::new(Mutex::new(String::new())),
            done: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        };
        let (progress, current, done) = (w.progress.clone(), w.current.clone(), w.done.clone());
        std::thread::spawn(move || {
            let mut seen = u64::MAX;
            loop {
                std::thread::sleep(limit);
                if done.load(Ordering::Relaxed) {
                    return;
                }
                let now = progress.load(Ordering::Relaxed);
                if now == seen {
                    let what = current.lock().map(|c| c.clone()).unwrap_or_default();
                    eprintln!("variant did not finish within {limit:?} (a hang): {what}");
                    std::process::abort();
                }
                seen = now;
            }
        });
        w
    }

    fn entered(&self, name: &str, body: &[u8]) {
        self.progress.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut c) = self.current.lock() {
            c.clear();
            c.push_str(name);
            c.push_str(": ");
            c.push_str(&String::from_utf8_lossy(body));
        }
    }
}

impl Drop for Watchdog {
    /// Stands the watchdog down however the run ends (an early error return included), so it
    /// never aborts a test binary that goes on with other tests.
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_patch_op_that_changes_nothing_is_caught() {
        use base64::Engine as _;
        let enc = |v: Value| base64::engine::general_purpose::STANDARD.encode(v.to_string());
        let object = json!({"a": {"b": 1}});
        let noop = json!([{"op": "replace", "path": "/a/b", "value": 1}]);
        assert!(patch_problem(&object, &enc(noop.clone()), false).is_some());
        assert!(patch_problem(&object, &enc(noop), true).is_some());
        let real = json!([{"op": "replace", "path": "/a/b", "value": 2}]);
        assert_eq!(patch_problem(&object, &enc(real), false), None);
        let empty_add = json!([{"op": "add", "path": "/a/c", "value": {"d": {}}}]);
        assert!(patch_problem(&object, &enc(empty_add.clone()), false).is_some());
        // A handler that writes Go's empty values on purpose.
        assert_eq!(patch_problem(&object, &enc(empty_add), true), None);
        let broken = json!([{"op": "remove", "path": "/x"}]);
        assert!(patch_problem(&object, &enc(broken), false).is_some());
    }

    #[test]
    fn a_duplicated_key_is_written_twice_decoy_first() {
        let mut rng = fastrand::Rng::with_seed(1);
        let review = json!({"request": {"object": {"spec": {"n": 1}}}});
        let path = [Step::Key("spec".into()), Step::Key("n".into())];
        let text = String::from_utf8(with_duplicate(&mut rng, &review, "object", &path)).unwrap();
        let first = text.find("\"n\":").unwrap();
        let last = text.rfind("\"n\":").unwrap();
        assert!(first < last, "{text}");
        assert!(text.ends_with("\"n\":1}}}}"), "{text}");
    }

    #[test]
    fn variants_are_reproducible_from_the_seed() {
        let case: Case = serde_json::from_value(json!({
            "name": "c", "path": "/p",
            "review": {"apiVersion": "admission.k8s.io/v1", "request": {"uid": "u", "operation": "CREATE", "object": {"spec": {"a": [1, 2], "b": "x"}}}},
            "expect": {"allowed": true}
        }))
        .unwrap();
        let run = |seed| {
            let mut rng = fastrand::Rng::with_seed(seed);
            (0..20)
                .map(|_| variant(&mut rng, &case))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }
}
