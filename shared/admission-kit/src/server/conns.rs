//! The open connections of a server, oldest first. A connection accepted at the cap (kept below
//! the process's file descriptor limit) makes the oldest idle connection close; when every open
//! connection is answering, the new one is turned away instead. A flood of idle connections can
//! then never stop the server accepting the API server's, nor make `accept` fail and spin.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

#[derive(Debug)]
struct Entry {
    busy: Arc<AtomicUsize>,
    evict: Arc<Notify>,
}

/// The registry.
#[derive(Debug)]
pub struct Connections {
    cap: usize,
    next: AtomicU64,
    open: Mutex<BTreeMap<u64, Entry>>,
}

/// One registered connection; dropping it (when the connection's task ends) frees its place.
#[derive(Debug)]
pub struct Registered {
    id: u64,
    /// Requests being answered on it (0: idle).
    pub busy: Arc<AtomicUsize>,
    /// Notified when it should close to make room.
    pub evict: Arc<Notify>,
    owner: Arc<Connections>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.owner.lock().remove(&self.id);
    }
}

/// A connection's request being answered; marks it busy while alive.
#[derive(Debug)]
pub struct Busy(Arc<AtomicUsize>);

impl Busy {
    /// Marks one more request in flight on the connection of `busy`.
    pub fn start(busy: &Arc<AtomicUsize>) -> Self {
        busy.fetch_add(1, Ordering::AcqRel);
        Self(busy.clone())
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Connections {
    /// At most `cap` connections (at least 1).
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(Self {
            cap: cap.max(1),
            next: AtomicU64::new(0),
            open: Mutex::new(BTreeMap::new()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Entry>> {
        // Entries are inserted and removed whole: a panic elsewhere cannot leave one half-made.
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers an accepted connection.
    pub fn register(self: &Arc<Self>) -> Registered {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (busy, evict) = (Arc::new(AtomicUsize::new(0)), Arc::new(Notify::new()));
        self.lock().insert(
            id,
            Entry {
                busy: busy.clone(),
                evict: evict.clone(),
            },
        );
        Registered {
            id,
            busy,
            evict,
            owner: self.clone(),
        }
    }

    /// Whether a newly accepted connection may stay: below the cap, or at it once the oldest
    /// idle connection has been asked to close. False when every open connection is answering.
    pub fn make_room(&self) -> bool {
        let open = self.lock();
        if open.len() < self.cap {
            return true;
        }
        let mut open = open;
        let idle = open
            .iter()
            .find(|(_, e)| e.busy.load(Ordering::Acquire) == 0)
            .map(|(id, _)| *id);
        match idle.and_then(|id| open.remove(&id)) {
            Some(e) => {
                // Out of the registry now, not when its task gets round to closing: a burst of
                // accepts must not count the same leaving connection as room again and again.
                e.evict.notify_one();
                true
            }
            None => false,
        }
    }

    /// Connections open now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether none is open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The default cap: the soft file descriptor limit less room for everything else the process
/// opens (watches, the metrics port, certificate files), at least 64.
#[allow(unsafe_code)] // getrlimit: libc has no safe wrapper.
pub fn default_cap() -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct we pass.
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        usize::try_from(lim.rlim_cur).unwrap_or(usize::MAX)
    } else {
        1024
    };
    soft.saturating_sub(128).max(64)
}

/// TLS handshakes in progress: at most `total` at once, `per_peer` from one address. A
/// connection that never starts TLS (or starts it slowly) holds a task and its buffers until the
/// handshake timeout; without a bound of their own, thousands of them from any Pod would take
/// the memory the connection cap was sized for, client authentication or not.
#[derive(Debug)]
pub struct Handshakes {
    total: Arc<tokio::sync::Semaphore>,
    per_peer: usize,
    by_peer: Arc<Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>,
}

/// One handshake's place; dropping it (when the handshake ends, either way) frees it.
#[derive(Debug)]
pub struct Handshaking {
    _permit: tokio::sync::OwnedSemaphorePermit,
    ip: std::net::IpAddr,
    by_peer: Arc<Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>,
}

impl Drop for Handshaking {
    fn drop(&mut self) {
        let mut m = self.by_peer.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = m.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.ip);
            }
        }
    }
}

impl Handshakes {
    /// At most `total` handshakes at once, `per_peer` from one address (each at least 1).
    pub fn new(total: usize, per_peer: usize) -> Self {
        Self {
            total: Arc::new(tokio::sync::Semaphore::new(total.max(1))),
            per_peer: per_peer.max(1),
            by_peer: Arc::default(),
        }
    }

    /// A place for a handshake from `ip`, or `None`: the connection is closed at once.
    pub fn begin(&self, ip: std::net::IpAddr) -> Option<Handshaking> {
        let mut m = self.by_peer.lock().unwrap_or_else(|p| p.into_inner());
        let n = m.entry(ip).or_default();
        if *n >= self.per_peer {
            return None;
        }
        let permit = match self.total.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                if *n == 0 {
                    m.remove(&ip);
                }
                return None;
            }
        };
        *n += 1;
        Some(Handshaking {
            _permit: permit,
            ip,
            by_peer: self.by_peer.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn at_the_cap_the_oldest_idle_connection_is_asked_to_leave() {
        let asked = |r: &Registered| {
            let evict = r.evict.clone();
            async move {
                tokio::time::timeout(std::time::Duration::from_millis(100), evict.notified())
                    .await
                    .is_ok()
            }
        };
        let c = Connections::new(2);
        let (a, b) = (c.register(), c.register());
        assert!(!c.is_empty());
        let in_flight = Busy::start(&a.busy);
        assert!(c.make_room(), "at the cap, b can leave");
        // a is older but busy: b is asked, a is not; b no longer counts.
        assert!(asked(&b).await);
        assert!(!asked(&a).await);
        assert_eq!(c.len(), 1);
        let newcomer = c.register();
        let _new_busy = Busy::start(&newcomer.busy);
        assert!(!c.make_room(), "every connection answering: no room");
        drop(in_flight);
        assert!(c.make_room());
        assert!(asked(&a).await, "a is idle now, and the oldest");
        // A burst of accepts never counts a leaving connection as room twice: a is gone from
        // the registry, and only the busy newcomer is left in it.
        assert_eq!(c.len(), 1);
        drop((a, b));
        assert_eq!(c.len(), 1, "dropping the evicted ones changes nothing");
    }

    #[test]
    fn handshakes_are_bounded_in_all_and_per_address() {
        let h = Handshakes::new(3, 2);
        let (a, b) = ("10.0.0.9".parse().unwrap(), "10.0.0.1".parse().unwrap());
        let first = h.begin(a).unwrap();
        let _second = h.begin(a).unwrap();
        assert!(h.begin(a).is_none(), "two per address");
        let _other = h.begin(b).unwrap();
        assert!(h.begin(b).is_none(), "three in all");
        drop(first);
        assert!(h.begin(b).is_some(), "an ended handshake frees its place");
    }
}
