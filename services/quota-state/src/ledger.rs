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

mod admit;
mod observe;
mod peers;
mod report;
mod state;
mod view;
use admit::*;
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
    ) -> Result<(), (&'static str, tree::Refused)> {
        let s = self.read();
        let view = s.view.clone().unwrap_or_default();
        let pods = Pods {
            pods: &s.pods,
            groups: &s.groups,
        };
        tree::validate_at(operation, object, old, &view.topology, &pods, gates)
    }
}

#[cfg(test)]
mod tests;
