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
    /// The CRDs' schemas, whose patterns they compile.
    crds: &'a Schemas,
    crd: bool,
    /// The root of a custom resource: `apiVersion` and `kind` are declared whatever the
    /// schema says, `metadata` is read as [`Walk::meta`].
    custom_root: bool,
    /// The built-in `ObjectMeta`, by reference.
    meta: &'a Node,
    /// In a CRD's schema, whose validation names a map's value `map.key` (the built-in kinds'
    /// name it `map[key]`).
    dotted_maps: bool,
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
    /// An object's `metadata`: the built-in `ObjectMeta`, whatever schema it is in.
    fn walk_meta(&mut self, v: &Value, path: &str) {
        let (meta, dotted) = (self.meta, self.dotted_maps);
        self.dotted_maps = false;
        self.walk(v, meta, path);
        self.dotted_maps = dotted;
    }

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
                                self.walk_meta(child, k);
                                continue;
                            }
                            _ => {}
                        }
                    }
                    if let Some(p) = n.properties.get(k) {
                        self.walk(child, p, &join(path, k));
                    } else if let Some(values) = &n.values {
                        let at = if self.dotted_maps {
                            join(path, k)
                        } else {
                            format!("{path}[{k}]")
                        };
                        self.walk(child, values, &at);
                    } else if n.embedded && matches!(k.as_str(), "apiVersion" | "kind") {
                    } else if n.embedded && k == "metadata" {
                        self.walk_meta(child, &join(path, k));
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
            if let Some(p) = &n.pattern
                && self.crds.matches(p, s) == Some(false)
            {
                refuse(format!(
                    "Invalid value: {}: {path} in body should match '{p}'",
                    shown(v)
                ));
            }
            if let Some(f) = &n.format
                && !format_holds(f, s)
            {
                // The API server names the format as the schema writes it, `date-time` among them.
                let name = if f == "datetime" { "date-time" } else { f };
                refuse(format!(
                    "Invalid value: {}: {path} in body must be of type {name}: {}",
                    shown(v),
                    shown(v)
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

/// Whether `s` is of string format `format` (one of [`crate::schema::CHECKED_FORMATS`]) as the
/// API server's OpenAPI validation (kube-openapi's `strfmt`) decides.
fn format_holds(format: &str, s: &str) -> bool {
    match format {
        "uri" => admission_compat::go::parse_request_uri(s).is_ok(),
        "date" => admission_compat::go::is_full_date(s),
        "datetime" => is_date_time(s),
        "byte" => is_base64(s),
        "uuid" => is_uuid(s),
        _ => true,
    }
}

/// strfmt's date-time: lower-cased and cut at each `t`, a date before the first and, between
/// the first and the second, `hh:mm:ss`, optional fraction (after any one character, as its
/// regular expression's unescaped `.` reads), and `z` or an offset.
fn is_date_time(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_ascii_lowercase();
    let mut parts = lower.split('t');
    let (Some(date), Some(time)) = (parts.next(), parts.next()) else {
        return false;
    };
    if !admission_compat::go::is_full_date(date) {
        return false;
    }
    let t = time.as_bytes();
    let two = |i: usize| {
        t.get(i..i + 2)
            .is_some_and(|d| d.iter().all(u8::is_ascii_digit))
    };
    if !(two(0) && t.get(2) == Some(&b':') && two(3) && t.get(5) == Some(&b':') && two(6)) {
        return false;
    }
    if !(&time[0..2] <= "23" && &time[3..5] <= "59" && &time[6..8] <= "59") {
        return false;
    }
    let zone_ok = |z: &str| {
        z == "z"
            || (z.len() == 6
                && matches!(z.as_bytes()[0], b'+' | b'-')
                && z.as_bytes()[3] == b':'
                && z[1..3]
                    .bytes()
                    .chain(z[4..6].bytes())
                    .all(|b| b.is_ascii_digit()))
    };
    let rest = &time[8..];
    if zone_ok(rest) {
        return true;
    }
    // Any one character, then digits, then the zone: the zone is at the end, so try each split.
    let mut chars = rest.char_indices();
    if chars.next().is_none_or(|(_, c)| c == '\n') {
        return false;
    }
    let after = chars.next().map_or(rest.len(), |(i, _)| i);
    let tail = &rest[after..];
    (1..=tail.len()).any(|n| {
        tail.is_char_boundary(n)
            && tail[..n].bytes().all(|b| b.is_ascii_digit())
            && zone_ok(&tail[n..])
    })
}

/// govalidator's base64: groups of four of `A-Za-z0-9+/`, the last possibly padded with `=`;
/// not empty.
fn is_base64(s: &str) -> bool {
    let b = s.as_bytes();
    if b.is_empty() || !b.len().is_multiple_of(4) {
        return false;
    }
    let alphabet = |c: &u8| c.is_ascii_alphanumeric() || *c == b'+' || *c == b'/';
    let (body, last) = b.split_at(b.len() - 4);
    body.iter().all(alphabet)
        && match last {
            [a, b, b'=', b'='] => alphabet(a) && alphabet(b),
            [a, b, c, b'='] => alphabet(a) && alphabet(b) && alphabet(c),
            other => other.iter().all(alphabet),
        }
}

/// strfmt's uuid: 32 hex digits in groups of 8-4-4-4-12, each dash optional, any case.
fn is_uuid(s: &str) -> bool {
    let mut hex = s.bytes().peekable();
    for (i, group) in [8, 4, 4, 4, 12].into_iter().enumerate() {
        if i > 0 && hex.peek() == Some(&b'-') {
            hex.next();
        }
        for _ in 0..group {
            if !hex.next().is_some_and(|c| c.is_ascii_hexdigit()) {
                return false;
            }
        }
    }
    hex.next().is_none()
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
        crds,
        crd: custom,
        custom_root: custom,
        dotted_maps: custom,
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
/// `maxLength`, `minItems` and `maxItems`, every `required` property present, every string
/// matching its `pattern` (a Go regular expression) and of its `format` (`uri` as Go's
/// `url.ParseRequestURI` reads it, `date-time`, `date`, `byte`, `uuid`; formats the upstream
/// CRDs do not use are not checked). Refused with 422 before any webhook.
/// (`x-kubernetes-validations`, CEL rules, are not read.)
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
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "code": {"type": "string", "pattern": "^[a-z]+$"},
                    "url": {"type": "string", "format": "uri"},
                    "when": {"type": "string", "format": "date-time"},
                    "data": {"type": "string", "format": "byte"},
                    "count": {"type": "integer", "format": "int32"}}}}}),
            false,
        );
        Schemas {
            kinds: [("x.io/v1/Thing".to_owned(), "thing".to_owned())].into(),
            schemas: [("thing".to_owned(), root)].into(),
            patterns: Default::default(),
        }
    }

    fn thing(spec: Value) -> Value {
        json!({"apiVersion": "x.io/v1", "kind": "Thing", "metadata": {"name": "t"}, "spec": spec})
    }

    #[test]
    fn api_15_reads_patterns_and_formats() {
        let built_in = crate::schema::built_in();
        let good = thing(json!({"name": "a", "code": "abc", "url": "https://x.io/p",
            "when": "2026-11-29T10:00:00Z", "data": "aGk=", "count": 3}));
        assert_eq!(fields(&api_15_crd_schema(&good, built_in, &crds())), []);
        let bad = thing(json!({"name": "a", "code": "aBc", "url": "x.io/p",
            "when": "2026-02-30T10:00:00Z", "data": "aGk"}));
        let found = api_15_crd_schema(&bad, built_in, &crds());
        assert_eq!(
            fields(&found),
            [
                ("API-15", "spec.code"),
                ("API-15", "spec.data"),
                ("API-15", "spec.url"),
                ("API-15", "spec.when")
            ]
        );
        assert_eq!(
            found[0].message,
            "Invalid value: \"aBc\": spec.code in body should match '^[a-z]+$'"
        );
        assert_eq!(
            found[2].message,
            "Invalid value: \"x.io/p\": spec.url in body must be of type uri: \"x.io/p\""
        );
        assert_eq!(
            found[3].message,
            "Invalid value: \"2026-02-30T10:00:00Z\": spec.when in body must be of type date-time: \"2026-02-30T10:00:00Z\""
        );
    }

    #[test]
    fn formats_as_kube_openapi_reads_them() {
        for (s, ok) in [
            ("2026-11-29T10:00:00Z", true),
            ("2026-11-29t10:00:00.123+01:00", true),
            ("2026-11-29T10:00:00x5z", true),
            ("2026-11-29T10:00:00", false),
            ("2026-11-29T24:00:00Z", false),
            ("2024-02-29T00:00:00Z", true),
            ("2023-02-29T00:00:00Z", false),
            ("2026-11-29 10:00:00Z", false),
        ] {
            assert_eq!(is_date_time(s), ok, "{s}");
        }
        for (s, ok) in [
            ("aGk=", true),
            ("aGVsbG8h", true),
            ("aGk", false),
            ("", false),
            ("a===", false),
        ] {
            assert_eq!(is_base64(s), ok, "{s}");
        }
        for (s, ok) in [
            ("123e4567-e89b-12d3-a456-426614174000", true),
            ("123E4567E89B12D3A456426614174000", true),
            ("123e4567-e89b-12d3-a456-42661417400", false),
        ] {
            assert_eq!(is_uuid(s), ok, "{s}");
        }
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
                ("API-15", "spec.labels.k"),
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
