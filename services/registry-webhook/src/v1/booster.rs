//! ModelBooster validation (`docs/spec/kthena-v1.md` §5, MB-1..MB-7) and its mutating endpoint
//! (§6, MB-8: answers without a change).

use admission_kit::review::field::BadValue;
use admission_kit::{
    Context, ErrorList, FieldError, Mutator, Path, Request, Status, Validator, Verdict,
};

use crate::denial;
use crate::model::{image_rule, worker_type_rules};
use crate::types::Obj;
use crate::v1::workload::ModelBoosterSpec;

/// A ModelBooster as the rules see it.
pub type BoosterObj = Obj<ModelBoosterSpec>;

const MAX_REPLICAS: i32 = 1_000_000;

fn backend() -> Path {
    Path::new("spec").child("backend")
}

/// MB-1: the backend's replicas are at most 1,000,000 (negative ones pass: the CRD refuses them).
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelBooster, metadata: {name: b}, spec: {backend: {name: main, type: vLLM, modelURI: "hf://x/y", replicas: 1000001, workers: [{type: server, image: vllm}]}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelBooster, metadata: {name: b}, spec: {backend: {name: main, type: vLLM, modelURI: "hf://x/y", replicas: 1, workers: [{type: server, image: vllm}]}}}`
fn mb_1_replicas(spec: &ModelBoosterSpec, errs: &mut ErrorList) {
    let r = spec.backend.replicas;
    if r > MAX_REPLICAS {
        errs.push(FieldError::invalid(
            "MB-1",
            backend().child("replicas"),
            r,
            format!("replicas ({r}) cannot exceed {MAX_REPLICAS}"),
        ));
    }
}

/// MB-2, MB-3: each worker image is not whitespace only and holds no ASCII space.
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelBooster, metadata: {name: b}, spec: {backend: {name: main, type: vLLM, modelURI: "hf://x/y", replicas: 1, workers: [{type: server, image: "vllm: latest"}]}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelBooster, metadata: {name: b}, spec: {backend: {name: main, type: vLLM, modelURI: "hf://x/y", replicas: 1, workers: [{type: server, image: vllm}]}}}`
fn mb_2_3_images(spec: &ModelBoosterSpec, errs: &mut ErrorList) {
    for (j, w) in spec.backend.workers.iter().enumerate() {
        image_rule(
            ["MB-2", "MB-3"],
            &w.image,
            || backend().child("workers").index(j).child("image"),
            errs,
        );
    }
}

/// MB-4..MB-7: the workers' types fit the backend type (the pinned MV-18..21 on one backend).
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelBooster, metadata: {name: b}, spec: {backend: {name: main, type: vLLM, modelURI: "hf://x/y", replicas: 1, workers: [{type: prefill, image: vllm}]}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelBooster, metadata: {name: b}, spec: {backend: {name: main, type: vLLM, modelURI: "hf://x/y", replicas: 1, workers: [{type: server, image: vllm}]}}}`
fn mb_4_7_worker_types(spec: &ModelBoosterSpec, errs: &mut ErrorList) {
    let b = &spec.backend;
    let types: Vec<&str> = b.workers.iter().map(|w| w.type_.as_str()).collect();
    worker_type_rules(
        ["MB-4", "MB-5", "MB-6", "MB-7"],
        BadValue::json_str,
        &b.type_,
        &types,
        &backend().child("workers"),
        errs,
    );
}

/// Every ModelBooster rule, in upstream's order.
pub fn validate_booster(spec: &ModelBoosterSpec) -> ErrorList {
    let mut errs = ErrorList::new();
    mb_1_replicas(spec, &mut errs);
    mb_2_3_images(spec, &mut errs);
    mb_4_7_worker_types(spec, &mut errs);
    errs
}

/// The quantities Go parses while decoding a ModelBooster (workers' resources, the backend's
/// environment divisors), refused as upstream's decoder refuses them (HX-05).
fn check_quantities(b: &BoosterObj) -> Result<(), String> {
    use admission_kit::compat::resources::{check_env, check_requirements};
    let backend = &b.spec.backend;
    check_env("env", backend.env.as_ref())
        .and_then(|()| {
            backend.workers.iter().enumerate().try_for_each(|(j, w)| {
                check_requirements("resources", w.resources.as_ref())
                    .map_err(|e| e.under(format_args!("workers[{j}]")))
            })
        })
        .map_err(|e| e.under("spec.backend").to_string())
}

/// `/validate/modelbooster`.
pub struct BoosterValidator;

impl Validator for BoosterValidator {
    type Object = BoosterObj;

    fn reads_old_object(&self) -> bool {
        false
    }

    fn check_decoded(&self, b: &BoosterObj) -> Result<(), String> {
        check_quantities(b)
    }

    fn validate(&self, req: &Request<BoosterObj>, _: &Context) -> Verdict {
        validate_booster(&req.object.spec).into()
    }

    fn denial(&self, _: &Request<BoosterObj>, errors: &[FieldError]) -> Status {
        denial(errors)
    }
}

/// `/mutate/modelbooster`: MB-8, upstream's defaulter sets nothing, so the answer carries no
/// patch; the decode still refuses what upstream's refuses.
pub struct BoosterDefaulter;

impl Mutator for BoosterDefaulter {
    type Object = BoosterObj;

    fn reads_old_object(&self) -> bool {
        false
    }

    fn check_decoded(&self, b: &BoosterObj) -> Result<(), String> {
        check_quantities(b)
    }

    fn mutate(&self, _: &Request<BoosterObj>, _: &mut BoosterObj, _: &Context) -> Verdict {
        Verdict::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(spec: serde_json::Value) -> Vec<String> {
        let spec: ModelBoosterSpec = serde_json::from_value(spec).unwrap();
        validate_booster(&spec)
            .iter()
            .map(|e| format!("{} {e}", e.rule))
            .collect()
    }

    fn backend(extra: serde_json::Value) -> serde_json::Value {
        let mut b = json!({"name": "b", "type": "vLLM", "modelURI": "hf://m", "replicas": 1,
                           "workers": [{"type": "server", "image": "img"}]});
        if let (Some(b), Some(x)) = (b.as_object_mut(), extra.as_object()) {
            b.extend(x.clone());
        }
        json!({ "backend": b })
    }

    #[test]
    fn valid_booster_passes() {
        assert!(rules(backend(json!({}))).is_empty());
    }

    #[test]
    fn mb_1_replicas_bound() {
        assert!(rules(backend(json!({"replicas": 1_000_000}))).is_empty());
        assert_eq!(
            rules(backend(json!({"replicas": 1_000_001}))),
            [
                "MB-1 spec.backend.replicas: Invalid value: 1000001: replicas (1000001) cannot exceed 1000000"
            ]
        );
    }

    #[test]
    fn mb_2_3_images() {
        let w = |img: &str| backend(json!({"workers": [{"type": "server", "image": img}]}));
        assert!(rules(w("")).is_empty());
        assert!(rules(w("a\tb")).is_empty());
        assert_eq!(
            rules(w("  ")),
            [
                "MB-2 spec.backend.workers[0].image: Invalid value: \"  \": invalid container image reference: image cannot be empty or whitespace only"
            ]
        );
        assert_eq!(
            rules(w("a b")),
            [
                "MB-3 spec.backend.workers[0].image: Invalid value: \"a b\": invalid container image reference: image cannot contain spaces"
            ]
        );
    }

    #[test]
    fn mb_4_to_7_worker_types() {
        assert_eq!(
            rules(backend(
                json!({"workers": [{"type": "server"}, {"type": "server"}]})
            )),
            [
                "MB-4 spec.backend.workers: Invalid value: 2: If backend type is 'vLLM', there must be exactly one worker"
            ]
        );
        assert_eq!(
            rules(backend(
                json!({"type": "SGLang", "workers": [{"type": "prefill"}]})
            )),
            [
                "MB-5 spec.backend.workers[0].type: Invalid value: \"prefill\": If backend type is 'SGLang', the worker type must be 'server'"
            ]
        );
        assert_eq!(
            rules(backend(
                json!({"type": "vLLMDisaggregated", "workers": [{"type": "prefill"}, {"type": "server"}]})
            )),
            [
                "MB-6 spec.backend.workers[1].type: Invalid value: \"server\": If backend type is 'vLLMDisaggregated', all workers must be type 'prefill' or 'decode'"
            ]
        );
        assert_eq!(
            rules(backend(
                json!({"type": "MindIEDisaggregated", "workers": [{"type": "coordinator"}, {}]})
            )),
            [
                "MB-7 spec.backend.workers[1].type: Invalid value: \"\": If backend type is 'MindIEDisaggregated', all workers must be type 'prefill', 'decode', 'controller', or 'coordinator' (not 'server')"
            ]
        );
    }
}
