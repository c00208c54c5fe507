//! One ElasticQuota as quota-state's ledger and the webhook's offline checks both read it, the
//! quota names and resources the pod rules count (PV-4.2, PV-4.6), and the fleet's names.

use admission_compat::go::Quantity as GoQuantity;
use admission_compat::resources::{Amount, Amounts};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::tree::{self, QuotaInfo};
use crate::types::{ElasticQuota, ResourceList};

/// One quota as the ledger (and the webhook's offline tree) needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaSpec {
    /// The tree entry: name (unique across namespaces upstream; duplicates are refused at
    /// admission), namespace, parent, tree id, min and max as written.
    pub info: QuotaInfo,
    /// `spec.max`.
    pub max: Amounts,
    /// The admission limit: the `admission` annotation when non-empty, else `spec.max`.
    pub limit: Amounts,
    /// Namespaces bound by the `namespaces` annotation.
    pub namespaces: Vec<String>,
    /// In a fleet, the member clusters it spans ([`SPANS`] annotation); `None`: every member.
    pub members: Option<Vec<String>>,
}

/// ElasticQuota annotation naming the member clusters a quota spans in a fleet
/// (comma-separated); absent or empty: every member. A pod of another member cannot be charged
/// to it, nor to a quota below it.
pub const SPANS: &str = "fleet.admission-webhooks.io/members";

/// The members a [`SPANS`] value names (`None` when it names none).
pub fn spans_of(value: &str) -> Option<Vec<String>> {
    let mut members: Vec<String> = value
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .map(str::to_owned)
        .collect();
    members.sort();
    members.dedup();
    (!members.is_empty()).then_some(members)
}

/// A quota's list as amounts. A value beyond 128-bit billionths counts as the largest one: as a
/// limit it is then above any usage the ledger can hold (bounded well below, see
/// quota-state's largest countable amount), so every comparison against it stays exact. Text that does not parse
/// is skipped (the CRD's pattern keeps it out of the cluster).
fn amounts_of(rl: Option<&ResourceList>) -> Amounts {
    rl.into_iter()
        .flatten()
        .filter_map(|(k, q)| {
            let p = GoQuantity::parse(&q.0).ok()?;
            let p = p.value();
            Some((
                k.clone(),
                Amount {
                    nano: p.nano_value_wide().unwrap_or(if p.negative {
                        i128::MIN
                    } else {
                        i128::MAX
                    }),
                    format: p.format,
                },
            ))
        })
        .collect()
}

impl QuotaSpec {
    /// The ledger's view of an ElasticQuota object.
    pub fn of(o: &ElasticQuota) -> Self {
        let ann = |k: &str| {
            o.metadata
                .annotations
                .as_ref()
                .and_then(|l| l.get(k))
                .map(String::as_str)
                .unwrap_or_default()
        };
        let max = amounts_of(o.spec.max.as_ref());
        let admission: Option<ResourceList> =
            serde_json::from_str(ann(tree::keys::ADMISSION)).unwrap_or_default();
        let admission = amounts_of(admission.as_ref());
        Self {
            info: QuotaInfo::of(o),
            limit: if admission.is_empty() {
                max.clone()
            } else {
                admission
            },
            max,
            namespaces: tree::bound_namespaces(o),
            members: spans_of(ann(SPANS)),
        }
    }

    /// A quota with `max` as its limit (tests, synthetic state).
    pub fn simple(name: &str, namespace: &str, parent: Option<&str>, max: Amounts) -> Self {
        let list: ResourceList = max
            .iter()
            .map(|(k, a)| (k.clone(), Quantity(a.canonical())))
            .collect();
        Self {
            info: QuotaInfo {
                name: name.into(),
                namespace: namespace.into(),
                parent: parent.unwrap_or(tree::keys::ROOT).into(),
                max: Some(list),
                ..QuotaInfo::default()
            },
            limit: max.clone(),
            max,
            namespaces: Vec::new(),
            members: None,
        }
    }
}

/// Quota names that are never checked (PV-4.2).
pub const UNCHECKED: [&str; 3] = [
    "koordinator-default-quota",
    "koordinator-system-quota",
    "koordinator-root-quota",
];

/// Resource names whose presence in `spec.max` makes a quota checked (PV-4.6).
pub const QUOTA_KEYS: [&str; 14] = [
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "kubernetes.io/batch-cpu",
    "kubernetes.io/batch-memory",
    "kubernetes.io/mid-cpu",
    "kubernetes.io/mid-memory",
    "koordinator.sh/gpu",
    "nvidia.com/gpu",
    "koordinator.sh/gpu.shared",
    "koordinator.sh/gpu-memory-ratio",
];

/// Whether `name` can name a member cluster: a DNS label (it becomes part of identities,
/// Secret names and ledger keys, so no `/` and no dot).
pub fn is_cluster_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}
