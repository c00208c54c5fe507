//! The addresses the API server's connections come from, as quota-state remembers them in an
//! annotation of a Lease. Where the API server presents no client certificate, a review's
//! address is the one thing about it a forger cannot choose; an address is known as the API
//! server's once a pod admitted from it was created, which only the API server brings about.
//! quota-state writes the annotation, lifecycle-webhook reads it: the format and its bounds are
//! here, shared by both.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// The annotation holding the addresses (JSON: [`Remembered`]).
pub const ANNOTATION: &str = "quota-state.admission-webhooks.io/api-server-peers";

/// The Lease that holds it, in the services' namespace, by default.
pub const LEASE: &str = "quota-state-peers";

/// How long after it was last seen an address still counts: an address can pass to another
/// client (a Pod's IP reused), so an old one does not.
pub const MAX_AGE: Duration = Duration::from_secs(3600);

/// Addresses remembered at most (the API server's: a handful per cluster).
pub const MAX_REMEMBERED: usize = 16;

/// The annotation's content.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remembered {
    /// Addresses, the most recently seen first.
    pub peers: Vec<Entry>,
}

/// One address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The address, as a webhook saw the API server's connection.
    pub address: String,
    /// When a pod admitted from it was last seen created, in seconds since the Unix epoch.
    pub seen: u64,
}

fn epoch_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The annotation's text for `peers` (each with how long ago it was seen) at `now`; the first
/// [`MAX_REMEMBERED`].
pub fn encode(peers: &[(String, Duration)], now: SystemTime) -> String {
    let now = epoch_secs(now);
    let r = Remembered {
        peers: peers
            .iter()
            .take(MAX_REMEMBERED)
            .map(|(address, ago)| Entry {
                address: address.clone(),
                seen: now.saturating_sub(ago.as_secs()),
            })
            .collect(),
    };
    serde_json::to_string(&r).unwrap_or_default()
}

/// The addresses of an annotation's `text` that count at `now`, each with how long ago it was
/// seen: IP addresses only, seen within [`MAX_AGE`], at most [`MAX_REMEMBERED`]. A text that
/// does not read names none.
pub fn decode(text: &str, now: SystemTime) -> Vec<(String, Duration)> {
    let now = epoch_secs(now);
    let Ok(r) = serde_json::from_str::<Remembered>(text) else {
        return Vec::new();
    };
    r.peers
        .into_iter()
        .filter(|e| e.address.parse::<std::net::IpAddr>().is_ok())
        .map(|e| (e.address, Duration::from_secs(now.saturating_sub(e.seen))))
        .filter(|(_, ago)| *ago <= MAX_AGE)
        .take(MAX_REMEMBERED)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_addresses_read_back_until_they_are_old() {
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let peers = vec![
            ("10.0.0.1".to_owned(), Duration::from_secs(5)),
            ("fd00::1".to_owned(), Duration::from_secs(3000)),
            ("10.0.0.2".to_owned(), Duration::from_secs(4000)),
        ];
        let text = encode(&peers, now);
        let back = decode(&text, now);
        assert_eq!(
            back.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(),
            ["10.0.0.1", "fd00::1"],
            "an address seen more than an hour ago does not count"
        );
        assert_eq!(back[0].1, Duration::from_secs(5));
        assert_eq!(decode(&text, now + Duration::from_secs(3590)).len(), 1);
    }

    #[test]
    fn what_does_not_read_names_nothing() {
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        for text in [
            "",
            "null",
            "{\"peers\": 3}",
            "[\"10.0.0.1\"]",
            "{\"peers\": [{\"address\": \"ns/10.0.0.1\", \"seen\": 1800000000}]}",
            "{\"peers\": [{\"address\": \"10.0.0.1\\n\", \"seen\": 1800000000}]}",
        ] {
            assert!(decode(text, now).is_empty(), "{text}");
        }
        let many: Vec<(String, Duration)> = (0..40)
            .map(|i| (format!("10.0.0.{i}"), Duration::ZERO))
            .collect();
        assert_eq!(decode(&encode(&many, now), now).len(), MAX_REMEMBERED);
    }
}
