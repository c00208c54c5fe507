//! The quota ledger: the ElasticQuota tree, what every quota (and its subtree) uses, and atomic
//! check-and-reserve of a pod's requests.
//!
//! Consistency argument: every admission decision and every change of usage happens under one
//! mutex, so two pods admitted "at the same moment" are decided one after the other, the second
//! seeing the first's reservation. Usage = requests of the live pods observed by the watch +
//! reservations of pods admitted but not yet observed. A reservation becomes usage when its pod
//! appears (same namespace/name), and expires after `ttl` if it never does (the API server may
//! refuse the pod after the webhook allowed it). Limits: a pod created and deleted between two
//! watch events is counted until its reservation expires; after a restart the ledger is rebuilt
//! from the pod list, so reservations in flight at the crash are forgotten (pods already
//! persisted are counted again from the list). Quota changes invalidate the tree; the next read
//! rebuilds it and re-derives every pod's quota and the usage (O(quotas + pods), under the lock:
//! a pause of a few milliseconds per quota change at 100,000 pods; quota changes are rare).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use admission_kit::Operation;
use admission_kit::go::{ParsedQuantity, Quantity as GoQuantity, QuantityFormat};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::tree::{self, PodIndex, QuotaInfo, QuotaLookup, QuotaRef, Topology, TreeGates};
use crate::types::ElasticQuota;

/// An exact amount: thousandths and print format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Amount {
    /// Value × 1000.
    pub milli: i64,
    /// How it prints.
    pub format: QuantityFormat,
}

impl Amount {
    /// Canonical Kubernetes text.
    pub fn canonical(&self) -> String {
        ParsedQuantity::from_milli(self.milli, self.format).canonical()
    }
}

/// Amounts by resource name.
pub type Amounts = BTreeMap<String, Amount>;

fn add(a: &mut Amounts, b: &Amounts, sign: i64) {
    for (k, v) in b {
        a.entry(k.clone())
            .and_modify(|x| x.milli += sign * v.milli)
            .or_insert(Amount {
                milli: sign * v.milli,
                format: v.format,
            });
    }
}

/// One quota as the ledger needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaSpec {
    /// The tree entry: name (unique across namespaces upstream; duplicates are refused at
    /// admission), namespace, parent, tree id, min and max as written.
    pub info: QuotaInfo,
    /// `spec.max`.
    pub max: Amounts,
    /// The admission limit: the `admission` annotation when non-empty, else `spec.max`.
    pub limit: Amounts,
    /// Namespaces bound by the `namespaces` annotation.
    pub namespaces: Vec<String>,
}

fn amounts_of(rl: Option<&crate::types::ResourceList>) -> Amounts {
    rl.into_iter()
        .flatten()
        .filter_map(|(k, q)| {
            let p = GoQuantity::parse(&q.0).ok()?;
            let p = p.value();
            Some((
                k.clone(),
                Amount {
                    milli: p.milli_value()?,
                    format: p.format,
                },
            ))
        })
        .collect()
}

impl QuotaSpec {
    /// The ledger's view of an ElasticQuota object.
    pub fn of(o: &ElasticQuota) -> Self {
        let ann = |k: &str| {
            o.metadata
                .annotations
                .as_ref()
                .and_then(|l| l.get(k))
                .map(String::as_str)
                .unwrap_or_default()
        };
        let max = amounts_of(o.spec.max.as_ref());
        let admission: Option<crate::types::ResourceList> =
            serde_json::from_str(ann(tree::keys::ADMISSION)).unwrap_or_default();
        let admission = amounts_of(admission.as_ref());
        Self {
            info: QuotaInfo::of(o),
            limit: if admission.is_empty() {
                max.clone()
            } else {
                admission
            },
            max,
            namespaces: tree::bound_namespaces(o),
        }
    }

    /// A quota with `max` as its limit (tests, synthetic state).
    pub fn simple(name: &str, namespace: &str, parent: Option<&str>, max: Amounts) -> Self {
        let list: crate::types::ResourceList = max
            .iter()
            .map(|(k, a)| (k.clone(), Quantity(a.canonical())))
            .collect();
        Self {
            info: QuotaInfo {
                name: name.into(),
                namespace: namespace.into(),
                parent: parent.unwrap_or(tree::keys::ROOT).into(),
                max: Some(list),
                ..QuotaInfo::default()
            },
            limit: max.clone(),
            max,
            namespaces: Vec::new(),
        }
    }
}

/// Quota names that are never checked (PV-4.2).
pub const UNCHECKED: [&str; 3] = [
    "koordinator-default-quota",
    "koordinator-system-quota",
    "koordinator-root-quota",
];

/// Resource names whose presence in `spec.max` makes a quota checked (PV-4.6).
pub const QUOTA_KEYS: [&str; 14] = [
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "kubernetes.io/batch-cpu",
    "kubernetes.io/batch-memory",
    "kubernetes.io/mid-cpu",
    "kubernetes.io/mid-memory",
    "koordinator.sh/gpu",
    "nvidia.com/gpu",
    "koordinator.sh/gpu.shared",
    "koordinator.sh/gpu-memory-ratio",
];

/// `(namespace, name)` of a pod, or `(name, namespace)` of a quota.
pub type PodKey = (String, String);

/// An observed pod.
#[derive(Debug, Clone, Default)]
struct PodEntry {
    /// Its quota label ("" when none).
    label: String,
    /// The quota it is charged to (QN at the last tree build).
    quota: String,
    /// Its requests; empty once it has finished.
    requests: Amounts,
}

#[derive(Debug, Default)]
struct State {
    quotas: HashMap<String, Vec<QuotaSpec>>,
    /// Usage of each quota's subtree (itself and every descendant).
    subtree: HashMap<String, Amounts>,
    /// Every observed pod, finished ones included (QV-T1 and QV-D4 read their labels).
    pods: HashMap<PodKey, PodEntry>,
    /// The tree; `None` after a quota changed until the next read rebuilds it together with
    /// `subtree`. Quota events (a full list at start, rare later) thus cost O(1) each, and pods
    /// observed before their namespace's quota are charged to it once it arrives.
    topology: Option<Arc<Topology>>,
    reservations: HashMap<PodKey, (String, Amounts, Instant)>,
    /// Reservation deadlines in the order they were made (one TTL, so also deadline order);
    /// entries whose reservation was replaced or dropped are skipped when popped.
    deadlines: std::collections::VecDeque<(Instant, PodKey)>,
}

impl State {
    fn chain(&self, quota: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut cur = Some(quota.to_owned());
        while let Some(q) = cur {
            if out.contains(&q) || UNCHECKED.contains(&q.as_str()) {
                break; // a cycle, or the root
            }
            cur = self
                .quotas
                .get(&q)
                .and_then(|v| v.first())
                .map(|s| s.info.parent.clone())
                .filter(|p| !p.is_empty());
            out.push(q);
        }
        out
    }

    fn charge(&mut self, quota: &str, amounts: &Amounts, sign: i64) {
        if self.topology.is_none() || amounts.is_empty() {
            return; // usage is rebuilt with the tree
        }
        for q in self.chain(quota) {
            add(self.subtree.entry(q).or_default(), amounts, sign);
        }
    }

    fn uncharge_key(&mut self, key: &PodKey) {
        if let Some((q, a, _)) = self.reservations.remove(key) {
            self.charge(&q, &a, -1);
        }
        if let Some(e) = self.pods.remove(key) {
            self.charge(&e.quota, &e.requests, -1);
        }
    }

    fn expire(&mut self, now: Instant) {
        while let Some((at, _)) = self.deadlines.front() {
            if *at > now {
                break;
            }
            let Some((at, key)) = self.deadlines.pop_front() else {
                break;
            };
            if self
                .reservations
                .get(&key)
                .is_some_and(|(_, _, due)| *due == at)
                && let Some((q, a, _)) = self.reservations.remove(&key)
            {
                self.charge(&q, &a, -1);
            }
        }
    }

    /// The tree, and with it `subtree` and each pod's quota, rebuilt when a quota changed.
    fn topology(&mut self) -> Arc<Topology> {
        if let Some(t) = &self.topology {
            return t.clone();
        }
        let t = Arc::new(Topology::build(
            self.quotas
                .values()
                .flatten()
                .map(|q| (q.info.clone(), q.namespaces.clone())),
        ));
        self.topology = Some(t.clone());
        self.subtree.clear();
        let mut charges = Vec::with_capacity(self.pods.len() + self.reservations.len());
        for ((ns, _), e) in self.pods.iter_mut() {
            e.quota = tree::quota_name(&*t, Some(&e.label), ns, false);
            charges.push((e.quota.clone(), e.requests.clone()));
        }
        charges.extend(
            self.reservations
                .values()
                .map(|(q, a, _)| (q.clone(), a.clone())),
        );
        for (q, a) in charges {
            self.charge(&q, &a, 1);
        }
        t
    }
}

/// The outcome of an admission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// The pod fits (and, unless a dry run, is reserved).
    Allowed,
    /// It does not: upstream's text.
    Denied(String),
}

/// The ledger.
#[derive(Debug)]
pub struct Ledger {
    state: Mutex<State>,
    ttl: Duration,
}

fn list_text(a: &Amounts) -> String {
    a.iter()
        .map(|(k, v)| format!("{k}={}", v.canonical()))
        .collect::<Vec<_>>()
        .join(",")
}

/// One pod to check: what scheduling-webhook's PV-3.2 and PV-4 send.
#[derive(Debug, Clone, Copy)]
pub struct PodCheck<'a> {
    /// Namespace of the pod.
    pub namespace: &'a str,
    /// Name of the pod.
    pub name: &'a str,
    /// Its quota label ("" when none).
    pub label: &'a str,
    /// On UPDATE, the old pod's quota label.
    pub old_label: Option<&'a str>,
    /// Its requests.
    pub requests: &'a Amounts,
    /// Check only.
    pub dry_run: bool,
    /// Gate `DisableDefaultQuota`.
    pub disable_default_quota: bool,
    /// Run PV-3.2 (gate `SupportParentQuotaSubmitPod` off).
    pub check_parent: bool,
    /// Run PV-4.
    pub check_admission: bool,
}

/// The outcome of [`Ledger::check_pod`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodOutcome {
    /// Fits (and reserved unless a dry run); the pod's quota.
    Allowed {
        /// QN of the pod.
        quota: String,
    },
    /// Refused by `rule` with upstream's text.
    Denied {
        /// `PV-3` or `PV-4`.
        rule: &'static str,
        /// Upstream's text.
        message: String,
    },
}

/// What [`Ledger::lookup`] answers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lookup {
    /// The asked quotas that exist.
    pub quotas: Vec<(String, QuotaRef)>,
    /// The quota that binds the namespace.
    pub bound: Option<String>,
    /// Whether a quota named like the namespace lives in it.
    pub self_named: bool,
}

/// The observed pods as QV reads them. A scan: it runs on quota updates and deletes, which are
/// rare, and keeps pod events (frequent) free of index upkeep.
struct Pods<'a>(&'a HashMap<PodKey, PodEntry>);

impl PodIndex for Pods<'_> {
    fn labelled(&self, quota: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(_, e)| e.label == quota)
            .map(|((_, name), _)| name.clone())
            .collect()
    }

    fn any_bound(&self, quota: &str, namespaces: &[String]) -> bool {
        self.0.iter().any(|((ns, _), e)| {
            e.label == quota || ns.as_str() == quota || namespaces.iter().any(|n| n == ns)
        })
    }
}

/// PV-4 under the lock: see [`Ledger::admit`].
#[allow(clippy::too_many_arguments)] // one call site shape: the fields of an AdmitPod request
fn admit_locked(
    s: &mut State,
    ttl: Duration,
    namespace: &str,
    name: &str,
    quota: &str,
    requests: &Amounts,
    dry_run: bool,
    now: Instant,
) -> Admission {
    if quota.is_empty() || UNCHECKED.contains(&quota) {
        return Admission::Allowed;
    }
    s.expire(now);
    let spec = match s.quotas.get(quota).map(Vec::as_slice) {
        None | Some([]) => {
            return Admission::Denied(format!("elastic quota {quota} not found"));
        }
        Some([one]) => one.clone(),
        Some(_) => {
            return Admission::Denied(format!("more than one elastic quota {quota} found"));
        }
    };
    if !spec.max.keys().any(|k| QUOTA_KEYS.contains(&k.as_str())) {
        return Admission::Allowed;
    }
    let requested: Amounts = requests
        .iter()
        .filter(|(k, v)| v.milli != 0 && spec.max.get(*k).is_some_and(|m| m.milli != 0))
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    if requested.is_empty() {
        return Admission::Allowed;
    }
    // A pod asking again (reinvocation, retry) replaces its own earlier reservation.
    let key = (namespace.to_owned(), name.to_owned());
    let previous = s.reservations.remove(&key);
    if let Some((q, a, _)) = &previous {
        s.charge(q, a, -1);
    }
    for q in s.chain(quota) {
        let Some(qs) = s.quotas.get(&q).and_then(|v| v.first()).cloned() else {
            continue;
        };
        let used = s.subtree.get(&q).cloned().unwrap_or_default();
        let (mut r_ex, mut u_ex, mut l_ex) = (Amounts::new(), Amounts::new(), Amounts::new());
        for (k, r) in &requested {
            let Some(l) = qs.limit.get(k) else { continue };
            let u = used.get(k).copied().filter(|u| u.milli != 0);
            if u.map(|u| u.milli).unwrap_or(0) + r.milli > l.milli {
                r_ex.insert(k.clone(), *r);
                if let Some(u) = u {
                    u_ex.insert(k.clone(), u);
                }
                l_ex.insert(k.clone(), *l);
            }
        }
        if !r_ex.is_empty() {
            if let Some((pq, a, at)) = previous {
                s.charge(&pq, &a, 1);
                s.reservations.insert(key, (pq, a, at));
            }
            return Admission::Denied(format!(
                "exceeded quota: {}/{}, requested: {}, used: {}, limited: {}",
                qs.info.namespace,
                qs.info.name,
                list_text(&r_ex),
                list_text(&u_ex),
                list_text(&l_ex)
            ));
        }
    }
    if dry_run {
        if let Some((pq, a, at)) = previous {
            s.charge(&pq, &a, 1);
            s.reservations.insert(key, (pq, a, at));
        }
    } else if !s.pods.contains_key(&key) {
        s.charge(quota, &requested, 1);
        let due = now + ttl;
        s.deadlines.push_back((due, key.clone()));
        s.reservations
            .insert(key, (quota.to_owned(), requested, due));
    }
    Admission::Allowed
}

impl Ledger {
    /// An empty ledger whose reservations expire after `ttl`.
    pub fn new(ttl: Duration) -> Self {
        Self {
            state: Mutex::new(State::default()),
            ttl,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave half-applied usage: every mutation is a
        // single add; recover the guard rather than poisoning the service.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds or replaces a quota (watch event).
    pub fn upsert_quota(&self, spec: QuotaSpec) {
        let mut s = self.lock();
        let entry = s.quotas.entry(spec.info.name.clone()).or_default();
        entry.retain(|q| q.info.namespace != spec.info.namespace);
        entry.push(spec);
        s.topology = None;
    }

    /// Removes a quota (watch event).
    pub fn delete_quota(&self, name: &str, namespace: &str) {
        let mut s = self.lock();
        if let Some(v) = s.quotas.get_mut(name) {
            v.retain(|q| q.info.namespace != namespace);
            if v.is_empty() {
                s.quotas.remove(name);
            }
        }
        s.topology = None;
    }

    /// A pod with quota label `label` ("" when none) and `requests` (watch event): charged to
    /// its quota (QN), its reservation, if any, becoming usage. Finished pods pass empty
    /// requests and stop counting.
    pub fn observe_pod(&self, namespace: &str, name: &str, label: &str, requests: Amounts) {
        let mut s = self.lock();
        let key = (namespace.to_owned(), name.to_owned());
        s.uncharge_key(&key);
        let quota = match &s.topology {
            Some(t) => tree::quota_name(&**t, Some(label), namespace, false),
            None => String::new(), // resolved when the tree is rebuilt
        };
        s.charge(&quota, &requests, 1);
        s.pods.insert(
            key,
            PodEntry {
                label: label.to_owned(),
                quota,
                requests,
            },
        );
    }

    /// A pod is gone (watch event).
    pub fn delete_pod(&self, namespace: &str, name: &str) {
        let mut s = self.lock();
        let key = (namespace.to_owned(), name.to_owned());
        s.uncharge_key(&key);
    }

    /// Drops a reservation that was never used.
    pub fn release(&self, namespace: &str, name: &str) {
        let mut s = self.lock();
        let key = (namespace.to_owned(), name.to_owned());
        if let Some((q, a, _)) = s.reservations.remove(&key) {
            s.charge(&q, &a, -1);
        }
    }

    /// PV-4 against the quota and each ancestor, and the reservation, in one step.
    pub fn admit(
        &self,
        namespace: &str,
        name: &str,
        quota: &str,
        requests: &Amounts,
        dry_run: bool,
        now: Instant,
    ) -> Admission {
        let mut s = self.lock();
        s.topology();
        admit_locked(
            &mut s, self.ttl, namespace, name, quota, requests, dry_run, now,
        )
    }

    /// QN, PV-3.2 and PV-4 for one pod under one lock: resolve its quota from its label and
    /// namespace, refuse a parent quota (when asked), then check and reserve its requests (when
    /// asked; on UPDATE only when the quota changed).
    pub fn check_pod(&self, c: &PodCheck<'_>, now: Instant) -> PodOutcome {
        let mut s = self.lock();
        let t = s.topology();
        let quota = tree::quota_name(&*t, Some(c.label), c.namespace, c.disable_default_quota);
        if c.check_parent
            && let Err(message) = tree::pv_3_2_not_on_parent(&*t, &quota, c.name)
        {
            return PodOutcome::Denied {
                rule: "PV-3",
                message,
            };
        }
        if !c.check_admission {
            return PodOutcome::Allowed { quota };
        }
        let old = c
            .old_label
            .map(|l| tree::quota_name(&*t, Some(l), c.namespace, c.disable_default_quota));
        let Some(checked) = tree::admission_quota(quota.clone(), old.as_deref()) else {
            return PodOutcome::Allowed { quota };
        };
        match admit_locked(
            &mut s,
            self.ttl,
            c.namespace,
            c.name,
            &checked,
            c.requests,
            c.dry_run,
            now,
        ) {
            Admission::Allowed => PodOutcome::Allowed { quota },
            Admission::Denied(message) => PodOutcome::Denied {
                rule: "PV-4",
                message,
            },
        }
    }

    /// The quotas named `names` that exist, what QN needs to know of `namespace`, and the quota
    /// that binds it (so that one answer resolves a pod's quota).
    pub fn lookup(&self, names: &[String], namespace: &str) -> Lookup {
        let t = self.lock().topology();
        let bound = t.bound_to(namespace);
        Lookup {
            quotas: names
                .iter()
                .chain(bound.iter())
                .filter_map(|n| t.quota(n).map(|q| (n.clone(), q)))
                .collect(),
            bound,
            self_named: t.self_named(namespace),
        }
    }

    /// QV: an ElasticQuota create, update or delete against the tree and the observed pods.
    pub fn validate_quota(
        &self,
        operation: Operation,
        object: &ElasticQuota,
        old: Option<&ElasticQuota>,
        gates: TreeGates,
    ) -> Result<(), (&'static str, String)> {
        let mut s = self.lock();
        let t = s.topology();
        tree::validate(operation, object, old, &t, &Pods(&s.pods), gates)
    }

    /// Every quota (name, namespace) and every observed pod (namespace, name): what a relist
    /// compares against.
    pub fn known(&self) -> (Vec<PodKey>, Vec<PodKey>) {
        let s = self.lock();
        (
            s.quotas
                .values()
                .flatten()
                .map(|q| (q.info.name.clone(), q.info.namespace.clone()))
                .collect(),
            s.pods.keys().cloned().collect(),
        )
    }

    /// What a quota's subtree uses now (tests, debugging).
    pub fn used(&self, quota: &str) -> Amounts {
        let mut s = self.lock();
        s.topology();
        s.subtree.get(quota).cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn cpu(n: i64) -> Amounts {
        Amounts::from([(
            "cpu".to_owned(),
            Amount {
                milli: n * 1000,
                format: QuantityFormat::DecimalSI,
            },
        )])
    }

    fn quota(name: &str, parent: Option<&str>, max_cpu: i64) -> QuotaSpec {
        QuotaSpec::simple(name, "ns", parent, cpu(max_cpu))
    }

    #[test]
    fn pv_4_reserve_then_observe_then_exceed() {
        let l = Ledger::new(Duration::from_secs(30));
        l.upsert_quota(quota("q", None, 4));
        let now = Instant::now();
        assert_eq!(
            l.admit("ns", "a", "q", &cpu(3), false, now),
            Admission::Allowed
        );
        l.observe_pod("ns", "a", "q", cpu(3));
        assert_eq!(
            l.used("q")["cpu"].milli,
            3000,
            "reservation became usage, not counted twice"
        );
        assert_eq!(
            l.admit("ns", "b", "q", &cpu(2), false, now),
            Admission::Denied(
                "exceeded quota: ns/q, requested: cpu=2, used: cpu=3, limited: cpu=4".into()
            )
        );
        l.delete_pod("ns", "a");
        assert_eq!(
            l.admit("ns", "b", "q", &cpu(2), false, now),
            Admission::Allowed
        );
    }

    #[test]
    fn a_pod_seen_before_its_namespace_quota_is_charged_once_the_quota_arrives() {
        let l = Ledger::new(Duration::from_secs(30));
        l.observe_pod("apps", "early", "", cpu(2));
        let mut q = quota("q", None, 3);
        q.namespaces = vec!["apps".into()];
        l.upsert_quota(q);
        assert_eq!(
            l.used("q")["cpu"].milli,
            2000,
            "QN-4 resolved at the rebuild"
        );
        let check = PodCheck {
            namespace: "apps",
            name: "late",
            label: "",
            old_label: None,
            requests: &cpu(2),
            dry_run: false,
            disable_default_quota: false,
            check_parent: true,
            check_admission: true,
        };
        assert_eq!(
            l.check_pod(&check, Instant::now()),
            PodOutcome::Denied {
                rule: "PV-4",
                message: "exceeded quota: ns/q, requested: cpu=2, used: cpu=2, limited: cpu=3"
                    .into()
            }
        );
        assert_eq!(
            l.check_pod(
                &PodCheck {
                    old_label: Some("q"),
                    label: "q",
                    ..check
                },
                Instant::now()
            ),
            PodOutcome::Allowed { quota: "q".into() },
            "UPDATE that keeps the quota: PV-4.1 skips"
        );
    }

    #[test]
    fn dry_run_reserves_nothing_and_retries_replace() {
        let l = Ledger::new(Duration::from_secs(30));
        l.upsert_quota(quota("q", None, 2));
        let now = Instant::now();
        assert_eq!(
            l.admit("ns", "a", "q", &cpu(2), true, now),
            Admission::Allowed
        );
        assert_eq!(l.used("q").get("cpu").map(|a| a.milli).unwrap_or(0), 0);
        assert_eq!(
            l.admit("ns", "a", "q", &cpu(2), false, now),
            Admission::Allowed
        );
        assert_eq!(
            l.admit("ns", "a", "q", &cpu(2), false, now),
            Admission::Allowed,
            "same pod again"
        );
        assert_eq!(l.used("q")["cpu"].milli, 2000);
    }

    #[test]
    fn reservations_expire() {
        let l = Ledger::new(Duration::from_secs(5));
        l.upsert_quota(quota("q", None, 1));
        let t0 = Instant::now();
        assert_eq!(
            l.admit("ns", "a", "q", &cpu(1), false, t0),
            Admission::Allowed
        );
        assert!(matches!(
            l.admit("ns", "b", "q", &cpu(1), false, t0),
            Admission::Denied(_)
        ));
        assert_eq!(
            l.admit("ns", "b", "q", &cpu(1), false, t0 + Duration::from_secs(6)),
            Admission::Allowed
        );
    }

    #[test]
    fn ancestors_are_checked_too() {
        let l = Ledger::new(Duration::from_secs(30));
        l.upsert_quota(quota("parent", None, 3));
        l.upsert_quota(quota("a", Some("parent"), 2));
        l.upsert_quota(quota("b", Some("parent"), 2));
        let now = Instant::now();
        assert_eq!(
            l.admit("ns", "p1", "a", &cpu(2), false, now),
            Admission::Allowed
        );
        assert_eq!(
            l.admit("ns", "p2", "b", &cpu(2), false, now),
            Admission::Denied(
                "exceeded quota: ns/parent, requested: cpu=2, used: cpu=2, limited: cpu=3".into()
            )
        );
    }

    #[test]
    fn unknown_duplicate_and_unchecked_quotas() {
        let l = Ledger::new(Duration::from_secs(30));
        let now = Instant::now();
        assert_eq!(
            l.admit("ns", "a", "nope", &cpu(1), false, now),
            Admission::Denied("elastic quota nope not found".into())
        );
        assert_eq!(
            l.admit("ns", "a", "koordinator-default-quota", &cpu(1), false, now),
            Admission::Allowed
        );
        l.upsert_quota(quota("dup", None, 1));
        l.upsert_quota(QuotaSpec::simple("dup", "other", None, cpu(1)));
        assert_eq!(
            l.admit("ns", "a", "dup", &cpu(1), false, now),
            Admission::Denied("more than one elastic quota dup found".into())
        );
    }

    #[test]
    fn concurrent_admissions_never_exceed_the_quota() {
        let l = Arc::new(Ledger::new(Duration::from_secs(60)));
        l.upsert_quota(quota("q", None, 100));
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let l = l.clone();
                std::thread::spawn(move || {
                    (0..50)
                        .filter(|i| {
                            l.admit(
                                "ns",
                                &format!("p-{t}-{i}"),
                                "q",
                                &cpu(1),
                                false,
                                Instant::now(),
                            ) == Admission::Allowed
                        })
                        .count()
                })
            })
            .collect();
        let admitted: usize = handles.into_iter().map(|h| h.join().unwrap_or(0)).sum();
        assert_eq!(admitted, 100);
        assert_eq!(l.used("q")["cpu"].milli, 100_000);
    }
}
