//! Typed handlers and the adapter that runs them on raw AdmissionReviews.
//!
//! A [`Validator`] sees the decoded object and returns field errors; a [`Mutator`] edits a typed
//! copy and the kit computes the JSON Patch by diffing, so fields the types do not know are never
//! dropped. The same [`Handler::review`] runs in the HTTPS server and in the offline `review`
//! command.

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine as _;
use futures::FutureExt as _;
use futures::future::BoxFuture;
use json_patch::{Patch, PatchOperation};
use k8s_openapi::api::authentication::v1::UserInfo;
use kube::Resource;
use kube::api::DynamicObject;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::compat::gates::FeatureGates;
use crate::review::diff;
use crate::review::envelope::{
    Gvk, Gvr, Operation, RawRequest, Response, ReviewIn, ReviewOut, Status,
};
use crate::review::field::{ErrorList, FieldError};
use crate::review::lookup::{ClusterState, EmptyState, LookupError, TypeKey};
use crate::review::skeleton::{self, tokens};
use crate::review::unmanaged::Unmanaged;

mod decode;
pub mod patch;
use decode::*;
use patch::typed_patch;

/// What rules may read besides the request: cluster state and feature gates.
#[derive(Clone)]
pub struct Context {
    state: Arc<dyn ClusterState>,
    gates: Arc<FeatureGates>,
    peer: Option<Peer>,
}

/// Where a review came from: its connection's TCP peer, and whether that connection presented
/// the API server's client certificate (`--client-ca-file`). Rides in the request's extensions
/// from the server to [`Context::peer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// The peer's address (an IPv4-mapped IPv6 address as IPv4).
    pub ip: std::net::IpAddr,
    /// The handshake proved the API server's certificate: nobody else can send on it.
    pub authenticated: bool,
}

impl Default for Context {
    fn default() -> Self {
        Self::new(Arc::new(EmptyState))
    }
}

impl Context {
    /// A context reading `state`, with no feature gates.
    pub fn new(state: Arc<dyn ClusterState>) -> Self {
        Self {
            state,
            gates: Arc::new(FeatureGates::default()),
            peer: None,
        }
    }

    /// The same context for a review that arrived from `peer`.
    pub fn with_peer(mut self, peer: Option<Peer>) -> Self {
        self.peer = peer;
        self
    }

    /// Where the review came from, when it came over the network: its address is the one thing
    /// about its sender that a review cannot forge where the API server presents no
    /// certificate. `None` offline (`review`, `admission-check`) and in unit tests.
    pub fn peer(&self) -> Option<Peer> {
        self.peer
    }

    /// The same context with these feature gates.
    pub fn with_gates(mut self, gates: Arc<FeatureGates>) -> Self {
        self.gates = gates;
        self
    }

    /// The feature gates in force.
    pub fn gates(&self) -> &FeatureGates {
        &self.gates
    }

    /// Looks up one object of kind `K`.
    pub fn get<K: Resource<DynamicType = ()>>(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<DynamicObject>>, LookupError> {
        if name.is_empty() {
            return Err(LookupError::EmptyName);
        }
        self.state.get(&TypeKey::of::<K>(), namespace, name)
    }

    /// Lists objects of kind `K`, optionally in one namespace.
    pub fn list<K: Resource<DynamicType = ()>>(
        &self,
        namespace: Option<&str>,
    ) -> Result<Vec<Arc<DynamicObject>>, LookupError> {
        self.state.list(&TypeKey::of::<K>(), namespace)
    }

    /// The generation of kind `K`'s objects ([`ClusterState::generation`]).
    pub fn generation<K: Resource<DynamicType = ()>>(
        &self,
    ) -> Option<crate::review::lookup::Generation> {
        self.state.generation(&TypeKey::of::<K>())
    }

    /// Kind `K`'s objects added since `since` ([`ClusterState::added_since`]).
    pub fn added_since<K: Resource<DynamicType = ()>>(
        &self,
        since: crate::review::lookup::Generation,
    ) -> Option<Vec<Arc<DynamicObject>>> {
        self.state.added_since(&TypeKey::of::<K>(), since)
    }

    /// One object of any kind as the API server has it now ([`ClusterState::read_now`]).
    pub fn read_now(
        &self,
        resource: &kube::api::ApiResource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Arc<DynamicObject>>, LookupError> {
        if name.is_empty() {
            return Err(LookupError::EmptyName);
        }
        self.state.read_now(resource, namespace, name)
    }

    /// The underlying state.
    pub fn state(&self) -> &Arc<dyn ClusterState> {
        &self.state
    }
}

/// A review request with its object decoded as `T`.
#[derive(Debug, Clone)]
pub struct Request<T> {
    /// The review's uid.
    pub uid: String,
    /// The object's kind as stored.
    pub kind: Gvk,
    /// The resource addressed.
    pub resource: Gvr,
    /// The subresource, if any.
    pub sub_resource: Option<String>,
    /// The object's name.
    pub name: String,
    /// The object's namespace.
    pub namespace: Option<String>,
    /// The operation.
    pub operation: Operation,
    /// Who asked.
    pub user_info: UserInfo,
    /// Whether this is a dry run.
    pub dry_run: bool,
    /// The object under review: `request.object`, or for DELETE the object being deleted
    /// (`request.oldObject`).
    pub object: T,
    /// The existing object on UPDATE.
    pub old_object: Option<T>,
}

/// What a handler concluded.
#[derive(Debug, Default, Clone)]
pub struct Verdict {
    /// Every problem found; any error denies.
    pub errors: ErrorList,
    /// Warnings returned to the client whatever the decision.
    pub warnings: Vec<String>,
    /// Audit annotations recorded by the API server.
    pub audit_annotations: BTreeMap<String, String>,
    /// Ids of rules that acted without an error (mutations applied), for the decision log.
    pub applied: Vec<&'static str>,
    /// A refusal with exactly this status, for upstreams whose denials are not field-error
    /// lists (controller-runtime's `Errored(code, err)` / `Denied(reason)`): the rule id and the
    /// status sent. Takes precedence over `errors` for the status text.
    pub refusal: Option<(&'static str, Status)>,
    /// The field `refusal` is about (`metadata.labels[…]`), empty when none: the decision log
    /// and admission-check locate it; the status sent is unchanged.
    pub refusal_field: String,
}

impl Verdict {
    /// A refusal with status `code` and `message` only (controller-runtime's `Errored`).
    pub fn errored(rule: &'static str, code: u16, message: impl Into<String>) -> Self {
        Self {
            refusal: Some((rule, Status::errored(code, message))),
            ..Self::default()
        }
    }

    /// This verdict, its `refusal` about `field`.
    pub fn at(mut self, field: impl Into<String>) -> Self {
        self.refusal_field = field.into();
        self
    }

    /// Whether the review is admitted.
    pub fn allowed(&self) -> bool {
        self.errors.is_empty() && self.refusal.is_none()
    }
}

impl From<ErrorList> for Verdict {
    fn from(errors: ErrorList) -> Self {
        Self {
            errors,
            ..Self::default()
        }
    }
}

/// The default denial: Kubernetes' "is invalid" status, code 422, every error listed.
pub fn invalid_status(kind: &str, name: &str, errors: &[FieldError]) -> Status {
    let list: Vec<String> = errors.iter().map(ToString::to_string).collect();
    let body = if list.len() == 1 {
        list.join("")
    } else {
        format!("[{}]", list.join(", "))
    };
    Status::failure(
        422,
        "Invalid",
        format!("{kind} {name:?} is invalid: {body}"),
    )
}

/// Checks an object and returns its problems.
pub trait Validator: Send + Sync + 'static {
    /// The object type the review's object decodes into.
    type Object: DeserializeOwned + Send + Sync;

    /// Runs every rule; all errors are collected.
    fn validate(&self, req: &Request<Self::Object>, ctx: &Context) -> Verdict;

    /// Whether a rule waits for another service under `ctx` (a gRPC dependency). The server then
    /// awaits [`Validator::validate_async`] on the connection's task: a synchronous rule would
    /// have to take a runtime thread out of service (`block_in_place`) for every answer.
    fn waits(&self, _ctx: &Context) -> bool {
        false
    }

    /// The same rules in the same order as [`Validator::validate`], awaiting the dependency
    /// instead of blocking on it; what the server runs when [`Validator::waits`]. The default
    /// runs `validate`.
    fn validate_async<'a>(
        &'a self,
        req: &'a Request<Self::Object>,
        ctx: &'a Context,
    ) -> impl Future<Output = Verdict> + Send + 'a {
        std::future::ready(self.validate(req, ctx))
    }

    /// What Go's typed decoder refuses in a decoded object that serde accepted (quantities,
    /// which k8s-openapi keeps as text): an `Err` is answered as a decode error, as upstream
    /// answers it. Checked on the object and on the old object.
    fn check_decoded(&self, _object: &Self::Object) -> Result<(), String> {
        Ok(())
    }

    /// Whether the rules read `request.oldObject`. When not (Kthena's handlers never decode
    /// it), the old object is not typed and cannot fail the review, as upstream's cannot.
    fn reads_old_object(&self) -> bool {
        true
    }

    /// Whether the rules read `metadata.managedFields`. When not, the objects are decoded
    /// without them (a tenth of a Pod review's CPU; the kit's `review::unmanaged` module), with
    /// the same answers: what their full decode would refuse is still refused.
    fn reads_managed_fields(&self) -> bool {
        true
    }

    /// Turns the errors into the denial's status. Override to match an upstream's wording.
    fn denial(&self, req: &Request<Self::Object>, errors: &[FieldError]) -> Status {
        invalid_status(&req.kind.kind, &req.name, errors)
    }

    /// The status sent with an admission, if the upstream sends one (controller-runtime's
    /// `Allowed` carries `{"code": 200}`).
    fn allowed_status(&self) -> Option<Status> {
        None
    }
}

/// Edits an object; the kit sends the difference as a JSON Patch.
pub trait Mutator: Send + Sync + 'static {
    /// The object type the review's object decodes into. Its serialisation must be stable: a
    /// decoded and re-encoded object must equal itself, so only real edits show in the diff.
    /// `PartialEq` lets the kit skip all patch work when the mutator changed nothing.
    type Object: DeserializeOwned + Serialize + Clone + PartialEq + Send + Sync + 'static;

    /// What Go's typed decoder refuses in a decoded object that serde accepted (see
    /// [`Validator::check_decoded`]).
    fn check_decoded(&self, _object: &Self::Object) -> Result<(), String> {
        Ok(())
    }

    /// Whether the rules read `request.oldObject`. When not (Kthena's handlers never decode
    /// it), the old object is not typed and cannot fail the review, as upstream's cannot.
    fn reads_old_object(&self) -> bool {
        true
    }

    /// Whether the rules read `metadata.managedFields` (see
    /// [`Validator::reads_managed_fields`]); never patched when they do not.
    fn reads_managed_fields(&self) -> bool {
        true
    }

    /// Whether empty values the edit adds under absent keys (`metadata: {}`, `apiGroup: null`)
    /// stay in the patch. By default they are left out (they change nothing a decoder reads,
    /// and typed objects create them when a rule reaches into an absent parent); a mutator
    /// that reproduces its upstream's re-encoding keeps them, as that upstream's patch does.
    fn keeps_empty_additions(&self) -> bool {
        false
    }

    /// Edits `object` in place. Errors deny (and no patch is sent).
    fn mutate(
        &self,
        req: &Request<Self::Object>,
        object: &mut Self::Object,
        ctx: &Context,
    ) -> Verdict;

    /// Turns the errors into the denial's status.
    fn denial(&self, req: &Request<Self::Object>, errors: &[FieldError]) -> Status {
        invalid_status(&req.kind.kind, &req.name, errors)
    }
}

/// A review that could not be answered with a decision: the HTTP answer is 400.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReviewError {
    /// The body is not JSON or not shaped like an AdmissionReview.
    #[error("cannot decode the AdmissionReview: {0}")]
    Body(String),
    /// The review has no request.
    #[error("the AdmissionReview has no request")]
    NoRequest,
    /// The request lacks the object its operation needs.
    #[error("the AdmissionReview request carries no {0} (required for {1})")]
    NoObject(&'static str, &'static str),
    /// The object does not decode into the handler's types.
    #[error("cannot decode {0}: {1}")]
    Object(&'static str, String),
}

impl ReviewError {
    /// Kthena's plain-text answer for this error (HX-02 … HX-05 of the registry spec).
    pub fn plain_text(&self) -> String {
        match self {
            Self::Body(e) => format!("failed to decode body: {e}"),
            Self::NoRequest => "admission review request is nil".to_owned(),
            Self::NoObject(..) => "empty object in admission request".to_owned(),
            Self::Object(_, e) => format!("failed to decode object: {e}"),
        }
    }

    /// controller-runtime's message for this error: the decoder's text as it is (a quantity's
    /// error starts with apimachinery's words), `there is no content to decode` for a missing
    /// object.
    fn errored_text(&self) -> String {
        match self {
            Self::NoObject(..) => "there is no content to decode".to_owned(),
            Self::Object("object", e) => e.clone(),
            Self::Object(what, e) => format!("{e} (in {what})"),
            other => other.to_string(),
        }
    }

    /// controller-runtime's answer for this error: the review refused with `code: 400` and the
    /// error as message (its `Errored(http.StatusBadRequest, err)`), in `api_version` and
    /// echoing `uid`.
    pub fn errored_review(&self, api_version: &str, uid: String) -> ReviewOut {
        ReviewOut::new(
            api_version,
            crate::review::envelope::Response {
                uid,
                allowed: false,
                status: Some(Status::errored(400, self.errored_text())),
                ..crate::review::envelope::Response::default()
            },
        )
    }
}

/// What the log, metrics and traces record of one decision.
#[derive(Debug, Clone, Default)]
pub struct Decision {
    /// The review's uid.
    pub uid: String,
    /// The object's kind.
    pub kind: String,
    /// The object's namespace.
    pub namespace: String,
    /// The object's name.
    pub name: String,
    /// The operation.
    pub operation: &'static str,
    /// Whether it was admitted.
    pub allowed: bool,
    /// Whether a patch was sent.
    pub patched: bool,
    /// The JSON Patch's length in bytes (before base64), 0 when none.
    pub patch_bytes: usize,
    /// Each reason for the denial: its rule, field and message (the log and metrics keep the
    /// rule ids, `admission-check` reports all of it).
    pub denials: Vec<Denial>,
    /// Ids of rules that acted without denying.
    pub applied: Vec<&'static str>,
    /// How many warnings the answer carries.
    pub warnings: usize,
    /// Whether this was a dry run.
    pub dry_run: bool,
    /// The endpoint's enforcement mode when the answer was sent.
    pub enforcement: crate::review::mode::Enforcement,
    /// The rules denied but the mode admitted (`warn`, `audit`): `denials` are would-be denials.
    pub would_deny: bool,
    /// The JSON Patch the rules made and `audit` did not send.
    pub withheld_patch: Option<String>,
}

impl Decision {
    /// The ids of the rules that denied, comma-separated when displayed (no allocation).
    pub fn rules(&self) -> impl std::fmt::Display + '_ {
        struct Rules<'a>(&'a [Denial]);
        impl std::fmt::Display for Rules<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                for (i, d) in self.0.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    f.write_str(d.rule)?;
                }
                Ok(())
            }
        }
        Rules(&self.denials)
    }
}

/// One reason a review was denied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The rule id from the spec.
    pub rule: &'static str,
    /// The offending field (`spec.replicas`), empty for a refusal that names none.
    pub field: String,
    /// What is wrong with it, without the field.
    pub message: String,
}

/// The answer to one review.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The AdmissionReview to send back.
    pub review: ReviewOut,
    /// What to record.
    pub decision: Decision,
}

/// A type-erased handler: raw review in, answer out.
pub trait Handler: Send + Sync {
    /// Decides one review.
    fn review(&self, review: ReviewIn, ctx: &Context) -> Result<Answer, ReviewError>;

    /// Decides the review in `body`, an AdmissionReview's JSON: what [`review_body`] runs. The
    /// default decodes the envelope, objects raw, and runs [`Handler::review`].
    fn review_bytes(&self, body: &[u8], ctx: &Context) -> Result<Answer, ReviewError> {
        self.review(envelope(body)?, ctx)
    }

    /// [`Handler::review_bytes`] awaiting the services the rules wait for: what
    /// [`review_body_async`] runs. The default decodes the envelope and runs
    /// [`Handler::review_async`].
    fn review_bytes_async<'a>(
        &'a self,
        body: &'a [u8],
        ctx: &'a Context,
    ) -> BoxFuture<'a, Result<Answer, ReviewError>> {
        match envelope(body) {
            Ok(review) => self.review_async(review, ctx),
            Err(e) => Box::pin(std::future::ready(Err(e))),
        }
    }

    /// Whether the server should await [`Handler::review_async`] rather than call
    /// [`Handler::review`] (see [`Validator::waits`]).
    fn waits(&self, _ctx: &Context) -> bool {
        false
    }

    /// Whether its patches keep empty values added under absent keys (see
    /// [`Mutator::keeps_empty_additions`]); property checks read it.
    fn keeps_empty_additions(&self) -> bool {
        false
    }

    /// Decides one review, awaiting the services its rules wait for. The default runs
    /// [`Handler::review`].
    fn review_async<'a>(
        &'a self,
        review: ReviewIn,
        ctx: &'a Context,
    ) -> BoxFuture<'a, Result<Answer, ReviewError>> {
        Box::pin(std::future::ready(self.review(review, ctx)))
    }
}

/// Runs rules written as a future from synchronous code (the `review` command, fixtures, a
/// [`Validator::validate`] that shares its rules with [`Validator::validate_async`]): at once
/// when nothing waits, else by lending this worker thread of the multi-threaded runtime to the
/// wait (`block_in_place`). `None` when it would wait outside such a runtime.
pub fn wait_for<F: Future>(fut: F) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    if let Some(out) = fut.as_mut().now_or_never() {
        return Some(out);
    }
    let handle = tokio::runtime::Handle::try_current()
        .ok()
        .filter(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)?;
    Some(tokio::task::block_in_place(|| handle.block_on(fut)))
}

/// Decodes a body and runs `handler` on it: the one code path of the server and of `review`.
pub fn review_body(
    handler: &dyn Handler,
    body: &[u8],
    ctx: &Context,
) -> Result<Answer, ReviewError> {
    handler.review_bytes(body, ctx)
}

/// [`review_body`] for handlers that wait ([`Handler::waits`]): what the server awaits.
pub async fn review_body_async(
    handler: &dyn Handler,
    body: &[u8],
    ctx: &Context,
) -> Result<Answer, ReviewError> {
    handler.review_bytes_async(body, ctx).await
}

fn decision_of<T>(req: &Request<T>, verdict: &Verdict, patched: bool) -> Decision {
    Decision {
        uid: req.uid.clone(),
        kind: req.kind.kind.clone(),
        namespace: req.namespace.clone().unwrap_or_default(),
        name: req.name.clone(),
        operation: req.operation.as_str(),
        allowed: verdict.allowed(),
        patched,
        denials: verdict
            .refusal
            .iter()
            .map(|(rule, status)| Denial {
                rule,
                field: verdict.refusal_field.clone(),
                message: status.message.clone(),
            })
            .chain(verdict.errors.iter().map(|e| Denial {
                rule: e.rule,
                field: e.path.to_string(),
                message: e.body(),
            }))
            .collect(),
        applied: verdict.applied.clone(),
        warnings: verdict.warnings.len(),
        dry_run: req.dry_run,
        ..Decision::default()
    }
}

fn response_of(uid: &str, verdict: Verdict, status: Option<Status>) -> Response {
    Response {
        uid: uid.to_owned(),
        allowed: verdict.allowed(),
        status: verdict.refusal.map(|(_, s)| s).or(status),
        patch: None,
        patch_type: None,
        warnings: verdict.warnings,
        audit_annotations: verdict.audit_annotations,
    }
}

/// Admits every review: what an endpoint whose feature gate is off runs.
pub struct AdmitAll;

impl Handler for AdmitAll {
    fn review(&self, review: ReviewIn, _: &Context) -> Result<Answer, ReviewError> {
        let api_version = review.api_version.unwrap_or_default();
        let r = review.request.ok_or(ReviewError::NoRequest)?;
        let decision = Decision {
            uid: r.uid.clone(),
            kind: r.kind.kind.clone(),
            namespace: r.namespace.clone().unwrap_or_default(),
            name: r.name.clone().unwrap_or_default(),
            operation: r.operation.as_str(),
            allowed: true,
            dry_run: r.dry_run.unwrap_or(false),
            applied: vec!["gate-off"],
            ..Decision::default()
        };
        let response = Response {
            uid: r.uid,
            allowed: true,
            ..Response::default()
        };
        Ok(Answer {
            review: ReviewOut::new(&api_version, response),
            decision,
        })
    }
}

/// Adapts a [`Validator`] to [`Handler`].
pub struct Validating<V>(pub V);

impl<V: Validator> Validating<V> {
    fn decoded(&self, review: ReviewIn) -> Result<Decoded<V::Object>, ReviewError> {
        let d = decode::<V::Object>(review, Reading::of_validator(&self.0))?.0;
        checked(d, |o| self.0.check_decoded(o))
    }

    /// [`Validating::decoded`] from the body, in one pass when it can.
    fn decoded_body(&self, body: &[u8]) -> Result<Decoded<V::Object>, ReviewError> {
        let reading = Reading::of_validator(&self.0);
        let mut d = match decode_in_one_pass(body, reading) {
            Some(d) => d,
            None => decode::<V::Object>(envelope(body)?, reading)?.0,
        };
        if !reading.old_object {
            d.req.old_object = None;
        }
        checked(d, |o| self.0.check_decoded(o))
    }

    fn answer(&self, d: &Decoded<V::Object>, verdict: Verdict) -> Answer {
        let decision = decision_of(&d.req, &verdict, false);
        let status = if verdict.errors.is_empty() {
            self.0
                .allowed_status()
                .filter(|_| verdict.refusal.is_none())
        } else {
            Some(self.0.denial(&d.req, &verdict.errors))
        };
        // A refusal's own status wins over the field-error denial (see `Verdict::refusal`).
        let response = response_of(&d.req.uid, verdict, status);
        Answer {
            review: ReviewOut::new(&d.api_version, response),
            decision,
        }
    }
}

impl<V: Validator> Handler for Validating<V> {
    fn review(&self, review: ReviewIn, ctx: &Context) -> Result<Answer, ReviewError> {
        let d = self.decoded(review)?;
        let verdict = self.0.validate(&d.req, ctx);
        Ok(self.answer(&d, verdict))
    }

    fn review_bytes(&self, body: &[u8], ctx: &Context) -> Result<Answer, ReviewError> {
        let d = self.decoded_body(body)?;
        let verdict = self.0.validate(&d.req, ctx);
        Ok(self.answer(&d, verdict))
    }

    fn review_bytes_async<'a>(
        &'a self,
        body: &'a [u8],
        ctx: &'a Context,
    ) -> BoxFuture<'a, Result<Answer, ReviewError>> {
        Box::pin(async move {
            let d = self.decoded_body(body)?;
            let verdict = self.0.validate_async(&d.req, ctx).await;
            Ok(self.answer(&d, verdict))
        })
    }

    fn waits(&self, ctx: &Context) -> bool {
        self.0.waits(ctx)
    }

    fn review_async<'a>(
        &'a self,
        review: ReviewIn,
        ctx: &'a Context,
    ) -> BoxFuture<'a, Result<Answer, ReviewError>> {
        Box::pin(async move {
            let d = self.decoded(review)?;
            let verdict = self.0.validate_async(&d.req, ctx).await;
            Ok(self.answer(&d, verdict))
        })
    }
}

/// Adapts a [`Mutator`] to [`Handler`].
pub struct Mutating<M>(pub M);

impl<M: Mutator> Mutating<M> {
    fn answer(
        &self,
        (d, raw_object): WithRaw<M::Object>,
        ctx: &Context,
    ) -> Result<Answer, ReviewError> {
        let d = checked(d, |o| self.0.check_decoded(o))?;
        let mut edited = d.req.object.clone();
        let verdict = self.0.mutate(&d.req, &mut edited, ctx);
        if !verdict.allowed() {
            let decision = decision_of(&d.req, &verdict, false);
            let status =
                (!verdict.errors.is_empty()).then(|| self.0.denial(&d.req, &verdict.errors));
            let response = response_of(&d.req.uid, verdict, status);
            return Ok(Answer {
                review: ReviewOut::new(&d.api_version, response),
                decision,
            });
        }
        let patch = if edited == d.req.object {
            None
        } else {
            let empties = if self.0.keeps_empty_additions() {
                diff::EmptyAdds::Kept
            } else {
                diff::EmptyAdds::Dropped
            };
            typed_patch(&raw_object, &d.req.object, &edited, empties)?
        };
        let decision = Decision {
            patch_bytes: patch.as_ref().map_or(0, |p| p.len()),
            ..decision_of(&d.req, &verdict, patch.is_some())
        };
        let mut response = response_of(&d.req.uid, verdict, None);
        if let Some(p) = patch {
            response.patch = Some(base64::engine::general_purpose::STANDARD.encode(p));
            response.patch_type = Some("JSONPatch".to_owned());
        }
        Ok(Answer {
            review: ReviewOut::new(&d.api_version, response),
            decision,
        })
    }
}

impl<M: Mutator> Handler for Mutating<M> {
    fn keeps_empty_additions(&self) -> bool {
        self.0.keeps_empty_additions()
    }

    fn review(&self, review: ReviewIn, ctx: &Context) -> Result<Answer, ReviewError> {
        self.answer(
            decode::<M::Object>(review, Reading::of_mutator(&self.0))?,
            ctx,
        )
    }

    fn review_bytes(&self, body: &[u8], ctx: &Context) -> Result<Answer, ReviewError> {
        let reading = Reading::of_mutator(&self.0);
        let mut decoded = match decode_old_in_one_pass::<M::Object>(body, reading) {
            Some(decoded) => decoded?,
            None => decode::<M::Object>(envelope(body)?, reading)?,
        };
        if !reading.old_object {
            decoded.0.req.old_object = None;
        }
        self.answer(decoded, ctx)
    }
}

#[cfg(test)]
mod tests;
