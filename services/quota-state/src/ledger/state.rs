//! The ledger's state under its lock: pods, groups, reservations and the installed tree, and
//! the moves that keep usage exact as they change.

use super::*;

impl State {
    pub(super) fn log_quota(&mut self, c: QuotaChange) {
        self.quota_log.push(c);
        if self.quota_log.len() > LOG_BOUND {
            self.quota_log = Vec::new();
            self.resync = true;
        }
    }

    pub(super) fn fresh(&self) -> bool {
        self.view.is_some() && self.view_generation == self.generation
    }

    pub(super) fn chain(&self, quota: &str) -> Arc<[String]> {
        chain_in(self.view.as_deref(), quota)
    }

    pub(super) fn charge<'a>(
        &mut self,
        quota: &str,
        amounts: impl Iterator<Item = (&'a str, &'a Amount)> + Clone,
        sign: i128,
    ) {
        let chain = self.chain(quota);
        add_along(&mut self.subtree, &chain, amounts, sign);
    }

    /// Adds `amounts` × `sign` to `cluster`'s share of each quota of `chain` (fleets only).
    pub(super) fn split_add<'a>(
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

    pub(super) fn put_reservation(&mut self, key: Arc<ResKey>, r: Reservation) {
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

    pub(super) fn take_reservation(&mut self, key: &ResKey) -> Option<Reservation> {
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

    pub(super) fn remove_pod(&mut self, scope: &str, name: &str) {
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

    pub(super) fn insert_pod(&mut self, scope: &str, name: &str, e: PodEntry) {
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
    pub(super) fn reservations_of(&self, scope: &str, name: &str) -> Vec<Arc<ResKey>> {
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
    pub(super) fn uncharge_key(&mut self, key: &PodKey, uid: &str, now: Instant, ttl: Duration) {
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
    pub(super) fn trust(&mut self, peer: &Arc<str>, now: Instant) {
        if !self.peers.trust(peer, now) {
            return;
        }
        tracing::info!(
            peer = %peer,
            "peer trusted from now on (a pod backed its reservation, or the previous leader remembered it)",
        );
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
    pub(super) fn preempt_untrusted(&mut self, namespace: &str, chain: &[String]) -> usize {
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

    pub(super) fn expire(&mut self, now: Instant) {
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
    pub(super) fn resume(&mut self, cluster: &str, now: Instant, ttl: Duration) {
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
    pub(super) fn move_group(&mut self, key: &GroupKey, base: Option<&View>, new: &View, to: &str) {
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
    pub(super) fn install(
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
