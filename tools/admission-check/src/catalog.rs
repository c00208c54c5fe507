//! Routing an object to the endpoints the API server would call, and calling them in its order:
//! mutating endpoints first (configurations by name, then each configuration's webhooks in
//! registration order), then every validating endpoint on the mutated object.
//!
//! Each endpoint is called through its own handler with an AdmissionReview built as the API
//! server builds it, so a rule answers here exactly what it answers when served.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use admission_kit::Operation;
use admission_kit::cluster::registration::OPT_OUT_LABEL;
use admission_kit::cluster::state::{GrowingState, StaticState};
use admission_kit::compat::gates::GateError;
use admission_kit::review::app::{App, DecodeErrors, Endpoint, FailurePolicy, WebhookKind};
use admission_kit::review::envelope::{Gvk, Gvr, RawRequest, ReviewIn, V1};
use admission_kit::review::handler::{Context, Denial};
use admission_kit::review::lookup::{ClusterState, LookupError, TypeKey};
use base64::Engine as _;
use k8s_openapi::api::authentication::v1::UserInfo;
use kube::core::DynamicObject;
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;

/// Namespaces our installation keeps every webhook away from (`kube-system` and its own).
pub const EXCLUDED_NAMESPACES: [&str; 2] = ["kube-system", "admission-webhooks"];

struct Service {
    name: &'static str,
    endpoints: Vec<Endpoint>,
    ctx: Context,
    decode_errors: DecodeErrors,
}

/// The run's state as the rules read it, noting every object a rule looked up and did not
/// find: a refusal that rests on an absent object is undecided while the state may be partial
/// (the object may well be in the cluster).
struct Recording {
    state: Arc<GrowingState>,
    absent: Mutex<Vec<Absent>>,
}

/// An object a rule looked up and the state does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Absent {
    kind: String,
    namespace: Option<String>,
    name: String,
}

impl std::fmt::Display for Absent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// Whether `v` holds the string `name` anywhere (an object naming another: a policyRef, a
/// runtimeRef, a priorityClassName).
fn mentions(v: &Value, name: &str) -> bool {
    match v {
        Value::String(s) => s == name,
        Value::Array(a) => a.iter().any(|v| mentions(v, name)),
        Value::Object(o) => o.values().any(|v| mentions(v, name)),
        _ => false,
    }
}

impl Recording {
    /// The objects looked up in vain since the last call.
    fn take(&self) -> Vec<Absent> {
        std::mem::take(&mut *self.absent.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl ClusterState for Recording {
    fn get(
        &self,
        ty: &TypeKey,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<DynamicObject>>, LookupError> {
        let found = self.state.get(ty, namespace, name);
        // A namespace the object is in exists wherever the object can be created (the
        // NamespaceLifecycle plugin refuses others): one the state does not give exists,
        // unlabelled, as `kubectl create namespace` leaves it, and every rule reads that one (a
        // profile's namespaceSelector does not match it, a namespace opt-out label is absent).
        if let Ok(None) = found
            && (ty.api_version.as_str(), ty.kind.as_str()) == ("v1", "Namespace")
        {
            let mut ns = DynamicObject::new(
                name,
                &kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&()),
            );
            ns.metadata.labels =
                Some([("kubernetes.io/metadata.name".to_owned(), name.to_owned())].into());
            return Ok(Some(Arc::new(ns)));
        }
        if let Ok(None) = found {
            let what = Absent {
                kind: ty.kind.clone(),
                namespace: namespace.map(str::to_owned),
                name: name.to_owned(),
            };
            let mut absent = self.absent.lock().unwrap_or_else(PoisonError::into_inner);
            if !absent.contains(&what) {
                absent.push(what);
            }
        }
        found
    }

    fn list(
        &self,
        ty: &TypeKey,
        namespace: Option<&str>,
    ) -> Result<Vec<Arc<DynamicObject>>, LookupError> {
        self.state.list(ty, namespace)
    }

    fn generation(&self, ty: &TypeKey) -> Option<admission_kit::review::lookup::Generation> {
        self.state.generation(ty)
    }

    fn added_since(
        &self,
        ty: &TypeKey,
        since: admission_kit::review::lookup::Generation,
    ) -> Option<Vec<Arc<DynamicObject>>> {
        self.state.added_since(ty, since)
    }

    fn read_now(
        &self,
        resource: &kube::api::ApiResource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<DynamicObject>>, LookupError> {
        self.state.read_now(resource, namespace, name)
    }
}

/// Every endpoint of the services, with the state their rules read.
pub struct Catalog {
    services: Vec<Service>,
    /// The defaults of the CRDs served, which the API server applies before admission: the
    /// built-in table's, or generated for a service it does not know.
    defaults: OnceLock<crate::defaults::Table>,
    apps: Vec<App>,
    /// The cluster as the run sees it: the given state plus every object the run admitted so
    /// far, as `kubectl apply -f` of the same files in order would leave it (a binding after
    /// its policy).
    state: Arc<GrowingState>,
    /// The state as the rules read it.
    recording: Arc<Recording>,
    /// The kinds anything here reads from the state (`apiVersion`, `kind`): the services'
    /// watched kinds, Namespaces and PriorityClasses. Only these are remembered.
    read_kinds: std::collections::HashSet<(String, String)>,
    /// Whether the state is the whole cluster (read with `--kubeconfig`, or a test suite's
    /// declared state): then an absent object is absent, and a refusal that rests on it stands.
    pub state_complete: bool,
    /// Objects in these namespaces are not sent to namespaced endpoints.
    pub excluded_namespaces: Vec<String>,
    /// The namespace of a namespaced object that names none (kubectl's default).
    pub default_namespace: String,
}

/// What to check: an object and how it reaches the API server.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    /// The object sent (for DELETE, the object deleted).
    pub object: &'a Value,
    /// The object it replaces (UPDATE).
    pub old: Option<&'a Value>,
    /// The operation.
    pub operation: Operation,
    /// The subresource addressed (`status`).
    pub sub_resource: Option<&'a str>,
    /// The request's namespace when it differs from the object's (AdmissionReview input).
    pub namespace: Option<&'a str>,
    /// Who asks (`userInfo`); a generic authenticated user when absent.
    pub user_info: Option<&'a Value>,
    /// Only these endpoint paths are called (all that apply when empty).
    pub only: &'a [String],
    /// Label and annotation values the reader turned into strings (API-1).
    pub retyped: &'a [crate::apiserver::Retyped],
}

/// One reason an endpoint refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The rule id from the spec.
    pub rule: String,
    /// The offending field, empty when the rule names none.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// An endpoint's refusal.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Refusal {
    /// The service.
    pub service: String,
    /// The endpoint path.
    pub endpoint: String,
    /// The status code the API server reports.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<u16>,
    /// The message the API server reports (the denial's status message).
    pub message: String,
    /// Each reason, with its rule and field.
    pub findings: Vec<Finding>,
}

/// A patch an endpoint applied.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mutation {
    /// The endpoint path.
    pub endpoint: String,
    /// The JSON Patch it sent.
    pub patch: Value,
    /// The ids of the rules that made it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<String>,
}

/// The result of one object.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    /// Whether every endpoint admitted it.
    pub admitted: bool,
    /// The endpoints called, in order.
    pub endpoints: Vec<String>,
    /// Why no endpoint was called, when none was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
    /// Not a Kubernetes object: what it is (a tool's configuration); nothing checked it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_an_object: Option<String>,
    /// Its group is one whose webhooks we serve, but not in its version (a newer upstream
    /// release): nothing checked it, and `--strict` fails the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unknown_version: Option<String>,
    /// The refusals.
    pub refusals: Vec<Refusal>,
    /// Warnings returned with the answers.
    pub warnings: Vec<String>,
    /// The patches applied by mutating endpoints, in order.
    pub mutations: Vec<Mutation>,
    /// What the API server's built-in admission did first, and what could not be emulated.
    pub notes: Vec<String>,
    /// Objects the decision looked for and the state does not hold (`Kind namespace/name`).
    /// With a partial state, a refusal beside them is undecided: see [`Outcome::undecided`].
    pub missing: Vec<String>,
    /// Whether the state was partial when `missing` was found.
    #[serde(skip)]
    pub state_partial: bool,
    /// The object as the API server sends it to the first webhook (the namespace filled in).
    #[serde(skip)]
    pub sent: Value,
    /// The object after every mutation; `Null` once [`Catalog::check`] returns when nothing
    /// mutated it (it is then `sent`: read it with [`Outcome::admitted_object`]).
    #[serde(skip)]
    pub object: Value,
}

impl Outcome {
    /// An object nothing has refused, mutated or remarked on yet: where every check starts.
    fn admitted(object: Value, state_partial: bool) -> Self {
        Self {
            admitted: true,
            endpoints: Vec::new(),
            skipped: None,
            not_an_object: None,
            unknown_version: None,
            refusals: Vec::new(),
            warnings: Vec::new(),
            mutations: Vec::new(),
            notes: Vec::new(),
            missing: Vec::new(),
            state_partial,
            sent: Value::Null,
            object,
        }
    }

    /// An object `kubectl apply` does not send: the same manifest as before, unchanged.
    pub fn unchanged(object: Value, why: String) -> Self {
        let mut o = Self::left_out(object);
        o.skipped = Some(why);
        o
    }

    /// An object no check reads: kept as sent, for the report's identity.
    fn left_out(object: Value) -> Self {
        let mut o = Self::admitted(Value::Null, false);
        o.sent = object;
        o
    }

    /// A document that is no Kubernetes object, left out.
    pub fn not_an_object(document: Value, what: String) -> Self {
        let mut o = Self::left_out(document);
        o.not_an_object = Some(what);
        o
    }

    /// Notes an object the decision looked for and the state lacks (once).
    fn add_missing(&mut self, what: String) {
        if !self.missing.contains(&what) {
            self.missing.push(what);
        }
    }

    /// Drops the objects a report does not read: an unmutated object keeps only its identity
    /// (`apiVersion`, `kind`, name, generateName, namespace); a mutated one keeps both copies,
    /// which the text report diffs.
    pub fn keep_only_what_reports_read(&mut self) {
        if !self.mutations.is_empty() {
            return;
        }
        let meta = &self.sent["metadata"];
        let mut slim = serde_json::Map::new();
        for key in ["name", "generateName", "namespace"] {
            if let Some(v) = meta.get(key) {
                slim.insert(key.to_owned(), v.clone());
            }
        }
        self.sent = serde_json::json!({
            "apiVersion": self.sent["apiVersion"],
            "kind": self.sent["kind"],
            "metadata": slim,
        });
        self.object = Value::Null;
    }

    /// The object as admitted: after the mutations, or as sent when nothing mutated it.
    pub fn admitted_object(&self) -> &Value {
        if self.object.is_null() {
            &self.sent
        } else {
            &self.object
        }
    }

    /// A refusal that may rest on objects absent from a partial state: only webhooks refused
    /// (the API server's own checks read no state) and a rule looked for something not there.
    pub fn undecided(&self) -> bool {
        !self.admitted
            && self.state_partial
            && !self.missing.is_empty()
            && self.refusals.iter().all(|r| r.service != API_SERVER)
    }
}

/// The name refusals of the API server's own checks carry as their service.
pub const API_SERVER: &str = "kube-apiserver";

impl Catalog {
    /// The endpoints of `apps` with their default gates, reading `state` and the
    /// objects admitted by earlier checks.
    pub fn new(apps: Vec<App>, state: StaticState) -> Result<Self, GateError> {
        let state = Arc::new(GrowingState::new(state));
        let recording = Arc::new(Recording {
            state: state.clone(),
            absent: Mutex::new(Vec::new()),
        });
        let mut services = Vec::new();
        for app in apps.iter().cloned() {
            let prepared = app.prepare(None)?;
            let ctx = Context::new(recording.clone() as Arc<dyn ClusterState>)
                .with_gates(prepared.gates.clone());
            services.push(Service {
                name: app.name,
                endpoints: prepared.app.endpoints,
                ctx,
                decode_errors: app.decode_errors,
            });
        }
        let mut read_kinds: std::collections::HashSet<(String, String)> = apps
            .iter()
            .flat_map(|a| a.watches.iter())
            .map(|w| (w.resource.api_version.clone(), w.resource.kind.clone()))
            .collect();
        for (api_version, kind) in [
            ("v1", "Namespace"),
            ("scheduling.k8s.io/v1", "PriorityClass"),
        ] {
            read_kinds.insert((api_version.to_owned(), kind.to_owned()));
        }
        // The API server calls mutating webhooks configuration by configuration, in name order;
        // each service registers one configuration named after it.
        services.sort_by_key(|s| s.name);
        Ok(Self {
            services,
            defaults: OnceLock::new(),
            read_kinds,
            apps,
            state,
            recording,
            state_complete: false,
            excluded_namespaces: EXCLUDED_NAMESPACES
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
            default_namespace: "default".into(),
        })
    }

    fn defaults(&self) -> &crate::defaults::Table {
        self.defaults
            .get_or_init(|| crate::defaults::for_apps(&self.apps))
    }

    /// Runs `app`, the endpoint table of one of the services built under some of its options,
    /// with these feature gates (`--feature-gates` of its Deployment) in place of its defaults.
    pub fn use_app(&mut self, app: &App, gates: Option<&str>) -> Result<(), String> {
        let prepared = app.prepare(gates).map_err(|e| e.to_string())?;
        for s in self.services.iter_mut().filter(|s| s.name == app.name) {
            s.ctx = s.ctx.clone().with_gates(prepared.gates.clone());
            s.endpoints.clone_from(&prepared.app.endpoints);
        }
        Ok(())
    }

    /// Every endpoint path, for messages.
    pub fn paths(&self) -> Vec<&'static str> {
        self.services
            .iter()
            .flat_map(|s| s.endpoints.iter().map(|e| e.path))
            .collect()
    }

    /// Whether a namespace is kept away from the webhooks: by name, or by the opt-out label on
    /// the Namespace object when the state holds it.
    fn namespace_excluded(&self, ns: &str) -> Option<String> {
        if self.excluded_namespaces.iter().any(|n| n == ns) {
            return Some(format!(
                "namespace {ns} is excluded from every webhook (namespaceSelector)"
            ));
        }
        let key = TypeKey {
            api_version: "v1".into(),
            kind: "Namespace".into(),
        };
        let labelled = self
            .state
            .get(&key, None, ns)
            .ok()
            .flatten()
            .is_some_and(|n| {
                n.metadata
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.contains_key(OPT_OUT_LABEL))
            });
        labelled.then(|| format!("namespace {ns} carries the label {OPT_OUT_LABEL}"))
    }

    /// Runs every endpoint that applies to `s`, as the API server would.
    pub fn check(&self, s: &Subject<'_>) -> Outcome {
        let mut outcome = self.check_object(s);
        if outcome.admitted
            && matches!(s.operation, Operation::Create | Operation::Update)
            && s.sub_resource.is_none()
        {
            self.check_template_pods(s, &mut outcome);
        }
        // A run keeps every outcome: one copy of an unmutated object is enough.
        if outcome.mutations.is_empty() && outcome.object == outcome.sent {
            outcome.object = Value::Null;
        }
        outcome
    }

    /// The Pods the workload's controller creates from its templates, each checked as a CREATE
    /// by the controller (`templates`): a refusal of one refuses the workload, its findings
    /// named by the workload's fields (`spec.template.spec.…`).
    fn check_template_pods(&self, s: &Subject<'_>, outcome: &mut Outcome) {
        let namespace = s
            .namespace
            .or_else(|| outcome.object["metadata"]["namespace"].as_str())
            .unwrap_or(&self.default_namespace)
            .to_owned();
        for t in crate::templates::pods_of(&outcome.object, &namespace) {
            let pod = self.check_object(&Subject {
                object: &t.pod,
                old: None,
                operation: Operation::Create,
                sub_resource: None,
                namespace: None,
                user_info: Some(&t.user_info),
                only: s.only,
                retyped: &[],
            });
            if pod.endpoints.is_empty() {
                continue;
            }
            outcome.skipped = None;
            outcome.notes.push(format!(
                "the Pods of {} checked as its controller creates them: {}",
                t.path,
                pod.endpoints.join(", ")
            ));
            let field = |f: &str| crate::templates::workload_field(&t.path, f);
            let of_pods = |text: &String| format!("the Pods of {}: {text}", t.path);
            outcome.warnings.extend(pod.warnings.iter().map(of_pods));
            outcome.notes.extend(pod.notes.iter().map(of_pods));
            for m in pod.missing {
                outcome.add_missing(m);
            }
            for mut r in pod.refusals {
                outcome.admitted = false;
                r.message = format!(
                    "the workload is admitted, but the Pods of {} would be refused: {}",
                    t.path, r.message
                );
                for f in &mut r.findings {
                    f.field = field(&f.field);
                }
                outcome.refusals.push(r);
            }
        }
    }

    /// One object through the endpoints the API server calls for it.
    fn check_object(&self, s: &Subject<'_>) -> Outcome {
        let api_version = s.object["apiVersion"].as_str().unwrap_or_default();
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let kind = s.object["kind"].as_str().unwrap_or_default();
        let mut outcome = Outcome::admitted(s.object.clone(), !self.state_complete);
        // A custom resource is defaulted from its CRD before it is validated and before any
        // webhook sees it. Built-in groups (the core group, `apps`, `*.k8s.io`…) have no CRD.
        let custom = !crate::schema::is_built_in_group(group);
        if custom
            && let Some(schema) =
                crate::defaults::lookup(self.defaults(), &self.apps, group, version, kind)
        {
            crate::defaults::apply(schema, &mut outcome.object);
        }
        // The API server decodes and validates the object before any webhook; its refusal
        // stands, and the webhooks are still asked (on the object as the reader quoted it) so
        // that one run names everything to fix.
        if s.operation != Operation::Delete {
            let mut findings = crate::apiserver::findings(&outcome.object, s.retyped);
            if s.operation == Operation::Update
                && let Some(old) = s.old
            {
                findings.extend(crate::apiserver::api_16_immutable(&outcome.object, old));
            }
            if !findings.is_empty() {
                outcome.admitted = false;
                let code = crate::apiserver::status_code(&findings);
                let fields: Vec<&str> = findings.iter().map(|f| f.field.as_str()).collect();
                outcome.refusals.push(Refusal {
                    service: API_SERVER.into(),
                    endpoint: "(decoding and validation)".into(),
                    code: Some(code),
                    message: format!(
                        "the API server refuses the object before any webhook: {}",
                        fields.join(", ")
                    ),
                    findings,
                });
            }
        }
        let routes: Vec<(&Service, &Endpoint)> = self
            .services
            .iter()
            .flat_map(|svc| svc.endpoints.iter().map(move |e| (svc, e)))
            .filter(|(_, e)| {
                let t = &e.target;
                let (resource, sub) = t
                    .resource
                    .split_once('/')
                    .map_or((&*t.resource, None), |(r, s)| (r, Some(s)));
                !resource.is_empty()
                    && t.group == group
                    && t.version == version
                    && t.kind == kind
                    && sub == s.sub_resource
                    && t.operations.contains(&s.operation)
                    && (s.only.is_empty() || s.only.iter().any(|p| p == e.path))
            })
            .collect();
        if routes.is_empty() {
            // A group we serve, in a version none of our endpoints knows.
            let mut versions: Vec<&str> = self
                .services
                .iter()
                .flat_map(|svc| svc.endpoints.iter())
                .map(|e| &e.target)
                .filter(|t| !t.is_unregistered() && !group.is_empty() && t.group == group)
                .map(|t| t.version.as_str())
                .collect();
            versions.sort_unstable();
            versions.dedup();
            // A version Kubernetes removed is refused above, not a newer upstream release.
            let removed = outcome
                .refusals
                .iter()
                .any(|r| r.findings.iter().any(|f| f.rule == "API-12"));
            if !versions.is_empty() && !versions.contains(&version) && !removed {
                outcome.unknown_version = Some(format!(
                    "unchecked, unknown version: the webhooks here serve {group} in {} only, not {version}",
                    versions.join(", ")
                ));
            }
            outcome.sent = outcome.object.clone();
            outcome.skipped = Some(format!(
                "no webhook serves {kind} {api_version}{} on {}",
                s.sub_resource
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default(),
                s.operation.as_str()
            ));
            // The cluster stores it all the same: later objects may name it.
            self.remember_unless_deleted(&outcome.object, s.operation);
            return outcome;
        }
        let namespaced = routes.iter().any(|(_, e)| e.target.namespaced);
        let namespace = namespaced.then(|| {
            s.namespace
                .or_else(|| s.object["metadata"]["namespace"].as_str())
                .unwrap_or(&self.default_namespace)
                .to_owned()
        });
        // The API server sets a namespaced object's namespace before admission.
        if let (Some(ns), Some(meta)) = (
            &namespace,
            outcome
                .object
                .get_mut("metadata")
                .and_then(Value::as_object_mut),
        ) {
            meta.entry("namespace")
                .or_insert_with(|| Value::String(ns.clone()));
        }
        if group.is_empty() && kind == "Pod" && s.operation == Operation::Create {
            self.priority(&mut outcome);
        }
        outcome.sent = outcome.object.clone();
        let excluded = namespace
            .as_deref()
            .and_then(|ns| self.namespace_excluded(ns));
        let selected: Vec<_> = routes
            .into_iter()
            .filter(|(_, e)| !(e.target.namespaced && excluded.is_some()))
            .filter(|(_, e)| selector_matches(e, s.object, s.old))
            .collect();
        if selected.is_empty() {
            outcome.skipped =
                Some(excluded.unwrap_or_else(|| {
                    "no webhook's objectSelector matches its labels".to_owned()
                }));
            self.remember_unless_deleted(&outcome.object, s.operation);
            return outcome;
        }
        let mutating = selected
            .iter()
            .filter(|(_, e)| e.kind == WebhookKind::Mutating);
        let validating = selected
            .iter()
            .filter(|(_, e)| e.kind == WebhookKind::Validating);
        self.recording.take();
        for (svc, e) in mutating.chain(validating) {
            outcome.endpoints.push(e.path.to_owned());
            let step = call(svc, e, s, &outcome.object, namespace.as_deref());
            // A warning in upstream's words names no rule (TR-17's); when one rule of the
            // endpoint acted, it is that rule's, and the report names it.
            let only_rule = match step.applied.as_slice() {
                [one] => Some(*one),
                _ => None,
            };
            outcome
                .warnings
                .extend(step.warnings.into_iter().map(|w| match only_rule {
                    Some(id) if !starts_with_rule_id(&w) => format!("{id}: {w}"),
                    _ => w,
                }));
            if let Some(r) = step.refusal {
                outcome.admitted = false;
                outcome.refusals.push(r);
                // The API server stops at a mutating webhook's refusal: nothing validates.
                if e.kind == WebhookKind::Mutating {
                    break;
                }
            }
            if let Some(patch) = step.patch {
                match apply(&mut outcome.object, &patch) {
                    Ok(()) => outcome.mutations.push(Mutation {
                        endpoint: e.path.to_owned(),
                        patch,
                        rules: step.applied.iter().map(|r| (*r).to_owned()).collect(),
                    }),
                    Err(msg) => {
                        outcome.admitted = false;
                        outcome.refusals.push(Refusal {
                            service: svc.name.to_owned(),
                            endpoint: e.path.to_owned(),
                            code: Some(500),
                            message: format!("the patch of {} does not apply: {msg}", e.path),
                            findings: Vec::new(),
                        });
                        break;
                    }
                }
            }
        }
        // A quota the object names that the state lacks matters only to a refusal (listing
        // the quotas for every object would cost each check the size of the state).
        if !outcome.admitted
            && let Some(quota) = self.absent_quota(&outcome.object)
        {
            outcome.add_missing(quota);
        }
        // Only objects the checked one names count: a lookup of optional configuration (a
        // ConfigMap whose absence means defaults) is no gap in the state.
        for a in self.recording.take() {
            if mentions(&outcome.sent, &a.name) {
                outcome.add_missing(a.to_string());
            }
        }
        if outcome.admitted {
            self.remember_unless_deleted(&outcome.object, s.operation);
        }
        outcome
    }

    /// The quota an object names by label when the state holds no quota of that name: an
    /// ElasticQuota's parent (the tree rules refuse a child without its parent) or a Pod's
    /// quota (PV-4 refuses a Pod charged to an unknown quota); the cluster may well have it.
    fn absent_quota(&self, object: &Value) -> Option<String> {
        use scheduling_webhook::quota::keys;
        let (label, role) = match (object["apiVersion"].as_str()?, object["kind"].as_str()?) {
            (_, "ElasticQuota") => (keys::PARENT, " (the parent)"),
            ("v1", "Pod") => (keys::NAME, ""),
            _ => return None,
        };
        let name = object["metadata"]["labels"][label].as_str()?;
        if name.is_empty() || [keys::ROOT, keys::SYSTEM, keys::DEFAULT].contains(&name) {
            return None;
        }
        let key = TypeKey {
            api_version: "scheduling.sigs.k8s.io/v1alpha1".into(),
            kind: "ElasticQuota".into(),
        };
        let quotas = self.state.list(&key, None).ok()?;
        let known = quotas
            .iter()
            .any(|q| q.metadata.name.as_deref() == Some(name));
        (!known).then(|| format!("ElasticQuota {name}{role}"))
    }

    fn remember_unless_deleted(&self, object: &Value, operation: Operation) {
        if operation != Operation::Delete {
            self.remember(object);
        }
    }

    /// The Priority admission plugin, which runs before any webhook: a new Pod's
    /// `spec.priority` (and `preemptionPolicy`) come from its PriorityClass, which the state
    /// must hold (the two system classes are built in).
    fn priority(&self, outcome: &mut Outcome) {
        let Some(spec) = outcome
            .object
            .get_mut("spec")
            .and_then(Value::as_object_mut)
        else {
            return;
        };
        if spec.contains_key("priority") {
            return;
        }
        let Some(class) = spec
            .get("priorityClassName")
            .and_then(Value::as_str)
            .filter(|c| !c.is_empty())
            .map(str::to_owned)
        else {
            return;
        };
        let builtin = scheduling_webhook::pod_validate::built_in_priority(&class).map(i64::from);
        let key = TypeKey {
            api_version: "scheduling.k8s.io/v1".into(),
            kind: "PriorityClass".into(),
        };
        let found = self.state.get(&key, None, &class).ok().flatten();
        let value = found
            .as_ref()
            .and_then(|pc| pc.data["value"].as_i64())
            .or(builtin);
        let Some(value) = value else {
            outcome.notes.push(format!(
                "PriorityClass {class} is not in the state: spec.priority is left unset (the API server refuses a Pod naming an unknown class; give it with --state or --profile)"
            ));
            outcome.add_missing(format!("PriorityClass {class}"));
            return;
        };
        spec.insert("priority".into(), value.into());
        let policy = found
            .as_ref()
            .and_then(|pc| pc.data["preemptionPolicy"].as_str().map(str::to_owned))
            .unwrap_or_else(|| "PreemptLowerPriority".to_owned());
        spec.entry("preemptionPolicy")
            .or_insert(Value::String(policy));
    }

    /// Adds an admitted object to the state later checks read (objects with only a
    /// generateName have no name to be found by and are left out).
    fn remember(&self, object: &Value) {
        if object["metadata"]["name"]
            .as_str()
            .is_none_or(str::is_empty)
        {
            return;
        }
        // A kind nothing reads would only cost memory (a run keeps every object it admits).
        let kind = (
            object["apiVersion"].as_str().unwrap_or_default().to_owned(),
            object["kind"].as_str().unwrap_or_default().to_owned(),
        );
        if !self.read_kinds.contains(&kind) {
            return;
        }
        // An object the state cannot hold (no name) is simply not remembered.
        let _ = self.state.add_value(object.clone());
    }
}

/// Whether an endpoint's objectSelector sends this object (the API server sends it when either
/// the new or the old object matches).
fn selector_matches(e: &Endpoint, object: &Value, old: Option<&Value>) -> bool {
    let Some(selector) = e.object_selector else {
        return true;
    };
    let has = |o: &Value| selector.matches(o["metadata"]["labels"][selector.key].as_str());
    has(object) || old.is_some_and(has)
}

/// What one endpoint answered.
struct Step {
    refusal: Option<Refusal>,
    warnings: Vec<String>,
    patch: Option<Value>,
    /// The ids of the rules that acted without refusing.
    applied: Vec<&'static str>,
}

fn raw(v: &Value) -> Option<Box<RawValue>> {
    serde_json::value::to_raw_value(v).ok()
}

fn call(
    svc: &Service,
    e: &Endpoint,
    s: &Subject<'_>,
    object: &Value,
    namespace: Option<&str>,
) -> Step {
    let t = &e.target;
    let resource = t.resource.split('/').next().unwrap_or_default().to_owned();
    let gvk = Gvk {
        group: t.group.clone(),
        version: t.version.clone(),
        kind: t.kind.clone(),
    };
    let gvr = Gvr {
        group: t.group.clone(),
        version: t.version.clone(),
        resource,
    };
    let user_info: UserInfo = s
        .user_info
        .and_then(|u| serde_json::from_value(u.clone()).ok())
        .unwrap_or_else(|| UserInfo {
            username: Some("admission-check".into()),
            groups: Some(vec!["system:authenticated".into()]),
            ..UserInfo::default()
        });
    let (new, old) = if s.operation == Operation::Delete {
        (None, Some(object))
    } else {
        (Some(object), s.old)
    };
    let review = ReviewIn {
        api_version: Some(V1.to_owned()),
        kind: Some("AdmissionReview".into()),
        request: Some(RawRequest {
            uid: "admission-check".into(),
            kind: gvk.clone(),
            resource: gvr.clone(),
            sub_resource: s.sub_resource.map(str::to_owned),
            request_kind: Some(gvk),
            request_resource: Some(gvr),
            name: Some(
                object["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            ),
            namespace: namespace.map(str::to_owned),
            operation: s.operation,
            user_info,
            object: new.and_then(raw),
            old_object: old.and_then(raw),
            dry_run: Some(false),
            options: None,
        }),
    };
    let refusal = |code: Option<u16>, message: String, findings: Vec<Finding>| Refusal {
        service: svc.name.to_owned(),
        endpoint: e.path.to_owned(),
        code,
        message,
        findings,
    };
    let answer = match e.handler.review(review, &svc.ctx) {
        Ok(a) => a,
        Err(err) => {
            let refused = |code: u16, rule: &str, message: String| Step {
                refusal: Some(refusal(
                    Some(code),
                    message,
                    vec![Finding {
                        rule: rule.into(),
                        field: String::new(),
                        message: err.to_string(),
                    }],
                )),
                warnings: Vec::new(),
                patch: None,
                applied: Vec::new(),
            };
            // controller-runtime's services answer with a refused review (code 400): the API
            // server refuses the object whatever the failure policy.
            if svc.decode_errors == DecodeErrors::Errored {
                return refused(400, "decode", err.to_string());
            }
            // Kthena's answer HTTP 400: the API server applies the endpoint's failure policy.
            let msg = format!("failed calling webhook {}: {err}", e.path);
            return match e.failure_policy {
                FailurePolicy::Fail => refused(500, "webhook-error", msg),
                FailurePolicy::Ignore => Step {
                    refusal: None,
                    warnings: vec![format!("{msg} (failurePolicy Ignore: admitted)")],
                    patch: None,
                    applied: Vec::new(),
                },
            };
        }
    };
    let r = answer.review.response;
    let findings = answer
        .decision
        .denials
        .into_iter()
        .map(
            |Denial {
                 rule,
                 field,
                 message,
             }| Finding {
                rule: rule.to_owned(),
                field,
                message,
            },
        )
        .collect();
    let patch = r
        .patch
        .as_deref()
        .and_then(|p| base64::engine::general_purpose::STANDARD.decode(p).ok())
        .and_then(|b| serde_json::from_slice(&b).ok());
    Step {
        refusal: (!r.allowed).then(|| {
            let status = r.status.unwrap_or_default();
            refusal(status.code, status.message, findings)
        }),
        warnings: r.warnings,
        patch,
        applied: answer.decision.applied,
    }
}

/// Whether a message starts with a rule id and a colon (`WQ-3: …`).
pub fn starts_with_rule_id(message: &str) -> bool {
    message
        .split_once(':')
        .is_some_and(|(id, _)| crate::rule_id::is_rule_id(id))
}

fn apply(object: &mut Value, patch: &Value) -> Result<(), String> {
    let p: json_patch::Patch = serde_json::from_value(patch.clone()).map_err(|e| e.to_string())?;
    json_patch::patch(object, &p).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(mutated: bool) -> Outcome {
        let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}});
        Outcome {
            mutations: if mutated {
                vec![Mutation {
                    endpoint: "/mutate-pod".into(),
                    patch: Value::Array(Vec::new()),
                    rules: Vec::new(),
                }]
            } else {
                Vec::new()
            },
            sent: pod.clone(),
            ..Outcome::admitted(if mutated { pod } else { Value::Null }, false)
        }
    }

    /// What a report reads of an unmutated object survives (its identity); a mutated one keeps
    /// both copies for the diff.
    #[test]
    fn outcomes_keep_what_reports_read() {
        let mut o = outcome(false);
        o.keep_only_what_reports_read();
        assert_eq!(
            o.sent,
            serde_json::json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "namespace": "ns"}})
        );
        let mut m = outcome(true);
        let before = m.sent.clone();
        m.keep_only_what_reports_read();
        assert_eq!((m.sent, m.object), (before.clone(), before));
    }
}
