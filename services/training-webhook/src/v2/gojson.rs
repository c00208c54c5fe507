//! Go's JSON view of Trainer values, from a table of Go struct layouts.
//!
//! Upstream prints a bad value that is a struct or a list as `encoding/json` marshals the Go
//! value: fields in Go declaration order, `omitempty` fields left out when empty, other fields
//! always present (a missing `name` as `""`), quantities in canonical form, times at second
//! precision. The defaulter's patch carries the same re-encoding (controller-runtime diffs the
//! request against the marshalled object). Neither serde's derived order (declaration) nor
//! k8s-openapi's (alphabetical) is Go's for every type, so the layouts of every type a TrainJob
//! or a TrainingRuntime reaches (volume sources, affinity and status included) are generated
//! from the Go types themselves (`layouts`, by `tools/upstream-oracle/trainer-v2.3.0/layouts`).
//! Only raw JSON (`managedFields[].fieldsV1`) is [`Ty::Any`].
//!
//! Hand-written walkers over a generated table: no crate knows Go's layouts of these types.

use admission_kit::compat::go::Quantity;
use admission_kit::compat::go::go_json_quote;
use serde_json::{Map, Value};

/// How a Go type marshals.
#[derive(Debug)]
pub enum Ty {
    /// `string` (and named string types).
    Str,
    /// Any integer type.
    Int,
    /// `bool`.
    Bool,
    /// `resource.Quantity`: canonical text.
    Quantity,
    /// `metav1.Time`: RFC 3339 in UTC, whole seconds.
    Time,
    /// `intstr.IntOrString`: a number or a string, as sent.
    IntOrString,
    /// A type not laid out here: kept as sent, printed with sorted keys.
    Any,
    /// `map[string]T`.
    Map(&'static Ty),
    /// `[]T`.
    List(&'static Ty),
    /// A struct: its fields in Go order.
    Struct(&'static [Field]),
}

/// When a field is left out of the marshalled object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Omit {
    /// Never (no `omitempty`, or a struct value, which `omitempty` never leaves out).
    Never,
    /// When empty: `""`, `0`, `false`, an empty list or map (`omitempty` on those).
    Empty,
    /// When nil: a pointer (or `omitzero`) field, printed whenever it is set.
    Nil,
    /// Never, and `null` when nil: a pointer field without `omitempty`.
    Null,
}

/// One struct field.
#[derive(Debug)]
pub struct Field {
    /// The JSON key.
    pub key: &'static str,
    /// Its type.
    pub ty: &'static Ty,
    /// When it is left out.
    pub omit: Omit,
}

use Omit::{Empty, Never, Nil, Null};

#[rustfmt::skip]
mod layouts;

static STR: Ty = Ty::Str;
static INT: Ty = Ty::Int;
static BOOL: Ty = Ty::Bool;
static QTY: Ty = Ty::Quantity;
static INT_OR_STR: Ty = Ty::IntOrString;
/// `metav1.Time`.
pub static TIME: Ty = Ty::Time;
static ANY: Ty = Ty::Any;

pub use layouts::CORE_RESOURCE_REQUIREMENTS as RESOURCES;
pub use layouts::LIST_CORE_CONTAINER as CONTAINERS;
pub use layouts::LIST_CORE_ENV_VAR as ENV_VARS;
pub use layouts::LIST_TRAINER_RUNTIME_PATCH as RUNTIME_PATCHES;
pub use layouts::TRAINER_ENV_INJECTION_TARGET as ENV_INJECTION_TARGET;
pub use layouts::TRAINER_RUNTIME_PATCH as RUNTIME_PATCH;
pub use layouts::TRAINER_RUNTIME_REF as RUNTIME_REF;
pub use layouts::TRAINER_TRAINING_RUNTIME_SPEC as RUNTIME_SPEC;
pub use layouts::{RUNTIME, TRAIN_JOB};

/// `v` as Go's decoder reads it into a `ty`: a value of the wrong JSON type is an error (Go's
/// `UnmarshalTypeError`, in our words: spec Q-9), `null` is the zero value (a member left out,
/// a list item or map value zeroed). Members of types not laid out are only cleared of `null`s.
pub fn go_decode_view(v: &Value, ty: &Ty, path: &str) -> Result<Value, String> {
    decode(v, ty, At::Root(path), Build::View)
}

/// Whether `v` decodes as a `ty`, with [`go_decode_view`]'s error when it does not, without
/// building the view (the defaulter edits the JSON and needs only the verdict).
pub fn go_decode_check(v: &Value, ty: &Ty, path: &str) -> Result<(), String> {
    decode(v, ty, At::Root(path), Build::Nothing).map(drop)
}

/// Whether [`decode`] builds the view or only checks.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Build {
    View,
    Nothing,
}

/// Where a value sits, for an error's text: written only when there is an error, since every
/// member of a review passes through [`decode`] and nearly every review decodes.
#[derive(Clone, Copy)]
enum At<'a> {
    Root(&'a str),
    Member(&'a At<'a>, &'a str),
    Item(&'a At<'a>),
}

impl std::fmt::Display for At<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            At::Root(p) => f.write_str(p),
            At::Member(parent, k) => write!(f, "{parent}.{k}"),
            At::Item(parent) => write!(f, "{parent}[]"),
        }
    }
}

/// [`go_decode_view`]'s walk; with [`Build::Nothing`] it returns `null` or an empty container.
fn decode(v: &Value, ty: &Ty, at: At<'_>, build: Build) -> Result<Value, String> {
    let wrong = |want: &str| {
        let path = at.to_string();
        Err(format!(
            "json: cannot unmarshal {} into Go value {} of type {want}",
            admission_kit::compat::go::go_json_kind(v),
            if path.is_empty() {
                "(the object)"
            } else {
                &path
            }
        ))
    };
    let kept = || match build {
        Build::View => v.clone(),
        Build::Nothing => Value::Null,
    };
    match (ty, v) {
        (_, Value::Null) => Ok(Value::Null),
        (Ty::Time, Value::String(t)) => match t.parse::<jiff::Timestamp>() {
            Ok(_) => Ok(kept()),
            Err(e) => Err(format!(
                "parsing time {}: {e}",
                admission_kit::compat::go::go_quote(t)
            )),
        },
        (Ty::Str, Value::String(_)) | (Ty::Bool, Value::Bool(_)) => Ok(kept()),
        // apimachinery's own texts (`quantities must match …`, `unable to parse …`).
        (Ty::Quantity, Value::String(q)) => Quantity::from_json_text(q)
            .map(|_| kept())
            .map_err(|e| e.to_string()),
        (Ty::Quantity, Value::Number(n)) => Quantity::from_json_text(&n.to_string())
            .map(|_| kept())
            .map_err(|e| e.to_string()),
        (Ty::Int, Value::Number(n)) if n.is_i64() || n.is_u64() => Ok(kept()),
        (Ty::IntOrString, Value::String(_)) => Ok(kept()),
        (Ty::IntOrString, Value::Number(n)) if n.is_i64() => Ok(kept()),
        (Ty::IntOrString, _) => wrong("int32"),
        (Ty::Str | Ty::Time, _) => wrong("string"),
        (Ty::Bool, _) => wrong("bool"),
        (Ty::Int, _) => wrong("integer"),
        (Ty::Quantity, _) => wrong("quantity"),
        (Ty::Struct(fields), Value::Object(m)) => {
            let mut out = Map::new();
            for (k, x) in m {
                if x.is_null() {
                    continue;
                }
                let sub = At::Member(&at, k);
                let ty = fields
                    .iter()
                    .find(|fl| fl.key == k)
                    .map_or(&ANY, |fl| fl.ty);
                let x = decode(x, ty, sub, build)?;
                if build == Build::View {
                    out.insert(k.clone(), x);
                }
            }
            Ok(Value::Object(out))
        }
        (Ty::Struct(_), _) => wrong("object"),
        (Ty::List(item), Value::Array(a)) => {
            let mut out = Vec::with_capacity(if build == Build::View { a.len() } else { 0 });
            for x in a {
                let x = match x {
                    Value::Null if build == Build::View => decoded_zero(item),
                    Value::Null => Value::Null,
                    x => decode(x, item, At::Item(&at), build)?,
                };
                if build == Build::View {
                    out.push(x);
                }
            }
            Ok(Value::Array(out))
        }
        (Ty::List(_), _) => wrong("array"),
        (Ty::Map(item), Value::Object(m)) => {
            let mut out = Map::new();
            for (k, x) in m {
                let x = match x {
                    Value::Null if build == Build::View => decoded_zero(item),
                    Value::Null => Value::Null,
                    x => decode(x, item, At::Member(&at, k), build)?,
                };
                if build == Build::View {
                    out.insert(k.clone(), x);
                }
            }
            Ok(Value::Object(out))
        }
        (Ty::Map(_), _) => wrong("map"),
        (Ty::Any, Value::Object(m)) => {
            let mut out = Map::new();
            for (k, x) in m.iter().filter(|(_, x)| !x.is_null()) {
                let x = decode(x, &ANY, at, build)?;
                if build == Build::View {
                    out.insert(k.clone(), x);
                }
            }
            Ok(Value::Object(out))
        }
        (Ty::Any, _) => Ok(kept()),
    }
}

/// The text Go's `json.Marshal` writes for `v` read as a `ty`.
pub fn print(v: &Value, ty: &Ty) -> String {
    let mut out = String::new();
    write(v, ty, &mut out);
    out
}

fn write(v: &Value, ty: &Ty, out: &mut String) {
    match (ty, v) {
        (_, Value::Null) => out.push_str(zero_text(ty)),
        (Ty::Quantity, Value::String(s)) => out.push_str(&go_json_quote(&quantity_text(s))),
        (Ty::Quantity, Value::Number(n)) => {
            out.push_str(&go_json_quote(&quantity_text(&n.to_string())));
        }
        (Ty::Time, Value::String(s)) => out.push_str(&go_json_quote(&time_text(s))),
        (Ty::Struct(fields), Value::Object(m)) => {
            out.push('{');
            let mut first = true;
            for fl in fields.iter() {
                let fv = m.get(fl.key).unwrap_or(&Value::Null);
                if omitted(fv, fl) {
                    continue;
                }
                if !first {
                    out.push(',');
                }
                first = false;
                out.push_str(&go_json_quote(fl.key));
                out.push(':');
                match fv {
                    Value::Null if fl.omit == Null => out.push_str("null"),
                    Value::Null => write_zero(fl.ty, out),
                    fv => write(fv, fl.ty, out),
                }
            }
            out.push('}');
        }
        (Ty::List(item), Value::Array(a)) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                // Go decodes a null item of a struct list as the zero struct.
                if x.is_null() {
                    write_zero(item, out);
                } else {
                    write(x, item, out);
                }
            }
            out.push(']');
        }
        (Ty::Map(item), Value::Object(m)) => write_object(m, Some(item), out),
        (_, Value::Object(m)) => write_object(m, None, out),
        (_, Value::Array(a)) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(x, &ANY, out);
            }
            out.push(']');
        }
        (_, Value::String(s)) => out.push_str(&go_json_quote(s)),
        (_, other) => out.push_str(&other.to_string()),
    }
}

/// A map, or a value of no known layout: keys sorted, as Go writes maps.
fn write_object(m: &Map<String, Value>, item: Option<&Ty>, out: &mut String) {
    out.push('{');
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    for (i, k) in keys.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&go_json_quote(k));
        out.push(':');
        write(&m[k], item.unwrap_or(&ANY), out);
    }
    out.push('}');
}

fn omitted(v: &Value, fl: &Field) -> bool {
    match fl.omit {
        Never | Null => false,
        Nil => v.is_null(),
        Empty => is_empty(v),
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
    }
}

fn zero_text(ty: &Ty) -> &'static str {
    match ty {
        Ty::Str => "\"\"",
        Ty::Int => "0",
        Ty::Bool => "false",
        Ty::Quantity => "\"0\"",
        Ty::IntOrString => "0",
        _ => "null",
    }
}

fn write_zero(ty: &Ty, out: &mut String) {
    match ty {
        Ty::Struct(_) => write(&Value::Object(Map::new()), ty, out),
        _ => out.push_str(zero_text(ty)),
    }
}

fn zero_value(ty: &Ty) -> Value {
    match ty {
        Ty::Str => Value::String(String::new()),
        Ty::Int => Value::from(0),
        Ty::Bool => Value::Bool(false),
        Ty::Quantity => Value::String("0".into()),
        Ty::IntOrString => Value::from(0),
        Ty::Struct(_) => {
            let mut v = Value::Object(Map::new());
            add_go_fields(&mut v, ty);
            v
        }
        _ => Value::Null,
    }
}

/// The zero value as the decode view holds it: as Go marshals it, less the `null`s of nil lists
/// and maps (absent, as our types read a nil slice).
fn decoded_zero(ty: &Ty) -> Value {
    fn strip(v: &mut Value) {
        if let Value::Object(m) = v {
            m.retain(|_, x| !x.is_null());
            m.values_mut().for_each(strip);
        }
    }
    let mut v = zero_value(ty);
    strip(&mut v);
    v
}

/// A quantity's text as Go prints it; text that does not parse stays (the decode refused it).
fn quantity_text(s: &str) -> String {
    Quantity::from_json_text(s)
        .map(|q| q.value().canonical())
        .unwrap_or_else(|_| s.to_owned())
}

/// A time as `metav1.Time` marshals it; text that does not parse stays.
pub fn time_text(s: &str) -> String {
    s.parse::<jiff::Timestamp>()
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_else(|_| s.to_owned())
}

/// What Go's decode-then-marshal adds to or rewrites in `v`: fields that are always written
/// appear (with their zero value), quantities and times take their printed form. Fields Go
/// would leave out are kept: controller-runtime drops those removals from the patch.
pub fn add_go_fields(v: &mut Value, ty: &Ty) {
    match (ty, v) {
        (Ty::Quantity, Value::String(s)) => {
            let t = quantity_text(s);
            if t != *s {
                *s = t;
            }
        }
        // A quantity sent as a JSON number comes back as its canonical text.
        (Ty::Quantity, v @ Value::Number(_)) => {
            *v = Value::String(quantity_text(&v.to_string()));
        }
        (Ty::Time, Value::String(s)) => {
            let t = time_text(s);
            if t != *s {
                *s = t;
            }
        }
        (Ty::Struct(fields), Value::Object(m)) => {
            for fl in fields.iter() {
                match m.get_mut(fl.key) {
                    Some(Value::Null) | None if fl.omit == Never => {
                        m.insert(fl.key.to_owned(), zero_value(fl.ty));
                    }
                    None if fl.omit == Null => {
                        m.insert(fl.key.to_owned(), Value::Null);
                    }
                    Some(fv) => add_go_fields(fv, fl.ty),
                    None => {}
                }
            }
        }
        (Ty::List(item), Value::Array(a)) => a.iter_mut().for_each(|x| {
            if x.is_null() {
                *x = zero_value(item);
            } else {
                add_go_fields(x, item);
            }
        }),
        // A null map value decodes as the zero value, which Go then writes.
        (Ty::Map(item), Value::Object(m)) => m.values_mut().for_each(|x| {
            if x.is_null() {
                *x = zero_value(item);
            } else {
                add_go_fields(x, item);
            }
        }),
        _ => {}
    }
}

/// `v` as apimachinery's semantic equality sees it: fields Go does not know dropped, empty
/// lists and maps the same as absent ones, zero scalars the same as absent ones unless the
/// field is a pointer, quantities by value, times as instants.
pub fn semantic(v: &Value, ty: &Ty) -> Value {
    match (ty, v) {
        (Ty::Quantity, Value::String(s)) => Value::String(quantity_text(s)),
        (Ty::Quantity, Value::Number(n)) => Value::String(quantity_text(&n.to_string())),
        (Ty::Time, Value::String(s)) => Value::String(
            s.parse::<jiff::Timestamp>()
                .map(|t| t.to_string())
                .unwrap_or_else(|_| s.clone()),
        ),
        (Ty::Struct(fields), Value::Object(m)) => {
            let mut out = Map::new();
            for fl in fields.iter() {
                let Some(fv) = m.get(fl.key) else { continue };
                let keep = match (fl.omit, fl.ty) {
                    (_, _) if fv.is_null() => false,
                    (Nil | Null, _) => true,
                    (_, Ty::Struct(_)) => true,
                    _ => !is_empty(fv),
                };
                if keep {
                    out.insert(fl.key.to_owned(), semantic(fv, fl.ty));
                }
            }
            Value::Object(out)
        }
        (Ty::List(item), Value::Array(a)) => {
            Value::Array(a.iter().map(|x| semantic(x, item)).collect())
        }
        (Ty::Map(item), Value::Object(m)) => Value::Object(
            m.iter()
                .map(|(k, x)| (k.clone(), semantic(x, item)))
                .collect(),
        ),
        (_, other) => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_decode_view_zeroes_nulls_and_refuses_wrong_types() {
        let v = json!({"spec": {"runtimeRef": null, "trainer": {"env": [null, {"name": null}], "numNodes": 2},
            "runtimePatches": [{"manager": "m", "x": null}]}});
        assert_eq!(
            go_decode_view(&v, &TRAIN_JOB, "").unwrap(),
            json!({"spec": {"trainer": {"env": [{"name": ""}, {}], "numNodes": 2},
                "runtimePatches": [{"manager": "m"}]}})
        );
        let bad = json!({"spec": {"runtimeRef": []}});
        assert_eq!(
            go_decode_view(&bad, &TRAIN_JOB, "").unwrap_err(),
            "json: cannot unmarshal array into Go value .spec.runtimeRef of type object"
        );
        let bad = json!({"spec": {"trainer": {"numNodes": 1.5}}});
        assert!(go_decode_view(&bad, &TRAIN_JOB, "").is_err());
    }

    #[test]
    fn the_check_gives_the_views_verdict_and_error_path() {
        let cases = [
            json!({"spec": {"trainer": {"env": [null, {"name": 3}]}}}),
            json!({"spec": {"runtimePatches": [{"manager": "m", "trainingRuntimeSpec": {"template": {"metadata": {"labels": {"a": 1}}}}}]}}),
            json!({"spec": {"runtimePatches": [{"time": "yesterday"}]}}),
            json!({"spec": {"trainer": {"resourcesPerNode": {"limits": {"cpu": "1x"}}}}}),
            json!({"metadata": {"managedFields": [{"fieldsV1": {"f:a": null, "f:b": {"x": [null]}}}]}}),
            json!({"spec": {"trainer": {"numNodes": 2}}}),
            json!([]),
        ];
        for v in cases {
            assert_eq!(
                go_decode_check(&v, &TRAIN_JOB, "").err(),
                go_decode_view(&v, &TRAIN_JOB, "").err(),
                "{v}"
            );
        }
        assert_eq!(
            go_decode_check(
                &json!({"spec": {"trainer": {"env": [null, {"name": 3}]}}}),
                &TRAIN_JOB,
                ""
            )
            .unwrap_err(),
            "json: cannot unmarshal number into Go value .spec.trainer.env[].name of type string"
        );
        assert_eq!(
            go_decode_check(&json!([]), &TRAIN_JOB, "").unwrap_err(),
            "json: cannot unmarshal array into Go value (the object) of type object"
        );
    }

    #[test]
    fn containers_print_in_go_order_with_go_zero_fields() {
        let v = json!([{"image": "i", "name": "x", "volumeMounts": [{"mountPath": "/a", "name": "v"}],
            "resources": {"limits": {"cpu": "1000m"}}, "env": [{"valueFrom": {"fieldRef": {"fieldPath": "p"}}}],
            "unknown": 1, "stdin": false}]);
        assert_eq!(
            print(&v, &CONTAINERS),
            r#"[{"name":"x","image":"i","env":[{"name":"","valueFrom":{"fieldRef":{"fieldPath":"p"}}}],"resources":{"limits":{"cpu":"1"}},"volumeMounts":[{"name":"v","mountPath":"/a"}]}]"#
        );
        assert_eq!(
            print(&json!([{}]), &CONTAINERS),
            r#"[{"name":"","resources":{}}]"#
        );
    }

    #[test]
    fn runtime_refs_and_patches_print_as_go_marshals_them() {
        let r = json!({"kind": "TrainingRuntime", "name": "x", "apiGroup": "trainer.kubeflow.org"});
        assert_eq!(
            print(&r, &RUNTIME_REF),
            r#"{"name":"x","apiGroup":"trainer.kubeflow.org","kind":"TrainingRuntime"}"#
        );
        let p = json!([{"time": "2026-01-01T01:00:00.5+01:00", "manager": "a<b"}]);
        assert_eq!(
            print(&p, &RUNTIME_PATCHES),
            r#"[{"manager":"a\u003cb","time":"2026-01-01T00:00:00Z"}]"#
        );
    }

    #[test]
    fn go_additions_add_always_written_fields_and_rewrite_quantities_and_times() {
        let mut v = json!({"spec": {"trainer": {"env": [{}], "resourcesPerNode": {"limits": {"cpu": "1000m"}}},
            "runtimePatches": [{"time": "2026-01-01T00:00:00.5Z", "x": 1}]}});
        add_go_fields(&mut v, &TRAIN_JOB);
        // `metadata` is a struct value: Go writes it even when empty.
        assert_eq!(
            v,
            json!({"metadata": {}, "spec": {"trainer": {"env": [{"name": ""}], "resourcesPerNode": {"limits": {"cpu": "1"}}},
                "runtimePatches": [{"time": "2026-01-01T00:00:00Z", "x": 1}]}})
        );
    }

    #[test]
    fn semantic_equality_ignores_empties_and_unknown_fields_but_not_set_pointers() {
        let a = json!({"manager": "m", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": []}}}, "x": 1});
        let b = json!({"manager": "m", "trainingRuntimeSpec": {"template": {"spec": {}}}});
        assert_eq!(semantic(&a, &RUNTIME_PATCH), semantic(&b, &RUNTIME_PATCH));
        let c = json!({"manager": "m"});
        assert_ne!(semantic(&a, &RUNTIME_PATCH), semantic(&c, &RUNTIME_PATCH));
    }
}
