//! The rules as their own documentation: `admission-check rules` lists every rule (id, service,
//! kinds, one line, where it is documented) and `admission-check explain ID` prints one with its
//! examples. The text is the rule's doc comment in the service's source, collected at build time
//! (`build.rs`): a paragraph starting `MV-03: …` above the rule's function.

use std::fmt::Write as _;

/// One documented paragraph, as `build.rs` found it.
#[derive(Debug, Clone, Copy)]
pub struct RuleDoc {
    /// The crate under `services/` (or `kube-apiserver` for this tool's API rules).
    pub service: &'static str,
    /// The ids the paragraph documents.
    pub ids: &'static [&'static str],
    /// The paragraph after the ids.
    pub text: &'static str,
    /// The source file, from the repository root.
    pub file: &'static str,
    /// The paragraph's line.
    pub line: u32,
    /// The item it documents (`fn mv_03_min_le_max`).
    pub item: &'static str,
    /// Manifests (YAML flow style) the rule refuses.
    pub refused: &'static [&'static str],
    /// Manifests the rule admits.
    pub admitted: &'static [&'static str],
    /// Objects in the cluster the examples are checked against (a runtime a TrainJob names, a
    /// parent quota): the whole cluster of the examples, so what it lacks is absent.
    pub state: &'static [&'static str],
}

include!(concat!(env!("OUT_DIR"), "/rule_docs.rs"));
include!("rule_id.rs");

/// The kinds a family of rules applies to and the page that specifies it: by service and the
/// id's prefix (`MV` of `MV-03`), as the services' specs group them.
#[rustfmt::skip]
const FAMILIES: &[(&str, &str, &str, &str)] = &[
    ("kube-apiserver", "API", "every built-in kind", "docs/admission-check.md"),
    ("registry-webhook", "MV", "Model", "docs/registry-webhook.md"),
    ("registry-webhook", "MM", "Model", "docs/registry-webhook.md"),
    ("registry-webhook", "PV", "AutoscalingPolicy", "docs/registry-webhook.md"),
    ("registry-webhook", "PM", "AutoscalingPolicy", "docs/registry-webhook.md"),
    ("registry-webhook", "BV", "AutoscalingPolicyBinding", "docs/registry-webhook.md"),
    ("registry-webhook", "MB", "ModelBooster", "docs/spec/kthena-v1.md"),
    ("registry-webhook", "AP", "AutoscalingPolicy (workload.serving.volcano.sh)", "docs/spec/kthena-v1.md"),
    ("registry-webhook", "MS", "ModelServing", "docs/spec/kthena-v1.md"),
    ("registry-webhook", "MR", "ModelRoute", "docs/spec/kthena-v1.md"),
    ("scheduling-webhook", "PM", "Pod", "docs/upstream-parity.md"),
    ("scheduling-webhook", "PV", "Pod", "docs/upstream-parity.md"),
    ("scheduling-webhook", "PB", "Binding (pods/binding)", "docs/upstream-parity.md"),
    ("scheduling-webhook", "QM", "ElasticQuota", "docs/upstream-parity.md"),
    ("scheduling-webhook", "QV", "ElasticQuota", "docs/upstream-parity.md"),
    ("scheduling-webhook", "RM", "Reservation", "docs/upstream-parity.md"),
    ("scheduling-webhook", "WQ", "workloads (Deployment, Job, the Kubeflow jobs, …)", "docs/workload-quota.md"),
    ("scheduling-webhook", "S-FIX", "Pod", "docs/upstream-parity.md"),
    ("quota-state", "PV", "Pod", "docs/quota-state.md"),
    ("quota-state", "QV", "ElasticQuota", "docs/quota-state.md"),
    ("quota-state", "WQ", "workloads (Deployment, Job, the Kubeflow jobs, …)", "docs/workload-quota.md"),
    ("node-config-webhook", "CM", "ConfigMap", "docs/node-config-webhook.md"),
    ("node-config-webhook", "NV", "Node", "docs/node-config-webhook.md"),
    ("node-config-webhook", "NS", "Node (status)", "docs/node-config-webhook.md"),
    ("node-config-webhook", "NS-FIX", "Node (status)", "docs/node-config-webhook.md"),
    ("training-webhook", "TR", "PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob, MXJob", "docs/training-webhook.md"),
    ("training-webhook", "TD", "TrainJob", "docs/spec/trainer-v2.md"),
    ("training-webhook", "TJ", "TrainJob", "docs/spec/trainer-v2.md"),
    ("training-webhook", "RT", "TrainingRuntime, ClusterTrainingRuntime", "docs/spec/trainer-v2.md"),
    ("training-webhook", "JS", "TrainJob (its runtime's JobSet)", "docs/spec/trainer-v2.md"),
    ("training-webhook", "TO", "TrainJob", "docs/spec/trainer-v2.md"),
    ("training-webhook", "MP", "TrainJob (MPI)", "docs/spec/trainer-v2.md"),
    ("training-webhook", "XG", "TrainJob (XGBoost)", "docs/spec/trainer-v2.md"),
    ("training-webhook", "FX", "TrainJob (Flux)", "docs/spec/trainer-v2.md"),
    ("training-webhook", "VC", "TrainJob (Volcano)", "docs/spec/trainer-v2.md"),
    ("training-webhook", "F", "TrainJob", "docs/spec/trainer-v2.md"),
    ("lifecycle-webhook", "LD", "Pod (DELETE), Eviction", "docs/lifecycle-webhook.md"),
];

/// One rule of one service.
#[derive(Debug, Clone)]
pub struct Rule {
    /// The id (`MV-03`).
    pub id: &'static str,
    /// Where it is written down.
    pub doc: RuleDoc,
    /// The kinds it applies to.
    pub kinds: &'static str,
    /// The page that specifies its family.
    pub page: &'static str,
}

impl Rule {
    /// The first sentence of its description.
    pub fn summary(&self) -> &'static str {
        let t = self.doc.text;
        t.find(". ").map_or(t.trim_end_matches('.'), |i| &t[..i])
    }

    /// `file:line (item)`.
    pub fn source(&self) -> String {
        if self.doc.item.is_empty() {
            format!("{}:{}", self.doc.file, self.doc.line)
        } else {
            format!("{}:{} ({})", self.doc.file, self.doc.line, self.doc.item)
        }
    }
}

/// The prefix of an id (`MV` of `MV-03`, `NS-FIX` of `NS-FIX-1`).
fn prefix(id: &str) -> &str {
    id.rsplit_once('-').map_or(id, |(p, _)| p)
}

/// Orders ids by prefix, then by number (`MV-2` before `MV-10`).
fn order(id: &str) -> (&str, u64) {
    let n = id
        .rsplit_once('-')
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or(0);
    (prefix(id), n)
}

/// Every documented rule, by service and id.
pub fn all() -> Vec<Rule> {
    let mut out: Vec<Rule> = RULE_DOCS
        .iter()
        .flat_map(|d| {
            d.ids.iter().map(move |id| {
                let family = FAMILIES
                    .iter()
                    .find(|(s, p, ..)| *s == d.service && *p == prefix(id));
                Rule {
                    id,
                    doc: *d,
                    kinds: family.map_or("", |f| f.2),
                    page: family.map_or("", |f| f.3),
                }
            })
        })
        .collect();
    out.sort_by(|a, b| {
        (a.doc.service, order(a.id), a.doc.ids.len()).cmp(&(
            b.doc.service,
            order(b.id),
            b.doc.ids.len(),
        ))
    });
    // A rule documented by its own paragraph and by a group's (`MV-07..MV-17: what each scope
    // requires`) is listed once, by the paragraph that names the fewest rules.
    out.dedup_by(|later, kept| later.doc.service == kept.doc.service && later.id == kept.id);
    out
}

/// The rules of an id, case-insensitive (one per service that documents it: the registry's
/// PV-03 and the scheduler's PV-3 are different rules).
pub fn find(id: &str) -> Vec<Rule> {
    all()
        .into_iter()
        .filter(|r| r.id.eq_ignore_ascii_case(id))
        .collect()
}

/// `admission-check rules`: one line per rule.
pub fn listing(rules: &[Rule]) -> String {
    let mut out = String::new();
    for r in rules {
        let _ = writeln!(
            out,
            "{:<10} {:<20} {:<28} {}  [{}; {}]",
            r.id,
            r.doc.service,
            r.kinds,
            r.summary(),
            r.source(),
            r.page
        );
    }
    let _ = writeln!(out, "{} rules", rules.len());
    out
}

/// What checking an example gave: the verdict and the rule ids that refused it.
fn try_example(catalog: &crate::catalog::Catalog, manifest: &str) -> String {
    let parsed = match crate::input::parse("example", manifest) {
        Ok(m) => m,
        Err(e) => return format!("unreadable: {e}"),
    };
    let mut said = Vec::new();
    for m in parsed {
        let outcome = catalog.check(&crate::catalog::Subject {
            object: &m.object,
            old: None,
            operation: admission_kit::Operation::Create,
            sub_resource: None,
            namespace: None,
            user_info: None,
            only: &[],
            retyped: &m.retyped,
        });
        let ids: Vec<&str> = outcome
            .refusals
            .iter()
            .flat_map(|r| r.findings.iter().map(|f| f.rule.as_str()))
            .collect();
        said.push(if outcome.admitted {
            "admitted".to_owned()
        } else {
            format!("denied by {}", ids.join(", "))
        });
    }
    said.join("; ")
}

/// Whether an example checked as `said` shows what it is meant to of `rule`: refused by a rule
/// of its paragraph (an example of `MV-18..MV-21` shows one of them), or admitted.
pub fn example_holds(rule: &Rule, refused: bool, said: &str) -> bool {
    if refused {
        said.strip_prefix("denied by ")
            .is_some_and(|ids| ids.split(", ").any(|i| rule.doc.ids.contains(&i)))
    } else {
        said == "admitted"
    }
}

/// Every example of `rule`, checked: `(refused?, manifest, what the check said)`.
pub fn checked_examples(rule: &Rule) -> Vec<(bool, &'static str, String)> {
    let examples: Vec<(bool, &'static str)> = rule
        .doc
        .refused
        .iter()
        .map(|e| (true, *e))
        .chain(rule.doc.admitted.iter().map(|e| (false, *e)))
        .collect();
    if examples.is_empty() {
        return Vec::new();
    }
    let catalog = match example_state(rule).and_then(|state| {
        crate::catalog::Catalog::new(crate::services(), state).map_err(|e| e.to_string())
    }) {
        Ok(mut c) => {
            c.state_complete = true;
            c
        }
        Err(e) => {
            return examples
                .into_iter()
                .map(|(r, m)| (r, m, format!("not checked: {e}")))
                .collect();
        }
    };
    examples
        .into_iter()
        .map(|(r, m)| (r, m, try_example(&catalog, m)))
        .collect()
}

/// The cluster of `rule`'s examples: its `State:` objects.
fn example_state(rule: &Rule) -> Result<admission_kit::cluster::state::StaticState, String> {
    let mut state = admission_kit::cluster::state::StaticState::default();
    for text in rule.doc.state {
        for m in crate::input::parse("state", text).map_err(|e| e.to_string())? {
            state.add_value(m.object).map_err(|e| e.to_string())?;
        }
    }
    Ok(state)
}

/// `admission-check explain ID`: each rule of the id with its description, where it is
/// written, and its examples as checked now.
pub fn explain(rules: &[Rule]) -> String {
    let mut out = String::new();
    for r in rules {
        let _ = writeln!(out, "{} ({})", r.id, r.doc.service);
        let _ = writeln!(out, "  applies to: {}", r.kinds);
        let _ = writeln!(out, "  {}", r.doc.text);
        let _ = writeln!(out, "  rule: {}", r.source());
        let _ = writeln!(out, "  specified in: {}", r.page);
        for object in r.doc.state {
            let _ = writeln!(out, "  in a cluster holding: {object}");
        }
        let examples = checked_examples(r);
        if examples.is_empty() {
            let _ = writeln!(out, "  examples: none written beside the rule yet");
        }
        for (refused, manifest, said) in examples {
            let label = if refused { "refused" } else { "admitted" };
            let _ = writeln!(out, "  example ({label}): {manifest}");
            let _ = writeln!(out, "    checked now: {said}");
        }
        out.push('\n');
    }
    out
}
