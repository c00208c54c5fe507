//! One admission under the lock: the bounds a reservation must stay within (outstanding per
//! namespace and in all, unbacked and untrusted shares) and the decision itself.

use super::*;

/// The first negative amount, named.
pub(super) fn negative(requests: &Amounts) -> Option<String> {
    requests
        .iter()
        .find_map(|(k, v)| (v.nano < 0).then(|| countable(k, v).err()).flatten())
}

/// Whether reserving `requested` on `quota` would take the outstanding reservations past their
/// share (see [`ReservationLimits`]) of the quota or an ancestor, or namespace `namespace`'s
/// past its share of `quota`: the refusal's text, naming the quota, resource and amounts. A pod
/// that alone asks more than the share passes while nothing else is outstanding there, so
/// that every pod that fits its quota can be created.
pub(super) fn unbacked_over_share(
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
pub(super) fn untrusted_over(
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
pub(super) fn over_share(
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
pub(super) fn split_text(
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
pub(super) fn admit_locked(
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
pub(super) fn admit_once(
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
