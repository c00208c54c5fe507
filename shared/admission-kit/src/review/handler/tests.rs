use super::*;
use serde::Deserialize;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Obj {
    #[serde(default)]
    spec: Spec,
}
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Spec {
    #[serde(default)]
    replicas: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    image: Option<String>,
    #[serde(default)]
    items: Vec<Item>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    extra: Option<Value>,
}
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Item {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    grace: Option<String>,
}

/// Denies a negative `spec.replicas`; its decode check refuses 99 replicas.
struct NonNegative;

impl Validator for NonNegative {
    type Object = Obj;

    fn validate(&self, req: &Request<Obj>, _: &Context) -> Verdict {
        let mut errors = ErrorList::default();
        let replicas = req.object.spec.replicas;
        if replicas < 0 {
            let path = crate::review::field::Path::new("spec").child("replicas");
            errors.push(FieldError::invalid("T-1", path, replicas, "must be >= 0"));
        }
        if let Some(old) = &req.old_object
            && old.spec.replicas > replicas
        {
            let path = crate::review::field::Path::new("spec").child("replicas");
            errors.push(FieldError::forbidden("T-2", path, "may not shrink"));
        }
        errors.into()
    }

    fn check_decoded(&self, o: &Obj) -> Result<(), String> {
        if o.spec.replicas == 99 {
            return Err("99 replicas".to_owned());
        }
        Ok(())
    }
}

/// The review's answer or error, as comparable text.
fn outcome(answered: Result<Answer, ReviewError>) -> String {
    match answered {
        Ok(a) => format!(
            "{} {:?}",
            String::from_utf8_lossy(&a.review.to_bytes()),
            a.decision
        ),
        Err(e) => format!("error: {e}"),
    }
}

fn review_of(request: &str) -> Vec<u8> {
    format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{request}}}"#
    )
    .into_bytes()
}

/// Review bodies for the one-pass decodes, each with whether a validator's one pass takes
/// it: ordinary ones, and ones a one pass may refuse where the raw decode does not.
fn one_pass_bodies() -> Vec<(Vec<u8>, bool)> {
    let obj = |n: i32| format!(r#"{{"spec":{{"replicas":{n},"image":"x","items":[{{}}]}}}}"#);
    let req = |op: &str, fields: &str| {
        format!(r#"{{"uid":"u-1","kind":{{"kind":"Obj"}},"name":"n","operation":"{op}"{fields}}}"#)
    };
    let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    // Each body, and whether the one pass takes it.
    let mut bodies: Vec<(Vec<u8>, bool)> = vec![
        (
            review_of(&req("CREATE", &format!(r#","object":{}"#, obj(3)))),
            true,
        ),
        (
            review_of(&req("CREATE", &format!(r#","object":{}"#, obj(-1)))),
            true,
        ),
        (
            review_of(&req("CREATE", &format!(r#","object":{}"#, obj(99)))),
            true,
        ),
        (
            review_of(&req(
                "UPDATE",
                &format!(r#","object":{},"oldObject":{}"#, obj(2), obj(5)),
            )),
            true,
        ),
        (
            review_of(&req(
                "UPDATE",
                &format!(r#","object":{},"oldObject":null"#, obj(2)),
            )),
            true,
        ),
        (
            review_of(&req("DELETE", &format!(r#","oldObject":{}"#, obj(-4)))),
            true,
        ),
        // DELETE reviews the old object: the raw decode never types `object`.
        (
            review_of(&req(
                "DELETE",
                &format!(r#","object":[1,2],"oldObject":{}"#, obj(1)),
            )),
            false,
        ),
        (review_of(&req("DELETE", r#","object":{}"#)), true),
        (review_of(&req("CREATE", r#","object":null"#)), true),
        (review_of(&req("CREATE", "")), true),
        (
            review_of(&req("CREATE", r#","object":{"spec":{"replicas":"x"}}"#)),
            false,
        ),
        // Skipped JSON is not held to the recursion limit; typed JSON is, and the one pass
        // types it two levels deeper than the raw decode.
        (
            review_of(&req(
                "CREATE",
                &format!(r#","object":{{"spec":{{}},"deep":{}}}"#, deep(200)),
            )),
            true,
        ),
        (
            review_of(&req(
                "CREATE",
                &format!(r#","object":{{"spec":{{"extra":{}}}}}"#, deep(124)),
            )),
            false,
        ),
        (
            review_of(&req(
                "CREATE",
                &format!(r#","object":{},"object":{}"#, obj(1), obj(1)),
            )),
            false,
        ),
        (
            br#"{"apiVersion":"admission.k8s.io/v1beta1"}"#.to_vec(),
            true,
        ),
        (b"not json".to_vec(), false),
        (
            review_of(&req("CREATE", &format!(r#","object":{}"#, obj(1))))
                .into_iter()
                .chain(*b" x")
                .collect(),
            false,
        ),
    ];
    // Invalid UTF-8 outside the objects, which the raw decode never checks.
    let mut latin1 = review_of(&req("CREATE", &format!(r#","object":{},"x":"caf"#, obj(1))));
    latin1.extend_from_slice(b"\xe9\"}}");
    bodies.push((latin1, false));
    // And inside the object, which both refuse.
    let mut inside = review_of(&req("CREATE", r#","object":{"spec":{"image":"caf"#));
    inside.extend_from_slice(b"\xe9\"}}}}");
    bodies.push((inside, false));
    // The old object alone too deep for a one pass, or failing its typed decode, or
    // refused by the decode check, beside a good object.
    for (old, one_pass) in [
        (format!(r#"{{"spec":{{"extra":{}}}}}"#, deep(124)), false),
        (r#"{"spec":{"replicas":"x"}}"#.to_owned(), false),
        (obj(99), true),
    ] {
        let fields = format!(r#","object":{},"oldObject":{old}"#, obj(1));
        bodies.push((review_of(&req("UPDATE", &fields)), one_pass));
    }
    // Both objects failing: the object's error comes first.
    let fields = r#","object":{"spec":{"replicas":true}},"oldObject":{"spec":{"replicas":"x"}}"#;
    bodies.push((review_of(&req("UPDATE", fields)), false));
    bodies
}

/// A handler whose rules never read the old object (Kthena's) is not refused for one that
/// does not decode or fails the decode check, and its rules see none; one that reads it is.
#[test]
fn an_unread_old_object_is_never_typed() {
    struct IgnoresOld;
    impl Validator for IgnoresOld {
        type Object = Obj;
        fn validate(&self, req: &Request<Obj>, ctx: &Context) -> Verdict {
            assert!(req.old_object.is_none());
            NonNegative.validate(req, ctx)
        }
        fn check_decoded(&self, o: &Obj) -> Result<(), String> {
            NonNegative.check_decoded(o)
        }
        fn reads_old_object(&self) -> bool {
            false
        }
    }
    let ctx = Context::default();
    for old in [
        r#"{"spec":{"replicas":"x"}}"#,
        r#"{"spec":{"replicas":99}}"#,
        r#"{"spec":{"replicas":5}}"#,
    ] {
        let body = review_of(&format!(
            r#"{{"uid":"u","kind":{{"kind":"Obj"}},"operation":"UPDATE","object":{{"spec":{{"replicas":1}}}},"oldObject":{old}}}"#
        ));
        let a = Validating(IgnoresOld).review_bytes(&body, &ctx);
        assert!(a.as_ref().is_ok_and(|a| a.decision.allowed), "{old}: {a:?}");
        let b = Validating(NonNegative).review_bytes(&body, &ctx);
        assert!(
            !b.as_ref().is_ok_and(|a| a.decision.allowed),
            "{old}: {b:?}"
        );
    }
}

/// A validator decodes the envelope and its object in one pass; whatever the body, the
/// answer (or the error, word for word) is the one the raw decode followed by the typed one
/// gives, including the bodies that one pass refuses and the raw decode accepts.
#[test]
fn one_pass_decode_answers_as_the_raw_decode() {
    let v = Validating(NonNegative);
    let ctx = Context::default();
    let bodies = one_pass_bodies();
    for (body, one_pass) in &bodies {
        let text = String::from_utf8_lossy(body);
        assert_eq!(
            decode_in_one_pass::<Obj>(body, Reading::of_validator(&NonNegative)).is_some(),
            *one_pass && chosen(serde_json::from_slice::<ReviewIn>(body).unwrap()).is_ok(),
            "{text}"
        );
        let raw = envelope(body).and_then(|r| v.review(r, &ctx));
        assert_eq!(outcome(review_body(&v, body, &ctx)), outcome(raw), "{text}");
        let awaited = wait_for(review_body_async(&v, body, &ctx)).unwrap();
        let raw = envelope(body).and_then(|r| v.review(r, &ctx));
        assert_eq!(outcome(awaited), outcome(raw), "{text}");
    }
}

/// Raises `spec.replicas` to the old object's and fills in `spec.image`; denies a
/// negative count; refuses 99 replicas on decode.
struct Raise;

impl Mutator for Raise {
    type Object = Obj;

    fn mutate(&self, req: &Request<Obj>, obj: &mut Obj, _: &Context) -> Verdict {
        let mut errors = ErrorList::default();
        if obj.spec.replicas < 0 {
            let path = crate::review::field::Path::new("spec").child("replicas");
            errors.push(FieldError::invalid(
                "T-3",
                path,
                obj.spec.replicas,
                "negative",
            ));
        }
        if let Some(old) = &req.old_object {
            obj.spec.replicas = obj.spec.replicas.max(old.spec.replicas);
        }
        obj.spec.image.get_or_insert_with(|| "default".to_owned());
        errors.into()
    }

    fn check_decoded(&self, o: &Obj) -> Result<(), String> {
        NonNegative.check_decoded(o)
    }
}

/// A mutator types the old object in the pass over the body and keeps the object raw;
/// whatever the body, the answer (or the error, word for word) is the raw decode's.
#[test]
fn mutator_one_pass_decode_answers_as_the_raw_decode() {
    let m = Mutating(Raise);
    let ctx = Context::default();
    let mut taken = 0;
    for (body, _) in one_pass_bodies() {
        let text = String::from_utf8_lossy(&body);
        taken += usize::from(matches!(
            decode_old_in_one_pass::<Obj>(&body, Reading::of_mutator(&Raise)),
            Some(Ok((d, _))) if d.req.old_object.is_some()
        ));
        let raw = envelope(&body).and_then(|r| m.review(r, &ctx));
        assert_eq!(
            outcome(review_body(&m, &body, &ctx)),
            outcome(raw),
            "{text}"
        );
    }
    // The UPDATEs with a good old object (its decode check runs after the pass).
    assert_eq!(taken, 2);
    let patched = |body: &[u8]| {
        review_body(&m, body, &ctx)
            .unwrap()
            .review
            .response
            .patch
            .is_some()
    };
    let update = review_of(
        r#"{"uid":"u","operation":"UPDATE","object":{"spec":{"replicas":1,"image":"i"}},"oldObject":{"spec":{"replicas":4}}}"#,
    );
    assert!(patched(&update));
}

/// Refuses a Pod labelled `bad` and labels the others, its objects decoded with their
/// managed fields or (`MANAGED` false) without.
struct PodRule<const MANAGED: bool>;

impl<const MANAGED: bool> Validator for PodRule<MANAGED> {
    type Object = k8s_openapi::api::core::v1::Pod;

    fn reads_managed_fields(&self) -> bool {
        MANAGED
    }

    fn validate(&self, req: &Request<Self::Object>, _: &Context) -> Verdict {
        let bad = req
            .object
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key("bad"));
        if bad {
            Verdict::errored("T-1", 403, "bad")
        } else {
            Verdict::default()
        }
    }
}

impl<const MANAGED: bool> Mutator for PodRule<MANAGED> {
    type Object = k8s_openapi::api::core::v1::Pod;

    fn reads_managed_fields(&self) -> bool {
        MANAGED
    }

    fn mutate(
        &self,
        req: &Request<Self::Object>,
        obj: &mut Self::Object,
        ctx: &Context,
    ) -> Verdict {
        obj.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert("seen".into(), "yes".into());
        Validator::validate(self, req, ctx)
    }
}

/// A handler that does not read managed fields answers every review, good or
/// malformed managed fields, as one that reads them does, through every decode path, word
/// for word (errors included); its patches never touch them.
#[test]
fn objects_decoded_without_managed_fields_answer_as_with_them() {
    let ctx = Context::default();
    let entry = r#"{"manager":"kubelet","operation":"Update","apiVersion":"v1","time":"2026-11-27T09:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:status":{"f:phase":{}}}}"#;
    let managed = [
        entry.to_owned(),
        format!("[{entry},{entry}]"),
        "[]".into(),
        "null".into(),
        r#""x""#.into(),
        "[1]".into(),
        "[null]".into(),
        r#"[{"manager":7}]"#.into(),
        r#"[{"time":"yesterday"}]"#.into(),
        r#"[{"extra":1}]"#.into(),
        r#"[{"manager":"a","manager":"b"}]"#.into(),
    ];
    let pod = |labels: &str, managed: &str, spec: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p","labels":{labels},"managedFields":{managed}}},"spec":{spec}}}"#
        )
    };
    let spec = r#"{"containers":[{"name":"c","image":"i"}]}"#;
    let mut bodies = Vec::new();
    for m in &managed {
        // A `managedFields` that is not an array goes in a list as is.
        let m = if m.starts_with('{') {
            format!("[{m}]")
        } else {
            m.clone()
        };
        for labels in [r#"{"a":"b"}"#, r#"{"bad":""}"#, "null"] {
            for spec in [
                spec,
                r#"{"containers":[{"name":"c","image":"i","ports":null}]}"#,
            ] {
                let object = pod(labels, &m, spec);
                bodies.push(review_of(&format!(
                    r#"{{"uid":"u","kind":{{"kind":"Pod"}},"name":"p","operation":"CREATE","object":{object}}}"#
                )));
                bodies.push(review_of(&format!(
                    r#"{{"uid":"u","kind":{{"kind":"Pod"}},"name":"p","operation":"UPDATE","object":{object},"oldObject":{object}}}"#
                )));
            }
        }
    }
    let mut differed_from_full = 0;
    for body in &bodies {
        let text = String::from_utf8_lossy(body);
        let full = outcome(review_body(&Validating(PodRule::<true>), body, &ctx));
        let without = outcome(review_body(&Validating(PodRule::<false>), body, &ctx));
        assert_eq!(without, full, "{text}");
        let awaited = wait_for(review_body_async(&Validating(PodRule::<false>), body, &ctx));
        assert_eq!(outcome(awaited.unwrap()), full, "{text}");
        let full = outcome(review_body(&Mutating(PodRule::<true>), body, &ctx));
        let without = outcome(review_body(&Mutating(PodRule::<false>), body, &ctx));
        assert_eq!(without, full, "{text}");
        assert!(!without.contains("managedFields"), "{text}: {without}");
        differed_from_full += usize::from(
            decode_in_one_pass::<k8s_openapi::api::core::v1::Pod>(
                body,
                Reading::of_validator(&PodRule::<false>),
            )
            .is_none(),
        );
    }
    // Some bodies were judged by the full decode (the malformed and the unsure ones).
    assert!(differed_from_full > 0 && differed_from_full < bodies.len());
}

/// `null` items, fields and old objects' fields read as zero values, as every upstream's Go
/// decoder reads them, through every decode path.
#[test]
fn null_reads_as_zero_in_every_handler() {
    let ctx = Context::default();
    let create = review_of(
        r#"{"uid":"u","operation":"CREATE","object":{"spec":{"replicas":null,"items":[null,{"grace":"1s"}]}}}"#,
    );
    let update = review_of(
        r#"{"uid":"u","operation":"UPDATE","object":{"spec":{"replicas":-1,"items":[null]}},"oldObject":{"spec":{"items":[null],"replicas":null}}}"#,
    );
    // The mutator: the null item is a zero item; the patch holds only the edit.
    let a = review_body(&Mutating(Raise), &create, &ctx).unwrap();
    let patch = base64::engine::general_purpose::STANDARD
        .decode(a.review.response.patch.unwrap_or_default())
        .unwrap();
    assert_eq!(
        String::from_utf8(patch).unwrap(),
        r#"[{"op":"add","path":"/spec/image","value":"default"}]"#
    );
    let raw = envelope(&create).and_then(|r| Mutating(Raise).review(r, &ctx));
    assert_eq!(
        outcome(raw),
        outcome(review_body(&Mutating(Raise), &create, &ctx))
    );
    // The validator reads the object (and the old object) the same way and decides.
    let a = review_body(&Validating(NonNegative), &update, &ctx).unwrap();
    assert!(!a.review.response.allowed);
    let a = review_body(&Validating(NonNegative), &create, &ctx).unwrap();
    assert!(a.review.response.allowed);
    // What neither reading accepts fails with the strict decode's words, which say where...
    let wrong = review_of(
        r#"{"uid":"u","operation":"CREATE","object":{"spec":{"replicas":"x","items":[null]}}}"#,
    );
    let error = outcome(review_body(&Mutating(Raise), &wrong, &ctx));
    assert!(
        error.starts_with("error: cannot decode")
            && error.contains("string \"x\"")
            && error.contains("line 1"),
        "{error}"
    );
    // ...unless the strict decode stopped at a `null`: then the fault Go's reading meets.
    let wrong = review_of(
        r#"{"uid":"u","operation":"CREATE","object":{"spec":{"items":[null],"replicas":"x"}}}"#,
    );
    for error in [
        outcome(review_body(&Mutating(Raise), &wrong, &ctx)),
        outcome(review_body(&Validating(NonNegative), &wrong, &ctx)),
    ] {
        assert!(
            error.starts_with("error: cannot decode")
                && error.contains("string \"x\"")
                && !error.contains("null"),
            "{error}"
        );
    }
}

#[test]
fn wait_for_answers_at_once_when_nothing_waits() {
    // No runtime at all: a rule that does not wait never needs one.
    assert_eq!(wait_for(async { 5 }), Some(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_for_lends_the_worker_to_a_rule_that_waits() {
    let waits = async {
        tokio::task::yield_now().await;
        7
    };
    assert_eq!(wait_for(waits), Some(7));
}

#[tokio::test(flavor = "current_thread")]
async fn wait_for_never_blocks_a_single_threaded_runtime() {
    // Blocking its only thread would wait forever.
    assert_eq!(wait_for(tokio::task::yield_now()), None);
}

fn apply(raw: &str, patch: Option<Vec<u8>>) -> Value {
    let mut doc: Value = serde_json::from_str(raw).unwrap();
    if let Some(p) = patch {
        let p: Patch = serde_json::from_slice(&p).unwrap();
        json_patch::patch(&mut doc, &p).unwrap();
    }
    doc
}

/// The patch of an edit made through type `T`, and the raw object with it applied.
fn run_as<T: Serialize + serde::de::DeserializeOwned + Clone + 'static>(
    raw: &str,
    f: impl Fn(&mut T),
) -> (Option<Vec<u8>>, Value) {
    let rv = RawValue::from_string(raw.to_owned()).unwrap();
    let before: T = serde_json::from_str(raw).unwrap();
    let mut after = before.clone();
    f(&mut after);
    let p = typed_patch(
        &rv,
        &before,
        &after,
        crate::review::diff::EmptyAdds::Dropped,
    )
    .unwrap();
    (p.clone(), apply(raw, p))
}

fn run(raw: &str, f: impl Fn(&mut Obj)) -> (Option<Vec<u8>>, Value) {
    run_as(raw, f)
}

#[test]
fn unknown_fields_survive_a_mutation() {
    let raw = r#"{"metadata":{"labels":{"x":"y"}},"spec":{"replicas":1,"future":{"a":1},"items":[{"other":true}]}}"#;
    let (_, out) = run(raw, |o| o.spec.items[0].grace = Some("30s".into()));
    assert_eq!(out["spec"]["future"]["a"], 1);
    assert_eq!(out["metadata"]["labels"]["x"], "y");
    assert_eq!(out["spec"]["items"][0]["other"], true);
    assert_eq!(out["spec"]["items"][0]["grace"], "30s");
}

#[test]
fn no_change_no_patch() {
    let (p, _) = run(r#"{"spec":{"replicas":2}}"#, |_| {});
    assert!(p.is_none());
}

#[test]
fn parents_missing_in_the_raw_object_are_created() {
    // `spec` is absent in the raw object but the typed one serialises it.
    let (p, out) = run(r#"{"kind":"X"}"#, |o| o.spec.image = Some("img".into()));
    assert!(p.is_some());
    assert_eq!(out["spec"]["image"], "img");
    assert_eq!(out["kind"], "X");
}

#[test]
fn list_growth_and_shrink_apply() {
    let raw = r#"{"spec":{"items":[{"grace":"1s"},{"grace":"2s"}]}}"#;
    let (_, out) = run(raw, |o| {
        o.spec.items.remove(0);
    });
    assert_eq!(out["spec"]["items"], serde_json::json!([{"grace":"2s"}]));
    let (_, out) = run(raw, |o| o.spec.items.push(Item::default()));
    assert_eq!(out["spec"]["items"].as_array().unwrap().len(), 3);
}

/// Go's `omitempty` drops an emptied labels or annotations map, so the patch removes
/// the map; a map that was already empty is not touched.
#[test]
fn removing_the_last_annotation_removes_the_map() {
    let raw = r#"{"metadata":{"name":"n","annotations":{"a":"1"},"labels":{}}}"#;
    let (p, out) = run_as(raw, |v: &mut Value| {
        v["metadata"]["annotations"]
            .as_object_mut()
            .unwrap()
            .remove("a");
    });
    let ops: Value = serde_json::from_slice(&p.unwrap()).unwrap();
    assert_eq!(
        ops,
        serde_json::json!([{"op": "remove", "path": "/metadata/annotations"}])
    );
    assert_eq!(
        out,
        serde_json::json!({"metadata": {"name": "n", "labels": {}}})
    );
    // Not the last one: only that entry goes.
    let raw = r#"{"metadata":{"annotations":{"a":"1","b":"2"}}}"#;
    let (_, out) = run_as(raw, |v: &mut Value| {
        v["metadata"]["annotations"]
            .as_object_mut()
            .unwrap()
            .remove("a");
    });
    assert_eq!(
        out["metadata"]["annotations"],
        serde_json::json!({"b": "2"})
    );
}

/// An empty value added where the object had nothing (`resources: {}`) is not a
/// patch operation; the same add beside a real edit leaves only the real edit.
#[test]
fn adding_an_empty_value_is_not_a_patch_operation() {
    let raw = r#"{"spec":{"containers":[{"name":"a"}]}}"#;
    let rv = RawValue::from_string(raw.to_owned()).unwrap();
    let before: Value = serde_json::from_str(raw).unwrap();
    let mut after = before.clone();
    after["spec"]["containers"][0]["resources"] = serde_json::json!({"limits": {}});
    assert_eq!(
        typed_patch(
            &rv,
            &before,
            &after,
            crate::review::diff::EmptyAdds::Dropped
        )
        .unwrap(),
        None
    );
    after["spec"]["schedulerName"] = Value::String("s".into());
    let ops: Value = serde_json::from_slice(
        &typed_patch(
            &rv,
            &before,
            &after,
            crate::review::diff::EmptyAdds::Dropped,
        )
        .unwrap()
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        ops,
        serde_json::json!([{"op": "add", "path": "/spec/schedulerName", "value": "s"}])
    );
}
