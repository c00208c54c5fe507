//! What the ledger tells: usage per quota and member, the usage to write back to each
//! ElasticQuota, the addresses it trusts, and its statistics.

use super::*;

impl Ledger {
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
