//! Loopback ports for the servers a test starts.
//!
//! A port from `bind(127.0.0.1:0)` comes out of the kernel's ephemeral range, the range every
//! outgoing connection's local port is also drawn from: between the probe releasing it and the
//! child binding it, a connection opened by a test running alongside can take it (a clean-clone
//! run saw kube-apiserver exit with "address already in use"). So ports are picked below that
//! range, where the kernel never places a local port by itself, starting at an offset that
//! differs per process and never giving the same port twice in one process.
//!
//! No crate here does this (portpicker and friends probe `:0` or random ports inside the
//! ephemeral range, which is the race itself).

use std::net::TcpListener;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

/// Lowest port handed out: above the well-known and most registered service ports.
const LOW: u32 = 10_000;
/// The kernel's default when `ip_local_port_range` cannot be read.
const DEFAULT_EPHEMERAL_LOW: u32 = 32_768;
/// Fewer ports than this below the ephemeral range and we fall back to `:0`.
const MIN_SPAN: u32 = 1_000;

static NEXT: AtomicU32 = AtomicU32::new(0);
/// This process's (start offset, span), worked out once.
static RANGE: OnceLock<(u32, u32)> = OnceLock::new();

/// The first port of the kernel's ephemeral range.
fn ephemeral_low() -> u32 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(DEFAULT_EPHEMERAL_LOW)
}

/// How many ports lie below the ephemeral range from `LOW`, and this process's starting offset
/// among them: two test processes picking at once start far apart.
fn range() -> (u32, u32) {
    *RANGE.get_or_init(|| {
        let span = ephemeral_low()
            .min(u32::from(u16::MAX) + 1)
            .saturating_sub(LOW);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let start = std::process::id()
            .wrapping_mul(2_654_435_761)
            .wrapping_add(nanos)
            % span.max(1);
        (start, span)
    })
}

/// The first port from `cursor` on, in `LOW..LOW + span` starting at `start`, that can be bound.
fn pick(cursor: &AtomicU32, start: u32, span: u32) -> Option<u16> {
    (0..span).find_map(|_| {
        let i = cursor.fetch_add(1, Ordering::Relaxed);
        // Below `LOW + span <= 65536`, so it fits.
        let port = (LOW + start.wrapping_add(i) % span) as u16;
        TcpListener::bind(("127.0.0.1", port))
            .is_ok()
            .then_some(port)
    })
}

/// A loopback port nothing listens on, below the ephemeral range (see the module docs); the
/// kernel's `:0` choice only when that range leaves too little room below it.
pub fn free_port() -> std::io::Result<u16> {
    let (start, span) = range();
    if span >= MIN_SPAN
        && let Some(port) = pick(&NEXT, start, span)
    {
        return Ok(port);
    }
    TcpListener::bind("127.0.0.1:0")?
        .local_addr()
        .map(|a| a.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_bindable_and_below_the_ephemeral_range() {
        let high = ephemeral_low();
        let ports: Vec<u16> = (0..200).map(|_| free_port().unwrap()).collect();
        let mut seen = std::collections::HashSet::new();
        for &p in &ports {
            assert!(seen.insert(p), "port {p} handed out twice");
            if high - LOW >= MIN_SPAN {
                assert!(
                    (LOW..high).contains(&u32::from(p)),
                    "port {p} not below {high}"
                );
            }
        }
        // Each was free when handed out; bind them all at once to be sure none is shared.
        let held: Vec<TcpListener> = ports
            .iter()
            .map(|&p| TcpListener::bind(("127.0.0.1", p)).unwrap())
            .collect();
        assert_eq!(held.len(), ports.len());
    }

    #[test]
    fn a_listening_port_is_skipped() {
        let taken = free_port().unwrap();
        let _l = TcpListener::bind(("127.0.0.1", taken)).unwrap();
        // A cursor of its own that points at the taken port: the pick must step over it.
        let cursor = AtomicU32::new(0);
        let start = u32::from(taken) - LOW;
        let got = pick(&cursor, start, start + 100).unwrap();
        assert_ne!(got, taken);
        assert!(got > taken, "{got} is not after {taken}");
        assert!(cursor.load(Ordering::Relaxed) >= 2);
    }
}
