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
//! persisted are counted again from the list).
//!
//! Quota changes: decisions read an installed tree (a `View`). A change is logged under the
//! lock (O(1)); a rebuild ([`Ledger::rebuild`], from the service's rebuilder thread) takes the
//! logs under the lock, builds the new tree off it, works out which pod groups (pods of one
//! namespace and quota label, which QN gives one quota) and which reservations now sit on
//! another chain of ancestors, and installs the tree under the lock moving only those sums:
//! O(what moved), microseconds at 10,000 quotas and 100,000 pods where rebuilding everything
//! under the lock paused admissions for 0.4 s (`examples/ledger_scale.rs`). Until the
//! installation, decisions read the previous tree, as if the quota's watch event had arrived
//! those milliseconds later; usage stays exact because every charge follows the installed tree
//! and the installation moves whatever the new tree places elsewhere
//! (`tests::background_rebuilds_keep_usage_exact_while_pods_and_quotas_change`, and the
//! reference model in `tests/ledger_model.rs`, where each read rebuilds).
//!
//! Arithmetic: amounts are exact billionths in `i128` (every Kubernetes quantity is a whole
//! number of them). One amount is at most
//! [`MAX_AMOUNT_NANO`] (2^100), so usage sums stay far inside `i128` and every comparison is
//! exact; a request beyond it, or negative, is refused naming the pod, the resource and the value,
//! and an observed pod beyond it makes the quotas on its chain refuse admissions while it lives
//! (counted in `uncountable`, never guessed). Reservations are bounded per namespace and in all
//! ([`ReservationLimits`]) and belong to the caller that made them. `tests/ledger_model.rs` checks
//! all of this against an exact reference model.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub use admission_kit::compat::resources::{Amount, AmountError, Amounts};
use admission_kit::compat::resources::{NANO_PER_UNIT, list_text};
use quota_protocol::proto::Operation;

use quota_protocol::tree::{self, PodIndex, QuotaLookup, QuotaRef, TreeGates};
use quota_protocol::types::ElasticQuota;
pub use quota_protocol::workload::{WorkloadCheck, WorkloadOutcome};

mod peers;
mod view;
use view::{Builder, LOG_BOUND, Plan, QuotaChange, View, add_along, chain_in, count_along};

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
fn add<'a>(a: &mut Amounts, b: impl Iterator<Item = (&'a str, &'a Amount)>, sign: i128) {
    for (k, v) in b {
        let x = match a.get_mut(k) {
            Some(x) => x,
            None => a.entry(k.to_owned()).or_insert(Amount {
                nano: 0,
                format: v.format,
            }),
        };
        match v.nano.checked_mul(sign).and_then(|d| x.nano.checked_add(d)) {
            Some(m) => x.nano = m,
            None => tracing::error!(resource = %k, "usage sum out of range; left unchanged"),
        }
    }
}

pub use quota_protocol::spec::{QUOTA_KEYS, QuotaSpec, SPANS, UNCHECKED};

/// `(namespace, name)` of a pod, or `(name, namespace)` of a quota.
pub type PodKey = (String, String);

/// Text that repeats across pods (namespaces, quota labels, quota and resource names), held once
/// and shared: at 100,000 pods most of a pod's strings are these.
///
/// Hand-written (a set of `Arc<str>`) rather than an interning crate: entries must be dropped
/// when no pod holds them any more, which the global interners do not do.
#[derive(Debug, Default)]
struct Names {
    set: std::collections::HashSet<Arc<str>>,
    /// Entries after the last sweep: the next one runs at twice as many, so sweeping costs O(1)
    /// per new entry and the set stays within twice what pods and groups hold.
    swept_at: usize,
}

impl Names {
    fn get(&mut self, s: &str) -> Arc<str> {
        if let Some(a) = self.set.get(s) {
            return a.clone();
        }
        if self.set.len() >= 2 * self.swept_at.max(1024) {
            self.set.retain(|a| Arc::strong_count(a) > 1);
            self.swept_at = self.set.len();
        }
        let a: Arc<str> = Arc::from(s);
        self.set.insert(a.clone());
        a
    }

    /// `amounts` with their resource names shared.
    fn requests(&mut self, amounts: Amounts) -> Requests {
        amounts
            .into_iter()
            .map(|(k, v)| (self.get(&k), v))
            .collect()
    }
}

/// A pod's requests, compact: one pod holds a few resources, and an ordered map would take a
/// node of eleven entries for each.
type Requests = Box<[(Arc<str>, Amount)]>;

fn requests_iter(r: &Requests) -> impl Iterator<Item = (&str, &Amount)> + Clone {
    r.iter().map(|(k, v)| (&**k, v))
}

fn amounts_iter(a: &Amounts) -> impl Iterator<Item = (&str, &Amount)> + Clone {
    a.iter().map(|(k, v)| (k.as_str(), v))
}

/// An observed pod.
#[derive(Debug)]
struct PodEntry {
    /// Its namespace and quota label.
    group: GroupKey,
    /// Its requests; empty once it has finished, or when they cannot be counted.
    requests: Requests,
    /// Its requests cannot be counted exactly (see [`MAX_AMOUNT_NANO`]): every quota on its
    /// chain refuses admissions while it lives, rather than count it wrong.
    uncountable: bool,
}

/// The pods of one namespace with one quota label: QN gives them all the same quota, so a tree
/// change re-derives one quota per group and moves the group's sum, not each pod's.
#[derive(Debug, PartialEq, Eq, Hash)]
struct GroupId {
    /// The member cluster its pods run in ("" when quota-state serves one cluster).
    cluster: Arc<str>,
    namespace: Arc<str>,
    /// The quota label ("" when none).
    label: Arc<str>,
}

/// Shared by the group's pods, the ledger's map and the rebuilder's list: when only the
/// rebuilder holds it, the group is gone.
type GroupKey = Arc<GroupId>;

#[derive(Debug)]
struct Group {
    /// QN of its pods under the installed [`View`] ("" before the first).
    quota: Arc<str>,
    /// What its countable pods request.
    sum: Amounts,
    /// How many of its pods cannot be counted.
    uncountable: u32,
    /// Its pods.
    members: u32,
}

/// Pods are keyed `namespace/name`, or `cluster/namespace/name` in a fleet (see [`scope`];
/// none of them may hold a `/`): one allocation per pod.
fn pod_key(scope: &str, name: &str) -> Box<str> {
    format!("{scope}/{name}").into_boxed_str()
}

/// The name part of a [`pod_key`].
fn name_of_key(key: &str) -> &str {
    key.rsplit_once('/').map_or(key, |(_, n)| n)
}

/// Where a pod's namespace lives in the ledger: the namespace itself when quota-state serves one
/// cluster (`cluster` is ""), else `cluster/namespace`, so that the same namespace in two member
/// clusters keeps apart its pods, reservations and per-namespace bounds (the quota it resolves
/// to is the same: QN reads the namespace alone).
pub fn scope<'a>(cluster: &str, namespace: &'a str) -> std::borrow::Cow<'a, str> {
    if cluster.is_empty() {
        std::borrow::Cow::Borrowed(namespace)
    } else {
        std::borrow::Cow::Owned(format!("{cluster}/{namespace}"))
    }
}

/// A reservation's key: the pod's [`scope`] and name, and the uid of the admission review that
/// made it. A pod name may hold several reservations, one per review (an honest retry after a
/// later webhook refused the pod, or a forged review naming a pending pod): each review replaces
/// or releases only its own, so no review can drop another's, and the pod's appearance in the
/// watch ends them all (its own requests count from then on).
type ResKey = (String, String, String);

/// A reservation: a pod admitted but not yet seen in the watch.
#[derive(Debug, Clone)]
struct Reservation {
    quota: Arc<str>,
    /// The member cluster of the caller that made it ("" in one cluster).
    cluster: Arc<str>,
    amounts: Requests,
    due: Instant,
    /// Orders reservations made at the same instant in [`State::deadlines`].
    seq: u64,
    /// The caller that made it: only it may release it.
    owner: Arc<str>,
    /// Where its review came from (the webhook's TCP peer, scoped like a namespace in a fleet;
    /// "" when the caller names none), see [`peers`].
    peer: Arc<str>,
    /// The pod's uid its review carried ("" when none): the pod that can back it.
    pod_uid: Arc<str>,
    /// Its peer was not trusted when it was made: it counts against the untrusted bounds and
    /// gives way to a trusted peer's reservation.
    untrusted: bool,
}

/// Bounds on outstanding reservations (pods admitted whose Pod the watch has not shown yet), so
/// that no caller can hold a tenant's quota (or the ledger's memory) with invented pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReservationLimits {
    /// Outstanding reservations per namespace.
    pub per_namespace: usize,
    /// Outstanding reservations in all.
    pub total: usize,
    /// What the outstanding reservations in a quota's subtree may hold of each limited
    /// resource, in thousandths of the quota's limit (1000: no bound). Checked for the quota
    /// and every ancestor.
    pub quota_share_permille: u32,
    /// What one namespace's outstanding reservations on a quota may hold, in thousandths of
    /// that quota's limit (1000: no bound): a namespace cannot take the share its siblings
    /// under a shared quota need.
    pub namespace_share_permille: u32,
    /// Outstanding reservations of one peer that no pod has vouched for yet ([`peers`]).
    pub untrusted_per_peer: usize,
    /// Outstanding reservations of all such peers together.
    pub untrusted_total: usize,
    /// What such peers' outstanding reservations together may hold of each limited resource of
    /// a quota and each ancestor, in thousandths of its limit (one pod larger than that only
    /// while they hold nothing there).
    pub untrusted_share_permille: u32,
}

impl Default for ReservationLimits {
    /// 5,000 per namespace (a large job's pods created in one burst, each reserved for the
    /// moments until its pod is seen) and 50,000 in all (about 15 MB: 295 bytes each in
    /// `examples/ledger_scale`); no bound by amount (the service sets its flags' shares, see
    /// [`ReservationLimits::SERVICE_SHARE_PERMILLE`]). From peers that no pod has vouched for:
    /// 32 each, 512 in all, a tenth of a quota (a burst of the API server's own before its
    /// first pod is seen waits milliseconds; a forger holds that much at most, and only while
    /// no trusted review needs it).
    fn default() -> Self {
        Self {
            per_namespace: 5_000,
            total: 50_000,
            quota_share_permille: 1000,
            namespace_share_permille: 1000,
            untrusted_per_peer: 32,
            untrusted_total: 512,
            untrusted_share_permille: 100,
        }
    }
}

impl ReservationLimits {
    /// The service's default share (half): a client that can forge reviews holds at most half
    /// of a quota with pods that never come (one pod larger than that only while nothing else
    /// is outstanding), while an honest burst of pods in flight at once gets half the quota
    /// before its first pods are seen and the rest a moment later (refused with "retry").
    pub const SERVICE_SHARE_PERMILLE: u32 = 500;
}

/// Upper bounds (seconds) of [`Backed`]'s buckets: from a quiet API server's milliseconds to
/// the reservation window's default.
pub const BACKED_BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// How long reservations waited for their pod's watch event: what the reservation window
/// (`--reservation-ttl-secs`) must cover, measured where it runs.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Backed {
    /// Observations at or below each of [`BACKED_BUCKETS`] (not cumulative).
    pub buckets: [u64; BACKED_BUCKETS.len()],
    /// All observations, and their sum in seconds.
    pub count: u64,
    /// Sum of the observations, in seconds.
    pub sum: f64,
}

impl Backed {
    fn observe(&mut self, secs: f64) {
        if let Some(i) = BACKED_BUCKETS.iter().position(|b| secs <= *b) {
            self.buckets[i] += 1;
        }
        self.count += 1;
        self.sum += secs;
    }
}

/// One namespace's outstanding reservations.
#[derive(Debug, Default)]
struct InNamespace {
    /// How many ([`ReservationLimits::per_namespace`]).
    count: usize,
    /// What they hold per charged quota ([`ReservationLimits::namespace_share_permille`]).
    by_quota: HashMap<Arc<str>, Amounts>,
}

#[derive(Debug, Default)]
struct State {
    /// The quotas as the watch shows them now.
    quotas: HashMap<String, Vec<Arc<QuotaSpec>>>,
    /// Bumped by every quota change.
    generation: u64,
    /// The installed tree, `None` until the first; what every decision reads. It lags `quotas`
    /// while a rebuild runs (see [`Ledger::spawn_rebuilder`]).
    view: Option<Arc<View>>,
    /// The `generation` the installed view was built from.
    view_generation: u64,
    /// A rebuild runs off the lock.
    building: bool,
    /// Groups created since the rebuilder last took them (it keeps its own list); while it
    /// builds, these were QN'd under the old view and the installation re-derives them.
    new_groups: Vec<GroupKey>,
    /// Quota changes since the rebuilder last took them (it keeps its own copy of the quotas).
    quota_log: Vec<QuotaChange>,
    /// The logs grew past their bound while nobody rebuilt: the rebuilder copies all instead.
    resync: bool,
    /// Usage of each quota's subtree (itself and every descendant), under the installed view.
    subtree: HashMap<String, Amounts>,
    /// Per quota subtree, how many live pods could not be counted (absent when none).
    uncountable: HashMap<String, u32>,
    /// Every observed pod, finished ones included (QV-T1 and QV-D4 read their labels), by
    /// [`pod_key`].
    pods: HashMap<Box<str>, PodEntry>,
    /// The pods by namespace and quota label.
    groups: HashMap<GroupKey, Group>,
    names: Names,
    /// The outstanding reservations, each key shared with its entry in `deadlines`.
    ///
    /// This map and the three after it grow with admissions, so they are B-trees, not hash
    /// maps: a hash map grows by rehashing every entry at once, under the lock (18 ms at 57,000
    /// reservations in `examples/admit_load`, every admission waiting behind it); a B-tree grows
    /// a node at a time.
    reservations: BTreeMap<Arc<ResKey>, Reservation>,
    /// What the outstanding reservations hold per quota, and how many they are.
    reserved: BTreeMap<String, (Amounts, u32)>,
    /// What the outstanding reservations hold per quota subtree (as `subtree`, reservations
    /// only): bounded by [`ReservationLimits::quota_share_permille`], and left out of the usage
    /// written back.
    unbacked: HashMap<String, Amounts>,
    /// Outstanding reservations per namespace, and what they hold per charged quota (absent
    /// when none).
    reserved_in: BTreeMap<String, InNamespace>,
    /// The outstanding reservations by deadline (and [`Reservation::seq`]).
    deadlines: BTreeMap<(Instant, u64), Arc<ResKey>>,
    /// The namespaces that exist (Namespace watch), once a feed provides them: a pod of any
    /// other namespace reserves nothing (the API server refuses pods there before any webhook,
    /// so only a forged review names one). `None`: not known (tests, offline tools).
    namespaces: Option<std::collections::HashSet<Box<str>>>,
    /// Reservations that their pod backed, since start, and the seconds from reservation to
    /// the pod's watch event (metrics: the window reservations need).
    backed: Backed,
    /// The next [`Reservation::seq`].
    next_seq: u64,
    /// Reservations dropped at their deadline, since start (metrics).
    expired: u64,
    /// Tree rebuilds since start, the time they took and the part of it under the lock
    /// (metrics).
    rebuilds: u64,
    rebuild_seconds: f64,
    rebuild_locked_seconds: f64,
    /// The longest one rebuild step held the lock, in seconds.
    rebuild_locked_max: f64,
    /// Each quota's `child-request` annotation as last seen or written, by (namespace, name):
    /// what the usage write-back compares against. Kept apart from [`QuotaSpec`] so that a
    /// write-back's own watch event does not rebuild the tree.
    shown: HashMap<PodKey, String>,
    /// The same of the [`BY_MEMBER`] annotation (fleets only).
    shown_split: HashMap<PodKey, String>,
    /// In a fleet: each member cluster's share of `subtree` (its pods and reservations), for the
    /// refusals and the usage write-back that name the split. Empty in one cluster.
    split: HashMap<Arc<str>, HashMap<String, Amounts>>,
    /// Member clusters whose Pod watch is broken: their reservations do not expire (their pods
    /// may have been created unseen; dropping them would over-admit) until the watch has listed
    /// again ([`Ledger::member_watch`]).
    stalled: std::collections::HashSet<Arc<str>>,
    /// Reservations of stalled clusters past their deadline, waiting for the relist.
    held: Vec<Arc<ResKey>>,
    /// Trusted peers and the untrusted reservations ([`peers`]).
    peers: peers::Peers,
}

impl State {
    fn log_quota(&mut self, c: QuotaChange) {
        self.quota_log.push(c);
        if self.quota_log.len() > LOG_BOUND {
            self.quota_log = Vec::new();
            self.resync = true;
        }
    }

    fn fresh(&self) -> bool {
        self.view.is_some() && self.view_generation == self.generation
    }

    fn chain(&self, quota: &str) -> Arc<[String]> {
        chain_in(self.view.as_deref(), quota)
    }

    fn charge<'a>(
        &mut self,
        quota: &str,
        amounts: impl Iterator<Item = (&'a str, &'a Amount)> + Clone,
        sign: i128,
    ) {
        let chain = self.chain(quota);
        add_along(&mut self.subtree, &chain, amounts, sign);
    }

    /// Adds `amounts` × `sign` to `cluster`'s share of each quota of `chain` (fleets only).
    fn split_add<'a>(
        &mut self,
        cluster: &Arc<str>,
        chain: &[String],
        amounts: impl Iterator<Item = (&'a str, &'a Amount)> + Clone,
        sign: i128,
    ) {
        if cluster.is_empty() {
            return;
        }
        let by_quota = match self.split.get_mut(cluster) {
            Some(m) => m,
            None => self.split.entry(cluster.clone()).or_default(),
        };
        add_along(by_quota, chain, amounts, sign);
    }

    fn put_reservation(&mut self, key: Arc<ResKey>, r: Reservation) {
        self.charge(&r.quota, requests_iter(&r.amounts), 1);
        let chain = self.chain(&r.quota);
        self.split_add(&r.cluster, &chain, requests_iter(&r.amounts), 1);
        add_along(&mut self.unbacked, &chain, requests_iter(&r.amounts), 1);
        if r.untrusted {
            self.peers.add(r.seq, key.clone(), &r.peer);
            add_along(&mut self.peers.held, &chain, requests_iter(&r.amounts), 1);
        }
        let (sum, n) = match self.reserved.get_mut(&*r.quota) {
            Some(e) => e,
            None => self.reserved.entry(r.quota.to_string()).or_default(),
        };
        add(sum, requests_iter(&r.amounts), 1);
        *n += 1;
        // Looked up before inserting: the entry API would copy the namespace every time.
        let ns = match self.reserved_in.get_mut(&key.0) {
            Some(ns) => ns,
            None => self.reserved_in.entry(key.0.clone()).or_default(),
        };
        ns.count += 1;
        add(
            ns.by_quota.entry(r.quota.clone()).or_default(),
            requests_iter(&r.amounts),
            1,
        );
        self.deadlines.insert((r.due, r.seq), key.clone());
        self.reservations.insert(key, r);
    }

    fn take_reservation(&mut self, key: &ResKey) -> Option<Reservation> {
        let r = self.reservations.remove(key)?;
        self.deadlines.remove(&(r.due, r.seq));
        self.charge(&r.quota, requests_iter(&r.amounts), -1);
        let chain = self.chain(&r.quota);
        self.split_add(&r.cluster, &chain, requests_iter(&r.amounts), -1);
        add_along(&mut self.unbacked, &chain, requests_iter(&r.amounts), -1);
        if r.untrusted {
            self.peers.remove(r.seq, &r.peer);
            add_along(&mut self.peers.held, &chain, requests_iter(&r.amounts), -1);
        }
        if let Some((sum, n)) = self.reserved.get_mut(&*r.quota) {
            add(sum, requests_iter(&r.amounts), -1);
            *n -= 1;
            if *n == 0 {
                self.reserved.remove(&*r.quota);
            }
        }
        if let Some(ns) = self.reserved_in.get_mut(&key.0) {
            ns.count -= 1;
            if let Some(sum) = ns.by_quota.get_mut(&*r.quota) {
                add(sum, requests_iter(&r.amounts), -1);
                if sum.values().all(Amount::is_zero) {
                    ns.by_quota.remove(&*r.quota);
                }
            }
            if ns.count == 0 {
                self.reserved_in.remove(&key.0);
            }
        }
        Some(r)
    }

    fn remove_pod(&mut self, scope: &str, name: &str) {
        let Some(e) = self.pods.remove(&*pod_key(scope, name)) else {
            return;
        };
        let key = e.group.clone();
        let Some(g) = self.groups.get_mut(&key) else {
            return;
        };
        if e.uncountable {
            g.uncountable -= 1;
        } else {
            add(&mut g.sum, requests_iter(&e.requests), -1);
        }
        g.members -= 1;
        let quota = g.quota.clone();
        if g.members == 0 {
            self.groups.remove(&key);
        }
        let chain = self.chain(&quota);
        if e.uncountable {
            count_along(&mut self.uncountable, &chain, 1, false);
        } else {
            add_along(&mut self.subtree, &chain, requests_iter(&e.requests), -1);
            self.split_add(&key.cluster, &chain, requests_iter(&e.requests), -1);
        }
    }

    fn insert_pod(&mut self, scope: &str, name: &str, e: PodEntry) {
        let key = e.group.clone();
        let g = match self.groups.entry(key) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                let quota = match &self.view {
                    Some(view) => self.names.get(&tree::quota_name(
                        &*view.topology,
                        Some(&e.group.label),
                        &e.group.namespace,
                        false,
                    )),
                    None => Arc::from(""),
                };
                self.new_groups.push(v.key().clone());
                if self.new_groups.len() > LOG_BOUND {
                    self.new_groups = Vec::new();
                    self.resync = true;
                }
                v.insert(Group {
                    quota,
                    sum: Amounts::new(),
                    uncountable: 0,
                    members: 0,
                })
            }
        };
        g.members += 1;
        if e.uncountable {
            g.uncountable += 1;
        } else {
            add(&mut g.sum, requests_iter(&e.requests), 1);
        }
        let quota = g.quota.clone();
        let chain = self.chain(&quota);
        if e.uncountable {
            count_along(&mut self.uncountable, &chain, 1, true);
        } else {
            add_along(&mut self.subtree, &chain, requests_iter(&e.requests), 1);
            let cluster = e.group.cluster.clone();
            self.split_add(&cluster, &chain, requests_iter(&e.requests), 1);
        }
        self.pods.insert(pod_key(scope, name), e);
    }

    /// The keys of every reservation of pod `scope/name`, whichever review made it.
    fn reservations_of(&self, scope: &str, name: &str) -> Vec<Arc<ResKey>> {
        // Every pod event asks; most namespaces hold no reservation, and then nothing is
        // allocated for the range's bound.
        if !self.reserved_in.contains_key(scope) {
            return Vec::new();
        }
        let from = (scope.to_owned(), name.to_owned(), String::new());
        self.reservations
            .range::<ResKey, _>(&from..)
            .take_while(|(k, _)| k.0 == scope && k.1 == name)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// The pod's watch event arrived (or its deletion): its reservations end, and for the
    /// metrics, how long the first of them waited. `uid` is the pod's (`""` on a deletion): the
    /// peer whose reservation carried it, if no other peer's did, is trusted from now on.
    fn uncharge_key(&mut self, key: &PodKey, uid: &str, now: Instant, ttl: Duration) {
        let mut waited = None;
        // The peers whose reservations carried the pod's uid: one earns trust, two none.
        let mut vouched: Option<Option<Arc<str>>> = None;
        for k in self.reservations_of(&key.0, &key.1) {
            if let Some(r) = self.take_reservation(&k) {
                let made = r.due.checked_sub(ttl).unwrap_or(r.due);
                let w = now.saturating_duration_since(made).as_secs_f64();
                waited = Some(waited.map_or(w, |x: f64| x.max(w)));
                if !uid.is_empty() && *r.pod_uid == *uid && !r.peer.is_empty() {
                    vouched = match vouched {
                        None => Some(Some(r.peer.clone())),
                        Some(Some(p)) if p == r.peer => Some(Some(p)),
                        Some(_) => Some(None),
                    };
                }
            }
        }
        if let Some(w) = waited {
            self.backed.observe(w);
        }
        if let Some(Some(peer)) = vouched {
            self.trust(&peer, now);
        }
        self.remove_pod(&key.0, &key.1);
    }

    /// `peer` is trusted from `now`: its outstanding reservations stop counting as a
    /// stranger's (they are the API server's pods in flight).
    fn trust(&mut self, peer: &Arc<str>, now: Instant) {
        if !self.peers.trust(peer, now) {
            return;
        }
        tracing::info!(peer = %peer, "peer trusted from now on (a pod backed its reservation, or the previous leader remembered it)");
        let own: Vec<Arc<ResKey>> = self
            .peers
            .untrusted
            .values()
            .filter(|k| self.reservations.get(*k).is_some_and(|r| r.peer == *peer))
            .cloned()
            .collect();
        for k in own {
            if let Some(mut r) = self.take_reservation(&k) {
                r.untrusted = false;
                self.put_reservation(k, r);
            }
        }
    }

    /// Drops the untrusted reservations that stand in the way of a trusted peer's pod in
    /// `namespace` charged along `chain`: those of the namespace (its count bound) and those
    /// charged to a quota that shares a quota with `chain` (usage and shares). How many.
    fn preempt_untrusted(&mut self, namespace: &str, chain: &[String]) -> usize {
        let view = self.view.clone();
        let doomed: Vec<Arc<ResKey>> = self
            .peers
            .untrusted
            .values()
            .filter(|k| {
                k.0 == namespace
                    || self.reservations.get(*k).is_some_and(|r| {
                        chain_in(view.as_deref(), &r.quota)
                            .iter()
                            .any(|q| chain.contains(q))
                    })
            })
            .cloned()
            .collect();
        for k in &doomed {
            self.take_reservation(k);
        }
        self.peers.preempted += doomed.len() as u64;
        doomed.len()
    }

    fn expire(&mut self, now: Instant) {
        while let Some(first) = self.deadlines.first_entry() {
            if first.key().0 > now {
                break;
            }
            let key = first.remove();
            // A stalled member's pod may exist unseen: its reservation waits for the relist.
            if !self.stalled.is_empty()
                && self
                    .reservations
                    .get(&key)
                    .is_some_and(|r| self.stalled.contains(&r.cluster))
            {
                self.held.push(key);
                continue;
            }
            if self.take_reservation(&key).is_some() {
                self.expired += 1;
            }
        }
    }

    /// `cluster`'s held reservations get a new window from `now` (its watch has listed again:
    /// their pods, if created, are counted by now, or will be within the window).
    fn resume(&mut self, cluster: &str, now: Instant, ttl: Duration) {
        let held = std::mem::take(&mut self.held);
        for key in held {
            let Some(r) = self.reservations.get(&key) else {
                continue;
            };
            if &*r.cluster != cluster {
                self.held.push(key);
                continue;
            }
            // Re-made since it was held: it has a deadline of its own.
            if self.deadlines.contains_key(&(r.due, r.seq)) {
                continue;
            }
            self.next_seq += 1;
            let seq = self.next_seq;
            if let Some(r) = self.reservations.get_mut(&key) {
                r.due = now + ttl;
                r.seq = seq;
            }
            self.deadlines.insert((now + ttl, seq), key);
        }
    }

    /// Moves group `key`'s usage from its quota's chain in `base` to the chain of `to` in `new`.
    fn move_group(&mut self, key: &GroupKey, base: Option<&View>, new: &View, to: &str) {
        let Some(g) = self.groups.get_mut(key) else {
            return;
        };
        let (from_chain, to_chain) = (chain_in(base, &g.quota), new.chain(to));
        g.quota = self.names.get(to);
        add_along(&mut self.subtree, &from_chain, amounts_iter(&g.sum), -1);
        add_along(&mut self.subtree, &to_chain, amounts_iter(&g.sum), 1);
        count_along(&mut self.uncountable, &from_chain, g.uncountable, false);
        count_along(&mut self.uncountable, &to_chain, g.uncountable, true);
        if !key.cluster.is_empty() {
            let sum = g.sum.clone();
            self.split_add(&key.cluster, &from_chain, amounts_iter(&sum), -1);
            self.split_add(&key.cluster, &to_chain, amounts_iter(&sum), 1);
        }
    }

    /// Installs `new`, built off the lock from the quotas at `generation`, in place of `base`
    /// (the view installed when the rebuild began): moves the usage `plan` found misplaced, and
    /// that of groups created meanwhile. O(what moved), so admissions wait for the tree only as
    /// long as the change touches. Returns the previous view, to be dropped after the lock (a
    /// tree of 10,000 quotas takes milliseconds to free).
    fn install(
        &mut self,
        base: Option<&Arc<View>>,
        new: Arc<View>,
        generation: u64,
        plan: &Plan,
    ) -> Option<Arc<View>> {
        let base = base.map(|b| &**b);
        let mut done = std::collections::HashSet::new();
        for key in self.new_groups.clone() {
            if done.contains(&key) || !self.groups.contains_key(&key) {
                continue;
            }
            let to = tree::quota_name(&*new.topology, Some(&key.label), &key.namespace, false);
            self.move_group(&key, base, &new, &to);
            done.insert(key);
        }
        for (key, from, to) in &plan.moves {
            // The same group, not one of the same namespace and label created after it was
            // gone (that one is among `new_groups`).
            let same = self
                .groups
                .get_key_value(key)
                .is_some_and(|(k, g)| Arc::ptr_eq(k, key) && *g.quota == **from);
            if done.contains(key) || !same {
                continue;
            }
            self.move_group(key, base, &new, to);
        }
        if !self.split.is_empty() && !plan.changed.is_empty() {
            // Each member's share of the moved reservations moves with them.
            let changed: std::collections::HashSet<&str> =
                plan.changed.iter().map(String::as_str).collect();
            let moved: Vec<(Arc<str>, Arc<str>, Requests)> = self
                .reservations
                .values()
                .filter(|r| !r.cluster.is_empty() && changed.contains(&*r.quota))
                .map(|r| (r.cluster.clone(), r.quota.clone(), r.amounts.clone()))
                .collect();
            for (cluster, q, amounts) in moved {
                let (from, to) = (chain_in(base, &q), new.chain(&q));
                self.split_add(&cluster, &from, requests_iter(&amounts), -1);
                self.split_add(&cluster, &to, requests_iter(&amounts), 1);
            }
        }
        if !self.peers.untrusted.is_empty() && !plan.changed.is_empty() {
            // What untrusted reservations hold moves with them too.
            let moved: Vec<(Arc<str>, Requests)> = self
                .peers
                .untrusted
                .values()
                .filter_map(|k| self.reservations.get(k))
                .filter(|r| plan.changed.iter().any(|q| **q == *r.quota))
                .map(|r| (r.quota.clone(), r.amounts.clone()))
                .collect();
            for (q, amounts) in moved {
                let (from, to) = (chain_in(base, &q), new.chain(&q));
                add_along(&mut self.peers.held, &from, requests_iter(&amounts), -1);
                add_along(&mut self.peers.held, &to, requests_iter(&amounts), 1);
            }
        }
        for q in &plan.changed {
            if let Some((sum, _)) = self.reserved.get(q) {
                let (from, to) = (chain_in(base, q), new.chain(q));
                add_along(&mut self.subtree, &from, amounts_iter(sum), -1);
                add_along(&mut self.subtree, &to, amounts_iter(sum), 1);
                add_along(&mut self.unbacked, &from, amounts_iter(sum), -1);
                add_along(&mut self.unbacked, &to, amounts_iter(sum), 1);
            }
            // A quota gone from the tree holds nothing any more.
            if !new.specs.contains_key(q)
                && self
                    .subtree
                    .get(q)
                    .is_some_and(|u| u.values().all(Amount::is_zero))
            {
                self.subtree.remove(q);
            }
        }
        self.view_generation = generation;
        self.view.replace(new)
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
    /// The rebuilder's copies; held by whoever rebuilds (one at a time), always taken before
    /// `state`.
    builder: Mutex<Builder>,
    /// Signalled when a quota changes (the rebuilder waits on it) and when a tree is installed
    /// (readers that found none wait on it).
    changed: Condvar,
    installed: Condvar,
    /// A rebuilder thread keeps the tree up to date: readers then use the installed tree while
    /// it works rather than build one themselves.
    background: AtomicBool,
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
    /// The part of those seconds spent holding the lock (installing the tree, moving the usage
    /// it moved): what admissions waited.
    pub rebuild_locked_seconds: f64,
    /// The longest a rebuild held the lock at once (snapshot or installation), in seconds.
    pub rebuild_locked_max: f64,
    /// Each quota's subtree usage and its limit, per resource, in units.
    pub usage: Vec<QuotaUsage>,
    /// How long reservations waited for their pods.
    pub backed: Backed,
    /// Peers that a pod has vouched for ([`peers`]).
    pub trusted_peers: usize,
    /// Outstanding reservations of peers no pod has vouched for.
    pub untrusted_reservations: usize,
    /// Such reservations dropped for a trusted peer's pod, since start.
    pub preempted: u64,
    /// Reviews refused at the bounds on such peers, since start.
    pub untrusted_refused: u64,
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
    /// In a fleet, the [`BY_MEMBER`] annotation's new value: each member's share of `value`
    /// (`{"east":{"cpu":"6"},"west":{"cpu":"4"}}`, members holding none left out); "" in one
    /// cluster (not written).
    pub by_member: String,
}

/// ElasticQuota annotation where a fleet's quota-state shows each member cluster's share of the
/// `child-request` usage.
pub const BY_MEMBER: &str = "fleet.admission-webhooks.io/child-request-by-member";

/// [`UsageWrite::by_member`] of `quota` from each member's subtree usage.
fn by_member_json(members: &[(&Arc<str>, &HashMap<String, Amounts>)], quota: &str) -> String {
    let parts: Vec<String> = members
        .iter()
        .filter_map(|(cluster, by_quota)| {
            let used: Amounts = by_quota
                .get(quota)?
                .iter()
                .filter(|(_, a)| a.nano != 0)
                .map(|(k, a)| (k.clone(), *a))
                .collect();
            // Cluster names are DNS labels: nothing to escape.
            (!used.is_empty()).then(|| {
                format!(
                    "\"{cluster}\":{}",
                    admission_kit::compat::resources::amounts_json(&used)
                )
            })
        })
        .collect();
    format!("{{{}}}", parts.join(","))
}

/// One pod to check: what scheduling-webhook's PV-3.2 and PV-4 send.
#[derive(Debug, Clone, Copy)]
pub struct PodCheck<'a> {
    /// The member cluster the pod is in: the caller's ("" when quota-state serves one cluster).
    pub cluster: &'a str,
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
    /// The admission review's uid ("" from callers that do not send it): a reservation belongs
    /// to the review that made it, which alone may replace or release it.
    pub review: &'a str,
    /// Where the review came from ("" when the caller names none: trusted); see the
    /// `peers` module.
    pub peer: &'a str,
    /// The pod's `metadata.uid` the review carried ("" when none).
    pub pod_uid: &'a str,
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

/// The ledger's quotas as a workload check reads them: limits from the installed tree, usage
/// of each subtree (admitted pods and outstanding reservations).
struct LedgerQuotas<'a> {
    view: &'a View,
    state: &'a State,
}

impl quota_protocol::workload::Quotas for LedgerQuotas<'_> {
    fn max(&self, quota: &str) -> Result<Option<&Amounts>, String> {
        match self.view.specs.get(quota).map(Vec::as_slice) {
            None | Some([]) => Ok(None),
            Some([one]) => Ok(Some(&one.max)),
            Some(_) => Err(format!("more than one elastic quota {quota} found")),
        }
    }

    fn chain(&self, quota: &str) -> Result<Vec<quota_protocol::workload::Level<'_>>, String> {
        static NONE: std::sync::LazyLock<Amounts> = std::sync::LazyLock::new(Amounts::new);
        let chain = self.view.chain(quota);
        if let Some(n) = chain.iter().find_map(|q| self.state.uncountable.get(q)) {
            return Err(format!(
                "quota {quota}: usage cannot be counted, {n} pod(s) charged along its chain \
                 request more than quota-state counts"
            ));
        }
        Ok(chain
            .iter()
            .filter_map(|q| {
                let qs = self.view.spec(q)?;
                Some(quota_protocol::workload::Level {
                    name: &qs.info.name,
                    limit: &qs.limit,
                    used: self.state.subtree.get(q).unwrap_or(&NONE),
                })
            })
            .collect())
    }
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

/// The observed pods as QV reads them: a scan of the groups (one per namespace and label), and
/// of the pods only when a group carries the label. It runs on quota updates and deletes, which
/// are rare, and keeps pod events (frequent) free of index upkeep.
struct Pods<'a> {
    pods: &'a HashMap<Box<str>, PodEntry>,
    groups: &'a HashMap<GroupKey, Group>,
}

impl PodIndex for Pods<'_> {
    fn labelled(&self, quota: &str) -> Vec<String> {
        if !self.groups.keys().any(|g| &*g.label == quota) {
            return Vec::new();
        }
        self.pods
            .iter()
            .filter(|(_, e)| &*e.group.label == quota)
            .map(|(key, _)| name_of_key(key).to_owned())
            .collect()
    }

    fn any_bound(&self, quota: &str, namespaces: &[String]) -> bool {
        self.groups.keys().any(|g| {
            &*g.label == quota
                || &*g.namespace == quota
                || namespaces.iter().any(|n| **n == *g.namespace)
        })
    }
}

/// One admission as [`admit_locked`] needs it.
struct Admit<'a> {
    /// The caller's member cluster ("" in one cluster).
    cluster: &'a str,
    namespace: &'a str,
    name: &'a str,
    quota: &'a str,
    requests: &'a Amounts,
    dry_run: bool,
    caller: &'a str,
    /// The admission review's uid: a reservation belongs to the review that made it.
    review: &'a str,
    /// Where the review came from ("" when the caller names none; see [`peers`]).
    peer: &'a str,
    /// The pod's uid the review carried ("" when none).
    pod_uid: &'a str,
    now: Instant,
}

/// The first negative amount, named.
fn negative(requests: &Amounts) -> Option<String> {
    requests
        .iter()
        .find_map(|(k, v)| (v.nano < 0).then(|| countable(k, v).err()).flatten())
}

/// Whether reserving `requested` on `quota` would take the outstanding reservations past their
/// share (see [`ReservationLimits`]) of the quota or an ancestor, or namespace `namespace`'s
/// past its share of `quota`: the refusal's text, naming the quota, resource and amounts. A pod
/// that alone asks more than the share passes while nothing else is outstanding there, so
/// that every pod that fits its quota can be created.
fn unbacked_over_share(
    s: &State,
    view: &View,
    quota: &str,
    requested: &Amounts,
    limits: ReservationLimits,
    namespace: &str,
) -> Option<String> {
    let over = |held: Option<&Amounts>, limit: &Amounts, permille: u32| {
        over_share(requested, held, limit, permille)
    };
    for q in view.chain(quota).iter() {
        let Some(qs) = view.spec(q) else { continue };
        if let Some(t) = over(s.unbacked.get(q), &qs.limit, limits.quota_share_permille) {
            return Some(format!("quota {}/{}: {t}", qs.info.namespace, qs.info.name));
        }
    }
    let qs = view.spec(quota)?;
    let by = s
        .reserved_in
        .get(namespace)
        .and_then(|ns| ns.by_quota.get(quota));
    over(by, &qs.limit, limits.namespace_share_permille).map(|t| {
        format!(
            "namespace {namespace} on quota {}/{}: {t}",
            qs.info.namespace, qs.info.name
        )
    })
}

/// Whether the outstanding reservations of untrusted peers ([`peers`]) leave no room for one
/// more of `peer`'s: its count, all of theirs, or their share of `quota` or an ancestor. The
/// refusal's text.
fn untrusted_over(
    s: &State,
    view: &View,
    quota: &str,
    requested: &Amounts,
    limits: ReservationLimits,
    peer: &str,
) -> Option<String> {
    let (mine, all) = s.peers.counts(peer);
    if mine >= limits.untrusted_per_peer || all >= limits.untrusted_total {
        return Some(format!(
            "{mine} pods admitted from {peer} and {all} from all addresses that no created pod \
             has vouched for are not yet created (limits {} and {}); retry in a few seconds",
            limits.untrusted_per_peer, limits.untrusted_total
        ));
    }
    for q in view.chain(quota).iter() {
        let Some(qs) = view.spec(q) else { continue };
        let held = s.peers.held.get(q);
        if let Some(t) = over_share(requested, held, &qs.limit, limits.untrusted_share_permille) {
            return Some(format!(
                "quota {}/{}: from addresses that no created pod has vouched for ({peer}), {t}",
                qs.info.namespace, qs.info.name
            ));
        }
    }
    None
}

/// Whether `requested` on top of `held` passes `permille` thousandths of `limit` in some
/// resource, `held` being more than nothing (a pod larger than the share alone passes, so that
/// every pod that fits its quota can be created): the refusal's text.
fn over_share(
    requested: &Amounts,
    held: Option<&Amounts>,
    limit: &Amounts,
    permille: u32,
) -> Option<String> {
    if permille >= 1000 {
        return None;
    }
    let held = held?;
    requested.iter().find_map(|(k, r)| {
        let l = limit.get(k)?;
        let h = held.get(k).map_or(0, |h| h.nano);
        let cap = l.nano / 1000 * i128::from(permille);
        (h > 0 && h.checked_add(r.nano).is_none_or(|t| t > cap)).then(|| {
            let amount = |nano| {
                Amount {
                    nano,
                    format: r.format,
                }
                .canonical()
            };
            format!(
                "{k}={} is held already by pods admitted but not yet created, and {k}={} \
                 more would pass {}‰ of its limit {k}={}; retry in a few seconds",
                amount(h),
                r.canonical(),
                permille,
                l.canonical()
            )
        })
    })
}

/// ` (east 40, west 20)`: each member's share of `used` on `quota` (its pods and reservations),
/// members in name order, those holding none of it left out; "" in one cluster or when
/// nothing is used. With several resources, each member's list: ` (east: cpu=6,memory=3Gi;
/// west: cpu=4)`.
fn split_text(
    split: &HashMap<Arc<str>, HashMap<String, Amounts>>,
    quota: &str,
    used: &Amounts,
) -> String {
    if split.is_empty() || used.is_empty() {
        return String::new();
    }
    let mut members: Vec<(&Arc<str>, Amounts)> = split
        .iter()
        .filter_map(|(cluster, by_quota)| {
            let shares: Amounts = used
                .iter()
                .filter_map(|(k, u)| {
                    let a = by_quota.get(quota)?.get(k)?;
                    (a.nano != 0).then(|| {
                        (
                            k.clone(),
                            Amount {
                                nano: a.nano,
                                format: u.format,
                            },
                        )
                    })
                })
                .collect();
            (!shares.is_empty()).then_some((cluster, shares))
        })
        .collect();
    if members.is_empty() {
        return String::new();
    }
    members.sort_by(|a, b| a.0.cmp(b.0));
    let parts: Vec<String> = if used.len() == 1 {
        members
            .iter()
            .map(|(c, a)| {
                let v = a.values().next().map(Amount::canonical).unwrap_or_default();
                format!("{c} {v}")
            })
            .collect()
    } else {
        members
            .iter()
            .map(|(c, a)| format!("{c}: {}", list_text(a)))
            .collect()
    };
    let sep = if used.len() == 1 { ", " } else { "; " };
    format!(" ({})", parts.join(sep))
}

/// PV-4 under the lock: see [`Ledger::admit`]. A trusted peer's pod refused while untrusted
/// reservations stand in its way is asked again without them ([`peers`]).
fn admit_locked(
    s: &mut State,
    ttl: Duration,
    limits: ReservationLimits,
    a: &Admit<'_>,
) -> Admission {
    let peer = scope(a.cluster, a.peer);
    let peer = if a.peer.is_empty() { "" } else { &*peer };
    let first = admit_once(s, ttl, limits, a, peer);
    if let Admission::Denied(_) = &first
        && s.peers.trusted(peer)
        && !s.peers.untrusted.is_empty()
    {
        let chain = s.chain(a.quota);
        let scoped = scope(a.cluster, a.namespace);
        if s.preempt_untrusted(&scoped, &chain) > 0 {
            return admit_once(s, ttl, limits, a, peer);
        }
    }
    first
}

/// One try of [`admit_locked`], for a review from `peer` (scoped).
fn admit_once(
    s: &mut State,
    ttl: Duration,
    limits: ReservationLimits,
    a: &Admit<'_>,
    peer: &str,
) -> Admission {
    let (name, quota) = (a.name, a.quota);
    // Pods, reservations and namespace bounds are the member's own; `namespace` reads
    // `cluster/namespace` in a fleet, naming the cluster in every refusal.
    let scoped = scope(a.cluster, a.namespace);
    let namespace = &*scoped;
    s.expire(a.now);
    if let Some(e) = negative(a.requests) {
        return Admission::Denied(format!("pod {namespace}/{name}: {e}"));
    }
    if quota.is_empty() || UNCHECKED.contains(&quota) {
        return Admission::Allowed;
    }
    let view = s.view.clone().unwrap_or_default();
    let spec = match view.specs.get(quota).map(Vec::as_slice) {
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
    // The same review asking again (the API server retrying a call) replaces its own earlier
    // reservation; another review's reservation for the same pod name stays and counts.
    let key = Arc::new((namespace.to_owned(), name.to_owned(), a.review.to_owned()));
    if s.reservations
        .get(&key)
        .is_some_and(|r| &*r.owner != a.caller)
    {
        return Admission::Denied(format!(
            "pod {namespace}/{name}: review {} holds a reservation made by another caller",
            a.review
        ));
    }
    let previous = s.take_reservation(&key);
    let restore = |s: &mut State, previous: Option<Reservation>| {
        if let Some(r) = previous {
            s.put_reservation(key.clone(), r);
        }
    };
    for q in view.chain(quota).iter() {
        let Some(qs) = view.spec(q) else {
            continue;
        };
        if !a.cluster.is_empty()
            && let Some(members) = &qs.members
            && !members.iter().any(|m| m == a.cluster)
        {
            restore(s, previous);
            return Admission::Denied(format!(
                "quota {}/{} spans member clusters {} only: pod {namespace}/{name} cannot be \
                 charged to it",
                qs.info.namespace,
                qs.info.name,
                members.join(",")
            ));
        }
        if let Some(n) = s.uncountable.get(q) {
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
        let used = s.subtree.get(q).cloned().unwrap_or_default();
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
                "exceeded quota: {}/{}, requested: {}, used: {}{}, limited: {}",
                qs.info.namespace,
                qs.info.name,
                list_text(&r_ex),
                list_text(&u_ex),
                split_text(&s.split, q, &u_ex),
                list_text(&l_ex)
            ));
        }
    }
    let unknown_namespace = s
        .namespaces
        .as_ref()
        .is_some_and(|n| !n.contains(namespace));
    if a.dry_run || unknown_namespace || s.pods.contains_key(&*pod_key(namespace, name)) {
        restore(s, previous);
        return Admission::Allowed;
    }
    if let Some(text) = unbacked_over_share(s, &view, quota, &requested, limits, namespace) {
        restore(s, previous);
        return Admission::Denied(format!("pod {namespace}/{name}: {text}"));
    }
    let untrusted = !s.peers.trusted(peer);
    if untrusted && let Some(text) = untrusted_over(s, &view, quota, &requested, limits, peer) {
        restore(s, previous);
        s.peers.refused += 1;
        return Admission::Denied(format!("pod {namespace}/{name}: {text}"));
    }
    if previous.is_none() {
        let in_ns = s.reserved_in.get(namespace).map_or(0, |ns| ns.count);
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
    s.next_seq += 1;
    let r = Reservation {
        quota: s.names.get(quota),
        cluster: s.names.get(a.cluster),
        amounts: s.names.requests(requested),
        // A review's reservation lives one window from its first admission: asking again
        // never extends it (a review re-sent for ever would otherwise hold quota for ever).
        due: previous.as_ref().map_or(a.now + ttl, |p| p.due),
        seq: s.next_seq,
        owner: s.names.get(a.caller),
        peer: s.names.get(peer),
        pod_uid: Arc::from(a.pod_uid),
        untrusted,
    };
    s.put_reservation(key, r);
    Admission::Allowed
}

impl Ledger {
    /// An empty ledger whose reservations expire after `ttl`, with the default
    /// [`ReservationLimits`].
    pub fn new(ttl: Duration) -> Self {
        Self {
            state: Mutex::new(State::default()),
            builder: Mutex::new(Builder::default()),
            changed: Condvar::new(),
            installed: Condvar::new(),
            background: AtomicBool::new(false),
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

    /// The state with a tree installed, as readers need it. Without a rebuilder the caller
    /// rebuilds a stale tree itself (off the lock, see [`Ledger::rebuild`]) and reads the result;
    /// with one it reads the installed tree, which the rebuilder replaces moments later. Only
    /// before the first tree does a reader wait.
    fn read(&self) -> MutexGuard<'_, State> {
        let mut rebuilt = false;
        loop {
            let mut s = self.lock();
            if s.fresh()
                || (s.view.is_some()
                    && (rebuilt || s.building || self.background.load(Ordering::Relaxed)))
            {
                return s;
            }
            if s.building {
                // Before the first tree: another caller builds it.
                s = self
                    .installed
                    .wait_while(s, |s| s.building)
                    .unwrap_or_else(|p| p.into_inner());
                if s.view.is_some() {
                    return s;
                }
            }
            drop(s);
            self.rebuild();
            rebuilt = true;
        }
    }

    /// Brings the tree up to date with the quotas, if no rebuild is running: snapshots the
    /// quotas and groups under the lock (reference counts only), builds the tree and works out
    /// what moves off it, and installs under it ([`State::install`], O(what moved)). Admissions
    /// meanwhile read the previous tree: a quota change reaches them a few milliseconds later,
    /// as if its watch event had, and usage stays exact because every charge before the
    /// installation follows the previous tree and the installation moves it all.
    pub fn rebuild(&self) {
        let started = Instant::now();
        let mut builder = self.builder.lock().unwrap_or_else(|p| p.into_inner());
        let (base, generation, log) = {
            let mut s = self.lock();
            if s.building || s.fresh() {
                return;
            }
            let locked = Instant::now();
            s.building = true;
            let log = builder.take(&mut s);
            let snapshot = locked.elapsed().as_secs_f64();
            s.rebuild_locked_seconds += snapshot;
            s.rebuild_locked_max = s.rebuild_locked_max.max(snapshot);
            (s.view.clone(), s.generation, log)
        };
        // Clears `building` even if the work below panicked, so readers never wait forever.
        struct Building<'a>(&'a Ledger);
        impl Drop for Building<'_> {
            fn drop(&mut self) {
                self.0.lock().building = false;
                self.0.installed.notify_all();
            }
        }
        let building = Building(self);
        builder.apply(log);
        // In (name, namespace) order, as the tree takes them: with a name held twice, `first`
        // is the same quota on every build.
        let mut specs: Vec<Arc<QuotaSpec>> = builder.quotas.values().cloned().collect();
        specs.sort_by(|a, b| {
            (&a.info.name, &a.info.namespace).cmp(&(&b.info.name, &b.info.namespace))
        });
        let new = Arc::new(View::build(&specs));
        let plan = Plan::of(base.as_deref(), &new, &builder.groups);
        let mut s = self.lock();
        let locked = Instant::now();
        let previous = s.install(base.as_ref(), new, generation, &plan);
        s.building = false;
        s.rebuilds += 1;
        s.rebuild_seconds += started.elapsed().as_secs_f64();
        let held = locked.elapsed().as_secs_f64();
        s.rebuild_locked_seconds += held;
        s.rebuild_locked_max = s.rebuild_locked_max.max(held);
        drop(s);
        drop(building);
        // The old tree, the plan and the snapshot are freed here, off the lock.
        drop((previous, base, plan, specs));
    }

    /// Brings the rebuilder's copies up to date without building (the groups created since).
    fn drain(&self) {
        let mut builder = self.builder.lock().unwrap_or_else(|p| p.into_inner());
        let log = {
            let mut s = self.lock();
            if s.building {
                return;
            }
            builder.take(&mut s)
        };
        builder.apply(log);
    }

    /// Keeps the tree up to date from a thread of its own (the service; tests and tools rebuild
    /// on read): each quota change wakes it, it rebuilds ([`Ledger::rebuild`]) and sleeps again,
    /// so no admission waits for a rebuild beyond the installation step. The thread ends soon
    /// after the last other reference to the ledger is dropped.
    pub fn spawn_rebuilder(self: &Arc<Self>) -> std::io::Result<()> {
        self.background.store(true, Ordering::Relaxed);
        let ledger = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("quota-tree".into())
            .spawn(move || {
                while let Some(l) = ledger.upgrade() {
                    let s = l.lock();
                    if s.building {
                        // A reader builds the first tree: wait for it rather than spin.
                        drop(
                            l.installed
                                .wait_timeout(s, Duration::from_secs(1))
                                .unwrap_or_else(|p| p.into_inner()),
                        );
                        continue;
                    }
                    if s.view.is_some() && s.fresh() {
                        // Woken by a change, or after a second to take the groups created
                        // meanwhile (keeping the log short) and to notice the ledger is gone.
                        let (s, waited) = l
                            .changed
                            .wait_timeout(s, Duration::from_secs(1))
                            .unwrap_or_else(|p| p.into_inner());
                        drop(s);
                        if waited.timed_out() {
                            l.drain();
                        }
                    } else {
                        drop(s);
                        l.rebuild();
                        // A rebuild frees a whole tree; hand the pages back (at 100,000 pods
                        // the resident size stays about 10 % lower).
                        admission_kit::server::trim::release_free_memory();
                    }
                }
            })
            .map(drop)
    }

    /// Adds or replaces a quota (watch event). An unchanged quota (an event for an annotation the
    /// ledger does not read, such as the usage write-back's own) keeps the tree.
    pub fn upsert_quota(&self, spec: QuotaSpec) {
        let mut s = self.lock();
        let entry = s.quotas.entry(spec.info.name.clone()).or_default();
        if entry.iter().any(|q| **q == spec) {
            return;
        }
        entry.retain(|q| q.info.namespace != spec.info.namespace);
        let spec = Arc::new(spec);
        entry.push(spec.clone());
        s.log_quota(QuotaChange::Upsert(spec));
        s.generation += 1;
        self.changed.notify_one();
    }

    /// Removes a quota (watch event).
    pub fn delete_quota(&self, name: &str, namespace: &str) {
        let mut s = self.lock();
        s.shown.remove(&(namespace.to_owned(), name.to_owned()));
        s.shown_split
            .remove(&(namespace.to_owned(), name.to_owned()));
        if let Some(v) = s.quotas.get_mut(name) {
            v.retain(|q| q.info.namespace != namespace);
            if v.is_empty() {
                s.quotas.remove(name);
            }
        }
        s.log_quota(QuotaChange::Delete {
            name: name.to_owned(),
            namespace: namespace.to_owned(),
        });
        s.generation += 1;
        self.changed.notify_one();
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
        self.observe_pod_usage_in("", namespace, name, label, requests);
    }

    /// As [`Ledger::observe_pod_usage`], for a pod of member cluster `cluster` (a fleet).
    pub fn observe_pod_usage_in(
        &self,
        cluster: &str,
        namespace: &str,
        name: &str,
        label: &str,
        requests: Result<Amounts, String>,
    ) {
        self.observe_pod_event(cluster, namespace, name, "", label, requests);
    }

    /// As [`Ledger::observe_pod_usage_in`], for the pod of uid `uid` (the watch's): a reservation
    /// whose review carried that uid vouches for the peer that sent it (see [`peers`]).
    pub fn observe_pod_event(
        &self,
        cluster: &str,
        namespace: &str,
        name: &str,
        uid: &str,
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
        let scoped = scope(cluster, namespace);
        let mut s = self.lock();
        let (requests, uncountable) = match requests {
            Ok(r) => (s.names.requests(r), false),
            Err(e) => {
                tracing::warn!(cluster, namespace, name, error = %e, "pod's requests cannot be counted; its quotas refuse admissions while it lives");
                (Requests::default(), true)
            }
        };
        let group = GroupId {
            cluster: s.names.get(cluster),
            namespace: s.names.get(namespace),
            label: s.names.get(label),
        };
        // Most of a pod's events (scheduled, status written) repeat what it is charged: with no
        // reservation waiting for it, taking its charge off and adding it back changes nothing.
        let unchanged = s.pods.get(&*pod_key(&scoped, name)).is_some_and(|e| {
            *e.group == group && e.requests == requests && e.uncountable == uncountable
        });
        if unchanged && s.reservations_of(&scoped, name).is_empty() {
            return;
        }
        let key = (scoped.to_string(), name.to_owned());
        s.uncharge_key(&key, uid, Instant::now(), self.ttl);
        let group = Arc::new(group);
        // One allocation per group, not per pod: pods share their group's key. Looked up after
        // the uncharge: a group it emptied is gone, and one made now is new to the rebuilder.
        let group = match s.groups.get_key_value(&group) {
            Some((k, _)) => k.clone(),
            None => group,
        };
        let entry = PodEntry {
            group,
            requests,
            uncountable,
        };
        s.insert_pod(&scoped, name, entry);
    }

    /// A pod is gone (watch event).
    pub fn delete_pod(&self, namespace: &str, name: &str) {
        self.delete_pod_in("", namespace, name);
    }

    /// A pod of member cluster `cluster` is gone (a fleet's watch event).
    pub fn delete_pod_in(&self, cluster: &str, namespace: &str, name: &str) {
        let mut s = self.lock();
        let key = (scope(cluster, namespace).into_owned(), name.to_owned());
        s.uncharge_key(&key, "", Instant::now(), self.ttl);
    }

    /// The namespaces that exist, from a full list (the Namespace watch's): from then on a pod
    /// of any other namespace reserves nothing.
    pub fn set_namespaces<'a>(&self, names: impl IntoIterator<Item = &'a str>) {
        self.set_namespaces_in("", names);
    }

    /// As [`Ledger::set_namespaces`], for member cluster `cluster`: its namespaces replace its
    /// earlier list, other members' stay.
    pub fn set_namespaces_in<'a>(&self, cluster: &str, names: impl IntoIterator<Item = &'a str>) {
        let mut s = self.lock();
        let set = s.namespaces.get_or_insert_default();
        if cluster.is_empty() {
            set.clear();
        } else {
            let prefix = format!("{cluster}/");
            set.retain(|n| !n.starts_with(&prefix));
        }
        set.extend(names.into_iter().map(|n| scope(cluster, n).into()));
    }

    /// A namespace appeared (`true`) or is gone (`false`), once [`Ledger::set_namespaces`] ran.
    pub fn observe_namespace(&self, name: &str, exists: bool) {
        self.observe_namespace_in("", name, exists);
    }

    /// As [`Ledger::observe_namespace`], in member cluster `cluster`.
    pub fn observe_namespace_in(&self, cluster: &str, name: &str, exists: bool) {
        if let Some(n) = self.lock().namespaces.as_mut() {
            let scoped = scope(cluster, name);
            if exists {
                n.insert(scoped.into());
            } else {
                n.remove(&*scoped);
            }
        }
    }

    /// Drops the reservation that review `review` made for a pod it could not create, if
    /// `caller` made it. Whether one was dropped. Another review's reservation for the same pod
    /// name is left alone.
    pub fn release(&self, namespace: &str, name: &str, review: &str, caller: &str) -> bool {
        self.release_in("", namespace, name, review, caller)
    }

    /// As [`Ledger::release`], for a pod of member cluster `cluster` (the caller's own: no
    /// member reaches another's reservations).
    pub fn release_in(
        &self,
        cluster: &str,
        namespace: &str,
        name: &str,
        review: &str,
        caller: &str,
    ) -> bool {
        let mut s = self.lock();
        let key = (
            scope(cluster, namespace).into_owned(),
            name.to_owned(),
            review.to_owned(),
        );
        if s.reservations
            .get(&key)
            .is_some_and(|r| &*r.owner == caller)
        {
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
        let mut s = self.read();
        admit_locked(
            &mut s,
            self.ttl,
            self.limits,
            &Admit {
                cluster: "",
                namespace,
                name,
                quota,
                requests,
                dry_run,
                caller: "",
                review: "",
                peer: "",
                pod_uid: "",
                now,
            },
        )
    }

    /// QN, PV-3.2 and PV-4 for one pod under one lock: resolve its quota from its label and
    /// namespace, refuse a parent quota (when asked), then check and reserve its requests (when
    /// asked; on UPDATE only when the quota changed).
    pub fn check_pod(&self, c: &PodCheck<'_>, now: Instant) -> PodOutcome {
        let mut s = self.read();
        s.expire(now);
        if c.check_admission
            && let Some(e) = negative(c.requests)
        {
            // Whatever the quota: no honest caller sends one (the API server refuses them).
            return PodOutcome::Denied {
                rule: "PV-4",
                message: format!("pod {}/{}: {e}", scope(c.cluster, c.namespace), c.name),
            };
        }
        let view = s.view.clone().unwrap_or_default();
        let t = &view.topology;
        let quota = tree::quota_name(&**t, Some(c.label), c.namespace, c.disable_default_quota);
        if c.check_parent
            && let Err(message) = tree::pv_3_2_not_on_parent(&**t, &quota, c.name)
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
            .map(|l| tree::quota_name(&**t, Some(l), c.namespace, c.disable_default_quota));
        let Some(checked) = tree::admission_quota(quota.clone(), old.as_deref()) else {
            return PodOutcome::Allowed { quota };
        };
        let a = Admit {
            cluster: c.cluster,
            namespace: c.namespace,
            name: c.name,
            quota: &checked,
            requests: c.requests,
            dry_run: c.dry_run,
            caller: c.caller,
            review: c.review,
            peer: c.peer,
            pod_uid: c.pod_uid,
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

    /// WQ (`docs/workload-quota.md`): the quota a workload's pods would be charged to (QN from
    /// `label` and `namespace`), and how `peak` — all its pods at once — fits that quota and each
    /// ancestor against their subtree usage now (admitted pods and outstanding reservations).
    /// Reads only: nothing is reserved (the pods reserve their own share as they are created).
    pub fn check_workload(&self, w: &WorkloadCheck<'_>, now: Instant) -> WorkloadOutcome {
        let mut s = self.read();
        s.expire(now);
        let view = s.view.clone().unwrap_or_default();
        let quotas = LedgerQuotas {
            view: &view,
            state: &s,
        };
        quota_protocol::workload::decide(&*view.topology, &quotas, w)
    }

    /// The quotas named `names` that exist, what QN needs to know of `namespace`, and the quota
    /// that binds it (so that one answer resolves a pod's quota).
    pub fn lookup(&self, names: &[String], namespace: &str) -> Lookup {
        let view = self.read().view.clone().unwrap_or_default();
        let t = &view.topology;
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
        let s = self.read();
        let view = s.view.clone().unwrap_or_default();
        let pods = Pods {
            pods: &s.pods,
            groups: &s.groups,
        };
        tree::validate(operation, object, old, &view.topology, &pods, gates)
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
            s.pods
                .iter()
                .filter(|(_, e)| e.group.cluster.is_empty())
                .map(|(key, e)| (e.group.namespace.to_string(), name_of_key(key).to_owned()))
                .collect(),
        )
    }

    /// Every observed pod of member cluster `cluster` (namespace, name): what its relist
    /// compares against.
    pub fn pods_in(&self, cluster: &str) -> Vec<PodKey> {
        let s = self.lock();
        s.pods
            .iter()
            .filter(|(_, e)| &*e.group.cluster == cluster)
            .map(|(key, e)| (e.group.namespace.to_string(), name_of_key(key).to_owned()))
            .collect()
    }

    /// Member cluster `cluster`'s Pod watch broke (`healthy` false) or has listed again
    /// (`true`, after its relist's deletions were applied). While broken its pods keep counting
    /// as last seen and its reservations do not expire: its pods may be created or deleted
    /// unseen, and forgetting a created one would over-admit. Once listed again its held
    /// reservations get a new window.
    pub fn member_watch(&self, cluster: &str, healthy: bool) {
        let mut s = self.lock();
        if healthy {
            if s.stalled.remove(cluster) {
                s.resume(cluster, Instant::now(), self.ttl);
            }
        } else {
            let c = s.names.get(cluster);
            s.stalled.insert(c);
        }
    }

    /// Forgets member cluster `cluster`: its pods, reservations and namespaces (the member was
    /// removed from the fleet, and its grace period is over).
    pub fn drop_member(&self, cluster: &str) {
        let mut s = self.lock();
        let now = Instant::now();
        let pods: Vec<PodKey> = s
            .pods
            .iter()
            .filter(|(_, e)| &*e.group.cluster == cluster)
            .map(|(key, e)| {
                (
                    scope(cluster, &e.group.namespace).into_owned(),
                    name_of_key(key).to_owned(),
                )
            })
            .collect();
        for key in pods {
            s.uncharge_key(&key, "", now, self.ttl);
        }
        let reservations: Vec<Arc<ResKey>> = s
            .reservations
            .iter()
            .filter(|(_, r)| &*r.cluster == cluster)
            .map(|(k, _)| k.clone())
            .collect();
        for key in reservations {
            s.take_reservation(&key);
        }
        let prefix = format!("{cluster}/");
        if let Some(n) = s.namespaces.as_mut() {
            n.retain(|n| !n.starts_with(&prefix));
        }
        s.stalled.remove(cluster);
        s.split.remove(cluster);
    }

    /// Each member cluster's share of quota `quota`'s subtree usage (pods and reservations), by
    /// cluster name; empty in one cluster.
    pub fn used_by_member(&self, quota: &str) -> BTreeMap<String, Amounts> {
        let s = self.read();
        s.split
            .iter()
            .filter_map(|(c, by)| {
                let u: Amounts = by
                    .get(quota)?
                    .iter()
                    .filter(|(_, a)| a.nano != 0)
                    .map(|(k, a)| (k.clone(), *a))
                    .collect();
                (!u.is_empty()).then(|| (c.to_string(), u))
            })
            .collect()
    }

    /// What a quota's subtree uses now (tests, debugging).
    pub fn used(&self, quota: &str) -> Amounts {
        self.read().subtree.get(quota).cloned().unwrap_or_default()
    }

    /// How many live pods in a quota's subtree cannot be counted (tests, debugging).
    pub fn uncountable(&self, quota: &str) -> u32 {
        self.read().uncountable.get(quota).copied().unwrap_or(0)
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

    /// As [`Ledger::observe_shown`], for the [`BY_MEMBER`] annotation (fleets).
    pub fn observe_shown_split(&self, namespace: &str, name: &str, value: &str) {
        let key = (namespace.to_owned(), name.to_owned());
        let mut s = self.lock();
        if value.is_empty() {
            s.shown_split.remove(&key);
        } else {
            s.shown_split.insert(key, value.to_owned());
        }
    }

    /// Up to `max` quotas whose `child-request` annotation differs from their subtree's usage
    /// by the pods the watch has shown (outstanding reservations left out: a reservation no pod
    /// backs yet may come from a forged review, and the annotation is what upstream's own PV-4
    /// reads as usage), in
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
        // Copied under the lock, compared and formatted off it.
        let (view, mut subtree, uncountable, shown, mut split, held, shown_split) = {
            let mut s = self.read();
            s.expire(now);
            let mut subtree = s.subtree.clone();
            for (q, held) in &s.unbacked {
                if let Some(u) = subtree.get_mut(q) {
                    add(u, amounts_iter(held), -1);
                }
            }
            // Each member's reservations, to leave out of its share as above.
            let held: Vec<(Arc<str>, Arc<str>, Requests)> = if s.split.is_empty() {
                Vec::new()
            } else {
                s.reservations
                    .values()
                    .map(|r| (r.cluster.clone(), r.quota.clone(), r.amounts.clone()))
                    .collect()
            };
            (
                s.view.clone().unwrap_or_default(),
                subtree,
                s.uncountable.clone(),
                s.shown.clone(),
                s.split.clone(),
                held,
                s.shown_split.clone(),
            )
        };
        for (cluster, quota, amounts) in &held {
            if let Some(by_quota) = split.get_mut(cluster) {
                add_along(by_quota, &view.chain(quota), requests_iter(amounts), -1);
            }
        }
        let fleet = !split.is_empty() || !shown_split.is_empty();
        let mut members: Vec<(&Arc<str>, &HashMap<String, Amounts>)> = split.iter().collect();
        members.sort_by(|a, b| a.0.cmp(b.0));
        subtree.retain(|_, u| !u.values().all(Amount::is_zero));
        let mut due: Vec<UsageWrite> = view
            .specs
            .iter()
            .filter(|(name, specs)| {
                specs.len() == 1
                    && !UNCHECKED.contains(&name.as_str())
                    && !uncountable.contains_key(*name)
            })
            .filter_map(|(name, specs)| {
                let namespace = &specs.first()?.info.namespace;
                let used: Amounts = subtree
                    .get(name)
                    .into_iter()
                    .flatten()
                    .filter(|(_, a)| a.nano != 0)
                    .map(|(k, a)| (k.clone(), *a))
                    .collect();
                let value = admission_kit::compat::resources::amounts_json(&used);
                let key = (namespace.clone(), name.clone());
                let shown = shown.get(&key).map_or("{}", String::as_str);
                let by_member = if fleet {
                    by_member_json(&members, name)
                } else {
                    String::new()
                };
                let shown_split = shown_split
                    .get(&key)
                    .map_or(if fleet { "{}" } else { "" }, String::as_str);
                (shown != value || shown_split != by_member).then(|| UsageWrite {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    value,
                    by_member,
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

    /// This cluster's trusted peers (not a fleet member's), the most recently backed first,
    /// each with how long ago a reservation of theirs was last backed: what
    /// [`crate::remembered`] writes down for the next leader.
    pub fn trusted_here(&self) -> Vec<(String, Duration)> {
        let now = Instant::now();
        let s = self.lock();
        let mut v: Vec<(String, Duration)> = s
            .peers
            .trusted_since()
            .filter(|(p, _)| !p.is_empty() && !p.contains('/'))
            .map(|(p, t)| (p.to_string(), now.saturating_duration_since(t)))
            .collect();
        v.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        v
    }

    /// Trusts `peers` of this cluster as if a reservation of each had been backed that long
    /// ago: remembered from the leader before a restart or a fail-over ([`crate::remembered`]).
    /// How many were not trusted yet.
    pub fn remember_trusted(&self, peers: &[(String, Duration)]) -> usize {
        let now = Instant::now();
        let mut s = self.lock();
        let mut added = 0;
        for (peer, ago) in peers {
            if peer.is_empty() || peer.contains('/') || s.peers.trusted(peer) {
                continue;
            }
            s.trust(
                &Arc::from(peer.as_str()),
                now.checked_sub(*ago).unwrap_or(now),
            );
            added += 1;
        }
        added
    }

    /// Whether reviews from `peer` of member cluster `cluster` are trusted ([`peers`]).
    pub fn peer_trusted(&self, cluster: &str, peer: &str) -> bool {
        peer.is_empty() || self.lock().peers.trusted(&scope(cluster, peer))
    }

    /// Whether reviews from `peer` of member cluster `cluster` are still judged as a
    /// stranger's while it made a reservation within the last `recent`: that pod may be
    /// created and not yet seen, and the watch may vouch for the peer at any moment
    /// ([`peers`]). A forger's reservations, never backed, soon stop counting.
    pub fn awaiting_vouch(&self, cluster: &str, peer: &str, recent: Duration) -> bool {
        if peer.is_empty() {
            return false;
        }
        let scoped = scope(cluster, peer);
        let s = self.lock();
        !s.peers.trusted(&scoped)
            && s.peers
                .latest(&scoped)
                .is_some_and(|t| t.elapsed() <= recent)
    }

    /// Outstanding reservations (metrics, tests).
    pub fn reservations(&self) -> usize {
        self.lock().reservations.len()
    }

    /// What the metrics show: counts, and each quota's subtree usage against its limit.
    pub fn stats(&self) -> Stats {
        // Copied under the lock, listed off it.
        let (view, subtree, stats) = {
            let s = self.read();
            (
                s.view.clone().unwrap_or_default(),
                s.subtree.clone(),
                Stats {
                    quotas: s.quotas.len(),
                    pods: s.pods.len(),
                    reservations: s.reservations.len(),
                    expired: s.expired,
                    rebuilds: s.rebuilds,
                    rebuild_seconds: s.rebuild_seconds,
                    rebuild_locked_seconds: s.rebuild_locked_seconds,
                    rebuild_locked_max: s.rebuild_locked_max,
                    usage: Vec::new(),
                    backed: s.backed.clone(),
                    trusted_peers: s.peers.trusted_count(),
                    untrusted_reservations: s.peers.untrusted.len(),
                    preempted: s.peers.preempted,
                    untrusted_refused: s.peers.refused,
                },
            )
        };
        let mut usage = Vec::new();
        for (name, specs) in &view.specs {
            let Some(spec) = specs.first() else { continue };
            let used = subtree.get(name);
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
        Stats { usage, ..stats }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use admission_kit::compat::go::QuantityFormat;
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
        assert!(
            l.usage_writes(now, None, 10).is_empty(),
            "a reservation no pod backs yet is never written as usage"
        );
        l.observe_pod("ns", "a", "c", cpu(3));
        let due = l.usage_writes(now, None, 10);
        assert_eq!(
            keys(&due),
            [("c", r#"{"cpu":"3"}"#), ("p", r#"{"cpu":"3"}"#)],
            "the pod counts, up the chain"
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
        // Another pod is admitted and never appears: nothing changes; once the first is gone,
        // the usage shown goes back to none.
        assert_eq!(
            l.admit("ns", "b", "c", &cpu(1), false, now),
            Admission::Allowed
        );
        assert!(l.usage_writes(now, None, 10).is_empty());
        l.delete_pod("ns", "a");
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

    /// WQ-2 against an ancestor, WQ-3 against usage and reservations, and nothing reserved.
    #[test]
    fn wq_workload_checks_read_the_chain_and_reserve_nothing() {
        use quota_protocol::workload::Fit;
        let l = Ledger::new(Duration::from_secs(30));
        let mut org = quota("org", None, 8);
        org.info.is_parent = true;
        l.upsert_quota(org);
        l.upsert_quota(quota("team", Some("org"), 16));
        let now = Instant::now();
        let ask = |peak: i64| {
            l.check_workload(
                &WorkloadCheck {
                    namespace: "ns",
                    label: "team",
                    pod: "job",
                    peak: &cpu(peak),
                    total: &cpu(peak),
                    disable_default_quota: false,
                    check_parent: true,
                },
                now,
            )
        };
        assert_eq!(
            ask(10),
            WorkloadOutcome::Checked {
                quota: "team".into(),
                fit: Fit::Never {
                    quota: "org".into(),
                    allowed: cpu(8)
                }
            }
        );
        l.observe_pod("ns", "running", "team", cpu(3));
        assert_eq!(
            l.admit("ns", "pending", "team", &cpu(2), false, now),
            Admission::Allowed
        );
        assert_eq!(
            ask(4),
            WorkloadOutcome::Checked {
                quota: "team".into(),
                fit: Fit::NotNow {
                    quota: "org".into(),
                    free: cpu(3)
                }
            }
        );
        assert_eq!(
            ask(3),
            WorkloadOutcome::Checked {
                quota: "team".into(),
                fit: Fit::Fits
            }
        );
        assert_eq!(l.reservations(), 1, "a workload check reserves nothing");
        let parent = l.check_workload(
            &WorkloadCheck {
                label: "org",
                ..WorkloadCheck {
                    namespace: "ns",
                    label: "",
                    pod: "job",
                    peak: &cpu(1),
                    total: &cpu(1),
                    disable_default_quota: false,
                    check_parent: true,
                }
            },
            now,
        );
        assert!(
            matches!(parent, WorkloadOutcome::Refused { rule: "PV-3", .. }),
            "{parent:?}"
        );
        let missing = l.check_workload(
            &WorkloadCheck {
                namespace: "ns",
                label: "nope",
                pod: "job",
                peak: &cpu(1),
                total: &cpu(1),
                disable_default_quota: false,
                check_parent: true,
            },
            now,
        );
        assert_eq!(
            missing,
            WorkloadOutcome::Refused {
                quota: "nope".into(),
                rule: "PV-4",
                message: "elastic quota nope not found".into()
            }
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
            cluster: "",
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
            review: "",
            peer: "",
            pod_uid: "",
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
                    cluster: "",
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

    /// Sub-milli requests are counted exactly (upstream's `Quantity.Add`): four pods of
    /// `500u` fill a `2m` quota, the fifth is refused with the exact amounts.
    #[test]
    fn sub_milli_requests_count_exactly() {
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

    /// Every outstanding reservation has exactly one deadline: a replaced, refused-and-restored
    /// or released one leaves none behind, and the one kept still expires on time.
    #[test]
    fn each_reservation_has_one_deadline() {
        let l = Ledger::new(Duration::from_secs(5));
        l.upsert_quota(quota("q", None, 2));
        let t0 = Instant::now();
        let counts = |l: &Ledger| {
            let s = l.lock();
            (s.reservations.len(), s.deadlines.len())
        };
        assert_eq!(
            l.admit("ns", "a", "q", &cpu(1), false, t0),
            Admission::Allowed
        );
        // The same review asking again replaces it, keeping its deadline.
        let t1 = t0 + Duration::from_secs(2);
        assert_eq!(
            l.admit("ns", "a", "q", &cpu(1), false, t1),
            Admission::Allowed
        );
        assert_eq!(counts(&l), (1, 1));
        // Refused: the earlier reservation is put back, deadline and all.
        assert!(matches!(
            l.admit("ns", "a", "q", &cpu(3), false, t1),
            Admission::Denied(_)
        ));
        assert_eq!(counts(&l), (1, 1));
        assert_eq!(
            l.admit("ns", "b", "q", &cpu(1), false, t1),
            Admission::Allowed
        );
        assert!(l.release("ns", "b", "", ""));
        assert_eq!(counts(&l), (1, 1));
        // a's deadline is still t0 + 5 s: asking again never extends a reservation.
        l.lock().expire(t0 + Duration::from_secs(4));
        assert_eq!(counts(&l), (1, 1));
        l.lock().expire(t0 + Duration::from_secs(5));
        assert_eq!(counts(&l), (0, 0));
        assert_eq!(l.stats().expired, 1);
    }

    /// One pod's PV-4 question from review `review` of the caller `webhook`.
    fn asked<'a>(
        namespace: &'a str,
        name: &'a str,
        label: &'a str,
        requests: &'a Amounts,
        review: &'a str,
    ) -> PodCheck<'a> {
        PodCheck {
            cluster: "",
            namespace,
            name,
            label,
            old_label: None,
            requests,
            dry_run: false,
            disable_default_quota: false,
            check_parent: false,
            check_admission: true,
            caller: "webhook",
            review,
            peer: "",
            pod_uid: "",
        }
    }

    fn allowed(o: PodOutcome) -> bool {
        matches!(o, PodOutcome::Allowed { .. })
    }

    fn denial(o: PodOutcome) -> String {
        match o {
            PodOutcome::Denied { message, .. } => message,
            other => panic!("admitted: {other:?}"),
        }
    }

    /// `asked` from member cluster `cluster`'s webhook.
    fn asked_in<'a>(
        cluster: &'a str,
        namespace: &'a str,
        name: &'a str,
        requests: &'a Amounts,
        review: &'a str,
    ) -> PodCheck<'a> {
        PodCheck {
            cluster,
            caller: cluster,
            ..asked(namespace, name, "q", requests, review)
        }
    }

    #[test]
    fn a_fleet_counts_every_member_and_names_the_split() {
        let l = Ledger::new(Duration::from_secs(30));
        l.upsert_quota(quota("q", None, 10));
        let now = Instant::now();
        let one = cpu(1);
        // The same namespace and pod name in two members are two pods.
        for i in 0..6 {
            l.observe_pod_usage_in("east", "ns", &format!("p{i}"), "q", Ok(one.clone()));
        }
        for i in 0..3 {
            l.observe_pod_usage_in("west", "ns", &format!("p{i}"), "q", Ok(one.clone()));
        }
        assert!(allowed(
            l.check_pod(&asked_in("west", "ns", "p3", &one, "r1"), now)
        ));
        assert_eq!(l.used("q")["cpu"].milli(), 10_000);
        for c in ["east", "west"] {
            assert_eq!(
                denial(l.check_pod(&asked_in(c, "ns", "p9", &one, "r2"), now)),
                "exceeded quota: ns/q, requested: cpu=1, used: cpu=10 (east 6, west 4), limited: cpu=10"
            );
        }
        let by = l.used_by_member("q");
        assert_eq!(by["east"]["cpu"].milli(), 6000);
        assert_eq!(
            by["west"]["cpu"].milli(),
            4000,
            "the reservation counts for west"
        );
        // West's pod event backs its reservation; a deletion in west frees room for east.
        l.observe_pod_usage_in("west", "ns", "p3", "q", Ok(one.clone()));
        assert_eq!(l.used("q")["cpu"].milli(), 10_000);
        l.delete_pod_in("west", "ns", "p0");
        assert!(allowed(
            l.check_pod(&asked_in("east", "ns", "p6", &one, "r3"), now)
        ));
        // East cannot release west's reservation: its release addresses its own pods.
        l.delete_pod_in("east", "ns", "p0");
        assert!(allowed(
            l.check_pod(&asked_in("west", "ns", "p7", &one, "r4"), now)
        ));
        assert!(!l.release_in("east", "ns", "p7", "r4", "east"));
        assert!(
            !l.release_in("west", "ns", "p7", "r4", "east"),
            "not its caller"
        );
        assert_eq!(l.reservations(), 2);
        assert!(l.release_in("west", "ns", "p7", "r4", "west"));
        // Several resources: each member's list.
        let mut text = String::new();
        split_text(&l.lock().split, "q", &cpu(9)).clone_into(&mut text);
        assert_eq!(text, " (east 6, west 3)");
        let two = Amounts::from([
            ("cpu".to_owned(), cpu(9)["cpu"]),
            ("memory".to_owned(), cpu(1)["cpu"]),
        ]);
        assert_eq!(
            split_text(&l.lock().split, "q", &two),
            " (east: cpu=6; west: cpu=3)"
        );
        assert_eq!(split_text(&HashMap::new(), "q", &two), "");
        // The write-back shows the pods' usage and each member's share, reservations left out.
        assert!(allowed(
            l.check_pod(&asked_in("east", "ns", "p8", &one, "r5"), now)
        ));
        let w = l.usage_writes(now, None, 10);
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].value, r#"{"cpu":"8"}"#);
        assert_eq!(w[0].by_member, r#"{"east":{"cpu":"5"},"west":{"cpu":"3"}}"#);
        l.observe_shown("ns", "q", &w[0].value);
        l.observe_shown_split("ns", "q", &w[0].by_member);
        assert!(l.usage_writes(now, None, 10).is_empty());
        l.delete_pod_in("west", "ns", "p1");
        l.observe_pod_usage_in("east", "ns", "p9", "q", Ok(one.clone()));
        let w = l.usage_writes(now, None, 10);
        assert_eq!(
            (w[0].value.as_str(), w[0].by_member.as_str()),
            (
                r#"{"cpu":"8"}"#,
                r#"{"east":{"cpu":"6"},"west":{"cpu":"2"}}"#
            ),
            "the same total, another split: written"
        );
    }

    #[test]
    fn a_quota_naming_its_members_refuses_pods_of_the_others() {
        let l = Ledger::new(Duration::from_secs(30));
        let mut parent = quota("p", None, 10);
        parent.members = quota_protocol::spec::spans_of(" east , ,east");
        assert_eq!(parent.members.as_deref(), Some(&["east".to_owned()][..]));
        assert_eq!(quota_protocol::spec::spans_of(" , "), None);
        l.upsert_quota(parent);
        l.upsert_quota(quota("q", Some("p"), 10));
        let one = cpu(1);
        let now = Instant::now();
        assert!(allowed(
            l.check_pod(&asked_in("east", "ns", "a", &one, "r1"), now)
        ));
        assert_eq!(
            denial(l.check_pod(&asked_in("west", "ns", "b", &one, "r2"), now)),
            "quota ns/p spans member clusters east only: pod west/ns/b cannot be charged to it"
        );
        // One cluster: no members to tell apart.
        assert!(allowed(
            l.check_pod(&asked("ns", "c", "q", &one, "r3"), now)
        ));
    }

    #[test]
    fn a_stalled_member_keeps_its_reservations_until_it_lists_again() {
        let ttl = Duration::from_secs(30);
        let l = Ledger::new(ttl);
        l.upsert_quota(quota("q", None, 10));
        let now = Instant::now();
        let four = cpu(4);
        assert!(allowed(
            l.check_pod(&asked_in("west", "ns", "a", &four, "r1"), now)
        ));
        assert!(allowed(
            l.check_pod(&asked_in("east", "ns", "b", &four, "r2"), now)
        ));
        l.member_watch("west", false);
        // Past the window: east's reservation expires, west's is held (its pod may exist).
        let later = now + ttl + Duration::from_secs(1);
        assert_eq!(
            denial(l.check_pod(&asked_in("east", "ns", "c", &cpu(7), "r3"), later)),
            "exceeded quota: ns/q, requested: cpu=7, used: cpu=4 (west 4), limited: cpu=10"
        );
        assert_eq!(l.reservations(), 1);
        // Its relist shows the pod: the reservation becomes usage.
        l.observe_pod_usage_in("west", "ns", "a", "q", Ok(four.clone()));
        l.member_watch("west", true);
        assert_eq!(l.reservations(), 0);
        assert_eq!(l.used("q")["cpu"].milli(), 4000);
        // A held reservation whose pod the relist does not show gets a new window.
        assert!(allowed(
            l.check_pod(&asked_in("west", "ns", "d", &four, "r4"), later)
        ));
        l.member_watch("west", false);
        let much_later = later + ttl + Duration::from_secs(1);
        assert!(!allowed(l.check_pod(
            &asked_in("east", "ns", "e", &cpu(3), "r5"),
            much_later
        )));
        l.member_watch("west", true);
        assert_eq!(l.reservations(), 1);
        let after = Instant::now() + ttl + Duration::from_secs(1);
        assert!(allowed(
            l.check_pod(&asked_in("east", "ns", "e", &cpu(3), "r5"), after)
        ));
        assert_eq!(l.used("q")["cpu"].milli(), 7000);
    }

    #[test]
    fn a_removed_member_leaves_nothing_behind() {
        let l = Ledger::new(Duration::from_secs(30));
        l.upsert_quota(quota("q", None, 10));
        l.set_namespaces_in("east", ["ns"]);
        l.set_namespaces_in("west", ["ns"]);
        l.observe_pod_usage_in("east", "ns", "a", "q", Ok(cpu(2)));
        l.observe_pod_usage_in("west", "ns", "a", "q", Ok(cpu(3)));
        assert!(allowed(l.check_pod(
            &asked_in("west", "ns", "b", &cpu(1), "r1"),
            Instant::now()
        )));
        assert_eq!(l.pods_in("west"), [("ns".to_owned(), "a".to_owned())]);
        l.drop_member("west");
        assert_eq!(l.used("q")["cpu"].milli(), 2000);
        assert_eq!(l.reservations(), 0);
        assert!(l.pods_in("west").is_empty());
        assert_eq!(
            l.known().1,
            Vec::<PodKey>::new(),
            "fleet pods are not the one cluster's"
        );
        assert!(l.used_by_member("q").contains_key("east"));
        assert!(!l.used_by_member("q").contains_key("west"));
        // West's namespaces are gone with it: a pod there reserves nothing now.
        assert!(allowed(l.check_pod(
            &asked_in("west", "ns", "c", &cpu(1), "r2"),
            Instant::now()
        )));
        assert_eq!(l.reservations(), 0);
        // East's stay.
        assert!(allowed(l.check_pod(
            &asked_in("east", "ns", "c", &cpu(1), "r3"),
            Instant::now()
        )));
        assert_eq!(l.reservations(), 1);
    }

    #[test]
    fn a_review_replaces_or_releases_only_its_own_reservation() {
        let l = Ledger::new(Duration::from_secs(30));
        l.upsert_quota(quota("q", None, 10));
        let now = Instant::now();
        let (five, one) = (cpu(5), cpu(1));
        assert!(allowed(
            l.check_pod(&asked("ns", "p", "q", &five, "real"), now)
        ));
        // A forged review names the pending pod with a tiny request: it gets a reservation of
        // its own, and the real one stays.
        assert!(allowed(
            l.check_pod(&asked("ns", "p", "q", &one, "forged"), now)
        ));
        assert_eq!(l.used("q")["cpu"].milli(), 6000);
        // A later rule refuses the forged review: its release drops its own reservation only.
        assert!(l.release("ns", "p", "forged", "webhook"));
        assert!(!l.release("ns", "p", "forged", "webhook"));
        assert_eq!(l.used("q")["cpu"].milli(), 5000);
        assert!(
            !l.release("ns", "p", "real", "someone-else"),
            "not the owner"
        );
        assert_eq!(l.used("q")["cpu"].milli(), 5000);
        // The pod appears: its own requests count, and every reservation of its name ends.
        assert!(allowed(
            l.check_pod(&asked("ns", "p", "q", &one, "forged-2"), now)
        ));
        l.observe_pod("ns", "p", "q", cpu(5));
        assert_eq!((l.used("q")["cpu"].milli(), l.reservations()), (5000, 0));
        assert_eq!(l.stats().backed.count, 1);
    }

    #[test]
    fn outstanding_reservations_hold_at_most_their_share() {
        let limits = ReservationLimits {
            quota_share_permille: 500,
            namespace_share_permille: 1000,
            ..ReservationLimits::default()
        };
        let l = Ledger::new(Duration::from_secs(30)).with_limits(limits);
        l.upsert_quota(quota("parent", None, 20));
        l.upsert_quota(quota("q", Some("parent"), 10));
        let now = Instant::now();
        let (three, two, one) = (cpu(3), cpu(2), cpu(1));
        assert!(allowed(
            l.check_pod(&asked("ns", "a", "q", &three, "1"), now)
        ));
        assert!(allowed(l.check_pod(&asked("ns", "b", "q", &two, "2"), now)));
        let text = denial(l.check_pod(&asked("ns", "c", "q", &one, "3"), now));
        assert_eq!(
            text,
            "pod ns/c: quota ns/q: cpu=5 is held already by pods admitted but not yet created, \
             and cpu=1 more would pass 500‰ of its limit cpu=10; retry in a few seconds"
        );
        // Once a pod is seen, its share is free again.
        l.observe_pod("ns", "a", "q", cpu(3));
        assert!(allowed(l.check_pod(&asked("ns", "c", "q", &one, "3"), now)));
        // The ancestors' shares count too: 3 of parent's 10 are outstanding.
        l.upsert_quota(quota("q2", Some("parent"), 20));
        let eight = cpu(8);
        let text = denial(l.check_pod(&asked("ns", "d", "q2", &eight, "4"), now));
        assert!(
            text.contains("quota ns/parent: cpu=3 is held already"),
            "{text}"
        );
    }

    /// `asked` from webhook peer `peer`, for the pod of uid `uid`.
    fn asked_from<'a>(
        peer: &'a str,
        uid: &'a str,
        name: &'a str,
        requests: &'a Amounts,
        review: &'a str,
    ) -> PodCheck<'a> {
        PodCheck {
            peer,
            pod_uid: uid,
            ..asked("ns", name, "q", requests, review)
        }
    }

    #[test]
    fn an_untrusted_peer_holds_a_tenth_and_gives_way_to_a_trusted_one() {
        let l = Ledger::new(Duration::from_secs(30));
        l.upsert_quota(quota("q", None, 20));
        let now = Instant::now();
        let (ten, one) = (cpu(10), cpu(1));
        // Alone, one forged pod of the whole quota passes (nothing else is outstanding) ...
        assert!(allowed(l.check_pod(
            &asked_from("10.0.0.9", "", "ghost-0", &ten, "f0"),
            now
        )));
        // ... and the next one finds the untrusted share taken.
        let text = denial(l.check_pod(&asked_from("10.0.0.9", "", "ghost-1", &one, "f1"), now));
        assert_eq!(
            text,
            "pod ns/ghost-1: quota ns/q: from addresses that no created pod has vouched for \
             (10.0.0.9), cpu=10 is held already by pods admitted but not yet created, and cpu=1 \
             more would pass 100‰ of its limit cpu=20; retry in a few seconds"
        );
        // A pod from a trusted caller (none named) is not refused for it: the forged
        // reservation gives way.
        let eleven = cpu(11);
        assert!(allowed(
            l.check_pod(&asked("ns", "real", "q", &eleven, "r1"), now)
        ));
        let st = l.stats();
        assert_eq!((st.preempted, st.untrusted_reservations), (1, 0));
        assert_eq!(st.untrusted_refused, 1);
    }

    #[test]
    fn the_pod_a_review_named_vouches_for_its_peer() {
        let l = Ledger::new(Duration::from_secs(30));
        l.upsert_quota(quota("q", None, 10));
        let now = Instant::now();
        let one = cpu(1);
        // The API server's first review, from an address nobody vouched for yet, then its pod.
        assert!(allowed(l.check_pod(
            &asked_from("10.0.0.1", "uid-a", "a", &one, "r1"),
            now
        )));
        assert_eq!(l.stats().untrusted_reservations, 1);
        // A pod event with another uid (a pod of the same name created otherwise) vouches for
        // nobody.
        l.observe_pod_event("", "ns", "a", "uid-other", "q", Ok(one.clone()));
        assert_eq!(l.stats().trusted_peers, 0);
        l.delete_pod("ns", "a");
        assert!(allowed(l.check_pod(
            &asked_from("10.0.0.1", "uid-b", "b", &one, "r2"),
            now
        )));
        l.observe_pod_event("", "ns", "b", "uid-b", "q", Ok(one.clone()));
        let st = l.stats();
        assert_eq!((st.trusted_peers, st.untrusted_reservations), (1, 0));
        // From now on its pods take what a forger holds.
        let nine = cpu(9);
        assert!(allowed(l.check_pod(
            &asked_from("10.0.0.9", "", "ghost", &nine, "f1"),
            now
        )));
        let eight = cpu(8);
        assert!(allowed(l.check_pod(
            &asked_from("10.0.0.1", "uid-c", "c", &eight, "r3"),
            now
        )));
        assert_eq!(l.stats().preempted, 1);
        // A pending trusted pod is never dropped for anyone.
        let two = cpu(2);
        let text = denial(l.check_pod(&asked_from("10.0.0.1", "uid-d", "d", &two, "r4"), now));
        assert!(text.starts_with("exceeded quota: ns/q"), "{text}");
    }

    #[test]
    fn two_peers_claiming_one_pod_earn_no_trust() {
        let l = Ledger::new(Duration::from_secs(30));
        l.upsert_quota(quota("q", None, 100));
        let now = Instant::now();
        let one = cpu(1);
        // A forger that read the uid from a watch and raced quota-state's own.
        assert!(allowed(l.check_pod(
            &asked_from("10.0.0.1", "uid-a", "a", &one, "r1"),
            now
        )));
        assert!(allowed(l.check_pod(
            &asked_from("10.0.0.9", "uid-a", "a", &one, "f1"),
            now
        )));
        l.observe_pod_event("", "ns", "a", "uid-a", "q", Ok(one.clone()));
        assert_eq!(l.stats().trusted_peers, 0);
        // The same address twice (the API server's retry) is one peer.
        for r in ["r2", "r3"] {
            assert!(allowed(
                l.check_pod(&asked_from("10.0.0.1", "uid-b", "b", &one, r), now)
            ));
        }
        l.observe_pod_event("", "ns", "b", "uid-b", "q", Ok(one.clone()));
        assert_eq!(l.stats().trusted_peers, 1);
    }

    #[test]
    fn untrusted_peers_hold_few_reservations() {
        let limits = ReservationLimits {
            untrusted_per_peer: 2,
            untrusted_total: 3,
            ..ReservationLimits::default()
        };
        let l = Ledger::new(Duration::from_secs(30)).with_limits(limits);
        l.upsert_quota(quota("q", None, 1000));
        let now = Instant::now();
        let small = Amounts::from([(
            "cpu".to_owned(),
            Amount {
                nano: NANO_PER_UNIT / 100,
                format: admission_kit::compat::go::QuantityFormat::DecimalSI,
            },
        )]);
        let ask =
            |peer, name, review| l.check_pod(&asked_from(peer, "", name, &small, review), now);
        assert!(allowed(ask("10.0.0.8", "a", "1")));
        assert!(allowed(ask("10.0.0.8", "b", "2")));
        let text = denial(ask("10.0.0.8", "c", "3"));
        assert!(
            text.contains("2 pods admitted from 10.0.0.8 and 2 from all addresses"),
            "{text}"
        );
        assert!(allowed(ask("10.0.0.9", "d", "4")));
        assert!(denial(ask("10.0.0.7", "e", "5")).contains("(limits 2 and 3)"));
        // A trusted caller's pod in the same namespace is not held back by their count.
        let limits = ReservationLimits {
            per_namespace: 3,
            ..limits
        };
        let l2 = Ledger::new(Duration::from_secs(30)).with_limits(limits);
        l2.upsert_quota(quota("q", None, 1000));
        for (peer, name) in [("10.0.0.8", "a"), ("10.0.0.8", "b"), ("10.0.0.9", "c")] {
            assert!(allowed(
                l2.check_pod(&asked_from(peer, "", name, &small, name), now)
            ));
        }
        assert!(allowed(
            l2.check_pod(&asked("ns", "real", "q", &small, "r"), now)
        ));
        assert_eq!(l2.stats().preempted, 3);
    }

    #[test]
    fn one_pod_above_the_share_passes_while_nothing_else_is_outstanding() {
        let limits = ReservationLimits {
            quota_share_permille: 500,
            namespace_share_permille: 500,
            ..ReservationLimits::default()
        };
        let l = Ledger::new(Duration::from_secs(30)).with_limits(limits);
        l.upsert_quota(quota("q", None, 10));
        let now = Instant::now();
        let (eight, one) = (cpu(8), cpu(1));
        assert!(allowed(
            l.check_pod(&asked("ns", "big", "q", &eight, "1"), now)
        ));
        let text = denial(l.check_pod(&asked("ns", "small", "q", &one, "2"), now));
        assert!(text.contains("retry in a few seconds"), "{text}");
    }

    #[test]
    fn one_namespace_holds_at_most_its_share_of_a_quota() {
        let limits = ReservationLimits {
            quota_share_permille: 1000,
            namespace_share_permille: 300,
            ..ReservationLimits::default()
        };
        let l = Ledger::new(Duration::from_secs(30)).with_limits(limits);
        l.upsert_quota(quota("shared", None, 10));
        let now = Instant::now();
        let (three, one) = (cpu(3), cpu(1));
        assert!(allowed(
            l.check_pod(&asked("a", "x", "shared", &three, "1"), now)
        ));
        let text = denial(l.check_pod(&asked("a", "y", "shared", &one, "2"), now));
        assert!(
            text.starts_with("pod a/y: namespace a on quota ns/shared: cpu=3 is held already"),
            "{text}"
        );
        assert!(allowed(
            l.check_pod(&asked("b", "y", "shared", &three, "3"), now)
        ));
    }

    #[test]
    fn pods_of_namespaces_that_do_not_exist_reserve_nothing() {
        let l = Ledger::new(Duration::from_secs(30));
        l.upsert_quota(quota("q", None, 10));
        l.set_namespaces(["ns", "team-b"]);
        let now = Instant::now();
        let nine = cpu(9);
        assert!(allowed(
            l.check_pod(&asked("ghost", "p", "q", &nine, "1"), now)
        ));
        assert_eq!(l.reservations(), 0);
        assert!(l.used("q").values().all(Amount::is_zero));
        // Once the namespace exists, its pods reserve as any other.
        l.observe_namespace("ghost", true);
        assert!(allowed(
            l.check_pod(&asked("ghost", "p", "q", &nine, "1"), now)
        ));
        assert_eq!(l.reservations(), 1);
        l.observe_namespace("ghost", false);
        let one = cpu(1);
        assert!(allowed(
            l.check_pod(&asked("ghost", "r", "q", &one, "2"), now)
        ));
        assert_eq!(l.reservations(), 1);
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

    type Usage = std::collections::BTreeMap<String, std::collections::BTreeMap<String, i128>>;

    fn nonzero<'a>(m: impl Iterator<Item = (&'a String, &'a Amounts)>) -> Usage {
        m.map(|(q, a)| {
            (
                q.clone(),
                a.iter()
                    .filter(|(_, v)| v.nano != 0)
                    .map(|(k, v)| (k.clone(), v.nano))
                    .collect::<std::collections::BTreeMap<_, _>>(),
            )
        })
        .filter(|(_, a)| !a.is_empty())
        .collect()
    }

    /// Usage counted from scratch in the installed tree: each pod and reservation along its
    /// chain, and each group's quota checked against QN.
    fn recount(s: &State) -> (Usage, std::collections::BTreeMap<String, u32>) {
        let view = s.view.clone().unwrap_or_default();
        let mut used: HashMap<String, Amounts> = HashMap::new();
        let mut bad: HashMap<String, u32> = HashMap::new();
        for e in s.pods.values() {
            let q = tree::quota_name(
                &*view.topology,
                Some(&e.group.label),
                &e.group.namespace,
                false,
            );
            assert_eq!(*s.groups[&e.group].quota, *q, "group {:?}", e.group);
            let chain = view.chain(&q);
            if e.uncountable {
                count_along(&mut bad, &chain, 1, true);
            } else {
                add_along(&mut used, &chain, requests_iter(&e.requests), 1);
            }
        }
        for r in s.reservations.values() {
            add_along(
                &mut used,
                &view.chain(&r.quota),
                requests_iter(&r.amounts),
                1,
            );
        }
        (nonzero(used.iter()), bad.into_iter().collect())
    }

    /// Pod events, admissions and releases on one thread while quotas move between parents,
    /// bind namespaces and disappear on another, the tree rebuilt in the background: once it
    /// settles, every quota's usage is what counting from scratch gives.
    #[test]
    fn background_rebuilds_keep_usage_exact_while_pods_and_quotas_change() {
        let l = Arc::new(Ledger::new(Duration::from_secs(600)));
        l.spawn_rebuilder().unwrap();
        let leaf = |j: usize, parent: usize, binds: bool| {
            let mut q = quota(&format!("c{}", j % 4), Some(&format!("p{parent}")), 1_000);
            if binds {
                q.namespaces = vec![format!("n{}", j % 5)];
            }
            q
        };
        for p in 0..2 {
            let mut q = quota(&format!("p{p}"), None, 1_000_000);
            q.info.is_parent = true;
            l.upsert_quota(q);
        }
        for j in 0..4 {
            l.upsert_quota(leaf(j, j % 2, true));
        }
        let done = Arc::new(AtomicBool::new(false));
        let changes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let pods = {
            let (l, done, changes) = (l.clone(), done.clone(), changes.clone());
            std::thread::spawn(move || {
                let mut r: u64 = 7;
                let mut n = 0;
                // At least 20,000 events, and on until 100 quota changes happened meanwhile.
                while n < 20_000 || changes.load(Ordering::Relaxed) < 100 {
                    n += 1;
                    r = r.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                    let x = (r >> 33) as usize;
                    let ns = format!("n{}", x % 5);
                    let name = format!("pod{}", (x / 5) % 40);
                    let label = ["", "c0", "c1", "c2", "c3", "p0"][(x / 200) % 6];
                    match (x / 1_200) % 10 {
                        0..=4 => l.observe_pod(&ns, &name, label, cpu((x % 4) as i64)),
                        5 => l.observe_pod_usage(&ns, &name, label, Err("too big".into())),
                        6 | 7 => l.delete_pod(&ns, &name),
                        _ => {
                            let requests = cpu(1);
                            // Half for pods that come, half for names no pod ever takes (their
                            // reservations stay outstanding through the quota changes).
                            let name = if x.is_multiple_of(2) {
                                name.clone()
                            } else {
                                format!("r{}", (x / 5) % 40)
                            };
                            l.check_pod(
                                &PodCheck {
                                    cluster: "",
                                    namespace: &ns,
                                    name: &name,
                                    label,
                                    old_label: None,
                                    requests: &requests,
                                    dry_run: false,
                                    disable_default_quota: false,
                                    check_parent: false,
                                    check_admission: true,
                                    caller: "t",
                                    review: "",
                                    peer: "",
                                    pod_uid: "",
                                },
                                Instant::now(),
                            );
                        }
                    }
                }
                done.store(true, Ordering::Relaxed);
            })
        };
        let mut j = 0;
        while !done.load(Ordering::Relaxed) {
            match j % 7 {
                6 => l.delete_quota(&format!("c{}", j % 4), "ns"),
                _ => l.upsert_quota(leaf(j, (j / 4) % 2, j % 3 != 0)),
            }
            j += 1;
            changes.store(j, Ordering::Relaxed);
            std::thread::sleep(Duration::from_micros(200));
        }
        pods.join().unwrap();
        for _ in 0..100_000 {
            let s = l.lock();
            if s.fresh() && !s.building {
                let (used, bad) = recount(&s);
                assert_eq!(nonzero(s.subtree.iter()), used);
                // The reservations' own sums (the shares' basis) moved with the tree as well.
                let mut unbacked: HashMap<String, Amounts> = HashMap::new();
                for r in s.reservations.values() {
                    let chain = s.view.as_ref().unwrap().chain(&r.quota);
                    add_along(&mut unbacked, &chain, requests_iter(&r.amounts), 1);
                }
                assert!(!unbacked.is_empty(), "some reservations are outstanding");
                assert_eq!(nonzero(s.unbacked.iter()), nonzero(unbacked.iter()));
                let uncountable: std::collections::BTreeMap<_, _> =
                    s.uncountable.clone().into_iter().collect();
                assert_eq!(uncountable, bad);
                assert!(!used.is_empty() && !bad.is_empty(), "{used:?} {bad:?}");
                assert!(s.rebuilds >= 2, "{} rebuilds", s.rebuilds);
                return;
            }
            drop(s);
            std::thread::sleep(Duration::from_millis(1));
        }
        panic!("the tree never settled");
    }
}
