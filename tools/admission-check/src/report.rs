//! The results of a run, for people (text) and for CI systems (JSON, JUnit XML, SARIF 2.1.0).

use std::fmt::Write as _;

use admission_kit::review::mode::Enforcement;
use serde::Serialize;
use serde_json::{Value, json};

use crate::catalog::Outcome;
use crate::input::Source;
use crate::locate::Position;

/// One checked object.
#[derive(Debug, Clone)]
pub struct Checked {
    /// Where it was read.
    pub source: Source,
    /// The operation it was checked for.
    pub operation: &'static str,
    /// How long its check took (JUnit `time`).
    pub elapsed: std::time::Duration,
    /// What the webhooks answered.
    pub outcome: Outcome,
}

/// A file, or a document of one, that could not be read as Kubernetes objects: listed in
/// every format beside the results (the other files are still checked), and the run ends with
/// exit 2.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unreadable {
    /// The file (or directory).
    pub file: String,
    /// The document, from 1, when the problem is in one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub document: Option<usize>,
    /// The line the problem is at, from 1, when it is in a document.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
    /// The reader's whole message (file, document, line and what is wrong), as stderr says it.
    #[serde(skip)]
    pub said: String,
}

impl From<&crate::input::InputError> for Unreadable {
    fn from(e: &crate::input::InputError) -> Self {
        let at = e.document_line();
        Unreadable {
            file: e.file().to_owned(),
            document: at.map(|(d, _)| d),
            line: at.map(|(_, l)| l),
            message: e.reason(),
            said: e.to_string(),
        }
    }
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.said)
    }
}

/// The verdict on one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Every webhook admitted it without warnings.
    Admitted,
    /// Admitted, with warnings.
    Warned,
    /// A webhook refused it.
    Denied,
    /// Of a group our webhooks serve, in a version they do not: nothing checked it.
    Unchecked,
    /// Refused, but the refusal may rest on objects the state does not hold
    /// ([`crate::catalog::Outcome::missing`]): the cluster decides.
    Undecided,
    /// Not a Kubernetes object (a Kustomization, a kind cluster's configuration, a Chart.yaml):
    /// named and left out, neither admitted nor refused.
    Ignored,
}

impl Verdict {
    /// `ADMITTED`, `WARNED`, `DENIED` or `UNCHECKED`.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Admitted => "ADMITTED",
            Verdict::Warned => "WARNED",
            Verdict::Denied => "DENIED",
            Verdict::Unchecked => "UNCHECKED",
            Verdict::Undecided => "UNDECIDED",
            Verdict::Ignored => "IGNORED",
        }
    }
}

impl Checked {
    /// The verdict.
    pub fn verdict(&self) -> Verdict {
        if self.outcome.not_an_object.is_some() {
            Verdict::Ignored
        } else if self.outcome.unknown_version.is_some() {
            Verdict::Unchecked
        } else if self.outcome.undecided() {
            Verdict::Undecided
        } else if !self.outcome.admitted {
            Verdict::Denied
        } else if self.outcome.warnings.is_empty() {
            Verdict::Admitted
        } else {
            Verdict::Warned
        }
    }

    /// Where `field` (as a finding names it) is in the file, else where the document starts.
    pub fn position_of(&self, field: &str) -> Position {
        match &self.source.text {
            Some(text) if !field.is_empty() => {
                crate::locate::position_of(text, self.source.line, &self.source.path, field)
            }
            _ => Position {
                line: self.source.line,
                column: 1,
            },
        }
    }

    /// A metadata field of the object as sent (as read, its namespace filled in).
    fn meta(&self, key: &str) -> &str {
        self.outcome.sent["metadata"][key]
            .as_str()
            .unwrap_or_default()
    }

    /// `Kind namespace/name` (or `Kind name`).
    pub fn title(&self) -> String {
        let kind = self.outcome.sent["kind"].as_str().unwrap_or_default();
        if self.outcome.not_an_object.is_some() {
            return kind.to_owned();
        }
        let name = match self.meta("name") {
            "" => format!("{}(generated)", self.meta("generateName")),
            n => n.to_owned(),
        };
        match self.meta("namespace") {
            "" => format!("{kind} {name}"),
            ns => format!("{kind} {ns}/{name}"),
        }
    }
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// For people: one block per object, mutations as a diff.
    Text,
    /// One JSON document: every result and a summary.
    Json,
    /// JUnit XML: a suite per file, a test case per object.
    Junit,
    /// SARIF 2.1.0: one result per denial and per warning.
    Sarif,
}

/// Counts of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Objects checked.
    pub objects: usize,
    /// Admitted without warnings.
    pub admitted: usize,
    /// Admitted with warnings.
    pub warned: usize,
    /// Refused.
    pub denied: usize,
    /// Of a served group in a version nothing here serves.
    pub unchecked: usize,
    /// Refused for want of objects the state does not hold.
    pub undecided: usize,
    /// Sent to no webhook (no webhook serves the kind, an excluded namespace, an
    /// objectSelector, a manifest unchanged since it was applied): admitted, but nothing of
    /// ours checked them.
    pub skipped: usize,
    /// Documents that are no Kubernetes objects (tools' configuration): left out, and not
    /// counted among `objects`.
    pub ignored: usize,
    /// Files that could not be read ([`Unreadable`]): their objects are not among `objects`.
    pub unreadable: usize,
}

/// The counts of `results`.
pub fn summary(results: &[Checked]) -> Summary {
    let mut s = Summary::default();
    for r in results {
        match r.verdict() {
            Verdict::Admitted => s.admitted += 1,
            Verdict::Warned => s.warned += 1,
            Verdict::Denied => s.denied += 1,
            Verdict::Unchecked => s.unchecked += 1,
            Verdict::Undecided => s.undecided += 1,
            Verdict::Ignored => {
                s.ignored += 1;
                continue;
            }
        }
        s.objects += 1;
        if r.outcome.skipped.is_some() {
            s.skipped += 1;
        }
    }
    s
}

/// Renders `results` and the files that could not be read in `format` (`docs_url`: see
/// [`sarif`]) for a run in enforcement mode `mode`: in `warn` and `audit` every denial is
/// reported as a would-be denial (a SARIF warning, a skipped JUnit case, `"mode"` in the JSON
/// report, a closing line in text).
pub fn render(
    results: &[Checked],
    unreadable: &[Unreadable],
    format: Format,
    docs_url: Option<&str>,
    mode: Enforcement,
) -> String {
    match format {
        Format::Text => text(results, unreadable, mode),
        Format::Json => json_text(results, unreadable, mode),
        Format::Junit => junit(results, unreadable, mode),
        Format::Sarif => format!("{:#}\n", sarif(results, unreadable, docs_url, mode)),
    }
}

fn yaml(v: &Value) -> String {
    serde_yaml_ng::to_string(v).unwrap_or_else(|e| format!("(cannot render: {e})\n"))
}

/// The mutation as a unified diff of the object's YAML before and after.
pub fn diff(before: &Value, after: &Value) -> String {
    let (a, b) = (yaml(before), yaml(after));
    similar::TextDiff::from_lines(&a, &b)
        .unified_diff()
        .context_radius(2)
        .header("as written", "as admitted")
        .to_string()
}

fn text(results: &[Checked], unreadable: &[Unreadable], mode: Enforcement) -> String {
    let mut out = String::new();
    for r in results {
        let _ = writeln!(out, "{}  {}  {}", r.source, r.title(), r.verdict().label());
        let o = &r.outcome;
        if let Some(why) = &o.not_an_object {
            let _ = writeln!(out, "  {why}");
        }
        if let Some(why) = &o.unknown_version {
            let _ = writeln!(out, "  {why}");
        }
        if let Some(why) = &o.skipped {
            let _ = writeln!(out, "  not sent to any webhook: {why}");
        }
        let undecided = r.verdict() == Verdict::Undecided;
        if undecided {
            let _ = writeln!(
                out,
                "  undecided: the refusal below rests on objects the state does not hold: {} (give them with --state, --profile or --kubeconfig)",
                o.missing.join(", ")
            );
        }
        for refusal in &o.refusals {
            let _ = writeln!(
                out,
                "  {} by {} ({}):",
                if undecided {
                    "would be denied"
                } else {
                    "denied"
                },
                refusal.endpoint,
                refusal.service
            );
            if refusal.findings.iter().all(|f| f.field.is_empty()) {
                let rules: Vec<&str> = refusal.findings.iter().map(|f| f.rule.as_str()).collect();
                let _ = writeln!(out, "    [{}] {}", rules.join(","), refusal.message);
            } else {
                for f in &refusal.findings {
                    let at = r.position_of(&f.field);
                    let _ = writeln!(
                        out,
                        "    {}  {} (line {}, column {}): {}",
                        f.rule, f.field, at.line, at.column, f.message
                    );
                }
            }
        }
        for w in &o.warnings {
            let _ = writeln!(out, "  warning: {w}");
        }
        for n in &o.notes {
            let _ = writeln!(out, "  note: {n}");
        }
        if !o.mutations.is_empty() {
            let by: Vec<&str> = o.mutations.iter().map(|m| m.endpoint.as_str()).collect();
            let _ = writeln!(out, "  mutated by {}:", by.join(", "));
            for line in diff(&o.sent, o.admitted_object()).lines() {
                let _ = writeln!(out, "    {line}");
            }
        }
    }
    for u in unreadable {
        let _ = writeln!(out, "{}  UNREADABLE\n  {}", u.file, u);
    }
    let s = summary(results);
    let _ = write!(
        out,
        "{} objects: {} admitted, {} admitted with warnings, {} denied",
        s.objects, s.admitted, s.warned, s.denied
    );
    if s.undecided > 0 {
        let _ = write!(out, ", {} undecided (state missing)", s.undecided);
    }
    if s.unchecked > 0 {
        let _ = write!(out, ", {} unchecked (unknown version)", s.unchecked);
    }
    if s.skipped > 0 {
        let _ = write!(out, " ({} of the admitted sent to no webhook)", s.skipped);
    }
    if s.ignored > 0 {
        let _ = write!(
            out,
            "; {} documents ignored (not Kubernetes objects)",
            s.ignored
        );
    }
    if !unreadable.is_empty() {
        let _ = write!(
            out,
            "; {} files unreadable (their objects not checked)",
            unreadable.len()
        );
    }
    out.push('\n');
    if mode != Enforcement::Enforce {
        let _ = writeln!(
            out,
            "mode {mode}: denials are what enforcing would refuse; none fails this run"
        );
    }
    out
}

/// The JSON report's format version: raised when a field changes meaning or goes away (new
/// fields do not raise it).
pub const JSON_FORMAT: u32 = 2;

/// The JSON report: `{"format": 2, "results": [...], "summary": {...}}`.
pub fn json_report(results: &[Checked]) -> Value {
    serde_json::to_value(JsonReport(results, &[], Enforcement::Enforce)).unwrap_or_default()
}

/// The JSON report as text, written result by result: the whole report is never a `Value`
/// tree (with every mutated object in it, that doubled a large run's memory).
fn json_text(results: &[Checked], unreadable: &[Unreadable], mode: Enforcement) -> String {
    match serde_json::to_string_pretty(&JsonReport(results, unreadable, mode)) {
        Ok(mut s) => {
            s.push('\n');
            s
        }
        Err(e) => format!("{{\"error\": {:?}}}\n", e.to_string()),
    }
}

/// Serialises as [`json_report`]'s value, keys in the same (sorted) order; `"mode"` only for a
/// run in `warn` or `audit`, `"unreadable"` only when a file could not be read.
struct JsonReport<'a>(&'a [Checked], &'a [Unreadable], Enforcement);

impl Serialize for JsonReport<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("format", &JSON_FORMAT)?;
        if self.2 != Enforcement::Enforce {
            m.serialize_entry("mode", self.2.as_str())?;
        }
        m.serialize_entry("results", &JsonItems(self.0))?;
        let mut counts = summary(self.0);
        counts.unreadable = self.1.len();
        // As a value, so its keys come sorted as in every earlier report.
        let summary = serde_json::to_value(counts).map_err(serde::ser::Error::custom)?;
        m.serialize_entry("summary", &summary)?;
        if !self.1.is_empty() {
            m.serialize_entry("unreadable", self.1)?;
        }
        m.end()
    }
}

struct JsonItems<'a>(&'a [Checked]);

impl Serialize for JsonItems<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq as _;
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for r in self.0 {
            seq.serialize_element(&json_item(r))?;
        }
        seq.end()
    }
}

/// One result of the JSON report.
fn json_item(r: &Checked) -> Value {
    let o = &r.outcome;
    let mut v = json!({
        "file": r.source.file,
        "document": r.source.document,
        "line": r.source.line,
        "apiVersion": o.sent["apiVersion"],
        "kind": o.sent["kind"],
        "namespace": r.meta("namespace"),
        "name": r.meta("name"),
        "operation": r.operation,
        "result": r.verdict(),
        "endpoints": o.endpoints,
        "refusals": o.refusals,
        "warnings": o.warnings,
        "notes": o.notes,
        "missing": o.missing,
        "mutations": o.mutations,
    });
    if let Some(i) = r.source.item {
        v["item"] = json!(i);
    }
    // Each finding at its field's line.
    for refusal in v["refusals"].as_array_mut().into_iter().flatten() {
        for f in refusal["findings"].as_array_mut().into_iter().flatten() {
            let at = r.position_of(f["field"].as_str().unwrap_or_default());
            f["line"] = json!(at.line);
            f["column"] = json!(at.column);
        }
    }
    if let Some(s) = &o.skipped {
        v["skipped"] = json!(s);
    }
    if let Some(s) = &o.not_an_object {
        v["ignored"] = json!(s);
    }
    if !o.mutations.is_empty() {
        v["mutated"] = o.admitted_object().clone();
    }
    v
}

/// Every refusal's message, `; `-separated.
fn refusal_messages(r: &Checked) -> String {
    let msgs: Vec<&str> = r
        .outcome
        .refusals
        .iter()
        .map(|x| x.message.as_str())
        .collect();
    msgs.join("; ")
}

fn junit(results: &[Checked], unreadable: &[Unreadable], mode: Enforcement) -> String {
    use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
    let mut report = Report::new("admission-check");
    let mut suites: Vec<TestSuite> = Vec::new();
    for r in results {
        if suites
            .last()
            .is_none_or(|s| s.name.as_str() != r.source.file)
        {
            suites.push(TestSuite::new(r.source.file.clone()));
        }
        let name = format!("{}:{} {}", r.source, r.source.line, r.title());
        let status = if r.verdict() == Verdict::Undecided {
            // Neither a pass nor a failure: the cluster decides.
            let mut st = TestCaseStatus::skipped();
            st.set_message(format!(
                "undecided: would be denied, resting on objects the state does not hold: {}",
                r.outcome.missing.join(", ")
            ));
            st.set_type("undecided");
            st
        } else if r.verdict() == Verdict::Denied && mode != Enforcement::Enforce {
            // Reported, not failed: the run measures what enforcing would do.
            let mut st = TestCaseStatus::skipped();
            st.set_message(format!("would be denied ({mode}): {}", refusal_messages(r)));
            st.set_type("would-deny");
            st
        } else if r.verdict() == Verdict::Denied {
            let mut st = TestCaseStatus::non_success(NonSuccessKind::Failure);
            st.set_message(refusal_messages(r));
            st.set_type("denied");
            let mut detail = String::new();
            for refusal in &r.outcome.refusals {
                for f in &refusal.findings {
                    let at = r.position_of(&f.field);
                    let _ = writeln!(
                        detail,
                        "{}:{}:{}: {} {} {}: {}",
                        r.source.file,
                        at.line,
                        at.column,
                        refusal.endpoint,
                        f.rule,
                        f.field,
                        f.message
                    );
                }
            }
            st.set_description(detail);
            st
        } else if let Some(why) = r
            .outcome
            .not_an_object
            .as_ref()
            .or(r.outcome.unknown_version.as_ref())
            .or(r.outcome.skipped.as_ref())
        {
            // Nothing checked it: neither a pass nor a failure.
            let mut st = TestCaseStatus::skipped();
            st.set_message(why.clone());
            st
        } else {
            TestCaseStatus::success()
        };
        let mut case = TestCase::new(name, status);
        case.set_classname(r.source.file.clone());
        case.set_time(r.elapsed);
        let mut out = String::new();
        for w in &r.outcome.warnings {
            let _ = writeln!(out, "warning: {w}");
        }
        for n in &r.outcome.notes {
            let _ = writeln!(out, "note: {n}");
        }
        if let Some(s) = &r.outcome.skipped {
            let _ = writeln!(out, "not sent to any webhook: {s}");
        }
        if !out.is_empty() {
            case.set_system_out(out);
        }
        if let Some(s) = suites.last_mut() {
            let time = s.time.unwrap_or_default() + r.elapsed;
            s.set_time(time);
            s.add_test_case(case);
        }
    }
    // A file that could not be read is a suite of its own with one errored case: its objects
    // were never tested.
    for u in unreadable {
        let mut st = TestCaseStatus::non_success(NonSuccessKind::Error);
        st.set_message(u.message.clone());
        st.set_type("unreadable");
        st.set_description(u.to_string());
        let name = match u.line {
            Some(l) => format!("{}:{l} unreadable", u.file),
            None => format!("{} unreadable", u.file),
        };
        let mut case = TestCase::new(name, st);
        case.set_classname(u.file.clone());
        let mut suite = TestSuite::new(u.file.clone());
        suite.add_test_case(case);
        suites.push(suite);
    }
    let total = suites.iter().filter_map(|s| s.time).sum();
    report.set_time(total);
    report.add_test_suites(suites);
    report
        .to_string()
        .unwrap_or_else(|e| format!("<!-- cannot render JUnit XML: {e} -->\n"))
}

/// The rule id a warning starts with (`WQ-3: …`, `TR-17: …`), else `warning`.
fn warning_rule(w: &str) -> &str {
    match w.split_once(':') {
        Some((id, _)) if crate::catalog::starts_with_rule_id(w) => id,
        _ => "warning",
    }
}

/// The field a warning is about: the first word of it that is a field path (`spec.template`
/// in `WQ-6: … pods of spec.template would be refused …`), else none. Warnings are plain text
/// on the wire, and the rules write the field they mean as a path.
fn warning_field(w: &str) -> &str {
    w.split_whitespace()
        .map(|t| t.trim_end_matches([':', ',', ';', ')', '.']))
        .find(|t| {
            ["spec.", "metadata.", "status."]
                .iter()
                .any(|p| t.starts_with(p) && t.len() > p.len())
        })
        .unwrap_or_default()
}

/// A file path as a SARIF `artifactLocation.uri`: a relative reference for relative paths, a
/// `file://` URI for absolute ones, normalised (`./` and `dir/..` dropped, so code scanning
/// matches it to the repository's file) with the characters URIs reserve escaped; standard
/// input (`-`) is `stdin`.
fn uri(path: &str) -> String {
    if path == "-" {
        return "stdin".into();
    }
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." if parts.last().is_some_and(|p| *p != "..") => {
                parts.pop();
            }
            ".." if absolute => {}
            p => parts.push(p),
        }
    }
    let path = parts.join("/");
    let mut out = String::new();
    if absolute {
        out.push_str("file:///");
    }
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The SARIF 2.1.0 log: a rule per rule id met, a result per finding (level error) and per
/// warning (level warning), located at the object's document and named by kind, name and field.
///
/// Built with serde_json rather than the serde-sarif crate: the log uses a dozen properties,
/// and the test suite checks it with Microsoft's SARIF validator, which is the conformance
/// that matters.
///
/// Each rule's description and help are its documentation (`crate::rules`: the doc comment
/// above it); with `docs_url` (the base URL of this repository's files, e.g.
/// `https://github.com/org/repo/blob/v1.2.0`) each rule gets a `helpUri` at the page that
/// specifies it and the tool an `informationUri`.
///
/// A file that could not be read is an error-level result of rule `unreadable` at the line the
/// problem is at, and a tool notification of the run's invocation (whose `executionSuccessful`
/// is then false).
pub fn sarif(
    results: &[Checked],
    unreadable: &[Unreadable],
    docs_url: Option<&str>,
    mode: Enforcement,
) -> Value {
    // Each rule met: its id, a fallback description, and the service that reported it first.
    let mut rules: Vec<(String, String, String)> = Vec::new();
    let index =
        |rules: &mut Vec<(String, String, String)>, id: &str, text: String, service: &str| {
            rules.iter().position(|(r, ..)| r == id).unwrap_or_else(|| {
                rules.push((id.to_owned(), text, service.to_owned()));
                rules.len() - 1
            })
        };
    let mut out = Vec::new();
    for r in results {
        let location = |field: &str| {
            let name = r.title().replace(' ', "/");
            let fqn = if field.is_empty() {
                name
            } else {
                format!("{name}.{field}")
            };
            let at = r.position_of(field);
            json!({
                "physicalLocation": {
                    "artifactLocation": {"uri": uri(&r.source.file)},
                    "region": {"startLine": at.line, "startColumn": at.column},
                },
                "logicalLocations": [{"fullyQualifiedName": fqn, "kind": "object"}],
            })
        };
        // An undecided refusal is a warning: the cluster may admit it.
        let (level, verb) = if r.verdict() == Verdict::Undecided {
            ("warning", "would be denied (undecided: the state lacks ")
        } else if mode != Enforcement::Enforce {
            ("warning", "would be denied (")
        } else {
            ("error", "")
        };
        for refusal in &r.outcome.refusals {
            let findings: Vec<(String, String, String)> = if refusal.findings.is_empty() {
                vec![("denied".into(), String::new(), refusal.message.clone())]
            } else {
                refusal
                    .findings
                    .iter()
                    .map(|f| {
                        let text = if f.field.is_empty() {
                            refusal.message.clone()
                        } else {
                            format!("{}: {}", f.field, f.message)
                        };
                        (f.rule.clone(), f.field.clone(), text)
                    })
                    .collect()
            };
            for (rule, field, text) in findings {
                let desc = format!("Admission rule {rule} of {}", refusal.service);
                let i = index(&mut rules, &rule, desc, &refusal.service);
                let said = if verb.is_empty() {
                    "denied".to_owned()
                } else if r.verdict() == Verdict::Undecided {
                    format!("{verb}{})", r.outcome.missing.join(", "))
                } else {
                    format!("{verb}{mode})")
                };
                out.push(json!({
                    "ruleId": rule,
                    "ruleIndex": i,
                    "level": level,
                    "message": {"text": format!("{} {} {said} by {}: {text}", r.title(), r.operation, refusal.endpoint)},
                    "locations": [location(&field)],
                }));
            }
        }
        if let Some(why) = &r.outcome.unknown_version {
            let i = index(
                &mut rules,
                "unknown-version",
                "An object of a served API group in a version no webhook here serves".into(),
                "",
            );
            out.push(json!({
                "ruleId": "unknown-version",
                "ruleIndex": i,
                "level": "warning",
                "message": {"text": format!("{}: {why}", r.title())},
                "locations": [location("")],
            }));
        }
        for w in &r.outcome.warnings {
            let id = warning_rule(w);
            let desc = if id == "warning" {
                "A warning returned by an admission webhook".to_owned()
            } else {
                format!("Admission rule {id} (a warning)")
            };
            let i = index(&mut rules, id, desc, "");
            out.push(json!({
                "ruleId": id,
                "ruleIndex": i,
                "level": "warning",
                "message": {"text": format!("{}: {w}", r.title())},
                "locations": [location(warning_field(w))],
            }));
        }
    }
    let mut notifications = Vec::new();
    for u in unreadable {
        let i = index(
            &mut rules,
            "unreadable",
            "A file or document that is not YAML or JSON Kubernetes objects (a template, a syntax error, no apiVersion or kind); its objects are not checked".into(),
            "",
        );
        let location = json!({
            "physicalLocation": {
                "artifactLocation": {"uri": uri(&u.file)},
                "region": {"startLine": u.line.unwrap_or(1), "startColumn": 1},
            },
        });
        out.push(json!({
            "ruleId": "unreadable",
            "ruleIndex": i,
            "level": "error",
            "message": {"text": u.to_string()},
            "locations": [location],
        }));
        notifications.push(json!({
            "level": "error",
            "message": {"text": u.to_string()},
            "locations": [location],
        }));
    }
    let documented = crate::rules::all();
    let base = docs_url.map(|u| u.trim_end_matches('/'));
    let rules: Vec<Value> = rules
        .into_iter()
        .map(|(id, text, service)| {
            // The rule's own documentation: of the service that reported it, else any.
            let doc = documented
                .iter()
                .find(|d| d.id == id && d.doc.service == service)
                .or_else(|| documented.iter().find(|d| d.id == id));
            let mut rule = match doc {
                Some(d) => {
                    let help = format!(
                        "{id} ({}, {}): {}\n\nRule: {}. Specified in {}.",
                        d.doc.service,
                        d.kinds,
                        d.doc.text,
                        d.source(),
                        d.page
                    );
                    json!({
                        "id": id,
                        "name": id.replace(['-', '.'], ""),
                        "shortDescription": {"text": d.summary()},
                        "fullDescription": {"text": d.doc.text},
                        "help": {"text": help, "markdown": help},
                        "properties": {"service": d.doc.service, "kinds": d.kinds, "source": d.source()},
                    })
                }
                None => {
                    let help = if id == "unreadable" {
                        format!(
                            "{text}. Render templates first (`helm template`, `kustomize build`); \
                             docs/admission-check.md says what is read."
                        )
                    } else {
                        format!(
                            "{text}. `admission-check rules` lists the documented rules; \
                             docs/upstream-parity.md says where each spec lives."
                        )
                    };
                    json!({
                        "id": id,
                        "name": id.replace(['-', '.'], ""),
                        "shortDescription": {"text": text},
                        "fullDescription": {"text": text},
                        "help": {"text": help, "markdown": help},
                    })
                }
            };
            if let Some(base) = base {
                let page = doc.map_or("docs/admission-check.md", |d| d.page);
                rule["helpUri"] = json!(format!("{base}/{page}"));
            }
            rule
        })
        .collect();
    let mut driver = json!({
        "name": "admission-check",
        "version": env!("CARGO_PKG_VERSION"),
        "rules": rules,
    });
    if let Some(base) = base {
        driver["informationUri"] = json!(format!("{base}/docs/admission-check.md"));
    }
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": driver},
            "invocations": [{
                "executionSuccessful": notifications.is_empty(),
                "toolExecutionNotifications": notifications,
            }],
            "results": out,
        }],
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_warning_is_about_the_first_field_it_names() {
        assert_eq!(
            super::warning_field(
                "WQ-6: Deployment a/d: pods of spec.template would be refused by PV-2: Pod: Forbidden"
            ),
            "spec.template"
        );
        assert_eq!(
            super::warning_field("see spec.backends[0].workers[1].image."),
            "spec.backends[0].workers[1].image"
        );
        assert_eq!(
            super::warning_field("spec. is not a field; nor is spectrum.x"),
            ""
        );
    }

    #[test]
    fn uris_are_normalised_and_escaped() {
        assert_eq!(
            super::uri("./deploy/../deploy/a b.yaml"),
            "deploy/a%20b.yaml"
        );
        assert_eq!(super::uri("../x/./y.yaml"), "../x/y.yaml");
        assert_eq!(super::uri("/r/t/../../s/z.yaml"), "file:///s/z.yaml");
        assert_eq!(super::uri("-"), "stdin");
    }
}
