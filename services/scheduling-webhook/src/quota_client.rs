//! Every quota question through quota-state (gRPC) when `--quota-state-url` is set: PV-3.2 and
//! PV-4 ([`check_pod`], one call that also reserves), PM-3 and QM-3 ([`lookup`]), QV
//! ([`validate_quota`]). Without the URL (`review`, or `serve --state`), the same tree functions
//! of [`quota_protocol::tree`] run in-process on the cluster state.
//!
//! Each call carries the `--quota-state-timeout-ms` deadline, well under the webhook's
//! timeoutSeconds, so a slow or absent quota-state is answered by us (see [`unavailable`]) rather
//! than timed out by the API server.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use admission_kit::compat::resources::PodRequest;
use admission_kit::server::mtls::MtlsFiles;
use admission_kit::server::trace;
use admission_kit::{Context, Operation, Request};
use k8s_openapi::api::core::v1::Pod;
use quota_protocol::proto::quota_state_client::QuotaStateClient;
use quota_protocol::proto::{
    AdmitPodRequest, AdmitPodResponse, AdmitPodsRequest, CheckWorkloadRequest,
    CheckWorkloadResponse, LookupRequest, ReleaseRequest, ValidateQuotaRequest,
};
use quota_protocol::tree::{QuotaLookup, QuotaRef, pod_quota_label};
use quota_protocol::wire::wire_amount;
use tokio::sync::{mpsc, oneshot};
use tonic::transport::{Channel, Endpoint};

use crate::options::{Options, Unavailable};
use crate::types::ElasticQuota;

/// quota-state as one service's handlers ask it: the options that say where and how, and what
/// is made on first use (the channel, the batcher) or learnt from its answers.
pub struct QuotaClient {
    options: Arc<Options>,
    /// Whether quota-state is in an outage (its last call failed): one WARN line per outage.
    outage: AtomicBool,
    /// Namespaces whose unlabelled pods quota-state last charged to a checked quota (`true`)
    /// or to none (`false`): from each AdmitPod answer for an unlabelled pod and each Lookup.
    /// Bounded by [`REMEMBERED_NAMESPACES`]: past it the map starts again (unknown namespaces
    /// count as concerned, the safe side).
    namespaces: Mutex<HashMap<String, bool>>,
    /// One HTTP/2 channel (tonic multiplexes calls over it).
    channel: Mutex<Option<Channel>>,
    /// The running batcher ([`admit`]).
    batcher: Mutex<Option<mpsc::Sender<Asked>>>,
}

impl QuotaClient {
    /// A client under `options`; nothing is connected until the first question.
    pub fn new(options: Arc<Options>) -> Self {
        Self {
            options,
            outage: AtomicBool::new(false),
            namespaces: Mutex::default(),
            channel: Mutex::default(),
            batcher: Mutex::default(),
        }
    }
}

const DEPENDENCY: &str = "quota-state";

/// The id a refusal for want of quota-state is counted and logged under (not a spec rule: no
/// rule decided it).
pub const UNAVAILABLE_RULE: &str = "quota-state-unavailable";

/// Whether `cause` is quota-state's own refusal of the question (a review it finds malformed,
/// a caller it does not accept): it answered, so it is up. Only failures to get an answer
/// (unreachable, timed out, overloaded) are an outage; a forged review cannot make the
/// dependency look down.
fn answered(cause: &str) -> bool {
    [
        tonic::Code::InvalidArgument,
        tonic::Code::PermissionDenied,
        tonic::Code::FailedPrecondition,
        tonic::Code::OutOfRange,
        tonic::Code::NotFound,
        tonic::Code::AlreadyExists,
        tonic::Code::Unimplemented,
    ]
    .iter()
    .any(|c| {
        cause
            .strip_prefix(&c.to_string())
            .is_some_and(|rest| rest.starts_with(':'))
    })
}

fn outage(q: &QuotaClient, cause: &str) {
    if answered(cause) {
        reachable(q);
        return;
    }
    if !q.outage.swap(true, Ordering::AcqRel) {
        tracing::warn!(
            dependency = DEPENDENCY,
            cause,
            "quota-state unavailable: pods no quota concerns are admitted, the others answered per --quota-unavailable"
        );
    }
}

fn reachable(q: &QuotaClient) {
    admission_kit::server::metrics::dependency_up(DEPENDENCY);
    if q.outage.swap(false, Ordering::AcqRel) {
        tracing::info!(dependency = DEPENDENCY, "quota-state answers again");
    }
}

/// A review that needed no quota-state answer (no quota concerns the pod) during an outage.
pub fn admitted_without(q: &QuotaClient, cause: &str) {
    outage(q, cause);
    counted_unavailable(cause, "admitted");
}

/// Counts a review answered with `outcome` for want of quota-state's answer, and marks it down,
/// unless `cause` is quota-state's own refusal ([`answered`]).
pub fn counted_unavailable(cause: &str, outcome: &str) {
    if !answered(cause) {
        admission_kit::server::metrics::dependency_unavailable(DEPENDENCY, outcome);
    }
}

/// What to do when quota-state cannot answer: refuse naming the cause (fail closed, the default),
/// or with `--quota-unavailable=allow` admit with a warning. `Ok` carries the warning.
pub fn unavailable(q: &QuotaClient, what: &str, cause: &str) -> Result<String, String> {
    outage(q, cause);
    if q.options.quota_unavailable == Unavailable::Allow {
        counted_unavailable(cause, "allowed");
        Ok(format!(
            "{what} not checked: quota-state unavailable ({cause})"
        ))
    } else {
        counted_unavailable(cause, "denied");
        Err(format!(
            "quota-state unavailable, cannot check {what}: {cause}"
        ))
    }
}

/// More namespaces than a cluster holds.
const REMEMBERED_NAMESPACES: usize = 100_000;

fn remember(q: &QuotaClient, namespace: &str, concerned: bool) {
    let mut map = q.namespaces.lock().unwrap_or_else(|p| p.into_inner());
    if map.get(namespace) == Some(&concerned) {
        return;
    }
    if map.len() >= REMEMBERED_NAMESPACES {
        map.clear();
    }
    map.insert(namespace.to_owned(), concerned);
}

/// [`remember`], for the tests of [`crate::quota::concerns_no_quota`].
#[cfg(test)]
pub fn remember_for_tests(q: &QuotaClient, namespace: &str, concerned: bool) {
    remember(q, namespace, concerned);
}

/// Whether a quota concerns the unlabelled pods of `namespace`, as quota-state last said; `None`
/// when it never said (a fleet member counts those as concerned).
pub fn namespace_concerned(q: &QuotaClient, namespace: &str) -> Option<bool> {
    let map = q.namespaces.lock().unwrap_or_else(|p| p.into_inner());
    map.get(namespace).copied()
}

/// Whether quota `name` (a pod's QN) is one admission checks.
fn checked(name: &str) -> bool {
    use quota_protocol::tree::keys::{DEFAULT, ROOT, SYSTEM};
    !name.is_empty() && ![DEFAULT, SYSTEM, ROOT].contains(&name)
}

/// The client's channel, made lazily so that the webhook starts, and answers per
/// `--quota-unavailable`, while quota-state is down. An https URL connects with mutual TLS
/// ([`tls_channel`]).
fn channel(q: &QuotaClient, deadline: Duration) -> Result<Channel, String> {
    let mut g = q.channel.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(c) = g.as_ref() {
        return Ok(c.clone());
    }
    let url = &q.options.quota_state_url;
    let endpoint = Endpoint::from_shared(url.to_owned())
        .map_err(|e| format!("bad --quota-state-url {url}: {e}"))?
        .connect_timeout(deadline)
        .timeout(deadline);
    let c = match endpoint.uri().scheme_str() {
        Some("https") => tls_channel(&q.options, endpoint)?,
        Some("http") => quota_protocol::channel::plaintext_channel(endpoint),
        _ => {
            return Err(format!(
                "--quota-state-url {url}: use https:// (or http:// for a plaintext quota-state)"
            ));
        }
    };
    *g = Some(c.clone());
    Ok(c)
}

/// The mutual-TLS channel: credentials from the Secret of `--quota-state-client-secret` (watched)
/// or the `--quota-state-*-file` options (reloaded when the files change); new connections use
/// the new certificate.
fn tls_channel(o: &Options, endpoint: Endpoint) -> Result<Channel, String> {
    let name = server_name(o, &endpoint);
    let secret = o.quota_state_client_secret.as_str();
    if !secret.is_empty() {
        let (namespace, name_of) = match secret.split_once('/') {
            Some((ns, n)) => (ns.to_owned(), n.to_owned()),
            None => (
                std::env::var("POD_NAMESPACE").map_err(|_| {
                    format!("--quota-state-client-secret {secret}: give it as namespace/name, or set POD_NAMESPACE")
                })?,
                secret.to_owned(),
            ),
        };
        return secret_channel(endpoint, namespace, name_of, &name);
    }
    let file = |v: &Option<std::path::PathBuf>, flag: &str| {
        v.clone()
            .ok_or_else(|| format!("an https --quota-state-url needs --{flag}"))
    };
    let files = MtlsFiles {
        cert: file(&o.quota_state_cert_file, "quota-state-cert-file")?,
        key: file(&o.quota_state_key_file, "quota-state-key-file")?,
        ca: file(&o.quota_state_ca_file, "quota-state-ca-file")?,
    };
    let config = admission_kit::server::mtls::client(files, Duration::from_secs(5))
        .map_err(|e| format!("quota-state client TLS: {e}"))?;
    quota_protocol::channel::mtls_channel(endpoint, config.source(), &name)
}

/// The mutual-TLS channel with the client certificate of a managed Secret, watched.
#[cfg(feature = "serve")]
fn secret_channel(
    endpoint: Endpoint,
    namespace: String,
    secret: String,
    server_name: &str,
) -> Result<Channel, String> {
    let config = admission_kit::cluster::managed::client_config_from_secret(namespace, secret)
        .map_err(|e| format!("quota-state client TLS: {e}"))?;
    quota_protocol::channel::mtls_channel(endpoint, config.source(), server_name)
}

/// Without `serve` (the rules run offline, as admission-check does) there are no managed
/// certificates to read.
#[cfg(not(feature = "serve"))]
fn secret_channel(_: Endpoint, _: String, secret: String, _: &str) -> Result<Channel, String> {
    Err(format!(
        "--quota-state-client-secret {secret}: this build has no managed certificates (feature serve)"
    ))
}

/// The name quota-state's certificate must carry: `--quota-state-server-name`, else the URL's
/// host.
fn server_name(o: &Options, endpoint: &Endpoint) -> String {
    match o.quota_state_server_name.as_str() {
        "" => endpoint
            .uri()
            .host()
            .unwrap_or_default()
            .trim_matches(['[', ']'])
            .to_owned(),
        n => n.to_owned(),
    }
}

/// Runs one call with the deadline. The server awaits it on the review's own task (the
/// validator [`waits`](admission_kit::Validator::waits)); synchronous callers go through
/// [`blocking`]. Checked before anything is started: a runtime to run it on, multi-threaded so
/// that [`blocking`] can always finish what it started.
async fn call<T, F, Fut>(q: &QuotaClient, method: &'static str, f: F) -> Result<T, String>
where
    F: FnOnce(QuotaStateClient<Channel>, Sending) -> Fut,
    Fut: Future<Output = Result<T, tonic::Status>>,
{
    let deadline = deadline(q)?;
    let client = QuotaStateClient::new(channel(q, deadline)?);
    // Held until the answer: the span's length is the call's.
    let span = trace::call_span(method, &[trace::Carried::current()]);
    let r = f(client, Sending::within(deadline, &span))
        .await
        .map_err(|s| status_text(&s));
    drop(span);
    if r.is_ok() {
        reachable(q);
    }
    r
}

/// The deadline of one call, once it is known that a call can run here.
fn deadline(q: &QuotaClient) -> Result<Duration, String> {
    match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
        Err(_) => return Err("no async runtime to call quota-state from".into()),
        Ok(tokio::runtime::RuntimeFlavor::MultiThread) => {}
        Ok(_) => return Err("quota-state calls need the multi-threaded runtime".into()),
    }
    Ok(Duration::from_millis(q.options.quota_state_timeout_ms))
}

fn status_text(s: &tonic::Status) -> String {
    format!("{}: {}", s.code(), s.message())
}

/// Pods per AdmitPods call (quota-state's limit).
const MAX_BATCH: usize = 64;

/// One pod's AdmitPod question on its way to the batcher, and where its answer goes.
struct Asked {
    msg: AdmitPodRequest,
    answer: oneshot::Sender<Result<AdmitPodResponse, String>>,
    /// The review's trace, which the call continues.
    trace: trace::Carried,
}

/// AdmitPod through the client's batcher: the pods whose reviews arrive while a call is out
/// go together in the next AdmitPods call, so that concurrent reviews share one call's
/// overhead (framing, a write and a wake-up on each side) instead of paying it each. Nothing
/// waits to fill a batch: a lone review is sent at once.
async fn admit(q: &QuotaClient, msg: AdmitPodRequest) -> Result<AdmitPodResponse, String> {
    let deadline = deadline(q)?;
    let batches = batcher(q, deadline)?;
    let (answer, answered) = oneshot::channel();
    let carried = trace::Carried::current();
    // Only a traced review is timed: its span records the wait.
    let asked_at = carried.is_valid().then(std::time::Instant::now);
    // The deadline covers the queue too: a full queue (quota-state slow) waits no longer.
    let asked = async {
        batches
            .send(Asked {
                msg,
                answer,
                trace: carried,
            })
            .await
            .map_err(|_| "quota-state's batcher has stopped".to_owned())?;
        answered
            .await
            .map_err(|_| "quota-state's batcher dropped the question".to_owned())?
    };
    let r = match tokio::time::timeout(deadline, asked).await {
        Err(_) => Err(format!(
            "{}: no answer within {} ms",
            tonic::Code::DeadlineExceeded,
            deadline.as_millis()
        )),
        Ok(r) => r,
    };
    if let Ok(a) = &r {
        reachable(q);
        if let Some(at) = asked_at {
            // Queue and call together: what the review waited for quota-state.
            let waited = i64::try_from(at.elapsed().as_micros()).unwrap_or(i64::MAX);
            let review = tracing::Span::current();
            if !a.quota.is_empty() {
                trace::record(&review, "quota", a.quota.clone());
            }
            trace::record(&review, "quota.allowed", a.allowed);
            trace::record(&review, "quota.wait_us", waited);
        }
    }
    r
}

/// The running batcher, started on first use (and again if its runtime went).
fn batcher(q: &QuotaClient, deadline: Duration) -> Result<mpsc::Sender<Asked>, String> {
    let mut g = q.batcher.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(tx) = g.as_ref()
        && !tx.is_closed()
    {
        return Ok(tx.clone());
    }
    let client = QuotaStateClient::new(channel(q, deadline)?);
    // Bounded: senders wait when it is full, and reviews in flight are bounded by the server.
    let (tx, rx) = mpsc::channel(4 * MAX_BATCH);
    let in_flight = usize::from(q.options.quota_state_calls_in_flight);
    tokio::spawn(run_batches(client, rx, deadline, in_flight));
    *g = Some(tx.clone());
    Ok(tx)
}

/// Sends what has queued as one AdmitPods call, at most `in_flight` calls at a time, and hands
/// out the answers: a review waits for a call of its own only while `in_flight` calls are out.
/// One (the default) suits a quota-state in the same cluster, where a call returns within the
/// time the next reviews take to arrive and fuller batches cost less; a fleet member far from
/// its hub sets more, so that its reviews do not wait a round trip behind the previous batch
/// (docs/fleet-quota.md#latency). A quota-state without AdmitPods (an older one during a
/// rolling upgrade) gets AdmitPod calls from then on.
async fn run_batches(
    client: QuotaStateClient<Channel>,
    mut asked: mpsc::Receiver<Asked>,
    deadline: Duration,
    in_flight: usize,
) {
    let calls = std::sync::Arc::new(tokio::sync::Semaphore::new(in_flight.max(1)));
    let peer = std::sync::Arc::new(std::sync::atomic::AtomicU8::new(Peer::Untried as u8));
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while asked.recv_many(&mut batch, MAX_BATCH).await > 0 {
        // Closed never: the semaphore lives as long as this loop.
        let Ok(permit) = calls.clone().acquire_owned().await else {
            fail_all(
                batch.drain(..).map(|a| a.answer).collect(),
                "batcher stopped",
            );
            continue;
        };
        // Reviews already running on this runtime reach their quota question before the call
        // leaves: one turn of the scheduler, no timer.
        tokio::task::yield_now().await;
        while batch.len() < MAX_BATCH
            && let Ok(a) = asked.try_recv()
        {
            batch.push(a);
        }
        // A review that stopped waiting (past its deadline, or its connection gone) is not
        // asked for: no reservation for a pod nobody will admit.
        let (mut msgs, mut answers, mut traces) = (Vec::new(), Vec::new(), Vec::new());
        for a in batch.drain(..).filter(|a| !a.answer.is_closed()) {
            msgs.push(a.msg);
            answers.push(a.answer);
            traces.push(a.trace);
        }
        if msgs.is_empty() {
            continue;
        }
        let now = Peer::of(peer.load(std::sync::atomic::Ordering::Acquire));
        if now == Peer::Singles {
            one_by_one(&client, msgs, answers, traces, deadline);
            continue;
        }
        let (client, peer) = (client.clone(), peer.clone());
        let call = async move {
            let _permit = permit;
            // Until AdmitPods has answered once, a copy is kept to ask again one by one.
            let copy = (now == Peer::Untried).then(|| (msgs.clone(), traces.clone()));
            let mut c = client.clone();
            let span = trace::call_span("quota-state.AdmitPods", &traces);
            trace::record(&span, "pods", i64::try_from(msgs.len()).unwrap_or(i64::MAX));
            let sending = Sending::within(deadline, &span);
            let r = c
                .admit_pods(request(AdmitPodsRequest { pods: msgs }, &sending))
                .await;
            drop(span);
            match r {
                Ok(r) => {
                    peer.store(Peer::Batches as u8, std::sync::atomic::Ordering::Release);
                    let r = r.into_inner().answers;
                    if r.len() != answers.len() {
                        let e =
                            format!("quota-state answered {} of {} pods", r.len(), answers.len());
                        fail_all(answers, &e);
                        return;
                    }
                    for (got, a) in r.into_iter().zip(answers) {
                        let _ = a.send(match got.response {
                            Some(r) if got.invalid.is_empty() => Ok(r),
                            _ => Err(format!("{}: {}", tonic::Code::InvalidArgument, got.invalid)),
                        });
                    }
                }
                Err(s) if s.code() == tonic::Code::Unimplemented && copy.is_some() => {
                    peer.store(Peer::Singles as u8, std::sync::atomic::Ordering::Release);
                    let (msgs, traces) = copy.unwrap_or_default();
                    one_by_one(&client, msgs, answers, traces, deadline);
                }
                Err(s) => fail_all(answers, &status_text(&s)),
            }
        };
        if in_flight <= 1 {
            // One call at a time: no task needed, the loop waits for it.
            call.await;
        } else {
            tokio::spawn(call);
        }
    }
}

/// What the batcher knows of quota-state's methods.
#[derive(PartialEq, Clone, Copy)]
#[repr(u8)]
enum Peer {
    /// No AdmitPods call has been answered yet.
    Untried,
    /// AdmitPods answers.
    Batches,
    /// AdmitPods is unknown there: AdmitPod per pod.
    Singles,
}

impl Peer {
    fn of(v: u8) -> Self {
        match v {
            1 => Peer::Batches,
            2 => Peer::Singles,
            _ => Peer::Untried,
        }
    }
}

fn fail_all(answers: Vec<oneshot::Sender<Result<AdmitPodResponse, String>>>, e: &str) {
    for a in answers {
        let _ = a.send(Err(e.to_owned()));
    }
}

/// AdmitPod for each, concurrently (a quota-state without AdmitPods).
fn one_by_one(
    client: &QuotaStateClient<Channel>,
    msgs: Vec<AdmitPodRequest>,
    answers: Vec<oneshot::Sender<Result<AdmitPodResponse, String>>>,
    traces: Vec<trace::Carried>,
    deadline: Duration,
) {
    for ((msg, answer), carried) in msgs.into_iter().zip(answers).zip(traces) {
        let mut c = client.clone();
        tokio::spawn(async move {
            let span = trace::call_span("quota-state.AdmitPod", &[carried]);
            let r = c
                .admit_pod(request(msg, &Sending::within(deadline, &span)))
                .await
                .map(|r| r.into_inner())
                .map_err(|s| status_text(&s));
            drop(span);
            let _ = answer.send(r);
        });
    }
}

/// A validator's verdict from its async rules, for the synchronous entry point (`review`, the
/// in-process server): the worker thread is lent to the wait; without a multi-threaded runtime
/// the review is refused under [`UNAVAILABLE_RULE`].
pub fn blocking_verdict(
    verdict: impl Future<Output = admission_kit::Verdict>,
) -> admission_kit::Verdict {
    admission_kit::review::handler::wait_for(verdict).unwrap_or_else(|| {
        admission_kit::Verdict::errored(
            UNAVAILABLE_RULE,
            400,
            "quota-state calls need the multi-threaded runtime",
        )
    })
}

/// A quota-state question from synchronous rules (the mutators, the ElasticQuota validator,
/// the `review` command): the worker thread is lent to the wait
/// ([`wait_for`](admission_kit::review::handler::wait_for)).
pub fn blocking<T>(question: impl Future<Output = Result<T, String>>) -> Result<T, String> {
    admission_kit::review::handler::wait_for(question)
        .unwrap_or_else(|| Err("quota-state calls need the multi-threaded runtime".into()))
}

/// What every call carries besides its message: the deadline and the trace it is part of.
struct Sending {
    deadline: Duration,
    /// `traceparent` (and `tracestate`): none when the review is not traced.
    trace: Vec<(&'static str, String)>,
}

impl Sending {
    /// A call within `deadline`, part of `span`'s trace.
    fn within(deadline: Duration, span: &tracing::Span) -> Self {
        Self {
            deadline,
            trace: trace::headers_of(span),
        }
    }
}

fn request<T>(msg: T, sending: &Sending) -> tonic::Request<T> {
    let mut r = tonic::Request::new(msg);
    r.set_timeout(sending.deadline);
    for (key, value) in &sending.trace {
        // A value the propagator wrote is always valid ASCII; one that is not is left out.
        if let Ok(v) = value.parse() {
            r.metadata_mut().insert(*key, v);
        }
    }
    r
}

/// The name quota-state keys a pod's reservation by.
fn pod_name(req: &Request<Pod>) -> String {
    req.object
        .metadata
        .name
        .clone()
        .unwrap_or_else(|| req.name.clone())
}

/// quota-state's answer for one pod.
pub enum PodAnswer {
    /// Passed; `reserved` when quota-state now holds a reservation for it.
    Allowed {
        /// A reservation was made (PV-4 ran, not a dry run).
        reserved: bool,
    },
    /// Refused by `rule` ("PV-3" or "PV-4") with upstream's text.
    Denied(&'static str, String),
}

/// PV-3.2 (when `check_parent`) and PV-4 (when `check_admission`) for one pod, in one call.
pub async fn check_pod(
    q: &QuotaClient,
    req: &Request<Pod>,
    request: &PodRequest<'_>,
    ns: &str,
    ctx: &Context,
    check_parent: bool,
    check_admission: bool,
) -> Result<PodAnswer, String> {
    let pod = &req.object;
    let finished = matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Failed" | "Succeeded")
    );
    // Exact amounts (never clamped): one that cannot be counted refuses the pod here, naming it,
    // when PV-4 would count it; PV-3.2 alone does not read amounts.
    let none = Default::default();
    let requests = match request.exact().filter(|_| !finished) {
        None => &none,
        Some(Ok(r)) => r,
        Some(Err(_)) if !check_admission => &none,
        Some(Err(e)) => {
            return Ok(PodAnswer::Denied(
                "PV-4",
                format!("pod {ns}/{}: {e}", pod_name(req)),
            ));
        }
    };
    let msg = AdmitPodRequest {
        namespace: ns.to_owned(),
        name: pod_name(req),
        quota_label: pod_quota_label(pod).to_owned(),
        requests: requests
            .iter()
            .map(|(k, a)| (k.clone(), wire_amount(a)))
            .collect(),
        dry_run: req.dry_run,
        old_quota_label: match req.operation {
            Operation::Update => Some(
                req.old_object
                    .as_ref()
                    .map(pod_quota_label)
                    .unwrap_or_default()
                    .to_owned(),
            ),
            _ => None,
        },
        disable_default_quota: ctx.gates().enabled("DisableDefaultQuota"),
        check_parent,
        check_admission,
        review_uid: req.uid.clone(),
        cluster: q.options.quota_state_cluster.clone(),
        // A connection that proved the API server's certificate needs no judging by address.
        peer: ctx
            .peer()
            .filter(|p| !p.authenticated)
            .map(|p| p.ip.to_string())
            .unwrap_or_default(),
        pod_uid: pod.metadata.uid.clone().unwrap_or_default(),
    };
    let dry_run = msg.dry_run;
    // Only a fleet member needs it (see [`Options::fleet_member`]).
    let unlabelled = msg.quota_label.is_empty() && q.options.fleet_member();
    let r = admit(q, msg).await?;
    if unlabelled {
        // A refusal comes from the pod's quota: it concerns the namespace.
        remember(q, ns, !r.allowed || checked(&r.quota));
    }
    Ok(if r.allowed {
        PodAnswer::Allowed {
            reserved: check_admission && !dry_run,
        }
    } else if r.rule == "PV-3" {
        PodAnswer::Denied("PV-3", r.message)
    } else {
        PodAnswer::Denied("PV-4", r.message)
    })
}

/// WQ: a workload's peak against its quota chain (read only). `Ok(None)` when quota-state
/// predates the question (UNIMPLEMENTED: an older replica during a rolling upgrade).
pub async fn check_workload(
    q: &QuotaClient,
    msg: CheckWorkloadRequest,
) -> Result<Option<CheckWorkloadResponse>, String> {
    let r = call(q, "quota-state.CheckWorkload", |mut c, s| async move {
        match c.check_workload(request(msg, &s)).await {
            Ok(r) => Ok(Some(r.into_inner())),
            Err(s) if s.code() == tonic::Code::Unimplemented => Ok(None),
            Err(s) => Err(s),
        }
    })
    .await;
    if let Err(cause) = &r {
        outage(q, cause);
    }
    r
}

/// Drops the reservation of a pod that a later rule refused (best effort: an unreleased
/// reservation expires on its own).
pub async fn release(q: &QuotaClient, req: &Request<Pod>, ns: &str) {
    let msg = ReleaseRequest {
        namespace: ns.to_owned(),
        name: pod_name(req),
        review_uid: req.uid.clone(),
        cluster: q.options.quota_state_cluster.clone(),
    };
    if let Err(e) = call(q, "quota-state.Release", |mut c, s| async move {
        c.release(request(msg, &s)).await.map(|_| ())
    })
    .await
    {
        tracing::warn!(error = %e, "could not release a quota reservation; it will expire");
    }
}

/// quota-state's answer to [`lookup`]: the asked quotas and the namespace's binding.
#[derive(Debug, Default)]
pub struct Snapshot {
    quotas: HashMap<String, QuotaRef>,
    bound: Option<String>,
    self_named: bool,
}

impl QuotaLookup for Snapshot {
    fn quota(&self, name: &str) -> Option<QuotaRef> {
        self.quotas.get(name).cloned()
    }

    fn self_named(&self, _namespace: &str) -> bool {
        self.self_named
    }

    fn bound_to(&self, _namespace: &str) -> Option<String> {
        self.bound.clone()
    }
}

/// The quotas `names` and the binding of `namespace`, from quota-state.
pub async fn lookup(
    q: &QuotaClient,
    names: Vec<String>,
    namespace: &str,
) -> Result<Snapshot, String> {
    let msg = LookupRequest {
        names,
        namespace: namespace.to_owned(),
    };
    let r = call(q, "quota-state.Lookup", |mut c, s| async move {
        c.lookup(request(msg, &s)).await.map(|r| r.into_inner())
    })
    .await?;
    if q.options.fleet_member() {
        remember(q, namespace, !r.bound.is_empty() || r.self_named);
    }
    Ok(Snapshot {
        quotas: r
            .quotas
            .into_iter()
            .map(|q| {
                (
                    q.name,
                    QuotaRef {
                        is_parent: q.is_parent,
                        tree_id: q.tree_id,
                    },
                )
            })
            .collect(),
        bound: Some(r.bound).filter(|b| !b.is_empty()),
        self_named: r.self_named,
    })
}

/// An admission operation as the protocol names it (CONNECT has no name: quotas are never
/// connected to).
pub fn wire_operation(op: Operation) -> quota_protocol::proto::Operation {
    use quota_protocol::proto::Operation as Wire;
    match op {
        Operation::Create => Wire::Create,
        Operation::Update => Wire::Update,
        Operation::Delete => Wire::Delete,
        Operation::Connect => Wire::Unspecified,
    }
}

/// The rule ids quota-state may answer with, as the static ids verdicts carry.
const QV_RULES: [&str; 11] = [
    "QV-C1", "QV-C2", "QV-U2", "QV-U3", "QV-U4", "QV-S", "QV-T", "QV-D1", "QV-D2", "QV-D3", "QV-D4",
];

/// QV through quota-state: `Ok(Err((rule, refused)))` is a refusal, `Err` means no answer.
#[allow(clippy::type_complexity)] // the two layers are the two kinds of "no"
pub async fn validate_quota(
    q: &QuotaClient,
    ctx: &Context,
    operation: Operation,
    object: &ElasticQuota,
    old: Option<&ElasticQuota>,
) -> Result<Result<(), (&'static str, quota_protocol::tree::Refused)>, String> {
    let to_json = |q: &ElasticQuota| serde_json::to_vec(q).map_err(|e| e.to_string());
    let msg = ValidateQuotaRequest {
        operation: wire_operation(operation) as i32,
        object: to_json(object)?,
        old_object: old.map(to_json).transpose()?.unwrap_or_default(),
        update_resource_key: ctx.gates().enabled("ElasticQuotaEnableUpdateResourceKey"),
    };
    let r = call(q, "quota-state.ValidateQuota", |mut c, s| async move {
        c.validate_quota(request(msg, &s))
            .await
            .map(|r| r.into_inner())
    })
    .await?;
    if r.allowed {
        return Ok(Ok(()));
    }
    let rule = QV_RULES
        .iter()
        .find(|id| **id == r.rule)
        .copied()
        .unwrap_or("QV");
    Ok(Err((
        rule,
        quota_protocol::tree::Refused {
            field: r.field,
            message: r.message,
        },
    )))
}

#[cfg(test)]
mod answered_tests {
    use super::*;

    #[test]
    fn quota_states_own_refusal_is_not_an_outage() {
        let refused = status_text(&tonic::Status::invalid_argument(
            "pod name \"A\" is not valid",
        ));
        assert!(answered(&refused), "{refused}");
        for down in [
            status_text(&tonic::Status::unavailable("connection refused")),
            status_text(&tonic::Status::deadline_exceeded("late")),
            format!(
                "{}: no answer within 2000 ms",
                tonic::Code::DeadlineExceeded
            ),
            "quota-state's batcher has stopped".to_owned(),
        ] {
            assert!(!answered(&down), "{down}");
        }
    }
}
