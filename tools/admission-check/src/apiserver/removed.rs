//! API versions Kubernetes no longer serves: kubectl finds no resource for them ("no matches
//! for kind … in version …") and sends nothing. The table is Kubernetes' deprecated API
//! migration guide, for the kinds people still find in old manifests.

use serde_json::Value;

use super::{Finding, finding};

/// `(apiVersion, kinds, the release that removed them, what to use instead)`; empty kinds: every
/// kind of that version. Versions a later release brought back for other kinds (a
/// `coordination.k8s.io/v1beta1` LeaseCandidate, an `admissionregistration.k8s.io/v1beta1`
/// MutatingAdmissionPolicy) name their removed kinds only.
const REMOVED: &[(&str, &[&str], &str, &str)] = &[
    (
        "extensions/v1beta1",
        &["Deployment", "DaemonSet", "ReplicaSet"],
        "1.16",
        "apps/v1",
    ),
    (
        "extensions/v1beta1",
        &["NetworkPolicy"],
        "1.16",
        "networking.k8s.io/v1",
    ),
    (
        "extensions/v1beta1",
        &["Ingress"],
        "1.22",
        "networking.k8s.io/v1",
    ),
    (
        "extensions/v1beta1",
        &["PodSecurityPolicy"],
        "1.16",
        "nothing (Pod Security admission)",
    ),
    ("apps/v1beta1", &[], "1.16", "apps/v1"),
    ("apps/v1beta2", &[], "1.16", "apps/v1"),
    (
        "admissionregistration.k8s.io/v1beta1",
        &[
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
        ],
        "1.22",
        "admissionregistration.k8s.io/v1",
    ),
    (
        "apiextensions.k8s.io/v1beta1",
        &["CustomResourceDefinition"],
        "1.22",
        "apiextensions.k8s.io/v1",
    ),
    (
        "apiregistration.k8s.io/v1beta1",
        &["APIService"],
        "1.22",
        "apiregistration.k8s.io/v1",
    ),
    (
        "certificates.k8s.io/v1beta1",
        &["CertificateSigningRequest"],
        "1.22",
        "certificates.k8s.io/v1",
    ),
    (
        "coordination.k8s.io/v1beta1",
        &["Lease"],
        "1.22",
        "coordination.k8s.io/v1",
    ),
    (
        "networking.k8s.io/v1beta1",
        &["Ingress", "IngressClass"],
        "1.22",
        "networking.k8s.io/v1",
    ),
    (
        "rbac.authorization.k8s.io/v1beta1",
        &[],
        "1.22",
        "rbac.authorization.k8s.io/v1",
    ),
    (
        "rbac.authorization.k8s.io/v1alpha1",
        &[],
        "1.22",
        "rbac.authorization.k8s.io/v1",
    ),
    (
        "scheduling.k8s.io/v1beta1",
        &["PriorityClass"],
        "1.22",
        "scheduling.k8s.io/v1",
    ),
    (
        "scheduling.k8s.io/v1alpha1",
        &["PriorityClass"],
        "1.22",
        "scheduling.k8s.io/v1",
    ),
    (
        "storage.k8s.io/v1beta1",
        &["CSIDriver", "CSINode", "StorageClass", "VolumeAttachment"],
        "1.22",
        "storage.k8s.io/v1",
    ),
    (
        "storage.k8s.io/v1beta1",
        &["CSIStorageCapacity"],
        "1.27",
        "storage.k8s.io/v1",
    ),
    ("batch/v1beta1", &["CronJob"], "1.25", "batch/v1"),
    ("batch/v2alpha1", &["CronJob"], "1.21", "batch/v1"),
    (
        "discovery.k8s.io/v1beta1",
        &["EndpointSlice"],
        "1.25",
        "discovery.k8s.io/v1",
    ),
    (
        "events.k8s.io/v1beta1",
        &["Event"],
        "1.25",
        "events.k8s.io/v1",
    ),
    (
        "autoscaling/v2beta1",
        &["HorizontalPodAutoscaler"],
        "1.25",
        "autoscaling/v2",
    ),
    (
        "autoscaling/v2beta2",
        &["HorizontalPodAutoscaler"],
        "1.26",
        "autoscaling/v2",
    ),
    (
        "policy/v1beta1",
        &["PodDisruptionBudget"],
        "1.25",
        "policy/v1",
    ),
    (
        "policy/v1beta1",
        &["PodSecurityPolicy"],
        "1.25",
        "nothing (Pod Security admission)",
    ),
    (
        "node.k8s.io/v1beta1",
        &["RuntimeClass"],
        "1.25",
        "node.k8s.io/v1",
    ),
    (
        "flowcontrol.apiserver.k8s.io/v1beta1",
        &[],
        "1.26",
        "flowcontrol.apiserver.k8s.io/v1",
    ),
    (
        "flowcontrol.apiserver.k8s.io/v1beta2",
        &[],
        "1.29",
        "flowcontrol.apiserver.k8s.io/v1",
    ),
    (
        "flowcontrol.apiserver.k8s.io/v1beta3",
        &[],
        "1.32",
        "flowcontrol.apiserver.k8s.io/v1",
    ),
];

/// API-12: an object of an API version Kubernetes removed (`extensions/v1beta1` Deployments,
/// `policy/v1beta1` PodDisruptionBudgets, `batch/v1beta1` CronJobs, `autoscaling/v2beta2`
/// HorizontalPodAutoscalers…): the API server serves no such resource, so kubectl refuses the
/// file ("no matches for kind") and nothing is created. The finding names the release that
/// removed it and the version to use.
///
/// Refused: `{apiVersion: policy/v1beta1, kind: PodDisruptionBudget, metadata: {name: web}, spec: {minAvailable: 1}}`
///
/// Admitted: `{apiVersion: policy/v1, kind: PodDisruptionBudget, metadata: {name: web}, spec: {minAvailable: 1}}`
pub fn api_12_removed_versions(object: &Value) -> Option<Finding> {
    let api_version = object["apiVersion"].as_str()?;
    let kind = object["kind"].as_str()?;
    let (_, _, release, instead) = REMOVED.iter().find(|(v, kinds, _, _)| {
        *v == api_version && (kinds.is_empty() || kinds.contains(&kind))
    })?;
    Some(finding(
        "API-12",
        "apiVersion".into(),
        format!(
            "no matches for kind \"{kind}\" in version \"{api_version}\": Kubernetes {release} removed it; use {instead}"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn removed_versions_are_named_with_their_replacement() {
        let f = api_12_removed_versions(
            &json!({"apiVersion": "extensions/v1beta1", "kind": "Deployment"}),
        )
        .expect("removed");
        assert_eq!(f.field, "apiVersion");
        assert!(f.message.contains("1.16 removed it; use apps/v1"), "{f:?}");
        assert!(
            api_12_removed_versions(&json!({"apiVersion": "apps/v1beta2", "kind": "StatefulSet"}))
                .is_some()
        );
        assert!(
            api_12_removed_versions(&json!({"apiVersion": "apps/v1", "kind": "Deployment"}))
                .is_none()
        );
        assert!(
            api_12_removed_versions(&json!({"apiVersion": "policy/v1beta1", "kind": "Eviction"}))
                .is_none()
        );
    }
}
