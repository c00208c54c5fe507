//! Whether a JSON Patch applies to a raw object, without building the whole object.
//!
//! A mutator's patch is computed on typed values; before it is sent it must be known to apply
//! to the raw JSON the API server holds. Parsing that JSON into a [`Value`] only to try the patch
//! cost a fifth of a mutation (every string and map of the object allocated, then dropped). The
//! patch reads only the containers along its paths, so this builds a *skeleton*: those
//! containers with their keys and lengths, every other value a `null` placeholder, and tries the
//! patch on it. Hand-written because no crate builds a partial document from a set of pointers.
//!
//! The answer is exact one way: `true` means `json_patch::patch` succeeds on the full parse too
//! (same keys, same array lengths on every container a path goes through; a path never goes
//! through a placeholder because every container on it is built). `false` may also mean "not
//! sure" (a token this code does not read as an index, say); callers then parse the whole object
//! as before, so answers do not change. Values are visited with `deserialize_any`, the call a
//! [`Value`] parse makes, so an object the full parse refuses (a number out of range, a lone
//! surrogate, nesting too deep) is refused here too.

use std::fmt;

use json_patch::Patch;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// Whether `patch` applies to `raw` as it stands (see the module docs for what `false` means).
pub(crate) fn applies(raw: &RawValue, patch: &Patch) -> bool {
    let paths: Vec<Vec<String>> = patch
        .0
        .iter()
        .map(|op| tokens(op.path().as_str()))
        .collect();
    // A container is built when it is a strict ancestor of some operation's target.
    let wanted: Vec<&[String]> = paths
        .iter()
        .filter_map(|p| p.split_last().map(|(_, parents)| parents))
        .collect();
    let mut de = serde_json::Deserializer::from_str(raw.get());
    let Ok(mut doc) = (Node { wanted: &wanted }).deserialize(&mut de) else {
        return false;
    };
    de.end().is_ok() && json_patch::patch(&mut doc, &patch.0).is_ok()
}

/// RFC 6901 reference tokens of a JSON pointer.
pub(crate) fn tokens(pointer: &str) -> Vec<String> {
    pointer
        .split('/')
        .skip(1)
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect()
}

/// One value of the raw object; `wanted` are the remaining tokens of the paths that go through
/// it (a path that ends here needs it built as a container).
struct Node<'w> {
    wanted: &'w [&'w [String]],
}

impl<'w> Node<'w> {
    /// The paths that go on through the child named `token`.
    fn child(&self, token: &str) -> Option<Vec<&'w [String]>> {
        let below: Vec<&[String]> = self
            .wanted
            .iter()
            .filter_map(|p| p.split_first())
            .filter(|(first, _)| first.as_str() == token)
            .map(|(_, rest)| rest)
            .collect();
        (!below.is_empty()).then_some(below)
    }
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_str<E>(self, _: &str) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = match self.child(&items.len().to_string()) {
            Some(below) => seq.next_element_seed(Node { wanted: &below })?,
            None => seq.next_element_seed(Skip)?,
        } {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let v = match self.child(&key) {
                Some(below) => map.next_value_seed(Node { wanted: &below })?,
                None => map.next_value_seed(Skip)?,
            };
            // A later duplicate wins, as in a `Value` parse.
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

/// A value no path goes through: read as a [`Value`] parse reads it (so it fails where that
/// fails), kept as a `null` placeholder.
struct Skip;

impl<'de> DeserializeSeed<'de> for Skip {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(SkipVisitor).map(|_| Value::Null)
    }
}

struct SkipVisitor;

impl<'de> Visitor<'de> for SkipVisitor {
    type Value = IgnoredAny;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<IgnoredAny, E> {
        Ok(IgnoredAny)
    }
    fn visit_i64<E>(self, _: i64) -> Result<IgnoredAny, E> {
        Ok(IgnoredAny)
    }
    fn visit_u64<E>(self, _: u64) -> Result<IgnoredAny, E> {
        Ok(IgnoredAny)
    }
    fn visit_f64<E>(self, _: f64) -> Result<IgnoredAny, E> {
        Ok(IgnoredAny)
    }
    fn visit_str<E>(self, _: &str) -> Result<IgnoredAny, E> {
        Ok(IgnoredAny)
    }
    fn visit_unit<E>(self) -> Result<IgnoredAny, E> {
        Ok(IgnoredAny)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<IgnoredAny, A::Error> {
        while seq.next_element_seed(Skip)?.is_some() {}
        Ok(IgnoredAny)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<IgnoredAny, A::Error> {
        // Keys are read as strings, as a `Value` parse reads them.
        while map.next_key::<KeyCheck>()?.is_some() {
            map.next_value_seed(Skip)?;
        }
        Ok(IgnoredAny)
    }
}

/// A map key read and checked like a `String` key, without keeping it.
struct KeyCheck;

impl<'de> serde::Deserialize<'de> for KeyCheck {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = KeyCheck;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string key")
            }
            fn visit_str<E>(self, _: &str) -> Result<KeyCheck, E> {
                Ok(KeyCheck)
            }
        }
        d.deserialize_str(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The reference: parse the whole object and try the patch on it.
    fn full(raw: &str, patch: &Patch) -> bool {
        serde_json::from_str::<Value>(raw)
            .is_ok_and(|mut doc| json_patch::patch(&mut doc, &patch.0).is_ok())
    }

    fn patch(ops: Value) -> Patch {
        serde_json::from_value(ops).unwrap()
    }

    #[test]
    fn answers_as_the_full_parse() {
        let objects = [
            r#"{"metadata":{"name":"m","labels":{"a":"1"}},"spec":{"backends":[{"name":"b","env":[{"name":"x"}]},{"name":"c"}],"n":1.5,"t":true,"z":null}}"#,
            r#"{"spec":{"backends":[]}}"#,
            r#"{"spec":{"backends":"not a list"}}"#,
            r#"{"spec":null}"#,
            r#"{"spec":{"a/b":{"c~d":1},"backends":[{"name":"b"}]},"spec":{"backends":[{},{},{}]}}"#,
            r#"{"metadata":{"name":"\u00e9\"q"},"spec":{"k\n":"v","backends":[[1,[2,{}]]]}}"#,
            r#"{"spec":{"backends":[{"name":"b"}]},"x":1e400}"#,
            r#"{"spec":{"backends":[{"name":"b"}]},"x":"\ud800"}"#,
            r#"[{"a":1},{"b":2}]"#,
            "3",
        ];
        let patches = [
            json!([{"op": "add", "path": "/spec/backends/0/grace", "value": "30s"}]),
            json!([{"op": "add", "path": "/spec/backends/1/grace", "value": "30s"},
                   {"op": "add", "path": "/spec/cost", "value": 200}]),
            json!([{"op": "replace", "path": "/metadata/labels/a", "value": "2"}]),
            json!([{"op": "remove", "path": "/metadata/labels"}]),
            json!([{"op": "remove", "path": "/spec/backends/1"},
                   {"op": "remove", "path": "/spec/backends/0"}]),
            json!([{"op": "add", "path": "/spec/backends/2", "value": {}},
                   {"op": "add", "path": "/spec/backends/3", "value": {}}]),
            json!([{"op": "add", "path": "/spec/backends/-", "value": {}}]),
            json!([{"op": "add", "path": "/spec/backends/01", "value": {}}]),
            json!([{"op": "add", "path": "/spec/new", "value": {}},
                   {"op": "add", "path": "/spec/new/inner", "value": 1}]),
            json!([{"op": "replace", "path": "/spec", "value": {}},
                   {"op": "add", "path": "/spec/x", "value": 1}]),
            json!([{"op": "add", "path": "/spec/a~1b/c~0d", "value": 2}]),
            json!([{"op": "replace", "path": "/spec/k\n", "value": 2}]),
            json!([{"op": "add", "path": "/spec/backends/0/0/1/1/x", "value": 2}]),
            json!([{"op": "add", "path": "/spec/n/x", "value": 2}]),
            json!([{"op": "replace", "path": "/spec/z", "value": 2}]),
            json!([{"op": "add", "path": "/spec/z/x", "value": 2}]),
            json!([{"op": "add", "path": "/1/c", "value": 3}]),
            json!([{"op": "replace", "path": "", "value": 3}]),
            json!([{"op": "remove", "path": "/metadata/name"}]),
        ];
        let mut agreed = [0, 0];
        for raw in objects {
            let rv = RawValue::from_string(raw.to_owned()).unwrap();
            for ops in &patches {
                let p = patch(ops.clone());
                let want = full(raw, &p);
                assert_eq!(applies(&rv, &p), want, "{raw} with {ops}");
                agreed[usize::from(want)] += 1;
            }
        }
        // Both answers are exercised, not only one.
        assert!(agreed[0] > 20 && agreed[1] > 20, "{agreed:?}");
    }

    #[test]
    fn nesting_is_refused_where_the_full_parse_refuses_it() {
        let p = patch(json!([{"op": "add", "path": "/b", "value": 1}]));
        let mut compared = 0;
        for depth in 120..140 {
            let deep = format!("{{\"a\":{}1{}}}", "[".repeat(depth), "]".repeat(depth));
            // Raw capture may itself refuse the depth; such an object never reaches a patch.
            if let Ok(rv) = RawValue::from_string(deep.clone()) {
                assert_eq!(applies(&rv, &p), full(&deep, &p), "depth {depth}");
                compared += 1;
            }
        }
        assert!(compared > 0);
    }
}
