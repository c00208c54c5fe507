//! The service's options (`serve --name value`), read into [`Options`] at start (to refuse a
//! bad value before serving) and by each review from its context.

use std::time::Duration;

use crate::cluster::RecordAt;
use crate::record::{Bounds, MAX_BYTES, MAX_DRAINS};

/// The options as declared in the endpoint table: name, help, default.
pub const DECLARED: [(&str, &str, &str); 11] = [
    (
        "default-drain-timeout",
        "How long a Pod may drain when its annotation drain.admission-webhooks.io/timeout does not say.",
        "10m",
    ),
    (
        "max-drain-timeout",
        "The longest drain any Pod may ask for; longer timeouts are cut to this.",
        "1h",
    ),
    (
        "drain-call-timeout",
        "How long a Pod's drain endpoint has to answer one call; a Pod that does not answer is deleted (with a warning).",
        "500ms",
    ),
    (
        "review-deadline",
        "Every review is answered within this (at most 1s); what is not decided by then is allowed, with a warning.",
        "900ms",
    ),
    (
        "admin-users",
        "Comma-separated users whose deletions and evictions never wait for a drain.",
        "",
    ),
    (
        "admin-groups",
        "Comma-separated groups whose deletions and evictions never wait for a drain (e.g. system:masters).",
        "",
    ),
    (
        "drain-record",
        "Name of the ConfigMap in the service's namespace that records every drain's start and deadline.",
        "lifecycle-webhook-drains",
    ),
    (
        "api-server-peers",
        "Lease (in the drain record's namespace) where quota-state lists the addresses the API server's pods came from: an eviction from any other address, on a connection without the API server's certificate, starts no drain (LD-13). Empty: every address is taken for the API server's.",
        admission_kit::cluster::peers::LEASE,
    ),
    (
        "drain-record-max-drains",
        "The most drains the record holds at once (at most 4000); past it the namespace holding most gives up its oldest.",
        "4000",
    ),
    (
        "drain-record-max-bytes",
        "The most bytes the record's entries take (at most 524288: half a ConfigMap); past it as for --drain-record-max-drains.",
        "524288",
    ),
    (
        "drain-record-namespace",
        "Namespace of the drain record [default: $POD_NAMESPACE, else the service account's namespace].",
        "",
    ),
];

/// The longest `--review-deadline`: the API server is never held longer than this per review.
pub const MAX_REVIEW_DEADLINE: Duration = Duration::from_secs(1);

/// The options, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// `--default-drain-timeout`.
    pub default_timeout: Duration,
    /// `--max-drain-timeout`.
    pub max_timeout: Duration,
    /// `--drain-call-timeout`.
    pub call_timeout: Duration,
    /// `--review-deadline`.
    pub review_deadline: Duration,
    /// `--admin-users`.
    pub admin_users: Vec<String>,
    /// `--admin-groups`.
    pub admin_groups: Vec<String>,
    /// `--drain-record` in its namespace.
    pub record: RecordAt,
    /// `--api-server-peers`, in the record's namespace; `None` when empty.
    pub api_server_peers: Option<String>,
}

/// Where the record lives when `--drain-record-namespace` is empty; read once.
fn own_namespace() -> &'static str {
    static NS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    NS.get_or_init(|| {
        std::env::var("POD_NAMESPACE")
            .ok()
            .filter(|n| !n.is_empty())
            .or_else(|| admission_kit::cli::service_account_namespace().ok())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".to_owned())
    })
}

impl Options {
    /// Reads the options from `value` (an option's text by name).
    pub fn read<'a>(value: impl Fn(&str) -> &'a str) -> Result<Self, String> {
        let duration = |name: &str| {
            admission_kit::cli::duration(value(name)).map_err(|e| format!("--{name}: {e}"))
        };
        let list = |name: &str| -> Vec<String> {
            value(name)
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        };
        let count = |name: &str, most: usize| -> Result<usize, String> {
            match value(name).trim().parse::<usize>() {
                Ok(n) if (1..=most).contains(&n) => Ok(n),
                _ => Err(format!(
                    "--{name}: must be a whole number from 1 to {most}, not {:?}",
                    value(name)
                )),
            }
        };
        let o = Self {
            default_timeout: duration("default-drain-timeout")?,
            max_timeout: duration("max-drain-timeout")?,
            call_timeout: duration("drain-call-timeout")?,
            review_deadline: duration("review-deadline")?,
            admin_users: list("admin-users"),
            admin_groups: list("admin-groups"),
            api_server_peers: Some(value("api-server-peers").trim())
                .filter(|n| !n.is_empty())
                .map(str::to_owned),
            record: RecordAt {
                namespace: match value("drain-record-namespace") {
                    "" => own_namespace().to_owned(),
                    ns => ns.to_owned(),
                },
                name: value("drain-record").to_owned(),
                bounds: Bounds {
                    drains: count("drain-record-max-drains", MAX_DRAINS)?,
                    bytes: count("drain-record-max-bytes", MAX_BYTES)?,
                },
            },
        };
        if o.review_deadline.is_zero() || o.review_deadline > MAX_REVIEW_DEADLINE {
            return Err("--review-deadline: must be more than 0 and at most 1s".into());
        }
        if o.call_timeout.is_zero() || o.call_timeout >= o.review_deadline {
            return Err(
                "--drain-call-timeout: must be more than 0 and less than --review-deadline".into(),
            );
        }
        if o.default_timeout.is_zero() || o.max_timeout.is_zero() {
            return Err(
                "--default-drain-timeout and --max-drain-timeout: must be more than 0".into(),
            );
        }
        if o.record.name.is_empty() {
            return Err("--drain-record: must name a ConfigMap".into());
        }
        Ok(o)
    }

    /// The defaults (as declared), with `overrides`.
    pub fn with(overrides: &[(&str, &str)]) -> Result<Self, String> {
        Self::read(|name| {
            overrides
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| *v)
                .or_else(|| DECLARED.iter().find(|(n, ..)| *n == name).map(|(.., d)| *d))
                .unwrap_or_default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_read() {
        let o = Options::with(&[("drain-record-namespace", "ops")]).unwrap();
        assert_eq!(o.default_timeout, Duration::from_secs(600));
        assert_eq!(o.max_timeout, Duration::from_secs(3600));
        assert_eq!(o.call_timeout, Duration::from_millis(500));
        assert_eq!(o.review_deadline, Duration::from_millis(900));
        assert!(o.admin_users.is_empty() && o.admin_groups.is_empty());
        assert_eq!(
            o.record,
            RecordAt {
                namespace: "ops".into(),
                name: "lifecycle-webhook-drains".into(),
                bounds: Bounds::default(),
            }
        );
    }

    #[test]
    fn bad_values_are_refused_naming_the_flag() {
        for (flag, value, says) in [
            (
                "review-deadline",
                "2s",
                "--review-deadline: must be more than 0 and at most 1s",
            ),
            ("drain-call-timeout", "900ms", "--drain-call-timeout"),
            ("max-drain-timeout", "soon", "--max-drain-timeout"),
            ("drain-record", "", "--drain-record"),
            ("drain-record-max-drains", "0", "--drain-record-max-drains"),
            (
                "drain-record-max-bytes",
                "600000",
                "--drain-record-max-bytes",
            ),
        ] {
            let err = Options::with(&[(flag, value)]).unwrap_err();
            assert!(err.starts_with(says), "{flag}={value}: {err}");
        }
        let o = Options::with(&[("admin-groups", " ops, system:masters ,")]).unwrap();
        assert_eq!(o.admin_groups, ["ops", "system:masters"]);
    }
}
