//! A review's body to a typed request: the envelope, the object and old object decoded as the
//! handler asks (one pass where it can), and the request checked.

use super::*;

pub(super) fn envelope(body: &[u8]) -> Result<ReviewIn, ReviewError> {
    serde_json::from_slice(body).map_err(|e| ReviewError::Body(e.to_string()))
}

/// How a handler reads the objects of a review.
#[derive(Debug, Clone, Copy)]
pub(super) struct Reading {
    /// The old object is typed (`reads_old_object`).
    pub(super) old_object: bool,
    /// Objects keep their `metadata.managedFields` (`reads_managed_fields`).
    pub(super) managed_fields: bool,
}

impl Reading {
    pub(super) fn of_validator<V: Validator>(v: &V) -> Self {
        Self {
            old_object: v.reads_old_object(),
            managed_fields: v.reads_managed_fields(),
        }
    }

    pub(super) fn of_mutator<M: Mutator>(m: &M) -> Self {
        Self {
            old_object: m.reads_old_object(),
            managed_fields: m.reads_managed_fields(),
        }
    }
}

/// Decodes one object as every upstream's Go decoder reads it: a JSON `null` where a value is
/// expected is that type's zero value. That reading is tried only when the strict decode fails
/// (so it costs nothing on the objects an API server sends), and which fault a review that
/// neither reading accepts is refused with is [`crate::compat::zero::after_strict`]'s.
pub(super) fn decode_raw<T: DeserializeOwned>(
    what: &'static str,
    raw: &RawValue,
) -> Result<T, ReviewError> {
    serde_json::from_str(raw.get())
        .or_else(|strict| crate::compat::zero::after_strict(raw.get(), strict))
        .map_err(|e| ReviewError::Object(what, e.to_string()))
}

/// Decodes one object as [`decode_raw`] does, without its managed fields when the rules do not
/// read them and that decode succeeds (it refuses all the full decode refuses, and more: the full
/// decode then judges).
pub(super) fn decode_object<T: DeserializeOwned>(
    what: &'static str,
    raw: &RawValue,
    reading: Reading,
) -> Result<T, ReviewError> {
    if !reading.managed_fields
        && let Ok(Unmanaged(object)) = serde_json::from_str(raw.get())
    {
        return Ok(object);
    }
    decode_raw(what, raw)
}

/// Runs a handler's post-decode check on the object and the old object.
pub(super) fn checked<T>(
    d: Decoded<T>,
    check: impl Fn(&T) -> Result<(), String>,
) -> Result<Decoded<T>, ReviewError> {
    check(&d.req.object).map_err(|e| ReviewError::Object("object", e))?;
    if let Some(old) = &d.req.old_object {
        check(old).map_err(|e| ReviewError::Object("oldObject", e))?;
    }
    Ok(d)
}

/// The parts of a decoded request shared by validators and mutators.
pub(super) struct Decoded<T> {
    pub(super) api_version: String,
    pub(super) req: Request<T>,
}

/// The review's request with the object under review chosen (on DELETE the old object, which
/// is then no longer the old one), its objects still as the envelope decoded them.
pub(super) fn chosen<O>(review: ReviewIn<O>) -> Result<Decoded<O>, ReviewError> {
    let api_version = review.api_version.unwrap_or_default();
    let r: RawRequest<O> = review.request.ok_or(ReviewError::NoRequest)?;
    let req = request_of(r, |op, object, old_object| {
        // A JSON `null` object decodes as `None`, whatever `O` is.
        if op == Operation::Delete {
            let old = old_object.ok_or(ReviewError::NoObject("oldObject", op.as_str()))?;
            Ok((old, None))
        } else {
            let object = object.ok_or(ReviewError::NoObject("object", op.as_str()))?;
            Ok((object, old_object))
        }
    })?;
    Ok(Decoded { api_version, req })
}

/// The request of `r` with the object under review and the old object that `objects` makes of
/// the operation and `r`'s two objects.
pub(super) fn request_of<O, P, T>(
    r: RawRequest<O, P>,
    objects: impl FnOnce(Operation, Option<O>, Option<P>) -> Result<(T, Option<T>), ReviewError>,
) -> Result<Request<T>, ReviewError> {
    let op = r.operation;
    let (object, old_object) = objects(op, r.object, r.old_object)?;
    Ok(Request {
        uid: r.uid,
        kind: r.kind,
        resource: r.resource,
        sub_resource: r.sub_resource,
        name: r.name.unwrap_or_default(),
        namespace: r.namespace,
        operation: op,
        user_info: r.user_info,
        dry_run: r.dry_run.unwrap_or(false),
        object,
        old_object,
    })
}

/// A decoded review and the raw JSON of its object under review.
pub(super) type WithRaw<T> = (Decoded<T>, Box<RawValue>);

/// Decodes a review whose objects are raw: the request with its objects typed, and the raw
/// JSON of the object under review (mutators diff against it).
pub(super) fn decode<T: DeserializeOwned>(
    review: ReviewIn,
    reading: Reading,
) -> Result<WithRaw<T>, ReviewError> {
    let Decoded { api_version, req } = chosen(review)?;
    let object = decode_object("object", &req.object, reading)?;
    let old_object = req
        .old_object
        .as_deref()
        .filter(|_| reading.old_object)
        .map(|o| decode_object("oldObject", o, reading))
        .transpose()?;
    let Request {
        uid,
        kind,
        resource,
        sub_resource,
        name,
        namespace,
        operation,
        user_info,
        dry_run,
        object: raw_object,
        old_object: _,
    } = req;
    let req = Request {
        uid,
        kind,
        resource,
        sub_resource,
        name,
        namespace,
        operation,
        user_info,
        dry_run,
        object,
        old_object,
    };
    Ok((Decoded { api_version, req }, raw_object))
}

/// Decodes a review with its objects typed in the one pass over `body`, which a validator (it
/// never needs the raw object) can do: capturing the object raw and then decoding it scanned
/// it twice, a third of a validation's instructions. `None` when this pass fails for any
/// reason: the caller then decodes as [`decode`] does, so that a body this pass refuses gets
/// exactly the answer and error text it always got. A body this pass accepts is accepted by
/// [`decode`] with the same result: the same deserializer reads the same object bytes, and
/// this pass is the stricter (on DELETE it types `object` too; it nests two levels deeper
/// against the recursion limit; it needs the whole body valid UTF-8, where the raw capture
/// checks only the objects).
///
/// Without managed fields when `reading` says so; `None` when that decode fails, and the
/// caller's [`decode`] then judges the objects one by one.
pub(super) fn decode_in_one_pass<T: DeserializeOwned>(
    body: &[u8],
    reading: Reading,
) -> Option<Decoded<T>> {
    let text = std::str::from_utf8(body).ok()?;
    if reading.managed_fields {
        return chosen(serde_json::from_str::<ReviewIn<T>>(text).ok()?).ok();
    }
    let Decoded { api_version, req } =
        chosen(serde_json::from_str::<ReviewIn<Unmanaged<T>>>(text).ok()?).ok()?;
    let Request {
        uid,
        kind,
        resource,
        sub_resource,
        name,
        namespace,
        operation,
        user_info,
        dry_run,
        object: Unmanaged(object),
        old_object,
    } = req;
    Some(Decoded {
        api_version,
        req: Request {
            uid,
            kind,
            resource,
            sub_resource,
            name,
            namespace,
            operation,
            user_info,
            dry_run,
            object,
            old_object: old_object.map(|Unmanaged(o)| o),
        },
    })
}

/// Decodes a mutator's review with its old object typed in the pass over `body` (capturing it
/// raw first and then decoding it scanned it twice, a node status update's largest object) and
/// the object under review kept raw as well as typed (the patch is checked against the raw
/// text). `None` when this pass fails or the review is a DELETE (whose object under review is
/// the old one): the caller then decodes as [`decode`] does. Errors and results are the same
/// as [`decode`]'s, as for [`decode_in_one_pass`]: this pass is the stricter on what it reads,
/// and the object is decoded from its raw text as [`decode`] decodes it, before the old
/// object's result is used.
pub(super) fn decode_old_in_one_pass<T: DeserializeOwned>(
    body: &[u8],
    reading: Reading,
) -> Option<Result<WithRaw<T>, ReviewError>> {
    // `from_str` after one UTF-8 check of the body reads strings faster than `from_slice`.
    let text = std::str::from_utf8(body).ok()?;
    let review: ReviewIn<Box<RawValue>, T> = if reading.managed_fields {
        serde_json::from_str(text).ok()?
    } else {
        let review: ReviewIn<Box<RawValue>, Unmanaged<T>> = serde_json::from_str(text).ok()?;
        ReviewIn {
            api_version: review.api_version,
            kind: review.kind,
            request: review.request.map(|r| RawRequest {
                old_object: r.old_object.map(|Unmanaged(o)| o),
                uid: r.uid,
                kind: r.kind,
                resource: r.resource,
                sub_resource: r.sub_resource,
                request_kind: r.request_kind,
                request_resource: r.request_resource,
                name: r.name,
                namespace: r.namespace,
                operation: r.operation,
                user_info: r.user_info,
                object: r.object,
                dry_run: r.dry_run,
                options: r.options,
            }),
        }
    };
    let api_version = review.api_version.unwrap_or_default();
    let mut r = review.request?;
    if r.operation == Operation::Delete {
        return None;
    }
    let Some(raw) = r.object.take() else {
        return Some(Err(ReviewError::NoObject("object", r.operation.as_str())));
    };
    let req = request_of(r, |_, _, old_object| {
        Ok((decode_object("object", &raw, reading)?, old_object))
    });
    Some(req.map(|req| (Decoded { api_version, req }, raw)))
}
