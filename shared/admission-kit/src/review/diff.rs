//! The JSON Patch between a typed object before and after a mutator's edit, computed on the
//! objects' JSON text.
//!
//! The patch is `json_patch::diff` of the two objects as `serde_json::Value`s, op for op, with
//! the kit's two Go-compatible adjustments (below). Building both `Value` trees to diff them
//! allocated every string and map of the object twice and dropped them again: half of a Model
//! mutation's instructions for an edit of two fields. Here both objects are written as text (one
//! buffer each) and compared level by level: a member whose text is the same on both sides is
//! equal and is not looked into; only the containers on the way to a difference are split into
//! their members, and only values that go into the patch become `Value`s. Each text is scanned
//! once for where its containers close ([`Doc`]; `memchr` inside strings), so splitting a
//! container jumps over the nested ones instead of scanning them again at every level on the
//! way down: serde_json's own raw-value reader validates as it goes, which made this three
//! times dearer. Hand-written because json-patch diffs only `Value`s.
//!
//! Equal text means equal values; different text is compared member by member (keys in
//! `Value`'s sorted order, a later duplicate key winning as in a `Value` parse), and scalars
//! whose text differs are compared as `Value`s, so `0.0` and `-0.0` stay equal as they are for
//! `Value`. The text is serde_json's own output; should the splitter meet anything it does not
//! follow, the `Value` diff answers instead. A unit test holds the two equal on generated objects.
//! An object that is a `Value` already (a mutator that edits the JSON itself) takes the `Value`
//! diff directly: there is nothing to build, and writing both trees out would cost more.

use std::borrow::Cow;
use std::collections::BTreeMap;

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation, RemoveOperation, ReplaceOperation};
use serde::Serialize;
use serde_json::{Error, Map, Value};

/// The patch from `before` to `after`: `json_patch::diff` of their `Value`s, where
/// - `metadata.labels` or `metadata.annotations` emptied by the edit is removed whole (Go's
///   `omitempty`: upstream's re-encoded object has no map, so its patch removes the map; a map that was already empty is left alone, FIX F-1);
/// - unless `empties` is [`EmptyAdds::Kept`], an empty value (`null`, `{}`, `[]` or an object of
///   only such) added under a key the object lacked is left out: it changes the text but nothing
///   a decoder reads (typed objects create such values when a rule reaches into an absent parent
///   and writes nothing).
pub(crate) fn typed_diff<T: Serialize + 'static>(
    before: &T,
    after: &T,
    empties: EmptyAdds,
) -> Result<Patch, Error> {
    // An object the mutator keeps as JSON is diffed as it stands: writing two `Value`s out as
    // text to compare them costs more than walking them, and `by_values` is the reference the
    // text diff reproduces. (`Any`, since stable Rust has no specialisation.)
    let (b, a): (&dyn std::any::Any, &dyn std::any::Any) = (before, after);
    if let (Some(before), Some(after)) = (b.downcast_ref::<Value>(), a.downcast_ref::<Value>()) {
        return Ok(by_values(before, after, empties));
    }
    let before = serde_json::to_string(before)?;
    let after = serde_json::to_string(after)?;
    let mut patch = Patch::default();
    let mut at = PointerBuf::new();
    if let (Some(left), Some(right)) = (Doc::new(&before), Doc::new(&after)) {
        let docs = Docs {
            left: &left,
            right: &right,
            empties,
        };
        if diff(&docs, &before, &after, Level::Root, &mut at, &mut patch).is_some() {
            return Ok(patch);
        }
    }
    Ok(by_values(
        &serde_json::from_str(&before)?,
        &serde_json::from_str(&after)?,
        empties,
    ))
}

/// Whether a patch keeps the empty values an edit adds under absent keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmptyAdds {
    /// Left out: they change nothing a decoder reads (the default).
    Dropped,
    /// Kept: the mutator writes them on purpose, as its upstream's re-encoding does.
    Kept,
}

/// Both sides' texts, scanned, and what to do with empty additions.
struct Docs<'d, 't> {
    left: &'d Doc<'t>,
    right: &'d Doc<'t>,
    empties: EmptyAdds,
}

/// The same patch from the two objects as `Value`s: `json_patch::diff` with the adjustments
/// applied to the trees and the operations.
fn by_values(before: &Value, edited: &Value, empties: EmptyAdds) -> Patch {
    // `edited` is copied only when a map has to go.
    let mut after = Cow::Borrowed(edited);
    for key in ["labels", "annotations"] {
        let was_filled = before["metadata"][key]
            .as_object()
            .is_some_and(|m| !m.is_empty());
        let now_empty = edited["metadata"][key]
            .as_object()
            .is_some_and(Map::is_empty);
        if was_filled
            && now_empty
            && let Some(meta) = after
                .to_mut()
                .get_mut("metadata")
                .and_then(Value::as_object_mut)
        {
            meta.remove(key);
        }
    }
    let mut edit = json_patch::diff(before, &after);
    if empties == EmptyAdds::Dropped {
        edit.0.retain(|op| !adds_nothing(before, op));
    }
    edit
}

/// Where a value sits, for the `metadata` adjustment.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Metadata,
    Below,
}

/// A JSON text with where each of its containers closes, found in one scan.
struct Doc<'t> {
    text: &'t str,
    /// `(open, close)` byte offsets of every `{…}` and `[…]`, in the order they open.
    spans: Vec<(usize, usize)>,
}

impl<'t> Doc<'t> {
    /// `None` when a string does not end or the brackets do not balance.
    fn new(text: &'t str) -> Option<Self> {
        let b = text.as_bytes();
        let mut spans = Vec::new();
        let mut open = Vec::new();
        let mut i = 0;
        while let Some(c) = b.get(i) {
            match c {
                b'"' => {
                    i = string_end(b, i)?;
                    continue;
                }
                b'{' | b'[' => {
                    open.push(spans.len());
                    spans.push((i, 0));
                }
                b'}' | b']' => spans.get_mut(open.pop()?)?.1 = i,
                _ => {}
            }
            i += 1;
        }
        open.is_empty().then_some(Self { text, spans })
    }

    /// Where `part`, a slice of this text, starts in it.
    fn offset(&self, part: &str) -> Option<usize> {
        let at = (part.as_ptr() as usize).checked_sub(self.text.as_ptr() as usize)?;
        (at.checked_add(part.len())? <= self.text.len()).then_some(at)
    }

    /// One past the close of the container opening at `open`.
    fn container_end(&self, open: usize) -> Option<usize> {
        let k = self.spans.binary_search_by_key(&open, |s| s.0).ok()?;
        Some(self.spans[k].1 + 1)
    }
}

/// Appends the operations from `left` to `right` (JSON texts of one value each, slices of
/// the texts of `docs`); `None` when the text is not what this splitter follows.
fn diff(
    docs: &Docs,
    left: &str,
    right: &str,
    level: Level,
    at: &mut PointerBuf,
    patch: &mut Patch,
) -> Option<()> {
    if left == right {
        return Some(());
    }
    match (left.as_bytes().first(), right.as_bytes().first()) {
        (Some(b'{'), Some(b'{')) => diff_object(docs, left, right, level, at, patch),
        (Some(b'['), Some(b'[')) => diff_array(docs, left, right, at, patch),
        _ => {
            let right: Value = serde_json::from_str(right).ok()?;
            if serde_json::from_str::<Value>(left).ok()? != right {
                patch.0.push(PatchOperation::Replace(ReplaceOperation {
                    path: at.clone(),
                    value: right,
                }));
            }
            Some(())
        }
    }
}

fn diff_object(
    docs: &Docs,
    left: &str,
    right: &str,
    level: Level,
    at: &mut PointerBuf,
    patch: &mut Patch,
) -> Option<()> {
    let left = members(docs.left, left)?;
    let mut right = members(docs.right, right)?;
    if level == Level::Metadata {
        for key in ["labels", "annotations"] {
            let was_filled = left
                .get(key)
                .and_then(|v| elements(docs.left, v, b'{'))
                .unwrap_or(0)
                > 0;
            if was_filled && right.get(key).and_then(|v| elements(docs.right, v, b'{')) == Some(0) {
                right.remove(key);
            }
        }
    }
    for (key, r) in &right {
        at.push_back(key.as_ref());
        match left.get(key) {
            Some(l) => {
                let below = if level == Level::Root && key == "metadata" {
                    Level::Metadata
                } else {
                    Level::Below
                };
                diff(docs, l, r, below, at, patch)?;
            }
            None => {
                let value: Value = serde_json::from_str(r).ok()?;
                if docs.empties == EmptyAdds::Kept || !go_empty(&value) {
                    patch.0.push(PatchOperation::Add(AddOperation {
                        path: at.clone(),
                        value,
                    }));
                }
            }
        }
        at.pop_back();
    }
    for key in left.keys().filter(|k| !right.contains_key(*k)) {
        at.push_back(key.as_ref());
        patch
            .0
            .push(PatchOperation::Remove(RemoveOperation { path: at.clone() }));
        at.pop_back();
    }
    Some(())
}

/// Element by element; the longer side's tail is added or removed one index at a time, as
/// `json_patch::diff` does.
fn diff_array(
    docs: &Docs,
    left: &str,
    right: &str,
    at: &mut PointerBuf,
    patch: &mut Patch,
) -> Option<()> {
    let left = items(docs.left, left)?;
    let right = items(docs.right, right)?;
    let common = left.len().min(right.len());
    for (i, (l, r)) in left.iter().zip(&right).enumerate() {
        at.push_back(i);
        diff(docs, l, r, Level::Below, at, patch)?;
        at.pop_back();
    }
    // Each removal shifts the rest down, so every one removes the element at `common`.
    for _ in common..left.len() {
        at.push_back(common);
        patch
            .0
            .push(PatchOperation::Remove(RemoveOperation { path: at.clone() }));
        at.pop_back();
    }
    for (i, r) in right.iter().enumerate().skip(common) {
        at.push_back(i);
        patch.0.push(PatchOperation::Add(AddOperation {
            path: at.clone(),
            value: serde_json::from_str(r).ok()?,
        }));
        at.pop_back();
    }
    Some(())
}

/// An object's members by decoded key, a later duplicate winning.
fn members<'t>(doc: &Doc, text: &'t str) -> Option<BTreeMap<Cow<'t, str>, &'t str>> {
    let mut out = BTreeMap::new();
    split(doc, text, b'{', |key, value| {
        let key = key?;
        let key = if key.contains('\\') {
            Cow::Owned(serde_json::from_str(key).ok()?)
        } else {
            Cow::Borrowed(key.get(1..key.len() - 1)?)
        };
        out.insert(key, value);
        Some(())
    })?;
    Some(out)
}

/// An array's elements.
fn items<'t>(doc: &Doc, text: &'t str) -> Option<Vec<&'t str>> {
    let mut out = Vec::new();
    split(doc, text, b'[', |_, value| {
        out.push(value);
        Some(())
    })?;
    Some(out)
}

/// The number of members (`open` `{`) or elements (`[`) of `text`, `None` for another value.
fn elements(doc: &Doc, text: &str, open: u8) -> Option<usize> {
    let mut n = 0;
    split(doc, text, open, |_, _| {
        n += 1;
        Some(())
    })?;
    Some(n)
}

/// Calls `each` with every member of the container `text` opened by `open`: its key's text
/// with the quotes (objects) and its value's text, whitespace trimmed. `text` is a slice of
/// `doc`'s text.
fn split<'t>(
    doc: &Doc,
    text: &'t str,
    open: u8,
    mut each: impl FnMut(Option<&'t str>, &'t str) -> Option<()>,
) -> Option<()> {
    let base = doc.offset(text)?;
    let value_end = |b: &[u8], i: usize| match b.get(i)? {
        b'{' | b'[' => doc
            .container_end(base + i)
            .and_then(|end| end.checked_sub(base))
            .filter(|end| *end <= b.len()),
        _ => scalar_end(b, i),
    };
    let b = text.as_bytes();
    let close = if open == b'{' { b'}' } else { b']' };
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&open) {
        return None;
    }
    i = skip_ws(b, i + 1);
    if b.get(i) == Some(&close) {
        return (skip_ws(b, i + 1) == b.len()).then_some(());
    }
    loop {
        let key = if open == b'{' {
            let end = value_end(b, i)?;
            let key = text.get(i..end)?;
            i = skip_ws(b, end);
            if b.get(i) != Some(&b':') {
                return None;
            }
            i = skip_ws(b, i + 1);
            Some(key)
        } else {
            None
        };
        let end = value_end(b, i)?;
        each(key, text.get(i..end)?)?;
        i = skip_ws(b, end);
        match b.get(i) {
            Some(b',') => i = skip_ws(b, i + 1),
            Some(c) if *c == close => return (skip_ws(b, i + 1) == b.len()).then_some(()),
            _ => return None,
        }
    }
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\n' | b'\r' | b'\t')) {
        i += 1;
    }
    i
}

/// Where the string or scalar starting at `i` ends (one past its last byte).
fn scalar_end(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => string_end(b, i),
        _ => {
            let rest = b.get(i..)?;
            let len = rest
                .iter()
                .position(|c| matches!(c, b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t'))
                .unwrap_or(rest.len());
            (len > 0).then_some(i + len)
        }
    }
}

/// One past the closing quote of the string whose opening quote is at `i`.
fn string_end(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    loop {
        let at = j + memchr::memchr2(b'"', b'\\', b.get(j..)?)?;
        if b.get(at) == Some(&b'"') {
            return Some(at + 1);
        }
        // An escape: the next byte is escaped (the rest of `\u` are hex digits).
        j = at + 2;
    }
}

/// `null`, `{}`, `[]`, or an object of only such values: what a Go decoder reads as absent.
pub(crate) fn go_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.values().all(go_empty),
        _ => false,
    }
}

/// Whether `op` adds an empty value (`resources: {}`) under a key `doc` lacks: it changes the
/// text but nothing a decoder reads, so it is left out of the patch. Typed
/// objects create such values when a rule reaches into an absent parent and writes nothing.
pub fn adds_nothing(doc: &Value, op: &PatchOperation) -> bool {
    let PatchOperation::Add(a) = op else {
        return false;
    };
    let path = a.path.as_str();
    let parent = path.rsplit_once('/').map_or("", |(p, _)| p);
    go_empty(&a.value)
        && doc.pointer(path).is_none()
        && doc.pointer(parent).is_some_and(Value::is_object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(p: &Patch) -> String {
        serde_json::to_string(p).unwrap()
    }

    /// The text diff alone, failing rather than falling back to the `Value` diff.
    fn by_text<T: Serialize>(before: &T, after: &T) -> Patch {
        by_text_keeping(before, after, EmptyAdds::Dropped)
    }

    fn by_text_keeping<T: Serialize>(before: &T, after: &T, empties: EmptyAdds) -> Patch {
        let (b, a) = (
            serde_json::to_string(before).unwrap(),
            serde_json::to_string(after).unwrap(),
        );
        let mut patch = Patch::default();
        let (bd, ad) = (Doc::new(&b).unwrap(), Doc::new(&a).unwrap());
        let docs = Docs {
            left: &bd,
            right: &ad,
            empties,
        };
        diff(
            &docs,
            &b,
            &a,
            Level::Root,
            &mut PointerBuf::new(),
            &mut patch,
        )
        .expect("the splitter follows serde_json's output");
        patch
    }

    /// A random JSON value of bounded depth from a small alphabet of keys and scalars, so that
    /// two draws often share keys and values.
    fn value(rng: &mut fastrand::Rng, depth: u32) -> Value {
        let scalars = [
            json!(null),
            json!(true),
            json!(false),
            json!(0),
            json!(1),
            json!(-1),
            json!(0.0),
            json!(-0.0),
            json!(1.5),
            json!(u64::MAX),
            json!(""),
            json!("a"),
            json!("b\n\"é"),
            json!({}),
            json!([]),
        ];
        match rng.u32(0..if depth == 0 { 1 } else { 4 }) {
            0 => scalars[rng.usize(0..scalars.len())].clone(),
            1 => Value::Array(
                (0..rng.usize(0..4))
                    .map(|_| value(rng, depth - 1))
                    .collect(),
            ),
            _ => {
                let keys = [
                    "a",
                    "b",
                    "c/d",
                    "e~f",
                    "0",
                    "labels",
                    "annotations",
                    "metadata",
                ];
                let mut m = Map::new();
                for _ in 0..rng.usize(0..5) {
                    m.insert(keys[rng.usize(0..keys.len())].into(), value(rng, depth - 1));
                }
                Value::Object(m)
            }
        }
    }

    /// `v` with a few random edits: a member replaced, added or removed, an element pushed or
    /// popped, a labels map emptied.
    fn edited(rng: &mut fastrand::Rng, v: &Value, depth: u32) -> Value {
        let mut v = v.clone();
        match &mut v {
            Value::Object(m) => {
                let keys: Vec<String> = m.keys().cloned().collect();
                for k in keys {
                    match rng.u32(0..8) {
                        0 => {
                            m.remove(&k);
                        }
                        1 => {
                            m.insert(k, value(rng, depth));
                        }
                        2 if k == "labels" || k == "annotations" => {
                            m.insert(k, json!({}));
                        }
                        3 | 4 => {
                            let e = edited(rng, &m[&k], depth.saturating_sub(1));
                            m.insert(k, e);
                        }
                        _ => {}
                    }
                }
                if rng.bool() {
                    m.insert(["x", "a", "labels"][rng.usize(0..3)].into(), value(rng, 1));
                }
            }
            Value::Array(a) => {
                match rng.u32(0..4) {
                    0 => a.push(value(rng, depth)),
                    1 => {
                        a.pop();
                    }
                    _ => {}
                }
                for e in a.iter_mut() {
                    if rng.u32(0..3) == 0 {
                        *e = edited(rng, e, depth.saturating_sub(1));
                    }
                }
            }
            _ => {
                if rng.u32(0..3) == 0 {
                    v = value(rng, depth);
                }
            }
        }
        v
    }

    #[test]
    fn equals_the_value_diff_on_generated_objects() {
        let mut rng = fastrand::Rng::with_seed(14);
        let mut nonempty = 0;
        for _ in 0..20_000 {
            let mut before = value(&mut rng, 4);
            if rng.bool() {
                // The shape the `metadata` adjustment looks at.
                before = json!({"metadata": {"labels": {"k": "v"}, "annotations": before.clone()},
                                "spec": before});
            }
            let after = edited(&mut rng, &before, 3);
            let empties = if rng.bool() {
                EmptyAdds::Kept
            } else {
                EmptyAdds::Dropped
            };
            let want = by_values(&before, &after, empties);
            let got = by_text_keeping(&before, &after, empties);
            assert_eq!(text(&got), text(&want), "{before}\n{after}");
            nonempty += usize::from(!want.0.is_empty());
        }
        assert!(nonempty > 10_000, "{nonempty}");
    }

    /// A `Value` object is diffed as a tree, any other type as text: the same operations.
    #[test]
    fn a_value_object_diffs_as_its_text_does() {
        #[derive(Serialize)]
        #[serde(transparent)]
        struct Opaque(Value);
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..2_000 {
            let before = json!({"metadata": {"labels": {"k": "v"}}, "spec": value(&mut rng, 3)});
            let after = edited(&mut rng, &before, 2);
            for empties in [EmptyAdds::Kept, EmptyAdds::Dropped] {
                let tree = typed_diff(&before, &after, empties).unwrap();
                let text_diff =
                    typed_diff(&Opaque(before.clone()), &Opaque(after.clone()), empties).unwrap();
                assert_eq!(text(&tree), text(&text_diff), "{before}\n{after}");
            }
        }
    }

    /// The splitter follows whitespace (a `RawValue` field is written as it came), escapes and
    /// nesting, and refuses what it does not follow.
    #[test]
    fn splits_members_and_refuses_what_it_does_not_follow() {
        let t = " { \"a\" : [1, {\"b\":\"x\\\"}]\"}] , \"k\\u0041\": -1.5e3, \"a\":\t2 } ";
        let members = |t| members(&Doc::new(t)?, t);
        let items = |t| items(&Doc::new(t)?, t);
        let m = members(t).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m["a"], "2");
        assert_eq!(m["kA"], "-1.5e3");
        assert_eq!(items(" [ [], {}, \"]\" ] ").unwrap(), ["[]", "{}", "\"]\""]);
        for bad in [
            "{\"a\" 1}",
            "{\"a\":1",
            "[1,]",
            "{\"a\":1}x",
            "[\"open",
            "{1:2}",
            "",
        ] {
            assert!(members(bad).is_none() && items(bad).is_none(), "{bad}");
        }
        // A typed object holding raw text with whitespace diffs as its values do.
        #[derive(Serialize)]
        struct Raw {
            spec: Box<serde_json::value::RawValue>,
        }
        let raw = |t: &str| Raw {
            spec: serde_json::value::RawValue::from_string(t.into()).unwrap(),
        };
        let (before, after) = (raw("{ \"a\": [1, 2], \"b\": {} }"), raw("{\"a\":[1, 3]}"));
        let values = |o: &Raw| serde_json::to_value(o).unwrap();
        assert_eq!(
            text(&by_text(&before, &after)),
            text(&by_values(
                &values(&before),
                &values(&after),
                EmptyAdds::Dropped
            ))
        );
    }

    /// A struct writes its fields in declaration order, not sorted: the operations still come
    /// in the `Value` diff's order.
    #[test]
    fn struct_field_order_does_not_change_the_operations() {
        #[derive(Serialize)]
        struct Obj {
            z: u32,
            metadata: Value,
            a: Option<Value>,
            m: BTreeMap<String, u32>,
        }
        let before = Obj {
            z: 1,
            metadata: json!({"labels": {"a": "1"}, "name": "n"}),
            a: None,
            m: BTreeMap::from([("k".into(), 1)]),
        };
        let after = Obj {
            z: 2,
            metadata: json!({"labels": {}, "name": "n"}),
            a: Some(json!({"x": {}})),
            m: BTreeMap::new(),
        };
        let values = |o: &Obj| serde_json::to_value(o).unwrap();
        let want = by_values(&values(&before), &values(&after), EmptyAdds::Dropped);
        assert_eq!(text(&by_text(&before, &after)), text(&want));
        assert_eq!(want.0.len(), 4, "{}", text(&want));
    }

    /// A mutator that writes empty values on purpose gets them in its patch; the default
    /// leaves them out.
    #[test]
    fn empty_additions_are_kept_only_when_asked() {
        let before = json!({"spec": {"a": 1}});
        let after = json!({"spec": {"a": 1, "metadata": {}, "apiGroup": null}});
        assert!(by_text(&before, &after).0.is_empty());
        let kept = by_text_keeping(&before, &after, EmptyAdds::Kept);
        assert_eq!(
            text(&kept),
            r#"[{"op":"add","path":"/spec/apiGroup","value":null},{"op":"add","path":"/spec/metadata","value":{}}]"#
        );
        assert_eq!(
            text(&by_values(&before, &after, EmptyAdds::Kept)),
            text(&kept)
        );
    }
}
