//! What the API server itself refuses before any webhook sees the object: values of the wrong
//! JSON type (an unquoted YAML boolean in a label map, a string where a number belongs, a
//! quantity that does not parse), the required fields of the built-in kinds, the validation of
//! names, labels, ports, resources, containers, restart policies, selectors and schedules, and
//! API versions Kubernetes removed. In a cluster these fail `kubectl apply` with a 400 or 422 (or
//! before sending, for a removed version) and no webhook is called; a checker that only asks the
//! webhooks would pass them.
//!
//! Each check is a rule with its own id (API-1..16, `docs/admission-check.md`, "What the API
//! server refuses first"), held to the real API server's answers by
//! `tests/api_server_corpus.rs`. Built-in kinds are decoded and validated; every kind with a
//! schema here (the built-in kinds, our services' custom resources) is read for unknown fields,
//! and our custom resources against their CRD's structural schema.

mod cron;
mod meta;
mod pod;
mod removed;
mod structure;
mod update;
mod workloads;

pub use cron::api_11_schedule;
pub use meta::{api_4_names, api_5_labels};
pub use pod::{
    Owner, api_6_ports, api_6_service_ports, api_7_resources, api_8_names, api_9_restart_policy,
};
pub use removed::api_12_removed_versions;
pub use structure::{api_14_unknown_fields, api_15_crd_schema, schema_findings};
pub use update::api_16_immutable;
pub use workloads::{api_10_selector, api_13_limits};

use k8s_openapi::api::{apps, batch, core, scheduling};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::catalog::Finding;

/// A label or annotation value that YAML typed as a boolean or number, read as the string it
/// spells (what the object would be once quoted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retyped {
    /// `metadata.labels[key]` or `metadata.annotations[key]`.
    pub field: String,
    /// The text as written.
    pub text: String,
    /// `boolean` or `number`.
    pub was: &'static str,
}

/// Every refusal of the API server's own decoding and validation of `object`; `retyped` are
/// the values the reader had to turn into strings (already strings in `object`). An object of a
/// removed version is refused for that alone: nothing is sent.
pub fn findings(object: &Value, retyped: &[Retyped]) -> Vec<Finding> {
    if let Some(f) = api_12_removed_versions(object) {
        return vec![f];
    }
    let mut out = api_1_string_maps(retyped);
    out.extend(api_2_types(object));
    out.extend(api_3_required(object));
    out.extend(api_4_names(object));
    out.extend(api_5_labels(&object["metadata"], "metadata"));
    for (at, owner) in pod_specs(object) {
        let template = at.strip_suffix(".spec").unwrap_or_default();
        if !template.is_empty() {
            let meta = at_path(object, template).map_or(&Value::Null, |t| &t["metadata"]);
            out.extend(api_5_labels(meta, &format!("{template}.metadata")));
        }
        let Some(spec) = at_path(object, &at) else {
            continue;
        };
        out.extend(api_6_ports(spec, &at));
        out.extend(api_7_resources(spec, &at));
        out.extend(api_8_names(spec, &at));
        out.extend(api_9_restart_policy(spec, &at, owner));
    }
    if (object["apiVersion"].as_str(), object["kind"].as_str()) == (Some("v1"), Some("Service")) {
        out.extend(api_6_service_ports(&object["spec"]));
    }
    out.extend(api_10_selector(object));
    out.extend(api_11_schedule(object));
    out.extend(api_13_limits(object));
    // API-14 and API-15 from one walk of the schema, each rule's findings together.
    let (schema, other): (Vec<Finding>, Vec<Finding>) =
        schema_findings(object, crate::schema::built_in(), crate::schema::crds())
            .into_iter()
            .partition(|f| f.rule == "API-14");
    out.extend(schema);
    out.extend(other);
    out
}

/// The rules whose refusal is a decoding failure (400) rather than a validation one (422), and
/// the one that stops kubectl before it sends (404: no such resource).
pub fn status_code(findings: &[Finding]) -> u16 {
    if findings.iter().any(|f| f.rule == "API-12") {
        404
    } else if findings
        .iter()
        .any(|f| matches!(f.rule.as_str(), "API-1" | "API-2"))
    {
        400
    } else {
        422
    }
}

/// The Pod specs of a built-in kind, as field paths, with what owns them.
fn pod_specs(object: &Value) -> Vec<(String, Owner)> {
    let one = |at: &str, owner| vec![(at.to_owned(), owner)];
    match (
        object["apiVersion"].as_str().unwrap_or_default(),
        object["kind"].as_str().unwrap_or_default(),
    ) {
        ("v1", "Pod") => one("spec", Owner::Pod),
        ("v1", "PodTemplate") => one("template.spec", Owner::Pod),
        ("v1", "ReplicationController")
        | ("apps/v1", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet") => {
            one("spec.template.spec", Owner::Restarting)
        }
        ("batch/v1", "Job") => one("spec.template.spec", Owner::Job),
        ("batch/v1", "CronJob") => one("spec.jobTemplate.spec.template.spec", Owner::Job),
        _ => Vec::new(),
    }
}

/// A value quoted as the API server's messages quote it (Go's `%q`).
fn quoted(s: &str) -> String {
    admission_compat::go::go_quote(s)
}

fn finding(rule: &str, field: String, message: String) -> Finding {
    Finding {
        rule: rule.into(),
        field,
        message,
    }
}

/// API-1: label and annotation values are strings. YAML reads an unquoted `true`, `false`,
/// `yes` or `3` as a boolean or number, which the API server cannot decode into a string map
/// (400 before any webhook); quoting the value fixes it.
///
/// Refused: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, labels: {team: yes}}}`
///
/// Admitted: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, labels: {team: "yes"}}}`
pub fn api_1_string_maps(retyped: &[Retyped]) -> Vec<Finding> {
    retyped
        .iter()
        .map(|r| {
            finding(
                "API-1",
                r.field.clone(),
                format!(
                    "YAML reads {} as a {}, and the API server cannot decode it into a string: quote it (\"{}\")",
                    r.text, r.was, r.text
                ),
            )
        })
        .collect()
}

/// Decodes `v` as `T`, naming the field where decoding stops.
fn decode_as<T: DeserializeOwned>(v: &Value) -> Option<(String, String)> {
    serde_path_to_error::deserialize::<_, T>(v).err().map(|e| {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { path };
        (path, e.into_inner().to_string())
    })
}

/// API-2: a built-in kind decodes into its API type: every value has the JSON type the field
/// declares (a number for `containerPort`, a string for an env `value`, a list for `args`). The
/// API server refuses the request otherwise (400), naming the field; quantities and
/// int-or-string fields take numbers and strings both, and a container's requests and limits
/// must parse as quantities (`500m`, `1Gi`, `2`; not `1x`).
///
/// Refused: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: {port: 80}}`
///
/// Admitted: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: {port: "80"}}`
pub fn api_2_types(object: &Value) -> Option<Finding> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let failed = match (api_version, kind) {
        ("v1", "Pod") => decode_as::<core::v1::Pod>(object),
        ("v1", "ConfigMap") => decode_as::<core::v1::ConfigMap>(object),
        ("v1", "Namespace") => decode_as::<core::v1::Namespace>(object),
        ("v1", "Node") => decode_as::<core::v1::Node>(object),
        ("v1", "Service") => decode_as::<core::v1::Service>(object),
        ("v1", "ReplicationController") => decode_as::<core::v1::ReplicationController>(object),
        ("apps/v1", "Deployment") => decode_as::<apps::v1::Deployment>(object),
        ("apps/v1", "ReplicaSet") => decode_as::<apps::v1::ReplicaSet>(object),
        ("apps/v1", "StatefulSet") => decode_as::<apps::v1::StatefulSet>(object),
        ("apps/v1", "DaemonSet") => decode_as::<apps::v1::DaemonSet>(object),
        ("batch/v1", "Job") => decode_as::<batch::v1::Job>(object),
        ("batch/v1", "CronJob") => decode_as::<batch::v1::CronJob>(object),
        ("scheduling.k8s.io/v1", "PriorityClass") => {
            decode_as::<scheduling::v1::PriorityClass>(object)
        }
        _ => None,
    };
    let Some((field, why)) = failed else {
        return malformed_quantity(object);
    };
    Some(finding(
        "API-2",
        field,
        format!("the API server cannot decode this {kind}: {why}"),
    ))
}

/// The first request or limit of a built-in kind's containers that is not a quantity.
fn malformed_quantity(object: &Value) -> Option<Finding> {
    pod_specs(object).into_iter().find_map(|(at, _)| {
        let spec = at_path(object, &at)?;
        ["containers", "initContainers"].iter().find_map(|list| {
            spec[*list].as_array()?.iter().enumerate().find_map(|(i, c)| {
                ["requests", "limits"].iter().find_map(|kind| {
                    c["resources"][*kind].as_object()?.iter().find_map(|(name, v)| {
                        let text = pod::quantity_text(v)?;
                        admission_compat::go::Quantity::parse(&text).err().map(|_| {
                            finding(
                                "API-2",
                                format!("{at}.{list}[{i}].resources.{kind}[{name}]"),
                                format!(
                                    "Invalid value: {}: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                                    quoted(&text)
                                ),
                            )
                        })
                    })
                })
            })
        })
    })
}

/// The fields a built-in kind cannot do without, as `(path, what)`; a path ending in `[]` is a
/// list that needs at least one item.
fn required_of(api_version: &str, kind: &str) -> &'static [&'static str] {
    match (api_version, kind) {
        ("apps/v1", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet") => {
            &["spec.selector", "spec.template"]
        }
        ("batch/v1", "Job") => &["spec.template"],
        ("batch/v1", "CronJob") => &["spec.schedule", "spec.jobTemplate"],
        ("v1", "ReplicationController") => &["spec.template"],
        ("scheduling.k8s.io/v1", "PriorityClass") => &["value"],
        _ => &[],
    }
}

fn present(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
        Some(_) => true,
    }
}

fn at_path<'a>(object: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(object, |v, k| v.get(k))
}

/// API-3: the fields the API server's validation requires of built-in kinds: a name (or
/// `generateName`) on every object; a Pod's containers, each with a name and an image; a
/// workload's selector and template; a CronJob's schedule and job template; a PriorityClass's
/// value. Refused with 422 "Required value" before any webhook.
///
/// Refused: `{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c}]}}`
///
/// Admitted: `{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: c, image: busybox}]}}`
pub fn api_3_required(object: &Value) -> Vec<Finding> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let required = |field: &str, what: &str| {
        finding("API-3", field.to_owned(), format!("Required value: {what}"))
    };
    let mut out = Vec::new();
    let meta = &object["metadata"];
    if !present(meta.get("name")) && !present(meta.get("generateName")) {
        out.push(required(
            "metadata.name",
            "name or generateName is required",
        ));
    }
    for field in required_of(api_version, kind) {
        if !present(at_path(object, field)) {
            out.push(required(field, "the API server requires it"));
        }
    }
    if (api_version, kind) == ("v1", "Pod") {
        let spec = &object["spec"];
        if !present(spec.get("containers")) {
            out.push(required("spec.containers", "a Pod needs a container"));
        }
        for list in ["initContainers", "containers"] {
            for (i, c) in spec[list].as_array().into_iter().flatten().enumerate() {
                for key in ["name", "image"] {
                    if !present(c.get(key)) {
                        out.push(required(
                            &format!("spec.{list}[{i}].{key}"),
                            "every container needs it",
                        ));
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The fields `found` names, in order: what the rules' tests compare.
    pub(super) fn fields(found: &[Finding]) -> Vec<&str> {
        found.iter().map(|f| f.field.as_str()).collect()
    }

    fn pod(spec: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec})
    }

    #[test]
    fn api_1_names_each_retyped_value_and_says_to_quote_it() {
        let f = api_1_string_maps(&[Retyped {
            field: "metadata.labels[a]".into(),
            text: "true".into(),
            was: "boolean",
        }]);
        assert_eq!(f[0].rule, "API-1");
        assert_eq!(f[0].field, "metadata.labels[a]");
        assert!(f[0].message.contains("quote it (\"true\")"), "{f:?}");
    }

    #[test]
    fn api_2_names_the_field_of_a_wrong_type_and_accepts_numbers_as_quantities() {
        let bad = pod(json!({"containers": [{"name": "c", "image": "i",
            "ports": [{"containerPort": "80"}]}]}));
        let f = api_2_types(&bad).expect("a string port is refused");
        assert_eq!(f.field, "spec.containers[0].ports[0].containerPort");
        let env = pod(json!({"containers": [{"name": "c", "image": "i",
            "env": [{"name": "N", "value": 3}]}]}));
        assert_eq!(
            api_2_types(&env).map(|f| f.field),
            Some("spec.containers[0].env[0].value".into())
        );
        let fine = pod(json!({"containers": [{"name": "c", "image": "i",
            "resources": {"limits": {"cpu": 1, "memory": "1Gi"}},
            "ports": [{"containerPort": 80}],
            "livenessProbe": {"httpGet": {"port": "http"}}}]}));
        assert_eq!(api_2_types(&fine), None);
        let custom = json!({"apiVersion": "example.com/v1", "kind": "Pod", "spec": 3});
        assert_eq!(api_2_types(&custom), None);
    }

    #[test]
    fn api_3_names_missing_names_containers_images_and_workload_fields() {
        let f = api_3_required(&json!({"apiVersion": "v1", "kind": "Pod", "metadata": {},
            "spec": {"containers": [{"name": "c"}], "initContainers": [{"image": "i"}]}}));
        let fields: Vec<&str> = f.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "metadata.name",
                "spec.initContainers[0].name",
                "spec.containers[0].image"
            ]
        );
        assert!(f.iter().all(|f| f.rule == "API-3"));
        let d = api_3_required(&json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"generateName": "d-"}, "spec": {"template": {"spec": {}}}}));
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].field, "spec.selector");
        let ok = pod(json!({"containers": [{"name": "c", "image": "i"}]}));
        assert!(api_3_required(&ok).is_empty());
    }
}
