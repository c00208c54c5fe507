//! quota-state: the ElasticQuota tree and per-quota usage in memory, answering every quota question
//! of scheduling-webhook over gRPC: `AdmitPod` (QN, PV-3.2 and PV-4 with atomic check-and-reserve;
//! [`ledger`] states the consistency argument and its limits), `Lookup` (PM-3, QM-3),
//! `ValidateQuota` (QV) and `Release`. The tree rules are [`tree`]'s, shared with the webhook's
//! offline `review`.
//!
//! Replicas elect a leader on a coordination.k8s.io Lease (kube-lease-manager); only the leader
//! reports SERVING, so only it receives admissions. Fail-over limit: reservations the old leader
//! made for pods not yet visible in the new leader's Pod watch are not known to the new leader
//! until those pods appear (an over-admission window bounded by the pods in flight at that
//! moment). Feeding: [`feed`]; the ledger and its consistency argument: [`ledger`].

pub mod auth;
pub mod coalesce;
pub mod feed;
pub mod fleet;
pub mod fuzzing;
pub mod input;
pub mod ledger;
pub mod metrics;
pub mod synthetic;
pub mod tree;
pub mod types;
pub mod usage;
pub mod workload;

/// Generated gRPC types and service (`proto/quota_state.proto`).
#[allow(missing_docs, clippy::all)]
pub mod proto {
    tonic::include_proto!("quotastate.v1");
}

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use admission_kit::Operation;
use admission_kit::go::QuantityFormat;
use admission_kit::resources::NANO_PER_MILLI;
use auth::{Caller, Policy};
use ledger::{Amount, Amounts, Ledger, PodCheck, PodOutcome, WorkloadCheck, WorkloadOutcome};
use proto::quota_state_server::QuotaState;
use proto::{
    AdmitPodAnswer, AdmitPodRequest, AdmitPodResponse, AdmitPodsRequest, AdmitPodsResponse,
    CheckWorkloadRequest, CheckWorkloadResponse, LookupRequest, LookupResponse, ReleaseRequest,
    ReleaseResponse, ValidateQuotaRequest, ValidateQuotaResponse, WorkloadFit,
};
use tonic::{Request, Response, Status};
use tree::TreeGates;
use types::ElasticQuota;

/// The print format of a wire code, or `None` for an unknown code.
fn format_of(code: u32) -> Option<QuantityFormat> {
    match code {
        0 => Some(QuantityFormat::DecimalSI),
        1 => Some(QuantityFormat::BinarySI),
        2 => Some(QuantityFormat::DecimalExponent),
        _ => None,
    }
}

/// The wire code of a format.
pub fn format_code(f: QuantityFormat) -> u32 {
    match f {
        QuantityFormat::DecimalSI => 0,
        QuantityFormat::BinarySI => 1,
        QuantityFormat::DecimalExponent => 2,
    }
}

/// An amount on the wire: its thousandths rounded away from zero (`milli` plus `milli_high` ×
/// 2^64) and the billionths that rounding hides (`sub_milli_nano`; see `Amount` in the proto).
/// Exact for every amount within the kit's bound (`resources::MAX_NANO`, 2^126), that is every
/// exact amount; the arithmetic wraps only far outside it.
pub fn wire_amount(a: &Amount) -> proto::Amount {
    let milli = a.milli();
    let low = milli as i64; // the low 64 bits, read as signed
    proto::Amount {
        milli: low,
        milli_high: (milli.wrapping_sub(i128::from(low)) >> 64) as i64,
        format: format_code(a.format),
        // |rest| < 10^6: fits.
        sub_milli_nano: a.nano.wrapping_sub(milli.wrapping_mul(NANO_PER_MILLI)) as i32,
    }
}

/// An amount from the wire, or why it is not one.
pub fn amount_of_wire(resource: &str, a: &proto::Amount) -> Result<Amount, String> {
    let format = format_of(a.format)
        .ok_or_else(|| format!("{resource}: unknown quantity format {}", a.format))?;
    if i128::from(a.sub_milli_nano).abs() >= NANO_PER_MILLI {
        return Err(format!(
            "{resource}: sub_milli_nano {} is not between -999999 and 999999",
            a.sub_milli_nano
        ));
    }
    let nano = (i128::from(a.milli_high) << 64)
        .checked_add(i128::from(a.milli))
        .and_then(|m| m.checked_mul(NANO_PER_MILLI))
        .and_then(|n| n.checked_add(i128::from(a.sub_milli_nano)))
        .ok_or_else(|| format!("{resource}: amount out of range"))?;
    Ok(Amount { nano, format })
}

#[cfg(test)]
mod wire_tests {
    use super::*;

    #[test]
    fn amounts_cross_the_wire_exactly() {
        for nano in [
            0,
            1,
            -1,
            500_000,
            -500_000,
            999_999,
            1_000_001,
            i128::from(i64::MAX),
            i128::from(i64::MAX) + 1,
            i128::from(i64::MIN) - 1,
            1 << 100,
            -(1 << 100),
            1 << 126,
            -(1 << 126),
        ] {
            let a = Amount {
                nano,
                format: QuantityFormat::BinarySI,
            };
            assert_eq!(amount_of_wire("cpu", &wire_amount(&a)), Ok(a), "{nano}");
        }
        // A value below 2^63 thousandths is one plain int64, as any caller would write it; so
        // is a negative.
        let w = wire_amount(&Amount::from_milli(-5000, QuantityFormat::DecimalSI));
        assert_eq!((w.milli, w.milli_high, w.sub_milli_nano), (-5000, 0, 0));
        assert!(amount_of_wire("cpu", &proto::Amount { format: 7, ..w }).is_err());
        let edge = proto::Amount {
            milli: -1,
            milli_high: i64::MIN,
            format: 0,
            sub_milli_nano: 0,
        };
        assert_eq!(
            amount_of_wire("cpu", &edge),
            Err("cpu: amount out of range".into())
        );
        let rest = proto::Amount {
            milli: 1,
            sub_milli_nano: -1_000_000,
            ..Default::default()
        };
        assert!(amount_of_wire("cpu", &rest).is_err());
    }

    /// Item 3 across a rolling upgrade: a peer built before `sub_milli_nano` reads the rounded
    /// thousandths (Go's MilliValue, what it always counted); an amount from such a peer reads
    /// as its thousandths.
    #[test]
    fn item_3_sub_milli_amounts_and_older_peers() {
        let a = Amount {
            nano: 500_000, // 500u
            format: QuantityFormat::DecimalSI,
        };
        let w = wire_amount(&a);
        assert_eq!((w.milli, w.milli_high, w.sub_milli_nano), (1, 0, -500_000));
        let old = proto::Amount {
            milli: 1500,
            ..Default::default()
        };
        assert_eq!(amount_of_wire("cpu", &old).unwrap().nano, 1_500_000_000);
        let minus = wire_amount(&Amount {
            nano: -1,
            format: QuantityFormat::DecimalSI,
        });
        assert_eq!((minus.milli, minus.sub_milli_nano), (-1, 999_999));
    }
}

/// The gRPC service over a ledger.
#[derive(Clone)]
pub struct Service {
    ledger: Arc<Ledger>,
    serving: Arc<AtomicBool>,
    policy: Policy,
    metrics: metrics::Metrics,
}

impl Service {
    /// Serves `ledger` to callers that `policy` allows, answering from the start.
    pub fn new(ledger: Arc<Ledger>, policy: Policy, metrics: metrics::Metrics) -> Self {
        Self {
            ledger,
            serving: Arc::new(AtomicBool::new(true)),
            policy,
            metrics,
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
        if !fleet::is_cluster_name(asked) {
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

fn op_of(code: i32) -> Result<Operation, Status> {
    match proto::Operation::try_from(code) {
        Ok(proto::Operation::Create) => Ok(Operation::Create),
        Ok(proto::Operation::Update) => Ok(Operation::Update),
        Ok(proto::Operation::Delete) => Ok(Operation::Delete),
        _ => Err(Status::invalid_argument(format!(
            "operation {code} is not CREATE, UPDATE or DELETE"
        ))),
    }
}

/// The wire code of an operation (CONNECT has none: quotas are never connected to).
pub fn operation_code(op: Operation) -> i32 {
    match op {
        Operation::Create => proto::Operation::Create as i32,
        Operation::Update => proto::Operation::Update as i32,
        Operation::Delete => proto::Operation::Delete as i32,
        Operation::Connect => proto::Operation::Unspecified as i32,
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
        let answer = self
            .admit_one(&r, &caller)
            .map_err(|e| self.invalid(M, e))?;
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
        let answers = pods
            .iter()
            .zip(&callers)
            .map(|(p, caller)| match self.admit_one(p, caller) {
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
            })
            .collect();
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
            tracing::debug!(namespace = %r.namespace, name = %r.name, caller = %caller.identity, "nothing of this caller's to release");
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
                        if a.nano < 0 || a.nano > admission_kit::resources::MAX_NANO {
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
                Err((rule, message)) => ValidateQuotaResponse {
                    allowed: false,
                    rule: rule.to_owned(),
                    message,
                },
            },
        )
    }
}
