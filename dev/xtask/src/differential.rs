//! `cargo xtask differential`: every upstream's own handlers (`tools/upstream-oracle/*`, built
//! with Go) and ours on the same reviews — the given cases and the variant fuzzer's variants of
//! each — with every difference sorted into what a user can meet and what they cannot:
//!
//! - **agree**: the same decision, words and patch (as each oracle's `compare` judges);
//! - **cosmetic**: the same decision in other words (the oracle names the class: decoders'
//!   words, the order of a list upstream takes from a Go map);
//! - **deliberate**: a FIX row (the oracle names it);
//! - **unreachable**: a review no API server sends — duplicate JSON keys, an operation or
//!   resource the endpoint is not registered for, an envelope or object the API server's own
//!   decoding and schema refuse before any webhook (checked here against the CRDs the services
//!   print and the built-in types), a DELETE without its old object;
//! - **different**: anything else, each printed with the smallest review that shows it.
//!
//! The oracles' own `compare` modes decide agreement; this command only builds, feeds, sorts
//! and counts, so a difference is never hidden by a second judge.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use admission_kit::App;
use anyhow::{Context as _, Result, bail};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

/// What to run.
pub struct Options {
    /// Variants per case.
    pub per_case: usize,
    /// The variants' seed.
    pub seed: u64,
    /// Only these upstreams (all when empty).
    pub only: Vec<String>,
    /// A Koordinator checkout at the pin (its oracle is built inside it); without it the
    /// Koordinator row is skipped.
    pub koordinator_src: Option<PathBuf>,
    /// Where the case files are written (a fresh temporary folder when absent).
    pub work: Option<PathBuf>,
}

/// One upstream: its oracle, how it is built and compared, and the domains it judges.
struct Upstream {
    name: &'static str,
    oracle: &'static str,
    build: Build,
    /// `(domain, our binary)`: the cases (`cargo xtask variants` domains) and who answers.
    domains: &'static [(&'static str, &'static str)],
    /// Its `compare` is `compare.py ORACLE OURS CASES…` beside it, not `ORACLE compare OURS …`.
    python_compare: bool,
}

enum Build {
    /// `go build -o OUT .` in the oracle's folder.
    Go,
    /// `build.sh OUT` (Trainer: vendored, with an export file compiled in).
    Script,
    /// `build.sh CHECKOUT OUT` inside a Koordinator checkout.
    InCheckout,
}

const UPSTREAMS: [Upstream; 4] = [
    Upstream {
        name: "Kthena v1.0.0",
        oracle: "kthena-v1",
        build: Build::Go,
        domains: &[("kthena-v1", "registry-webhook")],
        python_compare: false,
    },
    Upstream {
        name: "Kubeflow Trainer v2.3.0",
        oracle: "trainer-v2.3.0",
        build: Build::Script,
        domains: &[("trainer-v2", "training-webhook")],
        python_compare: true,
    },
    Upstream {
        name: "Kubeflow Training Operator v1.9.4",
        oracle: "training-v1.9.4",
        build: Build::Go,
        domains: &[("training", "training-webhook")],
        python_compare: false,
    },
    Upstream {
        name: "Koordinator a7a1b76",
        oracle: "koordinator-a7a1b76",
        build: Build::InCheckout,
        domains: &[
            ("scheduling", "scheduling-webhook"),
            ("node-config", "node-config-webhook"),
        ],
        python_compare: false,
    },
];

/// The classes, in the order they are printed.
const CLASSES: [&str; 5] = [
    "agree",
    "cosmetic",
    "deliberate",
    "unreachable",
    "different",
];

/// One upstream's tally.
#[derive(Default)]
struct Tally {
    reviews: usize,
    by_class: BTreeMap<&'static str, usize>,
    /// Why each non-agreeing review is where it is, with a count.
    reasons: BTreeMap<(&'static str, String), usize>,
    /// For each kind of real difference, the smallest review showing it and its two answers.
    different: BTreeMap<String, (usize, PathBuf, String)>,
}

/// Runs the differential and prints the table; fails when a reachable difference remains.
pub fn run(o: &Options) -> Result<()> {
    let root = super::root();
    let work = match &o.work {
        Some(w) => w.clone(),
        None => std::env::temp_dir().join(format!("differential-{}", std::process::id())),
    };
    let mut rows = Vec::new();
    for up in UPSTREAMS.iter().filter(|u| {
        o.only.is_empty()
            || o.only
                .iter()
                .any(|x| u.oracle.contains(x.as_str()) || u.name.contains(x.as_str()))
    }) {
        if matches!(up.build, Build::InCheckout) && o.koordinator_src.is_none() {
            eprintln!("{}: skipped (no --koordinator-src)", up.name);
            continue;
        }
        let oracle = build_oracle(up, &root, o.koordinator_src.as_deref())?;
        let mut tally = Tally::default();
        for &(domain, binary) in up.domains {
            let ours = build_ours(binary)?;
            let dir = work.join(domain);
            let files = cases(&root, domain, &dir, o.per_case, o.seed)?;
            let app = app_of(binary);
            let output = compare(up, &root, &oracle, &ours, &files)?;
            tally_output(&output, &files, &app, &mut tally)?;
        }
        rows.push((up.name, tally));
    }
    print_table(&rows, o.per_case);
    let reachable: usize = rows
        .iter()
        .map(|(_, t)| t.by_class.get("different").copied().unwrap_or(0))
        .sum();
    if reachable > 0 {
        bail!("{reachable} reachable differences");
    }
    Ok(())
}

/// The oracle built from `tools/upstream-oracle/<dir>` (Koordinator's inside `checkout`).
pub(crate) fn oracle_named(dir: &str, root: &Path, checkout: Option<&Path>) -> Result<PathBuf> {
    let up = UPSTREAMS
        .iter()
        .find(|u| u.oracle == dir)
        .with_context(|| format!("no oracle {dir}"))?;
    build_oracle(up, root, checkout)
}

/// `None` when the oracle in `tools/upstream-oracle/<dir>` and our `binary` answer the case
/// file `case` alike; the oracle's account of the difference otherwise.
pub(crate) fn differs_on(
    dir: &str,
    root: &Path,
    checkout: Option<&Path>,
    binary: &str,
    case: &Path,
) -> Result<Option<String>> {
    let up = UPSTREAMS
        .iter()
        .find(|u| u.oracle == dir)
        .with_context(|| format!("no oracle {dir}"))?;
    let oracle = build_oracle(up, root, checkout)?;
    let out = compare(
        up,
        root,
        &oracle,
        &build_ours(binary)?,
        &[case.to_path_buf()],
    )?;
    Ok(out.contains("DIFF ").then_some(out))
}

/// Builds `up`'s oracle with Go (once: the build is cached by a hash of its sources), with the
/// shared `serve.go.txt` (the oracles' `serve` mode) laid into its package.
fn build_oracle(up: &Upstream, root: &Path, checkout: Option<&Path>) -> Result<PathBuf> {
    let oracles = root.join("tools/upstream-oracle");
    let dir = oracles.join(up.oracle);
    let serve = oracles.join("serve.go.txt");
    let hash = tree_hash(&dir)? ^ tree_hash_of(std::slice::from_ref(&serve))?.rotate_left(1);
    let out = testenv::tools::cache_dir()
        .join("oracles")
        .join(format!("{}-{hash:016x}", up.oracle));
    if out.is_file() {
        return Ok(out);
    }
    std::fs::create_dir_all(out.parent().unwrap_or(Path::new(".")))?;
    eprintln!("building {}'s oracle with Go (cached once built)", up.name);
    let status = match up.build {
        Build::Go => {
            let overlay = std::env::temp_dir().join(format!("oracle-overlay-{}.json", up.oracle));
            let map = serde_json::json!({"Replace": {
                dir.join("zz_serve.go").display().to_string(): serve.display().to_string(),
            }});
            std::fs::write(&overlay, map.to_string())?;
            super::plain("go")
                .arg("build")
                .arg(format!("-overlay={}", overlay.display()))
                .arg("-o")
                .arg(&out)
                .arg(".")
                .current_dir(&dir)
                .status()
        }
        Build::Script => super::plain("sh")
            .arg(dir.join("build.sh"))
            .arg(&out)
            .current_dir(&dir)
            .status(),
        Build::InCheckout => super::plain("sh")
            .arg(dir.join("build.sh"))
            .arg(checkout.context("a Koordinator checkout")?)
            .arg(&out)
            .status(),
    }
    .with_context(|| format!("building {}", dir.display()))?;
    if !status.success() {
        bail!("building {}'s oracle failed", up.name);
    }
    Ok(out)
}

/// A hash of a folder's files (names and contents), so an oracle changed here is rebuilt.
/// FNV-1a: stable across runs and Rust versions, unlike `DefaultHasher`.
fn tree_hash(dir: &Path) -> Result<u64> {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    tree_hash_of(&files)
}

/// [`tree_hash`] of the given files.
fn tree_hash_of(files: &[PathBuf]) -> Result<u64> {
    let mut files = files.to_vec();
    files.sort();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for f in files {
        let name = f.file_name().map(|n| n.to_string_lossy().into_owned());
        for b in name.unwrap_or_default().bytes().chain(std::fs::read(&f)?) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    Ok(h)
}

fn build_ours(binary: &str) -> Result<PathBuf> {
    let ok = super::cargo()
        .args(["build", "-q", "-p", binary])
        .status()
        .context("cargo build")?
        .success();
    if !ok {
        bail!("cargo build -p {binary} failed");
    }
    Ok(super::root().join("target/debug").join(binary))
}

/// The given cases of `domain` and `per_case` variants of each, as case files in `dir`.
fn cases(
    root: &Path,
    domain: &str,
    dir: &Path,
    per_case: usize,
    seed: u64,
) -> Result<Vec<PathBuf>> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    let base = match domain {
        "kthena-v1" => root.join("services/registry-webhook/fixtures"),
        "trainer-v2" => root.join("services/training-webhook/fixtures"),
        _ => super::fixtures(),
    };
    let given = admission_testing::fixtures::case_files(&base, domain);
    let mut files = Vec::new();
    for (i, f) in given.iter().enumerate() {
        let to = dir.join(format!("given-{i:03}.json"));
        std::fs::copy(f, &to).with_context(|| f.display().to_string())?;
        files.push(to);
    }
    let variants = dir.join("variants");
    admission_testing::variants::write_for_comparison(&base, domain, &variants, per_case, seed)?;
    let mut written: Vec<PathBuf> = std::fs::read_dir(&variants)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    written.sort();
    files.extend(written);
    Ok(files)
}

fn app_of(binary: &str) -> App {
    match binary {
        "registry-webhook" => registry_webhook::app(),
        "training-webhook" => training_webhook::app(),
        "scheduling-webhook" => scheduling_webhook::app(),
        _ => node_config_webhook::app(),
    }
}

fn compare(
    up: &Upstream,
    root: &Path,
    oracle: &Path,
    ours: &Path,
    files: &[PathBuf],
) -> Result<String> {
    let mut cmd = if up.python_compare {
        let mut c = Command::new("python3");
        c.arg(
            root.join("tools/upstream-oracle")
                .join(up.oracle)
                .join("compare.py"),
        )
        .arg(oracle);
        c
    } else {
        let mut c = Command::new(oracle);
        c.arg("compare");
        c
    };
    let out = cmd
        .arg(ours)
        .args(files)
        .stderr(std::process::Stdio::null())
        .output()
        .with_context(|| format!("{}'s compare", up.name))?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Reads an oracle's `compare` output: `DIFF <file> …` blocks, its own accepted classes
/// (`N: <class>`), and its summary line.
fn tally_output(out: &str, files: &[PathBuf], app: &App, t: &mut Tally) -> Result<()> {
    t.reviews += files.len();
    let mut diffs = 0;
    let mut lines = out.lines().peekable();
    while let Some(line) = lines.next() {
        if let Some(rest) = line.strip_prefix("DIFF ") {
            diffs += 1;
            let file = PathBuf::from(rest.split(' ').next().unwrap_or(rest));
            let mut answers = String::new();
            while let Some(next) = lines.peek().filter(|l| l.starts_with("  ")) {
                answers.push_str(next.trim());
                answers.push('\n');
                lines.next();
            }
            let (class, why) = match (unreachable(&file, app), deliberate(&file, &answers)) {
                (Some(why), _) => ("unreachable", why),
                (None, Some(fix)) => ("deliberate", fix.to_owned()),
                (None, None) if decode_words(&answers) => (
                    "cosmetic",
                    "the same decode refusal in the decoders' own words".to_owned(),
                ),
                (None, None) => ("different", signature(&answers)),
            };
            *t.by_class.entry(class).or_default() += 1;
            *t.reasons.entry((class, why.clone())).or_default() += 1;
            if class == "different" {
                let size = std::fs::metadata(&file)
                    .map(|m| m.len() as usize)
                    .unwrap_or(0);
                let slot =
                    t.different
                        .entry(why)
                        .or_insert((usize::MAX, PathBuf::new(), String::new()));
                if size < slot.0 {
                    *slot = (size, file, answers);
                }
            }
        } else {
            let found = accepted_class(line)
                .into_iter()
                .chain(summary_classes(line))
                .filter(|(n, _)| *n > 0);
            for (n, class) in found {
                let c = classify_accepted(&class);
                *t.by_class.entry(c).or_default() += n;
                *t.reasons.entry((c, class)).or_default() += n;
                diffs += n;
            }
        }
    }
    *t.by_class.entry("agree").or_default() += files.len().saturating_sub(diffs);
    Ok(())
}

/// An oracle's `N: <class>` lines.
fn accepted_class(line: &str) -> Option<(usize, String)> {
    if let Some((n, class)) = line.split_once(": ")
        && let Ok(n) = n.trim().parse::<usize>()
        && !class.contains(" same")
    {
        return Some((n, class.trim().to_owned()));
    }
    None
}

/// The classes an oracle's summary line counts besides `same` and `differ`
/// (`4880 cases: 1854 same, 2229 both refuse to decode (Q-9), 18 upstream panics … (F-1), 0 differ`).
fn summary_classes(line: &str) -> Vec<(usize, String)> {
    let Some((_, counts)) = line.split_once(" cases: ") else {
        return Vec::new();
    };
    counts
        .split(", ")
        .filter_map(|part| {
            let (n, what) = part.split_once(' ')?;
            let n = n.parse().ok()?;
            (what != "same" && what != "differ").then(|| (n, what.to_owned()))
        })
        .collect()
}

/// Both sides refuse with 400 and upstream's words are its decoder's: the same decision in
/// other words (each spec's decode row: Go's decoder and ours word a type error differently).
fn decode_words(answers: &str) -> bool {
    let up = answers
        .lines()
        .find(|l| l.starts_with("upstream:"))
        .unwrap_or("");
    let ours = answers
        .lines()
        .find(|l| l.starts_with("ours:"))
        .unwrap_or("");
    let refused_400 = |l: &str| {
        (l.contains("\"allowed\":false") && l.contains("\"code\":400"))
            || (l.contains("Allowed:false") && l.contains("Status:400"))
    };
    let decoder = [
        "cannot unmarshal",
        "json parse error",
        "is registered for version",
        "invalid character",
        "unexpected end of JSON",
    ];
    refused_400(up) && refused_400(ours) && decoder.iter().any(|d| up.contains(d))
}

fn classify_accepted(class: &str) -> &'static str {
    if class.contains("(F-")
        || class.contains("F-1")
        || class.contains("FIX")
        || class.contains("panics")
    {
        "deliberate"
    } else if class.contains("(Q-10)") || class.contains("never sends") {
        "unreachable"
    } else {
        "cosmetic"
    }
}

/// What a difference is, in short: each side's status or decision.
fn signature(answers: &str) -> String {
    let pick = |side: &str| {
        answers
            .lines()
            .find(|l| l.starts_with(side))
            .map(|l| {
                let l = &l[side.len()..];
                let allowed = if l.contains("Allowed:true") || l.contains("\"allowed\": true") {
                    "admitted"
                } else {
                    "refused"
                };
                let status = ["Status:400", "Status:500", "\"http\": 400", "\"http\": 500"]
                    .iter()
                    .find(|s| l.contains(*s))
                    .map_or("", |s| {
                        s.trim_start_matches("Status:")
                            .trim_start_matches("\"http\": ")
                    });
                format!(
                    "{allowed}{}",
                    if status.is_empty() {
                        String::new()
                    } else {
                        format!(" ({status})")
                    }
                )
            })
            .unwrap_or_default()
    };
    format!("upstream {} / ours {}", pick("upstream:"), pick("ours:"))
}

/// The FIX row a difference the oracle does not name comes from, if one does: each recognised
/// from the review and both answers, so only what the row describes is counted under it.
fn deliberate(file: &Path, answers: &str) -> Option<&'static str> {
    let case: Value = serde_json::from_str(&std::fs::read_to_string(file).ok()?).ok()?;
    let path = case["path"].as_str()?;
    let object = &case["review"]["request"]["object"];
    let both_admit = answers.matches("Allowed:true").count() == 2;
    // Kthena F-3: a defaulting patch for an object without `spec` (the CRDs do not require one).
    if matches!(path, "/mutate/autoscalingpolicy" | "/mutate/modelbooster")
        && object.is_object()
        && object.get("spec").is_none()
        && both_admit
    {
        return Some(
            "F-3 (Kthena): an object without spec is defaulted whole; upstream's patch adds under a spec the object lacks, which the API server cannot apply",
        );
    }
    // Training Operator FIX-2: a `null` replica spec, on which upstream panics.
    let null_replica_spec = object["spec"].as_object().is_some_and(|spec| {
        spec.iter().any(|(k, v)| {
            k.ends_with("ReplicaSpecs")
                && v.as_object()
                    .is_some_and(|m| m.values().any(Value::is_null))
        })
    });
    if path.starts_with("/validate-kubeflow-org-v1-")
        && null_replica_spec
        && answers.contains("panic:")
    {
        return Some(
            "FIX-2 (Training Operator): a null replica spec is judged as {}; upstream panics (500)",
        );
    }
    // Training Operator FIX-3: upstream walks the replica specs and managedBy's supported
    // values in Go's random map order, ours in sorted order; the same answer once the errors
    // and those values are put in one order.
    if path.starts_with("/validate-kubeflow-org-v1-")
        && let [Some(up), Some(ours)] = ["upstream:", "ours:"].map(|side| answer_of(answers, side))
        && up != ours
    {
        if in_one_order(&up) == in_one_order(&ours) {
            return Some(
                "FIX-3 (Training Operator): errors of several replica types and managedBy's supported values in sorted order; upstream's follow Go's random map order",
            );
        }
        // FIX-1: a PyTorchJob's changed managedBy is refused by ours; upstream's update handler
        // never sees the old object. The same answer once that error is taken from ours.
        if path == "/validate-kubeflow-org-v1-pytorchjob"
            && case["review"]["request"]["operation"] == "UPDATE"
            && let Some(without) = without_managed_by_immutable(&ours)
            && match without {
                Some(refused) => in_one_order(&up) == in_one_order(&refused),
                None => serde_json::from_str::<Value>(&up).is_ok_and(|u| u["allowed"] == true),
            }
        {
            return Some(
                "FIX-1 (Training Operator): a PyTorchJob's changed managedBy is refused; upstream's update handler compares the new object with itself",
            );
        }
        // V-1: v1.9.4's apimachinery prints a removed managedBy as `null`; the pin's (and ours)
        // as `"null"`.
        let pinned = up.replace(
            r#"Invalid value: null: field is immutable"#,
            r#"Invalid value: \"null\": field is immutable"#,
        );
        if pinned != up && in_one_order(&pinned) == in_one_order(&ours) {
            return Some(
                "V-1 (Training Operator v1.9.4): a removed managedBy printed as the pin v1.9.0 prints it (\"null\"); v1.9.4 prints null",
            );
        }
    }
    None
}

/// One side's answer in an oracle's `DIFF` block (`upstream: {…}` / `ours: {…}`).
fn answer_of(answers: &str, side: &str) -> Option<String> {
    answers
        .lines()
        .find_map(|l| l.strip_prefix(side))
        .map(|a| a.trim().to_owned())
}

/// An answer (JSON) with each run of errors about replica specs in replica-type order (each
/// type's errors keeping theirs) and every list of supported values sorted: the order ours
/// gives and upstream's random map order may; `None` when it is not an answer.
fn in_one_order(answer: &str) -> Option<Value> {
    let mut v: Value = serde_json::from_str(answer).ok()?;
    if let Some(message) = v.get("message").and_then(Value::as_str) {
        let message = sorted_supported_values(message);
        let mut errors = message_errors(&message);
        let replica = |e: &&str| {
            let (path, _) = e.split_once(": ")?;
            let (_, key) = path.split_once("ReplicaSpecs[")?;
            key.split_once(']').map(|(k, _)| k.to_owned())
        };
        for run in errors.chunk_by_mut(|a, b| replica(a).is_some() && replica(b).is_some()) {
            run.sort_by_key(replica);
        }
        v["message"] = Value::from(errors.join(", "));
    }
    Some(v)
}

/// Our answer (JSON) without TR-03's managedBy immutability error, as upstream would answer
/// without it: `Some(None)` when that was the only error (upstream admits), the one error left
/// unbracketed; `None` when the answer has no such error.
fn without_managed_by_immutable(answer: &str) -> Option<Option<String>> {
    let mut v: Value = serde_json::from_str(answer).ok()?;
    let message = v.get("message").and_then(Value::as_str)?.to_owned();
    let errors = message_errors(&message);
    let immutable = |e: &&str| {
        e.starts_with("spec.runPolicy.managedBy: ") && e.ends_with(": field is immutable")
    };
    let kept: Vec<&str> = errors.iter().copied().filter(|e| !immutable(e)).collect();
    if kept.len() == errors.len() {
        return None;
    }
    let message = match kept[..] {
        [] => return Some(None),
        [one] => one.to_owned(),
        _ => format!("[{}]", kept.join(", ")),
    };
    v["message"] = Value::from(message);
    Some(Some(v.to_string()))
}

/// The errors of a Kubernetes aggregate message (`[e1, e2]`, or one error alone): an error
/// starts at the beginning or after `, ` with a field path (`spec.x[Worker].y`) and `: `.
fn message_errors(message: &str) -> Vec<&str> {
    let body = message
        .strip_prefix('[')
        .and_then(|m| m.strip_suffix(']'))
        .unwrap_or(message);
    let starts_error = |rest: &str| {
        let Some((path, _)) = rest.split_once(": ") else {
            return false;
        };
        path.starts_with(|c: char| c.is_ascii_lowercase())
            && path.contains('.')
            && path
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '[' | ']' | '-' | '_'))
    };
    let mut errors = Vec::new();
    let mut start = 0;
    let mut from = 0;
    while let Some(k) = body[from..].find(", ") {
        let at = from + k;
        if starts_error(&body[at + 2..]) {
            errors.push(&body[start..at]);
            start = at + 2;
        }
        from = at + 2;
    }
    errors.push(&body[start..]);
    errors
}

/// `answer` with every `supported values: "a", "b"` list in sorted order.
fn sorted_supported_values(answer: &str) -> String {
    const LEAD: &str = r#"supported values: ""#;
    let mut out = String::with_capacity(answer.len());
    let mut rest = answer;
    while let Some(at) = rest.find(LEAD) {
        let start = at + LEAD.len() - 1;
        out.push_str(&rest[..start]);
        rest = &rest[start..];
        // The list: `"x"` items joined by `, `.
        let mut items = Vec::new();
        while let Some(body) = rest.strip_prefix('"')
            && let Some(end) = body.find('"')
        {
            items.push(&body[..end]);
            rest = &body[end + 1..];
            match rest.strip_prefix(", ") {
                Some(next) if next.starts_with('"') => rest = next,
                _ => break,
            }
        }
        items.sort_unstable();
        let list: Vec<String> = items.iter().map(|i| format!(r#""{i}""#)).collect();
        out.push_str(&list.join(", "));
    }
    out.push_str(rest);
    out
}

/// Why no API server would send this review, if none would.
fn unreachable(file: &Path, app: &App) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    if has_duplicate_keys(&text) {
        return Some("duplicate JSON keys".into());
    }
    let case: Value = serde_json::from_str(&text).ok()?;
    let path = case["path"].as_str()?;
    let review = &case["review"];
    let request = &review["request"];
    let endpoint = app.endpoint(path)?;
    let target = &endpoint.target;
    if let Some(key) = ["uid", "operation", "kind", "resource", "userInfo"]
        .into_iter()
        .find(|k| request[*k].is_null())
    {
        return Some(format!("request.{key} missing"));
    }
    if let Some(f) = type_fault(&envelope_schema(), review, "") {
        return Some(format!("an envelope the API server never writes ({f})"));
    }
    let op = request["operation"].as_str().unwrap_or_default();
    if !target.operations.iter().any(|o| o.as_str() == op) {
        return Some(format!(
            "{op}: an operation the endpoint is not registered for"
        ));
    }
    let res = &request["resource"];
    if res["group"].as_str() != Some(&target.group)
        || res["version"].as_str() != Some(&target.version)
        || res["resource"].as_str() != target.resource.split('/').next()
    {
        return Some("a resource the endpoint is not registered for".into());
    }
    if op == "DELETE" && request["oldObject"].is_null() {
        return Some("a DELETE without its old object".into());
    }
    let crds = app.custom_resource_definitions();
    let crd = crds
        .iter()
        .find(|c| c.spec.group == target.group && c.spec.names.kind == target.kind);
    for which in ["object", "oldObject"] {
        let obj = &request[which];
        if obj.is_null() {
            continue;
        }
        for key in ["apiVersion", "kind"] {
            if !obj[key].is_string() && !obj[key].is_null() {
                return Some(format!("{which}.{key} not a string"));
            }
        }
        let group_version = if target.group.is_empty() {
            target.version.clone()
        } else {
            format!("{}/{}", target.group, target.version)
        };
        if obj["apiVersion"]
            .as_str()
            .is_some_and(|v| v != group_version)
            || obj["kind"].as_str().is_some_and(|k| k != target.kind)
        {
            return Some(format!("{which} of another kind than the endpoint's"));
        }
        if !obj["metadata"].is_null()
            && let Err(e) = serde_json::from_value::<
                k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
            >(obj["metadata"].clone())
        {
            return Some(format!("{which}.metadata refused by the API server ({e})"));
        }
        let fault = match crd {
            Some(c) => schema_fault(c, obj),
            None => builtin_fault(&target.kind, obj),
        };
        if let Some(f) = fault {
            return Some(format!("{which} refused by the API server's schema ({f})"));
        }
    }
    None
}

/// The types of an `admission.k8s.io/v1` AdmissionReview as the API server writes one (a
/// member it leaves out may be absent; one it writes is of this type).
fn envelope_schema() -> Value {
    let string = serde_json::json!({"type": "string"});
    let optional = |t: &str| serde_json::json!({"type": t, "nullable": true});
    let gvk = |last: &str| {
        serde_json::json!({"type": "object", "nullable": true, "properties": {
            "group": string, "version": string, last: string}})
    };
    serde_json::json!({"type": "object", "properties": {
        "apiVersion": string, "kind": string,
        "request": {"type": "object", "properties": {
            "uid": string, "operation": string,
            "kind": gvk("kind"), "resource": gvk("resource"), "requestKind": gvk("kind"),
            "requestResource": gvk("resource"),
            "subResource": optional("string"), "requestSubResource": optional("string"),
            "name": optional("string"), "namespace": optional("string"),
            "dryRun": optional("boolean"), "options": optional("object"),
            "object": optional("object"), "oldObject": optional("object"),
            "userInfo": {"type": "object", "properties": {
                "username": optional("string"), "uid": optional("string"),
                "groups": {"type": "array", "nullable": true, "items": string},
                "extra": {"type": "object", "nullable": true,
                    "additionalProperties": {"type": "array", "items": string}}}}}}}})
}

/// Where `obj` breaks the types of the CRD's schema (what the API server refuses before any
/// webhook: a value of another type, a `null` where the schema does not allow one).
fn schema_fault(crd: &CustomResourceDefinition, obj: &Value) -> Option<String> {
    let schema = serde_json::to_value(&crd.spec.versions.first()?.schema).ok()?;
    type_fault(&schema["openAPIV3Schema"], obj, "")
}

fn type_fault(s: &Value, v: &Value, at: &str) -> Option<String> {
    if s["x-kubernetes-preserve-unknown-fields"] == true && s.get("properties").is_none() {
        return None;
    }
    let int_or_string = s["x-kubernetes-int-or-string"] == true;
    let ok = match (s["type"].as_str(), v) {
        (_, Value::Null) => s["nullable"] == true,
        (_, Value::String(_) | Value::Number(_)) if int_or_string => true,
        (Some("object"), Value::Object(_)) | (Some("array"), Value::Array(_)) => true,
        (Some("string"), Value::String(_)) | (Some("boolean"), Value::Bool(_)) => true,
        (Some("integer"), Value::Number(n)) => n.is_i64() || n.is_u64(),
        (Some("number"), Value::Number(_)) => true,
        (None, _) => true,
        _ => false,
    };
    if !ok {
        return Some(format!(
            "{at}: {} where the schema has {}",
            admission_kit::compat::go::go_json_kind(v),
            s["type"]
        ));
    }
    match v {
        Value::Object(m) => m.iter().find_map(|(k, x)| {
            let sub = s["properties"]
                .get(k)
                .or_else(|| s.get("additionalProperties").filter(|a| a.is_object()))?;
            type_fault(sub, x, &format!("{at}.{k}"))
        }),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, x)| type_fault(s.get("items")?, x, &format!("{at}[{i}]"))),
        _ => None,
    }
}

/// Where a built-in object does not decode as its Kubernetes type, or holds what the API
/// server's re-encoding never writes (it decodes built-in objects and encodes them again before
/// any webhook: a quantity always arrives as text).
fn builtin_fault(kind: &str, obj: &Value) -> Option<String> {
    use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
    fn number_quantity(v: &Value) -> bool {
        match v {
            Value::Object(m) => m.iter().any(|(k, x)| {
                let amounts = matches!(
                    k.as_str(),
                    "requests" | "limits" | "overhead" | "capacity" | "allocatable"
                );
                (amounts
                    && x.as_object()
                        .is_some_and(|q| q.values().any(Value::is_number)))
                    || number_quantity(x)
            }),
            Value::Array(a) => a.iter().any(number_quantity),
            _ => false,
        }
    }
    if number_quantity(obj) {
        return Some("a quantity as a JSON number, which the API server re-encodes as text".into());
    }
    let decoded = match kind {
        "Pod" => serde_json::from_value::<Pod>(obj.clone()).map(drop),
        "Node" => serde_json::from_value::<Node>(obj.clone()).map(drop),
        "ConfigMap" => serde_json::from_value::<ConfigMap>(obj.clone()).map(drop),
        _ => Ok(()),
    };
    decoded.err().map(|e| e.to_string())
}

/// Whether any JSON object in `text` names a member twice (the API server's decoder refuses
/// such bodies; `serde_json::Value` silently keeps the last).
fn has_duplicate_keys(text: &str) -> bool {
    use serde::de::{Deserializer as _, MapAccess, SeqAccess, Visitor};
    struct Check;
    impl<'de> Visitor<'de> for Check {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("JSON")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
            let mut seen = std::collections::HashSet::new();
            while let Some(k) = m.next_key::<String>()? {
                if !seen.insert(k) {
                    return Err(serde::de::Error::custom("duplicate"));
                }
                m.next_value_seed(Seed)?;
            }
            Ok(())
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<(), A::Error> {
            while s.next_element_seed(Seed)?.is_some() {}
            Ok(())
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
    }
    struct Seed;
    impl<'de> serde::de::DeserializeSeed<'de> for Seed {
        type Value = ();
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(Check)
        }
    }
    let mut de = serde_json::Deserializer::from_str(text);
    de.deserialize_any(Check).is_err()
}

fn print_table(rows: &[(&str, Tally)], per_case: usize) {
    println!("\n## Differential ({per_case} variants per case)\n");
    println!("| upstream | reviews | {} |", CLASSES.join(" | "));
    println!("|---|---|{}", "---|".repeat(CLASSES.len()));
    for (name, t) in rows {
        let counts: Vec<String> = CLASSES
            .iter()
            .map(|c| t.by_class.get(c).copied().unwrap_or(0).to_string())
            .collect();
        println!("| {name} | {} | {} |", t.reviews, counts.join(" | "));
    }
    for (name, t) in rows {
        if t.reasons.is_empty() {
            continue;
        }
        println!("\n### {name}\n");
        for ((class, why), n) in &t.reasons {
            println!("- {class}, {n}: {why}");
        }
        for (why, (_, file, answers)) in &t.different {
            println!(
                "\nA smallest review that differs ({why}): {}",
                file.display()
            );
            if let Ok(text) = std::fs::read_to_string(file) {
                println!("```json\n{}\n```", text.trim());
            }
            println!("```\n{}```", go_bytes_as_text(answers));
        }
    }
}

/// The oracles print Go byte slices (`Patch:[[123 34 …]]`) as numbers: shown as their text.
fn go_bytes_as_text(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("[[") {
        out.push_str(&rest[..i]);
        let body = &rest[i + 2..];
        let Some(end) = body.find("]]") else {
            out.push_str(&rest[i..]);
            return out;
        };
        let bytes: Option<Vec<u8>> = body[..end].split(' ').map(|n| n.parse().ok()).collect();
        match bytes.and_then(|b| String::from_utf8(b).ok()) {
            Some(text) => out.push_str(&text),
            None => out.push_str(&rest[i..i + 2 + end + 2]),
        }
        rest = &body[end + 2..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_compare_in_one_order() {
        let up = r#"{"allowed":false,"message":"[metadata.name: Invalid value: \"x\": a, b, spec.runPolicy.managedBy: Unsupported value: \"o\": supported values: \"kueue.x-k8s.io/multikueue\", \"kubeflow.org/training-operator\", spec.xgbReplicaSpecs[Worker].template: Required value, spec.xgbReplicaSpecs[Master].template: Required value]"}"#;
        let ours = r#"{"allowed":false,"message":"[metadata.name: Invalid value: \"x\": a, b, spec.runPolicy.managedBy: Unsupported value: \"o\": supported values: \"kubeflow.org/training-operator\", \"kueue.x-k8s.io/multikueue\", spec.xgbReplicaSpecs[Master].template: Required value, spec.xgbReplicaSpecs[Worker].template: Required value]"}"#;
        assert_ne!(up, ours);
        assert_eq!(in_one_order(up), in_one_order(ours));
        // Another value, another error, or a comma moved inside an error still differ.
        for other in [
            ours.replace("kueue", "queue"),
            ours.replace(
                "[Master].template: Required value",
                "[Master].template: Other",
            ),
            ours.replace("a, b", "b, a"),
            // Errors out of their place outside the replica specs.
            ours.replace(
                r#"metadata.name: Invalid value: \"x\": a, b, spec.runPolicy.managedBy: Unsupported value: \"o\": supported values: \"kubeflow.org/training-operator\", \"kueue.x-k8s.io/multikueue\""#,
                r#"spec.runPolicy.managedBy: Unsupported value: \"o\": supported values: \"kubeflow.org/training-operator\", \"kueue.x-k8s.io/multikueue\", metadata.name: Invalid value: \"x\": a, b"#,
            ),
        ] {
            assert_ne!(in_one_order(up), in_one_order(&other), "{other}");
        }
        assert_eq!(
            message_errors("[metadata.name: x, y, spec.a: z]"),
            ["metadata.name: x, y", "spec.a: z"]
        );
        let null_up = r#"{"allowed":false,"message":"[spec.runPolicy.managedBy: Invalid value: null: field is immutable, spec.tfReplicaSpecs: Required value: must be required]"}"#;
        let null_ours = r#"{"allowed":false,"message":"[spec.runPolicy.managedBy: Invalid value: \"null\": field is immutable, spec.tfReplicaSpecs: Required value: must be required]"}"#;
        let case = std::env::temp_dir().join(format!("v1-case-{}.json", std::process::id()));
        std::fs::write(
            &case,
            r#"{"path": "/validate-kubeflow-org-v1-tfjob", "review": {"request": {"object": {}}}}"#,
        )
        .unwrap_or_default();
        let diff = format!("upstream: {null_up}\nours:     {null_ours}\n");
        assert!(deliberate(&case, &diff).is_some_and(|d| d.starts_with("V-1")));
        let other = format!(
            "upstream: {null_up}\nours:     {}\n",
            null_ours.replace("tfReplicaSpecs: Required", "tfReplicaSpecs: Other")
        );
        assert_eq!(deliberate(&case, &other), None);
        // FIX-1: ours adds managedBy's immutability on a PyTorchJob update.
        std::fs::write(
            &case,
            r#"{"path": "/validate-kubeflow-org-v1-pytorchjob", "review": {"request": {"operation": "UPDATE", "object": {}}}}"#,
        )
        .unwrap_or_default();
        let fix1_up = r#"{"http":200,"allowed":false,"code":403,"message":"metadata.name: Invalid value: \"\": bad, worse"}"#;
        let fix1_ours = r#"{"http":200,"allowed":false,"code":403,"message":"[metadata.name: Invalid value: \"\": bad, worse, spec.runPolicy.managedBy: Invalid value: \"a\": field is immutable]"}"#;
        let diff = format!("upstream: {fix1_up}\nours:     {fix1_ours}\n");
        assert!(deliberate(&case, &diff).is_some_and(|d| d.starts_with("FIX-1")));
        let alone_up = r#"{"http":200,"allowed":true,"code":200}"#;
        let alone_ours = r#"{"http":200,"allowed":false,"code":403,"message":"spec.runPolicy.managedBy: Invalid value: \"a\": field is immutable"}"#;
        let diff = format!("upstream: {alone_up}\nours:     {alone_ours}\n");
        assert!(deliberate(&case, &diff).is_some_and(|d| d.starts_with("FIX-1")));
        let other = format!(
            "upstream: {fix1_up}\nours:     {}\n",
            fix1_ours.replace("bad, worse", "bad")
        );
        assert_eq!(deliberate(&case, &other), None);
        let _ = std::fs::remove_file(&case);
        let answers = format!("upstream: {up}\nours:     {ours}\n");
        assert_eq!(answer_of(&answers, "ours:").as_deref(), Some(ours));
    }

    #[test]
    fn summary_lines_give_their_classes() {
        assert_eq!(
            summary_classes(
                "4880 cases: 1854 same, 2229 both refuse to decode (Q-9), 18 upstream panics (F-1), 0 differ"
            ),
            [
                (2229, "both refuse to decode (Q-9)".to_owned()),
                (18, "upstream panics (F-1)".to_owned())
            ]
        );
        assert!(summary_classes("88 cases, 0 differences").is_empty());
    }

    #[test]
    fn go_byte_slices_are_shown_as_text() {
        assert_eq!(go_bytes_as_text("Patch:[[91 93]] x"), "Patch:[] x");
        assert_eq!(go_bytes_as_text("Patch:[]"), "Patch:[]");
    }

    #[test]
    fn duplicate_keys_are_found_at_any_depth() {
        assert!(has_duplicate_keys(r#"{"a": 1, "a": 2}"#));
        assert!(has_duplicate_keys(
            r#"{"a": [{"b": 1, "c": {"d": 1, "d": 1}}]}"#
        ));
        assert!(!has_duplicate_keys(
            r#"{"a": [{"a": 1}, {"a": 2}], "b": null}"#
        ));
    }

    #[test]
    fn type_faults_follow_the_schema() {
        let s = serde_json::json!({"type": "object", "properties": {
            "n": {"type": "integer"}, "l": {"type": "array", "items": {"type": "object"}},
            "q": {"x-kubernetes-int-or-string": true}, "any": {"x-kubernetes-preserve-unknown-fields": true}}});
        let ok = serde_json::json!({"n": 1, "l": [{}], "q": "1", "any": [1, "x"], "other": 1});
        assert_eq!(type_fault(&s, &ok, ""), None);
        let bad = serde_json::json!({"l": [null]});
        assert_eq!(
            type_fault(&s, &bad, "").as_deref(),
            Some(".l[0]: null where the schema has \"object\"")
        );
        let bad = serde_json::json!({"n": 1.5});
        assert!(type_fault(&s, &bad, "").is_some());
    }
}
