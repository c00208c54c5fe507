//! A mutated copy to a JSON Patch: the diff of the typed objects, fitted onto the raw object so
//! that fields the types do not know are never dropped.

use super::*;

/// The JSON Patch (as bytes) that turns the raw object into the raw object with the typed edit
/// applied, or `None` when nothing changed.
///
/// The diff is taken between the typed object before and after the edit, so it holds only what
/// the mutator changed. When it applies to the raw JSON as it stands (the usual case) it is the
/// patch; otherwise it is replayed onto the raw JSON creating the parents that the raw object
/// lacks but the typed one serialised, and the patch is the diff of the raw object against that.
/// Either way it applies to what the API server holds and never removes a field our types do
/// not know.
pub fn typed_patch<T: Serialize + 'static>(
    raw: &RawValue,
    before: &T,
    after: &T,
    empties: diff::EmptyAdds,
) -> Result<Option<Vec<u8>>, ReviewError> {
    let edit = diff::typed_diff(before, after, empties)
        .map_err(|e| ReviewError::Object("object", e.to_string()))?;
    if edit.0.is_empty() {
        return Ok(None);
    }
    // Usually the typed edit applies to the raw object as it stands, which a skeleton of the
    // object answers without parsing all of it.
    if skeleton::applies(raw, &edit) {
        return encode_patch(&edit);
    }
    let mut doc: Value = serde_json::from_str(raw.get())
        .map_err(|e| ReviewError::Object("object", e.to_string()))?;
    // json_patch::patch is atomic, so on failure `doc` is untouched and the lenient replay +
    // re-diff below takes over.
    let patch = if json_patch::patch(&mut doc, &edit.0).is_ok() {
        edit
    } else {
        let mut patched = doc.clone();
        replay(&mut patched, &edit);
        json_patch::diff(&doc, &patched)
    };
    if patch.0.is_empty() {
        return Ok(None);
    }
    encode_patch(&patch)
}

pub(super) fn encode_patch(patch: &Patch) -> Result<Option<Vec<u8>>, ReviewError> {
    serde_json::to_vec(patch)
        .map(Some)
        .map_err(|e| ReviewError::Object("patch", e.to_string()))
}

/// Applies diff operations, creating missing parents instead of failing.
pub(super) fn replay(doc: &mut Value, patch: &Patch) {
    for op in &patch.0 {
        match op {
            PatchOperation::Add(a) => set(doc, &tokens(a.path.as_str()), a.value.clone(), true),
            PatchOperation::Replace(r) => {
                set(doc, &tokens(r.path.as_str()), r.value.clone(), false)
            }
            PatchOperation::Remove(r) => remove(doc, &tokens(r.path.as_str())),
            // json_patch::diff emits only add, replace and remove.
            _ => {}
        }
    }
}

pub(super) fn set(doc: &mut Value, path: &[String], value: Value, insert: bool) {
    let Some((last, parents)) = path.split_last() else {
        *doc = value;
        return;
    };
    let mut cur = doc;
    for t in parents {
        cur = match cur {
            Value::Array(a) => match t.parse::<usize>() {
                Ok(i) if i < a.len() => &mut a[i],
                _ => return,
            },
            other => {
                if !other.is_object() {
                    *other = Value::Object(Default::default());
                }
                match other {
                    Value::Object(m) => m.entry(t.clone()).or_insert(Value::Null),
                    _ => return,
                }
            }
        };
        if cur.is_null() {
            *cur = Value::Object(Default::default());
        }
    }
    match cur {
        Value::Array(a) => {
            if last == "-" {
                a.push(value);
            } else if let Ok(i) = last.parse::<usize>() {
                if insert && i <= a.len() {
                    a.insert(i, value);
                } else if i < a.len() {
                    a[i] = value;
                } else {
                    a.push(value);
                }
            }
        }
        other => {
            if !other.is_object() {
                *other = Value::Object(Default::default());
            }
            if let Value::Object(m) = other {
                m.insert(last.clone(), value);
            }
        }
    }
}

pub(super) fn remove(doc: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = doc;
    for t in parents {
        cur = match cur {
            Value::Array(a) => match t.parse::<usize>().ok().and_then(|i| a.get_mut(i)) {
                Some(v) => v,
                None => return,
            },
            Value::Object(m) => match m.get_mut(t) {
                Some(v) => v,
                None => return,
            },
            _ => return,
        };
    }
    match cur {
        Value::Array(a) => {
            if let Ok(i) = last.parse::<usize>()
                && i < a.len()
            {
                a.remove(i);
            }
        }
        Value::Object(m) => {
            m.remove(last);
        }
        _ => {}
    }
}
