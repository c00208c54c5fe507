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

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use admission_kit::go::{ParsedQuantity, QuantityFormat};

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaSpec {
    /// Name (unique across namespaces upstream; duplicates are refused at admission).
    pub name: String,
    /// Namespace of the object.
    pub namespace: String,
    /// Parent quota name; `None` for children of the root.
    pub parent: Option<String>,
    /// `spec.max`.
    pub max: Amounts,
    /// The admission limit: the `admission` annotation when non-empty, else `spec.max`.
    pub limit: Amounts,
    /// Namespaces bound by the `namespaces` annotation.
    pub namespaces: Vec<String>,
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

#[derive(Debug, Default)]
struct State {
    quotas: HashMap<String, Vec<QuotaSpec>>,
    /// Usage of each quota's subtree (itself and every descendant).
    subtree: HashMap<String, Amounts>,
    pods: HashMap<PodKey, (String, Amounts)>,
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
                .and_then(|s| s.parent.clone());
            out.push(q);
        }
        out
    }

    fn charge(&mut self, quota: &str, amounts: &Amounts, sign: i64) {
        for q in self.chain(quota) {
            add(self.subtree.entry(q).or_default(), amounts, sign);
        }
    }

    fn uncharge_key(&mut self, key: &PodKey) {
        if let Some((q, a, _)) = self.reservations.remove(key) {
            self.charge(&q, &a, -1);
        }
        if let Some((q, a)) = self.pods.remove(key) {
            self.charge(&q, &a, -1);
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

    fn recompute(&mut self) {
        self.subtree.clear();
        let charges: Vec<(String, Amounts)> = self
            .pods
            .values()
            .cloned()
            .chain(
                self.reservations
                    .values()
                    .map(|(q, a, _)| (q.clone(), a.clone())),
            )
            .collect();
        for (q, a) in charges {
            self.charge(&q, &a, 1);
        }
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
        let entry = s.quotas.entry(spec.name.clone()).or_default();
        entry.retain(|q| q.namespace != spec.namespace);
        entry.push(spec);
        s.recompute();
    }

    /// Removes a quota (watch event).
    pub fn delete_quota(&self, name: &str, namespace: &str) {
        let mut s = self.lock();
        if let Some(v) = s.quotas.get_mut(name) {
            v.retain(|q| q.namespace != namespace);
            if v.is_empty() {
                s.quotas.remove(name);
            }
        }
        s.recompute();
    }

    /// A live pod charged to `quota` with `requests` (watch event); its reservation, if any,
    /// becomes usage. Terminated pods pass `None` and stop counting.
    pub fn observe_pod(&self, namespace: &str, name: &str, charge: Option<(String, Amounts)>) {
        let mut s = self.lock();
        let key = (namespace.to_owned(), name.to_owned());
        s.uncharge_key(&key);
        if let Some((q, a)) = charge {
            s.charge(&q, &a, 1);
            s.pods.insert(key, (q, a));
        }
    }

    /// A pod is gone (watch event).
    pub fn delete_pod(&self, namespace: &str, name: &str) {
        self.lock()
            .uncharge_key(&(namespace.to_owned(), name.to_owned()));
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
        if quota.is_empty() || UNCHECKED.contains(&quota) {
            return Admission::Allowed;
        }
        let mut s = self.lock();
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
                    qs.namespace,
                    qs.name,
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
            let due = now + self.ttl;
            s.deadlines.push_back((due, key.clone()));
            s.reservations
                .insert(key, (quota.to_owned(), requested, due));
        }
        Admission::Allowed
    }

    /// QN: the quota a pod in `namespace` with quota label `label` is charged to.
    pub fn quota_of_pod(&self, namespace: &str, label: Option<&str>) -> String {
        if let Some(l) = label.filter(|l| !l.is_empty()) {
            return l.to_owned();
        }
        let s = self.lock();
        if s.quotas
            .get(namespace)
            .is_some_and(|v| v.iter().any(|q| q.namespace == namespace))
        {
            return namespace.to_owned();
        }
        let mut bound: Vec<&QuotaSpec> = s
            .quotas
            .values()
            .flatten()
            .filter(|q| q.namespaces.iter().any(|n| n == namespace))
            .collect();
        bound.sort_by(|a, b| a.name.cmp(&b.name));
        bound
            .first()
            .map(|q| q.name.clone())
            .unwrap_or_else(|| UNCHECKED[0].to_owned())
    }

    /// Every quota (name, namespace) and every observed pod (namespace, name): what a relist
    /// compares against.
    pub fn known(&self) -> (Vec<PodKey>, Vec<PodKey>) {
        let s = self.lock();
        (
            s.quotas
                .values()
                .flatten()
                .map(|q| (q.name.clone(), q.namespace.clone()))
                .collect(),
            s.pods.keys().cloned().collect(),
        )
    }

    /// What a quota's subtree uses now (tests, debugging).
    pub fn used(&self, quota: &str) -> Amounts {
        self.lock().subtree.get(quota).cloned().unwrap_or_default()
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
        QuotaSpec {
            name: name.into(),
            namespace: "ns".into(),
            parent: parent.map(Into::into),
            max: cpu(max_cpu),
            limit: cpu(max_cpu),
            namespaces: Vec::new(),
        }
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
        l.observe_pod("ns", "a", Some(("q".into(), cpu(3))));
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
        l.upsert_quota(QuotaSpec {
            namespace: "other".into(),
            ..quota("dup", None, 1)
        });
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
