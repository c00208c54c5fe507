//! quota-state: the ElasticQuota tree and per-quota usage in memory, answering every quota question
//! of scheduling-webhook over gRPC: `AdmitPod` (QN, PV-3.2 and PV-4 with atomic check-and-reserve;
//! [`ledger`] states the consistency argument and its limits), `Lookup` (PM-3, QM-3),
//! `ValidateQuota` (QV) and `Release`. The protocol and the tree rules are the `quota-protocol`
//! crate's, shared with scheduling-webhook (which does not link this server).
//!
//! Replicas elect a leader on a coordination.k8s.io Lease (kube-lease-manager); only the leader
//! reports SERVING, so only it receives admissions. Fail-over limit: reservations the old leader
//! made for pods not yet visible in the new leader's Pod watch are not known to the new leader
//! until those pods appear (an over-admission window bounded by the pods in flight at that
//! moment). Feeding: [`feed`]; the ledger and its consistency argument: [`ledger`].

pub mod auth;
pub mod feed;
pub mod fleet;
#[cfg(feature = "testing")]
pub mod fuzzing;
pub mod input;
pub mod ledger;
pub mod metrics;
pub mod remembered;
#[cfg(feature = "testing")]
pub mod synthetic;
pub mod usage;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use auth::{Caller, Policy};
use ledger::{Amounts, Ledger, PodCheck, PodOutcome, WorkloadCheck, WorkloadOutcome};
use quota_protocol::proto::quota_state_server::QuotaState;
use quota_protocol::proto::{
    AdmitPodAnswer, AdmitPodRequest, AdmitPodResponse, AdmitPodsRequest, AdmitPodsResponse,
    CheckWorkloadRequest, CheckWorkloadResponse, LookupRequest, LookupResponse, ReleaseRequest,
    ReleaseResponse, ValidateQuotaRequest, ValidateQuotaResponse, WorkloadFit,
};
use quota_protocol::tree::TreeGates;
use quota_protocol::types::ElasticQuota;
use quota_protocol::wire::{amount_of_wire, wire_amount};
use quota_protocol::{proto, workload};
use tonic::{Request, Response, Status};

/// The gRPC service over a ledger.
#[derive(Clone)]
pub struct Service {
    ledger: Arc<Ledger>,
    serving: Arc<AtomicBool>,
    policy: Policy,
    metrics: metrics::Metrics,
    /// Refused calls waiting for the watch to vouch for their peer, per peer
    /// ([`Service::vouched_after_a_wait`]).
    waiting: Arc<std::sync::Mutex<std::collections::HashMap<String, usize>>>,
}

/// One of a peer's calls waiting for the watch to vouch for it; the count drops with it.
struct Waiting {
    peer: String,
    waiting: Arc<std::sync::Mutex<std::collections::HashMap<String, usize>>>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut w = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = w.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                w.remove(&self.peer);
            }
        }
    }
}

impl Service {
    /// Serves `ledger` to callers that `policy` allows, answering from the start.
    pub fn new(ledger: Arc<Ledger>, policy: Policy, metrics: metrics::Metrics) -> Self {
        Self {
            ledger,
            serving: Arc::new(AtomicBool::new(true)),
            policy,
            metrics,
            waiting: Arc::default(),
        }
    }

    /// Answers only while `serving` is true (initial lists in, and leader): otherwise every call
    /// fails with UNAVAILABLE, so a caller that reaches a follower or a replica still listing
    /// gets no answer from a partial ledger (the webhook then applies `--quota-unavailable`).
    pub fn with_serving(mut self, serving: Arc<AtomicBool>) -> Self {
        self.serving = serving;
        self
    }

    /// The caller, once it is known to be allowed and quota-state serves it (in a fleet: its
    /// cluster's first lists are in); a refusal is logged and counted.
    fn begin<T>(&self, method: &'static str, req: &Request<T>) -> Result<Caller, Status> {
        let caller = self.policy.authorize(req).inspect_err(|s| {
            self.refuse(method, s);
        })?;
        if !self.serving.load(Ordering::Acquire) {
            return Err(self.refuse(
                method,
                &Status::unavailable(
                    "quota-state is not serving: initial lists not in yet, or not the leader",
                ),
            ));
        }
        if let Policy::Fleet(members) = &self.policy
            && !members.listed(&caller.cluster)
        {
            return Err(self.refuse(
                method,
                &Status::unavailable(format!(
                    "quota-state has not listed member cluster {}'s pods yet",
                    caller.cluster
                )),
            ));
        }
        Ok(caller)
    }

    /// The caller acting for cluster `asked` ("" for its own): refused for another cluster's
    /// pods than the caller's, since in a fleet each member admits and releases only its own
    /// (counted as `other_cluster`). A plaintext caller (`--insecure-plaintext`, benchmarks)
    /// acts for whichever cluster it names.
    fn own_cluster<'c>(
        &self,
        method: &'static str,
        caller: &'c Caller,
        asked: &str,
    ) -> Result<std::borrow::Cow<'c, Caller>, Status> {
        if asked.is_empty() || asked == caller.cluster {
            return Ok(std::borrow::Cow::Borrowed(caller));
        }
        if !quota_protocol::spec::is_cluster_name(asked) {
            return Err(self.invalid(
                method,
                format!(
                    "cluster {:?} is not a cluster name (a DNS label)",
                    asked.chars().take(64).collect::<String>()
                ),
            ));
        }
        let mine = if caller.cluster.is_empty() {
            "quota-state serves one cluster".to_owned()
        } else {
            format!("its certificate names cluster {}", caller.cluster)
        };
        if matches!(self.policy, Policy::Anyone) {
            return Ok(std::borrow::Cow::Owned(Caller {
                cluster: asked.to_owned(),
                ..caller.clone()
            }));
        }
        Err(self.refuse_as(
            method,
            "other_cluster",
            &Status::permission_denied(format!(
                "caller {} may act only for its own cluster's pods, not cluster {asked}'s: {mine}",
                caller.identity
            )),
        ))
    }

    /// Counts and logs a refused call; returns the status to answer with.
    fn refuse(&self, method: &'static str, s: &Status) -> Status {
        let reason = match s.code() {
            tonic::Code::Unauthenticated => "unauthenticated",
            tonic::Code::PermissionDenied => "forbidden",
            tonic::Code::InvalidArgument => "invalid_argument",
            tonic::Code::Unavailable => "not_serving",
            _ => "other",
        };
        self.refuse_as(method, reason, s)
    }

    /// [`Service::refuse`] with the metric's reason given.
    fn refuse_as(&self, method: &'static str, reason: &'static str, s: &Status) -> Status {
        self.metrics.refused(method, reason);
        if reason != "not_serving" {
            tracing::warn!(method, reason, message = s.message(), "refused a call");
        }
        self.metrics
            .calls
            .with_label_values(&[method, &format!("{:?}", s.code())])
            .inc();
        s.clone()
    }

    fn ok<T>(&self, method: &'static str, v: T) -> Result<Response<T>, Status> {
        self.metrics.calls.with_label_values(&[method, "Ok"]).inc();
        Ok(Response::new(v))
    }

    fn invalid(&self, method: &'static str, message: String) -> Status {
        self.refuse(method, &Status::invalid_argument(message))
    }

    /// A review from `peer` was refused while that peer's first pods may be created and not
    /// yet seen (the API server's first reviews after quota-state starts, judged as a
    /// stranger's: see the ledger's `peers`): waits up to [`VOUCH_WAIT`] for the Pod watch to
    /// vouch for it. Whether it did, so the refused reviews are asked again. A forger's review
    /// waits the whole time and gains nothing.
    async fn vouched_after_a_wait(&self, cluster: &str, peer: &str) -> bool {
        if !self.ledger.awaiting_vouch(cluster, peer, VOUCH_WAIT) {
            return false;
        }
        // A few of a peer's calls wait at once (a burst of the API server's first pods comes
        // in batches); a forger's flood is refused at once, holding no task.
        let key = format!("{cluster}/{peer}");
        let _waiting = {
            let mut w = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
            let n = w.entry(key.clone()).or_default();
            if *n >= VOUCH_WAITERS {
                return false;
            }
            *n += 1;
            Waiting {
                peer: key,
                waiting: self.waiting.clone(),
            }
        };
        let started = tokio::time::Instant::now();
        let deadline = started + VOUCH_WAIT;
        while self.ledger.awaiting_vouch(cluster, peer, VOUCH_WAIT)
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(VOUCH_POLL).await;
        }
        let waited = i64::try_from(started.elapsed().as_micros()).unwrap_or(i64::MAX);
        admission_kit::server::trace::record(&tracing::Span::current(), "vouch_wait_us", waited);
        self.ledger.peer_trusted(cluster, peer)
    }

    /// QN, PV-3.2 and PV-4 for one pod (AdmitPod, and each pod of AdmitPods); `Err` is the
    /// INVALID_ARGUMENT text.
    fn admit_one(&self, r: &AdmitPodRequest, caller: &Caller) -> Result<AdmitPodResponse, String> {
        input::admit_pod(r)?;
        let requests: Amounts = r
            .requests
            .iter()
            .map(|(k, a)| Ok((k.clone(), amount_of_wire(k, a)?)))
            .collect::<Result<_, String>>()?;
        let check = PodCheck {
            cluster: &caller.cluster,
            namespace: &r.namespace,
            name: &r.name,
            label: &r.quota_label,
            old_label: r.old_quota_label.as_deref(),
            requests: &requests,
            dry_run: r.dry_run,
            disable_default_quota: r.disable_default_quota,
            check_parent: r.check_parent,
            check_admission: r.check_admission,
            caller: &caller.identity,
            review: &r.review_uid,
            peer: &r.peer,
            pod_uid: &r.pod_uid,
        };
        let started = Instant::now();
        let outcome = self.ledger.check_pod(&check, started);
        self.metrics
            .admit_latency
            .observe(started.elapsed().as_secs_f64());
        Ok(match outcome {
            PodOutcome::Allowed { quota } => {
                self.metrics.admitted.inc();
                AdmitPodResponse {
                    allowed: true,
                    quota,
                    ..AdmitPodResponse::default()
                }
            }
            PodOutcome::Denied { rule, message } => {
                self.metrics
                    .admissions
                    .with_label_values(&["denied", rule])
                    .inc();
                AdmitPodResponse {
                    allowed: false,
                    message,
                    rule: rule.to_owned(),
                    quota: String::new(),
                }
            }
        })
    }
}

/// CheckWorkload's answer for a ledger outcome, and its metric label.
fn workload_response(o: WorkloadOutcome) -> (CheckWorkloadResponse, &'static str) {
    let wire = |a: &Amounts| a.iter().map(|(k, v)| (k.clone(), wire_amount(v))).collect();
    match o {
        WorkloadOutcome::Unchecked { quota } => (
            CheckWorkloadResponse {
                quota,
                fit: WorkloadFit::Unchecked as i32,
                ..CheckWorkloadResponse::default()
            },
            "unchecked",
        ),
        WorkloadOutcome::Refused {
            quota,
            rule,
            message,
        } => (
            CheckWorkloadResponse {
                quota,
                fit: WorkloadFit::Refused as i32,
                rule: rule.to_owned(),
                message,
                ..CheckWorkloadResponse::default()
            },
            "refused",
        ),
        WorkloadOutcome::Checked { quota, fit } => match fit {
            workload::Fit::Fits => (
                CheckWorkloadResponse {
                    quota,
                    fit: WorkloadFit::Fits as i32,
                    ..CheckWorkloadResponse::default()
                },
                "fits",
            ),
            workload::Fit::NotNow { quota: at, free } => (
                CheckWorkloadResponse {
                    quota,
                    fit: WorkloadFit::NotNow as i32,
                    limiting_quota: at,
                    amounts: wire(&free),
                    ..CheckWorkloadResponse::default()
                },
                "not_now",
            ),
            workload::Fit::Never { quota: at, allowed } => (
                CheckWorkloadResponse {
                    quota,
                    fit: WorkloadFit::Never as i32,
                    limiting_quota: at,
                    amounts: wire(&allowed),
                    ..CheckWorkloadResponse::default()
                },
                "never",
            ),
        },
    }
}

fn op_of(code: i32) -> Result<proto::Operation, Status> {
    use proto::Operation::{Create, Delete, Update};
    match proto::Operation::try_from(code) {
        Ok(op @ (Create | Update | Delete)) => Ok(op),
        _ => Err(Status::invalid_argument(format!(
            "operation {code} is not CREATE, UPDATE or DELETE"
        ))),
    }
}

fn quota_of(bytes: &[u8], what: &str) -> Result<Option<ElasticQuota>, Status> {
    if bytes.is_empty() {
        return Ok(None);
    }
    serde_json::from_slice(bytes)
        .map(Some)
        .map_err(|e| Status::invalid_argument(format!("{what} is not an ElasticQuota: {e}")))
}

/// HTTP/2 streams (calls in flight) of one connection at most: scheduling-webhook batches the
/// reviews that arrive while a call is out, so it needs a few.
pub const MAX_STREAMS: u32 = 32;

/// The gRPC server as quota-state runs it: each connection at most [`MAX_STREAMS`] calls at
/// once, 256 KiB unread per call and 1 MiB per connection (a call announcing a large message
/// and sending it slowly holds no more), header lists of 64 KiB, every call answered within 10 s.
/// With [`auth::MAX_CONNECTIONS_PER_IDENTITY`] this bounds what one client key can hold. A call
/// whose metadata carries a W3C trace context (`traceparent`, as scheduling-webhook sends it for
/// a traced review) is a span of that trace, named by its method.
pub fn grpc_server() -> tonic::transport::Server {
    tonic::transport::Server::builder()
        .trace_fn(|req| admission_kit::server::trace::server_span(req.uri().path(), req.headers()))
        .max_concurrent_streams(MAX_STREAMS)
        .initial_stream_window_size(256 * 1024)
        .initial_connection_window_size(1024 * 1024)
        .http2_max_header_list_size(64 * 1024)
        .timeout(Duration::from_secs(10))
}

/// What a trace reader needs of an admission call, written into its span when exported: pods
/// asked for, how many were admitted, the quotas they were charged to and the rules that
/// refused (a wait for the Pod watch is [`Service::vouched_after_a_wait`]'s `vouch_wait_us`).
fn describe_admissions<'a>(answers: impl IntoIterator<Item = &'a AdmitPodResponse>) {
    use admission_kit::server::trace::{exported, record};
    let span = tracing::Span::current();
    if !exported(&span) {
        return;
    }
    let (mut pods, mut allowed) = (0_i64, 0_i64);
    let (mut quotas, mut rules) = (BTreeSet::new(), BTreeSet::new());
    for a in answers {
        pods += 1;
        allowed += i64::from(a.allowed);
        if !a.quota.is_empty() {
            quotas.insert(a.quota.clone());
        }
        if !a.allowed && !a.rule.is_empty() {
            rules.insert(a.rule.clone());
        }
    }
    let list = |s: BTreeSet<String>| s.into_iter().collect::<Vec<_>>().join(",");
    record(&span, "pods", pods);
    record(&span, "allowed", allowed);
    record(&span, "quotas", list(quotas));
    record(&span, "rules", list(rules));
}

/// How long a refused review from a peer awaiting its first vouching pod waits for the Pod
/// watch ([`Service::vouched_after_a_wait`]): the watch shows a created pod within
/// milliseconds, the API server retries a webhook call only after seconds.
const VOUCH_WAIT: Duration = Duration::from_millis(200);
/// How often it looks meanwhile.
const VOUCH_POLL: Duration = Duration::from_millis(5);
/// Calls of one peer that wait at once.
const VOUCH_WAITERS: usize = 4;

#[tonic::async_trait]
impl QuotaState for Service {
    async fn admit_pod(
        &self,
        req: Request<AdmitPodRequest>,
    ) -> Result<Response<AdmitPodResponse>, Status> {
        const M: &str = "AdmitPod";
        let caller = self.begin(M, &req)?;
        let r = req.into_inner();
        let caller = self.own_cluster(M, &caller, &r.cluster)?;
        let mut answer = self
            .admit_one(&r, &caller)
            .map_err(|e| self.invalid(M, e))?;
        if !answer.allowed && self.vouched_after_a_wait(&caller.cluster, &r.peer).await {
            answer = self
                .admit_one(&r, &caller)
                .map_err(|e| self.invalid(M, e))?;
        }
        describe_admissions([&answer]);
        self.ok(M, answer)
    }

    async fn admit_pods(
        &self,
        req: Request<AdmitPodsRequest>,
    ) -> Result<Response<AdmitPodsResponse>, Status> {
        const M: &str = "AdmitPods";
        let caller = self.begin(M, &req)?;
        let pods = req.into_inner().pods;
        input::admit_pods(&pods).map_err(|e| self.invalid(M, e))?;
        let callers = pods
            .iter()
            .map(|p| self.own_cluster(M, &caller, &p.cluster))
            .collect::<Result<Vec<_>, _>>()?;
        let one = |p: &AdmitPodRequest, caller: &Caller| match self.admit_one(p, caller) {
            Ok(r) => AdmitPodAnswer {
                response: Some(r),
                invalid: String::new(),
            },
            Err(invalid) => {
                // Counted as the refused AdmitPod it would have been alone.
                self.invalid("AdmitPod", invalid.clone());
                AdmitPodAnswer {
                    response: None,
                    invalid,
                }
            }
        };
        let mut answers: Vec<AdmitPodAnswer> =
            pods.iter().zip(&callers).map(|(p, c)| one(p, c)).collect();
        let refused = |a: &AdmitPodAnswer| a.response.as_ref().is_some_and(|r| !r.allowed);
        if let Some((p, c)) = pods
            .iter()
            .zip(&callers)
            .zip(&answers)
            .find_map(|(pc, a)| refused(a).then_some(pc))
            && self.vouched_after_a_wait(&c.cluster, &p.peer).await
        {
            for ((p, c), a) in pods.iter().zip(&callers).zip(answers.iter_mut()) {
                if refused(a) {
                    *a = one(p, c);
                }
            }
        }
        describe_admissions(answers.iter().filter_map(|a| a.response.as_ref()));
        self.ok(M, AdmitPodsResponse { answers })
    }

    async fn release(
        &self,
        req: Request<ReleaseRequest>,
    ) -> Result<Response<ReleaseResponse>, Status> {
        const M: &str = "Release";
        let caller = self.begin(M, &req)?;
        let r = req.into_inner();
        input::release(&r).map_err(|e| self.invalid(M, e))?;
        let caller = self.own_cluster(M, &caller, &r.cluster)?;
        if !self.ledger.release_in(
            &caller.cluster,
            &r.namespace,
            &r.name,
            &r.review_uid,
            &caller.identity,
        ) {
            tracing::debug!(
                namespace = %r.namespace,
                name = %r.name,
                caller = %caller.identity,
                "nothing of this caller's to release",
            );
        }
        self.ok(M, ReleaseResponse {})
    }

    async fn lookup(
        &self,
        req: Request<LookupRequest>,
    ) -> Result<Response<LookupResponse>, Status> {
        const M: &str = "Lookup";
        self.begin(M, &req)?;
        let r = req.into_inner();
        input::lookup(&r).map_err(|e| self.invalid(M, e))?;
        let l = self.ledger.lookup(&r.names, &r.namespace);
        self.ok(
            M,
            LookupResponse {
                quotas: l
                    .quotas
                    .into_iter()
                    .map(|(name, q)| proto::QuotaRef {
                        name,
                        is_parent: q.is_parent,
                        tree_id: q.tree_id,
                    })
                    .collect(),
                bound: l.bound.unwrap_or_default(),
                self_named: l.self_named,
            },
        )
    }

    async fn check_workload(
        &self,
        req: Request<CheckWorkloadRequest>,
    ) -> Result<Response<CheckWorkloadResponse>, Status> {
        const M: &str = "CheckWorkload";
        self.begin(M, &req)?;
        let r = req.into_inner();
        input::check_workload(&r).map_err(|e| self.invalid(M, e))?;
        let read =
            |m: &std::collections::HashMap<String, proto::Amount>| -> Result<Amounts, String> {
                m.iter()
                    .map(|(k, a)| {
                        let a = amount_of_wire(k, a)?;
                        // Nothing is reserved, so a peak may pass what one pod may ask (it is compared,
                        // never added): only negative and out-of-range amounts are refused.
                        if a.nano < 0 || a.nano > admission_kit::compat::resources::MAX_NANO {
                            return Err(format!(
                                "{k}={} is negative or out of range",
                                a.canonical()
                            ));
                        }
                        Ok((k.clone(), a))
                    })
                    .collect()
            };
        let peak = read(&r.requests).map_err(|e| self.invalid(M, e))?;
        let total = if r.total.is_empty() {
            peak.clone()
        } else {
            read(&r.total).map_err(|e| self.invalid(M, e))?
        };
        let check = WorkloadCheck {
            namespace: &r.namespace,
            label: &r.quota_label,
            pod: &r.name,
            peak: &peak,
            total: &total,
            disable_default_quota: r.disable_default_quota,
            check_parent: r.check_parent,
        };
        let (answer, fit) = workload_response(self.ledger.check_workload(&check, Instant::now()));
        self.metrics.workloads.with_label_values(&[fit]).inc();
        self.ok(M, answer)
    }

    async fn validate_quota(
        &self,
        req: Request<ValidateQuotaRequest>,
    ) -> Result<Response<ValidateQuotaResponse>, Status> {
        const M: &str = "ValidateQuota";
        self.begin(M, &req)?;
        let r = req.into_inner();
        input::validate_quota(&r).map_err(|e| self.invalid(M, e))?;
        let op = op_of(r.operation).map_err(|e| self.refuse(M, &e))?;
        let object = quota_of(&r.object, "object")
            .map_err(|e| self.refuse(M, &e))?
            .unwrap_or_default();
        let old = quota_of(&r.old_object, "old_object").map_err(|e| self.refuse(M, &e))?;
        let gates = TreeGates {
            update_resource_key: r.update_resource_key,
        };
        self.ok(
            M,
            match self.ledger.validate_quota(op, &object, old.as_ref(), gates) {
                Ok(()) => ValidateQuotaResponse {
                    allowed: true,
                    ..ValidateQuotaResponse::default()
                },
                Err((rule, refused)) => ValidateQuotaResponse {
                    allowed: false,
                    rule: rule.to_owned(),
                    message: refused.message,
                    field: refused.field,
                },
            },
        )
    }
}
