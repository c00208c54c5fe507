//! Who sent each reservation, and which senders have earned trust.
//!
//! Where the API server presents no client certificate, whoever reaches a webhook port can send
//! reviews that name any pod, namespace and request. Two things about a review no forger can
//! choose: the address its connection comes from (the peer), and whether the pod it names is then
//! created. The API server sets a pod's `metadata.uid` before validating admission, and nobody
//! knows it before then; so a reservation whose pod appears in the watch with the uid the review
//! carried was made by whoever sent the real review. That peer is trusted from then on, unless
//! another peer's reservation claimed the same uid (a forger that read it from a watch and raced
//! quota-state's own): then neither earns trust from that pod.
//!
//! Reservations of peers not (yet) trusted are counted here: few per peer, few in all, a small
//! share of any quota, and they give way to a trusted peer's reservation that they stand in the
//! way of ([`super::State::preempt_untrusted`]). So a forger holds a bounded part of a quota for a
//! bounded time and never makes a review from the API server fail; the API server's own first
//! reviews, before any of its pods was seen, are judged as a stranger's.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use super::{Amounts, ResKey};

/// Trusted peers remembered (the API server's addresses: a handful per cluster); past it the
/// one whose reservation was backed longest ago is forgotten.
pub(super) const TRUSTED_CAP: usize = 256;

/// The trusted peers and the untrusted reservations.
#[derive(Debug, Default)]
pub(super) struct Peers {
    /// Trusted peers (scoped by member cluster, see [`super::scope`]) and when one of their
    /// reservations was last backed.
    trusted: HashMap<Arc<str>, Instant>,
    /// Untrusted reservations by [`super::Reservation::seq`].
    pub(super) untrusted: BTreeMap<u64, Arc<ResKey>>,
    /// Untrusted reservations per peer, and when the latest was made.
    by_peer: HashMap<Arc<str>, (usize, Instant)>,
    /// What untrusted reservations hold per quota subtree.
    pub(super) held: HashMap<String, Amounts>,
    /// Untrusted reservations dropped for a trusted peer's, since start (metrics).
    pub(super) preempted: u64,
    /// Refusals for the untrusted bounds, since start (metrics).
    pub(super) refused: u64,
}

impl Peers {
    /// Whether reservations of `peer` are judged as the API server's: a peer that one of its own
    /// pods vouched for, or "" (a caller that names no peer: an older webhook, or a connection
    /// that proved the API server's certificate).
    pub(super) fn trusted(&self, peer: &str) -> bool {
        peer.is_empty() || self.trusted.contains_key(peer)
    }

    /// Trusted peers, each with when one of its reservations was last backed.
    pub(super) fn trusted_since(&self) -> impl Iterator<Item = (&Arc<str>, Instant)> {
        self.trusted.iter().map(|(p, t)| (p, *t))
    }

    /// Trusted peers now (metrics).
    pub(super) fn trusted_count(&self) -> usize {
        self.trusted.len()
    }

    /// `peer`'s reservation was backed at `now`: trusted from now on. Whether it is new.
    pub(super) fn trust(&mut self, peer: &Arc<str>, now: Instant) -> bool {
        let new = self.trusted.insert(peer.clone(), now).is_none();
        if new && self.trusted.len() > TRUSTED_CAP {
            let oldest = self
                .trusted
                .iter()
                .min_by_key(|(_, t)| **t)
                .map(|(p, _)| p.clone());
            if let Some(p) = oldest {
                self.trusted.remove(&p);
            }
        }
        new
    }

    /// Outstanding untrusted reservations of `peer`, and in all.
    pub(super) fn counts(&self, peer: &str) -> (usize, usize) {
        (
            self.by_peer.get(peer).map_or(0, |(n, _)| *n),
            self.untrusted.len(),
        )
    }

    /// When `peer`'s latest outstanding untrusted reservation was made, if it has one.
    pub(super) fn latest(&self, peer: &str) -> Option<Instant> {
        self.by_peer.get(peer).map(|(_, t)| *t)
    }

    /// Counts an untrusted reservation in (its amounts are added to `held` by the caller).
    pub(super) fn add(&mut self, seq: u64, key: Arc<ResKey>, peer: &Arc<str>) {
        self.untrusted.insert(seq, key);
        let e = self
            .by_peer
            .entry(peer.clone())
            .or_insert((0, Instant::now()));
        e.0 += 1;
        e.1 = Instant::now();
    }

    /// Counts an untrusted reservation out.
    pub(super) fn remove(&mut self, seq: u64, peer: &str) {
        self.untrusted.remove(&seq);
        if let Some((n, _)) = self.by_peer.get_mut(peer) {
            *n -= 1;
            if *n == 0 {
                self.by_peer.remove(peer);
            }
        }
    }
}
