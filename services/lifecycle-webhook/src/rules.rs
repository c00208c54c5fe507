//! The drain rules (`docs/lifecycle-webhook.md`, ids LD-1 … LD-13), in the order a review meets them, and
//! the two validators that run them: Pod deletions and Pod evictions.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use admission_kit::compat::go::GoDuration;
use admission_kit::review::handler::{Context, Peer, Request, Validator, Verdict, wait_for};
use admission_kit::{Operation, Status};
use http::uri::PathAndQuery;
use jiff::Timestamp;
use k8s_openapi::api::authentication::v1::UserInfo;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::Eviction;

use crate::call::{Answer, Caller, Target};
use crate::cluster::Cluster;
use crate::options::Options;
use crate::record::Ended;
use crate::{LABEL, PATH_ANNOTATION, PORT_ANNOTATION, TIMEOUT_ANNOTATION};

/// The drain path when the Pod does not declare one.
pub const DEFAULT_PATH: &str = "/drain";

/// Time kept back from the review's deadline for answering after the drain call.
const ANSWER_MARGIN: Duration = Duration::from_millis(50);

/// Go's spelling of a duration (`10m0s`, `40s`, `500ms`), as `kubectl` users read them.
pub fn go_duration(d: Duration) -> String {
    GoDuration::from_nanos(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)).canonical()
}

/// Admitted by `rule`, which the decision log names.
fn admitted(rule: &'static str) -> Verdict {
    Verdict {
        applied: vec![rule],
        ..Verdict::default()
    }
}

/// Admitted by `rule` with a warning `kubectl` prints.
fn warned(rule: &'static str, warning: String) -> Verdict {
    Verdict {
        applied: vec![rule],
        warnings: vec![warning],
        ..Verdict::default()
    }
}

/// Whether the Pod opted in (the label the deletion webhook's objectSelector also requires).
pub fn opted_in(pod: &Pod) -> bool {
    pod.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL))
        .is_some_and(|v| v == "true")
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// LD-1: deletions by the configured administrators never wait.
pub fn ld_1_administrator(user: &UserInfo, o: &Options) -> bool {
    user.username
        .as_ref()
        .is_some_and(|u| o.admin_users.iter().any(|a| a == u))
        || user
            .groups
            .iter()
            .flatten()
            .any(|g| o.admin_groups.iter().any(|a| a == g))
}

/// LD-2: a Pod already being deleted (the kubelet's final deletion, a retry after the drain).
pub fn ld_2_terminating(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_some()
}

/// LD-3: only a running Pod with an IP has anything to drain; its IP is the only address ever
/// called.
pub fn ld_3_running_ip(pod: &Pod) -> Option<IpAddr> {
    let status = pod.status.as_ref()?;
    if status.phase.as_deref() != Some("Running") {
        return None;
    }
    status.pod_ip.as_deref()?.parse().ok()
}

/// What a Pod's annotations ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Where to call.
    pub target: Target,
    /// The drain's timeout, capped.
    pub timeout: Duration,
    /// About annotations that were not used as written.
    pub warnings: Vec<String>,
}

/// LD-4: the drain endpoint and timeout from the annotations. The port is a number or the name
/// of one of the Pod's container ports (for a host-network Pod, whose IP is its Node's, only a
/// declared container port); the path an absolute path, never a URL; the timeout a Go duration,
/// at most `--max-drain-timeout`. `Err` says why there is no endpoint to call.
pub fn ld_4_drain_endpoint(pod: &Pod, ip: IpAddr, o: &Options) -> Result<Plan, String> {
    let field = |key: &str| format!("metadata.annotations[{key}]");
    let declared: Vec<(Option<&str>, i32)> = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .flat_map(|c| c.ports.iter().flatten())
        .map(|p| (p.name.as_deref(), p.container_port))
        .collect();
    let Some(port_text) = annotation(pod, PORT_ANNOTATION) else {
        return Err(format!("{} is not set", field(PORT_ANNOTATION)));
    };
    let port = match port_text.parse::<u16>() {
        Ok(p) if p > 0 => p,
        _ => declared
            .iter()
            .find(|(name, _)| *name == Some(port_text))
            .and_then(|(_, p)| u16::try_from(*p).ok())
            .ok_or_else(|| {
                format!(
                    "{}: {port_text:?} is neither a port number nor the name of a container port",
                    field(PORT_ANNOTATION)
                )
            })?,
    };
    let host_network = pod
        .spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false);
    if host_network && !declared.iter().any(|(_, p)| *p == i32::from(port)) {
        return Err(format!(
            "{}: port {port} of a host-network Pod (its IP is its Node's) must be one of its containers' ports",
            field(PORT_ANNOTATION)
        ));
    }
    let path_text = annotation(pod, PATH_ANNOTATION).unwrap_or(DEFAULT_PATH);
    let path = path_text
        .parse::<PathAndQuery>()
        .ok()
        .filter(|_| path_text.starts_with('/') && !path_text.starts_with("//"))
        .ok_or_else(|| {
            format!(
                "{}: {path_text:?} is not an absolute path (only the Pod's own IP is ever called)",
                field(PATH_ANNOTATION)
            )
        })?;
    let mut warnings = Vec::new();
    let asked = match annotation(pod, TIMEOUT_ANNOTATION) {
        None => o.default_timeout,
        Some(t) => match admission_kit::cli::duration(t) {
            Ok(d) if !d.is_zero() => d,
            _ => {
                warnings.push(format!(
                    "{}: {t:?} is not a positive duration; {} used",
                    field(TIMEOUT_ANNOTATION),
                    go_duration(o.default_timeout)
                ));
                o.default_timeout
            }
        },
    };
    let timeout = if asked > o.max_timeout {
        warnings.push(format!(
            "{}: cut to the longest drain allowed, {}",
            field(TIMEOUT_ANNOTATION),
            go_duration(o.max_timeout)
        ));
        o.max_timeout
    } else {
        asked
    };
    Ok(Plan {
        target: Target { ip, port, path },
        timeout,
        warnings,
    })
}

/// LD-5: a Pod on a Node that is gone has nobody to drain it (Pod garbage collection).
pub async fn ld_5_node_gone(pod: &Pod, cluster: &dyn Cluster) -> bool {
    let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()) else {
        return false;
    };
    matches!(cluster.node_exists(node).await, Ok(false))
}

/// Who asked, as far as the rules care.
#[derive(Debug, Clone, Copy)]
pub struct Asked<'a> {
    /// The review's user.
    pub user: &'a UserInfo,
    /// A dry run (nothing may be started).
    pub dry_run: bool,
    /// An eviction (refused with 429, which `kubectl drain` retries), not a deletion (refused
    /// with 403: client libraries retry a 429 on their own, kube-rs up to 15 times with growing
    /// pauses, which would hold a `kubectl delete` or a controller's reconcile for minutes).
    pub eviction: bool,
}

/// LD-1 to LD-3, which only ever let a deletion proceed: the verdict when one of them does.
fn ld_1_to_3_nothing_to_drain(pod: &Pod, asked: &Asked<'_>, o: &Options) -> Option<Verdict> {
    if ld_1_administrator(asked.user, o) {
        return Some(admitted("LD-1"));
    }
    if ld_2_terminating(pod) {
        return Some(admitted("LD-2"));
    }
    ld_3_running_ip(pod).is_none().then(|| admitted("LD-3"))
}

/// The rules with what they call: the API and the Pods.
pub struct Drainer {
    cluster: Arc<dyn Cluster>,
    caller: Arc<dyn Caller>,
    options: Options,
}

impl Drainer {
    /// Rules asking `cluster` and calling Pods through `caller`, under `options`.
    pub fn new(cluster: Arc<dyn Cluster>, caller: Arc<dyn Caller>, options: Options) -> Self {
        Self {
            cluster,
            caller,
            options,
        }
    }

    /// The rules in order, for a Pod that opted in; `until` is when the answer is due.
    pub async fn decide(
        &self,
        pod: &Pod,
        asked: Asked<'_>,
        o: &Options,
        now: Timestamp,
        until: Instant,
    ) -> Verdict {
        let name = name(pod);
        if let Some(v) = ld_1_to_3_nothing_to_drain(pod, &asked, o) {
            return v;
        }
        let Some(ip) = ld_3_running_ip(pod) else {
            return admitted("LD-3");
        };
        let plan = match ld_4_drain_endpoint(pod, ip, o) {
            Ok(p) => p,
            Err(why) => {
                return warned(
                    "LD-4",
                    format!("no drain for {name}: {why}; deletion proceeds"),
                );
            }
        };
        if ld_5_node_gone(pod, self.cluster.as_ref()).await {
            return admitted("LD-5");
        }
        let mut v = self.drain(pod, &plan, asked, o, now, until).await;
        v.warnings.splice(0..0, plan.warnings);
        v
    }

    /// LD-6 to LD-9: the drain itself.
    ///
    /// LD-7: the drain's start and deadline are recorded by the first deletion; when they
    /// cannot be, the deletion proceeds with a warning.
    ///
    /// LD-8: past the recorded deadline the deletion proceeds without a call.
    ///
    /// LD-9: the Pod's drain endpoint is called: done proceeds, in progress refuses (403 for a
    /// deletion, 429 for an eviction), anything else proceeds with a warning.
    async fn drain(
        &self,
        pod: &Pod,
        plan: &Plan,
        asked: Asked<'_>,
        o: &Options,
        now: Timestamp,
        until: Instant,
    ) -> Verdict {
        let name = name(pod);
        // LD-6: a dry run starts nothing and calls nobody.
        if asked.dry_run {
            return warned(
                "LD-6",
                format!(
                    "dry run: no drain started; deleting {name} waits until it has drained at {}, at most {}",
                    plan.target,
                    go_duration(plan.timeout)
                ),
            );
        }
        // LD-7: the drain's start and deadline, recorded where every replica sees them.
        let id = format!(
            "{}/{name}",
            pod.metadata.namespace.as_deref().unwrap_or_default()
        );
        // The API server always sends the UID; a review without one is keyed by its name.
        let uid = match pod.metadata.uid.as_deref() {
            Some(u) if !u.is_empty() => u,
            _ => id.as_str(),
        };
        let begun = match self
            .cluster
            .begin(&o.record, uid, &id, plan.timeout, now)
            .await
        {
            Ok(b) => b,
            Err(e) => {
                admission_kit::server::metrics::drain("unrecorded");
                return warned(
                    "LD-7",
                    format!("drain of {name} not recorded ({e}); deletion proceeds without it"),
                );
            }
        };
        if begun.new {
            admission_kit::server::metrics::drain("started");
            tracing::info!(
                pod = %id,
                target = %plan.target,
                deadline = %begun.drain.deadline,
                "drain started",
            );
        }
        let (started, deadline) = match (begun.drain.started_at(), begun.drain.deadline_at()) {
            (Ok(s), Ok(d)) => (s, d),
            (Err(e), _) | (_, Err(e)) => {
                return warned("LD-7", format!("drain of {name}: {e}; deletion proceeds"));
            }
        };
        let allowed = Duration::try_from(deadline.duration_since(started)).unwrap_or_default();
        // LD-8: past the deadline the deletion proceeds, drained or not.
        if begun.drain.ended == Some(Ended::Done) && now >= deadline {
            return admitted("LD-8");
        }
        if begun.drain.ended == Some(Ended::TimedOut) || now >= deadline {
            self.ended(o, uid, Ended::TimedOut, &id).await;
            return warned(
                "LD-8",
                format!(
                    "{name} has not drained within {}; deletion proceeds",
                    go_duration(allowed)
                ),
            );
        }
        // LD-9: ask the Pod, within what is left of the review's time.
        let left = until
            .saturating_duration_since(Instant::now())
            .saturating_sub(ANSWER_MARGIN);
        let answer = if left.is_zero() {
            Answer::Unanswered("no time left in this review".into())
        } else {
            self.caller
                .drain(&plan.target, o.call_timeout.min(left))
                .await
        };
        match answer {
            Answer::Done => {
                self.ended(o, uid, Ended::Done, &id).await;
                admitted("LD-9")
            }
            Answer::Draining(progress) => {
                let elapsed = Duration::from_secs(
                    now.duration_since(started).as_secs().max(0).unsigned_abs(),
                );
                let progress = progress.map(|p| format!(": {p}")).unwrap_or_default();
                let (code, reason) = if asked.eviction {
                    (429, "TooManyRequests")
                } else {
                    (403, "Forbidden")
                };
                Verdict {
                    refusal: Some((
                        "LD-9",
                        Status::failure(
                            code,
                            reason,
                            format!(
                                "draining {name}{progress}, started {} ago; deletion proceeds when drained or at {}",
                                go_duration(elapsed),
                                go_duration(allowed)
                            ),
                        ),
                    )),
                    ..Verdict::default()
                }
            }
            Answer::Unanswered(why) => {
                admission_kit::server::metrics::drain("unanswered");
                warned(
                    "LD-9",
                    format!(
                        "{name}'s drain endpoint {} did not answer ({why}); deletion proceeds without waiting",
                        plan.target
                    ),
                )
            }
        }
    }

    /// Records how a drain ended and counts it once across replicas (the replica whose write
    /// recorded it).
    async fn ended(&self, o: &Options, uid: &str, how: Ended, id: &str) {
        match self.cluster.end(&o.record, uid, how).await {
            Ok(true) => {
                let outcome = match how {
                    Ended::Done => "done",
                    Ended::TimedOut => "timed_out",
                };
                admission_kit::server::metrics::drain(outcome);
                tracing::info!(pod = %id, outcome, "drain ended");
            }
            Ok(false) => {}
            Err(e) => tracing::warn!(pod = %id, error = %e, "drain end not recorded"),
        }
    }
}

fn name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or_default()
}

/// LD-11: runs `decide` with the options, answering within `--review-deadline` whatever the
/// API or the Pod does: what is not decided by then proceeds, with a warning.
async fn bounded<'o, F: std::future::Future<Output = Verdict>>(
    o: &'o Options,
    decide: impl FnOnce(&'o Options, Instant) -> F,
) -> Verdict {
    let deadline = o.review_deadline;
    match tokio::time::timeout(deadline, decide(o, Instant::now() + deadline)).await {
        Ok(v) => v,
        Err(_) => {
            admission_kit::server::metrics::drain("undecided");
            warned(
                "LD-11",
                format!(
                    "drain not decided within {}; deletion proceeds",
                    go_duration(deadline)
                ),
            )
        }
    }
}

/// Runs an async decision from synchronous code: on the server's runtime by lending the worker
/// ([`wait_for`]), and outside any runtime (the `review` command) on one made for it, so that
/// `review` asks the API and the Pod as the server would.
fn at_once(decision: impl std::future::Future<Output = Verdict>) -> Verdict {
    let undecided =
        |why: String| warned("LD-11", format!("not decided ({why}); deletion proceeds"));
    if tokio::runtime::Handle::try_current().is_ok() {
        return wait_for(decision)
            .unwrap_or_else(|| undecided("drains need the multi-threaded runtime".into()));
    }
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(decision),
        Err(e) => undecided(format!("no runtime: {e}")),
    }
}

/// LD-12: a deletion drains the Pod as the API server has it, never as the review says: the
/// review's Pod must exist with the same uid and IP (a review forged where the API server
/// presents no certificate names what it likes, and would have the service dial any address
/// and start any Pod's drain clock). Otherwise the deletion proceeds, nothing started and
/// nobody called; a Pod that cannot be read proceeds with a warning.
pub async fn ld_12_the_pod_itself(claimed: &Pod, cluster: &dyn Cluster) -> Result<Pod, Verdict> {
    let namespace = claimed.metadata.namespace.as_deref().unwrap_or_default();
    let pod = match cluster.pod(namespace, name(claimed)).await {
        Ok(Some(pod)) => pod,
        Ok(None) => return Err(admitted("LD-12")),
        Err(e) => {
            return Err(warned(
                "LD-12",
                format!("Pod not read ({e}); deletion proceeds without a drain"),
            ));
        }
    };
    let ip = |p: &Pod| p.status.as_ref().and_then(|s| s.pod_ip.clone());
    if pod.metadata.uid.is_none()
        || pod.metadata.uid != claimed.metadata.uid
        || ip(&pod) != ip(claimed)
    {
        tracing::warn!(
            namespace,
            pod = name(claimed),
            "a deletion review that does not match the Pod as the API server has it: no drain"
        );
        return Err(admitted("LD-12"));
    }
    if !opted_in(&pod) {
        return Err(admitted("LD-12"));
    }
    Ok(pod)
}

/// LD-13: an eviction names only a Pod, which anyone can read, so where the API server presents
/// no certificate a forged one would start any Pod's drain. It starts one only when it came on a
/// connection that proved the API server's certificate, or from an address quota-state lists as
/// the API server's (`--api-server-peers`; its Lease names the addresses its pods came from).
/// Otherwise the eviction proceeds, nothing started and nobody called, with a warning: a real
/// eviction from an address not listed yet goes through undrained, never held.
pub async fn ld_13_eviction_from_the_api_server(
    peer: Option<Peer>,
    pod: &Pod,
    o: &Options,
    cluster: &dyn Cluster,
) -> Option<Verdict> {
    let (Some(peer), Some(lease)) = (peer, o.api_server_peers.as_deref()) else {
        // No address to judge (a handler called in process), or the check turned off.
        return None;
    };
    if peer.authenticated {
        return None;
    }
    let name = name(pod);
    match cluster.api_server_peers(&o.record.namespace, lease).await {
        Ok(peers) if peers.iter().any(|p| p.parse() == Ok(peer.ip)) => None,
        Ok(_) => {
            tracing::warn!(
                pod = name,
                peer = %peer.ip,
                "an eviction from an address not known as the API server's: no drain"
            );
            Some(warned(
                "LD-13",
                format!(
                    "eviction of {name} proceeds without a drain: it did not come from an address known as the API server's"
                ),
            ))
        }
        Err(e) => Some(warned(
            "LD-13",
            format!(
                "eviction of {name} proceeds without a drain: the API server's addresses not read ({e})"
            ),
        )),
    }
}

/// DELETE of `pods` (sent only for Pods labelled [`LABEL`]).
pub struct PodDeletion(pub Arc<Drainer>);

impl Validator for PodDeletion {
    type Object = Pod;

    fn validate(&self, req: &Request<Pod>, ctx: &Context) -> Verdict {
        at_once(self.validate_async(req, ctx))
    }

    fn waits(&self, _: &Context) -> bool {
        true
    }

    async fn validate_async(&self, req: &Request<Pod>, _: &Context) -> Verdict {
        if req.operation != Operation::Delete
            || req.sub_resource.as_deref().is_some_and(|s| !s.is_empty())
            || !opted_in(&req.object)
        {
            return Verdict::default();
        }
        let asked = Asked {
            user: &req.user_info,
            dry_run: req.dry_run,
            eviction: false,
        };
        bounded(&self.0.options, |o, until| async move {
            // What the review says may only let it proceed at once; anything more is decided on
            // the Pod as the API server has it.
            if let Some(v) = ld_1_to_3_nothing_to_drain(&req.object, &asked, o) {
                return v;
            }
            let pod = match ld_12_the_pod_itself(&req.object, self.0.cluster.as_ref()).await {
                Ok(pod) => pod,
                Err(v) => return v,
            };
            self.0.decide(&pod, asked, o, Timestamp::now(), until).await
        })
        .await
    }

    fn reads_old_object(&self) -> bool {
        false
    }
}

/// CREATE of `pods/eviction` (sent for every eviction: the API server matches objectSelectors
/// against the Eviction, which has no labels, so the Pod is read to see whether it opted in).
pub struct PodEviction(pub Arc<Drainer>);

impl Validator for PodEviction {
    type Object = Eviction;

    fn validate(&self, req: &Request<Eviction>, ctx: &Context) -> Verdict {
        at_once(self.validate_async(req, ctx))
    }

    fn waits(&self, _: &Context) -> bool {
        true
    }

    /// LD-10: an eviction reads the Pod it names: none, or one that did not opt in, proceeds
    /// (a Pod that cannot be read proceeds with a warning); otherwise it drains as a deletion.
    async fn validate_async(&self, req: &Request<Eviction>, ctx: &Context) -> Verdict {
        if req.operation != Operation::Create {
            return Verdict::default();
        }
        let namespace = req.namespace.as_deref().unwrap_or_default();
        // The eviction's own delete options can ask for a dry run the review does not show.
        let dry_run = req.dry_run
            || req
                .object
                .delete_options
                .as_ref()
                .and_then(|d| d.dry_run.as_ref())
                .is_some_and(|d| !d.is_empty());
        let asked = Asked {
            user: &req.user_info,
            dry_run,
            eviction: true,
        };
        bounded(&self.0.options, |o, until| async move {
            // LD-10: the evicted Pod, read from the API.
            let pod = match self.0.cluster.pod(namespace, &req.name).await {
                Ok(Some(pod)) => pod,
                Ok(None) => return admitted("LD-10"),
                Err(e) => {
                    return warned(
                        "LD-10",
                        format!("evicted Pod not read ({e}); eviction proceeds"),
                    );
                }
            };
            if !opted_in(&pod) {
                return Verdict::default();
            }
            if let Some(v) = ld_1_to_3_nothing_to_drain(&pod, &asked, o) {
                return v;
            }
            if let Some(v) =
                ld_13_eviction_from_the_api_server(ctx.peer(), &pod, o, self.0.cluster.as_ref())
                    .await
            {
                return v;
            }
            self.0.decide(&pod, asked, o, Timestamp::now(), until).await
        })
        .await
    }

    fn reads_old_object(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use futures::future::BoxFuture;
    use serde_json::json;

    use super::*;
    use crate::cluster::Memory;

    /// Answers from a script, remembering every target called.
    #[derive(Default)]
    struct Script {
        answer: Mutex<Option<Answer>>,
        called: Mutex<Vec<String>>,
    }

    impl Caller for Script {
        fn drain<'a>(&'a self, target: &'a Target, _: Duration) -> BoxFuture<'a, Answer> {
            self.called.lock().unwrap().push(target.to_string());
            let a = self.answer.lock().unwrap().clone();
            Box::pin(async move { a.unwrap_or(Answer::Unanswered("no script".into())) })
        }
    }

    struct Rig {
        cluster: Arc<Memory>,
        script: Arc<Script>,
        drainer: Drainer,
        o: Options,
    }

    fn rig() -> Rig {
        let cluster = Arc::new(Memory::default());
        cluster.nodes.lock().unwrap().push("node-a".into());
        let script = Arc::new(Script::default());
        let o = Options::with(&[
            ("drain-record-namespace", "ops"),
            ("admin-groups", "drain-admins"),
        ])
        .unwrap();
        let drainer = Drainer::new(cluster.clone(), script.clone(), o.clone());
        Rig {
            cluster,
            script,
            drainer,
            o,
        }
    }

    fn pod(extra: serde_json::Value) -> Pod {
        let mut p = json!({
            "metadata": {"name": "llm-0", "namespace": "serving", "uid": "u-1",
                         "labels": {LABEL: "true"},
                         "annotations": {PORT_ANNOTATION: "8080"}},
            "spec": {"nodeName": "node-a", "containers": [{"name": "server", "image": "x",
                     "ports": [{"name": "admin", "containerPort": 9090}]}]},
            "status": {"phase": "Running", "podIP": "10.0.0.7"}
        });
        json_patch::merge(&mut p, &extra);
        serde_json::from_value(p).unwrap()
    }

    fn user(groups: &[&str]) -> UserInfo {
        UserInfo {
            username: Some("alice".into()),
            groups: Some(groups.iter().map(|g| (*g).to_owned()).collect()),
            ..UserInfo::default()
        }
    }

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    impl Rig {
        fn say(&self, a: Answer) {
            *self.script.answer.lock().unwrap() = Some(a);
        }

        fn called(&self) -> Vec<String> {
            self.script.called.lock().unwrap().clone()
        }

        async fn decide(&self, pod: &Pod, groups: &[&str], dry_run: bool, now: &str) -> Verdict {
            let u = user(groups);
            let asked = Asked {
                user: &u,
                dry_run,
                eviction: false,
            };
            self.drainer
                .decide(
                    pod,
                    asked,
                    &self.o,
                    at(now),
                    Instant::now() + Duration::from_secs(1),
                )
                .await
        }
    }

    fn refusal(v: &Verdict) -> (u16, String) {
        let (rule, status) = v.refusal.clone().expect("refused");
        assert_eq!(rule, "LD-9");
        (status.code.unwrap_or_default(), status.message)
    }

    #[tokio::test]
    async fn ld_9_refused_while_draining_then_allowed_once_drained() {
        let r = rig();
        let p = pod(json!({}));
        r.say(Answer::Draining(Some("12 requests in flight".into())));
        let v = r.decide(&p, &[], false, "2026-11-26T06:00:00Z").await;
        assert_eq!(
            refusal(&v),
            (403, "draining llm-0: 12 requests in flight, started 0s ago; deletion proceeds when drained or at 10m0s".into())
        );
        r.say(Answer::Draining(None));
        let v = r.decide(&p, &[], false, "2026-11-26T06:00:40Z").await;
        assert_eq!(
            refusal(&v).1,
            "draining llm-0, started 40s ago; deletion proceeds when drained or at 10m0s"
        );
        r.say(Answer::Done);
        let v = r.decide(&p, &[], false, "2026-11-26T06:01:00Z").await;
        assert!(v.allowed() && v.warnings.is_empty(), "{v:?}");
        assert_eq!(v.applied, ["LD-9"]);
        assert_eq!(r.called(), ["http://10.0.0.7:8080/drain"; 3]);
        // Done once is not done for ever: a later review (an eviction retried after a
        // PodDisruptionBudget refused it, the Pod back in service meanwhile) asks again, within
        // the same deadline.
        r.say(Answer::Draining(None));
        let v = r.decide(&p, &[], false, "2026-11-26T06:02:00Z").await;
        assert!(refusal(&v).1.contains("started 2m0s ago"), "{v:?}");
        assert_eq!(r.called().len(), 4);
        // Past the deadline of a drain that was done once: proceeds, nothing to warn about.
        let v = r.decide(&p, &[], false, "2026-11-26T06:10:00Z").await;
        assert!(v.allowed() && v.warnings.is_empty(), "{v:?}");
        assert_eq!(v.applied, ["LD-8"]);
        assert_eq!(r.called().len(), 4);
    }

    #[tokio::test]
    async fn ld_8_past_the_deadline_the_deletion_proceeds() {
        let r = rig();
        let p = pod(json!({"metadata": {"annotations": {TIMEOUT_ANNOTATION: "1m"}}}));
        r.say(Answer::Draining(None));
        assert!(
            !r.decide(&p, &[], false, "2026-11-26T06:00:00Z")
                .await
                .allowed()
        );
        // A longer timeout written later does not move the recorded deadline.
        let longer = pod(json!({"metadata": {"annotations": {TIMEOUT_ANNOTATION: "50m"}}}));
        let v = r.decide(&longer, &[], false, "2026-11-26T06:01:00Z").await;
        assert!(v.allowed(), "{v:?}");
        assert_eq!(v.applied, ["LD-8"]);
        assert_eq!(
            v.warnings,
            ["llm-0 has not drained within 1m0s; deletion proceeds"]
        );
        assert_eq!(r.called().len(), 1, "no call past the deadline");
    }

    #[tokio::test]
    async fn ld_1_to_ld_5_proceed_without_a_call() {
        let r = rig();
        r.say(Answer::Draining(None));
        let now = "2026-11-26T06:00:00Z";
        let cases = [
            ("LD-1", pod(json!({})), vec!["drain-admins"]),
            (
                "LD-2",
                pod(json!({"metadata": {"deletionTimestamp": "2026-11-26T05:59:00Z"}})),
                vec![],
            ),
            (
                "LD-3",
                pod(json!({"status": {"phase": "Pending", "podIP": null}})),
                vec![],
            ),
            ("LD-3", pod(json!({"status": {"podIP": null}})), vec![]),
            (
                "LD-3",
                pod(json!({"status": {"phase": "Succeeded"}})),
                vec![],
            ),
            (
                "LD-5",
                pod(json!({"spec": {"nodeName": "node-gone"}})),
                vec![],
            ),
        ];
        for (rule, p, groups) in cases {
            let v = r.decide(&p, &groups, false, now).await;
            assert!(v.allowed() && v.warnings.is_empty(), "{rule}: {v:?}");
            assert_eq!(v.applied, [rule]);
        }
        assert!(r.called().is_empty());
        assert!(
            r.cluster.record.lock().unwrap().is_empty(),
            "nothing recorded"
        );
    }

    #[tokio::test]
    async fn ld_4_the_pod_ip_is_the_only_host_ever_called() {
        let r = rig();
        r.say(Answer::Done);
        let now = "2026-11-26T06:00:00Z";
        // Annotations naming other hosts are not read; the path is a path.
        let p = pod(json!({"metadata": {"annotations": {
            "drain.admission-webhooks.io/host": "169.254.169.254",
            "drain.admission-webhooks.io/url": "http://169.254.169.254/latest",
            PATH_ANNOTATION: "/drain?grace=30"}}}));
        assert!(r.decide(&p, &[], false, now).await.allowed());
        assert_eq!(r.called(), ["http://10.0.0.7:8080/drain?grace=30"]);
        for path in [
            "http://169.254.169.254/latest",
            "//169.254.169.254/latest",
            "@169.254.169.254/x",
            "drain",
        ] {
            let p = pod(json!({"metadata": {"uid": path, "annotations": {PATH_ANNOTATION: path}}}));
            let v = r.decide(&p, &[], false, now).await;
            assert!(v.allowed(), "{path}");
            assert_eq!(v.applied, ["LD-4"], "{path}");
            assert!(
                v.warnings[0].contains("drain.admission-webhooks.io/path")
                    && v.warnings[0].contains("not an absolute path"),
                "{path}: {:?}",
                v.warnings
            );
        }
        assert_eq!(r.called().len(), 1, "no call for a path that is a URL");
    }

    #[tokio::test]
    async fn ld_4_ports_by_number_or_container_port_name() {
        let r = rig();
        r.say(Answer::Done);
        let now = "2026-11-26T06:00:00Z";
        let named = pod(json!({"metadata": {"annotations": {PORT_ANNOTATION: "admin"}}}));
        assert!(r.decide(&named, &[], false, now).await.allowed());
        assert_eq!(r.called(), ["http://10.0.0.7:9090/drain"]);
        for (port, says) in [
            (
                json!(null),
                "metadata.annotations[drain.admission-webhooks.io/port] is not set",
            ),
            (
                json!("0"),
                "\"0\" is neither a port number nor the name of a container port",
            ),
            (json!("70000"), "\"70000\" is neither"),
            (json!("metrics"), "\"metrics\" is neither"),
        ] {
            let p = pod(json!({"metadata": {"annotations": {PORT_ANNOTATION: port}}}));
            let v = r.decide(&p, &[], false, now).await;
            assert_eq!(v.applied, ["LD-4"]);
            assert!(v.warnings[0].contains(says), "{port}: {:?}", v.warnings);
            assert!(
                v.warnings[0].starts_with("no drain for llm-0: "),
                "{:?}",
                v.warnings
            );
        }
        // A host-network Pod's IP is its Node's: only a declared container port is called.
        let host = pod(json!({"spec": {"hostNetwork": true}}));
        let v = r.decide(&host, &[], false, now).await;
        assert_eq!(v.applied, ["LD-4"]);
        assert!(v.warnings[0].contains("host-network"), "{:?}", v.warnings);
        let declared = pod(
            json!({"spec": {"hostNetwork": true}, "metadata": {"uid": "u-9", "annotations": {PORT_ANNOTATION: "9090"}}}),
        );
        assert!(r.decide(&declared, &[], false, now).await.allowed());
        assert_eq!(r.called().len(), 2);
    }

    #[tokio::test]
    async fn ld_4_timeouts_are_capped_and_bad_ones_use_the_default() {
        let r = rig();
        r.say(Answer::Draining(None));
        let now = "2026-11-26T06:00:00Z";
        let long = pod(json!({"metadata": {"annotations": {TIMEOUT_ANNOTATION: "30h"}}}));
        let v = r.decide(&long, &[], false, now).await;
        assert!(refusal(&v).1.ends_with("or at 1h0m0s"), "{v:?}");
        assert_eq!(
            v.warnings,
            [
                "metadata.annotations[drain.admission-webhooks.io/timeout]: cut to the longest drain allowed, 1h0m0s"
            ]
        );
        let bad = pod(
            json!({"metadata": {"uid": "u-2", "annotations": {TIMEOUT_ANNOTATION: "ten minutes"}}}),
        );
        let v = r.decide(&bad, &[], false, now).await;
        assert!(refusal(&v).1.ends_with("or at 10m0s"), "{v:?}");
        assert!(
            v.warnings[0].contains("is not a positive duration; 10m0s used"),
            "{v:?}"
        );
    }

    #[tokio::test]
    async fn ld_6_a_dry_run_starts_nothing() {
        let r = rig();
        r.say(Answer::Draining(None));
        let v = r
            .decide(&pod(json!({})), &[], true, "2026-11-26T06:00:00Z")
            .await;
        assert!(v.allowed());
        assert_eq!(v.applied, ["LD-6"]);
        assert_eq!(
            v.warnings,
            [
                "dry run: no drain started; deleting llm-0 waits until it has drained at http://10.0.0.7:8080/drain, at most 10m0s"
            ]
        );
        assert!(r.called().is_empty());
        assert!(r.cluster.record.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn ld_7_and_ld_9_failures_let_the_deletion_proceed_with_a_warning() {
        let r = rig();
        r.say(Answer::Unanswered("no answer within 500ms".into()));
        let v = r
            .decide(&pod(json!({})), &[], false, "2026-11-26T06:00:00Z")
            .await;
        assert!(v.allowed());
        assert_eq!(
            v.warnings,
            [
                "llm-0's drain endpoint http://10.0.0.7:8080/drain did not answer (no answer within 500ms); deletion proceeds without waiting"
            ]
        );
        *r.cluster.failing.lock().unwrap() = Some("connection refused".into());
        let v = r
            .decide(&pod(json!({})), &[], false, "2026-11-26T06:00:00Z")
            .await;
        assert!(v.allowed());
        assert_eq!(v.applied, ["LD-7"]);
        assert_eq!(
            v.warnings,
            ["drain of llm-0 not recorded (connection refused); deletion proceeds without it"]
        );
    }

    fn request<T>(object: T, operation: Operation, dry_run: bool) -> Request<T> {
        Request {
            uid: "r".into(),
            kind: Default::default(),
            resource: Default::default(),
            sub_resource: None,
            name: "llm-0".into(),
            namespace: Some("serving".into()),
            operation,
            user_info: user(&[]),
            dry_run,
            object,
            old_object: None,
        }
    }

    fn context() -> Context {
        Context::default()
    }

    /// LD-13: an eviction from an address quota-state does not list as the API server's, on a
    /// connection without its certificate, proceeds and calls nobody; one from a listed
    /// address, or a connection that proved the certificate, drains.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ld_13_only_the_api_servers_evictions_start_a_drain() {
        let r = rig();
        r.say(Answer::Draining(None));
        r.cluster
            .pods
            .lock()
            .unwrap()
            .insert("serving/llm-0".into(), pod(json!({})));
        r.cluster
            .api_server_peers
            .lock()
            .unwrap()
            .push("10.1.0.1".into());
        let evict = PodEviction(Arc::new(r.drainer));
        let eviction: Eviction =
            serde_json::from_value(json!({"metadata": {"name": "llm-0", "namespace": "serving"}}))
                .unwrap();
        let from = |ip: &str, authenticated: bool| {
            context().with_peer(Some(Peer {
                ip: ip.parse().unwrap(),
                authenticated,
            }))
        };
        let req = request(eviction, Operation::Create, false);
        let v = evict.validate_async(&req, &from("10.2.0.9", false)).await;
        assert!(v.allowed(), "{v:?}");
        assert_eq!(v.applied, ["LD-13"]);
        assert_eq!(
            v.warnings,
            [
                "eviction of llm-0 proceeds without a drain: it did not come from an address known as the API server's"
            ]
        );
        assert!(r.script.called.lock().unwrap().is_empty());
        assert!(
            r.cluster.record.lock().unwrap().is_empty(),
            "no drain recorded"
        );
        // Listed, or proved by its certificate: drains.
        for ctx in [from("10.1.0.1", false), from("10.2.0.9", true)] {
            let v = evict.validate_async(&req, &ctx).await;
            assert_eq!(refusal(&v).0, 429);
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn evictions_read_the_pod_and_honour_their_own_dry_run() {
        let r = rig();
        r.say(Answer::Draining(Some("checkpointing step 1200".into())));
        let drainer = Arc::new(r.drainer);
        let evict = PodEviction(drainer.clone());
        let ctx = context();
        let eviction = |dry: serde_json::Value| -> Eviction {
            serde_json::from_value(
                json!({"metadata": {"name": "llm-0", "namespace": "serving"},
                                          "deleteOptions": {"dryRun": dry}}),
            )
            .unwrap()
        };
        // No such Pod: the API server answers 404 itself.
        let v = evict
            .validate_async(
                &request(eviction(json!([])), Operation::Create, false),
                &ctx,
            )
            .await;
        assert_eq!(v.applied, ["LD-10"]);
        // A Pod that did not opt in: nothing to say.
        let mut plain = pod(json!({}));
        plain.metadata.labels = None;
        r.cluster
            .pods
            .lock()
            .unwrap()
            .insert("serving/llm-0".into(), plain);
        let v = evict
            .validate_async(
                &request(eviction(json!([])), Operation::Create, false),
                &ctx,
            )
            .await;
        assert!(v.allowed() && v.applied.is_empty() && v.warnings.is_empty());
        r.cluster
            .pods
            .lock()
            .unwrap()
            .insert("serving/llm-0".into(), pod(json!({})));
        // The eviction's deleteOptions.dryRun is a dry run although the review says none.
        let v = evict
            .validate_async(
                &request(eviction(json!(["All"])), Operation::Create, false),
                &ctx,
            )
            .await;
        assert_eq!(v.applied, ["LD-6"]);
        assert!(r.script.called.lock().unwrap().is_empty());
        let v = evict
            .validate_async(
                &request(eviction(json!([])), Operation::Create, false),
                &ctx,
            )
            .await;
        let (code, msg) = refusal(&v);
        assert_eq!(code, 429);
        assert!(
            msg.starts_with("draining llm-0: checkpointing step 1200, started "),
            "{msg}"
        );
        // Deletions: only DELETE of an opted-in Pod is judged.
        let delete = PodDeletion(drainer);
        let v = delete
            .validate_async(&request(pod(json!({})), Operation::Delete, false), &ctx)
            .await;
        assert_eq!(refusal(&v).0, 403);
        let mut plain = pod(json!({}));
        plain.metadata.labels = None;
        let v = delete
            .validate_async(&request(plain, Operation::Delete, false), &ctx)
            .await;
        assert!(v.allowed() && v.applied.is_empty());
        let v = delete
            .validate_async(&request(pod(json!({})), Operation::Update, false), &ctx)
            .await;
        assert!(v.allowed() && v.applied.is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ld_12_a_deletion_drains_the_pod_the_api_server_has() {
        let r = rig();
        r.say(Answer::Draining(None));
        let drainer = Arc::new(r.drainer);
        let delete = PodDeletion(drainer);
        let ctx = context();
        let forged = [
            // No such Pod.
            pod(json!({})),
            // Another uid (a Pod recreated under the name, or a guess).
            pod(json!({"metadata": {"uid": "u-other"}})),
            // Its own IP, pointing anywhere.
            pod(json!({"status": {"podIP": "169.254.169.254"}})),
        ];
        for (i, p) in forged.into_iter().enumerate() {
            if i == 1 {
                r.cluster
                    .pods
                    .lock()
                    .unwrap()
                    .insert("serving/llm-0".into(), pod(json!({})));
            }
            let v = delete
                .validate_async(&request(p, Operation::Delete, false), &ctx)
                .await;
            assert!(v.allowed(), "{i}");
            assert_eq!(v.applied, ["LD-12"], "{i}");
        }
        assert!(r.script.called.lock().unwrap().is_empty(), "nobody called");
        assert!(
            r.cluster.record.lock().unwrap().is_empty(),
            "no drain started"
        );
        // The Pod itself: drained at its own address, whatever the review's annotations say.
        let claimed = pod(json!({"metadata": {"annotations": {PORT_ANNOTATION: "22"}}}));
        let v = delete
            .validate_async(&request(claimed, Operation::Delete, false), &ctx)
            .await;
        assert_eq!(refusal(&v).0, 403);
        assert_eq!(
            *r.script.called.lock().unwrap(),
            ["http://10.0.0.7:8080/drain"]
        );
    }

    #[test]
    fn review_outside_a_runtime_decides_on_its_own() {
        let r = rig();
        let mut p = pod(json!({"status": {"phase": "Pending"}}));
        p.spec.as_mut().unwrap().node_name = None;
        r.cluster
            .pods
            .lock()
            .unwrap()
            .insert("serving/llm-0".into(), p.clone());
        let v = PodDeletion(Arc::new(r.drainer))
            .validate(&request(p, Operation::Delete, false), &context());
        assert!(v.allowed());
        assert_eq!(v.applied, ["LD-3"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ld_11_an_answer_within_the_review_deadline_whatever_the_pod_does() {
        /// Never answers.
        struct Silent;
        impl Caller for Silent {
            fn drain<'a>(&'a self, _: &'a Target, _: Duration) -> BoxFuture<'a, Answer> {
                Box::pin(std::future::pending())
            }
        }
        let cluster = Arc::new(Memory::default());
        let options = Options::with(&[
            ("drain-record-namespace", "ops"),
            ("review-deadline", "200ms"),
            ("drain-call-timeout", "100ms"),
        ])
        .unwrap();
        let drainer = Drainer::new(cluster.clone(), Arc::new(Silent), options);
        let ctx = Context::default();
        let mut p = pod(json!({}));
        p.spec.as_mut().unwrap().node_name = None;
        cluster
            .pods
            .lock()
            .unwrap()
            .insert("serving/llm-0".into(), p.clone());
        let v = PodDeletion(Arc::new(drainer))
            .validate_async(&request(p, Operation::Delete, false), &ctx)
            .await;
        assert!(v.allowed());
        assert_eq!(v.applied, ["LD-11"]);
        assert_eq!(
            v.warnings,
            ["drain not decided within 200ms; deletion proceeds"]
        );
    }
}
