//! Model-based test of the ledger: random sequences of quota creates, updates and deletes, pod
//! admissions (zero, fractional, huge, negative and overflowing amounts, dry runs), watch events
//! (pods appearing, changing, finishing with uncountable requests, going away), releases by the
//! owner and by another caller, expiries and restarts, each step checked against a plain reference
//! model in exact integers:
//! - every admission decision (allowed or not) equals the model's;
//! - after an admission, no quota on the pod's chain uses more than its limit of a checked key;
//! - after every step, every quota's usage equals the sum over its subtree's live pods and open
//!   reservations, and its count of uncountable pods equals the model's.
//!
//! Seeded and bounded in the test command: `QUOTA_MODEL_SEEDS` (default 24) sequences of
//! `QUOTA_MODEL_STEPS` (default 400) steps; set them higher for a longer run.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use admission_kit::compat::go::QuantityFormat;
use quota_state::ledger::{
    Amount, Amounts, Ledger, MAX_AMOUNT_NANO, PodCheck, PodOutcome, QuotaSpec, ReservationLimits,
    UNCHECKED,
};

const QUOTAS: [&str; 6] = ["q0", "q1", "q2", "q3", "q4", "q5"];
const NAMESPACES: [&str; 2] = ["a", "b"];
const RESOURCES: [&str; 2] = ["cpu", "memory"];
const ROOT: &str = "koordinator-root-quota";
const DEFAULT: &str = "koordinator-default-quota";
const TTL: Duration = Duration::from_secs(30);
const LIMITS: ReservationLimits = ReservationLimits {
    per_namespace: 3,
    total: 5,
    // The shares by amount are checked by the ledger's unit tests; the model counts only.
    quota_share_permille: 1000,
    namespace_share_permille: 1000,
    // Every caller of the model names no peer (trusted): the ledger's unit tests check peers.
    untrusted_per_peer: 32,
    untrusted_total: 512,
    untrusted_share_permille: 100,
};

type Key = (String, String);

#[derive(Clone, Debug)]
struct Quota {
    parent: String,
    max: BTreeMap<String, i128>,
    binds_a: bool,
}

#[derive(Clone, Debug)]
struct Reservation {
    quota: String,
    amounts: BTreeMap<String, i128>,
    due: Instant,
    owner: String,
}

#[derive(Clone, Debug)]
struct PodState {
    label: String,
    requests: BTreeMap<String, i128>,
}

/// The reference: plain maps, usage recomputed from scratch.
#[derive(Default)]
struct Model {
    quotas: BTreeMap<String, Quota>,
    pods: BTreeMap<Key, PodState>,
    reservations: BTreeMap<Key, Reservation>,
}

fn countable(v: i128) -> bool {
    (0..=MAX_AMOUNT_NANO).contains(&v)
}

impl Model {
    fn quota_of(&self, label: &str, ns: &str) -> String {
        if !label.is_empty() {
            return label.to_owned();
        }
        match self.quotas.get("q0") {
            Some(q) if ns == "a" && q.binds_a => "q0".to_owned(),
            _ => DEFAULT.to_owned(),
        }
    }

    fn chain(&self, quota: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut cur = Some(quota.to_owned());
        while let Some(q) = cur {
            if out.contains(&q) || UNCHECKED.contains(&q.as_str()) {
                break;
            }
            cur = self.quotas.get(&q).map(|s| s.parent.clone());
            out.push(q);
        }
        out
    }

    /// Usage and uncountable pods per quota, from scratch.
    fn usage(
        &self,
    ) -> (
        HashMap<String, BTreeMap<String, i128>>,
        HashMap<String, u32>,
    ) {
        let mut used: HashMap<String, BTreeMap<String, i128>> = HashMap::new();
        let mut bad: HashMap<String, u32> = HashMap::new();
        for ((ns, _), p) in &self.pods {
            let chain = self.chain(&self.quota_of(&p.label, ns));
            if p.requests.values().all(|v| countable(*v)) {
                for q in chain {
                    for (k, v) in &p.requests {
                        *used
                            .entry(q.clone())
                            .or_default()
                            .entry(k.clone())
                            .or_default() += v;
                    }
                }
            } else {
                for q in chain {
                    *bad.entry(q).or_default() += 1;
                }
            }
        }
        for r in self.reservations.values() {
            for q in self.chain(&r.quota) {
                for (k, v) in &r.amounts {
                    *used
                        .entry(q.clone())
                        .or_default()
                        .entry(k.clone())
                        .or_default() += v;
                }
            }
        }
        (used, bad)
    }

    fn expire(&mut self, now: Instant) {
        self.reservations.retain(|_, r| r.due > now);
    }

    /// PV-4 as the spec states it, with quota-state's bounds; `true` when admitted.
    fn admit(
        &mut self,
        key: &Key,
        label: &str,
        requests: &BTreeMap<String, i128>,
        dry_run: bool,
        now: Instant,
    ) -> bool {
        self.expire(now);
        if requests.values().any(|v| *v < 0) {
            return false;
        }
        let quota = self.quota_of(label, &key.0);
        if UNCHECKED.contains(&quota.as_str()) {
            return true;
        }
        let Some(spec) = self.quotas.get(&quota).cloned() else {
            return false;
        };
        if spec.max.is_empty() {
            return true; // no checked key in max
        }
        let requested: BTreeMap<String, i128> = requests
            .iter()
            .filter(|(k, v)| **v != 0 && spec.max.get(*k).is_some_and(|m| *m != 0))
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        if requested.is_empty() {
            return true;
        }
        if requested.values().any(|v| !countable(*v)) {
            return false;
        }
        let previous = self.reservations.remove(key);
        let (used, bad) = self.usage();
        let chain = self.chain(&quota);
        let fits = chain.iter().all(|q| {
            let Some(qs) = self.quotas.get(q) else {
                return true;
            };
            bad.get(q).copied().unwrap_or(0) == 0
                && requested.iter().all(|(k, r)| match qs.max.get(k) {
                    None => true,
                    Some(l) => used.get(q).and_then(|u| u.get(k)).copied().unwrap_or(0) + r <= *l,
                })
        });
        let observed = self.pods.contains_key(key);
        let within_bounds = previous.is_some() || {
            let in_ns = self
                .reservations
                .keys()
                .filter(|(ns, _)| *ns == key.0)
                .count();
            in_ns < LIMITS.per_namespace && self.reservations.len() < LIMITS.total
        };
        if !fits || dry_run || observed || !within_bounds {
            if let Some(p) = previous {
                self.reservations.insert(key.clone(), p);
            }
            return fits && (dry_run || observed || within_bounds);
        }
        self.reservations.insert(
            key.clone(),
            Reservation {
                quota: quota.clone(),
                amounts: requested.clone(),
                // Asking again never extends a reservation.
                due: previous.as_ref().map_or(now + TTL, |p| p.due),
                owner: "webhook".into(),
            },
        );
        // Admitted usage never exceeds any quota's limit on the chain for a checked key.
        let (used, _) = self.usage();
        for q in &chain {
            if let Some(qs) = self.quotas.get(q) {
                for k in requested.keys() {
                    if let (Some(l), Some(u)) = (qs.max.get(k), used.get(q).and_then(|u| u.get(k)))
                    {
                        assert!(u <= l, "admitted over the limit of {q}: {k} {u} > {l}");
                    }
                }
            }
        }
        true
    }
}

fn amounts(m: &BTreeMap<String, i128>) -> Amounts {
    m.iter()
        .map(|(k, v)| {
            (
                k.clone(),
                Amount {
                    nano: *v,
                    format: QuantityFormat::DecimalSI,
                },
            )
        })
        .collect()
}

fn spec(name: &str, q: &Quota) -> QuotaSpec {
    let parent = (q.parent != ROOT).then_some(q.parent.as_str());
    let mut s = QuotaSpec::simple(name, "team", parent, amounts(&q.max));
    if q.binds_a {
        s.namespaces = vec!["a".into()];
    }
    s
}

/// An amount for a request: mostly small, sometimes zero, fractional, huge, negative or
/// crafted to overflow 64-bit sums.
fn amount(rng: &mut fastrand::Rng) -> i128 {
    match rng.u32(0..20) {
        0 => 0,
        1 => -rng.i128(1..5_000_000),
        2 => 9_223_372_036_854_775_000,
        3 => i128::from(i64::MAX),
        4 => MAX_AMOUNT_NANO,
        5 => MAX_AMOUNT_NANO + 1,
        6 => rng.i128(1..2_000_000),        // sub-milli and fractional
        7 => rng.i128(1..1000) * 1_000_000, // fractional
        _ => rng.i128(1..8) * 1_000_000_000,
    }
}

fn limit(rng: &mut fastrand::Rng) -> i128 {
    match rng.u32(0..10) {
        0 => 0,
        1 => i128::from(i64::MAX),
        2 => 10_000_000_000_000,
        3 => 2_500_000, // 2.5m: sub-milli requests fill it exactly
        _ => rng.i128(1..20) * 1_000_000_000,
    }
}

fn requests(rng: &mut fastrand::Rng) -> BTreeMap<String, i128> {
    let mut out = BTreeMap::new();
    for r in RESOURCES {
        if rng.f64() < 0.7 {
            out.insert(r.to_owned(), amount(rng));
        }
    }
    out
}

#[derive(Default, Debug)]
struct Counts {
    steps: usize,
    admitted: usize,
    refused: usize,
    restarts: usize,
}

fn check(ledger: &Ledger, model: &Model, seed: u64, step: usize, op: &str) {
    let (used, bad) = model.usage();
    for q in QUOTAS {
        let got: BTreeMap<String, i128> = ledger
            .used(q)
            .into_iter()
            .filter(|(_, a)| a.nano != 0)
            .map(|(k, a)| (k, a.nano))
            .collect();
        let want: BTreeMap<String, i128> = used
            .get(q)
            .map(|m| {
                m.iter()
                    .filter(|(_, v)| **v != 0)
                    .map(|(k, v)| (k.clone(), *v))
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(got, want, "seed {seed} step {step} ({op}): usage of {q}");
        assert_eq!(
            ledger.uncountable(q),
            bad.get(q).copied().unwrap_or(0),
            "seed {seed} step {step} ({op}): uncountable pods of {q}"
        );
    }
    assert_eq!(
        ledger.reservations(),
        model.reservations.len(),
        "seed {seed} step {step} ({op}): reservations"
    );
}

fn run(seed: u64, steps: usize, counts: &mut Counts) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut ledger = Ledger::new(TTL).with_limits(LIMITS);
    let mut model = Model::default();
    let mut now = Instant::now();
    for step in 0..steps {
        let ns = NAMESPACES[rng.usize(0..2)].to_owned();
        let key: Key = (ns.clone(), format!("p{}", rng.u32(0..8)));
        let label = match rng.usize(0..8) {
            0 => String::new(),
            i => QUOTAS[(i - 1) % QUOTAS.len()].to_owned(),
        };
        let op = match rng.u32(0..100) {
            0..12 => {
                let i = rng.usize(0..QUOTAS.len());
                let parent = if i == 0 || rng.f64() < 0.3 {
                    ROOT.to_owned()
                } else {
                    QUOTAS[rng.usize(0..i)].to_owned()
                };
                let mut max = BTreeMap::new();
                for r in RESOURCES {
                    if rng.f64() < 0.8 {
                        max.insert(r.to_owned(), limit(&mut rng));
                    }
                }
                let q = Quota {
                    parent,
                    max,
                    binds_a: i == 0 && rng.f64() < 0.5,
                };
                ledger.upsert_quota(spec(QUOTAS[i], &q));
                model.quotas.insert(QUOTAS[i].to_owned(), q);
                "upsert quota"
            }
            12..15 => {
                let q = QUOTAS[rng.usize(0..QUOTAS.len())];
                ledger.delete_quota(q, "team");
                model.quotas.remove(q);
                "delete quota"
            }
            15..55 => {
                let req = requests(&mut rng);
                let dry_run = rng.f64() < 0.1;
                let want = model.admit(&key, &label, &req, dry_run, now);
                let a = amounts(&req);
                let got = ledger.check_pod(
                    &PodCheck {
                        cluster: "",
                        namespace: &key.0,
                        name: &key.1,
                        label: &label,
                        old_label: None,
                        requests: &a,
                        dry_run,
                        disable_default_quota: false,
                        check_parent: false,
                        check_admission: true,
                        caller: "webhook",
                        review: "",
                        peer: "",
                        pod_uid: "",
                    },
                    now,
                );
                let allowed = matches!(got, PodOutcome::Allowed { .. });
                assert_eq!(
                    allowed, want,
                    "seed {seed} step {step}: admission of {key:?} label {label:?} {req:?}: {got:?}"
                );
                if allowed {
                    counts.admitted += 1;
                } else {
                    counts.refused += 1;
                }
                "admit"
            }
            55..75 => {
                let mut req = requests(&mut rng);
                if rng.f64() < 0.1 {
                    req.clear(); // finished
                }
                model.reservations.remove(&key);
                model.pods.insert(
                    key.clone(),
                    PodState {
                        label: label.clone(),
                        requests: req.clone(),
                    },
                );
                ledger.observe_pod(&key.0, &key.1, &label, amounts(&req));
                "observe pod"
            }
            75..85 => {
                model.reservations.remove(&key);
                model.pods.remove(&key);
                ledger.delete_pod(&key.0, &key.1);
                "delete pod"
            }
            85..92 => {
                let caller = if rng.f64() < 0.5 {
                    "webhook"
                } else {
                    "intruder"
                };
                let released = ledger.release(&key.0, &key.1, "", caller);
                let owned = model
                    .reservations
                    .get(&key)
                    .is_some_and(|r| r.owner == caller);
                assert_eq!(
                    released, owned,
                    "seed {seed} step {step}: release by {caller}"
                );
                if owned {
                    model.reservations.remove(&key);
                }
                "release"
            }
            92..98 => {
                now += Duration::from_secs(rng.u64(1..20));
                "time passes"
            }
            _ => {
                // A restart: the new ledger is fed the quotas and the pod list; reservations of
                // pods not yet created are gone (they were never persisted).
                ledger = Ledger::new(TTL).with_limits(LIMITS);
                for (name, q) in &model.quotas {
                    ledger.upsert_quota(spec(name, q));
                }
                for ((ns, name), p) in &model.pods {
                    ledger.observe_pod(ns, name, &p.label, amounts(&p.requests));
                }
                model.reservations.clear();
                counts.restarts += 1;
                "restart"
            }
        };
        counts.steps += 1;
        if std::env::var_os("QUOTA_MODEL_TRACE").is_some() {
            eprintln!(
                "{seed}/{step} {op} {key:?} {label:?} quotas={:?} res={:?}",
                model.quotas,
                model
                    .reservations
                    .iter()
                    .map(|(k, r)| (k, &r.quota, &r.amounts))
                    .collect::<Vec<_>>()
            );
        }
        check(&ledger, &model, seed, step, op);
    }
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn ledger_agrees_with_the_reference_model() {
    let (seeds, steps) = (env("QUOTA_MODEL_SEEDS", 24), env("QUOTA_MODEL_STEPS", 400));
    let first = env("QUOTA_MODEL_FIRST_SEED", 0);
    let mut counts = Counts::default();
    for seed in first..first + seeds {
        run(seed, steps as usize, &mut counts);
    }
    println!("ledger model: {seeds} seeds from {first} × {steps} steps: {counts:?}");
    assert!(counts.admitted > 0 && counts.refused > 0 && counts.restarts > 0);
}
