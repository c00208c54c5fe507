//! A service's table of endpoints: what a webhook binary's `main` declares.

use std::sync::Arc;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Resource;
use kube::api::ApiResource;
use serde::{Deserialize, Serialize};

use crate::compat::gates::{FeatureGates, GateError};
use crate::review::envelope::Operation;
use crate::review::handler::{
    AdmitAll, Context, Handler, Mutating, Mutator, Validating, Validator,
};

/// Whether an endpoint validates or mutates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookKind {
    /// Registered in a ValidatingWebhookConfiguration.
    Validating,
    /// Registered in a MutatingWebhookConfiguration.
    Mutating,
}

/// What the API server does when the webhook cannot be reached or fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    /// The request is refused.
    Fail,
    /// The request goes through as if the webhook had allowed it.
    Ignore,
}

impl FailurePolicy {
    /// `Fail` or `Ignore`.
    pub fn as_str(self) -> &'static str {
        match self {
            FailurePolicy::Fail => "Fail",
            FailurePolicy::Ignore => "Ignore",
        }
    }
}

/// What an endpoint changes besides its answer (`sideEffects` of its webhook configuration).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SideEffects {
    /// Nothing: the API server may call it for dry runs.
    #[default]
    None,
    /// Something (a quota reservation), except on a dry run, which it honours.
    NoneOnDryRun,
}

impl SideEffects {
    /// `None` or `NoneOnDryRun`.
    pub fn as_str(self) -> &'static str {
        match self {
            SideEffects::None => "None",
            SideEffects::NoneOnDryRun => "NoneOnDryRun",
        }
    }
}

/// Which requests the API server sends to an endpoint (one rule of a webhook configuration).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// API group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Resource, with `/subresource` when it targets one.
    pub resource: String,
    /// The kind of the objects sent (what a manifest names; `admission-check` routes by it).
    pub kind: String,
    /// Whether the resource lives in namespaces.
    pub namespaced: bool,
    /// Operations sent.
    pub operations: &'static [Operation],
}

impl Target {
    /// The resource of a typed kind, for CREATE and UPDATE.
    pub fn of<K: Resource<DynamicType = ()>>() -> Self
    where
        K::Scope: 'static,
    {
        use std::any::TypeId;
        Self {
            group: K::group(&()).into_owned(),
            version: K::version(&()).into_owned(),
            resource: K::plural(&()).into_owned(),
            kind: K::kind(&()).into_owned(),
            namespaced: TypeId::of::<K::Scope>()
                == TypeId::of::<k8s_openapi::NamespaceResourceScope>(),
            operations: &[Operation::Create, Operation::Update],
        }
    }

    /// A namespaced resource (or subresource, `pods/binding`) whose objects are of `kind`, for
    /// CREATE and UPDATE; [`Target::cluster_scoped`] for the others.
    pub fn resource(group: &str, version: &str, resource: &str, kind: &str) -> Self {
        Self {
            group: group.to_owned(),
            version: version.to_owned(),
            resource: resource.to_owned(),
            kind: kind.to_owned(),
            namespaced: true,
            operations: &[Operation::Create, Operation::Update],
        }
    }

    /// No resource of its own: the endpoint is served but not registered from the table (not
    /// listed by `endpoints`), for kinds named in configuration at run time
    /// (scheduling-webhook's `/validate-workload`); self-registration registers them through
    /// [`App::registers_also`]. The handler reads the kind from each review.
    pub fn unregistered() -> Self {
        Self {
            group: String::new(),
            version: String::new(),
            resource: String::new(),
            kind: String::new(),
            namespaced: true,
            operations: &[Operation::Create, Operation::Update],
        }
    }

    /// Whether the endpoint has no resource of its own ([`Target::unregistered`]).
    pub fn is_unregistered(&self) -> bool {
        self.resource.is_empty()
    }

    /// The same target for a cluster-scoped resource.
    pub fn cluster_scoped(mut self) -> Self {
        self.namespaced = false;
        self
    }

    /// The same target for other operations.
    pub fn operations(mut self, ops: &'static [Operation]) -> Self {
        self.operations = ops;
        self
    }
}

/// How an [`ObjectSelector`] compares a label with its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SelectorOperator {
    /// The label is present with one of the values.
    In,
    /// The label is absent, or present with none of the values.
    NotIn,
}

impl SelectorOperator {
    /// The operator's name in a `LabelSelectorRequirement`.
    pub fn as_str(self) -> &'static str {
        match self {
            SelectorOperator::In => "In",
            SelectorOperator::NotIn => "NotIn",
        }
    }
}

/// An endpoint's `objectSelector`: one label requirement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectSelector {
    /// The label.
    pub key: &'static str,
    /// How its value is compared.
    pub operator: SelectorOperator,
    /// The values.
    pub values: &'static [&'static str],
}

impl ObjectSelector {
    /// Whether an object with this value of the label (`None`: no such label) is sent.
    pub fn matches(&self, value: Option<&str>) -> bool {
        let listed = value.is_some_and(|v| self.values.contains(&v));
        match self.operator {
            SelectorOperator::In => listed,
            SelectorOperator::NotIn => !listed,
        }
    }
}

/// One webhook endpoint.
#[derive(Clone)]
pub struct Endpoint {
    /// The URL path the API server posts to.
    pub path: &'static str,
    /// Validating or mutating.
    pub kind: WebhookKind,
    /// Runs the rules.
    pub handler: Arc<dyn Handler>,
    /// The failure policy this endpoint is registered with.
    pub failure_policy: FailurePolicy,
    /// What the API server sends here.
    pub target: Target,
    /// The feature gate that switches this endpoint's rules on; when off it admits everything.
    pub gate: Option<&'static str>,
    /// Only objects whose labels meet this requirement are sent (`objectSelector`).
    pub object_selector: Option<ObjectSelector>,
    /// What it changes besides its answer.
    pub side_effects: SideEffects,
    /// Registered only when this says its rules can refuse or change something under the
    /// service's options and gates ([`App::registered_if`]); served whatever it says.
    pub registered_when: Option<Setting<bool>>,
}

/// Something the service works out from its feature gates in force (the context at start,
/// with no cluster state yet) and from its typed options, which the closure holds.
pub type Setting<T> = Arc<dyn Fn(&Context) -> T + Send + Sync>;

/// The labels and annotations the rules read of a kind's objects (see [`App::keeping`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Keep {
    /// Label keys.
    pub labels: Vec<String>,
    /// Annotation keys.
    pub annotations: Vec<String>,
}

/// A kind the rules read, and which part of it to watch.
#[derive(Clone)]
pub struct WatchSpec {
    /// The kind.
    pub resource: ApiResource,
    /// Watch one object only: its namespace and name.
    pub only: Option<(String, String)>,
    /// Watched only when this says the rules will read the kind under the service's options and
    /// gates (a lookup of an unwatched kind fails; the rules must not make one then).
    pub needed: Option<Setting<bool>>,
    /// Keep only metadata (a metadata-only watch): the rules read nothing else of this kind.
    pub metadata_only: bool,
    /// Of a metadata-only watch, what the rules read of each object under the service's options:
    /// the cache then holds its namespace, name and these labels and annotations, nothing else.
    pub keep: Option<Setting<Keep>>,
    /// The kind may not be installed (a CRD of another project): until it is, the cache counts
    /// as synced and empty, so the service is ready and its other rules answer.
    pub optional: bool,
}

impl std::fmt::Debug for WatchSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchSpec")
            .field("resource", &self.resource)
            .field("only", &self.only)
            .field("needed", &self.needed.is_some())
            .field("metadata_only", &self.metadata_only)
            .field("keep", &self.keep.is_some())
            .field("optional", &self.optional)
            .finish()
    }
}

/// A webhook service: its name, endpoints, the kinds its rules read, and the CRDs it owns.
#[derive(Clone)]
pub struct App {
    /// Binary name.
    pub name: &'static str,
    /// One line for `--help`.
    pub about: &'static str,
    /// The endpoints.
    pub endpoints: Vec<Endpoint>,
    /// Kinds watched into the cluster state.
    pub watches: Vec<WatchSpec>,
    /// Makers of the CRDs of the kinds this service serves (printed by the `crd` command);
    /// generated on demand because large schemas are costly to build at every start.
    pub crds: Vec<fn() -> CustomResourceDefinition>,
    /// The service's feature gates and their defaults.
    pub gates: FeatureGates,
    /// How a review that cannot be decided (undecodable body or object) is answered.
    pub decode_errors: DecodeErrors,
    /// Endpoints self-registration adds ([`App::registers_also`]).
    pub extra_endpoints: Vec<EndpointInfo>,
    /// Seconds the API server waits for an answer (`timeoutSeconds` of every webhook).
    pub timeout_seconds: i32,
}

/// The API server's wait for an answer when a service does not set its own (Kubernetes'
/// default and upstream's).
pub const DEFAULT_TIMEOUT_SECONDS: i32 = 10;

/// How a review that cannot be decided (its body, request or object does not decode) is
/// answered. Each upstream answers its own way, and the API server acts differently on each,
/// so every service keeps its upstream's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DecodeErrors {
    /// controller-runtime's (Koordinator, Training Operator): HTTP 200 with an AdmissionReview
    /// `allowed: false`, `status: {code: 400, message}`. The API server refuses the object with
    /// the message whatever the failure policy (an `Ignore` webhook does not let it through).
    #[default]
    Errored,
    /// Kthena's: HTTP 400 with a plain-text message (`failed to decode object: …`). The API
    /// server counts the call as failed and applies the webhook's failure policy.
    PlainText,
}

/// An app with its feature gates applied.
pub struct Prepared {
    /// Endpoints whose gate is off answer with [`AdmitAll`].
    pub app: App,
    /// The gates in force.
    pub gates: std::sync::Arc<FeatureGates>,
    /// `(path, gate)` of every endpoint switched off.
    pub disabled: Vec<(&'static str, &'static str)>,
}

impl App {
    /// An app with no endpoints yet.
    pub fn new(name: &'static str, about: &'static str) -> Self {
        Self {
            name,
            about,
            endpoints: Vec::new(),
            watches: Vec::new(),
            crds: Vec::new(),
            gates: FeatureGates::default(),
            decode_errors: DecodeErrors::default(),
            extra_endpoints: Vec::new(),
            timeout_seconds: DEFAULT_TIMEOUT_SECONDS,
        }
    }

    /// How long the API server waits for this service's answers (self-registration's
    /// `timeoutSeconds`; [`DEFAULT_TIMEOUT_SECONDS`] unless set).
    pub fn timeout_seconds(mut self, seconds: i32) -> Self {
        self.timeout_seconds = seconds;
        self
    }

    /// Endpoints self-registration adds to the endpoint table's, worked out from the service's
    /// options: the webhooks of an endpoint whose kinds are configured ([`Target::unregistered`]).
    pub fn registers_also(mut self, extra: Vec<EndpointInfo>) -> Self {
        self.extra_endpoints.extend(extra);
        self
    }

    /// How reviews that do not decode are answered (controller-runtime's way by default).
    pub fn decode_errors(mut self, how: DecodeErrors) -> Self {
        self.decode_errors = how;
        self
    }

    /// Declares the service's feature gates with their defaults.
    pub fn feature_gates(mut self, defaults: &[(&'static str, bool)]) -> Self {
        self.gates = FeatureGates::new(defaults);
        self
    }

    /// Makes the endpoint added last depend on feature gate `name`.
    pub fn gate(mut self, name: &'static str) -> Self {
        if let Some(e) = self.endpoints.last_mut() {
            e.gate = Some(name);
        }
        self
    }

    /// Applies `--feature-gates` overrides (if any) to the defaults and switches off the
    /// endpoints whose gate is off.
    pub fn prepare(&self, overrides: Option<&str>) -> Result<Prepared, GateError> {
        let mut gates = self.gates.clone();
        if let Some(o) = overrides {
            gates.apply(o)?;
        }
        let mut app = self.clone();
        let mut disabled = Vec::new();
        for e in &mut app.endpoints {
            if let Some(g) = e.gate
                && !gates.enabled(g)
            {
                e.handler = std::sync::Arc::new(AdmitAll);
                disabled.push((e.path, g));
            }
        }
        Ok(Prepared {
            app,
            gates: std::sync::Arc::new(gates),
            disabled,
        })
    }

    /// Adds a validating endpoint.
    pub fn validate<V: Validator>(
        mut self,
        path: &'static str,
        target: Target,
        failure_policy: FailurePolicy,
        v: V,
    ) -> Self {
        self.endpoints.push(Endpoint {
            path,
            kind: WebhookKind::Validating,
            handler: Arc::new(Validating(v)),
            failure_policy,
            target,
            gate: None,
            object_selector: None,
            side_effects: SideEffects::None,
            registered_when: None,
        });
        self
    }

    /// Adds one validating endpoint per `(path, target)`, each with its own validator from
    /// `validator` (one rule family serving several kinds).
    pub fn validate_each<V: Validator>(
        self,
        endpoints: impl IntoIterator<Item = (&'static str, Target)>,
        failure_policy: FailurePolicy,
        validator: impl Fn() -> V,
    ) -> Self {
        endpoints.into_iter().fold(self, |app, (path, target)| {
            app.validate(path, target, failure_policy, validator())
        })
    }

    /// Adds a mutating endpoint.
    pub fn mutate<M: Mutator>(
        mut self,
        path: &'static str,
        target: Target,
        failure_policy: FailurePolicy,
        m: M,
    ) -> Self {
        self.endpoints.push(Endpoint {
            path,
            kind: WebhookKind::Mutating,
            handler: Arc::new(Mutating(m)),
            failure_policy,
            target,
            gate: None,
            object_selector: None,
            side_effects: SideEffects::None,
            registered_when: None,
        });
        self
    }

    fn with_watch<K: Resource<DynamicType = ()>>(
        mut self,
        only: Option<(String, String)>,
        needed: Option<Setting<bool>>,
        metadata_only: bool,
    ) -> Self {
        self.watches.push(WatchSpec {
            resource: ApiResource::erase::<K>(&()),
            only,
            needed,
            metadata_only,
            keep: None,
            optional: false,
        });
        self
    }

    /// As [`App::watch`] for a kind whose CRD may be absent from the cluster (the rules of other
    /// kinds must not wait for it): while the API server does not know the kind, lookups find
    /// nothing; the watch keeps retrying and fills the cache once the CRD is installed.
    pub fn watch_optional<K: Resource<DynamicType = ()>>(mut self) -> Self {
        self = self.with_watch::<K>(None, None, false);
        if let Some(w) = self.watches.last_mut() {
            w.optional = true;
        }
        self
    }

    /// Declares that rules read objects of kind `K` from the cluster state.
    pub fn watch<K: Resource<DynamicType = ()>>(self) -> Self {
        self.with_watch::<K>(None, None, false)
    }

    /// As [`App::watch`] for a kind whose rules read only metadata (names, labels, annotations):
    /// the watch asks the API server for metadata alone and the cache holds nothing else, so a
    /// cluster's Pods or Nodes (the largest objects, and the most) cost a fraction of their full
    /// size. A rule reading anything else of such an object would find it empty.
    pub fn watch_metadata<K: Resource<DynamicType = ()>>(self) -> Self {
        self.with_watch::<K>(None, None, true)
    }

    /// As [`App::watch_metadata`], but only when `needed` says a rule will read the kind under
    /// the service's options (which it holds) and gates (its context, with no cluster state yet):
    /// otherwise the
    /// watch and its cache would cost CPU on every change of every object of the kind, and memory
    /// for each, for nothing. The rules must not look the kind up then (the lookup fails).
    pub fn watch_metadata_if<K: Resource<DynamicType = ()>>(
        self,
        needed: impl Fn(&Context) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.with_watch::<K>(None, Some(Arc::new(needed)), true)
    }

    /// Of the metadata-only watch declared last, the rules read only each object's namespace,
    /// name and the labels and annotations `keep` names under the service's options: the cache
    /// holds nothing else of it, about a fifth of a Pod's metadata (a cluster's Pods are its most
    /// numerous objects). A rule reading anything else of a cached object finds it empty.
    pub fn keeping(mut self, keep: impl Fn(&Context) -> Keep + Send + Sync + 'static) -> Self {
        if let Some(w) = self.watches.last_mut() {
            w.keep = Some(Arc::new(keep));
        }
        self
    }

    /// Declares that rules read one object of kind `K`, `namespace`/`name`: only it is watched.
    pub fn watch_one<K: Resource<DynamicType = ()>>(
        self,
        namespace: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        self.with_watch::<K>(Some((namespace.into(), name.into())), None, false)
    }

    /// Declares that the endpoint added last changes something besides its answer (a quota
    /// reservation), except on dry runs.
    pub fn side_effects(mut self, s: SideEffects) -> Self {
        if let Some(e) = self.endpoints.last_mut() {
            e.side_effects = s;
        }
        self
    }

    /// Registers the endpoint added last only when `when` says its rules can act under the
    /// service's options and gates: otherwise it admits every review unchanged, and a webhook
    /// the API server need not call costs every write it matches a round trip (a Pod binding
    /// endpoint whose rule is off: one call per scheduled Pod). Self-registration follows it;
    /// manifests register such an endpoint in the component that turns its rule on.
    pub fn registered_if(
        mut self,
        when: impl Fn(&Context) -> bool + Send + Sync + 'static,
    ) -> Self {
        if let Some(e) = self.endpoints.last_mut() {
            e.registered_when = Some(Arc::new(when));
        }
        self
    }

    /// Restricts the endpoint added last to objects whose label `key` has one of `values`.
    pub fn object_selector(self, key: &'static str, values: &'static [&'static str]) -> Self {
        self.selecting(ObjectSelector {
            key,
            operator: SelectorOperator::In,
            values,
        })
    }

    /// Restricts the endpoint added last to objects whose label `key` is absent or has none of
    /// `values` (an opt-out label).
    pub fn object_selector_not_in(
        self,
        key: &'static str,
        values: &'static [&'static str],
    ) -> Self {
        self.selecting(ObjectSelector {
            key,
            operator: SelectorOperator::NotIn,
            values,
        })
    }

    fn selecting(mut self, selector: ObjectSelector) -> Self {
        if let Some(e) = self.endpoints.last_mut() {
            e.object_selector = Some(selector);
        }
        self
    }

    /// Declares a CRD this service serves, by the function that makes it.
    pub fn crd(mut self, crd: fn() -> CustomResourceDefinition) -> Self {
        self.crds.push(crd);
        self
    }

    /// The CRDs this service serves.
    pub fn custom_resource_definitions(&self) -> Vec<CustomResourceDefinition> {
        self.crds.iter().map(|f| f()).collect()
    }

    /// The endpoint at `path`.
    pub fn endpoint(&self, path: &str) -> Option<&Endpoint> {
        self.endpoints.iter().find(|e| e.path == path)
    }
}

/// An endpoint's `objectSelector` as the endpoint table lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelectorInfo {
    /// The label.
    pub key: String,
    /// `In` or `NotIn`.
    pub operator: SelectorOperator,
    /// The values.
    pub values: Vec<String>,
}

/// One endpoint as registration sees it; `<binary> endpoints` prints these as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointInfo {
    /// URL path.
    pub path: String,
    /// `Validating` or `Mutating`.
    pub kind: String,
    /// `Fail` or `Ignore`.
    pub failure_policy: String,
    /// API group of the target resource.
    pub group: String,
    /// API version.
    pub version: String,
    /// Resource (with `/subresource` when it targets one).
    pub resource: String,
    /// Operations.
    pub operations: Vec<String>,
    /// `objectSelector`: one label requirement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_selector: Option<SelectorInfo>,
    /// `sideEffects`: `None` or `NoneOnDryRun`.
    #[serde(default = "no_side_effects")]
    pub side_effects: String,
    /// The webhook's name before the configuration's (`<name>.<configuration>.admission.local`)
    /// when not the path's: several webhooks on one path ([`crate::App::registers_also`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

fn no_side_effects() -> String {
    "None".into()
}

impl EndpointInfo {
    /// Every endpoint of an app that can be registered (not those of [`Target::unregistered`]),
    /// whatever the options: what the `endpoints` command prints.
    ///
    /// [`Target::unregistered`]: crate::Target::unregistered
    pub fn of(app: &App) -> Vec<Self> {
        Self::matching(app, |_| true)
    }

    /// The endpoints registered under the options and gates of `settings`: those of
    /// [`EndpointInfo::of`] but an endpoint whose [`App::registered_if`] condition is false.
    pub fn registered(app: &App, settings: &Context) -> Vec<Self> {
        Self::matching(app, |e| {
            e.registered_when.as_ref().is_none_or(|when| when(settings))
        })
    }

    fn matching(app: &App, keep: impl Fn(&Endpoint) -> bool) -> Vec<Self> {
        app.endpoints
            .iter()
            .filter(|e| !e.target.is_unregistered() && keep(e))
            .map(|e| Self {
                path: e.path.to_owned(),
                kind: match e.kind {
                    WebhookKind::Validating => "Validating".into(),
                    WebhookKind::Mutating => "Mutating".into(),
                },
                failure_policy: e.failure_policy.as_str().to_owned(),
                group: e.target.group.clone(),
                version: e.target.version.clone(),
                resource: e.target.resource.clone(),
                operations: e
                    .target
                    .operations
                    .iter()
                    .map(|o| o.as_str().to_owned())
                    .collect(),
                object_selector: e.object_selector.map(|s| SelectorInfo {
                    key: s.key.to_owned(),
                    operator: s.operator,
                    values: s.values.iter().map(|v| (*v).to_owned()).collect(),
                }),
                side_effects: e.side_effects.as_str().to_owned(),
                name: None,
            })
            .collect()
    }

    /// Registers the endpoint as enforcement mode `mode` needs: an endpoint on trial (`warn`,
    /// `audit`) with failurePolicy `Ignore`, whatever its table says.
    pub fn enforce(&mut self, mode: crate::review::mode::Enforcement) {
        if mode != crate::review::mode::Enforcement::Enforce {
            self.failure_policy = FailurePolicy::Ignore.as_str().to_owned();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::review::handler::{Context, Request, Verdict};

    /// Admits everything.
    struct Nothing;

    impl Validator for Nothing {
        type Object = serde_json::Value;
        fn validate(&self, _: &Request<serde_json::Value>, _: &Context) -> Verdict {
            Verdict::default()
        }
    }

    #[test]
    fn endpoints_on_trial_register_with_ignore() {
        use crate::review::mode::Enforcement;
        let app = App::new("t", "t").validate(
            "/v",
            Target::resource("g", "v1", "things", "Thing"),
            FailurePolicy::Fail,
            Nothing,
        );
        for (mode, want) in [
            (Enforcement::Enforce, "Fail"),
            (Enforcement::Warn, "Ignore"),
            (Enforcement::Audit, "Ignore"),
        ] {
            let mut e = EndpointInfo::of(&app).remove(0);
            e.enforce(mode);
            assert_eq!(e.failure_policy, want, "{mode}");
        }
    }

    #[test]
    fn an_endpoint_registered_if_is_left_out_when_its_condition_is_false() {
        use crate::review::lookup::EmptyState;
        let thing = |path| (path, Target::resource("g", "v1", "things", "Thing"));
        // The service's typed option, held by the condition.
        let app = |on: bool| {
            App::new("t", "t")
                .feature_gates(&[("Things", true)])
                .validate_each(
                    [thing("/always"), thing("/sometimes")],
                    FailurePolicy::Fail,
                    || Nothing,
                )
                .registered_if(move |ctx| on && ctx.gates().enabled("Things"))
        };
        let paths = |app: &App, gates: &str| {
            let Ok(prepared) = app.prepare(Some(gates)) else {
                return vec!["bad gates".to_owned()];
            };
            let settings = Context::new(Arc::new(EmptyState)).with_gates(prepared.gates);
            EndpointInfo::registered(app, &settings)
                .into_iter()
                .map(|e| e.path)
                .collect::<Vec<_>>()
        };
        assert_eq!(paths(&app(true), "Things=true"), ["/always", "/sometimes"]);
        assert_eq!(paths(&app(true), "Things=false"), ["/always"]);
        assert_eq!(paths(&app(false), "Things=true"), ["/always"]);
        assert_eq!(
            EndpointInfo::of(&app(false)).len(),
            2,
            "every endpoint is listed"
        );
    }

    #[test]
    fn object_selectors_match_as_the_api_server_does() {
        let opt_in = ObjectSelector {
            key: "k",
            operator: SelectorOperator::In,
            values: &["a"],
        };
        let opt_out = ObjectSelector {
            operator: SelectorOperator::NotIn,
            values: &["disabled"],
            ..opt_in
        };
        assert!(opt_in.matches(Some("a")));
        assert!(!opt_in.matches(Some("b")) && !opt_in.matches(None));
        assert!(opt_out.matches(None) && opt_out.matches(Some("enabled")));
        assert!(!opt_out.matches(Some("disabled")));
    }
}
