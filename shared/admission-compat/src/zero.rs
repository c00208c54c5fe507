//! Go's `encoding/json` reading of JSON `null`: wherever a value is expected and `null` is
//! written, Go leaves (or sets) the zero value of the field's type and goes on: `[null]` in a
//! list of structs is one zero struct, `{"a": null}` in a `map[string]string` is `""`, a
//! `null` struct field is the zero struct. Pointers (our `Option`s) stay nil (`None`).
//!
//! Our types are k8s-openapi's and serde's, which refuse `null` where they expect a struct, a
//! string or a number. [`from_str`] reads a JSON text with Go's rule, for the handlers whose
//! upstream decodes with controller-runtime's decoder (custom resources reach mutating
//! webhooks before their CRD schema is applied, so such objects do arrive).
//!
//! Hand-written: no crate reads `null` as the zero value of types it does not own (serde_with's
//! `DefaultOnNull` is a field attribute, and k8s-openapi's types are generated). It is a
//! `Deserializer` over a parsed [`Value`] that answers every typed request for `null` with the
//! zero of that type and hands everything else to `serde_json::Value`'s own deserializer. A
//! `null` struct reads as an empty object: k8s-openapi's types (and ours, with
//! `#[serde(default)]`) make that their zero value.

use serde::de::value::BorrowedStrDeserializer;
use serde::de::{self, DeserializeOwned, DeserializeSeed, Visitor};
use serde::forward_to_deserialize_any;
use serde_json::{Error, Map, Value};

/// Decodes `text` as Go's `encoding/json` does `null`: the zero value of the type expected
/// there (see the module doc). Errors other than `null` are serde_json's, as a strict decode
/// reports them.
///
/// An object with a duplicated member is refused (`duplicate field`), as a strict decode of a
/// struct refuses it: a parsed [`Value`] would keep the last occurrence silently, where Go
/// decodes every occurrence in turn and fails on any ill-typed one.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, Error> {
    let Distinct(value) = serde_json::from_str(text)?;
    T::deserialize(Zeroing(&value))
}

/// Decodes `text` as Go reads it once a strict decode of it failed with `strict`, and says which
/// fault to report when this reading fails too: the strict one (serde_json's words say where),
/// unless that was a `null`, which Go accepts, so the fault this reading met. serde_json's error
/// keeps no structured form of what it met, only its words (`invalid type: null, expected …`).
pub fn after_strict<T: DeserializeOwned>(text: &str, strict: Error) -> Result<T, Error> {
    from_str(text).map_err(|go| {
        if strict.is_data() && strict.to_string().starts_with("invalid type: null") {
            go
        } else {
            strict
        }
    })
}

/// A JSON value whose objects have no member twice; hand-written because serde_json's `Value`
/// keeps the last occurrence and has no option to refuse.
struct Distinct(Value);

impl<'de> de::Deserialize<'de> for Distinct {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DistinctVisitor).map(Distinct)
    }
}

struct DistinctVisitor;

impl<'de> Visitor<'de> for DistinctVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Distinct(v)) = seq.next_element()? {
            items.push(v);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut members = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let Distinct(v) = map.next_value()?;
            match members.entry(key) {
                serde_json::map::Entry::Vacant(e) => {
                    e.insert(v);
                }
                serde_json::map::Entry::Occupied(e) => {
                    let key = e.key();
                    return Err(de::Error::custom(format_args!("duplicate field `{key}`")));
                }
            }
        }
        Ok(Value::Object(members))
    }
}

/// A JSON value that reads `null` as the zero value of whatever type is asked of it.
#[derive(Clone, Copy)]
struct Zeroing<'a>(&'a Value);

/// Answers a request for `$method` with the zero `$zero` when the value is `null`, else as
/// serde_json's `Value` answers it.
macro_rules! zero_on_null {
    ($($method:ident => $visit:ident($zero:expr)),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
            match self.0 {
                Value::Null => visitor.$visit($zero),
                other => other.$method(visitor),
            }
        }
    )*};
}

impl<'de> de::Deserializer<'de> for Zeroing<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Array(items) => visitor.visit_seq(Items(items.iter())),
            Value::Object(map) => visitor.visit_map(Entries::new(map)),
            other => other.deserialize_any(visitor),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.0 {
            // k8s-openapi's `Quantity` asks for any value, which cannot say zero; Go's zero
            // `resource.Quantity` is `0` (`Quantity.UnmarshalJSON` reads `null` as it).
            Value::Null if name == "Quantity" => {
                visitor.visit_newtype_struct(BorrowedStrDeserializer::<Error>::new("0"))
            }
            _ => visitor.visit_newtype_struct(self),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let map = match self.0 {
            Value::Null => &EMPTY,
            Value::Object(map) => map,
            other => return other.deserialize_map(visitor),
        };
        // A field the object lacks is Go's zero value too: it is read as `null`, so a required
        // field (`metadata`, `spec` of a derived custom resource) no longer fails the decode.
        // Not `apiVersion` and `kind`: k8s-openapi's types check them when present.
        let missing = fields
            .iter()
            .copied()
            .filter(|f| !matches!(*f, "apiVersion" | "kind") && !map.contains_key(*f))
            .collect();
        visitor.visit_map(Entries {
            missing,
            ..Entries::new(map)
        })
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => visitor.visit_map(Entries::new(&EMPTY)),
            Value::Object(map) => visitor.visit_map(Entries::new(map)),
            other => other.deserialize_map(visitor),
        }
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => visitor.visit_seq(Items([].iter())),
            Value::Array(items) => visitor.visit_seq(Items(items.iter())),
            other => other.deserialize_seq(visitor),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.0.deserialize_enum(name, variants, visitor)
    }

    zero_on_null! {
        deserialize_bool => visit_bool(false),
        deserialize_i8 => visit_i64(0),
        deserialize_i16 => visit_i64(0),
        deserialize_i32 => visit_i64(0),
        deserialize_i64 => visit_i64(0),
        deserialize_u8 => visit_u64(0),
        deserialize_u16 => visit_u64(0),
        deserialize_u32 => visit_u64(0),
        deserialize_u64 => visit_u64(0),
        deserialize_f32 => visit_f64(0.0),
        deserialize_f64 => visit_f64(0.0),
        deserialize_str => visit_borrowed_str(""),
        deserialize_string => visit_borrowed_str(""),
        deserialize_bytes => visit_borrowed_bytes(&[]),
        deserialize_byte_buf => visit_borrowed_bytes(&[]),
    }

    forward_to_deserialize_any! { i128 u128 char unit unit_struct identifier ignored_any }
}

static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);

/// A list's items, each read as [`Zeroing`].
struct Items<'a>(std::slice::Iter<'a, Value>);

impl<'de> de::SeqAccess<'de> for Items<'de> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        self.0
            .next()
            .map(|v| seed.deserialize(Zeroing(v)))
            .transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

/// An object's entries, each value read as [`Zeroing`], then the struct fields it lacks, each
/// as `null`.
struct Entries<'a> {
    iter: serde_json::map::Iter<'a>,
    missing: Vec<&'static str>,
    value: Option<&'a Value>,
}

impl<'a> Entries<'a> {
    fn new(map: &'a Map<String, Value>) -> Self {
        Self {
            iter: map.iter(),
            missing: Vec::new(),
            value: None,
        }
    }
}

impl<'de> de::MapAccess<'de> for Entries<'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let (key, value) = match self.iter.next() {
            Some((k, v)) => (k.as_str(), v),
            None => match self.missing.pop() {
                Some(field) => (field, &Value::Null),
                None => return Ok(None),
            },
        };
        self.value = Some(value);
        seed.deserialize(BorrowedStrDeserializer::<Error>::new(key))
            .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        match self.value.take() {
            Some(v) => seed.deserialize(Zeroing(v)),
            None => Err(de::Error::custom(
                "a map value was asked for before its key",
            )),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.iter.len() + self.missing.len())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    use super::*;

    #[test]
    fn null_list_items_and_map_values_read_as_zero_values() {
        let text = json!({
            "metadata": {"name": "p", "labels": {"a": null}, "ownerReferences": [null]},
            "spec": {"containers": [null, {"name": "c", "args": [null, "x"]}],
                     "tolerations": [null], "priority": null}
        })
        .to_string();
        assert!(
            serde_json::from_str::<Pod>(&text).is_err(),
            "serde refuses it"
        );
        let pod: Pod = from_str(&text).unwrap();
        let labels = pod.metadata.labels.unwrap();
        assert_eq!(labels, BTreeMap::from([("a".to_owned(), String::new())]));
        assert_eq!(pod.metadata.owner_references.unwrap()[0].name, "");
        let spec = pod.spec.unwrap();
        assert_eq!(spec.containers.len(), 2);
        assert_eq!(spec.containers[0], Default::default());
        assert_eq!(
            spec.containers[1].args,
            Some(vec![String::new(), "x".into()])
        );
        assert_eq!(spec.tolerations.unwrap()[0], Default::default());
        assert_eq!(spec.priority, None, "a pointer stays nil");
    }

    #[test]
    fn a_null_struct_field_and_numbers_read_as_zero() {
        // A derived struct reads an empty object as its zero value only with `default`, as
        // k8s-openapi's types default their required fields.
        #[derive(serde::Deserialize, Debug, PartialEq, Default)]
        #[serde(default)]
        struct Inner {
            n: i32,
            f: f64,
            b: bool,
        }
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct Outer {
            inner: Inner,
            list: Vec<Inner>,
            raw: Value,
        }
        let o: Outer = from_str(
            r#"{"inner": null, "list": [{"n": null, "f": null, "b": null}], "raw": null}"#,
        )
        .unwrap();
        assert_eq!(
            o,
            Outer {
                inner: Inner::default(),
                list: vec![Inner::default()],
                raw: Value::Null
            }
        );
    }

    /// Go leaves a missing field at its zero value; serde's derive refuses a missing required
    /// field (a derived custom resource's `metadata` and `spec`).
    #[test]
    fn missing_required_fields_read_as_zero_values() {
        #[derive(serde::Deserialize, Debug, PartialEq, Default)]
        #[serde(rename_all = "camelCase")]
        struct Resource {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
            spec: BTreeMap<String, String>,
            status: Option<Vec<i32>>,
        }
        assert!(serde_json::from_str::<Resource>("{}").is_err());
        for text in [
            "{}",
            r#"{"metadata": null, "spec": null}"#,
            r#"{"status": null}"#,
        ] {
            assert_eq!(
                from_str::<Resource>(text).unwrap(),
                Resource::default(),
                "{text}"
            );
        }
        // A Pod without apiVersion or kind still reads (they are not made up as "").
        let pod: Pod = from_str(r#"{"spec": {"containers": [null]}}"#).unwrap();
        assert_eq!(pod.spec.unwrap().containers.len(), 1);
        assert!(
            from_str::<Pod>(r#"{"apiVersion": "v2"}"#).is_err(),
            "checked when present"
        );
    }

    #[test]
    fn a_null_quantity_is_go_s_zero_quantity() {
        use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
        let list: BTreeMap<String, Quantity> =
            from_str(r#"{"cpu": null, "memory": "1Gi"}"#).unwrap();
        assert_eq!(list["cpu"], Quantity("0".into()));
        assert_eq!(list["memory"], Quantity("1Gi".into()));
    }

    #[test]
    fn other_errors_are_serde_json_s() {
        let e = from_str::<Pod>(r#"{"spec": {"containers": [1]}}"#).unwrap_err();
        let strict = serde_json::from_str::<Pod>(r#"{"spec": {"containers": [1]}}"#).unwrap_err();
        assert_eq!(
            e.to_string().split(" at line").next(),
            strict.to_string().split(" at line").next()
        );
        assert!(from_str::<Pod>("{").is_err());
    }

    /// A member given twice is refused wherever it is, even in a map serde would fill with
    /// the last one, and even when the last one is well typed (Go fails on the first).
    #[test]
    fn a_duplicated_member_is_refused() {
        for text in [
            r#"{"metadata": {"name": "p"}, "spec": "x", "spec": {"containers": []}}"#,
            r#"{"metadata": {"labels": {"a": "1", "a": null}}}"#,
        ] {
            let e = from_str::<Pod>(text).unwrap_err().to_string();
            assert!(e.starts_with("duplicate field"), "{text}: {e}");
        }
    }

    /// After a strict decode stopped at a `null`, the fault reported is the one Go's reading
    /// meets; after any other fault, the strict one, which says where.
    #[test]
    fn after_strict_reports_the_fault_go_meets() {
        let decode = |text: &str| -> Result<Pod, String> {
            serde_json::from_str(text)
                .or_else(|strict| after_strict(text, strict))
                .map_err(|e| e.to_string())
        };
        assert!(decode(r#"{"metadata": {"labels": {"a": null}}}"#).is_ok());
        let e = decode(r#"{"metadata": {"labels": {"a": null}, "name": 5}}"#).unwrap_err();
        assert!(e.starts_with("invalid type: integer `5`"), "{e}");
        let e = decode(r#"{"metadata": {"name": 5, "labels": {"a": null}}}"#).unwrap_err();
        assert!(
            e.starts_with("invalid type: integer `5`") && e.contains("line 1"),
            "{e}"
        );
        let e = decode(r#"{"metadata": {"labels": {"a": null}}, "spec": "x", "spec": {}}"#)
            .unwrap_err();
        assert!(e.starts_with("duplicate field"), "{e}");
    }
}
