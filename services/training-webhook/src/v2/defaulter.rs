//! The TrainJob defaulter (spec §3, TD-01): each runtime patch gets the time it last changed.
//!
//! controller-runtime answers with the difference between the request and the defaulted object
//! as Go re-encodes it, so when a time is set the patch also carries what Go's round trip adds
//! (always-written fields, canonical quantities, whole-second times: [`gojson::add_go_fields`]);
//! when nothing changes there is no patch at all.

use std::collections::HashMap;

use admission_kit::{Context, FieldError, Mutator, Operation, Request, Status, Verdict};
use serde_json::Value;

use super::denial;
use super::gojson::{self, RUNTIME_PATCH, TRAIN_JOB};
use super::types::TrainJob;

/// Now, at Go's precision: the system clock, or `--trainjob-clock`'s fixed time (fixtures).
fn now(clock: Option<jiff::Timestamp>) -> String {
    clock
        .unwrap_or_else(jiff::Timestamp::now)
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// A patch without its time, as upstream compares an updated patch with the stored one.
fn without_time(p: &Value) -> Value {
    let mut s = gojson::semantic(p, &RUNTIME_PATCH);
    if let Some(m) = s.as_object_mut() {
        m.remove("time");
    }
    s
}

fn has_time(p: &Value) -> bool {
    p.get("time").is_some_and(|t| !t.is_null())
}

/// TD-01: on create, a patch without a time gets now; on update, a patch of a manager that was
/// there before keeps the stored time when nothing else in it changed and gets now when
/// something did; a new manager's patch without a time gets now.
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: torch}, spec: {mlPolicy: {numNodes: 1, torch: {}}, template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// Mutated: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torch}, runtimePatches: [{manager: acme.io/tuner}]}}`
///
/// Admitted: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torch}}}`
pub fn td_01_patch_times(object: &mut Value, old: Option<&Value>, now: &str) -> bool {
    let Some(patches) = object
        .pointer_mut("/spec/runtimePatches")
        .and_then(Value::as_array_mut)
    else {
        return false;
    };
    let old_by_manager: HashMap<&str, &Value> = old
        .and_then(|o| o.pointer("/spec/runtimePatches"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|p| {
            (
                p.get("manager").and_then(Value::as_str).unwrap_or_default(),
                p,
            )
        })
        .collect();
    let mut changed = false;
    for p in patches.iter_mut() {
        // Go decodes a null patch as the zero patch.
        if p.is_null() {
            *p = Value::Object(serde_json::Map::new());
        }
        let manager = p.get("manager").and_then(Value::as_str).unwrap_or_default();
        let time = match (old, old_by_manager.get(manager)) {
            (Some(_), Some(prev)) => {
                if without_time(prev) == without_time(p) {
                    prev.get("time").cloned().unwrap_or(Value::Null)
                } else {
                    Value::String(now.to_owned())
                }
            }
            _ if has_time(p) => continue,
            _ => Value::String(now.to_owned()),
        };
        let Some(m) = p.as_object_mut() else { continue };
        let before = m.get("time").cloned().unwrap_or(Value::Null);
        // Compared as Go holds them: the same instant is no change.
        if gojson::semantic(&before, &gojson::TIME) != gojson::semantic(&time, &gojson::TIME) {
            changed = true;
        }
        if time.is_null() {
            m.remove("time");
        } else {
            m.insert("time".into(), time);
        }
    }
    changed
}

/// An object with an absent `metadata` or `spec` given Go's zero value for it.
fn with_zero_parts(mut v: Value) -> Value {
    if let Some(m) = v.as_object_mut() {
        for k in ["metadata", "spec"] {
            m.entry(k)
                .or_insert_with(|| Value::Object(serde_json::Map::new()));
        }
    }
    v
}

/// `/mutate-trainer-kubeflow-org-v1alpha1-trainjob`.
#[derive(Debug, Clone, Default)]
pub struct TrainJobDefaulter {
    /// `--trainjob-clock`: the time stamped instead of now.
    pub clock: Option<jiff::Timestamp>,
}

impl Mutator for TrainJobDefaulter {
    type Object = Value;

    /// Go's re-encoding writes empty struct values and nil pointers without `omitempty`
    /// (`metadata: {}`, `apiGroup: null`), and controller-runtime's patch carries them.
    fn keeps_empty_additions(&self) -> bool {
        true
    }

    fn mutate(&self, req: &Request<Value>, object: &mut Value, _: &Context) -> Verdict {
        use serde::Deserialize;
        // The object goes through controller-runtime's decoder (400 when it does not decode);
        // the stored one through the defaulter's own `json.Unmarshal` (an error it returns,
        // which controller-runtime sends as a 403 denial).
        if let Err(e) = super::check_decodes::<TrainJob>(object) {
            return Verdict::errored("TD-01", 400, e);
        }
        let old = match req.operation {
            Operation::Update => req.old_object.as_ref(),
            _ => None,
        };
        if let Some(o) = old
            && let Err(e) = gojson::go_decode_view(o, &TRAIN_JOB, "")
                .and_then(|v| TrainJob::deserialize(&with_zero_parts(v)).map_err(|e| e.to_string()))
        {
            return Verdict {
                refusal: Some(("TD-01", Status::failure(403, "Forbidden", e))),
                ..Verdict::default()
            };
        }
        if td_01_patch_times(object, old, &now(self.clock)) {
            gojson::add_go_fields(object, &TRAIN_JOB);
            return Verdict {
                applied: vec!["TD-01"],
                ..Verdict::default()
            };
        }
        // Nothing changed as Go compares: upstream sends no patch, even for a re-encoding.
        *object = req.object.clone();
        Verdict::default()
    }

    fn denial(&self, _: &Request<Value>, errors: &[FieldError]) -> Status {
        denial(errors)
    }
}
