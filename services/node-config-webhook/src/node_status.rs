//! `/mutate-node-status`: resource amplification of a Node's allocatable (spec §1, NS-0..NS-5).

use std::collections::BTreeMap;

use admission_kit::compat::go::{
    ParsedQuantity, Quantity as GoQuantity, decode_go_map, decode_resource_list, go_json_kind,
};
use admission_kit::{Context, Mutator, Operation, Request, Verdict};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::{Deserialize, Serialize};

/// The part of a Node these rules read and write. A partial view is enough: the kit diffs the
/// view before and after and replays the change onto the full object, so everything else
/// (conditions, images, managedFields…) is neither decoded nor touched, which keeps the
/// heartbeat path cheap.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Name and annotations.
    #[serde(default)]
    pub metadata: Meta,
    /// Allocatable and capacity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
}

/// `metadata` of the view.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// The Node's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// `status` of the view.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// What the scheduler may place on the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocatable: Option<BTreeMap<String, Quantity>>,
    /// The node's total resources (never changed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<BTreeMap<String, Quantity>>,
}

/// Resource name → amplification ratio (JSON object of numbers).
pub const RATIO_ANNOTATION: &str = "node.koordinator.sh/resource-amplification-ratio";
/// The un-amplified cpu/memory allocatable, kept by this webhook.
pub const RAW_ANNOTATION: &str = "node.koordinator.sh/raw-allocatable";
const AMPLIFIED: [&str; 2] = ["cpu", "memory"];

fn parsed(q: &Quantity) -> Option<ParsedQuantity> {
    GoQuantity::from_json_text(&q.0)
        .ok()
        .map(|q| q.value().clone())
}

/// Whether the cpu/memory entries differ between two allocatable lists (added, removed, or a
/// different amount; other resources ignored).
fn cpu_memory_changed(
    old: Option<&BTreeMap<String, Quantity>>,
    new: &BTreeMap<String, Quantity>,
) -> bool {
    AMPLIFIED.iter().any(|r| {
        let a = old.and_then(|o| o.get(*r)).map(parsed);
        let b = new.get(*r).map(parsed);
        match (a, b) {
            (None, None) => false,
            (Some(a), Some(b)) => match (a, b) {
                (Some(a), Some(b)) => {
                    a.to_f64() != b.to_f64() || a.milli_value() != b.milli_value()
                }
                _ => true,
            },
            _ => true,
        }
    })
}

/// Decodes the raw-allocatable annotation as Go decodes a `ResourceList`.
fn decode_raw(text: &str) -> Result<BTreeMap<String, ParsedQuantity>, String> {
    decode_resource_list(text)
}

/// Decodes the ratio annotation as Go decodes `map[corev1.ResourceName]extension.Ratio`
/// (`Ratio` is a `float64` with no decoder of its own): `null` leaves a 0 ratio.
fn decode_ratios(text: &str) -> Result<BTreeMap<String, f64>, String> {
    decode_go_map(text, "map[v1.ResourceName]extension.Ratio", |v| match v {
        serde_json::Value::Null => Ok(Some(0.0)),
        serde_json::Value::Number(n) => Ok(n.as_f64()),
        other => Err(format!(
            "json: cannot unmarshal {} into Go value of type extension.Ratio",
            go_json_kind(&other)
        )),
    })
}

/// NS-3 (raw values, writing the annotation when they come from the new allocatable), NS-4
/// (ratios) and NS-5 (amplification). `Err((rule, text))` is a failure answered with 500.
///
/// NS-3: the raw allocatable is read from the saved annotation, or taken from the new status
/// (and saved) when the annotation is missing or the allocatable changed.
///
/// State: `{apiVersion: v1, kind: Node, metadata: {name: n1, annotations: {node.koordinator.sh/resource-amplification-ratio: '{"cpu": 2}'}}, status: {allocatable: {cpu: "10", memory: 10Gi}}}`
///
/// State: `{apiVersion: v1, kind: Node, metadata: {name: n2}, status: {allocatable: {cpu: "10", memory: 10Gi}}}`
///
/// Mutated on status update: `{apiVersion: v1, kind: Node, metadata: {name: n1, annotations: {node.koordinator.sh/resource-amplification-ratio: '{"cpu": 2}'}}, status: {allocatable: {cpu: "10", memory: 10Gi}}}`
///
/// Admitted on status update: `{apiVersion: v1, kind: Node, metadata: {name: n2}, status: {allocatable: {cpu: "10", memory: 10Gi}}}`
///
/// NS-4: the ratio annotation is a JSON map of numbers; anything else refuses the status update.
///
/// State: `{apiVersion: v1, kind: Node, metadata: {name: n1, annotations: {node.koordinator.sh/resource-amplification-ratio: 'x'}}, status: {allocatable: {cpu: "10", memory: 10Gi}}}`
///
/// State: `{apiVersion: v1, kind: Node, metadata: {name: n2, annotations: {node.koordinator.sh/resource-amplification-ratio: '{"cpu": 2}'}}, status: {allocatable: {cpu: "10", memory: 10Gi}}}`
///
/// Refused on status update: `{apiVersion: v1, kind: Node, metadata: {name: n1, annotations: {node.koordinator.sh/resource-amplification-ratio: 'x'}}, status: {allocatable: {cpu: "10", memory: 10Gi}}}`
///
/// Admitted on status update: `{apiVersion: v1, kind: Node, metadata: {name: n2, annotations: {node.koordinator.sh/resource-amplification-ratio: '{"cpu": 2}'}}, status: {allocatable: {cpu: "10", memory: 10Gi}}}`
///
/// NS-5: `cpu` and then `memory` allocatable are the raw value times a ratio above 1, when the
/// raw value has the resource.
///
/// State: `{apiVersion: v1, kind: Node, metadata: {name: n1, annotations: {node.koordinator.sh/resource-amplification-ratio: '{"cpu": 2}'}}, status: {allocatable: {cpu: "10", memory: 10Gi}}}`
///
/// State: `{apiVersion: v1, kind: Node, metadata: {name: n2, annotations: {node.koordinator.sh/resource-amplification-ratio: '{"cpu": 1}'}}, status: {allocatable: {cpu: "10", memory: 10Gi}}}`
///
/// Mutated on status update: `{apiVersion: v1, kind: Node, metadata: {name: n1, annotations: {node.koordinator.sh/resource-amplification-ratio: '{"cpu": 2}'}}, status: {allocatable: {cpu: "10", memory: 10Gi}}}`
///
/// Admitted on status update: `{apiVersion: v1, kind: Node, metadata: {name: n2, annotations: {node.koordinator.sh/resource-amplification-ratio: '{"cpu": 1}'}}, status: {allocatable: {cpu: "10", memory: 10Gi}}}`
fn amplify(
    node: &mut Node,
    old: Option<&Node>,
    ratio_text: &str,
) -> Result<Vec<&'static str>, (&'static str, String)> {
    let mut applied = Vec::new();
    let Some(alloc) = node.status.as_ref().and_then(|s| s.allocatable.clone()) else {
        return Ok(applied); // NS-2
    };
    let annotations = node.metadata.annotations.get_or_insert_with(BTreeMap::new);
    let old_alloc = old
        .and_then(|o| o.status.as_ref())
        .and_then(|s| s.allocatable.as_ref());
    let raw: BTreeMap<String, ParsedQuantity> = match annotations.get(RAW_ANNOTATION) {
        Some(text) if !cpu_memory_changed(old_alloc, &alloc) => decode_raw(text).map_err(|e| {
            (
                "NS-3",
                format!("failed to unmarshal node raw allocatable: {e}"),
            )
        })?,
        _ => {
            let raw: BTreeMap<String, ParsedQuantity> = AMPLIFIED
                .iter()
                .filter_map(|r| alloc.get(*r).and_then(parsed).map(|q| ((*r).to_owned(), q)))
                .collect();
            if !raw.is_empty() {
                let canonical: BTreeMap<&str, String> = raw
                    .iter()
                    .map(|(k, q)| (k.as_str(), q.canonical()))
                    .collect();
                let text = serde_json::to_string(&canonical).unwrap_or_default();
                annotations.insert(RAW_ANNOTATION.to_owned(), text);
                applied.push("NS-3");
            }
            raw
        }
    };
    let ratios = decode_ratios(ratio_text).map_err(|e| {
        (
            "NS-4",
            format!("failed to unmarshal node resource amplification ratio: {e}"),
        )
    })?;
    let Some(status_alloc) = node.status.as_mut().and_then(|s| s.allocatable.as_mut()) else {
        return Ok(applied);
    };
    for res in AMPLIFIED {
        let (Some(ratio), Some(q)) = (ratios.get(res), raw.get(res)) else {
            continue;
        };
        if *ratio <= 1.0 {
            continue;
        }
        // NS-FIX-1: upstream multiplies the int64 milli-value and converts back to int64, which
        // wraps beyond 2^63 thousandths (a 10Ei node, or 9.3e15 cpu × 1.5, gets a negative
        // allocatable); ours is exact in 128 bits (the product's integer part, as Go truncates).
        let Some(milli) = q.milli_value_wide() else {
            continue;
        };
        let amplified =
            ParsedQuantity::from_milli((milli as f64 * ratio) as i128, q.format).canonical();
        status_alloc.insert(res.to_owned(), Quantity(amplified));
        applied.push("NS-5");
    }
    Ok(applied)
}

/// A Node's capacity and allocatable checked as Go's decoder parses them, for both
/// Node endpoints.
pub fn check_status_quantities(
    capacity: Option<&BTreeMap<String, Quantity>>,
    allocatable: Option<&BTreeMap<String, Quantity>>,
) -> Result<(), String> {
    use admission_kit::compat::resources::check_list;
    check_list("status.capacity", capacity)
        .and_then(|()| check_list("status.allocatable", allocatable))
        .map_err(|e| e.to_string())
}

/// `/mutate-node-status`.
pub struct NodeStatusAmplifier;

impl Mutator for NodeStatusAmplifier {
    type Object = Node;

    /// Capacity and allocatable quantities as Go's decoder parses them.
    fn check_decoded(&self, node: &Node) -> Result<(), String> {
        let status = node.status.as_ref();
        check_status_quantities(
            status.and_then(|s| s.capacity.as_ref()),
            status.and_then(|s| s.allocatable.as_ref()),
        )
    }

    fn mutate(&self, req: &Request<Node>, node: &mut Node, _: &Context) -> Verdict {
        admission_kit::server::metrics::koord::timed_with(
            "mutate",
            "node",
            req.operation.as_str(),
            "NodeResourceAmplificationPlugin",
            || amplify_status(req, node),
            Verdict::allowed,
        )
    }
}

/// The body of the handler, timed under upstream's plugin name `NodeResourceAmplificationPlugin`.
///
/// NS-1: without an amplification ratio annotation (or with an empty one), the saved raw
/// allocatable annotation is removed.
///
/// State: `{apiVersion: v1, kind: Node, metadata: {name: n1, annotations: {node.koordinator.sh/raw-allocatable: '{"cpu":"10","memory":"10Gi"}'}}, status: {allocatable: {cpu: "10", memory: 10Gi}}}`
///
/// State: `{apiVersion: v1, kind: Node, metadata: {name: n2}, status: {allocatable: {cpu: "10", memory: 10Gi}}}`
///
/// Mutated on status update: `{apiVersion: v1, kind: Node, metadata: {name: n1, annotations: {node.koordinator.sh/raw-allocatable: '{"cpu":"10","memory":"10Gi"}'}}, status: {allocatable: {cpu: "10", memory: 10Gi}}}`
///
/// Admitted on status update: `{apiVersion: v1, kind: Node, metadata: {name: n2}, status: {allocatable: {cpu: "10", memory: 10Gi}}}`
fn amplify_status(req: &Request<Node>, node: &mut Node) -> Verdict {
    // NS-0
    if req.resource.resource != "nodes" || req.sub_resource.as_deref() != Some("status") {
        return Verdict::default();
    }
    if req.operation != Operation::Update {
        return Verdict::default();
    }
    let ratio_text = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(RATIO_ANNOTATION))
        .cloned()
        .unwrap_or_default();
    if ratio_text.is_empty() {
        // NS-1
        let removed = node
            .metadata
            .annotations
            .as_mut()
            .and_then(|a| a.remove(RAW_ANNOTATION))
            .is_some();
        return Verdict {
            applied: if removed { vec!["NS-1"] } else { Vec::new() },
            ..Verdict::default()
        };
    }
    match amplify(node, req.old_object.as_ref(), &ratio_text) {
        Ok(applied) => Verdict {
            applied,
            ..Verdict::default()
        },
        Err((rule, text)) => Verdict::errored(rule, 500, text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(annotations: serde_json::Value, alloc: serde_json::Value) -> Node {
        serde_json::from_value(
            json!({"metadata": {"name": "n", "annotations": annotations},
                                      "status": {"allocatable": alloc, "capacity": alloc}}),
        )
        .unwrap()
    }

    fn run(old: &Node, new: &Node) -> (Result<Vec<&'static str>, (&'static str, String)>, Node) {
        let mut n = new.clone();
        let ratio = n
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(RATIO_ANNOTATION))
            .cloned()
            .unwrap_or_default();
        (amplify(&mut n, Some(old), &ratio), n)
    }

    fn alloc(n: &Node, r: &str) -> String {
        n.status.as_ref().unwrap().allocatable.as_ref().unwrap()[r]
            .0
            .clone()
    }

    #[test]
    fn ns_3_and_ns_5_first_amplification_saves_raw() {
        let a = json!({"cpu": "8", "memory": "16Gi", "pods": "110"});
        let old = node(json!({}), a.clone());
        let new = node(json!({RATIO_ANNOTATION: "{\"cpu\":1.5}"}), a);
        let (r, n) = run(&old, &new);
        assert_eq!(r.unwrap(), ["NS-3", "NS-5"]);
        assert_eq!(
            n.metadata.annotations.as_ref().unwrap()[RAW_ANNOTATION],
            "{\"cpu\":\"8\",\"memory\":\"16Gi\"}"
        );
        assert_eq!(alloc(&n, "cpu"), "12");
        assert_eq!(alloc(&n, "memory"), "16Gi");
        assert_eq!(
            n.status.as_ref().unwrap().capacity.as_ref().unwrap()["cpu"].0,
            "8",
            "capacity untouched"
        );
    }

    #[test]
    fn ns_3_reuses_the_annotation_while_values_are_unchanged() {
        let amplified = json!({"cpu": "12", "memory": "24Gi"});
        let ann = json!({RATIO_ANNOTATION: "{\"cpu\":1.5,\"memory\":1.5}", RAW_ANNOTATION: "{\"cpu\":\"8\",\"memory\":\"16Gi\"}"});
        let (r, n) = run(
            &node(ann.clone(), amplified.clone()),
            &node(ann.clone(), amplified),
        );
        assert_eq!(r.unwrap(), ["NS-5", "NS-5"]);
        assert_eq!(
            (alloc(&n, "cpu"), alloc(&n, "memory")),
            ("12".into(), "24Gi".into())
        );
        // The kubelet reports the real values again: raw refreshed, amplified again.
        let (r, n) = run(
            &node(ann.clone(), json!({"cpu": "12", "memory": "24Gi"})),
            &node(ann, json!({"cpu": "10", "memory": "16Gi"})),
        );
        assert_eq!(r.unwrap(), ["NS-3", "NS-5", "NS-5"]);
        assert_eq!(
            (alloc(&n, "cpu"), alloc(&n, "memory")),
            ("15".into(), "24Gi".into())
        );
    }

    #[test]
    fn ns_4_bad_ratio_and_ns_3_bad_raw_fail() {
        let a = json!({"cpu": "8"});
        let (r, _) = run(
            &node(json!({}), a.clone()),
            &node(json!({RATIO_ANNOTATION: "{bad"}), a.clone()),
        );
        assert!(r.unwrap_err().1.starts_with(
            "failed to unmarshal node resource amplification ratio: invalid character"
        ));
        let (r, _) = run(
            &node(json!({}), a.clone()),
            &node(json!({RATIO_ANNOTATION: "{\"cpu\":\"x\"}"}), a.clone()),
        );
        assert_eq!(r.unwrap_err().0, "NS-4");
        let ann = json!({RATIO_ANNOTATION: "{\"cpu\":2}", RAW_ANNOTATION: "nope"});
        let (r, _) = run(&node(ann.clone(), a.clone()), &node(ann, a));
        assert!(
            r.unwrap_err()
                .1
                .starts_with("failed to unmarshal node raw allocatable")
        );
    }

    #[test]
    fn ns_5_ratio_at_most_one_or_other_resources_change_nothing() {
        let a = json!({"cpu": "7", "memory": "15Gi"});
        let (r, n) = run(
            &node(json!({}), a.clone()),
            &node(
                json!({RATIO_ANNOTATION: "{\"cpu\":1,\"eni\":3}"}),
                a.clone(),
            ),
        );
        assert_eq!(r.unwrap(), ["NS-3"]);
        assert_eq!(alloc(&n, "cpu"), "7");
        let (_, n) = run(
            &node(json!({}), a.clone()),
            &node(json!({RATIO_ANNOTATION: "{\"cpu\":1.5,\"memory\":1.5}"}), a),
        );
        assert_eq!(
            (alloc(&n, "cpu"), alloc(&n, "memory")),
            ("10500m".into(), "23040Mi".into())
        );
    }

    #[test]
    fn ns_2_no_allocatable_no_change() {
        let mut n: Node = serde_json::from_value(
            json!({"metadata": {"annotations": {RATIO_ANNOTATION: "{\"cpu\":2}"}}}),
        )
        .unwrap();
        let before = n.clone();
        assert!(amplify(&mut n, None, "{\"cpu\":2}").unwrap().is_empty());
        assert_eq!(n, before);
    }

    /// The annotations' JSON errors are `encoding/json`'s for upstream's Go types
    /// (`map[v1.ResourceName]extension.Ratio`, `v1.ResourceList`), and a `null` entry is Go's
    /// zero value rather than an error.
    #[test]
    fn annotation_errors_name_upstreams_go_types() {
        let a = json!({"cpu": "8", "memory": "16Gi"});
        let fail = |ann: serde_json::Value| {
            run(&node(ann.clone(), a.clone()), &node(ann, a.clone()))
                .0
                .unwrap_err()
                .1
        };
        assert_eq!(
            fail(json!({RATIO_ANNOTATION: "{\"cpu\":\"x\"}"})),
            "failed to unmarshal node resource amplification ratio: json: cannot unmarshal string into Go value of type extension.Ratio"
        );
        assert_eq!(
            fail(json!({RATIO_ANNOTATION: "[1.5]"})),
            "failed to unmarshal node resource amplification ratio: json: cannot unmarshal array into Go value of type map[v1.ResourceName]extension.Ratio"
        );
        let raw = |text: &str| json!({RATIO_ANNOTATION: "{\"cpu\":2}", RAW_ANNOTATION: text});
        assert_eq!(
            fail(raw("{\"cpu\":\"8x\"}")),
            "failed to unmarshal node raw allocatable: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
        // {"cpu": null}: Go reads a zero quantity, so cpu is amplified from 0.
        let ann = raw("{\"cpu\":null}");
        let (r, n) = run(&node(ann.clone(), a.clone()), &node(ann, a.clone()));
        assert_eq!(r.unwrap(), ["NS-5"]);
        assert_eq!(alloc(&n, "cpu"), "0");
        // A null ratio is a 0 ratio: nothing amplified.
        let ann = json!({RATIO_ANNOTATION: "{\"cpu\":null}"});
        let (r, n) = run(&node(json!({}), a.clone()), &node(ann, a.clone()));
        assert_eq!(r.unwrap(), ["NS-3"]);
        assert_eq!(alloc(&n, "cpu"), "8");
    }

    /// NS-FIX-1: beyond 2^63 thousandths upstream's int64 arithmetic wraps to a negative
    /// allocatable; ours stays exact.
    #[test]
    fn ns_fix_1_amplification_beyond_int64_does_not_wrap() {
        let a = json!({"cpu": "9223372036854775", "memory": "8Ei"});
        let ann = json!({RATIO_ANNOTATION: "{\"cpu\":2,\"memory\":2}"});
        let (r, n) = run(&node(json!({}), a.clone()), &node(ann, a));
        assert_eq!(r.unwrap(), ["NS-3", "NS-5", "NS-5"]);
        // The float product of upstream's formula (f64 rounding kept), past 2^63 without
        // wrapping.
        assert_eq!(alloc(&n, "cpu"), "18446744073709549568m");
        // 8Ei parses capped at 2^63-1 (as Go parses it); doubled, positive.
        let memory = alloc(&n, "memory");
        assert_eq!(memory, "16Ei");
    }
}
