//! `/validate-node`: a Node's new labels must not put it under two node strategies of one SLO
//! config key (spec §2, NV-0..NV-4).

use std::collections::BTreeMap;

use admission_kit::{Context, Operation, Request, Validator, Verdict};
use k8s_openapi::api::core::v1::{ConfigMap, Node};

use crate::slo::{self, KEYS};

/// The SLO ConfigMap's data, when it exists in the cluster state.
pub fn slo_config_data(
    ctx: &Context,
    options: &crate::Options,
) -> Option<BTreeMap<String, String>> {
    let obj = ctx
        .get::<ConfigMap>(Some(&options.config_namespace), &options.config_name)
        .ok()
        .flatten()?;
    Some(
        obj.data
            .get("data")
            .and_then(|d| serde_json::from_value(d.clone()).ok())
            .unwrap_or_default(),
    )
}

/// `/validate-node`, under the service's options.
pub struct NodeValidator(pub std::sync::Arc<crate::Options>);

impl Validator for NodeValidator {
    type Object = Node;

    /// Capacity and allocatable quantities as Go's decoder parses them.
    fn check_decoded(&self, node: &Node) -> Result<(), String> {
        let status = node.status.as_ref();
        crate::node_status::check_status_quantities(
            status.and_then(|s| s.capacity.as_ref()),
            status.and_then(|s| s.allocatable.as_ref()),
        )
    }

    fn validate(&self, req: &Request<Node>, ctx: &Context) -> Verdict {
        admission_kit::server::metrics::koord::timed_with(
            "validate",
            "node",
            req.operation.as_str(),
            "SLOManagerConfigConflictForNode",
            || node_slo_conflicts(req, ctx, &self.0),
            Verdict::allowed,
        )
    }
}

/// The body of the handler, timed under upstream's plugin name `SLOManagerConfigConflictForNode`.
///
/// NV-4: a Node's labels may not select two node strategies of one SLO configuration key
/// (refused with 400 naming the key and the strategies).
///
/// State: `{apiVersion: v1, kind: ConfigMap, metadata: {name: slo-controller-config, namespace: koordinator-system, labels: {koordinator.sh/configmap-type: slo-controller-config}}, data: {resource-threshold-config: '{"clusterStrategy": {"enable": true}, "nodeStrategies": [{"name": "gpu", "nodeSelector": {"matchLabels": {"pool": "gpu"}}, "enable": true}, {"name": "zone-a", "nodeSelector": {"matchLabels": {"zone": "a"}}, "enable": true}]}'}}`
///
/// State: `{apiVersion: v1, kind: Node, metadata: {name: n1, labels: {pool: gpu}}}`
///
/// Refused on update: `{apiVersion: v1, kind: Node, metadata: {name: n1, labels: {pool: gpu, zone: a}}}`
///
/// Admitted on update: `{apiVersion: v1, kind: Node, metadata: {name: n1, labels: {pool: gpu, zone: b}}}`
fn node_slo_conflicts(req: &Request<Node>, ctx: &Context, options: &crate::Options) -> Verdict {
    // NV-0, NV-1
    if req.resource.resource != "nodes"
        || req.sub_resource.as_deref().is_some_and(|s| !s.is_empty())
        || req.operation != Operation::Update
    {
        return Verdict::default();
    }
    let labels = req.object.metadata.labels.clone().unwrap_or_default();
    // NV-2
    let old_labels = req
        .old_object
        .as_ref()
        .and_then(|o| o.metadata.labels.clone())
        .unwrap_or_default();
    if labels == old_labels {
        return Verdict::default();
    }
    // NV-3: no SLO ConfigMap (or no cache answer; this webhook is Ignore upstream) → allow.
    let Some(data) = slo_config_data(ctx, options) else {
        return Verdict::default();
    };
    let cm = format!("{}/{}", options.config_namespace, options.config_name);
    // NV-4
    for key in &KEYS {
        let Some(text) = data.get(key.name).filter(|t| !t.is_empty()) else {
            continue;
        };
        let Ok(parsed) = slo::parse(key, text, &data, &cm) else {
            continue;
        };
        if parsed.strategies.len() < 2 {
            continue;
        }
        if let Some(names) = slo::conflicts(&parsed.strategies, &labels) {
            let node = req.object.metadata.name.clone().unwrap_or_default();
            return Verdict::errored("NV-4", 400, slo::node_conflict(key, &names, &node));
        }
    }
    Verdict::default()
}
