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
//!
//! Arithmetic: amounts are exact billionths in `i128` (every Kubernetes quantity is a whole
//! number of them). One amount is at most
//! [`MAX_AMOUNT_NANO`] (2^100), so usage sums stay far inside `i128` and every comparison is
//! exact; a request beyond it, or negative, is refused naming the pod, the resource and the value,
//! and an observed pod beyond it makes the quotas on its chain refuse admissions while it lives
//! (counted in `uncountable`, never guessed). Reservations are bounded per namespace and in all
//! ([`ReservationLimits`]) and belong to the caller that made them. `tests/ledger_model.rs` checks
//! all of this against an exact reference model.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use admission_kit::Operation;
use admission_kit::go::Quantity as GoQuantity;
pub use admission_kit::resources::{Amount, AmountError, Amounts};
use admission_kit::resources::{NANO_PER_UNIT, list_text};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::tree::{self, PodIndex, QuotaInfo, QuotaLookup, QuotaRef, Topology, TreeGates};
use crate::types::ElasticQuota;

/// The largest amount one pod (or one reservation) may hold of one resource, in billionths:
/// 2^100, about 1.27e21 units (a zettabyte of memory), far beyond any real resource. Bounding single amounts keeps every
/// sum exact: a quota's usage adds at most one amount per live pod and open reservation, and
/// 2^26 of them (67 million, hundreds of times what one cluster holds) stay below 2^126, inside
/// `i128`. Requests beyond are refused; observed pods beyond make their quotas uncountable.
pub const MAX_AMOUNT_NANO: i128 = 1 << 100;

/// Whether `a` may be counted: not negative, at most [`MAX_AMOUNT_NANO`]. `Err` names the
/// resource and value.
pub fn countable(resource: &str, a: &Amount) -> Result<(), String> {
    if a.nano < 0 {
        Err(format!("{resource}={} is negative", a.canonical()))
    } else if a.nano > MAX_AMOUNT_NANO {
        Err(format!(
            "{resource}={} is above the largest amount quota-state counts ({} units)",
            a.canonical(),
            MAX_AMOUNT_NANO / NANO_PER_UNIT
        ))
    } else {
        Ok(())
    }
}

/// `a += sign × b` on usage. Cannot leave `i128` while single amounts are bounded by
/// [`MAX_AMOUNT_NANO`] (see there); a sum that would is left unchanged and logged rather than
/// wrapped.
fn add(a: &mut Amounts, b: &Amounts, sign: i128) {
    for (k, v) in b {
        let x = a.entry(k.clone()).or_insert(Amount {
            nano: 0,
            format: v.format,
        });
        match v.nano.checked_mul(sign).and_then(|d| x.nano.checked_add(d)) {
            Some(m) => x.nano = m,
            None => tracing::error!(resource = %k, "usage sum out of range; left unchanged"),
        }
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

/// A quota's list as amounts. A value beyond 128-bit billionths counts as the largest one: as a
/// limit it is then above any usage the ledger can hold (bounded well below, see
/// [`MAX_AMOUNT_NANO`]), so every comparison against it stays exact. Text that does not parse
/// is skipped (the CRD's pattern keeps it out of the cluster).
fn amounts_of(rl: Option<&crate::types::ResourceList>) -> Amounts {
    rl.into_iter()
        .flatten()
        .filter_map(|(k, q)| {
            let p = GoQuantity::parse(&q.0).ok()?;
            let p = p.value();
            Some((
                k.clone(),
                Amount {
                    nano: p.nano_value_wide().unwrap_or(if p.negative {
                        i128::MIN
                    } else {
                        i128::MAX
                    }),
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
    /// Its requests; empty once it has finished, or when they cannot be counted.
    requests: Amounts,
    /// Its requests cannot be counted exactly (see [`MAX_AMOUNT_NANO`]): every quota on its
    /// chain refuses admissions while it lives, rather than count it wrong.
    uncountable: bool,
}

/// A reservation: a pod admitted but not yet seen in the watch.
#[derive(Debug, Clone)]
struct Reservation {
    quota: String,
    amounts: Amounts,
    due: Instant,
    /// The caller that made it: only it may release it.
    owner: String,
}

/// Bounds on outstanding reservations, so that no caller can hold a tenant's quota (or the
/// ledger's memory) with invented pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReservationLimits {
    /// Outstanding reservations per namespace.
    pub per_namespace: usize,
    /// Outstanding reservations in all.
    pub total: usize,
}

impl Default for ReservationLimits {
    /// 5,000 per namespace (a large job's pods created in one burst, each reserved for the
    /// moments until its pod is seen) and 50,000 in all (about 10 MB).
    fn default() -> Self {
        Self {
            per_namespace: 5_000,
            total: 50_000,
        }
    }
}

#[derive(Debug, Default)]
struct State {
    quotas: HashMap<String, Vec<QuotaSpec>>,
    /// Usage of each quota's subtree (itself and every descendant).
    subtree: HashMap<String, Amounts>,
    /// Per quota subtree, how many live pods could not be counted (absent when none).
    uncountable: HashMap<String, u32>,
    /// Every observed pod, finished ones included (QV-T1 and QV-D4 read their labels).
    pods: HashMap<PodKey, PodEntry>,
    /// The tree; `None` after a quota changed until the next read rebuilds it together with
    /// `subtree`. Quota events (a full list at start, rare later) thus cost O(1) each, and pods
    /// observed before their namespace's quota are charged to it once it arrives.
    topology: Option<Arc<Topology>>,
    reservations: HashMap<PodKey, Reservation>,
    /// Outstanding reservations per namespace (absent when none).
    reserved_in: HashMap<String, usize>,
    /// Reservation deadlines in the order they were made (one TTL, so also deadline order);
    /// entries whose reservation was replaced or dropped are skipped when popped.
    deadlines: std::collections::VecDeque<(Instant, PodKey)>,
    /// Reservations dropped at their deadline, since start (metrics).
    expired: u64,
    /// Tree rebuilds since start and the time they took (metrics).
    rebuilds: u64,
    rebuild_seconds: f64,
    /// Each quota's `child-request` annotation as last seen or written, by (namespace, name):
    /// what the usage write-back compares against. Kept apart from [`QuotaSpec`] so that a
    /// write-back's own watch event does not rebuild the tree.
    shown: HashMap<PodKey, String>,
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

    fn charge(&mut self, quota: &str, amounts: &Amounts, sign: i128) {
        if self.topology.is_none() || amounts.is_empty() {
            return; // usage is rebuilt with the tree
        }
        for q in self.chain(quota) {
            add(self.subtree.entry(q).or_default(), amounts, sign);
        }
    }

    fn charge_uncountable(&mut self, quota: &str, up: bool) {
        if self.topology.is_none() {
            return; // rebuilt with the tree
        }
        for q in self.chain(quota) {
            let n = self.uncountable.entry(q.clone()).or_default();
            *n = if up {
                n.saturating_add(1)
            } else {
                n.saturating_sub(1)
            };
            if *n == 0 {
                self.uncountable.remove(&q);
            }
        }
    }

    fn charge_pod(&mut self, e: &PodEntry, up: bool) {
        if e.uncountable {
            self.charge_uncountable(&e.quota, up);
        } else {
            self.charge(&e.quota, &e.requests, if up { 1 } else { -1 });
        }
    }

    fn put_reservation(&mut self, key: PodKey, r: Reservation) {
        self.charge(&r.quota, &r.amounts, 1);
        *self.reserved_in.entry(key.0.clone()).or_default() += 1;
        self.reservations.insert(key, r);
    }

    fn take_reservation(&mut self, key: &PodKey) -> Option<Reservation> {
        let r = self.reservations.remove(key)?;
        self.charge(&r.quota, &r.amounts, -1);
        if let Some(n) = self.reserved_in.get_mut(&key.0) {
            *n -= 1;
            if *n == 0 {
                self.reserved_in.remove(&key.0);
            }
        }
        Some(r)
    }

    fn uncharge_key(&mut self, key: &PodKey) {
        self.take_reservation(key);
        if let Some(e) = self.pods.remove(key) {
            self.charge_pod(&e, false);
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
            if self.reservations.get(&key).is_some_and(|r| r.due == at) {
                self.take_reservation(&key);
                self.expired += 1;
            }
        }
    }

    /// The tree, and with it `subtree` and each pod's quota, rebuilt when a quota changed.
    fn topology(&mut self) -> Arc<Topology> {
        if let Some(t) = &self.topology {
            return t.clone();
        }
        let started = Instant::now();
        let t = Arc::new(Topology::build(
            self.quotas
                .values()
                .flatten()
                .map(|q| (q.info.clone(), q.namespaces.clone())),
        ));
        self.topology = Some(t.clone());
        self.subtree.clear();
        self.uncountable.clear();
        let mut pods = Vec::with_capacity(self.pods.len());
        for ((ns, _), e) in self.pods.iter_mut() {
            e.quota = tree::quota_name(&*t, Some(&e.label), ns, false);
            pods.push(e.clone());
        }
        for e in &pods {
            self.charge_pod(e, true);
        }
        let reserved: Vec<(String, Amounts)> = self
            .reservations
            .values()
            .map(|r| (r.quota.clone(), r.amounts.clone()))
            .collect();
        for (q, a) in reserved {
            self.charge(&q, &a, 1);
        }
        self.rebuilds += 1;
        self.rebuild_seconds += started.elapsed().as_secs_f64();
        t
    }
}

/// The outcome of an admission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// The pod fits (and, unless a dry run, is reserved).
    Allowed,
    /// It does not: upstream's text, or ours where the amounts cannot be counted.
    Denied(String),
}

/// The ledger.
#[derive(Debug)]
pub struct Ledger {
    state: Mutex<State>,
    ttl: Duration,
    limits: ReservationLimits,
}

/// The ledger's numbers for the metrics.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// Quotas held.
    pub quotas: usize,
    /// Pods held (finished ones included).
    pub pods: usize,
    /// Outstanding reservations.
    pub reservations: usize,
    /// Reservations expired since start.
    pub expired: u64,
    /// Tree rebuilds since start.
    pub rebuilds: u64,
    /// Seconds those rebuilds took.
    pub rebuild_seconds: f64,
    /// Each quota's subtree usage and its limit, per resource, in units.
    pub usage: Vec<QuotaUsage>,
}

/// One quota's use of one resource.
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaUsage {
    /// Quota name.
    pub quota: String,
    /// Resource name.
    pub resource: String,
    /// Used by its subtree (admitted pods and outstanding reservations).
    pub used: f64,
    /// Its admission limit (`admission` annotation, else `spec.max`), if it limits the resource.
    pub limit: Option<f64>,
}

/// A quota whose `child-request` annotation should show its subtree's usage anew.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageWrite {
    /// Namespace of the ElasticQuota.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The annotation's new value: compact JSON, sorted keys, canonical quantities.
    pub value: String,
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
    /// Who asks (the caller's authenticated identity): a reservation belongs to it.
    pub caller: &'a str,
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

/// One admission as [`admit_locked`] needs it.
struct Admit<'a> {
    namespace: &'a str,
    name: &'a str,
    quota: &'a str,
    requests: &'a Amounts,
    dry_run: bool,
    caller: &'a str,
    now: Instant,
}

/// The first negative amount, named.
fn negative(requests: &Amounts) -> Option<String> {
    requests
        .iter()
        .find_map(|(k, v)| (v.nano < 0).then(|| countable(k, v).err()).flatten())
}

/// PV-4 under the lock: see [`Ledger::admit`].
fn admit_locked(
    s: &mut State,
    ttl: Duration,
    limits: ReservationLimits,
    a: &Admit<'_>,
) -> Admission {
    let (namespace, name, quota) = (a.namespace, a.name, a.quota);
    s.expire(a.now);
    if let Some(e) = negative(a.requests) {
        return Admission::Denied(format!("pod {namespace}/{name}: {e}"));
    }
    if quota.is_empty() || UNCHECKED.contains(&quota) {
        return Admission::Allowed;
    }
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
    let requested: Amounts = a
        .requests
        .iter()
        .filter(|(k, v)| v.nano != 0 && spec.max.get(*k).is_some_and(|m| m.nano != 0))
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    if requested.is_empty() {
        return Admission::Allowed;
    }
    if let Some(e) = requested.iter().find_map(|(k, v)| countable(k, v).err()) {
        return Admission::Denied(format!("pod {namespace}/{name}: {e}"));
    }
    // A pod asking again (reinvocation, retry) replaces its own earlier reservation.
    let key = (namespace.to_owned(), name.to_owned());
    let previous = s.take_reservation(&key);
    let restore = |s: &mut State, previous: Option<Reservation>| {
        if let Some(r) = previous {
            s.put_reservation(key.clone(), r);
        }
    };
    for q in s.chain(quota) {
        let Some(qs) = s.quotas.get(&q).and_then(|v| v.first()).cloned() else {
            continue;
        };
        if let Some(n) = s.uncountable.get(&q) {
            let text = format!(
                "quota {}/{}: usage cannot be counted, {n} pod(s) charged to it request more than \
                 quota-state counts ({} units); admissions to it are refused until they are gone",
                qs.info.namespace,
                qs.info.name,
                MAX_AMOUNT_NANO / NANO_PER_UNIT
            );
            restore(s, previous);
            return Admission::Denied(text);
        }
        let used = s.subtree.get(&q).cloned().unwrap_or_default();
        let (mut r_ex, mut u_ex, mut l_ex) = (Amounts::new(), Amounts::new(), Amounts::new());
        for (k, r) in &requested {
            let Some(l) = qs.limit.get(k) else { continue };
            let u = used.get(k).copied().filter(|u| u.nano != 0);
            // Exact: usage stays below 2^126 and one amount below 2^100 (MAX_AMOUNT_NANO).
            let total = u.map(|u| u.nano).unwrap_or(0).checked_add(r.nano);
            if total.is_none_or(|t| t > l.nano) {
                r_ex.insert(k.clone(), *r);
                if let Some(u) = u {
                    u_ex.insert(k.clone(), u);
                }
                l_ex.insert(k.clone(), *l);
            }
        }
        if !r_ex.is_empty() {
            restore(s, previous);
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
    if a.dry_run || s.pods.contains_key(&key) {
        restore(s, previous);
        return Admission::Allowed;
    }
    if previous.is_none() {
        let in_ns = s.reserved_in.get(namespace).copied().unwrap_or(0);
        if in_ns >= limits.per_namespace || s.reservations.len() >= limits.total {
            return Admission::Denied(format!(
                "pod {namespace}/{name}: too many pods admitted but not yet created ({} in \
                 namespace {namespace}, {} in all; limits {} and {}); retry in a few seconds",
                in_ns,
                s.reservations.len(),
                limits.per_namespace,
                limits.total
            ));
        }
    }
    let due = a.now + ttl;
    s.deadlines.push_back((due, key.clone()));
    s.put_reservation(
        key,
        Reservation {
            quota: quota.to_owned(),
            amounts: requested,
            due,
            owner: a.caller.to_owned(),
        },
    );
    Admission::Allowed
}

impl Ledger {
    /// An empty ledger whose reservations expire after `ttl`, with the default
    /// [`ReservationLimits`].
    pub fn new(ttl: Duration) -> Self {
        Self {
            state: Mutex::new(State::default()),
            ttl,
            limits: ReservationLimits::default(),
        }
    }

    /// With other bounds on outstanding reservations.
    pub fn with_limits(mut self, limits: ReservationLimits) -> Self {
        self.limits = limits;
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave half-applied usage: every mutation is a
        // single add; recover the guard rather than poisoning the service.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds or replaces a quota (watch event). An unchanged quota (an event for an annotation the
    /// ledger does not read, such as the usage write-back's own) keeps the tree.
    pub fn upsert_quota(&self, spec: QuotaSpec) {
        let mut s = self.lock();
        let entry = s.quotas.entry(spec.info.name.clone()).or_default();
        if entry.contains(&spec) {
            return;
        }
        entry.retain(|q| q.info.namespace != spec.info.namespace);
        entry.push(spec);
        s.topology = None;
    }

    /// Removes a quota (watch event).
    pub fn delete_quota(&self, name: &str, namespace: &str) {
        let mut s = self.lock();
        s.shown.remove(&(namespace.to_owned(), name.to_owned()));
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
        self.observe_pod_usage(namespace, name, label, Ok(requests));
    }

    /// As [`Ledger::observe_pod`], where `Err` says why the pod's requests cannot be counted
    /// (the pod exists all the same): its quotas refuse admissions until it is gone. So does a
    /// negative amount or one above [`MAX_AMOUNT_NANO`].
    pub fn observe_pod_usage(
        &self,
        namespace: &str,
        name: &str,
        label: &str,
        requests: Result<Amounts, String>,
    ) {
        let requests =
            requests.and_then(
                |r| match r.iter().find_map(|(k, v)| countable(k, v).err()) {
                    Some(e) => Err(e),
                    None => Ok(r),
                },
            );
        let mut s = self.lock();
        let key = (namespace.to_owned(), name.to_owned());
        s.uncharge_key(&key);
        let quota = match &s.topology {
            Some(t) => tree::quota_name(&**t, Some(label), namespace, false),
            None => String::new(), // resolved when the tree is rebuilt
        };
        let entry = match requests {
            Ok(requests) => PodEntry {
                label: label.to_owned(),
                quota,
                requests,
                uncountable: false,
            },
            Err(e) => {
                tracing::warn!(namespace, name, error = %e, "pod's requests cannot be counted; its quotas refuse admissions while it lives");
                PodEntry {
                    label: label.to_owned(),
                    quota,
                    requests: Amounts::new(),
                    uncountable: true,
                }
            }
        };
        s.charge_pod(&entry, true);
        s.pods.insert(key, entry);
    }

    /// A pod is gone (watch event).
    pub fn delete_pod(&self, namespace: &str, name: &str) {
        let mut s = self.lock();
        let key = (namespace.to_owned(), name.to_owned());
        s.uncharge_key(&key);
    }

    /// Drops a reservation that was never used, if `caller` made it. Whether one was dropped.
    pub fn release(&self, namespace: &str, name: &str, caller: &str) -> bool {
        let mut s = self.lock();
        let key = (namespace.to_owned(), name.to_owned());
        if s.reservations.get(&key).is_some_and(|r| r.owner == caller) {
            s.take_reservation(&key);
            true
        } else {
            false
        }
    }

    /// PV-4 against the quota and each ancestor, and the reservation, in one step (tests and
    /// benchmarks: the service calls [`Ledger::check_pod`]).
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
            &mut s,
            self.ttl,
            self.limits,
            &Admit {
                namespace,
                name,
                quota,
                requests,
                dry_run,
                caller: "",
                now,
            },
        )
    }

    /// QN, PV-3.2 and PV-4 for one pod under one lock: resolve its quota from its label and
    /// namespace, refuse a parent quota (when asked), then check and reserve its requests (when
    /// asked; on UPDATE only when the quota changed).
    pub fn check_pod(&self, c: &PodCheck<'_>, now: Instant) -> PodOutcome {
        let mut s = self.lock();
        s.expire(now);
        if c.check_admission
            && let Some(e) = negative(c.requests)
        {
            // Whatever the quota: no honest caller sends one (the API server refuses them).
            return PodOutcome::Denied {
                rule: "PV-4",
                message: format!("pod {}/{}: {e}", c.namespace, c.name),
            };
        }
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
        let a = Admit {
            namespace: c.namespace,
            name: c.name,
            quota: &checked,
            requests: c.requests,
            dry_run: c.dry_run,
            caller: c.caller,
            now,
        };
        match admit_locked(&mut s, self.ttl, self.limits, &a) {
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

    /// How many live pods in a quota's subtree cannot be counted (tests, debugging).
    pub fn uncountable(&self, quota: &str) -> u32 {
        let mut s = self.lock();
        s.topology();
        s.uncountable.get(quota).copied().unwrap_or(0)
    }

    /// Records what a quota's `child-request` annotation holds ("" when absent): from its watch
    /// event, or after a write-back succeeded (before its event arrives).
    pub fn observe_shown(&self, namespace: &str, name: &str, value: &str) {
        let key = (namespace.to_owned(), name.to_owned());
        let mut s = self.lock();
        if value.is_empty() {
            s.shown.remove(&key);
        } else {
            s.shown.insert(key, value.to_owned());
        }
    }

    /// Up to `max` quotas whose `child-request` annotation differs from their subtree's usage
    /// (admitted pods and outstanding reservations, after expiring those past their TTL), in
    /// (namespace, name) order starting after `after` and wrapping round, so that when more
    /// than `max` change, each still gets its turn. Left out: the quotas admission never checks
    /// (root, system, default), names held by several quotas (PV-4 refuses them) and quotas with
    /// pods whose amounts cannot be counted (their usage is unknown). No usage and no annotation
    /// count as equal.
    pub fn usage_writes(
        &self,
        now: Instant,
        after: Option<&PodKey>,
        max: usize,
    ) -> Vec<UsageWrite> {
        let mut s = self.lock();
        s.expire(now);
        s.topology();
        let mut due: Vec<UsageWrite> = s
            .quotas
            .iter()
            .filter(|(name, specs)| {
                specs.len() == 1
                    && !UNCHECKED.contains(&name.as_str())
                    && !s.uncountable.contains_key(*name)
            })
            .filter_map(|(name, specs)| {
                let namespace = &specs.first()?.info.namespace;
                let used: Amounts = s
                    .subtree
                    .get(name)
                    .into_iter()
                    .flatten()
                    .filter(|(_, a)| a.nano != 0)
                    .map(|(k, a)| (k.clone(), *a))
                    .collect();
                let value = admission_kit::resources::amounts_json(&used);
                let shown = s
                    .shown
                    .get(&(namespace.clone(), name.clone()))
                    .map_or("{}", String::as_str);
                (shown != value).then(|| UsageWrite {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    value,
                })
            })
            .collect();
        due.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        let start = after.map_or(0, |(ns, n)| {
            due.partition_point(|w| (&w.namespace, &w.name) <= (ns, n))
        });
        due.rotate_left(start);
        due.truncate(max);
        due
    }

    /// Outstanding reservations (metrics, tests).
    pub fn reservations(&self) -> usize {
        self.lock().reservations.len()
    }

    /// What the metrics show: counts, and each quota's subtree usage against its limit.
    pub fn stats(&self) -> Stats {
        let mut s = self.lock();
        s.topology();
        let mut usage = Vec::new();
        for (name, specs) in &s.quotas {
            let Some(spec) = specs.first() else { continue };
            let used = s.subtree.get(name);
            let resources: std::collections::BTreeSet<&String> = spec
                .limit
                .keys()
                .chain(used.into_iter().flat_map(|u| u.keys()))
                .collect();
            for r in resources {
                let units = |a: Option<&Amount>| a.map(|a| a.nano as f64 / 1e9);
                usage.push(QuotaUsage {
                    quota: name.clone(),
                    resource: r.clone(),
                    used: units(used.and_then(|u| u.get(r))).unwrap_or(0.0),
                    limit: units(spec.limit.get(r)),
                });
            }
        }
        Stats {
            quotas: s.quotas.len(),
            pods: s.pods.len(),
            reservations: s.reservations.len(),
            expired: s.expired,
            rebuilds: s.rebuilds,
            rebuild_seconds: s.rebuild_seconds,
            usage,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use admission_kit::go::QuantityFormat;
    use std::sync::Arc;

    fn cpu(n: i64) -> Amounts {
        Amounts::from([(
            "cpu".to_owned(),
            Amount {
                nano: i128::from(n) * NANO_PER_UNIT,
                format: QuantityFormat::DecimalSI,
            },
        )])
    }

    fn quota(name: &str, parent: Option<&str>, max_cpu: i64) -> QuotaSpec {
        QuotaSpec::simple(name, "ns", parent, cpu(max_cpu))
    }

    #[test]
    fn stats_show_usage_limits_expiries_and_rebuilds() {
        let l = Ledger::new(Duration::from_millis(10));
        l.upsert_quota(quota("q", None, 4));
        let now = Instant::now();
        assert_eq!(
            l.admit("ns", "a", "q", &cpu(3), false, now),
            Admission::Allowed
        );
        let s = l.stats();
        assert_eq!((s.quotas, s.pods, s.reservations), (1, 0, 1));
        assert!(s.rebuilds >= 1);
        assert_eq!(
            s.usage,
            vec![QuotaUsage {
                quota: "q".into(),
                resource: "cpu".into(),
                used: 3.0,
                limit: Some(4.0)
            }]
        );
        // The pod never appears: its reservation expires at the next decision after the TTL.
        let later = now + Duration::from_millis(50);
        assert_eq!(
            l.admit("ns", "b", "q", &cpu(1), false, later),
            Admission::Allowed
        );
        let s = l.stats();
        assert_eq!((s.expired, s.reservations), (1, 1));
        assert_eq!(s.usage[0].used, 1.0);
    }

    fn keys(w: &[UsageWrite]) -> Vec<(&str, &str)> {
        w.iter()
            .map(|w| (w.name.as_str(), w.value.as_str()))
            .collect()
    }

    #[test]
    fn usage_writes_show_each_changed_subtree_once_in_turn() {
        let l = Ledger::new(Duration::from_millis(10));
        l.upsert_quota(quota("p", None, 8));
        l.upsert_quota(quota("c", Some("p"), 4));
        let now = Instant::now();
        assert!(
            l.usage_writes(now, None, 10).is_empty(),
            "no usage, no annotation"
        );
        assert_eq!(
            l.admit("ns", "a", "c", &cpu(3), false, now),
            Admission::Allowed
        );
        let due = l.usage_writes(now, None, 10);
        assert_eq!(
            keys(&due),
            [("c", r#"{"cpu":"3"}"#), ("p", r#"{"cpu":"3"}"#)],
            "the reservation counts, up the chain"
        );
        // Two changed, one write per round: the next round starts after the last one written.
        assert_eq!(
            keys(&l.usage_writes(now, None, 1)),
            [("c", r#"{"cpu":"3"}"#)]
        );
        let after = ("ns".to_owned(), "c".to_owned());
        assert_eq!(
            keys(&l.usage_writes(now, Some(&after), 1)),
            [("p", r#"{"cpu":"3"}"#)]
        );
        let after = ("ns".to_owned(), "p".to_owned());
        assert_eq!(
            keys(&l.usage_writes(now, Some(&after), 1)),
            [("c", r#"{"cpu":"3"}"#)],
            "wraps round"
        );
        for w in &due {
            l.observe_shown(&w.namespace, &w.name, &w.value);
        }
        assert!(l.usage_writes(now, None, 10).is_empty(), "shown already");
        // The pod never appears: once its reservation expires, the usage shown goes back to none.
        let later = now + Duration::from_millis(20);
        assert_eq!(
            keys(&l.usage_writes(later, None, 10)),
            [("c", "{}"), ("p", "{}")]
        );
        l.observe_shown("ns", "c", "");
        l.observe_shown("ns", "p", "");
        assert!(l.usage_writes(later, None, 10).is_empty());
    }

    #[test]
    fn usage_writes_leave_out_unknown_usage_duplicates_and_unchecked_quotas() {
        let l = Ledger::new(Duration::from_secs(30));
        l.upsert_quota(quota("q", None, 4));
        l.upsert_quota(QuotaSpec::simple("dup", "a", None, cpu(4)));
        l.upsert_quota(QuotaSpec::simple("dup", "b", None, cpu(4)));
        l.upsert_quota(quota(tree::keys::DEFAULT, None, 4));
        l.observe_pod("ns", "x", "q", cpu(1));
        l.observe_pod("a", "y", "dup", cpu(1));
        l.observe_pod("ns", "z", tree::keys::DEFAULT, cpu(1));
        assert_eq!(
            keys(&l.usage_writes(Instant::now(), None, 10)),
            [("q", r#"{"cpu":"1"}"#)]
        );
        l.observe_pod_usage("ns", "w", "q", Err("cpu: too large".into()));
        assert!(l.usage_writes(Instant::now(), None, 10).is_empty());
    }

    #[test]
    fn an_unchanged_quota_keeps_the_tree() {
        let l = Ledger::new(Duration::from_secs(30));
        l.upsert_quota(quota("q", None, 4));
        let built = l.stats().rebuilds;
        l.upsert_quota(quota("q", None, 4));
        assert_eq!(l.stats().rebuilds, built);
        l.upsert_quota(quota("q", None, 5));
        assert_eq!(l.stats().rebuilds, built + 1);
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
            l.used("q")["cpu"].milli(),
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
            l.used("q")["cpu"].milli(),
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
            caller: "webhook",
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
        assert_eq!(l.used("q").get("cpu").map(|a| a.nano).unwrap_or(0), 0);
        assert_eq!(
            l.admit("ns", "a", "q", &cpu(2), false, now),
            Admission::Allowed
        );
        assert_eq!(
            l.admit("ns", "a", "q", &cpu(2), false, now),
            Admission::Allowed,
            "same pod again"
        );
        assert_eq!(l.used("q")["cpu"].milli(), 2000);
    }

    /// Item 3: sub-milli requests are counted exactly (upstream's `Quantity.Add`): four pods of
    /// `500u` fill a `2m` quota, the fifth is refused with the exact amounts.
    #[test]
    fn item_3_sub_milli_requests_count_exactly() {
        let l = Ledger::new(Duration::from_secs(30));
        let two_milli = Amount::from_milli(2, QuantityFormat::DecimalSI);
        l.upsert_quota(QuotaSpec::simple(
            "q",
            "ns",
            None,
            Amounts::from([("cpu".to_owned(), two_milli)]),
        ));
        let half = Amounts::from([(
            "cpu".to_owned(),
            Amount {
                nano: 500_000,
                format: QuantityFormat::DecimalSI,
            },
        )]);
        let now = Instant::now();
        for p in ["a", "b", "c", "d"] {
            assert_eq!(l.admit("ns", p, "q", &half, false, now), Admission::Allowed);
        }
        assert_eq!(l.used("q")["cpu"].nano, 2_000_000);
        assert_eq!(
            l.admit("ns", "e", "q", &half, false, now),
            Admission::Denied(
                "exceeded quota: ns/q, requested: cpu=500u, used: cpu=2m, limited: cpu=2m".into()
            )
        );
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
        assert_eq!(l.used("q")["cpu"].milli(), 100_000);
    }
}
