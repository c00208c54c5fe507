//! The drain record: when each Pod's drain started and when its deletion proceeds regardless.
//!
//! Kept as one ConfigMap in the service's own namespace (`--drain-record`), an entry per Pod
//! UID. Why there: every replica reads and writes the same object through the API server, so a
//! drain started by one replica has the same deadline on all of them and after any restart (a
//! replica's memory would restart the clock); tenants have no access to that namespace, so no
//! Pod owner can move a deadline (an annotation on the Pod would be theirs to rewrite); and the
//! service needs only `get` and `update` of that one name (no `create`, which RBAC cannot limit
//! to a name). Writes are compare-and-swap on the ConfigMap's resourceVersion, so two replicas
//! starting the same drain agree on the first one's start. Keyed by UID, a Pod recreated under
//! the same name (a StatefulSet's `llm-0`) drains anew.
//!
//! The functions here change the record's data; [`crate::cluster`] reads and writes it.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

/// How long an entry is kept after its deadline (its Pod is gone long before).
pub const RETENTION: Duration = Duration::from_secs(3600);

/// The most drains recorded at once.
pub const MAX_DRAINS: usize = 4000;

/// The most bytes the record's entries take (keys and values): half the ConfigMap's 1 MiB
/// limit, so that the record always fits, and every review's read-modify-write of it stays
/// small. An entry takes 150 to 450 bytes, by the length of its Pod's name.
pub const MAX_BYTES: usize = 512 * 1024;

/// How a drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ended {
    /// The Pod said it had drained.
    Done,
    /// The deadline passed first.
    TimedOut,
}

/// One Pod's drain, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drain {
    /// `namespace/name` of the Pod, for people reading the record.
    pub pod: String,
    /// When the first deletion or eviction started it (RFC 3339).
    pub started: String,
    /// When its deletion proceeds even if it has not drained (RFC 3339).
    pub deadline: String,
    /// How it ended, once it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<Ended>,
}

impl Drain {
    /// The start.
    pub fn started_at(&self) -> Result<Timestamp, String> {
        self.started
            .parse()
            .map_err(|e| format!("recorded start {:?}: {e}", self.started))
    }

    /// The deadline.
    pub fn deadline_at(&self) -> Result<Timestamp, String> {
        self.deadline
            .parse()
            .map_err(|e| format!("recorded deadline {:?}: {e}", self.deadline))
    }
}

/// What [`begin`] found or added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Begun {
    /// The Pod's drain.
    pub drain: Drain,
    /// Whether this call started it.
    pub new: bool,
}

/// The drain of Pod `uid` in `data`, started `now` with `timeout` when none is recorded (an
/// entry that does not read is replaced). Returns it and whether `data` changed. Expired
/// entries are dropped whenever one is added.
pub fn begin(
    data: &mut BTreeMap<String, String>,
    uid: &str,
    pod: &str,
    timeout: Duration,
    now: Timestamp,
) -> Result<(Begun, bool), String> {
    begin_within(data, uid, pod, timeout, now, Bounds::default())
}

/// How much the record holds at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Entries ([`MAX_DRAINS`]).
    pub drains: usize,
    /// Bytes of keys and values ([`MAX_BYTES`]).
    pub bytes: usize,
}

impl Default for Bounds {
    fn default() -> Self {
        Self {
            drains: MAX_DRAINS,
            bytes: MAX_BYTES,
        }
    }
}

/// [`begin`] within `bounds`.
pub fn begin_within(
    data: &mut BTreeMap<String, String>,
    uid: &str,
    pod: &str,
    timeout: Duration,
    now: Timestamp,
    bounds: Bounds,
) -> Result<(Begun, bool), String> {
    if let Some(drain) = data.get(uid).and_then(|t| read(t)) {
        let begun = Begun { drain, new: false };
        return Ok((begun, false));
    }
    prune(data, now);
    let now = Timestamp::from_second(now.as_second()).map_err(|e| e.to_string())?;
    let deadline = now
        .checked_add(timeout)
        .map_err(|e| format!("deadline {timeout:?} after {now}: {e}"))?;
    let drain = Drain {
        pod: pod.to_owned(),
        started: now.to_string(),
        deadline: deadline.to_string(),
        ended: None,
    };
    let text = serde_json::to_string(&drain).map_err(|e| e.to_string())?;
    make_room(data, namespace_of(pod), uid.len() + text.len(), bounds)?;
    data.insert(uid.to_owned(), text);
    Ok((Begun { drain, new: true }, true))
}

/// The namespace part of an entry's `namespace/name`.
fn namespace_of(pod: &str) -> &str {
    pod.split_once('/').map_or(pod, |(ns, _)| ns)
}

/// Room for one more entry of `bytes` for a Pod of `namespace`. When the record is full, the
/// namespace holding the most entries gives one up (an ended drain first, else its latest), as
/// long as it holds more than `namespace` would: a tenant deleting its own Pods without end
/// loses its own records, never another tenant's (whose next drain would then go unrecorded,
/// its Pods deleted at once).
fn make_room(
    data: &mut BTreeMap<String, String>,
    namespace: &str,
    bytes: usize,
    bounds: Bounds,
) -> Result<(), String> {
    loop {
        let used: usize = data.iter().map(|(k, v)| k.len() + v.len()).sum();
        if data.len() < bounds.drains && used + bytes <= bounds.bytes {
            return Ok(());
        }
        let mut by_ns: BTreeMap<String, Vec<(String, Drain)>> = BTreeMap::new();
        for (uid, text) in data.iter() {
            if let Some(d) = read(text) {
                by_ns
                    .entry(namespace_of(&d.pod).to_owned())
                    .or_default()
                    .push((uid.clone(), d));
            }
        }
        let mine = by_ns.get(namespace).map_or(0, Vec::len);
        let Some((largest, most)) = by_ns.iter().max_by_key(|(_, e)| e.len()) else {
            return Err(format!(
                "the drain record is full ({} entries, {used} bytes)",
                data.len()
            ));
        };
        // Among the largest itself: its own records give way.
        let (from, entries) = match by_ns.get(namespace) {
            Some(own) if mine >= most.len() => (namespace, own),
            _ => (largest.as_str(), most),
        };
        let victim = entries
            .iter()
            .filter(|(_, d)| d.ended.is_some())
            .min_by(|a, b| a.1.started.cmp(&b.1.started))
            .or_else(|| entries.iter().max_by(|a, b| a.1.started.cmp(&b.1.started)))
            .map(|(uid, _)| uid.clone());
        let from = from.to_owned();
        match victim {
            Some(uid) => {
                tracing::warn!(
                    namespace = %from,
                    "drain record full: a drain of the namespace holding the most is forgotten",
                );
                data.remove(&uid);
            }
            None => return Err("the drain record is full".into()),
        }
    }
}

/// Marks the drain of `uid` ended; whether `data` changed (it had not ended before).
pub fn end(data: &mut BTreeMap<String, String>, uid: &str, how: Ended) -> bool {
    let Some(mut drain) = data.get(uid).and_then(|t| read(t)) else {
        return false;
    };
    if drain.ended.is_some() {
        return false;
    }
    drain.ended = Some(how);
    match serde_json::to_string(&drain) {
        Ok(text) => {
            data.insert(uid.to_owned(), text);
            true
        }
        Err(_) => false,
    }
}

fn read(text: &str) -> Option<Drain> {
    serde_json::from_str(text).ok()
}

/// Drops entries past their deadline by more than [`RETENTION`], and entries that do not read.
fn prune(data: &mut BTreeMap<String, String>, now: Timestamp) {
    data.retain(|_, text| {
        read(text)
            .and_then(|d| d.deadline_at().ok())
            .and_then(|d| d.checked_add(RETENTION).ok())
            .is_some_and(|kept_until| kept_until > now)
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn the_first_start_is_kept_and_later_ones_find_it() {
        let mut data = BTreeMap::new();
        let ten = Duration::from_secs(600);
        let (b, changed) = begin(
            &mut data,
            "u1",
            "ns/llm-0",
            ten,
            at("2026-11-26T06:00:00.7Z"),
        )
        .unwrap();
        assert!(b.new && changed);
        assert_eq!(b.drain.started, "2026-11-26T06:00:00Z");
        assert_eq!(b.drain.deadline, "2026-11-26T06:10:00Z");
        // A later review, even with a longer timeout, finds the first deadline.
        let (again, changed) = begin(
            &mut data,
            "u1",
            "ns/llm-0",
            Duration::from_secs(3600),
            at("2026-11-26T06:05:00Z"),
        )
        .unwrap();
        assert!(!again.new && !changed);
        assert_eq!(again.drain, b.drain);
    }

    #[test]
    fn end_is_recorded_once() {
        let mut data = BTreeMap::new();
        begin(
            &mut data,
            "u1",
            "ns/p",
            Duration::from_secs(60),
            at("2026-11-26T06:00:00Z"),
        )
        .unwrap();
        assert!(end(&mut data, "u1", Ended::Done));
        assert!(!end(&mut data, "u1", Ended::TimedOut));
        assert!(!end(&mut data, "nobody", Ended::Done));
        assert_eq!(read(&data["u1"]).unwrap().ended, Some(Ended::Done));
    }

    #[test]
    fn expired_and_unreadable_entries_are_dropped_when_one_is_added() {
        let mut data = BTreeMap::new();
        begin(
            &mut data,
            "old",
            "ns/a",
            Duration::from_secs(60),
            at("2026-11-26T04:00:00Z"),
        )
        .unwrap();
        begin(
            &mut data,
            "recent",
            "ns/b",
            Duration::from_secs(60),
            at("2026-11-26T05:30:00Z"),
        )
        .unwrap();
        data.insert("garbage".into(), "{".into());
        begin(
            &mut data,
            "new",
            "ns/c",
            Duration::from_secs(60),
            at("2026-11-26T06:00:00Z"),
        )
        .unwrap();
        let keys: Vec<&str> = data.keys().map(String::as_str).collect();
        assert_eq!(keys, ["new", "recent"]);
    }

    #[test]
    fn a_full_record_takes_room_from_the_namespace_holding_the_most() {
        let mut data = BTreeMap::new();
        let now = at("2026-11-26T06:00:00Z");
        let minute = Duration::from_secs(60);
        let bounds = Bounds {
            drains: 100,
            bytes: 16 * 1024,
        };
        let begin = |data: &mut BTreeMap<String, String>, uid: &str, pod: &str| {
            begin_within(data, uid, pod, minute, now, bounds)
        };
        // One tenant deletes its own Pods, with the longest names, without end: its own oldest
        // records give way to its newest, and the record stays within its bounds.
        let long = "x".repeat(253);
        for i in 0..300 {
            begin(&mut data, &format!("t{i}"), &format!("tenant/{long}-{i}")).unwrap();
            let used: usize = data.iter().map(|(k, v)| k.len() + v.len()).sum();
            assert!(
                used <= bounds.bytes && data.len() <= bounds.drains,
                "{used} bytes"
            );
        }
        // Another tenant's drains are recorded all the same, and kept while the first goes on.
        for i in 0..20 {
            begin(&mut data, &format!("o{i}"), &format!("other/p-{i}")).unwrap();
        }
        for i in 300..400 {
            begin(&mut data, &format!("t{i}"), &format!("tenant/{long}-{i}")).unwrap();
        }
        for i in 0..20 {
            let (b, _) = begin(&mut data, &format!("o{i}"), &format!("other/p-{i}")).unwrap();
            assert!(!b.new, "other's drain {i} is still recorded");
        }
        // With the default bounds, 4,000 entries of the longest names fit the ConfigMap.
        let entry = serde_json::to_string(&Drain {
            pod: format!("{}/{}", "n".repeat(63), "x".repeat(253)),
            started: "2026-11-26T06:00:00Z".into(),
            deadline: "2026-11-26T07:00:00Z".into(),
            ended: Some(Ended::TimedOut),
        })
        .unwrap();
        assert!(MAX_BYTES + 36 + entry.len() < 1024 * 1024);
    }
}
