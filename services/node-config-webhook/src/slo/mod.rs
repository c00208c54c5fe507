//! The SLO controller ConfigMap (`koordinator-system/slo-controller-config`): parsing and checks
//! of its five strategy keys (spec §3, CM-2..CM-7), shared by the ConfigMap validator and the
//! Node validator (NV-4 parses keys as CM-2 does).

pub mod schema;

use std::collections::BTreeMap;

use admission_kit::compat::go::{Quantity, go_json_syntax_error};
use admission_kit::compat::selector::Selector;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::{Map, Value};

use schema::{Check, F, Ty};

/// One strategy key of the ConfigMap.
#[derive(Debug, Clone, Copy)]
pub struct Key {
    /// The data key.
    pub name: &'static str,
    /// How parse errors name it.
    pub kind: &'static str,
    /// Go type of the parsed value (root of CM-3 paths).
    pub root: &'static str,
    /// Its shape.
    pub schema: &'static [F],
    /// JSON name of its list of node strategies.
    pub strategies: &'static str,
}

/// The examined keys, in upstream's order (CM-1).
pub const KEYS: [Key; 5] = [
    Key {
        name: "colocation-config",
        kind: "colocation",
        root: "ColocationCfg",
        schema: schema::COLOCATION,
        strategies: "nodeConfigs",
    },
    Key {
        name: "resource-threshold-config",
        kind: "resourceThreshold",
        root: "ResourceThresholdCfg",
        schema: schema::THRESHOLD,
        strategies: "nodeStrategies",
    },
    Key {
        name: "resource-qos-config",
        kind: "ResourceQOS",
        root: "ResourceQOSCfg",
        schema: schema::QOS,
        strategies: "nodeStrategies",
    },
    Key {
        name: "system-config",
        kind: "System",
        root: "SystemCfg",
        schema: schema::SYSTEM,
        strategies: "nodeStrategies",
    },
    Key {
        name: "cpu-burst-config",
        kind: "CpuBurst",
        root: "CPUBurstCfg",
        schema: schema::CPU_BURST,
        strategies: "nodeStrategies",
    },
];

/// The key `system-config`, which `resource-qos-config` also decodes.
pub const SYSTEM_KEY: Key = KEYS[3];

/// `___{"reason":R,"message":M}___`, reason first as upstream's struct order prints it.
pub fn wrapped(reason: &str, message: &Value) -> String {
    format!(
        "___{{\"reason\":{},\"message\":{}}}___",
        Value::String(reason.to_owned()),
        message
    )
}

/// A node strategy: its name and validated selector.
#[derive(Debug, Clone)]
pub struct Strategy {
    /// `name` (may be empty).
    pub name: String,
    /// Its selector.
    pub selector: Selector,
    /// The selector as written (CM-6 builds probe labels from it).
    pub raw: LabelSelector,
}

/// A key that passed CM-2.
#[derive(Debug, Clone)]
pub struct Parsed {
    /// The decoded value (`Null` for a literal `null`).
    pub value: Value,
    /// Its node strategies, in order.
    pub strategies: Vec<Strategy>,
}

/// How Go's `UnmarshalTypeError` names a JSON value: a number is named with its text only when
/// the target is numeric (it failed to parse as that number), otherwise `number`.
fn json_kind(v: &Value, numeric_target: bool) -> String {
    match v {
        Value::Number(n) if numeric_target => format!("number {n}"),
        other => admission_kit::compat::go::go_json_kind(other).to_owned(),
    }
}

/// The Go type a message names. `intstr.IntOrString` decodes a non-string into its `int32`
/// (`IntVal`), so its errors name `int32`.
fn go_type(ty: Ty) -> &'static str {
    match ty {
        Ty::Int => "int64",
        Ty::Float => "float64",
        Ty::Bool => "bool",
        Ty::Str => "string",
        Ty::IntOrStr => "int32",
        Ty::Selector => "v1.LabelSelector",
        Ty::Obj(_) | Ty::Inline(_) | Ty::Any => "struct",
        Ty::ObjArr(_) => "[]struct",
    }
}

/// The first value that does not decode into its Go type, as Go's `UnmarshalTypeError` says it.
fn type_error(obj: &Map<String, Value>, fields: &[F], root: &str, path: &str) -> Option<String> {
    for f in fields {
        if let Ty::Inline(sub) = f.ty {
            if let Some(e) = type_error(obj, sub, root, path) {
                return Some(e);
            }
            continue;
        }
        let Some(v) = obj.get(f.json) else { continue };
        if v.is_null() {
            continue;
        }
        let field = if path.is_empty() {
            f.json.to_owned()
        } else {
            format!("{path}.{}", f.json)
        };
        let bad = || {
            Some(format!(
                "json: cannot unmarshal {} into Go struct field {root}.{field} of type {}",
                json_kind(v, matches!(f.ty, Ty::Int | Ty::Float | Ty::IntOrStr)),
                go_type(f.ty)
            ))
        };
        match f.ty {
            Ty::Int if !(v.is_i64() || v.is_u64()) => return bad(),
            Ty::Float if !v.is_number() => return bad(),
            Ty::Bool if !v.is_boolean() => return bad(),
            Ty::Str if !v.is_string() => return bad(),
            Ty::IntOrStr
                if !(v.is_string() || v.as_i64().is_some_and(|n| i32::try_from(n).is_ok())) =>
            {
                return bad();
            }
            Ty::Selector if serde_json::from_value::<LabelSelector>(v.clone()).is_err() => {
                return bad();
            }
            Ty::Obj(sub) => match v {
                Value::Object(m) => {
                    if let Some(e) = type_error(m, sub, root, &field) {
                        return Some(e);
                    }
                }
                _ => return bad(),
            },
            Ty::ObjArr(sub) => match v {
                Value::Array(items) => {
                    for item in items {
                        match item {
                            Value::Object(m) => {
                                if let Some(e) = type_error(m, sub, root, &field) {
                                    return Some(e);
                                }
                            }
                            Value::Null => {}
                            _ => return bad(),
                        }
                    }
                }
                _ => return bad(),
            },
            _ => {}
        }
    }
    None
}

/// CM-2: decodes a key's value and checks its node strategies' selectors.
///
/// Refused: `{apiVersion: v1, kind: ConfigMap, metadata: {name: slo-controller-config, namespace: koordinator-system, labels: {koordinator.sh/configmap-type: slo-controller-config}}, data: {resource-threshold-config: '{"clusterStrategy": {"enable": "yes"}}'}}`
///
/// Admitted: `{apiVersion: v1, kind: ConfigMap, metadata: {name: slo-controller-config, namespace: koordinator-system, labels: {koordinator.sh/configmap-type: slo-controller-config}}, data: {resource-threshold-config: '{"clusterStrategy": {"enable": true}}'}}`
pub fn parse(
    key: &Key,
    text: &str,
    data: &BTreeMap<String, String>,
    cm: &str,
) -> Result<Parsed, String> {
    let fail = |kind: &str, err: String| {
        wrapped(
            "ParseConfigFail",
            &Value::String(format!(
                "Failed to parse {kind} config in configmap {cm}, err: {err}"
            )),
        )
    };
    let value: Value =
        serde_json::from_str(text).map_err(|e| fail(key.kind, go_json_syntax_error(&e, text)))?;
    match &value {
        Value::Object(m) => {
            if let Some(e) = type_error(m, key.schema, key.root, "") {
                return Err(fail(key.kind, e));
            }
        }
        Value::Null => {}
        other => {
            return Err(fail(
                key.kind,
                format!(
                    "json: cannot unmarshal {} into Go value of type configuration.{}",
                    json_kind(other, false),
                    key.root
                ),
            ));
        }
    }
    if key.name == "resource-qos-config" {
        // Upstream decodes system-config too; an absent or empty one fails (quirk kept).
        let sys = data
            .get(SYSTEM_KEY.name)
            .map(String::as_str)
            .unwrap_or_default();
        let sys_value: Value = serde_json::from_str(sys)
            .map_err(|e| fail(SYSTEM_KEY.kind, go_json_syntax_error(&e, sys)))?;
        if let Value::Object(m) = &sys_value
            && let Some(e) = type_error(m, SYSTEM_KEY.schema, SYSTEM_KEY.root, "")
        {
            return Err(fail(SYSTEM_KEY.kind, e));
        }
    }
    let mut strategies = Vec::new();
    for item in value
        .get(key.strategies)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = item
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let raw: LabelSelector = item
            .get("nodeSelector")
            .filter(|v| !v.is_null())
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default();
        let has_terms = raw.match_labels.as_ref().is_some_and(|m| !m.is_empty())
            || raw
                .match_expressions
                .as_ref()
                .is_some_and(|e| !e.is_empty());
        if !has_terms {
            return Err(wrapped(
                "ConfigParamInvalid",
                &Value::String(format!(
                    "nodeConfigs NodeSelector must not empty error! configType: {},nodeConfig name:{name}",
                    key.name
                )),
            ));
        }
        let selector = Selector::new(&raw).map_err(|e| {
            wrapped(
                "ConfigParamInvalid",
                &Value::String(format!(
                    "failed to parse node selector of nodeConfig {name}: {e}"
                )),
            )
        })?;
        strategies.push(Strategy {
            name,
            selector,
            raw,
        });
    }
    Ok(Parsed { value, strategies })
}

/// A number as go-playground's English translations print limits: `10,000`, `-25`, `0.5`.
fn fmt_num(n: f64) -> String {
    if n.fract() != 0.0 {
        return n.to_string();
    }
    let i = n as i64;
    let digits = i.unsigned_abs().to_string();
    let mut out = String::new();
    for (idx, c) in digits.chars().enumerate() {
        if idx > 0 && (digits.len() - idx).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if i < 0 { format!("-{out}") } else { out }
}

fn range_errors(
    obj: &Map<String, Value>,
    fields: &[F],
    ns: &str,
    out: &mut BTreeMap<String, String>,
) {
    for f in fields {
        match f.ty {
            Ty::Inline(sub) => range_errors(obj, sub, &format!("{ns}.{}", f.go), out),
            Ty::Obj(sub) => {
                if let Some(Value::Object(m)) = obj.get(f.json) {
                    range_errors(m, sub, &format!("{ns}.{}", f.go), out);
                }
            }
            Ty::ObjArr(sub) => {
                for (i, item) in obj
                    .get(f.json)
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .enumerate()
                {
                    if let Value::Object(m) = item {
                        range_errors(m, sub, &format!("{ns}.{}[{i}]", f.go), out);
                    }
                }
            }
            _ => {
                let Some(v) = obj.get(f.json).and_then(Value::as_f64) else {
                    continue;
                };
                let other = |json: &str| obj.get(json).and_then(Value::as_f64);
                let failure = f.checks.iter().find_map(|c| match *c {
                    Check::Min(n) if v < n => {
                        Some(format!("{} must be {} or greater", f.go, fmt_num(n)))
                    }
                    Check::Max(n) if v > n => {
                        Some(format!("{} must be {} or less", f.go, fmt_num(n)))
                    }
                    Check::Gt(n) if v <= n => {
                        Some(format!("{} must be greater than {}", f.go, fmt_num(n)))
                    }
                    Check::GtField(json, go) if other(json).is_none_or(|o| v <= o) => {
                        Some(format!("{} must be greater than {go}", f.go))
                    }
                    Check::LtField(json, go) if other(json).is_none_or(|o| v >= o) => {
                        Some(format!("{} must be less than {go}", f.go))
                    }
                    _ => None,
                });
                if let Some(text) = failure {
                    out.insert(format!("{ns}.{}", f.go), text);
                }
            }
        }
    }
}

/// CM-3: every field outside its limits, reported together.
///
/// Refused: `{apiVersion: v1, kind: ConfigMap, metadata: {name: slo-controller-config, namespace: koordinator-system, labels: {koordinator.sh/configmap-type: slo-controller-config}}, data: {resource-threshold-config: '{"clusterStrategy": {"enable": true, "cpuSuppressThresholdPercent": 120}}'}}`
///
/// Admitted: `{apiVersion: v1, kind: ConfigMap, metadata: {name: slo-controller-config, namespace: koordinator-system, labels: {koordinator.sh/configmap-type: slo-controller-config}}, data: {resource-threshold-config: '{"clusterStrategy": {"enable": true, "cpuSuppressThresholdPercent": 65}}'}}`
pub fn check_ranges(key: &Key, parsed: &Parsed) -> Result<(), String> {
    let Value::Object(m) = &parsed.value else {
        return Ok(());
    };
    let mut errs = BTreeMap::new();
    range_errors(m, key.schema, key.root, &mut errs);
    if errs.is_empty() {
        return Ok(());
    }
    let message: Map<String, Value> = errs
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    Err(wrapped("ConfigParamInvalid", &Value::Object(message)))
}

const NET_FIELDS: [(&str, &str); 4] = [
    ("ingressRequest", "IngressRequest"),
    ("ingressLimit", "IngressLimit"),
    ("egressRequest", "EgressRequest"),
    ("egressLimit", "EgressLimit"),
];
const NET_CLASSES: [(&str, &str); 3] = [
    ("lsrClass", "LSRClass"),
    ("lsClass", "LSClass"),
    ("beClass", "BEClass"),
];

/// The value a percentage sum counts for a network QoS entry: an integer, or a string's integer
/// value (quirk: a bandwidth string counts as its number of bytes per second).
fn net_amount(v: &Value) -> i64 {
    match v {
        Value::Number(n) => n.as_i64().unwrap_or(0),
        Value::String(s) => Quantity::parse(s)
            .ok()
            .map(|q| q.value().to_f64() as i64)
            .unwrap_or(0),
        _ => 0,
    }
}

fn bandwidth_of(strategy: Option<&Value>) -> i64 {
    strategy
        .and_then(|s| s.get("totalNetworkBandwidth"))
        .map(|v| match v {
            Value::String(s) => Quantity::parse(s)
                .ok()
                .map(|q| q.value().to_f64() as i64)
                .unwrap_or(0),
            Value::Number(n) => n.as_i64().unwrap_or(0),
            _ => 0,
        })
        .unwrap_or(0)
}

/// CM-4 for one strategy (cluster when `index` is None).
fn check_net_strategy(strategy: &Value, index: Option<usize>, total: i64) -> Result<(), String> {
    let (prefix, scope) = match index {
        None => (
            "ResourceQOSCfg.ClusterStrategy".to_owned(),
            "clusterStrategy".to_owned(),
        ),
        Some(i) => (
            format!("ResourceQOSCfg.nodeStrategy.{i}"),
            format!("nodeStrategy[{i}]"),
        ),
    };
    let (mut ints, mut strs) = (false, false);
    let (mut ingress, mut egress) = (0i64, 0i64);
    for (class_json, class_go) in NET_CLASSES {
        let Some(net) = strategy.get(class_json).and_then(|c| c.get("networkQOS")) else {
            continue;
        };
        for (json, go) in NET_FIELDS {
            let Some(v) = net.get(json).filter(|v| !v.is_null()) else {
                continue;
            };
            let path = format!("{prefix}.{class_go}.{go}");
            match v {
                Value::Number(n) => {
                    ints = true;
                    let n = n.as_i64().unwrap_or(-1);
                    if !(0..=100).contains(&n) {
                        return Err(format!(
                            "{path}: Invalid value: {n}: must be percentage value just in 0-100'"
                        ));
                    }
                }
                Value::String(s) => {
                    strs = true;
                    if let Err(e) = Quantity::parse(s) {
                        return Err(format!(
                            "{path}: Invalid value: {}: {e}",
                            admission_kit::compat::go::go_quote(s)
                        ));
                    }
                }
                _ => {}
            }
            // FIX NC-FIX-1: upstream's int64 sums wrap on quantities near 2^63 ("10E"), which
            // can bring a sum back under 100; ours saturate, so such a sum is over 100.
            match json {
                "ingressRequest" => ingress = ingress.saturating_add(net_amount(v)),
                "egressRequest" => egress = egress.saturating_add(net_amount(v)),
                _ => {}
            }
        }
    }
    if ints && strs {
        return Err(format!(
            "only one type can be used for percentages or quantity in {scope}"
        ));
    }
    if 100i64.saturating_sub(ingress) < 0 || 100i64.saturating_sub(egress) < 0 {
        return Err(match index {
            None => "ClusterStrategy total net bandwidth percentage already over 100".into(),
            Some(i) => {
                format!("cfg.NodeStrategies[{i}] total net bandwidth percentage already over 100")
            }
        });
    }
    if ingress > total || egress > total {
        return Err(match index {
            None => "total net bandwidth over total network bandwidth in clusterStrategy".into(),
            Some(i) => format!(
                "total net bandwidth quantity already over total network bandwidth in cfg.NodeStrategies[{i}]"
            ),
        });
    }
    Ok(())
}

/// CM-4: network QoS percentages and bandwidth (resource-qos-config only).
///
/// Refused: `{apiVersion: v1, kind: ConfigMap, metadata: {name: slo-controller-config, namespace: koordinator-system, labels: {koordinator.sh/configmap-type: slo-controller-config}}, data: {system-config: '{}', resource-qos-config: '{"clusterStrategy": {"beClass": {"networkQOS": {"ingressRequest": 120}}}}'}}`
///
/// Admitted: `{apiVersion: v1, kind: ConfigMap, metadata: {name: slo-controller-config, namespace: koordinator-system, labels: {koordinator.sh/configmap-type: slo-controller-config}}, data: {system-config: '{}', resource-qos-config: '{"clusterStrategy": {"beClass": {"networkQOS": {"ingressRequest": 20}}}}'}}`
pub fn check_network_qos(parsed: &Parsed, data: &BTreeMap<String, String>) -> Result<(), String> {
    let system: Value = data
        .get(SYSTEM_KEY.name)
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or(Value::Null);
    let sys_cluster = system.get("clusterStrategy").filter(|v| !v.is_null());
    if let Some(cluster) = parsed.value.get("clusterStrategy").filter(|v| !v.is_null())
        && sys_cluster.is_some()
    {
        check_net_strategy(cluster, None, bandwidth_of(sys_cluster))?;
    } else if let Some(cluster) = parsed.value.get("clusterStrategy").filter(|v| !v.is_null()) {
        // Without a system cluster strategy only the per-field and percentage checks apply.
        check_net_strategy(cluster, None, i64::MAX)?;
    }
    let sys_nodes = system
        .get("nodeStrategies")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (i, node) in parsed
        .value
        .get("nodeStrategies")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let total = if sys_nodes.is_empty() {
            bandwidth_of(sys_cluster)
        } else {
            sys_nodes
                .iter()
                .find(|s| s.get("nodeSelector") == node.get("nodeSelector"))
                .map(|s| bandwidth_of(Some(s)))
                .unwrap_or(0)
        };
        check_net_strategy(node, Some(i), total)?;
    }
    Ok(())
}

/// CM-5: names present and unique (only with `--node-strategy-name-need-check=true`).
///
/// Options: `--node-strategy-name-need-check=true`
///
/// Refused: `{apiVersion: v1, kind: ConfigMap, metadata: {name: slo-controller-config, namespace: koordinator-system, labels: {koordinator.sh/configmap-type: slo-controller-config}}, data: {resource-threshold-config: '{"clusterStrategy": {"enable": true}, "nodeStrategies": [{"name": "", "nodeSelector": {"matchLabels": {"pool": "gpu"}}, "enable": true}]}'}}`
///
/// Admitted: `{apiVersion: v1, kind: ConfigMap, metadata: {name: slo-controller-config, namespace: koordinator-system, labels: {koordinator.sh/configmap-type: slo-controller-config}}, data: {resource-threshold-config: '{"clusterStrategy": {"enable": true}, "nodeStrategies": [{"name": "gpu", "nodeSelector": {"matchLabels": {"pool": "gpu"}}, "enable": true}]}'}}`
pub fn check_names(key: &Key, parsed: &Parsed) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    for s in &parsed.strategies {
        if s.name.is_empty() {
            return Err(wrapped(
                "ConfigParamInvalid",
                &Value::String(format!("nodeConfig Name need! configType:{}", key.name)),
            ));
        }
        if !seen.insert(s.name.as_str()) {
            return Err(wrapped(
                "ConfigParamInvalid",
                &Value::String(format!(
                    "nodeConfig Name confilict, configType:{},nodeConfig Name:{}! ",
                    key.name, s.name
                )),
            ));
        }
    }
    Ok(())
}

/// Probe label sets of one selector (CM-6): its matchLabels, plus one probe per combination index
/// `i` taking `values[i mod len]` of each expression that has values.
fn probes(raw: &LabelSelector) -> Vec<BTreeMap<String, String>> {
    let base: BTreeMap<String, String> = raw.match_labels.clone().unwrap_or_default();
    let exprs: Vec<(&str, &Vec<String>)> = raw
        .match_expressions
        .iter()
        .flatten()
        .filter_map(|e| {
            e.values
                .as_ref()
                .filter(|v| !v.is_empty())
                .map(|v| (e.key.as_str(), v))
        })
        .collect();
    let count: usize = exprs.iter().map(|(_, v)| v.len()).product();
    (0..count.max(1))
        .map(|i| {
            let mut labels = base.clone();
            for (k, vals) in &exprs {
                labels.insert((*k).to_owned(), vals[i % vals.len()].clone());
            }
            labels
        })
        .collect()
}

/// The strategies (in order) whose selectors match `labels`, when two or more do.
pub fn conflicts<'a>(
    strategies: &'a [Strategy],
    labels: &BTreeMap<String, String>,
) -> Option<Vec<&'a str>> {
    let names: Vec<&str> = strategies
        .iter()
        .filter(|s| s.selector.matches(labels))
        .map(|s| s.name.as_str())
        .collect();
    (names.len() >= 2).then_some(names)
}

/// CM-6: no label set that one strategy targets is also targeted by another.
///
/// Refused: `{apiVersion: v1, kind: ConfigMap, metadata: {name: slo-controller-config, namespace: koordinator-system, labels: {koordinator.sh/configmap-type: slo-controller-config}}, data: {resource-threshold-config: '{"clusterStrategy": {"enable": true}, "nodeStrategies": [{"name": "a", "nodeSelector": {"matchLabels": {"pool": "gpu"}}, "enable": true}, {"name": "b", "nodeSelector": {"matchLabels": {"pool": "gpu"}}, "enable": true}]}'}}`
///
/// Admitted: `{apiVersion: v1, kind: ConfigMap, metadata: {name: slo-controller-config, namespace: koordinator-system, labels: {koordinator.sh/configmap-type: slo-controller-config}}, data: {resource-threshold-config: '{"clusterStrategy": {"enable": true}, "nodeStrategies": [{"name": "a", "nodeSelector": {"matchLabels": {"pool": "gpu"}}, "enable": true}, {"name": "b", "nodeSelector": {"matchLabels": {"pool": "cpu"}}, "enable": true}]}'}}`
pub fn check_overlap(key: &Key, parsed: &Parsed) -> Result<(), String> {
    for s in &parsed.strategies {
        for probe in probes(&s.raw) {
            if let Some(names) = conflicts(&parsed.strategies, &probe) {
                return Err(wrapped(
                    "NodeStrategiesOverlap",
                    &serde_json::json!({"config": key.name, "strategies": names}),
                ));
            }
        }
    }
    Ok(())
}

/// The `ExistNodeConfict` text (NV-4, CM-7).
pub fn node_conflict(key: &Key, strategies: &[&str], node: &str) -> String {
    // Field order as upstream's struct: config, strategies, exampleNodes.
    format!(
        "___{{\"reason\":\"ExistNodeConfict\",\"message\":{{\"config\":{},\"strategies\":{},\"exampleNodes\":{}}}}}___",
        Value::String(key.name.to_owned()),
        serde_json::json!(strategies),
        serde_json::json!([node])
    )
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

    const CM: &str = "koordinator-system/slo-controller-config";

    /// Found by the `slo_config` fuzz target: an ingress quantity near 2^63 overflowed the sum
    /// (a panic with overflow checks). NC-FIX-1: the sum saturates and is over 100.
    #[test]
    fn nc_fix_1_huge_bandwidth_quantities_saturate() {
        let cm = r#"{"clusterStrategy": {"lsClass": {"networkQOS": {"enable": true, "ingressRequest": "60"}}, "beClass": {"networkQOS": {"enable": true, "ingressRequest": "10E"}}}}"#;
        let d = data(&[
            ("resource-qos-config", cm),
            ("system-config", "{\"clusterStrategy\": {}}"),
        ]);
        let parsed = parse(&KEYS[2], cm, &d, CM).unwrap();
        assert_eq!(
            check_network_qos(&parsed, &d).unwrap_err(),
            "ClusterStrategy total net bandwidth percentage already over 100"
        );
        let neg = r#"{"clusterStrategy": {"lsClass": {"networkQOS": {"enable": true, "ingressRequest": "-10E"}}}}"#;
        let d = data(&[
            ("resource-qos-config", neg),
            ("system-config", "{\"clusterStrategy\": {}}"),
        ]);
        let parsed = parse(&KEYS[2], neg, &d, CM).unwrap();
        let _ = check_network_qos(&parsed, &d);
    }

    #[test]
    fn cm_2_parse_errors_use_go_texts() {
        let e = parse(&KEYS[0], "garbage", &data(&[]), CM).unwrap_err();
        assert_eq!(
            e,
            "___{\"reason\":\"ParseConfigFail\",\"message\":\"Failed to parse colocation config in configmap koordinator-system/slo-controller-config, err: invalid character 'g' looking for beginning of value\"}___"
        );
        let e = parse(
            &KEYS[0],
            r#"{"metricAggregateDurationSeconds": "x"}"#,
            &data(&[]),
            CM,
        )
        .unwrap_err();
        assert!(e.contains("json: cannot unmarshal string into Go struct field ColocationCfg.metricAggregateDurationSeconds of type int64"), "{e}");
        // resource-qos-config needs a decodable system-config (quirk kept).
        let e = parse(&KEYS[2], "{}", &data(&[]), CM).unwrap_err();
        assert!(
            e.contains("Failed to parse System config")
                && e.contains("unexpected end of JSON input"),
            "{e}"
        );
        assert!(parse(&KEYS[2], "{}", &data(&[("system-config", "{}")]), CM).is_ok());
    }

    #[test]
    fn cm_2_node_strategies_need_a_selector() {
        let e = parse(
            &KEYS[1],
            r#"{"nodeStrategies": [{"name": "a"}]}"#,
            &data(&[]),
            CM,
        )
        .unwrap_err();
        assert!(e.contains("nodeConfigs NodeSelector must not empty error! configType: resource-threshold-config,nodeConfig name:a"), "{e}");
        let e = parse(&KEYS[1], r#"{"nodeStrategies": [{"name": "a", "nodeSelector": {"matchExpressions": [{"key": "k", "operator": "In"}]}}]}"#, &data(&[]), CM).unwrap_err();
        assert!(e.contains("failed to parse node selector"), "{e}");
    }

    fn ranges(key: usize, text: &str) -> Result<(), String> {
        let d = data(&[("system-config", "{}")]);
        check_ranges(&KEYS[key], &parse(&KEYS[key], text, &d, CM).unwrap())
    }

    #[test]
    fn cm_3_limits_and_paths() {
        let e = ranges(0, r#"{"metricAggregateDurationSeconds": 0, "nodeConfigs": [{"name": "n", "nodeSelector": {"matchLabels": {"a": "b"}}, "degradeTimeMinutes": 0, "resourceDiffThreshold": 0}]}"#).unwrap_err();
        assert_eq!(
            e,
            "___{\"reason\":\"ConfigParamInvalid\",\"message\":{\"ColocationCfg.ColocationStrategy.MetricAggregateDurationSeconds\":\"MetricAggregateDurationSeconds must be 1 or greater\",\"ColocationCfg.NodeConfigs[0].ColocationStrategy.DegradeTimeMinutes\":\"DegradeTimeMinutes must be 1 or greater\",\"ColocationCfg.NodeConfigs[0].ColocationStrategy.ResourceDiffThreshold\":\"ResourceDiffThreshold must be greater than 0\"}}___"
        );
        let e = ranges(4, r#"{"clusterStrategy": {"cpuBurstPercent": 20000}}"#).unwrap_err();
        assert!(e.contains("\"CPUBurstCfg.ClusterStrategy.CPUBurstConfig.CPUBurstPercent\":\"CPUBurstPercent must be 10,000 or less\""), "{e}");
        let e = ranges(
            2,
            r#"{"clusterStrategy": {"lsrClass": {"cpuQOS": {"groupIdentity": 3}}}}"#,
        )
        .unwrap_err();
        assert!(
            e.contains("ResourceQOSCfg.ClusterStrategy.LSRClass.CPUQOS.CPUQOS.GroupIdentity"),
            "{e}"
        );
        let e = ranges(3, r#"{"nodeStrategies": [{"nodeSelector": {"matchLabels": {"a": "b"}}, "watermarkScaleFactor": 401}]}"#).unwrap_err();
        assert!(e.contains("\"SystemCfg.NodeStrategies[0].SystemStrategy.WatermarkScaleFactor\":\"WatermarkScaleFactor must be 400 or less\""), "{e}");
        assert!(ranges(1, r#"{"clusterStrategy": {"memoryEvictThresholdPercent": 70, "memoryEvictLowerPercent": 65}}"#).is_ok());
        let e = ranges(1, r#"{"clusterStrategy": {"memoryEvictThresholdPercent": 60, "memoryEvictLowerPercent": 65}}"#).unwrap_err();
        assert!(
            e.contains("MemoryEvictThresholdPercent must be greater than MemoryEvictLowerPercent"),
            "{e}"
        );
        // First failing limit per field: min before the pair.
        let e = ranges(
            1,
            r#"{"clusterStrategy": {"memoryEvictThresholdPercent": -1}}"#,
        )
        .unwrap_err();
        assert!(
            e.contains("MemoryEvictThresholdPercent must be 0 or greater"),
            "{e}"
        );
    }

    #[test]
    fn cm_4_network_qos() {
        let d = |sys: &str| data(&[("system-config", sys)]);
        let p = |t: &str, sys: &str| parse(&KEYS[2], t, &d(sys), CM).unwrap();
        let check = |t: &str, sys: &str| check_network_qos(&p(t, sys), &d(sys));
        assert!(
            check(
                r#"{"clusterStrategy": {"lsClass": {"networkQOS": {"ingressRequest": 40}}}}"#,
                r#"{"clusterStrategy": {"totalNetworkBandwidth": "100"}}"#
            )
            .is_ok()
        );
        let e = check(
            r#"{"clusterStrategy": {"lsClass": {"networkQOS": {"ingressRequest": 101}}}}"#,
            "{}",
        )
        .unwrap_err();
        assert_eq!(
            e,
            "ResourceQOSCfg.ClusterStrategy.LSClass.IngressRequest: Invalid value: 101: must be percentage value just in 0-100'"
        );
        let e = check(r#"{"clusterStrategy": {"lsClass": {"networkQOS": {"ingressRequest": 60}}, "beClass": {"networkQOS": {"ingressRequest": 50}}}}"#, "{}").unwrap_err();
        assert_eq!(
            e,
            "ClusterStrategy total net bandwidth percentage already over 100"
        );
        let e = check(
            r#"{"clusterStrategy": {"lsClass": {"networkQOS": {"ingressRequest": 60}}}}"#,
            r#"{"clusterStrategy": {"totalNetworkBandwidth": "50"}}"#,
        )
        .unwrap_err();
        assert_eq!(
            e,
            "total net bandwidth over total network bandwidth in clusterStrategy"
        );
    }

    #[test]
    fn cm_5_names() {
        let p = parse(&KEYS[1], r#"{"nodeStrategies": [{"name": "a", "nodeSelector": {"matchLabels": {"x": "1"}}}, {"name": "a", "nodeSelector": {"matchLabels": {"x": "2"}}}]}"#, &data(&[]), CM).unwrap();
        assert!(
            check_names(&KEYS[1], &p)
                .unwrap_err()
                .contains("nodeConfig Name confilict")
        );
    }

    #[test]
    fn cm_6_overlap_by_probes() {
        let p = parse(&KEYS[0], r#"{"nodeConfigs": [{"name": "a", "nodeSelector": {"matchLabels": {"a": "1"}}}, {"name": "b", "nodeSelector": {"matchLabels": {"a": "1", "b": "2"}}}]}"#, &data(&[]), CM).unwrap();
        assert_eq!(
            check_overlap(&KEYS[0], &p).unwrap_err(),
            "___{\"reason\":\"NodeStrategiesOverlap\",\"message\":{\"config\":\"colocation-config\",\"strategies\":[\"a\",\"b\"]}}___"
        );
        let p = parse(&KEYS[0], r#"{"nodeConfigs": [{"name": "a", "nodeSelector": {"matchExpressions": [{"key": "z", "operator": "In", "values": ["1", "2"]}]}}, {"name": "b", "nodeSelector": {"matchLabels": {"z": "3"}}}]}"#, &data(&[]), CM).unwrap();
        assert!(check_overlap(&KEYS[0], &p).is_ok());
    }

    #[test]
    fn numbers_print_with_separators() {
        assert_eq!(fmt_num(10000.0), "10,000");
        assert_eq!(fmt_num(-25.0), "-25");
        assert_eq!(fmt_num(7999.0), "7,999");
        assert_eq!(fmt_num(100.0), "100");
    }
}
