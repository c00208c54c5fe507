//! The command line: `admission-check [OPTIONS] [PATH]...` and `admission-check --test SUITE...`.
//!
//! Exit codes: 0 when every object is admitted (warnings included) or every test passes, 1 when
//! any object is denied or any test fails, 2 when input cannot be read, 3 when the report cannot
//! be written, 4 when nothing is denied but something is undecided; with `--mode warn|audit`,
//! 0 for denials and undecided alike.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;

use admission_kit::Operation;
use admission_kit::cluster::state::StaticState;
use admission_kit::review::mode::Enforcement;
use clap::Parser;
use serde_json::{Value, json};

use crate::catalog::{Catalog, EXCLUDED_NAMESPACES, Outcome, Subject};
use crate::input::{self, Manifest};
use crate::report::{self, Checked, Format};
use crate::suite;

/// The operation objects are checked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Op {
    /// Objects are created (the default).
    Create,
    /// Objects replace the `--old` objects of the same kind, namespace and name.
    Update,
    /// Objects are deleted.
    Delete,
}

/// Checks Kubernetes manifests against every admission webhook of this repository, offline.
#[derive(Debug, Parser)]
#[command(
    name = "admission-check",
    version,
    args_conflicts_with_subcommands = true,
    after_help = "Exit codes: 0 all admitted (or all tests passed), 1 any denied (or any test failed), 2 unreadable input, \
                  3 the report could not be written, 4 none denied but some undecided (a refusal resting on objects \
                  absent from the state: give them with --state, --profile or --kubeconfig); with --mode warn or audit, 0 for those too.\n\
                  Objects are routed by apiVersion, kind and subresource to every endpoint registered for them: \
                  mutating endpoints first, then validating endpoints on the mutated object."
)]
struct Cli {
    /// What else to do than check manifests.
    #[command(subcommand)]
    command: Option<Command>,
    /// Manifests: files, directories (searched recursively for .yaml, .yml and .json) or `-`
    /// for standard input (the default). YAML streams, JSON, Lists and AdmissionReviews. With
    /// --test: test-suite files.
    paths: Vec<PathBuf>,
    /// Objects in the cluster the rules may read (namespaces, quotas, policies…): YAML or JSON,
    /// Lists too. Repeat for several files.
    #[arg(long)]
    state: Vec<PathBuf>,
    /// The objects as they are now: an object with the same apiVersion, kind, namespace and
    /// name among these is checked as an UPDATE of it. Repeat for several files or directories.
    #[arg(long)]
    old: Vec<PathBuf>,
    /// Read the state from this cluster (namespaces and every kind the rules read), besides
    /// any --state files.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The operation (default: CREATE, or UPDATE for objects found among --old).
    #[arg(long, value_enum)]
    operation: Option<Op>,
    /// The subresource addressed, e.g. `status` for a Node status update.
    #[arg(long)]
    subresource: Option<String>,
    /// The namespace of namespaced objects that name none.
    #[arg(short = 'n', long, default_value = "default")]
    namespace: String,
    /// Namespaces whose objects the webhooks never see (the installation's namespaceSelector).
    /// Repeat for several; `--exclude-namespace ''` for none.
    #[arg(long = "exclude-namespace", default_values = EXCLUDED_NAMESPACES)]
    exclude_namespaces: Vec<String>,
    /// Call only this endpoint path (repeat for several); by default every endpoint that applies.
    #[arg(long = "endpoint")]
    endpoints: Vec<String>,
    /// The user making the requests.
    #[arg(long = "as", default_value = "admission-check")]
    user: String,
    /// A group of that user (repeat for several).
    #[arg(long = "as-group", default_values = ["system:authenticated"])]
    groups: Vec<String>,
    /// Output format.
    #[arg(short, long, value_enum, default_value = "text")]
    output: Format,
    /// Treat PATHs as test-suite files and report each test (text, or JSON with -o json).
    #[arg(long)]
    test: bool,
    /// Fail (exit 1) when an object is of an API group our webhooks serve in a version they do
    /// not (reported UNCHECKED: a newer upstream release than the one served here), and when
    /// the input holds no Kubernetes object at all (an empty file or directory, only tools'
    /// configuration).
    #[arg(long)]
    strict: bool,
    /// Add the objects every installation of an upstream has to the state (repeat for
    /// several): `koordinator` adds its four PriorityClasses (koord-prod 9000, koord-mid 7000,
    /// koord-batch 5000, koord-free 3000). Objects of the same name given with --state win.
    #[arg(long = "profile", value_enum)]
    profiles: Vec<Profile>,
    /// The --state files are the whole cluster: a refusal that rests on an object they lack
    /// is a denial, not UNDECIDED (as with --kubeconfig).
    #[arg(long)]
    complete_state: bool,
    /// The base URL of this repository's files (e.g. `https://github.com/ORG/REPO/blob/TAG`):
    /// SARIF rules then link their spec page (`helpUri`) and the tool its documentation.
    #[arg(long, env = "ADMISSION_CHECK_DOCS_URL")]
    docs_url: Option<String>,
    /// `enforce` (the default) fails the run on a denial; `warn` and `audit` report every
    /// denial as what enforcing would refuse and exit 0 (2 and 3 still mean what they say): to
    /// measure a repository before gating on it, as the webhooks' own `--enforcement` lets a
    /// cluster measure traffic. Offline both check as enforcing would (mutations first).
    #[arg(long, default_value = "enforce")]
    mode: Enforcement,
}

/// The rules themselves.
#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Every rule: id, service, the kinds it applies to, one line, where it is written and
    /// specified.
    Rules {
        /// One JSON document instead of a line per rule.
        #[arg(long)]
        json: bool,
    },
    /// One rule: its description, its source and spec, and its examples as checked now.
    Explain {
        /// The rule id (`MV-03`, `PV-2`, `API-1`; case-insensitive).
        id: String,
    },
}

/// A standard installation's objects (see `--profile`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Profile {
    /// Koordinator's PriorityClasses, which its installation creates.
    Koordinator,
}

impl Profile {
    fn objects(self) -> Vec<Value> {
        match self {
            Profile::Koordinator => [
                ("koord-prod", 9000),
                ("koord-mid", 7000),
                ("koord-batch", 5000),
                ("koord-free", 3000),
            ]
            .into_iter()
            .map(|(name, value)| {
                json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                    "metadata": {"name": name}, "value": value})
            })
            .collect(),
        }
    }
}

/// Writes the report; a failure is exit 3 (not 1, which means a denial).
fn emit(text: &str) -> bool {
    admission_kit::cli::write_stdout(text)
        .map_err(|e| eprintln!("admission-check: cannot write the output: {e}"))
        .is_ok()
}

fn unreadable(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("admission-check: {msg}");
    ExitCode::from(2)
}

/// Runs the command; returns its exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match &cli.command {
        Some(Command::Rules { json }) => {
            let rules = crate::rules::all();
            let text = if *json {
                let list: Vec<Value> = rules
                    .iter()
                    .map(|r| {
                        json!({"id": r.id, "service": r.doc.service, "kinds": r.kinds,
                               "summary": r.summary(), "description": r.doc.text,
                               "source": r.source(), "specified": r.page,
                               "examples": r.doc.examples.len()})
                    })
                    .collect();
                format!("{:#}\n", json!({"rules": list}))
            } else {
                crate::rules::listing(&rules)
            };
            return if emit(&text) {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(3)
            };
        }
        Some(Command::Explain { id }) => {
            let rules = crate::rules::find(id);
            if rules.is_empty() {
                return unreadable(format!("no rule {id}; `admission-check rules` lists them"));
            }
            return if emit(&crate::rules::explain(&rules)) {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(3)
            };
        }
        None => {}
    }
    if cli.test {
        return run_suites(&cli);
    }
    let apps = crate::services();
    // The state is read as the manifests are (byte-order marks, flow style, duplicate keys,
    // file:line in errors), after the profiles' objects, which it may replace.
    let mut state = StaticState::default();
    for profile in &cli.profiles {
        for o in profile.objects() {
            if let Err(e) = state.add_value(o) {
                return unreadable(format!("profile {profile:?}: {e}"));
            }
        }
    }
    let state_objects = match input::read(&cli.state) {
        Ok(m) => m,
        Err(e) => return unreadable(e),
    };
    for m in state_objects {
        if let Err(e) = state.add_value(m.object) {
            return unreadable(format!("{}: {e}", m.source));
        }
    }
    if let Some(kc) = &cli.kubeconfig {
        let loaded = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
            .and_then(|rt| {
                rt.block_on(crate::cluster::load(kc, &apps, &mut state))
                    .map_err(|e| e.to_string())
            });
        if let Err(e) = loaded {
            return unreadable(e);
        }
    }
    // The objects as they are now are in the cluster: rules that read them find them.
    let olds = match input::read(&cli.old) {
        Ok(m) => m,
        Err(e) => return unreadable(e),
    };
    for m in &olds {
        if let Err(e) = state.add_value(m.object.clone()) {
            return unreadable(format!("{}: {e}", m.source));
        }
    }
    let mut catalog = match Catalog::new(apps, state) {
        Ok(c) => c,
        Err(e) => return unreadable(e),
    };
    catalog.excluded_namespaces = cli
        .exclude_namespaces
        .iter()
        .filter(|n| !n.is_empty())
        .cloned()
        .collect();
    catalog.default_namespace = cli.namespace.clone();
    // A state read from the cluster is the cluster: an object it lacks is absent. Files and
    // profiles may leave things out, so a refusal resting on an absent object is undecided.
    catalog.state_complete = cli.kubeconfig.is_some() || cli.complete_state;
    let known = catalog.paths();
    if let Some(bad) = cli.endpoints.iter().find(|p| !known.contains(&p.as_str())) {
        return unreadable(format!("no endpoint {bad:?}; known: {}", known.join(", ")));
    }
    let paths = if cli.paths.is_empty() {
        vec![PathBuf::from("-")]
    } else {
        cli.paths.clone()
    };
    // File by file: each file that cannot be read is named, the others are still checked,
    // and the run ends with exit 2.
    // Each is named on stderr as it is met and listed in the report.
    let mut unread: Vec<report::Unreadable> = Vec::new();
    let manifests = read_ahead(&paths)
        .filter_map(|r| {
            r.map_err(|e| {
                eprintln!("admission-check: {e}");
                unread.push(report::Unreadable::from(&e));
            })
            .ok()
        })
        .flatten();
    let results = check_all(&catalog, &cli, manifests, &olds);
    if !emit(&report::render(
        &results,
        &unread,
        cli.output,
        cli.docs_url.as_deref(),
        cli.mode,
    )) {
        return ExitCode::from(3);
    }
    let verdict = |v: report::Verdict| results.iter().any(|r| r.verdict() == v);
    let objects = report::summary(&results).objects;
    if cli.strict && objects == 0 {
        eprintln!("admission-check: --strict: no Kubernetes object was read");
    }
    if !unread.is_empty() {
        ExitCode::from(2)
    } else if cli.strict && objects == 0 {
        ExitCode::from(1)
    } else if cli.mode != Enforcement::Enforce {
        ExitCode::SUCCESS
    } else if verdict(report::Verdict::Denied)
        || (cli.strict && verdict(report::Verdict::Unchecked))
    {
        ExitCode::from(1)
    } else if verdict(report::Verdict::Undecided) {
        ExitCode::from(4)
    } else {
        ExitCode::SUCCESS
    }
}

/// The objects of `paths` file by file ([`input::read_each`]), read and parsed on a thread of
/// their own at most [`READ_AHEAD`] files ahead of the checks, in order: reading YAML is a third
/// of a run's work and needs nothing the checks hold, so a second core takes it off the checks'
/// way. Read here, as before, if no thread can be started.
fn read_ahead(
    paths: &[PathBuf],
) -> Box<dyn Iterator<Item = Result<Vec<input::Manifest>, input::InputError>>> {
    let (tx, rx) = std::sync::mpsc::sync_channel(READ_AHEAD);
    let files = input::read_each(paths);
    // Ends when every file is read or when the checks stop taking them (the receiver is gone).
    let reading = std::thread::Builder::new()
        .name("read-ahead".into())
        .spawn(move || {
            for f in files {
                if tx.send(f).is_err() {
                    break;
                }
            }
        });
    match reading {
        Ok(_) => Box::new(rx.into_iter()),
        Err(_) => Box::new(input::read_each(paths)),
    }
}

/// Files parsed ahead of the checks: enough to keep the reader busy, few enough that memory
/// holds a handful of files' objects, not the run's.
const READ_AHEAD: usize = 32;

fn check_all(
    catalog: &Catalog,
    cli: &Cli,
    manifests: impl Iterator<Item = Manifest>,
    olds: &[Manifest],
) -> Vec<Checked> {
    // The objects as they are: those of --old, then each object admitted earlier in the run
    // (the same identity again is what `kubectl apply` sends: nothing when the manifest is the
    // same, else an UPDATE of the stored object with the manifest merged in). An admitted object
    // is kept as its JSON text with the manifest it came from, read back only when its identity
    // comes again: a run keeps every outcome, and the text is a fraction of the parsed object's
    // memory. Objects named only by `generateName` have no identity: each is a new object.
    enum Current {
        Old(usize),
        Checked {
            stored: Box<str>,
            applied: Box<str>,
            source: String,
        },
    }
    let mut current: HashMap<_, Current> = olds
        .iter()
        .enumerate()
        .filter_map(|(i, m)| Some((input::identity(&m.object, &cli.namespace)?, Current::Old(i))))
        .collect();
    let user = json!({"username": cli.user, "groups": cli.groups});
    let mut results: Vec<Checked> = Vec::new();
    for m in manifests {
        if let Some(what) = m.not_an_object {
            results.push(Checked {
                source: m.source,
                operation: "NONE",
                elapsed: std::time::Duration::ZERO,
                outcome: Outcome::not_an_object(m.object, what),
            });
            continue;
        }
        let id = input::identity(&m.object, &cli.namespace);
        let r = m.review.as_ref();
        let earlier: Option<Value>;
        let merged: Value;
        let mut object = &m.object;
        let mut unchanged = None;
        let old = match id.as_ref().and_then(|id| current.get(id)) {
            Some(Current::Old(i)) => Some(&olds[*i].object),
            Some(Current::Checked {
                stored,
                applied,
                source,
            }) => {
                earlier = serde_json::from_str(stored).ok();
                let last: Option<Value> = serde_json::from_str(applied).ok();
                if r.is_none() && cli.operation.is_none() {
                    if last.as_ref() == Some(&m.object) {
                        unchanged = Some(source.clone());
                    } else if let Some(stored) = &earlier {
                        merged = input::apply_merge(stored, last.as_ref(), &m.object);
                        object = &merged;
                    }
                }
                earlier.as_ref()
            }
            None => None,
        };
        let operation = match (cli.operation, r) {
            (Some(Op::Create), _) => Operation::Create,
            (Some(Op::Update), _) => Operation::Update,
            (Some(Op::Delete), _) => Operation::Delete,
            (None, Some(r)) => r.operation,
            (None, None) if old.is_some() => Operation::Update,
            (None, None) => Operation::Create,
        };
        if let Some(first) = unchanged {
            let mut outcome = Outcome::unchanged(
                m.object.clone(),
                format!(
                    "unchanged: the same manifest as {first}, for which kubectl apply sends nothing"
                ),
            );
            outcome.warnings.extend(m.reader_warnings());
            outcome.keep_only_what_reports_read();
            results.push(Checked {
                source: m.source,
                operation: "UNCHANGED",
                elapsed: std::time::Duration::ZERO,
                outcome,
            });
            continue;
        }
        let subject = Subject {
            object,
            old: r.and_then(|r| r.old_object.as_ref()).or(old),
            operation,
            sub_resource: r
                .and_then(|r| r.sub_resource.as_deref())
                .or(cli.subresource.as_deref()),
            namespace: r.and_then(|r| r.namespace.as_deref()),
            user_info: Some(r.and_then(|r| r.user_info.as_ref()).unwrap_or(&user)),
            only: &cli.endpoints,
            retyped: &m.retyped,
        };
        let started = std::time::Instant::now();
        let mut outcome = catalog.check(&subject);
        let elapsed = started.elapsed();
        outcome.warnings.extend(m.reader_warnings());
        if let Some(id) = id
            && outcome.admitted
            && operation != Operation::Delete
        {
            let text = serde_json::to_string(outcome.admitted_object()).unwrap_or_default();
            let applied = serde_json::to_string(&m.object).unwrap_or_default();
            current.insert(
                id,
                Current::Checked {
                    stored: text.into(),
                    applied: applied.into(),
                    source: m.source.to_string(),
                },
            );
        }
        outcome.keep_only_what_reports_read();
        results.push(Checked {
            source: m.source,
            operation: operation.as_str(),
            elapsed,
            outcome,
        });
    }
    results
}

fn run_suites(cli: &Cli) -> ExitCode {
    let apps = crate::services();
    let files = match input::files(&cli.paths) {
        Ok(f) => f,
        Err(e) => return unreadable(e),
    };
    if files.is_empty() {
        return unreadable("--test needs at least one test-suite file");
    }
    if cli.mode != Enforcement::Enforce {
        return unreadable(
            "--mode applies to manifests; a test suite states each expected decision itself",
        );
    }
    // --state joins every test's state.
    let extra: Vec<Value> = match input::read(&cli.state) {
        Ok(m) => m.into_iter().map(|m| m.object).collect(),
        Err(e) => return unreadable(e),
    };
    // Suite by suite: one that cannot be read is named and the others still run (exit 2).
    let mut all = Vec::new();
    let mut unread = 0;
    for f in &files {
        match suite::run(f, &apps, &extra) {
            Ok(r) => all.extend(r),
            Err(e) => {
                eprintln!("admission-check: {e}");
                unread += 1;
            }
        }
    }
    let failed = all.iter().filter(|t| !t.failures.is_empty()).count();
    let text = if cli.output == Format::Junit {
        suites_junit(&all)
    } else if cli.output == Format::Sarif {
        let checked: Vec<Checked> = all.iter().flat_map(|t| t.checked.clone()).collect();
        format!(
            "{:#}\n",
            report::sarif(&checked, &[], cli.docs_url.as_deref(), Enforcement::Enforce)
        )
    } else if cli.output == Format::Json {
        let tests: Vec<Value> = all
            .iter()
            .map(|t| {
                json!({
                    "suite": t.suite,
                    "test": t.name,
                    "passed": t.failures.is_empty(),
                    "failures": t.failures,
                    "results": report::json_report(&t.checked)["results"],
                })
            })
            .collect();
        format!(
            "{:#}\n",
            json!({"tests": tests, "summary": {"tests": all.len(), "passed": all.len() - failed, "failed": failed}})
        )
    } else {
        let mut s = String::new();
        for t in &all {
            let mark = if t.failures.is_empty() {
                "PASS"
            } else {
                "FAIL"
            };
            s.push_str(&format!("{mark}  {} / {}\n", t.suite, t.name));
            for f in &t.failures {
                for (i, line) in f.lines().enumerate() {
                    s.push_str(if i == 0 { "      " } else { "        " });
                    s.push_str(line);
                    s.push('\n');
                }
            }
        }
        s.push_str(&format!(
            "{} tests: {} passed, {failed} failed\n",
            all.len(),
            all.len() - failed
        ));
        s
    };
    if !emit(&text) {
        return ExitCode::from(3);
    }
    if unread > 0 {
        ExitCode::from(2)
    } else if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// The tests as JUnit XML: a suite per suite, a test case per test, a failure per failed test.
fn suites_junit(all: &[suite::TestResult]) -> String {
    use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
    let mut report = Report::new("admission-check --test");
    let mut suites: Vec<TestSuite> = Vec::new();
    for t in all {
        if suites.last().is_none_or(|s| s.name.as_str() != t.suite) {
            suites.push(TestSuite::new(t.suite.clone()));
        }
        let status = if t.failures.is_empty() {
            TestCaseStatus::success()
        } else {
            let mut st = TestCaseStatus::non_success(NonSuccessKind::Failure);
            st.set_message(t.failures.join("; "));
            st.set_type("mismatch");
            st
        };
        let mut case = TestCase::new(t.name.clone(), status);
        case.set_classname(t.suite.clone());
        if let Some(s) = suites.last_mut() {
            s.add_test_case(case);
        }
    }
    report.add_test_suites(suites);
    report
        .to_string()
        .unwrap_or_else(|e| format!("<!-- cannot render JUnit XML: {e} -->\n"))
}
