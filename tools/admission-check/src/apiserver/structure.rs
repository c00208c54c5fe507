//! An object against its kind's schema: the built-in kinds' OpenAPI v3 (recorded from the API
//! server) and the structural schemas of the CRDs our services serve ([`crate::schema`]).

use serde_json::Value;

use super::{Finding, finding, quoted};
use crate::schema::{Node, Schemas};

/// The schema of a custom resource's `metadata`: the built-in `ObjectMeta`.
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// A walk of one object: unknown fields always (strict decoding), the CRD schema's
/// constraints when `crd` (the built-in kinds' values are API-2's and validation's).
struct Walk<'a> {
    built_in: &'a Schemas,
    crd: bool,
    /// The root of a custom resource: `apiVersion` and `kind` are declared whatever the
    /// schema says, `metadata` is read as [`Walk::meta`].
    custom_root: bool,
    /// The built-in `ObjectMeta`, by reference.
    meta: &'a Node,
    out: Vec<Finding>,
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => quoted(s),
        other => other.to_string(),
    }
}

impl Walk<'_> {
    fn walk(&mut self, v: &Value, node: &Node, path: &str) {
        let n = self.built_in.resolve(node);
        // The API server drops nulls before validating.
        if v.is_null() {
            return;
        }
        // Below a value of the wrong type only unknown fields are read (strict decoding reads
        // every field; the schema's constraints stop at the type error).
        let checking = self.crd;
        if checking && !self.constraints(v, n, path) {
            self.crd = false;
        }
        match v {
            Value::Object(m) => {
                if self.crd {
                    for r in &n.required {
                        if m.get(r).is_none_or(Value::is_null) {
                            self.out.push(finding(
                                "API-15",
                                join(path, r),
                                "Required value".into(),
                            ));
                        }
                    }
                }
                for (k, child) in m {
                    if self.custom_root && path.is_empty() {
                        match k.as_str() {
                            "apiVersion" | "kind" => continue,
                            "metadata" => {
                                let meta = self.meta;
                                self.walk(child, meta, k);
                                continue;
                            }
                            _ => {}
                        }
                    }
                    if let Some(p) = n.properties.get(k) {
                        self.walk(child, p, &join(path, k));
                    } else if let Some(values) = &n.values {
                        self.walk(child, values, &format!("{path}[{k}]"));
                    } else if n.embedded && matches!(k.as_str(), "apiVersion" | "kind") {
                    } else if n.embedded && k == "metadata" {
                        let meta = self.meta;
                        self.walk(child, meta, &join(path, k));
                    } else if !n.open && (n.ty.is_some() || !n.properties.is_empty()) {
                        self.out.push(finding(
                            "API-14",
                            join(path, k),
                            format!(
                                "strict decoding error: unknown field {}",
                                quoted(&join(path, k))
                            ),
                        ));
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item) = &n.items {
                    for (i, x) in items.iter().enumerate() {
                        self.walk(x, item, &format!("{path}[{i}]"));
                    }
                }
            }
            _ => {}
        }
        self.crd = checking;
    }

    /// The CRD schema's checks of one value; false when its type is wrong (nothing below it
    /// is read then).
    fn constraints(&mut self, v: &Value, n: &Node, path: &str) -> bool {
        let actual = json_type(v);
        let expected = if n.int_or_string {
            Some("integer or string")
        } else {
            n.ty.as_deref()
        };
        if let Some(ty) = expected {
            let fits = match ty {
                "number" => v.is_number(),
                "integer or string" => matches!(actual, "integer" | "string"),
                other => other == actual,
            };
            if !fits {
                self.out.push(finding(
                    "API-15",
                    path.to_owned(),
                    format!(
                        "Invalid value: \"{actual}\": {path} in body must be of type {ty}: \"{actual}\""
                    ),
                ));
                return false;
            }
        }
        let mut refuse = |msg: String| {
            self.out.push(finding("API-15", path.to_owned(), msg));
        };
        if !n.enumeration.is_empty() && !n.enumeration.contains(v) {
            let allowed: Vec<String> = n.enumeration.iter().map(shown).collect();
            refuse(format!(
                "Unsupported value: {}: supported values: {}",
                shown(v),
                allowed.join(", ")
            ));
        }
        if let Some(x) = v.as_f64() {
            if let Some(min) = n.minimum
                && (x < min || (n.exclusive_minimum && x == min))
            {
                let than = if n.exclusive_minimum {
                    "greater than"
                } else {
                    "greater than or equal to"
                };
                refuse(format!(
                    "Invalid value: {v}: {path} in body should be {than} {min}"
                ));
            }
            if let Some(max) = n.maximum
                && (x > max || (n.exclusive_maximum && x == max))
            {
                let than = if n.exclusive_maximum {
                    "less than"
                } else {
                    "less than or equal to"
                };
                refuse(format!(
                    "Invalid value: {v}: {path} in body should be {than} {max}"
                ));
            }
        }
        if let Some(s) = v.as_str() {
            let chars = s.chars().count() as u64;
            if n.min_length.is_some_and(|m| chars < m) {
                refuse(format!(
                    "Invalid value: {}: {path} in body should be at least {} chars long",
                    shown(v),
                    n.min_length.unwrap_or_default()
                ));
            }
            if n.max_length.is_some_and(|m| chars > m) {
                refuse(format!(
                    "Too long: may not be more than {} bytes",
                    n.max_length.unwrap_or_default()
                ));
            }
        }
        if let Some(a) = v.as_array() {
            let len = a.len() as u64;
            if n.min_items.is_some_and(|m| len < m) {
                refuse(format!(
                    "Invalid value: {len}: {path} in body should have at least {} items",
                    n.min_items.unwrap_or_default()
                ));
            }
            if n.max_items.is_some_and(|m| len > m) {
                refuse(format!(
                    "Too many: {len}: must have at most {} items",
                    n.max_items.unwrap_or_default()
                ));
            }
        }
        true
    }
}

/// API-14: no unknown fields. kubectl asks the API server for strict field validation (its
/// default, `--validate=strict`), which refuses a field the kind's schema does not declare (a
/// typo such as `imagePullPolicyy`, a field of another version, a field at the wrong depth) with
/// 400 before any webhook; built-in kinds are read against kube-apiserver v1.34.4's OpenAPI v3
/// documents, the custom resources of the upstream CRDs a cluster running our services installs
/// (`fixtures/crds/`) against their structural schema (with the built-in `ObjectMeta` as their
/// `metadata`).
///
/// Refused: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c}, datas: {a: b}}`
///
/// Admitted: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c}, data: {a: b}}`
pub fn api_14_unknown_fields(object: &Value, built_in: &Schemas, crds: &Schemas) -> Vec<Finding> {
    let mut found = schema_findings(object, built_in, crds);
    found.retain(|f| f.rule == "API-14");
    found
}

/// API-14's and API-15's findings of `object` in one walk of its kind's schema: unknown fields
/// of any kind with a schema, and the CRD's constraints of a custom resource.
pub fn schema_findings(object: &Value, built_in: &Schemas, crds: &Schemas) -> Vec<Finding> {
    let (Some(api_version), Some(kind)) = (object["apiVersion"].as_str(), object["kind"].as_str())
    else {
        return Vec::new();
    };
    let (node, custom) = match built_in.kind(api_version, kind) {
        Some(n) => (n, false),
        None => match crds.kind(api_version, kind) {
            Some(n) => (n, true),
            None => return Vec::new(),
        },
    };
    let meta = object_meta();
    let mut walk = Walk {
        built_in,
        crd: custom,
        custom_root: custom,
        meta: &meta,
        out: Vec::new(),
    };
    walk.walk(object, node, "");
    walk.out
}

/// A node that reads its value as the built-in `ObjectMeta`.
fn object_meta() -> Node {
    Node {
        reference: Some(OBJECT_META.into()),
        ..Node::default()
    }
}

/// API-15: a custom resource of an upstream CRD our services serve (or deploy with: cert-manager,
/// the Prometheus operator) satisfies the CRD's structural schema: every value
/// of the declared type (`integer`, `string`, `boolean`, `array`, `object`; `number` takes any
/// number, int-or-string either), in the `enum`, within `minimum` and `maximum`, `minLength` and
/// `maxLength`, `minItems` and `maxItems`, and every `required` property present. Refused with
/// 422 before any webhook. (`pattern`, `format` and `x-kubernetes-validations` are not read.)
///
/// Refused: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: "kthena:num_requests_waiting"}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{metricName: "kthena:num_requests_waiting", targetValue: "10"}]}}`
pub fn api_15_crd_schema(object: &Value, built_in: &Schemas, crds: &Schemas) -> Vec<Finding> {
    let mut found = schema_findings(object, built_in, crds);
    found.retain(|f| f.rule == "API-15");
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crds() -> Schemas {
        let root = Node::from_schema(
            &json!({"type": "object", "properties": {
                "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "spec": {"type": "object", "required": ["name"], "properties": {
                    "name": {"type": "string", "maxLength": 5},
                    "replicas": {"type": "integer", "minimum": 1},
                    "mode": {"type": "string", "enum": ["a", "b"]},
                    "port": {"x-kubernetes-int-or-string": true},
                    "tags": {"type": "array", "maxItems": 1, "items": {"type": "string"}},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}}}}}}),
            false,
        );
        Schemas {
            kinds: [("x.io/v1/Thing".to_owned(), "thing".to_owned())].into(),
            schemas: [("thing".to_owned(), root)].into(),
        }
    }

    fn thing(spec: Value) -> Value {
        json!({"apiVersion": "x.io/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": spec})
    }

    fn fields(f: &[Finding]) -> Vec<(&str, &str)> {
        f.iter()
            .map(|f| (f.rule.as_str(), f.field.as_str()))
            .collect()
    }

    #[test]
    fn api_14_names_unknown_fields_where_the_schema_is_closed() {
        let built_in = crate::schema::built_in();
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labelz": {}},
            "spec": {"containers": [{"name": "c", "image": "i", "imagePullPolicyy": "Always",
                     "resources": {"limits": {"cpu": "1"}}}], "nodeSelector": {"any": "key"}}});
        assert_eq!(
            fields(&api_14_unknown_fields(&pod, built_in, &crds())),
            [
                ("API-14", "metadata.labelz"),
                ("API-14", "spec.containers[0].imagePullPolicyy")
            ]
        );
        let cr =
            thing(json!({"name": "n", "free": {"x": {"y": 1}}, "labels": {"k": "v"}, "extra": 1}));
        assert_eq!(
            fields(&api_14_unknown_fields(&cr, built_in, &crds())),
            [("API-14", "spec.extra")]
        );
        let meta = json!({"apiVersion": "x.io/v1", "kind": "Thing", "metadata": {"name": "t", "nam": "x"}, "spec": {"name": "n"}});
        assert_eq!(
            fields(&api_14_unknown_fields(&meta, built_in, &crds())),
            [("API-14", "metadata.nam")]
        );
    }

    #[test]
    fn api_15_reads_types_enums_bounds_and_required() {
        let built_in = crate::schema::built_in();
        let f = api_15_crd_schema(
            &thing(
                json!({"name": "toolong", "replicas": 0, "mode": "c", "port": true,
                          "tags": ["a", "b"], "labels": {"k": 1}}),
            ),
            built_in,
            &crds(),
        );
        assert_eq!(
            fields(&f),
            [
                ("API-15", "spec.labels[k]"),
                ("API-15", "spec.mode"),
                ("API-15", "spec.name"),
                ("API-15", "spec.port"),
                ("API-15", "spec.replicas"),
                ("API-15", "spec.tags"),
            ]
        );
        let missing = api_15_crd_schema(&thing(json!({"replicas": "1"})), built_in, &crds());
        assert_eq!(
            fields(&missing),
            [("API-15", "spec.name"), ("API-15", "spec.replicas")]
        );
        assert!(
            api_15_crd_schema(
                &thing(json!({"name": "n", "port": "http", "replicas": 2})),
                built_in,
                &crds()
            )
            .is_empty()
        );
    }
}
