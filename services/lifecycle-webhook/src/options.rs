//! The service's options (`serve --name value`): [`Flags`] as given, [`Options`] once checked
//! together at start (a bad value refuses to start), held by the rules.

use std::time::Duration;

use crate::cluster::RecordAt;
use crate::record::{Bounds, MAX_BYTES, MAX_DRAINS};

/// The service's flags of `serve` and `review`, as given; [`Flags::options`] checks them together.
#[derive(clap::Args, Debug, Clone, PartialEq, Eq)]
pub struct Flags {
    /// How long a Pod may drain when its annotation drain.admission-webhooks.io/timeout does not
    /// say.
    #[arg(long, default_value = "10m", value_parser = admission_kit::cli::duration)]
    pub default_drain_timeout: Duration,
    /// The longest drain any Pod may ask for; longer timeouts are cut to this.
    #[arg(long, default_value = "1h", value_parser = admission_kit::cli::duration)]
    pub max_drain_timeout: Duration,
    /// How long a Pod's drain endpoint has to answer one call; a Pod that does not answer is
    /// deleted (with a warning).
    #[arg(long, default_value = "500ms", value_parser = admission_kit::cli::duration)]
    pub drain_call_timeout: Duration,
    /// Every review is answered within this (at most 1s); what is not decided by then is
    /// allowed, with a warning.
    #[arg(long, default_value = "900ms", value_parser = admission_kit::cli::duration)]
    pub review_deadline: Duration,
    /// Comma-separated users whose deletions and evictions never wait for a drain.
    #[arg(long, value_delimiter = ',')]
    pub admin_users: Vec<String>,
    /// Comma-separated groups whose deletions and evictions never wait for a drain (e.g.
    /// system:masters).
    #[arg(long, value_delimiter = ',')]
    pub admin_groups: Vec<String>,
    /// Name of the ConfigMap in the service's namespace that records every drain's start and
    /// deadline.
    #[arg(long, default_value = "lifecycle-webhook-drains")]
    pub drain_record: String,
    /// Lease (in the drain record's namespace) where quota-state lists the addresses the API
    /// server's pods came from: an eviction from any other address, on a connection without the
    /// API server's certificate, starts no drain (LD-13). Empty: every address is taken for the
    /// API server's.
    #[arg(long, default_value = admission_kit::cluster::peers::LEASE)]
    pub api_server_peers: String,
    /// The most drains the record holds at once (at most 4000); past it the namespace holding
    /// most gives up its oldest.
    #[arg(long, default_value_t = MAX_DRAINS, value_parser = counted(MAX_DRAINS))]
    pub drain_record_max_drains: usize,
    /// The most bytes the record's entries take (at most 524288: half a ConfigMap); past it as
    /// for --drain-record-max-drains.
    #[arg(long, default_value_t = MAX_BYTES, value_parser = counted(MAX_BYTES))]
    pub drain_record_max_bytes: usize,
    /// Namespace of the drain record [default: $POD_NAMESPACE, else the service account's
    /// namespace].
    #[arg(long)]
    pub drain_record_namespace: Option<String>,
}

/// A whole number from 1 to `most`.
fn counted(most: usize) -> impl Fn(&str) -> Result<usize, String> + Clone {
    move |s| match s.trim().parse::<usize>() {
        Ok(n) if (1..=most).contains(&n) => Ok(n),
        _ => Err(format!("must be a whole number from 1 to {most}")),
    }
}

impl Default for Flags {
    fn default() -> Self {
        Self {
            default_drain_timeout: Duration::from_secs(600),
            max_drain_timeout: Duration::from_secs(3600),
            drain_call_timeout: Duration::from_millis(500),
            review_deadline: Duration::from_millis(900),
            admin_users: Vec::new(),
            admin_groups: Vec::new(),
            drain_record: "lifecycle-webhook-drains".into(),
            api_server_peers: admission_kit::cluster::peers::LEASE.into(),
            drain_record_max_drains: MAX_DRAINS,
            drain_record_max_bytes: MAX_BYTES,
            drain_record_namespace: None,
        }
    }
}

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

/// Where the record lives when `--drain-record-namespace` is not given.
fn own_namespace() -> String {
    std::env::var("POD_NAMESPACE")
        .ok()
        .filter(|n| !n.is_empty())
        .or_else(|| admission_kit::cli::service_account_namespace().ok())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".to_owned())
}

impl Flags {
    /// The options these flags give, or why they cannot be used together.
    pub fn options(self) -> Result<Options, String> {
        let list = |v: Vec<String>| -> Vec<String> {
            v.iter()
                .map(|s| s.trim())
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        };
        let o = Options {
            default_timeout: self.default_drain_timeout,
            max_timeout: self.max_drain_timeout,
            call_timeout: self.drain_call_timeout,
            review_deadline: self.review_deadline,
            admin_users: list(self.admin_users),
            admin_groups: list(self.admin_groups),
            api_server_peers: Some(self.api_server_peers.trim())
                .filter(|n| !n.is_empty())
                .map(str::to_owned),
            record: RecordAt {
                namespace: self
                    .drain_record_namespace
                    .filter(|n| !n.is_empty())
                    .unwrap_or_else(own_namespace),
                name: self.drain_record,
                bounds: Bounds {
                    drains: self.drain_record_max_drains,
                    bytes: self.drain_record_max_bytes,
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
}

impl Options {
    /// The options of these flags (`--name=value`, as `serve` reads them).
    pub fn parse<'a>(flags: impl IntoIterator<Item = &'a str>) -> Result<Self, String> {
        admission_kit::cli::parse_options::<Flags, _, _>(flags)?.options()
    }

    /// The defaults, with `overrides` (flag names without dashes).
    pub fn with(overrides: &[(&str, &str)]) -> Result<Self, String> {
        let flags: Vec<String> = overrides
            .iter()
            .map(|(n, v)| format!("--{n}={v}"))
            .collect();
        Self::parse(flags.iter().map(String::as_str))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_defaults_are_flags_default() {
        assert_eq!(
            admission_kit::cli::defaults::<Flags>(),
            Ok(Flags::default())
        );
    }

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
            assert!(err.contains(says), "{flag}={value}: {err}");
        }
        let o = Options::with(&[("admin-groups", " ops, system:masters ,")]).unwrap();
        assert_eq!(o.admin_groups, ["ops", "system:masters"]);
    }
}
