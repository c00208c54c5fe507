//! The rules as their own documentation: `admission-check rules` lists every rule (id, service,
//! kinds, one line, where it is documented) and `admission-check explain ID` prints one with its
//! examples. The text is the rule's doc comment in the service's source, collected at build time
//! (`build.rs`): a paragraph starting `MV-03: …` above the rule's function.

use std::fmt::Write as _;

use serde_json::Value;

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
    /// The examples written beside it: what each shows and its manifest (YAML flow style).
    pub examples: &'static [(Expect, &'static str)],
    /// The service's options the examples run with (`--quota-label-scope=namespace`).
    pub options: &'static [&'static str],
    /// Objects in the cluster the examples are checked against (a runtime a TrainJob names, a
    /// parent quota): the whole cluster of the examples, so what it lacks is absent.
    pub state: &'static [&'static str],
}

include!(concat!(env!("OUT_DIR"), "/rule_docs.rs"));
pub use crate::rule_id::is_rule_id;

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
    out.sort_by_key(|r| {
        (
            r.doc.service,
            order(r.id),
            r.doc.ids.len(),
            r.doc.examples.is_empty(),
        )
    });
    // A rule documented by its own paragraph and by a group's (`MV-07..MV-17: what each scope
    // requires`) is listed once, by the paragraph that names the fewest rules; of two such (an
    // option's and the rule's own), the one with examples.
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

/// What checking an example gave: the verdict, the rule ids that refused it and those that
/// changed it (`admitted (changed by PM-01)`). An example is created, deleted, or an UPDATE of
/// the state's object of its identity.
fn try_example(
    catalog: &crate::catalog::Catalog,
    manifest: &str,
    operation: admission_kit::Operation,
    sub_resource: Option<&str>,
    state: &[Value],
    only: &[String],
) -> String {
    use admission_kit::Operation;
    let parsed = match crate::input::parse("example", manifest) {
        Ok(m) => m,
        Err(e) => return format!("unreadable: {e}"),
    };
    let mut said = Vec::new();
    for m in parsed {
        let id = crate::input::identity(&m.object, "default");
        let old = id.as_ref().and_then(|id| {
            state
                .iter()
                .find(|o| crate::input::identity(o, "default").as_ref() == Some(id))
        });
        if operation == Operation::Update && old.is_none() {
            said.push("not checked: no object of its identity in the state to update".to_owned());
            continue;
        }
        // A deletion sends the object as the cluster holds it.
        let object = match (operation, old) {
            (Operation::Delete, Some(stored)) => stored,
            _ => &m.object,
        };
        let outcome = catalog.check(&crate::catalog::Subject {
            object,
            old: old.filter(|_| operation == Operation::Update),
            operation,
            sub_resource,
            namespace: None,
            user_info: None,
            only,
            retyped: &m.retyped,
        });
        let ids: Vec<&str> = outcome
            .refusals
            .iter()
            .flat_map(|r| r.findings.iter().map(|f| f.rule.as_str()))
            .collect();
        let mut changed: Vec<&str> = outcome
            .mutations
            .iter()
            .flat_map(|m| m.rules.iter().map(String::as_str))
            .collect();
        changed.dedup();
        // A warning names its rule first (`WQ-3: …`).
        let warned: Vec<&str> = outcome
            .warnings
            .iter()
            .filter(|w| crate::catalog::starts_with_rule_id(w))
            .filter_map(|w| w.split_once(':').map(|(id, _)| id))
            .collect();
        let mut one = if outcome.admitted {
            "admitted".to_owned()
        } else {
            format!("denied by {}", ids.join(", "))
        };
        let mut notes = Vec::new();
        if !changed.is_empty() {
            notes.push(format!("{CHANGED_BY}{}", changed.join(", ")));
        }
        if !warned.is_empty() {
            notes.push(format!("{WARNED_BY}{}", warned.join(", ")));
        }
        if !notes.is_empty() {
            let _ = write!(one, " ({})", notes.join("; "));
        }
        said.push(one);
    }
    said.join("; ")
}

const CHANGED_BY: &str = "changed by ";
const WARNED_BY: &str = "warned by ";

/// What an example beside a rule is meant to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// `Refused:` a rule of its paragraph refuses it.
    Refused,
    /// `Admitted:` it is admitted, and no rule of its paragraph changed it.
    Admitted,
    /// `Mutated:` a (mutating) rule of its paragraph changed it.
    Mutated,
    /// `Refused on delete:` a rule of its paragraph refuses deleting it.
    RefusedOnDelete,
    /// `Admitted on delete:` deleting it is admitted.
    AdmittedOnDelete,
    /// `Warned:` a rule of its paragraph warns about it.
    Warned,
    /// `Refused on update:` a rule of its paragraph refuses it replacing the state's object.
    RefusedOnUpdate,
    /// `Admitted on update:` it replaces the state's object, admitted.
    AdmittedOnUpdate,
    /// `Refused on status update:` as `RefusedOnUpdate`, through the `status` subresource.
    RefusedOnStatus,
    /// `Admitted on status update:` as `AdmittedOnUpdate`, through `status`.
    AdmittedOnStatus,
    /// `Mutated on status update:` a mutating rule changes the status update.
    MutatedOnStatus,
}

impl Expect {
    /// Every kind, in the order `explain` shows them.
    pub const ALL: [Expect; 11] = [
        Expect::Refused,
        Expect::Mutated,
        Expect::Warned,
        Expect::Admitted,
        Expect::RefusedOnDelete,
        Expect::AdmittedOnDelete,
        Expect::RefusedOnUpdate,
        Expect::AdmittedOnUpdate,
        Expect::RefusedOnStatus,
        Expect::MutatedOnStatus,
        Expect::AdmittedOnStatus,
    ];

    /// The word `explain` prints.
    pub fn label(self) -> &'static str {
        match self {
            Expect::Refused => "refused",
            Expect::Admitted => "admitted",
            Expect::Mutated => "mutated",
            Expect::Warned => "warned",
            Expect::RefusedOnDelete => "refused on delete",
            Expect::AdmittedOnDelete => "admitted on delete",
            Expect::RefusedOnUpdate => "refused on update",
            Expect::AdmittedOnUpdate => "admitted on update",
            Expect::RefusedOnStatus => "refused on status update",
            Expect::AdmittedOnStatus => "admitted on status update",
            Expect::MutatedOnStatus => "mutated on status update",
        }
    }

    /// The subresource the example is sent to.
    fn sub_resource(self) -> Option<&'static str> {
        matches!(
            self,
            Expect::RefusedOnStatus | Expect::AdmittedOnStatus | Expect::MutatedOnStatus
        )
        .then_some("status")
    }

    /// The operation the example is sent with.
    fn operation(self) -> admission_kit::Operation {
        match self {
            Expect::RefusedOnDelete | Expect::AdmittedOnDelete => admission_kit::Operation::Delete,
            Expect::RefusedOnUpdate
            | Expect::AdmittedOnUpdate
            | Expect::RefusedOnStatus
            | Expect::AdmittedOnStatus
            | Expect::MutatedOnStatus => admission_kit::Operation::Update,
            _ => admission_kit::Operation::Create,
        }
    }
}

/// Whether an example checked as `said` shows what it is meant to of `rule`: refused by a rule
/// of its paragraph (an example of `MV-18..MV-21` shows one of them), admitted and neither
/// changed nor warned about by them, changed by one of them, or warned about by one of them.
pub fn example_holds(rule: &Rule, expect: Expect, said: &str) -> bool {
    let (verdict, notes) = match said.split_once(" (") {
        Some((v, rest)) => (v, rest.strip_suffix(')').unwrap_or_default()),
        None => (said, ""),
    };
    let noted = |prefix: &str| {
        notes
            .split("; ")
            .find_map(|n| n.strip_prefix(prefix))
            .unwrap_or_default()
    };
    let ours = |ids: &str| ids.split(", ").any(|i| rule.doc.ids.contains(&i));
    match expect {
        Expect::Refused
        | Expect::RefusedOnDelete
        | Expect::RefusedOnUpdate
        | Expect::RefusedOnStatus => verdict.strip_prefix("denied by ").is_some_and(ours),
        Expect::Admitted
        | Expect::AdmittedOnDelete
        | Expect::AdmittedOnUpdate
        | Expect::AdmittedOnStatus => {
            verdict == "admitted" && !ours(noted(CHANGED_BY)) && !ours(noted(WARNED_BY))
        }
        Expect::Mutated | Expect::MutatedOnStatus => ours(noted(CHANGED_BY)),
        Expect::Warned => ours(noted(WARNED_BY)),
    }
}

/// Every example of `rule`, checked: `(what it shows, manifest, what the check said)`.
pub fn checked_examples(rule: &Rule) -> Vec<(Expect, &'static str, String)> {
    let mut examples = rule.doc.examples.to_vec();
    examples.sort_by_key(|(expect, _)| Expect::ALL.iter().position(|e| e == expect));
    if examples.is_empty() {
        return Vec::new();
    }
    // `--endpoint=PATH` (only that endpoint is called, as when the mutating webhook is not
    // there) and `--subresource=NAME` are admission-check's own; the other options are the
    // service's.
    type Named<'a> = Vec<(&'a str, &'a str)>;
    let (own, options): (Named, Named) = rule
        .doc
        .options
        .iter()
        .flat_map(|o| o.split_whitespace())
        .map(|o| {
            let o = o.trim_start_matches('-');
            o.split_once('=').unwrap_or((o, "true"))
        })
        .partition(|(name, _)| ["endpoint", "subresource"].contains(name));
    let only: Vec<String> = own
        .iter()
        .filter(|(name, _)| *name == "endpoint")
        .map(|(_, p)| (*p).to_owned())
        .collect();
    let sub_resource = own
        .iter()
        .find(|(name, _)| *name == "subresource")
        .map(|(_, s)| *s);
    let prepared = example_objects(rule).and_then(|objects| {
        let state = example_state(&objects)?;
        let mut c =
            crate::catalog::Catalog::new(crate::services(), state).map_err(|e| e.to_string())?;
        c.state_complete = true;
        if !options.is_empty() {
            let gates = options
                .iter()
                .find(|(name, _)| *name == "feature-gates")
                .map(|(_, v)| *v);
            let flags: Vec<String> = options
                .iter()
                .filter(|(name, _)| *name != "feature-gates")
                .map(|(name, value)| format!("--{name}={value}"))
                .collect();
            let app = crate::service_with(rule.doc.service, flags.iter().map(String::as_str))?;
            c.use_app(&app, gates)?;
        }
        Ok((objects, c))
    });
    let (objects, catalog) = match prepared {
        Ok(p) => p,
        Err(e) => {
            return examples
                .into_iter()
                .map(|(r, m)| (r, m, format!("not checked: {e}")))
                .collect();
        }
    };
    examples
        .into_iter()
        .map(|(r, m)| {
            (
                r,
                m,
                try_example(
                    &catalog,
                    m,
                    r.operation(),
                    r.sub_resource().or(sub_resource),
                    &objects,
                    &only,
                ),
            )
        })
        .collect()
}

/// The objects of `rule`'s `State:` paragraphs.
fn example_objects(rule: &Rule) -> Result<Vec<Value>, String> {
    let mut objects = Vec::new();
    for text in rule.doc.state {
        for m in crate::input::parse("state", text).map_err(|e| e.to_string())? {
            objects.push(m.object);
        }
    }
    Ok(objects)
}

/// The cluster of `rule`'s examples: its `State:` objects.
fn example_state(objects: &[Value]) -> Result<admission_kit::cluster::state::StaticState, String> {
    let mut state = admission_kit::cluster::state::StaticState::default();
    for o in objects {
        state.add_value(o.clone()).map_err(|e| e.to_string())?;
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
        for options in r.doc.options {
            let _ = writeln!(out, "  with the options: {options}");
        }
        for object in r.doc.state {
            let _ = writeln!(out, "  in a cluster holding: {object}");
        }
        let examples = checked_examples(r);
        if examples.is_empty() {
            let _ = writeln!(out, "  examples: none written beside the rule yet");
        }
        for (expect, manifest, said) in examples {
            let _ = writeln!(out, "  example ({}): {manifest}", expect.label());
            let _ = writeln!(out, "    checked now: {said}");
        }
        out.push('\n');
    }
    out
}
