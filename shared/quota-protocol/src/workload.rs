//! WQ-2 and WQ-3 (`docs/workload-quota.md`): whether a workload's peak request — every pod it
//! can run at once — fits its quota and each ancestor, with PV-4's arithmetic (exact billionths,
//! only the resources the quota limits). Pure: the ledger feeds it the subtree usage it keeps
//! (admitted pods and outstanding reservations), scheduling-webhook's in-process evaluation the
//! usage of each quota's `child-request` annotation.

use admission_compat::resources::{Amount, Amounts};

use crate::spec::{QUOTA_KEYS, UNCHECKED};
use crate::tree::{self, QuotaLookup};

/// One quota of the chain a workload is charged along (its own, then each ancestor).
#[derive(Debug, Clone, Copy)]
pub struct Level<'a> {
    /// The quota's name.
    pub name: &'a str,
    /// Its admission limit (`admission` annotation, else `spec.max`).
    pub limit: &'a Amounts,
    /// What its subtree uses now.
    pub used: &'a Amounts,
}

/// How a peak request meets the chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fit {
    /// It fits now.
    Fits,
    /// WQ-3: it fits the limits but not what is free now; `free` is what quota `quota` has free
    /// of each resource that is short (never below zero).
    ///
    /// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: default, annotations: {quota.scheduling.koordinator.sh/child-request: '{"cpu":"1500m"}'}}, spec: {max: {cpu: "2"}, min: {cpu: "1"}}, status: {used: {cpu: "1500m"}}}`
    ///
    /// Warned: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: d}, spec: {replicas: 1, selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a, quota.scheduling.koordinator.sh/name: team-a}}, spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}, limits: {cpu: "1"}}}]}}}}`
    ///
    /// Admitted: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: e}, spec: {replicas: 1, selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a, quota.scheduling.koordinator.sh/name: team-a}}, spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "100m"}, limits: {cpu: "100m"}}}]}}}}`
    NotNow {
        /// The first quota along the chain that is short.
        quota: String,
        /// Free now, per short resource.
        free: Amounts,
    },
    /// WQ-2: it can never fit: the peak of each resource in `allowed` is above quota `quota`'s
    /// limit of it.
    ///
    /// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: default}, spec: {max: {cpu: "2"}, min: {cpu: "1"}}}`
    ///
    /// Refused: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: d}, spec: {replicas: 3, selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a, quota.scheduling.koordinator.sh/name: team-a}}, spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}, limits: {cpu: "1"}}}]}}}}`
    ///
    /// Admitted: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: e}, spec: {replicas: 1, selector: {matchLabels: {app: a}}, template: {metadata: {labels: {app: a, quota.scheduling.koordinator.sh/name: team-a}}, spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}, limits: {cpu: "1"}}}]}}}}`
    Never {
        /// The first quota along the chain whose limit is below the peak.
        quota: String,
        /// That quota's limit, per resource the peak passes.
        allowed: Amounts,
    },
}

/// The part of `peak` a quota with `max` counts (PV-4): resources it limits with a non-zero
/// amount, requested with a non-zero amount.
pub fn charged(peak: &Amounts, max: &Amounts) -> Amounts {
    peak.iter()
        .filter(|(k, v)| v.nano != 0 && max.get(*k).is_some_and(|m| m.nano != 0))
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

/// WQ-2, then WQ-3, along `chain`: a limit below `total` (the whole peak) anywhere along it is
/// WQ-2 (the first such quota is named), else usage that leaves less than `peak` (what is asked
/// now: the whole peak, or a scale-up's increase) free is WQ-3.
pub fn fit(peak: &Amounts, total: &Amounts, chain: &[Level<'_>]) -> Fit {
    for level in chain {
        let allowed: Amounts = total
            .iter()
            .filter_map(|(k, p)| {
                let l = level.limit.get(k)?;
                (p.nano > l.nano).then(|| (k.clone(), *l))
            })
            .collect();
        if !allowed.is_empty() {
            return Fit::Never {
                quota: level.name.to_owned(),
                allowed,
            };
        }
    }
    for level in chain {
        let free: Amounts = peak
            .iter()
            .filter_map(|(k, p)| {
                let l = level.limit.get(k)?;
                let u = level.used.get(k).map_or(0, |u| u.nano);
                // Both below 2^127 in magnitude: the difference cannot overflow in i128 for
                // limits and usage the ledger holds (each below 2^126).
                let left = l.nano.saturating_sub(u).max(0);
                (p.nano > left).then(|| {
                    (
                        k.clone(),
                        Amount {
                            nano: left,
                            format: l.format,
                        },
                    )
                })
            })
            .collect();
        if !free.is_empty() {
            return Fit::NotNow {
                quota: level.name.to_owned(),
                free,
            };
        }
    }
    Fit::Fits
}

/// A workload to check ([`decide`]).
#[derive(Debug, Clone, Copy)]
pub struct WorkloadCheck<'a> {
    /// Namespace of the workload.
    pub namespace: &'a str,
    /// Its pod template's quota label ("" when none).
    pub label: &'a str,
    /// The name PV-3.2's text gives the pod (the workload's).
    pub pod: &'a str,
    /// Its peak request (or, on a scale-up, the increase): compared with what is free.
    pub peak: &'a Amounts,
    /// The whole peak, compared with the limits (WQ-2).
    pub total: &'a Amounts,
    /// Gate `DisableDefaultQuota`.
    pub disable_default_quota: bool,
    /// Run PV-3.2.
    pub check_parent: bool,
}

/// The outcome of [`decide`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkloadOutcome {
    /// No quota rule concerns its pods (no quota, an unchecked one, nothing it limits).
    Unchecked {
        /// QN of its pods.
        quota: String,
    },
    /// Its pods would be refused whatever their number, by `rule` with that rule's text.
    Refused {
        /// QN of its pods.
        quota: String,
        /// `PV-3` or `PV-4`.
        rule: &'static str,
        /// The pod rule's text.
        message: String,
    },
    /// Checked: how the peak fits.
    Checked {
        /// QN of its pods.
        quota: String,
        /// The fit.
        fit: Fit,
    },
}

/// The quotas a workload check reads: the ledger's (usage it keeps) or scheduling-webhook's
/// in-process state (usage from each quota's `child-request` annotation).
pub trait Quotas {
    /// `spec.max` of the one quota named `quota`; `None` when there is none, `Err` (the text
    /// PV-4 refuses with) when there are several.
    fn max(&self, quota: &str) -> Result<Option<&Amounts>, String>;
    /// The quota and each ancestor up to the root (the quotas never checked left out), or why
    /// their usage cannot be read.
    fn chain(&self, quota: &str) -> Result<Vec<Level<'_>>, String>;
}

/// WQ for one workload: QN of its pods, PV-3.2 (when asked), PV-4's preconditions (the quota
/// exists once, limits a quota resource, the peak asks for something it limits), then [`fit`]
/// along the chain.
///
/// PV-3: a pod may not be charged to a parent quota (`is-parent: "true"`) unless the
/// `SupportParentQuotaSubmitPod` gate allows it.
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: parent-a, namespace: default, labels: {quota.scheduling.koordinator.sh/is-parent: "true"}}, spec: {max: {cpu: "100"}, min: {cpu: "1"}}}`
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: default, labels: {quota.scheduling.koordinator.sh/parent: parent-a}}, spec: {max: {cpu: "2"}, min: {cpu: "1"}}}`
///
/// Refused: `{apiVersion: v1, kind: Pod, metadata: {name: p, labels: {quota.scheduling.koordinator.sh/name: parent-a}}, spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}, limits: {cpu: "1"}}}]}}`
///
/// Admitted: `{apiVersion: v1, kind: Pod, metadata: {name: q, labels: {quota.scheduling.koordinator.sh/name: team-a}}, spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}, limits: {cpu: "1"}}}]}}`
///
/// PV-4: the pods' quota exists once and limits what they ask; then they fit it and each
/// ancestor.
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: parent-a, namespace: default, labels: {quota.scheduling.koordinator.sh/is-parent: "true"}}, spec: {max: {cpu: "100"}, min: {cpu: "1"}}}`
///
/// State: `{apiVersion: scheduling.sigs.k8s.io/v1alpha1, kind: ElasticQuota, metadata: {name: team-a, namespace: default, labels: {quota.scheduling.koordinator.sh/parent: parent-a}}, spec: {max: {cpu: "2"}, min: {cpu: "1"}}}`
///
/// Refused: `{apiVersion: v1, kind: Pod, metadata: {name: p, labels: {quota.scheduling.koordinator.sh/name: team-a}}, spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "3"}, limits: {cpu: "3"}}}]}}`
///
/// Admitted: `{apiVersion: v1, kind: Pod, metadata: {name: q, labels: {quota.scheduling.koordinator.sh/name: team-a}}, spec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: "1"}, limits: {cpu: "1"}}}]}}`
pub fn decide(
    topology: &dyn QuotaLookup,
    quotas: &dyn Quotas,
    w: &WorkloadCheck<'_>,
) -> WorkloadOutcome {
    let quota = tree::quota_name(
        topology,
        Some(w.label),
        w.namespace,
        w.disable_default_quota,
    );
    let refused = |quota: String, rule, message| WorkloadOutcome::Refused {
        quota,
        rule,
        message,
    };
    if w.check_parent
        && let Err(message) = tree::pv_3_2_not_on_parent(topology, &quota, w.pod)
    {
        return refused(quota, "PV-3", message);
    }
    if quota.is_empty() || UNCHECKED.contains(&quota.as_str()) {
        return WorkloadOutcome::Unchecked { quota };
    }
    let max = match quotas.max(&quota) {
        Ok(Some(max)) => max,
        Ok(None) => {
            let message = format!("elastic quota {quota} not found");
            return refused(quota, "PV-4", message);
        }
        Err(message) => return refused(quota, "PV-4", message),
    };
    if !max.keys().any(|k| QUOTA_KEYS.contains(&k.as_str())) {
        return WorkloadOutcome::Unchecked { quota };
    }
    let peak = charged(w.peak, max);
    let total = charged(w.total, max);
    if peak.is_empty() && total.is_empty() {
        return WorkloadOutcome::Unchecked { quota };
    }
    match quotas.chain(&quota) {
        Err(message) => refused(quota, "PV-4", message),
        Ok(levels) => {
            let fit = fit(&peak, &total, &levels);
            WorkloadOutcome::Checked { quota, fit }
        }
    }
}

#[cfg(test)]
mod tests {
    use admission_compat::go::QuantityFormat;

    use super::*;

    fn gpus(n: i128) -> Amounts {
        [(
            "nvidia.com/gpu".to_owned(),
            Amount {
                nano: n * 1_000_000_000,
                format: QuantityFormat::DecimalSI,
            },
        )]
        .into()
    }

    #[test]
    fn wq_2_a_peak_above_any_limit_of_the_chain_never_fits() {
        let (own, parent, none) = (gpus(64), gpus(32), Amounts::new());
        let chain = [
            Level {
                name: "team-a",
                limit: &own,
                used: &none,
            },
            Level {
                name: "org",
                limit: &parent,
                used: &none,
            },
        ];
        assert_eq!(
            fit(&gpus(48), &gpus(48), &chain),
            Fit::Never {
                quota: "org".into(),
                allowed: gpus(32)
            }
        );
        assert_eq!(fit(&gpus(32), &gpus(32), &chain), Fit::Fits);
    }

    #[test]
    fn wq_3_a_peak_within_the_limits_but_above_what_is_free_does_not_fit_now() {
        let (limit, used) = (gpus(32), gpus(24));
        let chain = [Level {
            name: "team-a",
            limit: &limit,
            used: &used,
        }];
        assert_eq!(fit(&gpus(8), &gpus(8), &chain), Fit::Fits);
        assert_eq!(
            fit(&gpus(16), &gpus(16), &chain),
            Fit::NotNow {
                quota: "team-a".into(),
                free: gpus(8)
            }
        );
        // Usage above the limit (a limit lowered under running pods): nothing is free.
        let over = gpus(40);
        let chain = [Level {
            name: "team-a",
            limit: &limit,
            used: &over,
        }];
        assert_eq!(
            fit(&gpus(1), &gpus(1), &chain),
            Fit::NotNow {
                quota: "team-a".into(),
                free: gpus(0)
            }
        );
    }

    #[test]
    fn only_what_the_quota_limits_is_charged() {
        let mut peak = gpus(8);
        peak.insert(
            "cpu".into(),
            Amount {
                nano: 0,
                format: QuantityFormat::DecimalSI,
            },
        );
        peak.insert(
            "memory".into(),
            Amount {
                nano: 5,
                format: QuantityFormat::BinarySI,
            },
        );
        let mut max = gpus(32);
        max.insert(
            "cpu".into(),
            Amount {
                nano: 1,
                format: QuantityFormat::DecimalSI,
            },
        );
        assert_eq!(charged(&peak, &max), gpus(8));
    }
}
