//! A Pod spec as the API server validates it, wherever it is: a Pod's `spec`, a workload's
//! `spec.template.spec`, a CronJob's `spec.jobTemplate.spec.template.spec`. Each check reads
//! the JSON as written (the decode rule, API-2, has already named values of the wrong type, which
//! these skip).

use std::collections::HashSet;

use admission_compat::go::Quantity;
use admission_compat::validation::{PORT_NUMBER_MESSAGE, dns1123_label_errors, port_name_errors};
use serde_json::Value;

use super::{Finding, finding, quoted};

/// Who owns the Pod spec: what its restart policy may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// A Pod: any of the three policies.
    Pod,
    /// A Deployment, ReplicaSet, StatefulSet, DaemonSet or ReplicationController: `Always` only.
    Restarting,
    /// A Job or a CronJob's Job: `OnFailure` or `Never`, and one must be given.
    Job,
}

/// The containers of every list, with their field paths: init containers after the regular
/// ones, the order the API server checks names in.
fn containers<'a>(spec: &'a Value, at: &str) -> Vec<(String, &'a Value)> {
    ["containers", "initContainers", "ephemeralContainers"]
        .iter()
        .flat_map(|list| {
            spec[*list]
                .as_array()
                .into_iter()
                .flatten()
                .enumerate()
                .map(move |(i, c)| (format!("{at}.{list}[{i}]"), c))
        })
        .collect()
}

/// API-6: container ports: `containerPort` given and between 1 and 65535, a `hostPort` in the
/// same range, names IANA service names (at most 15 characters of `a-z`, `0-9` and `-`, with a
/// letter) unique within the container, `protocol` one of `TCP`, `UDP`, `SCTP` (upper case);
/// a Service's ports likewise, their `targetPort` a port number or name, and names (DNS-1123
/// labels) given when it has several. Refused with 422 before any webhook.
///
/// Refused: `{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, image: i, ports: [{containerPort: 70000}]}]}}`
///
/// Admitted: `{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, image: i, ports: [{containerPort: 8080, name: http}]}]}}`
pub fn api_6_ports(spec: &Value, at: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    let invalid = |field: String, value: &Value, msg: &str| {
        finding("API-6", field, format!("Invalid value: {value}: {msg}"))
    };
    for (path, c) in containers(spec, at) {
        let mut names = HashSet::new();
        for (i, p) in c["ports"].as_array().into_iter().flatten().enumerate() {
            let field = |f: &str| format!("{path}.ports[{i}].{f}");
            match p["containerPort"].as_i64() {
                None | Some(0) if !p["containerPort"].is_string() => out.push(finding(
                    "API-6",
                    field("containerPort"),
                    "Required value".into(),
                )),
                Some(n) if !(1..=65535).contains(&n) => out.push(invalid(
                    field("containerPort"),
                    &p["containerPort"],
                    PORT_NUMBER_MESSAGE,
                )),
                _ => {}
            }
            if let Some(n) = p["hostPort"].as_i64().filter(|n| *n != 0)
                && !(1..=65535).contains(&n)
            {
                out.push(invalid(
                    field("hostPort"),
                    &p["hostPort"],
                    PORT_NUMBER_MESSAGE,
                ));
            }
            if let Some(name) = p["name"].as_str().filter(|n| !n.is_empty()) {
                for msg in port_name_errors(name) {
                    out.push(invalid(field("name"), &p["name"], &msg));
                }
                if !names.insert(name) {
                    out.push(finding(
                        "API-6",
                        field("name"),
                        format!("Duplicate value: {}", quoted(name)),
                    ));
                }
            }
            out.extend(protocol(&p["protocol"], field("protocol")));
        }
    }
    out
}

fn protocol(value: &Value, field: String) -> Option<Finding> {
    let p = value.as_str()?;
    (!matches!(p, "TCP" | "UDP" | "SCTP")).then(|| {
        finding(
            "API-6",
            field,
            format!(
                "Unsupported value: {}: supported values: \"SCTP\", \"TCP\", \"UDP\"",
                quoted(p)
            ),
        )
    })
}

/// A Service's ports (API-6).
pub fn api_6_service_ports(spec: &Value) -> Vec<Finding> {
    let mut out = Vec::new();
    let ports = spec["ports"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut names = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        let field = |f: &str| format!("spec.ports[{i}].{f}");
        match p["name"].as_str().filter(|n| !n.is_empty()) {
            None if ports.len() > 1 => {
                out.push(finding("API-6", field("name"), "Required value".into()))
            }
            None => {}
            Some(name) => {
                for msg in dns1123_label_errors(name) {
                    out.push(finding(
                        "API-6",
                        field("name"),
                        format!("Invalid value: {}: {msg}", quoted(name)),
                    ));
                }
                if !names.insert(name) {
                    out.push(finding(
                        "API-6",
                        field("name"),
                        format!("Duplicate value: {}", quoted(name)),
                    ));
                }
            }
        }
        if let Some(n) = p["port"].as_i64()
            && !(1..=65535).contains(&n)
        {
            out.push(finding(
                "API-6",
                field("port"),
                format!("Invalid value: {n}: {PORT_NUMBER_MESSAGE}"),
            ));
        }
        match &p["targetPort"] {
            Value::Number(n) if n.as_i64().is_some_and(|n| !(1..=65535).contains(&n)) => {
                out.push(finding(
                    "API-6",
                    field("targetPort"),
                    format!("Invalid value: {n}: {PORT_NUMBER_MESSAGE}"),
                ));
            }
            Value::String(name) => {
                for msg in port_name_errors(name) {
                    out.push(finding(
                        "API-6",
                        field("targetPort"),
                        format!("Invalid value: {}: {msg}", quoted(name)),
                    ));
                }
            }
            _ => {}
        }
        out.extend(protocol(&p["protocol"], field("protocol")));
    }
    out
}

/// API-7: container resources: every request and limit at least 0, and no request above its
/// limit (a request left out takes the limit's value, which is fine). Refused with 422 before
/// any webhook. A quantity that does not parse is API-2's (the object cannot be decoded).
///
/// Refused: `{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, image: i, resources: {requests: {cpu: "2"}, limits: {cpu: "1"}}}]}}`
///
/// Admitted: `{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, image: i, resources: {requests: {cpu: 500m}, limits: {cpu: "1"}}}]}}`
pub fn api_7_resources(spec: &Value, at: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    for (path, c) in containers(spec, at) {
        let res = &c["resources"];
        let parsed = |list: &str| -> Vec<(String, String, Quantity)> {
            res[list]
                .as_object()
                .into_iter()
                .flatten()
                .filter_map(|(name, v)| {
                    let text = quantity_text(v)?;
                    Some((name.clone(), text.clone(), Quantity::parse(&text).ok()?))
                })
                .collect()
        };
        let (requests, limits) = (parsed("requests"), parsed("limits"));
        for (list, values) in [("limits", &limits), ("requests", &requests)] {
            for (name, text, q) in values {
                if q.value().cmp_value(&zero()).is_lt() {
                    out.push(finding(
                        "API-7",
                        format!("{path}.resources.{list}[{name}]"),
                        format!(
                            "Invalid value: {}: must be greater than or equal to 0",
                            quoted(text)
                        ),
                    ));
                }
            }
        }
        for (name, text, request) in &requests {
            if let Some((_, limit_text, limit)) = limits.iter().find(|(n, _, _)| n == name)
                && request.value().cmp_value(limit.value()).is_gt()
            {
                out.push(finding(
                    "API-7",
                    format!("{path}.resources.requests"),
                    format!(
                        "Invalid value: {}: must be less than or equal to {name} limit of {limit_text}",
                        quoted(text)
                    ),
                ));
            }
        }
    }
    out
}

fn zero() -> admission_compat::go::ParsedQuantity {
    admission_compat::go::ParsedQuantity::zero()
}

/// A quantity's text as written: a string, or a number YAML typed.
pub(super) fn quantity_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// API-8: containers and volumes: container names DNS-1123 labels, unique across the Pod's
/// containers, init containers and ephemeral containers; volume names DNS-1123 labels and
/// unique; every `volumeMounts[].name` one of the Pod's volumes. Refused with 422 before any
/// webhook.
///
/// Refused: `{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, image: i}, {name: c, image: j}]}}`
///
/// Admitted: `{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {volumes: [{name: data, emptyDir: {}}], containers: [{name: c, image: i, volumeMounts: [{name: data, mountPath: /data}]}]}}`
pub fn api_8_names(spec: &Value, at: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut names = HashSet::new();
    for (path, c) in containers(spec, at) {
        let Some(name) = c["name"].as_str().filter(|n| !n.is_empty()) else {
            continue;
        };
        for msg in dns1123_label_errors(name) {
            out.push(finding(
                "API-8",
                format!("{path}.name"),
                format!("Invalid value: {}: {msg}", quoted(name)),
            ));
        }
        if !names.insert(name) {
            out.push(finding(
                "API-8",
                format!("{path}.name"),
                format!("Duplicate value: {}", quoted(name)),
            ));
        }
    }
    let mut volumes = HashSet::new();
    for (i, v) in spec["volumes"].as_array().into_iter().flatten().enumerate() {
        let Some(name) = v["name"].as_str() else {
            continue;
        };
        let field = format!("{at}.volumes[{i}].name");
        for msg in dns1123_label_errors(name) {
            out.push(finding(
                "API-8",
                field.clone(),
                format!("Invalid value: {}: {msg}", quoted(name)),
            ));
        }
        if !volumes.insert(name) {
            out.push(finding(
                "API-8",
                field,
                format!("Duplicate value: {}", quoted(name)),
            ));
        }
    }
    for (path, c) in containers(spec, at) {
        for (i, m) in c["volumeMounts"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            if let Some(name) = m["name"].as_str()
                && !volumes.contains(name)
            {
                out.push(finding(
                    "API-8",
                    format!("{path}.volumeMounts[{i}].name"),
                    format!("Not found: {}", quoted(name)),
                ));
            }
        }
    }
    out
}

/// API-9: restart policies: a Pod's `Always`, `OnFailure` or `Never`; the Pod template of a
/// Deployment, ReplicaSet, StatefulSet, DaemonSet or ReplicationController `Always` (or left
/// out); a Job's (and a CronJob's Job's) `OnFailure` or `Never`, given explicitly, since the
/// default `Always` is refused there. Refused with 422 before any webhook.
///
/// Refused: `{apiVersion: batch/v1, kind: Job, metadata: {name: j}, spec: {template: {spec: {containers: [{name: c, image: i}]}}}}`
///
/// Admitted: `{apiVersion: batch/v1, kind: Job, metadata: {name: j}, spec: {template: {spec: {restartPolicy: Never, containers: [{name: c, image: i}]}}}}`
pub fn api_9_restart_policy(spec: &Value, at: &str, owner: Owner) -> Option<Finding> {
    let field = format!("{at}.restartPolicy");
    let policy = spec["restartPolicy"].as_str().filter(|p| !p.is_empty());
    let unsupported = |p: &str, allowed: &str| {
        Some(finding(
            "API-9",
            field.clone(),
            format!(
                "Unsupported value: {}: supported values: {allowed}",
                quoted(p)
            ),
        ))
    };
    match (owner, policy) {
        (Owner::Pod, Some(p)) if !matches!(p, "Always" | "OnFailure" | "Never") => {
            unsupported(p, "\"Always\", \"OnFailure\", \"Never\"")
        }
        (Owner::Restarting, Some(p)) if p != "Always" => unsupported(p, "\"Always\""),
        (Owner::Job, p) if !matches!(p, Some("OnFailure" | "Never")) => Some(finding(
            "API-9",
            field.clone(),
            format!(
                "Required value: valid values: \"OnFailure\", \"Never\" ({})",
                match p {
                    Some(p) => format!("not {}", quoted(p)),
                    None => "left out, it would be \"Always\"".to_owned(),
                }
            ),
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::apiserver::tests::fields;

    fn one(c: Value) -> Value {
        json!({"containers": [c]})
    }

    #[test]
    fn api_6_names_each_bad_port() {
        let spec = one(json!({"name": "c", "ports": [
            {"containerPort": 70000}, {"containerPort": 0}, {"containerPort": 80, "hostPort": 70000},
            {"containerPort": 81, "protocol": "tcp", "name": "HTTP"},
            {"containerPort": 82, "name": "web"}, {"containerPort": 83, "name": "web"}]}));
        assert_eq!(
            fields(&api_6_ports(&spec, "spec")),
            [
                "spec.containers[0].ports[0].containerPort",
                "spec.containers[0].ports[1].containerPort",
                "spec.containers[0].ports[2].hostPort",
                "spec.containers[0].ports[3].name",
                "spec.containers[0].ports[3].name",
                "spec.containers[0].ports[3].protocol",
                "spec.containers[0].ports[5].name",
            ]
        );
        let fine = one(
            json!({"name": "c", "ports": [{"containerPort": 8080, "name": "http", "protocol": "UDP"}]}),
        );
        assert!(api_6_ports(&fine, "spec").is_empty());
    }

    #[test]
    fn api_6_reads_service_ports() {
        let f = api_6_service_ports(&json!({"ports": [
            {"port": 70000}, {"port": 80, "targetPort": "Http_Port", "protocol": "udp"}]}));
        assert_eq!(
            fields(&f),
            [
                "spec.ports[0].name",
                "spec.ports[0].port",
                "spec.ports[1].name",
                "spec.ports[1].targetPort",
                "spec.ports[1].protocol"
            ]
        );
        assert!(
            api_6_service_ports(&json!({"ports": [{"port": 80, "targetPort": "http"}]})).is_empty()
        );
    }

    #[test]
    fn api_7_compares_requests_with_limits_in_any_unit() {
        let res = |r: Value| api_7_resources(&one(json!({"name": "c", "resources": r})), "spec");
        assert!(res(json!({"requests": {"cpu": "500m", "memory": "1G"}, "limits": {"cpu": 1, "memory": "1Gi"}})).is_empty());
        let f = res(json!({"requests": {"memory": "1Gi"}, "limits": {"memory": "512Mi"}}));
        assert_eq!(fields(&f), ["spec.containers[0].resources.requests"]);
        assert!(f[0].message.ends_with("memory limit of 512Mi"), "{f:?}");
        assert_eq!(
            fields(&res(json!({"requests": {"cpu": "-1"}}))),
            ["spec.containers[0].resources.requests[cpu]"]
        );
        assert!(res(json!({"limits": {"cpu": "1"}})).is_empty());
    }

    #[test]
    fn api_8_finds_duplicates_bad_names_and_missing_volumes() {
        let spec = json!({"containers": [{"name": "c", "volumeMounts": [{"name": "data"}]}, {"name": "Main"}],
            "initContainers": [{"name": "c"}], "volumes": [{"name": "v"}, {"name": "v"}]});
        assert_eq!(
            fields(&api_8_names(&spec, "spec")),
            [
                "spec.containers[1].name",
                "spec.initContainers[0].name",
                "spec.volumes[1].name",
                "spec.containers[0].volumeMounts[0].name"
            ]
        );
    }

    #[test]
    fn api_9_follows_the_owner() {
        let spec = |p: Option<&str>| match p {
            Some(p) => json!({"restartPolicy": p}),
            None => json!({}),
        };
        assert!(api_9_restart_policy(&spec(Some("Sometimes")), "spec", Owner::Pod).is_some());
        assert!(api_9_restart_policy(&spec(None), "spec", Owner::Pod).is_none());
        assert!(api_9_restart_policy(&spec(Some("Never")), "t", Owner::Restarting).is_some());
        assert!(api_9_restart_policy(&spec(None), "t", Owner::Restarting).is_none());
        assert!(api_9_restart_policy(&spec(None), "t", Owner::Job).is_some());
        assert!(api_9_restart_policy(&spec(Some("Always")), "t", Owner::Job).is_some());
        assert!(api_9_restart_policy(&spec(Some("OnFailure")), "t", Owner::Job).is_none());
    }
}
