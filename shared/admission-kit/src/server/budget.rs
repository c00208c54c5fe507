//! The in-flight budget every endpoint of a server shares: how many reviews, and how many body
//! bytes, may be held at once, and how much of that one peer may hold. The server reserves
//! before reading a body; the allocator trim ([`crate::server::trim`]) reads it to know when a
//! burst is over.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use crate::review::handler::Peer;

/// What all reviews in flight may hold together: bytes and a count, shared by every endpoint;
/// and what one address that has not proved to be the API server (a connection without its
/// client certificate) may hold of them: where the API server presents no certificate, any
/// Pod can post reviews, and a few connections declaring large bodies and sending nothing would
/// otherwise take the whole budget from the API server.
#[derive(Debug)]
pub struct Budget {
    bytes: Arc<tokio::sync::Semaphore>,
    reviews: Arc<tokio::sync::Semaphore>,
    total_bytes: usize,
    /// What one unauthenticated address may hold: reviews, bytes.
    per_peer: (usize, usize),
    /// What each unauthenticated address holds now (absent when nothing).
    held: Arc<Mutex<HashMap<IpAddr, (usize, usize)>>>,
}

/// A review's place in the budget; dropping it gives the place back.
#[derive(Debug)]
pub(crate) struct Reserved {
    _review: tokio::sync::OwnedSemaphorePermit,
    _bytes: tokio::sync::OwnedSemaphorePermit,
    /// The address charged, and the bytes charged to it.
    peer: Option<(IpAddr, usize)>,
    held: Arc<Mutex<HashMap<IpAddr, (usize, usize)>>>,
}

impl Drop for Reserved {
    fn drop(&mut self) {
        give_back(&self.held, self.peer);
    }
}

/// Takes one review of `charged`'s bytes off its address.
fn give_back(held: &Mutex<HashMap<IpAddr, (usize, usize)>>, charged: Option<(IpAddr, usize)>) {
    if let Some((ip, bytes)) = charged {
        let mut held = lock(held);
        if let Some(h) = held.get_mut(&ip) {
            h.0 -= 1;
            h.1 -= bytes;
            if h.0 == 0 {
                held.remove(&ip);
            }
        }
    }
}

fn lock(
    m: &Mutex<HashMap<IpAddr, (usize, usize)>>,
) -> std::sync::MutexGuard<'_, HashMap<IpAddr, (usize, usize)>> {
    // Entries change by whole adds and subtracts: a panic elsewhere cannot leave one half-made.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Budget {
    /// `bytes` (at least `body_limit`, so a body the limit allows can always be admitted alone)
    /// and `reviews` at once; one unauthenticated address at most a quarter of each (at least
    /// one review and one largest body).
    pub fn new(bytes: usize, body_limit: usize, reviews: usize) -> Self {
        let total_bytes = bytes.max(body_limit).max(1);
        let reviews = reviews.max(1);
        Self {
            bytes: Arc::new(tokio::sync::Semaphore::new(total_bytes)),
            reviews: Arc::new(tokio::sync::Semaphore::new(reviews)),
            total_bytes,
            per_peer: (
                (reviews / 4).max(1),
                (total_bytes / 4).max(body_limit).max(1),
            ),
            held: Arc::default(),
        }
    }

    /// Bytes reserved by reviews in flight now.
    pub fn in_use(&self) -> usize {
        self.total_bytes
            .saturating_sub(self.bytes.available_permits())
    }

    /// Reserves one review of `bytes` from `peer`, or `None` when the budget is spent, or
    /// `peer`'s part of it (a peer that proved the API server's certificate has no part: all of
    /// it).
    pub(crate) fn reserve(&self, peer: Option<Peer>, bytes: usize) -> Option<Reserved> {
        let bytes = bytes.max(1);
        let charged = match peer {
            Some(p) if !p.authenticated => {
                let mut held = lock(&self.held);
                let h = held.entry(p.ip).or_default();
                if h.0 + 1 > self.per_peer.0 || h.1 + bytes > self.per_peer.1 {
                    if h.0 == 0 {
                        held.remove(&p.ip);
                    }
                    return None;
                }
                h.0 += 1;
                h.1 += bytes;
                Some((p.ip, bytes))
            }
            _ => None,
        };
        let reserved = Reserved {
            _review: match self.reviews.clone().try_acquire_owned() {
                Ok(p) => p,
                Err(_) => return self.undo(charged),
            },
            _bytes: match self
                .bytes
                .clone()
                .try_acquire_many_owned(u32::try_from(bytes).unwrap_or(u32::MAX))
            {
                Ok(p) => p,
                Err(_) => return self.undo(charged),
            },
            peer: charged,
            held: self.held.clone(),
        };
        Some(reserved)
    }

    /// Gives back what [`Budget::reserve`] charged a peer before the shared budget refused.
    fn undo(&self, charged: Option<(IpAddr, usize)>) -> Option<Reserved> {
        give_back(&self.held, charged);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(ip: &str, authenticated: bool) -> Option<Peer> {
        Some(Peer {
            ip: ip.parse().unwrap(),
            authenticated,
        })
    }

    #[test]
    fn one_address_holds_at_most_a_quarter() {
        let b = Budget::new(4 << 20, 1 << 20, 8);
        let forger = from("10.0.0.9", false);
        // Two reviews (a quarter of 8), or 1 MiB of declared bodies.
        let held: Vec<_> = (0..8).filter_map(|_| b.reserve(forger, 10)).collect();
        assert_eq!(held.len(), 2);
        drop(held);
        let big = b.reserve(forger, 1 << 20).expect("one largest body");
        assert!(
            b.reserve(forger, 1).is_none(),
            "its quarter of the bytes is held"
        );
        // Others keep the rest; a connection with the API server's certificate may take all
        // that is left.
        let other = b
            .reserve(from("10.0.0.1", false), 1 << 20)
            .expect("another address keeps its own part");
        let api: Vec<_> = (0..8)
            .filter_map(|_| b.reserve(from("10.0.0.1", true), 100))
            .collect();
        assert_eq!(api.len(), 6, "the 8 reviews less the 2 held");
        drop((big, other, api));
        // What was charged is given back, refusals included.
        assert!(lock(&b.held).is_empty());
    }
}
