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
}

impl Verdict {
    /// A refusal with status `code` and `message` only (controller-runtime's `Errored`).
    pub fn errored(rule: &'static str, code: u16, message: impl Into<String>) -> Self {
        Self {
            refusal: Some((rule, Status::errored(code, message))),
            ..Self::default()
        }
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

    /// Whether a JSON `null` where a value is expected reads as that type's zero value, as
    /// controller-runtime's decoder (Go's `encoding/json`) reads it ([`crate::compat::zero`]),
    /// instead of failing the decode. Tried only when the strict decode fails, so it costs
    /// nothing on the objects an API server usually sends.
    fn reads_null_as_zero(&self) -> bool {
        false
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
    type Object: DeserializeOwned + Serialize + Clone + PartialEq + Send + Sync;

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

    /// Whether `null` reads as the zero value (see [`Validator::reads_null_as_zero`]).
    fn reads_null_as_zero(&self) -> bool {
        false
    }

    /// Whether the rules read `metadata.managedFields` (see
    /// [`Validator::reads_managed_fields`]); never patched when they do not.
    fn reads_managed_fields(&self) -> bool {
        true
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
    /// Each reason for the denial: its rule, field and message (the log and metrics keep the
    /// rule ids, `admission-check` reports all of it).
    pub denials: Vec<Denial>,
    /// Ids of rules that acted without denying.
    pub applied: Vec<&'static str>,
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

fn envelope(body: &[u8]) -> Result<ReviewIn, ReviewError> {
    serde_json::from_slice(body).map_err(|e| ReviewError::Body(e.to_string()))
}

/// [`review_body`] for handlers that wait ([`Handler::waits`]): what the server awaits.
pub async fn review_body_async(
    handler: &dyn Handler,
    body: &[u8],
    ctx: &Context,
) -> Result<Answer, ReviewError> {
    handler.review_bytes_async(body, ctx).await
}

/// How a handler reads the objects of a review.
#[derive(Debug, Clone, Copy)]
struct Reading {
    /// The old object is typed (`reads_old_object`).
    old_object: bool,
    /// A `null` reads as the zero value when the strict decode fails (`reads_null_as_zero`).
    null_as_zero: bool,
    /// Objects keep their `metadata.managedFields` (`reads_managed_fields`).
    managed_fields: bool,
}

impl Reading {
    fn of_validator<V: Validator>(v: &V) -> Self {
        Self {
            old_object: v.reads_old_object(),
            null_as_zero: v.reads_null_as_zero(),
            managed_fields: v.reads_managed_fields(),
        }
    }

    fn of_mutator<M: Mutator>(m: &M) -> Self {
        Self {
            old_object: m.reads_old_object(),
            null_as_zero: m.reads_null_as_zero(),
            managed_fields: m.reads_managed_fields(),
        }
    }
}

/// Decodes one object; when the strict decode fails and `null_as_zero`, as Go reads `null`.
/// An object neither reading accepts fails with the strict decode's error.
fn decode_raw<T: DeserializeOwned>(
    what: &'static str,
    raw: &RawValue,
    null_as_zero: bool,
) -> Result<T, ReviewError> {
    serde_json::from_str(raw.get()).or_else(|strict| {
        null_as_zero
            .then(|| crate::compat::zero::from_str(raw.get()).ok())
            .flatten()
            .ok_or_else(|| ReviewError::Object(what, strict.to_string()))
    })
}

/// Decodes one object as [`decode_raw`] does, without its managed fields when the rules do not
/// read them and that decode succeeds (it refuses all the full decode refuses, and more: the full
/// decode then judges).
fn decode_object<T: DeserializeOwned>(
    what: &'static str,
    raw: &RawValue,
    reading: Reading,
) -> Result<T, ReviewError> {
    if !reading.managed_fields
        && let Ok(Unmanaged(object)) = serde_json::from_str(raw.get())
    {
        return Ok(object);
    }
    decode_raw(what, raw, reading.null_as_zero)
}

/// Runs a handler's post-decode check on the object and the old object.
fn checked<T>(
    d: Decoded<T>,
    check: impl Fn(&T) -> Result<(), String>,
) -> Result<Decoded<T>, ReviewError> {
    check(&d.req.object).map_err(|e| ReviewError::Object("object", e))?;
    if let Some(old) = &d.req.old_object {
        check(old).map_err(|e| ReviewError::Object("oldObject", e))?;
    }
    Ok(d)
}

/// The parts of a decoded request shared by validators and mutators.
struct Decoded<T> {
    api_version: String,
    req: Request<T>,
}

/// The review's request with the object under review chosen (on DELETE the old object, which
/// is then no longer the old one), its objects still as the envelope decoded them.
fn chosen<O>(review: ReviewIn<O>) -> Result<Decoded<O>, ReviewError> {
    let api_version = review.api_version.unwrap_or_default();
    let r: RawRequest<O> = review.request.ok_or(ReviewError::NoRequest)?;
    let req = request_of(r, |op, object, old_object| {
        // A JSON `null` object decodes as `None`, whatever `O` is.
        if op == Operation::Delete {
            let old = old_object.ok_or(ReviewError::NoObject("oldObject", op.as_str()))?;
            Ok((old, None))
        } else {
            let object = object.ok_or(ReviewError::NoObject("object", op.as_str()))?;
            Ok((object, old_object))
        }
    })?;
    Ok(Decoded { api_version, req })
}

/// The request of `r` with the object under review and the old object that `objects` makes of
/// the operation and `r`'s two objects.
fn request_of<O, P, T>(
    r: RawRequest<O, P>,
    objects: impl FnOnce(Operation, Option<O>, Option<P>) -> Result<(T, Option<T>), ReviewError>,
) -> Result<Request<T>, ReviewError> {
    let op = r.operation;
    let (object, old_object) = objects(op, r.object, r.old_object)?;
    Ok(Request {
        uid: r.uid,
        kind: r.kind,
        resource: r.resource,
        sub_resource: r.sub_resource,
        name: r.name.unwrap_or_default(),
        namespace: r.namespace,
        operation: op,
        user_info: r.user_info,
        dry_run: r.dry_run.unwrap_or(false),
        object,
        old_object,
    })
}

/// A decoded review and the raw JSON of its object under review.
type WithRaw<T> = (Decoded<T>, Box<RawValue>);

/// Decodes a review whose objects are raw: the request with its objects typed, and the raw
/// JSON of the object under review (mutators diff against it).
fn decode<T: DeserializeOwned>(
    review: ReviewIn,
    reading: Reading,
) -> Result<WithRaw<T>, ReviewError> {
    let Decoded { api_version, req } = chosen(review)?;
    let object = decode_object("object", &req.object, reading)?;
    let old_object = req
        .old_object
        .as_deref()
        .filter(|_| reading.old_object)
        .map(|o| decode_object("oldObject", o, reading))
        .transpose()?;
    let Request {
        uid,
        kind,
        resource,
        sub_resource,
        name,
        namespace,
        operation,
        user_info,
        dry_run,
        object: raw_object,
        old_object: _,
    } = req;
    let req = Request {
        uid,
        kind,
        resource,
        sub_resource,
        name,
        namespace,
        operation,
        user_info,
        dry_run,
        object,
        old_object,
    };
    Ok((Decoded { api_version, req }, raw_object))
}

/// Decodes a review with its objects typed in the one pass over `body`, which a validator (it
/// never needs the raw object) can do: capturing the object raw and then decoding it scanned
/// it twice, a third of a validation's instructions. `None` when this pass fails for any
/// reason: the caller then decodes as [`decode`] does, so that a body this pass refuses gets
/// exactly the answer and error text it always got. A body this pass accepts is accepted by
/// [`decode`] with the same result: the same deserializer reads the same object bytes, and
/// this pass is the stricter (on DELETE it types `object` too; it nests two levels deeper
/// against the recursion limit; it needs the whole body valid UTF-8, where the raw capture
/// checks only the objects).
///
/// Without managed fields when `reading` says so; `None` when that decode fails, and the
/// caller's [`decode`] then judges the objects one by one.
fn decode_in_one_pass<T: DeserializeOwned>(body: &[u8], reading: Reading) -> Option<Decoded<T>> {
    let text = std::str::from_utf8(body).ok()?;
    if reading.managed_fields {
        return chosen(serde_json::from_str::<ReviewIn<T>>(text).ok()?).ok();
    }
    let Decoded { api_version, req } =
        chosen(serde_json::from_str::<ReviewIn<Unmanaged<T>>>(text).ok()?).ok()?;
    let Request {
        uid,
        kind,
        resource,
        sub_resource,
        name,
        namespace,
        operation,
        user_info,
        dry_run,
        object: Unmanaged(object),
        old_object,
    } = req;
    Some(Decoded {
        api_version,
        req: Request {
            uid,
            kind,
            resource,
            sub_resource,
            name,
            namespace,
            operation,
            user_info,
            dry_run,
            object,
            old_object: old_object.map(|Unmanaged(o)| o),
        },
    })
}

/// Decodes a mutator's review with its old object typed in the pass over `body` (capturing it
/// raw first and then decoding it scanned it twice, a node status update's largest object) and
/// the object under review kept raw as well as typed (the patch is checked against the raw
/// text). `None` when this pass fails or the review is a DELETE (whose object under review is
/// the old one): the caller then decodes as [`decode`] does. Errors and results are the same
/// as [`decode`]'s, as for [`decode_in_one_pass`]: this pass is the stricter on what it reads,
/// and the object is decoded from its raw text as [`decode`] decodes it, before the old
/// object's result is used.
fn decode_old_in_one_pass<T: DeserializeOwned>(
    body: &[u8],
    reading: Reading,
) -> Option<Result<WithRaw<T>, ReviewError>> {
    // `from_str` after one UTF-8 check of the body reads strings faster than `from_slice`.
    let text = std::str::from_utf8(body).ok()?;
    let review: ReviewIn<Box<RawValue>, T> = if reading.managed_fields {
        serde_json::from_str(text).ok()?
    } else {
        let review: ReviewIn<Box<RawValue>, Unmanaged<T>> = serde_json::from_str(text).ok()?;
        ReviewIn {
            api_version: review.api_version,
            kind: review.kind,
            request: review.request.map(|r| RawRequest {
                old_object: r.old_object.map(|Unmanaged(o)| o),
                uid: r.uid,
                kind: r.kind,
                resource: r.resource,
                sub_resource: r.sub_resource,
                request_kind: r.request_kind,
                request_resource: r.request_resource,
                name: r.name,
                namespace: r.namespace,
                operation: r.operation,
                user_info: r.user_info,
                object: r.object,
                dry_run: r.dry_run,
                options: r.options,
            }),
        }
    };
    let api_version = review.api_version.unwrap_or_default();
    let mut r = review.request?;
    if r.operation == Operation::Delete {
        return None;
    }
    let Some(raw) = r.object.take() else {
        return Some(Err(ReviewError::NoObject("object", r.operation.as_str())));
    };
    let req = request_of(r, |_, _, old_object| {
        Ok((decode_object("object", &raw, reading)?, old_object))
    });
    Some(req.map(|req| (Decoded { api_version, req }, raw)))
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
                field: String::new(),
                message: status.message.clone(),
            })
            .chain(verdict.errors.iter().map(|e| Denial {
                rule: e.rule,
                field: e.path.to_string(),
                message: e.body(),
            }))
            .collect(),
        applied: verdict.applied.clone(),
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
            typed_patch(&raw_object, &d.req.object, &edited)?
        };
        let decision = decision_of(&d.req, &verdict, patch.is_some());
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

/// The JSON Patch (as bytes) that turns the raw object into the raw object with the typed edit
/// applied, or `None` when nothing changed.
///
/// The diff is taken between the typed object before and after the edit, so it holds only what
/// the mutator changed. When it applies to the raw JSON as it stands (the usual case) it is the
/// patch; otherwise it is replayed onto the raw JSON creating the parents that the raw object
/// lacks but the typed one serialised, and the patch is the diff of the raw object against that.
/// Either way it applies to what the API server holds and never removes a field our types do
/// not know.
pub fn typed_patch<T: Serialize>(
    raw: &RawValue,
    before: &T,
    after: &T,
) -> Result<Option<Vec<u8>>, ReviewError> {
    let edit = diff::typed_diff(before, after)
        .map_err(|e| ReviewError::Object("object", e.to_string()))?;
    if edit.0.is_empty() {
        return Ok(None);
    }
    // Usually the typed edit applies to the raw object as it stands, which a skeleton of the
    // object answers without parsing all of it.
    if skeleton::applies(raw, &edit) {
        return encode_patch(&edit);
    }
    let mut doc: Value = serde_json::from_str(raw.get())
        .map_err(|e| ReviewError::Object("object", e.to_string()))?;
    // json_patch::patch is atomic, so on failure `doc` is untouched and the lenient replay +
    // re-diff below takes over.
    let patch = if json_patch::patch(&mut doc, &edit.0).is_ok() {
        edit
    } else {
        let mut patched = doc.clone();
        replay(&mut patched, &edit);
        json_patch::diff(&doc, &patched)
    };
    if patch.0.is_empty() {
        return Ok(None);
    }
    encode_patch(&patch)
}

fn encode_patch(patch: &Patch) -> Result<Option<Vec<u8>>, ReviewError> {
    serde_json::to_vec(patch)
        .map(Some)
        .map_err(|e| ReviewError::Object("patch", e.to_string()))
}

/// Applies diff operations, creating missing parents instead of failing.
fn replay(doc: &mut Value, patch: &Patch) {
    for op in &patch.0 {
        match op {
            PatchOperation::Add(a) => set(doc, &tokens(a.path.as_str()), a.value.clone(), true),
            PatchOperation::Replace(r) => {
                set(doc, &tokens(r.path.as_str()), r.value.clone(), false)
            }
            PatchOperation::Remove(r) => remove(doc, &tokens(r.path.as_str())),
            // json_patch::diff emits only add, replace and remove.
            _ => {}
        }
    }
}

fn set(doc: &mut Value, path: &[String], value: Value, insert: bool) {
    let Some((last, parents)) = path.split_last() else {
        *doc = value;
        return;
    };
    let mut cur = doc;
    for t in parents {
        cur = match cur {
            Value::Array(a) => match t.parse::<usize>() {
                Ok(i) if i < a.len() => &mut a[i],
                _ => return,
            },
            other => {
                if !other.is_object() {
                    *other = Value::Object(Default::default());
                }
                match other {
                    Value::Object(m) => m.entry(t.clone()).or_insert(Value::Null),
                    _ => return,
                }
            }
        };
        if cur.is_null() {
            *cur = Value::Object(Default::default());
        }
    }
    match cur {
        Value::Array(a) => {
            if last == "-" {
                a.push(value);
            } else if let Ok(i) = last.parse::<usize>() {
                if insert && i <= a.len() {
                    a.insert(i, value);
                } else if i < a.len() {
                    a[i] = value;
                } else {
                    a.push(value);
                }
            }
        }
        other => {
            if !other.is_object() {
                *other = Value::Object(Default::default());
            }
            if let Value::Object(m) = other {
                m.insert(last.clone(), value);
            }
        }
    }
}

fn remove(doc: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = doc;
    for t in parents {
        cur = match cur {
            Value::Array(a) => match t.parse::<usize>().ok().and_then(|i| a.get_mut(i)) {
                Some(v) => v,
                None => return,
            },
            Value::Object(m) => match m.get_mut(t) {
                Some(v) => v,
                None => return,
            },
            _ => return,
        };
    }
    match cur {
        Value::Array(a) => {
            if let Ok(i) = last.parse::<usize>()
                && i < a.len()
            {
                a.remove(i);
            }
        }
        Value::Object(m) => {
            m.remove(last);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    struct Obj {
        #[serde(default)]
        spec: Spec,
    }
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    struct Spec {
        #[serde(default)]
        replicas: i32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        image: Option<String>,
        #[serde(default)]
        items: Vec<Item>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        extra: Option<Value>,
    }
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    struct Item {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        grace: Option<String>,
    }

    /// Denies a negative `spec.replicas`; its decode check refuses 99 replicas.
    struct NonNegative;

    impl Validator for NonNegative {
        type Object = Obj;

        fn validate(&self, req: &Request<Obj>, _: &Context) -> Verdict {
            let mut errors = ErrorList::default();
            let replicas = req.object.spec.replicas;
            if replicas < 0 {
                let path = crate::review::field::Path::new("spec").child("replicas");
                errors.push(FieldError::invalid("T-1", path, replicas, "must be >= 0"));
            }
            if let Some(old) = &req.old_object
                && old.spec.replicas > replicas
            {
                let path = crate::review::field::Path::new("spec").child("replicas");
                errors.push(FieldError::forbidden("T-2", path, "may not shrink"));
            }
            errors.into()
        }

        fn check_decoded(&self, o: &Obj) -> Result<(), String> {
            if o.spec.replicas == 99 {
                return Err("99 replicas".to_owned());
            }
            Ok(())
        }
    }

    /// The review's answer or error, as comparable text.
    fn outcome(answered: Result<Answer, ReviewError>) -> String {
        match answered {
            Ok(a) => format!(
                "{} {:?}",
                String::from_utf8_lossy(&a.review.to_bytes()),
                a.decision
            ),
            Err(e) => format!("error: {e}"),
        }
    }

    fn review_of(request: &str) -> Vec<u8> {
        format!(
            r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{request}}}"#
        )
        .into_bytes()
    }

    /// Review bodies for the one-pass decodes, each with whether a validator's one pass takes
    /// it: ordinary ones, and ones a one pass may refuse where the raw decode does not.
    fn one_pass_bodies() -> Vec<(Vec<u8>, bool)> {
        let obj = |n: i32| format!(r#"{{"spec":{{"replicas":{n},"image":"x","items":[{{}}]}}}}"#);
        let req = |op: &str, fields: &str| {
            format!(
                r#"{{"uid":"u-1","kind":{{"kind":"Obj"}},"name":"n","operation":"{op}"{fields}}}"#
            )
        };
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        // Each body, and whether the one pass takes it.
        let mut bodies: Vec<(Vec<u8>, bool)> = vec![
            (
                review_of(&req("CREATE", &format!(r#","object":{}"#, obj(3)))),
                true,
            ),
            (
                review_of(&req("CREATE", &format!(r#","object":{}"#, obj(-1)))),
                true,
            ),
            (
                review_of(&req("CREATE", &format!(r#","object":{}"#, obj(99)))),
                true,
            ),
            (
                review_of(&req(
                    "UPDATE",
                    &format!(r#","object":{},"oldObject":{}"#, obj(2), obj(5)),
                )),
                true,
            ),
            (
                review_of(&req(
                    "UPDATE",
                    &format!(r#","object":{},"oldObject":null"#, obj(2)),
                )),
                true,
            ),
            (
                review_of(&req("DELETE", &format!(r#","oldObject":{}"#, obj(-4)))),
                true,
            ),
            // DELETE reviews the old object: the raw decode never types `object`.
            (
                review_of(&req(
                    "DELETE",
                    &format!(r#","object":[1,2],"oldObject":{}"#, obj(1)),
                )),
                false,
            ),
            (review_of(&req("DELETE", r#","object":{}"#)), true),
            (review_of(&req("CREATE", r#","object":null"#)), true),
            (review_of(&req("CREATE", "")), true),
            (
                review_of(&req("CREATE", r#","object":{"spec":{"replicas":"x"}}"#)),
                false,
            ),
            // Skipped JSON is not held to the recursion limit; typed JSON is, and the one pass
            // types it two levels deeper than the raw decode.
            (
                review_of(&req(
                    "CREATE",
                    &format!(r#","object":{{"spec":{{}},"deep":{}}}"#, deep(200)),
                )),
                true,
            ),
            (
                review_of(&req(
                    "CREATE",
                    &format!(r#","object":{{"spec":{{"extra":{}}}}}"#, deep(124)),
                )),
                false,
            ),
            (
                review_of(&req(
                    "CREATE",
                    &format!(r#","object":{},"object":{}"#, obj(1), obj(1)),
                )),
                false,
            ),
            (
                br#"{"apiVersion":"admission.k8s.io/v1beta1"}"#.to_vec(),
                true,
            ),
            (b"not json".to_vec(), false),
            (
                review_of(&req("CREATE", &format!(r#","object":{}"#, obj(1))))
                    .into_iter()
                    .chain(*b" x")
                    .collect(),
                false,
            ),
        ];
        // Invalid UTF-8 outside the objects, which the raw decode never checks.
        let mut latin1 = review_of(&req("CREATE", &format!(r#","object":{},"x":"caf"#, obj(1))));
        latin1.extend_from_slice(b"\xe9\"}}");
        bodies.push((latin1, false));
        // And inside the object, which both refuse.
        let mut inside = review_of(&req("CREATE", r#","object":{"spec":{"image":"caf"#));
        inside.extend_from_slice(b"\xe9\"}}}}");
        bodies.push((inside, false));
        // The old object alone too deep for a one pass, or failing its typed decode, or
        // refused by the decode check, beside a good object.
        for (old, one_pass) in [
            (format!(r#"{{"spec":{{"extra":{}}}}}"#, deep(124)), false),
            (r#"{"spec":{"replicas":"x"}}"#.to_owned(), false),
            (obj(99), true),
        ] {
            let fields = format!(r#","object":{},"oldObject":{old}"#, obj(1));
            bodies.push((review_of(&req("UPDATE", &fields)), one_pass));
        }
        // Both objects failing: the object's error comes first.
        let fields =
            r#","object":{"spec":{"replicas":true}},"oldObject":{"spec":{"replicas":"x"}}"#;
        bodies.push((review_of(&req("UPDATE", fields)), false));
        bodies
    }

    /// A handler whose rules never read the old object (Kthena's) is not refused for one that
    /// does not decode or fails the decode check, and its rules see none; one that reads it is.
    #[test]
    fn an_unread_old_object_is_never_typed() {
        struct IgnoresOld;
        impl Validator for IgnoresOld {
            type Object = Obj;
            fn validate(&self, req: &Request<Obj>, ctx: &Context) -> Verdict {
                assert!(req.old_object.is_none());
                NonNegative.validate(req, ctx)
            }
            fn check_decoded(&self, o: &Obj) -> Result<(), String> {
                NonNegative.check_decoded(o)
            }
            fn reads_old_object(&self) -> bool {
                false
            }
        }
        let ctx = Context::default();
        for old in [
            r#"{"spec":{"replicas":"x"}}"#,
            r#"{"spec":{"replicas":99}}"#,
            r#"{"spec":{"replicas":5}}"#,
        ] {
            let body = review_of(&format!(
                r#"{{"uid":"u","kind":{{"kind":"Obj"}},"operation":"UPDATE","object":{{"spec":{{"replicas":1}}}},"oldObject":{old}}}"#
            ));
            let a = Validating(IgnoresOld).review_bytes(&body, &ctx);
            assert!(a.as_ref().is_ok_and(|a| a.decision.allowed), "{old}: {a:?}");
            let b = Validating(NonNegative).review_bytes(&body, &ctx);
            assert!(
                !b.as_ref().is_ok_and(|a| a.decision.allowed),
                "{old}: {b:?}"
            );
        }
    }

    /// A validator decodes the envelope and its object in one pass; whatever the body, the
    /// answer (or the error, word for word) is the one the raw decode followed by the typed one
    /// gives, including the bodies that one pass refuses and the raw decode accepts.
    #[test]
    fn one_pass_decode_answers_as_the_raw_decode() {
        let v = Validating(NonNegative);
        let ctx = Context::default();
        let bodies = one_pass_bodies();
        for (body, one_pass) in &bodies {
            let text = String::from_utf8_lossy(body);
            assert_eq!(
                decode_in_one_pass::<Obj>(body, Reading::of_validator(&NonNegative)).is_some(),
                *one_pass && chosen(serde_json::from_slice::<ReviewIn>(body).unwrap()).is_ok(),
                "{text}"
            );
            let raw = envelope(body).and_then(|r| v.review(r, &ctx));
            assert_eq!(outcome(review_body(&v, body, &ctx)), outcome(raw), "{text}");
            let awaited = wait_for(review_body_async(&v, body, &ctx)).unwrap();
            let raw = envelope(body).and_then(|r| v.review(r, &ctx));
            assert_eq!(outcome(awaited), outcome(raw), "{text}");
        }
    }

    /// Raises `spec.replicas` to the old object's and fills in `spec.image`; denies a
    /// negative count; refuses 99 replicas on decode.
    struct Raise;

    impl Mutator for Raise {
        type Object = Obj;

        fn mutate(&self, req: &Request<Obj>, obj: &mut Obj, _: &Context) -> Verdict {
            let mut errors = ErrorList::default();
            if obj.spec.replicas < 0 {
                let path = crate::review::field::Path::new("spec").child("replicas");
                errors.push(FieldError::invalid(
                    "T-3",
                    path,
                    obj.spec.replicas,
                    "negative",
                ));
            }
            if let Some(old) = &req.old_object {
                obj.spec.replicas = obj.spec.replicas.max(old.spec.replicas);
            }
            obj.spec.image.get_or_insert_with(|| "default".to_owned());
            errors.into()
        }

        fn check_decoded(&self, o: &Obj) -> Result<(), String> {
            NonNegative.check_decoded(o)
        }
    }

    /// A mutator types the old object in the pass over the body and keeps the object raw;
    /// whatever the body, the answer (or the error, word for word) is the raw decode's.
    #[test]
    fn mutator_one_pass_decode_answers_as_the_raw_decode() {
        let m = Mutating(Raise);
        let ctx = Context::default();
        let mut taken = 0;
        for (body, _) in one_pass_bodies() {
            let text = String::from_utf8_lossy(&body);
            taken += usize::from(matches!(
                decode_old_in_one_pass::<Obj>(&body, Reading::of_mutator(&Raise)),
                Some(Ok((d, _))) if d.req.old_object.is_some()
            ));
            let raw = envelope(&body).and_then(|r| m.review(r, &ctx));
            assert_eq!(
                outcome(review_body(&m, &body, &ctx)),
                outcome(raw),
                "{text}"
            );
        }
        // The UPDATEs with a good old object (its decode check runs after the pass).
        assert_eq!(taken, 2);
        let patched = |body: &[u8]| {
            review_body(&m, body, &ctx)
                .unwrap()
                .review
                .response
                .patch
                .is_some()
        };
        let update = review_of(
            r#"{"uid":"u","operation":"UPDATE","object":{"spec":{"replicas":1,"image":"i"}},"oldObject":{"spec":{"replicas":4}}}"#,
        );
        assert!(patched(&update));
    }

    /// Refuses a Pod labelled `bad` and labels the others, its objects decoded with their
    /// managed fields or (`MANAGED` false) without.
    struct PodRule<const MANAGED: bool>;

    impl<const MANAGED: bool> Validator for PodRule<MANAGED> {
        type Object = k8s_openapi::api::core::v1::Pod;

        fn reads_managed_fields(&self) -> bool {
            MANAGED
        }

        fn reads_null_as_zero(&self) -> bool {
            true
        }

        fn validate(&self, req: &Request<Self::Object>, _: &Context) -> Verdict {
            let bad = req
                .object
                .metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key("bad"));
            if bad {
                Verdict::errored("T-1", 403, "bad")
            } else {
                Verdict::default()
            }
        }
    }

    impl<const MANAGED: bool> Mutator for PodRule<MANAGED> {
        type Object = k8s_openapi::api::core::v1::Pod;

        fn reads_managed_fields(&self) -> bool {
            MANAGED
        }

        fn reads_null_as_zero(&self) -> bool {
            true
        }

        fn mutate(
            &self,
            req: &Request<Self::Object>,
            obj: &mut Self::Object,
            ctx: &Context,
        ) -> Verdict {
            obj.metadata
                .labels
                .get_or_insert_with(Default::default)
                .insert("seen".into(), "yes".into());
            Validator::validate(self, req, ctx)
        }
    }

    /// A handler that does not read managed fields answers every review, good or
    /// malformed managed fields, as one that reads them does, through every decode path, word
    /// for word (errors included); its patches never touch them.
    #[test]
    fn objects_decoded_without_managed_fields_answer_as_with_them() {
        let ctx = Context::default();
        let entry = r#"{"manager":"kubelet","operation":"Update","apiVersion":"v1","time":"2026-11-27T09:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:status":{"f:phase":{}}}}"#;
        let managed = [
            entry.to_owned(),
            format!("[{entry},{entry}]"),
            "[]".into(),
            "null".into(),
            r#""x""#.into(),
            "[1]".into(),
            "[null]".into(),
            r#"[{"manager":7}]"#.into(),
            r#"[{"time":"yesterday"}]"#.into(),
            r#"[{"extra":1}]"#.into(),
            r#"[{"manager":"a","manager":"b"}]"#.into(),
        ];
        let pod = |labels: &str, managed: &str, spec: &str| {
            format!(
                r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p","labels":{labels},"managedFields":{managed}}},"spec":{spec}}}"#
            )
        };
        let spec = r#"{"containers":[{"name":"c","image":"i"}]}"#;
        let mut bodies = Vec::new();
        for m in &managed {
            // A `managedFields` that is not an array goes in a list as is.
            let m = if m.starts_with('{') {
                format!("[{m}]")
            } else {
                m.clone()
            };
            for labels in [r#"{"a":"b"}"#, r#"{"bad":""}"#, "null"] {
                for spec in [
                    spec,
                    r#"{"containers":[{"name":"c","image":"i","ports":null}]}"#,
                ] {
                    let object = pod(labels, &m, spec);
                    bodies.push(review_of(&format!(
                        r#"{{"uid":"u","kind":{{"kind":"Pod"}},"name":"p","operation":"CREATE","object":{object}}}"#
                    )));
                    bodies.push(review_of(&format!(
                        r#"{{"uid":"u","kind":{{"kind":"Pod"}},"name":"p","operation":"UPDATE","object":{object},"oldObject":{object}}}"#
                    )));
                }
            }
        }
        let mut differed_from_full = 0;
        for body in &bodies {
            let text = String::from_utf8_lossy(body);
            let full = outcome(review_body(&Validating(PodRule::<true>), body, &ctx));
            let without = outcome(review_body(&Validating(PodRule::<false>), body, &ctx));
            assert_eq!(without, full, "{text}");
            let awaited = wait_for(review_body_async(&Validating(PodRule::<false>), body, &ctx));
            assert_eq!(outcome(awaited.unwrap()), full, "{text}");
            let full = outcome(review_body(&Mutating(PodRule::<true>), body, &ctx));
            let without = outcome(review_body(&Mutating(PodRule::<false>), body, &ctx));
            assert_eq!(without, full, "{text}");
            assert!(!without.contains("managedFields"), "{text}: {without}");
            differed_from_full += usize::from(
                decode_in_one_pass::<k8s_openapi::api::core::v1::Pod>(
                    body,
                    Reading::of_validator(&PodRule::<false>),
                )
                .is_none(),
            );
        }
        // Some bodies were judged by the full decode (the malformed and the unsure ones).
        assert!(differed_from_full > 0 && differed_from_full < bodies.len());
    }

    /// [`Raise`] and [`NonNegative`] reading `null` as Go does.
    struct GoRaise;

    impl Mutator for GoRaise {
        type Object = Obj;

        fn reads_null_as_zero(&self) -> bool {
            true
        }

        fn mutate(&self, req: &Request<Obj>, obj: &mut Obj, ctx: &Context) -> Verdict {
            Raise.mutate(req, obj, ctx)
        }
    }

    struct GoNonNegative;

    impl Validator for GoNonNegative {
        type Object = Obj;

        fn reads_null_as_zero(&self) -> bool {
            true
        }

        fn validate(&self, req: &Request<Obj>, ctx: &Context) -> Verdict {
            NonNegative.validate(req, ctx)
        }
    }

    /// `null` items, fields and old objects' fields read as zero values by the handlers that
    /// ask for it, through every decode path; the others keep refusing them, word for word.
    #[test]
    fn null_reads_as_zero_only_where_the_handler_asks() {
        let ctx = Context::default();
        let create = review_of(
            r#"{"uid":"u","operation":"CREATE","object":{"spec":{"replicas":null,"items":[null,{"grace":"1s"}]}}}"#,
        );
        let update = review_of(
            r#"{"uid":"u","operation":"UPDATE","object":{"spec":{"replicas":-1,"items":[null]}},"oldObject":{"spec":{"items":[null],"replicas":null}}}"#,
        );
        for body in [&create, &update] {
            let strict = outcome(review_body(&Mutating(Raise), body, &ctx));
            assert!(
                strict.starts_with("error: cannot decode") && strict.contains("null"),
                "{strict}"
            );
            let strict = outcome(review_body(&Validating(NonNegative), body, &ctx));
            assert!(strict.starts_with("error: cannot decode"), "{strict}");
        }
        // The mutator: the null item is a zero item; the patch holds only the edit.
        let a = review_body(&Mutating(GoRaise), &create, &ctx).unwrap();
        let patch = base64::engine::general_purpose::STANDARD
            .decode(a.review.response.patch.unwrap_or_default())
            .unwrap();
        assert_eq!(
            String::from_utf8(patch).unwrap(),
            r#"[{"op":"add","path":"/spec/image","value":"default"}]"#
        );
        let raw = envelope(&create).and_then(|r| Mutating(GoRaise).review(r, &ctx));
        assert_eq!(
            outcome(raw),
            outcome(review_body(&Mutating(GoRaise), &create, &ctx))
        );
        // The validator reads the object (and the old object) the same way and decides.
        let a = review_body(&Validating(GoNonNegative), &update, &ctx).unwrap();
        assert!(!a.review.response.allowed);
        let a = review_body(&Validating(GoNonNegative), &create, &ctx).unwrap();
        assert!(a.review.response.allowed);
        // What neither reading accepts fails with the strict decode's words.
        let wrong = review_of(
            r#"{"uid":"u","operation":"CREATE","object":{"spec":{"replicas":"x","items":[null]}}}"#,
        );
        assert_eq!(
            outcome(review_body(&Mutating(GoRaise), &wrong, &ctx)),
            outcome(review_body(&Mutating(Raise), &wrong, &ctx))
        );
    }

    #[test]
    fn wait_for_answers_at_once_when_nothing_waits() {
        // No runtime at all: a rule that does not wait never needs one.
        assert_eq!(wait_for(async { 5 }), Some(5));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn wait_for_lends_the_worker_to_a_rule_that_waits() {
        let waits = async {
            tokio::task::yield_now().await;
            7
        };
        assert_eq!(wait_for(waits), Some(7));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn wait_for_never_blocks_a_single_threaded_runtime() {
        // Blocking its only thread would wait forever.
        assert_eq!(wait_for(tokio::task::yield_now()), None);
    }

    fn apply(raw: &str, patch: Option<Vec<u8>>) -> Value {
        let mut doc: Value = serde_json::from_str(raw).unwrap();
        if let Some(p) = patch {
            let p: Patch = serde_json::from_slice(&p).unwrap();
            json_patch::patch(&mut doc, &p).unwrap();
        }
        doc
    }

    /// The patch of an edit made through type `T`, and the raw object with it applied.
    fn run_as<T: Serialize + serde::de::DeserializeOwned + Clone>(
        raw: &str,
        f: impl Fn(&mut T),
    ) -> (Option<Vec<u8>>, Value) {
        let rv = RawValue::from_string(raw.to_owned()).unwrap();
        let before: T = serde_json::from_str(raw).unwrap();
        let mut after = before.clone();
        f(&mut after);
        let p = typed_patch(&rv, &before, &after).unwrap();
        (p.clone(), apply(raw, p))
    }

    fn run(raw: &str, f: impl Fn(&mut Obj)) -> (Option<Vec<u8>>, Value) {
        run_as(raw, f)
    }

    #[test]
    fn unknown_fields_survive_a_mutation() {
        let raw = r#"{"metadata":{"labels":{"x":"y"}},"spec":{"replicas":1,"future":{"a":1},"items":[{"other":true}]}}"#;
        let (_, out) = run(raw, |o| o.spec.items[0].grace = Some("30s".into()));
        assert_eq!(out["spec"]["future"]["a"], 1);
        assert_eq!(out["metadata"]["labels"]["x"], "y");
        assert_eq!(out["spec"]["items"][0]["other"], true);
        assert_eq!(out["spec"]["items"][0]["grace"], "30s");
    }

    #[test]
    fn no_change_no_patch() {
        let (p, _) = run(r#"{"spec":{"replicas":2}}"#, |_| {});
        assert!(p.is_none());
    }

    #[test]
    fn parents_missing_in_the_raw_object_are_created() {
        // `spec` is absent in the raw object but the typed one serialises it.
        let (p, out) = run(r#"{"kind":"X"}"#, |o| o.spec.image = Some("img".into()));
        assert!(p.is_some());
        assert_eq!(out["spec"]["image"], "img");
        assert_eq!(out["kind"], "X");
    }

    #[test]
    fn list_growth_and_shrink_apply() {
        let raw = r#"{"spec":{"items":[{"grace":"1s"},{"grace":"2s"}]}}"#;
        let (_, out) = run(raw, |o| {
            o.spec.items.remove(0);
        });
        assert_eq!(out["spec"]["items"], serde_json::json!([{"grace":"2s"}]));
        let (_, out) = run(raw, |o| o.spec.items.push(Item::default()));
        assert_eq!(out["spec"]["items"].as_array().unwrap().len(), 3);
    }

    /// Go's `omitempty` drops an emptied labels or annotations map, so the patch removes
    /// the map; a map that was already empty is not touched.
    #[test]
    fn removing_the_last_annotation_removes_the_map() {
        let raw = r#"{"metadata":{"name":"n","annotations":{"a":"1"},"labels":{}}}"#;
        let (p, out) = run_as(raw, |v: &mut Value| {
            v["metadata"]["annotations"]
                .as_object_mut()
                .unwrap()
                .remove("a");
        });
        let ops: Value = serde_json::from_slice(&p.unwrap()).unwrap();
        assert_eq!(
            ops,
            serde_json::json!([{"op": "remove", "path": "/metadata/annotations"}])
        );
        assert_eq!(
            out,
            serde_json::json!({"metadata": {"name": "n", "labels": {}}})
        );
        // Not the last one: only that entry goes.
        let raw = r#"{"metadata":{"annotations":{"a":"1","b":"2"}}}"#;
        let (_, out) = run_as(raw, |v: &mut Value| {
            v["metadata"]["annotations"]
                .as_object_mut()
                .unwrap()
                .remove("a");
        });
        assert_eq!(
            out["metadata"]["annotations"],
            serde_json::json!({"b": "2"})
        );
    }

    /// An empty value added where the object had nothing (`resources: {}`) is not a
    /// patch operation; the same add beside a real edit leaves only the real edit.
    #[test]
    fn adding_an_empty_value_is_not_a_patch_operation() {
        let raw = r#"{"spec":{"containers":[{"name":"a"}]}}"#;
        let rv = RawValue::from_string(raw.to_owned()).unwrap();
        let before: Value = serde_json::from_str(raw).unwrap();
        let mut after = before.clone();
        after["spec"]["containers"][0]["resources"] = serde_json::json!({"limits": {}});
        assert_eq!(typed_patch(&rv, &before, &after).unwrap(), None);
        after["spec"]["schedulerName"] = Value::String("s".into());
        let ops: Value =
            serde_json::from_slice(&typed_patch(&rv, &before, &after).unwrap().unwrap()).unwrap();
        assert_eq!(
            ops,
            serde_json::json!([{"op": "add", "path": "/spec/schedulerName", "value": "s"}])
        );
    }
}
