//! `/validate-configmap`: the SLO controller ConfigMap (spec §3, CM-0..CM-7).

use std::collections::BTreeMap;

use admission_kit::{Context, Operation, Request, Validator, Verdict};
use k8s_openapi::api::core::v1::{ConfigMap, Node};

use crate::slo::{self, KEYS, Key, Parsed};

/// `/validate-configmap`, under the service's options.
pub struct SloConfigMapValidator(pub std::sync::Arc<crate::Options>);

fn keys_to_examine<'a>(
    op: Operation,
    data: &'a BTreeMap<String, String>,
    old: Option<&'a BTreeMap<String, String>>,
) -> Vec<(&'static Key, &'a str)> {
    KEYS.iter()
        .filter_map(|k| {
            let v = data.get(k.name).filter(|v| !v.is_empty())?;
            let changed = op == Operation::Create || old.and_then(|o| o.get(k.name)) != Some(v);
            changed.then_some((k, v.as_str()))
        })
        .collect()
}

/// CM-2..CM-6 for one key.
fn check_key(
    key: &Key,
    text: &str,
    data: &BTreeMap<String, String>,
    cm: &str,
    options: &crate::Options,
) -> Result<Parsed, (&'static str, String)> {
    let parsed = slo::parse(key, text, data, cm).map_err(|e| ("CM-2", e))?;
    slo::check_ranges(key, &parsed).map_err(|e| ("CM-3", e))?;
    if key.name == "resource-qos-config" {
        slo::check_network_qos(&parsed, data).map_err(|e| ("CM-4", e))?;
    }
    if options.node_strategy_name_need_check {
        slo::check_names(key, &parsed).map_err(|e| ("CM-5", e))?;
    }
    slo::check_overlap(key, &parsed).map_err(|e| ("CM-6", e))?;
    Ok(parsed)
}

impl Validator for SloConfigMapValidator {
    type Object = ConfigMap;

    fn validate(&self, req: &Request<ConfigMap>, ctx: &Context) -> Verdict {
        admission_kit::server::metrics::koord::timed_with(
            "validate",
            "configmap",
            req.operation.as_str(),
            "SLOConfig",
            || slo_config(req, ctx, &self.0),
            Verdict::allowed,
        )
    }
}

/// The body of the handler, timed under upstream's plugin name `SLOConfig`.
///
/// CM-7: a configuration with more than one node strategy may not give two strategies to any
/// existing Node (refused with 400 naming the Node); Nodes that cannot be listed are a 500.
///
/// State: `{apiVersion: v1, kind: Node, metadata: {name: n1, labels: {pool: gpu, zone: a}}}`
///
/// Refused: `{apiVersion: v1, kind: ConfigMap, metadata: {name: slo-controller-config, namespace: koordinator-system, labels: {koordinator.sh/configmap-type: slo-controller-config}}, data: {resource-threshold-config: '{"clusterStrategy": {"enable": true}, "nodeStrategies": [{"name": "gpu", "nodeSelector": {"matchLabels": {"pool": "gpu"}}, "enable": true}, {"name": "zone", "nodeSelector": {"matchLabels": {"zone": "a"}}, "enable": true}]}'}}`
///
/// Admitted: `{apiVersion: v1, kind: ConfigMap, metadata: {name: slo-controller-config, namespace: koordinator-system, labels: {koordinator.sh/configmap-type: slo-controller-config}}, data: {resource-threshold-config: '{"clusterStrategy": {"enable": true}, "nodeStrategies": [{"name": "gpu", "nodeSelector": {"matchLabels": {"pool": "gpu"}}, "enable": true}, {"name": "zone", "nodeSelector": {"matchLabels": {"zone": "b"}}, "enable": true}]}'}}`
fn slo_config(req: &Request<ConfigMap>, ctx: &Context, options: &crate::Options) -> Verdict {
    // CM-0
    if req.resource.resource != "configmaps"
        || req.sub_resource.as_deref().is_some_and(|s| !s.is_empty())
    {
        return Verdict::default();
    }
    let (ns, name) = (&options.config_namespace, &options.config_name);
    let meta = &req.object.metadata;
    let obj_ns = meta
        .namespace
        .as_deref()
        .or(req.namespace.as_deref())
        .unwrap_or_default();
    let obj_name = meta
        .name
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or(req.name.as_str());
    if obj_ns != ns || obj_name != name || req.operation == Operation::Delete {
        return Verdict::default();
    }
    let cm = format!("{ns}/{name}");
    let data = req.object.data.clone().unwrap_or_default();
    let old = req.old_object.as_ref().and_then(|o| o.data.as_ref());
    // CM-1
    let mut parsed = Vec::new();
    for (key, text) in keys_to_examine(req.operation, &data, old) {
        match check_key(key, text, &data, &cm, options) {
            Ok(p) => parsed.push((key, p)),
            Err((rule, text)) => return Verdict::errored(rule, 400, text),
        }
    }
    // CM-7
    if parsed.iter().any(|(_, p)| p.strategies.len() > 1) {
        let mut nodes = match ctx.list::<Node>(None) {
            Ok(n) => n,
            Err(e) => return Verdict::errored("CM-7", 500, format!("cannot list nodes: {e}")),
        };
        nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        for (key, p) in parsed.iter().filter(|(_, p)| p.strategies.len() > 1) {
            for node in &nodes {
                let labels = node.metadata.labels.clone().unwrap_or_default();
                if let Some(names) = slo::conflicts(&p.strategies, &labels) {
                    let node_name = node.metadata.name.clone().unwrap_or_default();
                    return Verdict::errored(
                        "CM-7",
                        400,
                        slo::node_conflict(key, &names, &node_name),
                    );
                }
            }
        }
    }
    Verdict::default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn cm_1_examines_non_empty_changed_keys_in_order() {
        let new = data(&[
            ("cpu-burst-config", "{}"),
            ("colocation-config", "x"),
            ("system-config", ""),
            ("other", "y"),
        ]);
        let names = |v: Vec<(&Key, &str)>| v.iter().map(|(k, _)| k.name).collect::<Vec<_>>();
        assert_eq!(
            names(keys_to_examine(Operation::Create, &new, None)),
            ["colocation-config", "cpu-burst-config"]
        );
        let old = data(&[("colocation-config", "x")]);
        assert_eq!(
            names(keys_to_examine(Operation::Update, &new, Some(&old))),
            ["cpu-burst-config"]
        );
    }
}
