//! What the watches tell the ledger: pods, namespaces and member clusters appearing, changing
//! and going, and reservations given back.

use super::*;

impl Ledger {
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
                tracing::warn!(
                    cluster,
                    namespace,
                    name,
                    error = %e,
                    "pod's requests cannot be counted; its quotas refuse admissions while it lives",
                );
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
}
