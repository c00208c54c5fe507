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

/// The most drains recorded at once: the ConfigMap stays well under its 1 MiB limit (an entry
/// is about 150 bytes).
pub const MAX_DRAINS: usize = 4000;

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
    if let Some(drain) = data.get(uid).and_then(|t| read(t)) {
        let begun = Begun { drain, new: false };
        return Ok((begun, false));
    }
    prune(data, now);
    if data.len() >= MAX_DRAINS {
        return Err(format!(
            "the drain record already holds {MAX_DRAINS} drains"
        ));
    }
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
    data.insert(uid.to_owned(), text);
    Ok((Begun { drain, new: true }, true))
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
    fn a_full_record_refuses_new_drains() {
        let mut data = BTreeMap::new();
        let now = at("2026-11-26T06:00:00Z");
        let (one, _) = begin(&mut data, "u0", "ns/p", Duration::from_secs(60), now).unwrap();
        let text = serde_json::to_string(&one.drain).unwrap();
        data.extend((1..MAX_DRAINS).map(|i| (format!("u{i}"), text.clone())));
        let err = begin(&mut data, "one-more", "ns/p", Duration::from_secs(60), now).unwrap_err();
        assert!(err.contains("already holds 4000 drains"), "{err}");
        // Entries recorded before are still found.
        assert!(begin(&mut data, "u7", "ns/p", Duration::from_secs(60), now).is_ok());
    }
}
