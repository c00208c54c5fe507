//! Typed objects decoded without `metadata.managedFields`, for rules that never read them.
//!
//! The API server puts an object's managed fields into every review; on a Pod they are a
//! trie of field names as large as the Pod's spec, which k8s-openapi decodes into a
//! `serde_json::Value` (a map allocated per node), a mutator then clones and compares, and all
//! of it is dropped: a tenth of scheduling-webhook's CPU per Pod, for nothing a rule
//! reads. [`Unmanaged`] decodes the object through a thin layer over the deserializer that
//! watches two maps only, the object's and its `metadata`: the value of `managedFields` there is
//! checked against the shape k8s-openapi accepts, without building it, and the object gets
//! none. Every other value goes straight to the object's own deserializer.
//!
//! The check accepts nothing that k8s-openapi refuses (it may refuse more: an entry given as an
//! array, a duplicate or escaped key, an entry key it does not know), so the caller can fall
//! back to the full decode when it fails and answer exactly as before. Hand-written because
//! serde has no hook to skip one field of a type it does not own.

use std::cell::Cell;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::de::{
    self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor,
    value::UnitDeserializer,
};

/// `T` decoded without `metadata.managedFields` (see the module docs).
pub(crate) struct Unmanaged<T>(pub T);

impl<'de, T: de::Deserialize<'de>> de::Deserialize<'de> for Unmanaged<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        T::deserialize(Layer {
            inner: d,
            mode: Mode::Level(At::Object),
        })
        .map(Unmanaged)
    }
}

/// Which map a layer watches.
#[derive(Clone, Copy, PartialEq, Eq)]
enum At {
    /// The object's: its `metadata` value is watched.
    Object,
    /// The object's `metadata`: its `managedFields` value is checked and left out.
    Metadata,
}

impl At {
    /// The key whose value this map handles itself.
    fn key(self) -> &'static str {
        match self {
            At::Object => "metadata",
            At::Metadata => "managedFields",
        }
    }
}

/// What a layer does with what it forwards.
#[derive(Clone, Copy)]
enum Mode<'k> {
    /// A value that is (or holds, as an option or newtype) a watched map.
    Level(At),
    /// A map key: records whether it is the watched one.
    Key(&'k Cell<bool>, &'static str),
}

/// A deserializer forwarding to `inner`, its visitor wrapped as `mode` says.
struct Layer<'k, D> {
    inner: D,
    mode: Mode<'k>,
}

macro_rules! forward_deserialize {
    ($($method:ident($($arg:ident: $ty:ty),*)),* $(,)?) => {$(
        fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* visitor: V) -> Result<V::Value, D::Error> {
            self.inner.$method($($arg,)* Wrap { visitor, mode: self.mode })
        }
    )*};
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Layer<'_, D> {
    type Error = D::Error;

    forward_deserialize! {
        deserialize_any(), deserialize_bool(), deserialize_i8(), deserialize_i16(),
        deserialize_i32(), deserialize_i64(), deserialize_i128(), deserialize_u8(),
        deserialize_u16(), deserialize_u32(), deserialize_u64(), deserialize_u128(),
        deserialize_f32(), deserialize_f64(), deserialize_char(), deserialize_str(),
        deserialize_string(), deserialize_bytes(), deserialize_byte_buf(), deserialize_option(),
        deserialize_unit(), deserialize_unit_struct(name: &'static str),
        deserialize_newtype_struct(name: &'static str), deserialize_seq(),
        deserialize_tuple(len: usize),
        deserialize_tuple_struct(name: &'static str, len: usize), deserialize_map(),
        deserialize_struct(name: &'static str, fields: &'static [&'static str]),
        deserialize_enum(name: &'static str, variants: &'static [&'static str]),
        deserialize_identifier(), deserialize_ignored_any(),
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

/// A visitor forwarding to `visitor`: a watched map's accesses wrapped, a key's text noted.
struct Wrap<'k, V> {
    visitor: V,
    mode: Mode<'k>,
}

impl<V> Wrap<'_, V> {
    fn note(&self, key: &str) {
        if let Mode::Key(seen, wanted) = self.mode {
            seen.set(key == wanted);
        }
    }
}

macro_rules! forward_visit {
    ($($method:ident($ty:ty)),* $(,)?) => {$(
        fn $method<E: de::Error>(self, v: $ty) -> Result<Self::Value, E> {
            self.visitor.$method(v)
        }
    )*};
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Wrap<'_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.visitor.expecting(f)
    }

    forward_visit! {
        visit_bool(bool), visit_i8(i8), visit_i16(i16), visit_i32(i32), visit_i64(i64),
        visit_i128(i128), visit_u8(u8), visit_u16(u16), visit_u32(u32), visit_u64(u64),
        visit_u128(u128), visit_f32(f32), visit_f64(f64), visit_char(char),
        visit_bytes(&[u8]), visit_borrowed_bytes(&'de [u8]), visit_byte_buf(Vec<u8>),
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        self.note(v);
        self.visitor.visit_str(v)
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        self.note(v);
        self.visitor.visit_borrowed_str(v)
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        self.note(&v);
        self.visitor.visit_string(v)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        self.visitor.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.visitor.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.visitor.visit_some(Layer {
            inner: d,
            mode: self.mode,
        })
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.visitor.visit_newtype_struct(Layer {
            inner: d,
            mode: self.mode,
        })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        self.visitor.visit_seq(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        match self.mode {
            Mode::Level(at) => self.visitor.visit_map(Watched {
                map,
                at,
                next_is_watched: Cell::new(false),
            }),
            Mode::Key(..) => self.visitor.visit_map(map),
        }
    }

    fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        self.visitor.visit_enum(data)
    }
}

/// A watched map: the value after its watched key is handled here.
struct Watched<A> {
    map: A,
    at: At,
    next_is_watched: Cell<bool>,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Watched<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        self.next_is_watched.set(false);
        self.map.next_key_seed(KeySeed {
            seed,
            seen: &self.next_is_watched,
            wanted: self.at.key(),
        })
    }

    fn next_value_seed<S: DeserializeSeed<'de>>(&mut self, seed: S) -> Result<S::Value, A::Error> {
        if !self.next_is_watched.get() {
            return self.map.next_value_seed(seed);
        }
        match self.at {
            At::Object => self.map.next_value_seed(LevelSeed(seed, At::Metadata)),
            At::Metadata => self.map.next_value_seed(CheckedAsNone(seed)),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint()
    }
}

/// A map key, decoded by the object's own seed and noted.
struct KeySeed<'k, K> {
    seed: K,
    seen: &'k Cell<bool>,
    wanted: &'static str,
}

impl<'de, K: DeserializeSeed<'de>> DeserializeSeed<'de> for KeySeed<'_, K> {
    type Value = K::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<K::Value, D::Error> {
        self.seed.deserialize(Layer {
            inner: d,
            mode: Mode::Key(self.seen, self.wanted),
        })
    }
}

/// The `metadata` value, its own map watched.
struct LevelSeed<S>(S, At);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for LevelSeed<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(Layer {
            inner: d,
            mode: Mode::Level(self.1),
        })
    }
}

/// The `managedFields` value: checked, then given to the object as absent (`null`).
struct CheckedAsNone<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for CheckedAsNone<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        <Option<Vec<Entry>> as de::Deserialize>::deserialize(d)?;
        self.0.deserialize(UnitDeserializer::new())
    }
}

/// One managed-fields entry as k8s-openapi's `ManagedFieldsEntry` accepts it: a map whose
/// string members are strings or `null`, whose `time` is a `Time`, whose `fieldsV1` is any
/// value, with no key twice and none escaped or unknown (those the full decode judges).
struct Entry;

impl<'de> de::Deserialize<'de> for Entry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(EntryVisitor)
    }
}

struct EntryVisitor;

const ENTRY_KEYS: [&str; 7] = [
    "apiVersion",
    "fieldsType",
    "fieldsV1",
    "manager",
    "operation",
    "subresource",
    "time",
];

impl<'de> Visitor<'de> for EntryVisitor {
    type Value = Entry;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ManagedFieldsEntry")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entry, A::Error> {
        let mut seen = [false; ENTRY_KEYS.len()];
        while let Some(key) = map.next_key::<&'de str>()? {
            let Some(i) = ENTRY_KEYS.iter().position(|k| *k == key) else {
                return Err(de::Error::unknown_field(key, &ENTRY_KEYS));
            };
            if std::mem::replace(&mut seen[i], true) {
                return Err(de::Error::duplicate_field(ENTRY_KEYS[i]));
            }
            match ENTRY_KEYS[i] {
                "fieldsV1" => {
                    map.next_value::<IgnoredAny>()?;
                }
                "time" => {
                    map.next_value::<Option<Time>>()?;
                }
                _ => {
                    map.next_value::<Option<Text>>()?;
                }
            }
        }
        Ok(Entry)
    }
}

/// A JSON string, not kept.
struct Text;

impl<'de> de::Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(TextVisitor)
    }
}

struct TextVisitor;

impl Visitor<'_> for TextVisitor {
    type Value = Text;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Text, E> {
        Ok(Text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    fn entry() -> serde_json::Value {
        json!({"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
               "time": "2026-11-27T09:00:00Z", "fieldsType": "FieldsV1",
               "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                            "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}}}}}})
    }

    fn pod(managed: serde_json::Value) -> serde_json::Value {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "p", "namespace": "a", "labels": {"app": "x"},
                            "annotations": {"managedFields": "kept"},
                            "managedFields": managed, "uid": "u"},
               "spec": {"containers": [{"name": "c", "image": "busybox",
                                        "resources": {"requests": {"cpu": "1"}}}]},
               "status": {"phase": "Pending"}})
    }

    fn both(v: &serde_json::Value) -> (Result<Pod, String>, Result<Pod, String>) {
        let text = v.to_string();
        let full = serde_json::from_str::<Pod>(&text).map_err(|e| e.to_string());
        let without = serde_json::from_str::<Unmanaged<Pod>>(&text)
            .map(|u| u.0)
            .map_err(|e| e.to_string());
        (full, without)
    }

    #[test]
    fn the_object_is_the_full_decode_without_its_managed_fields() {
        for managed in [
            json!([entry(), entry()]),
            json!([]),
            json!(null),
            json!([{}]),
        ] {
            let (full, without) = both(&pod(managed.clone()));
            let mut full = full.unwrap();
            full.metadata.managed_fields = None;
            assert_eq!(without.unwrap(), full, "{managed}");
        }
        // No managedFields at all, and a `managedFields` key anywhere else, are untouched.
        let mut v = pod(json!(null));
        v["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        v["spec"]["managedFields"] = json!("ignored by Pod");
        let (full, without) = both(&v);
        assert_eq!(without.unwrap(), full.unwrap());
    }

    #[test]
    fn what_the_full_decode_refuses_is_refused() {
        let mut bad_time = entry();
        bad_time["time"] = json!("yesterday");
        let mut number = entry();
        number["manager"] = json!(7);
        for managed in [
            json!("x"),
            json!({}),
            json!([1]),
            json!([[]]),
            json!([bad_time]),
            json!([number]),
        ] {
            let (full, without) = both(&pod(managed.clone()));
            assert!(full.is_err(), "{managed}: the full decode accepts it");
            assert!(
                without.is_err(),
                "{managed}: accepted without managedFields"
            );
        }
    }

    #[test]
    fn entries_it_is_not_sure_of_are_refused_for_the_full_decode_to_judge() {
        let mut unknown = entry();
        unknown["extra"] = json!(1);
        let (full, without) = both(&pod(json!([unknown])));
        assert!(full.is_ok() && without.is_err());
    }
}
