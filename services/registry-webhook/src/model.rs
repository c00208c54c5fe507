//! Model validation (spec §5, MV-01..23) and defaulting (spec §6, MM-01..03).

use std::collections::HashSet;

use admission_kit::compat::go::GoDuration;
use admission_kit::review::field::BadValue;
use admission_kit::{
    Context, ErrorList, FieldError, Mutator, Path, Request, Status, Validator, Verdict,
};

use crate::denial;
use crate::types::{ModelBackend, ModelSpec, Obj};

/// A Model as the rules see it.
pub type ModelObj = Obj<ModelSpec>;

const MAX_GRACE_NANOS: i64 = 1800 * 1_000_000_000;
const MAX_REPLICAS_SUM: i64 = 1_000_000;

fn backends() -> Path {
    Path::new("spec").child("backends")
}

/// MV-01, MV-02: a backend's `scaleToZeroGracePeriod` lies within 0..=1800 s.
///
/// Refused: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {backends: [{name: main, type: vLLM, modelURI: "hf://x/y", minReplicas: 1, maxReplicas: 1, workers: [{type: server, image: vllm}], scaleToZeroGracePeriod: 1801s}]}}`
///
/// Refused: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {backends: [{name: main, type: vLLM, modelURI: "hf://x/y", minReplicas: 1, maxReplicas: 1, workers: [{type: server, image: vllm}], scaleToZeroGracePeriod: -1s}]}}`
fn mv_01_02_grace_period_range(spec: &ModelSpec, errs: &mut ErrorList) {
    for (i, b) in spec.backends.iter().enumerate() {
        let Some(g) = &b.scale_to_zero_grace_period else {
            continue;
        };
        // Paths are built only for an error: most reviews have none, and each segment allocates.
        let path = || backends().index(i).child("scaleToZeroGracePeriod");
        if g.nanos() > MAX_GRACE_NANOS {
            errs.push(FieldError::invalid(
                "MV-01",
                path(),
                g.canonical(),
                "scaleToZeroGracePeriod cannot exceed 1800 seconds",
            ));
        } else if g.nanos() < 0 {
            errs.push(FieldError::invalid(
                "MV-02",
                path(),
                g.canonical(),
                "scaleToZeroGracePeriod cannot be negative",
            ));
        }
    }
}

/// MV-03: `minReplicas` ≤ `maxReplicas` on every backend.
///
/// Refused: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {backends: [{name: main, type: vLLM, modelURI: "hf://x/y", minReplicas: 2, maxReplicas: 1, workers: [{type: server, image: vllm}]}]}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {backends: [{name: main, type: vLLM, modelURI: "hf://x/y", minReplicas: 1, maxReplicas: 1, workers: [{type: server, image: vllm}]}]}}`
fn mv_03_min_le_max(spec: &ModelSpec, errs: &mut ErrorList) {
    for (i, b) in spec.backends.iter().enumerate() {
        if b.min_replicas > b.max_replicas {
            errs.push(FieldError::invalid(
                "MV-03",
                backends().index(i).child("minReplicas"),
                b.min_replicas,
                "minReplicas cannot be greater than maxReplicas",
            ));
        }
    }
}

/// MV-04: Σ maxReplicas ≤ 1,000,000. Summed in 64 bits (FIX Q-07: upstream wraps in 32 bits).
///
/// Refused: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {backends: [{name: main, type: vLLM, modelURI: "hf://x/y", minReplicas: 1000001, maxReplicas: 1000001, workers: [{type: server, image: vllm}]}]}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {backends: [{name: main, type: vLLM, modelURI: "hf://x/y", minReplicas: 1000000, maxReplicas: 1000000, workers: [{type: server, image: vllm}]}]}}`
fn mv_04_max_replicas_sum(spec: &ModelSpec, errs: &mut ErrorList) {
    let sum: i64 = spec
        .backends
        .iter()
        .map(|b| i64::from(b.max_replicas))
        .sum();
    if sum > MAX_REPLICAS_SUM {
        errs.push(FieldError::invalid(
            "MV-04",
            backends(),
            sum,
            format!(
                "sum of maxReplicas across all backends ({sum}) cannot exceed {MAX_REPLICAS_SUM}"
            ),
        ));
    }
}

/// The two image checks Kthena applies to a worker or container image, pinned and v1.0 alike:
/// whitespace only (first id) or an ASCII space inside (second id). An empty image passes.
pub(crate) fn image_rule(
    ids: [&'static str; 2],
    img: &str,
    path: impl FnOnce() -> Path,
    errs: &mut ErrorList,
) {
    if img.is_empty() {
        return;
    }
    let (rule, why) = if img.chars().all(char::is_whitespace) {
        (ids[0], "image cannot be empty or whitespace only")
    } else if img.contains(' ') {
        (ids[1], "image cannot contain spaces")
    } else {
        return;
    };
    errs.push(FieldError::invalid(
        rule,
        path(),
        img,
        format!("invalid container image reference: {why}"),
    ));
}

/// MV-05, MV-06: a worker image is not whitespace only and has no ASCII space.
///
/// Refused: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {backends: [{name: main, type: vLLM, modelURI: "hf://x/y", minReplicas: 1, maxReplicas: 1, workers: [{type: server, image: "vllm/vllm-openai: v0.10.1"}]}]}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {backends: [{name: main, type: vLLM, modelURI: "hf://x/y", minReplicas: 1, maxReplicas: 1, workers: [{type: server, image: "vllm/vllm-openai:v0.10.1"}]}]}}`
fn mv_05_06_image(spec: &ModelSpec, errs: &mut ErrorList) {
    for (i, b) in spec.backends.iter().enumerate() {
        for (j, w) in b.workers.iter().enumerate() {
            image_rule(
                ["MV-05", "MV-06"],
                &w.image,
                || backends().index(i).child("workers").index(j).child("image"),
                errs,
            );
        }
    }
}

/// MV-07..MV-17: what each autoscaling scope requires (static, backend-level, model-level, both).
fn mv_07_17_autoscaling_scope(spec: &ModelSpec, errs: &mut ErrorList) {
    let model_level = spec.autoscaling_policy.is_some();
    let backend_level = spec.backends.iter().any(|b| b.autoscaling_policy.is_some());
    match (model_level, backend_level) {
        (true, true) => mv_17_not_both(errs),
        (false, _) => {
            for (i, b) in spec.backends.iter().enumerate() {
                mv_07_no_cost(i, b, errs);
                mv_08_no_grace_period(i, b, errs);
            }
            mv_09_no_cost_expansion_rate(spec, errs);
            for (i, b) in spec.backends.iter().enumerate() {
                mv_10_backend_autoscaling_min(i, b, errs);
            }
            if !backend_level {
                for (i, b) in spec.backends.iter().enumerate() {
                    mv_11_static_min_eq_max(i, b, errs);
                }
            }
        }
        (true, false) => {
            for (i, b) in spec.backends.iter().enumerate() {
                mv_12_min_non_negative(i, b, errs);
                mv_13_cost_required(i, b, errs);
                mv_14_grace_period_required(i, b, errs);
            }
            mv_15_min_sum(spec, errs);
            mv_16_cost_expansion_rate_required(spec, errs);
        }
    }
}

/// MV-07: no `scalingCost` without model-level autoscaling.
///
/// Refused: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {backends: [{name: main, type: vLLM, modelURI: "hf://x/y", workers: [{type: server, image: vllm}], minReplicas: 1, maxReplicas: 1, scalingCost: 5}]}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {backends: [{name: main, type: vLLM, modelURI: "hf://x/y", workers: [{type: server, image: vllm}], minReplicas: 1, maxReplicas: 1}]}}`
fn mv_07_no_cost(i: usize, b: &ModelBackend, errs: &mut ErrorList) {
    if b.scaling_cost != 0 {
        errs.push(FieldError::forbidden(
            "MV-07",
            backends().index(i).child("cost"),
            "cost must not be provided when model-level autoscaling is not set",
        ));
    }
}

/// MV-08: no `scaleToZeroGracePeriod` without model-level autoscaling.
///
/// Refused: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {backends: [{name: main, type: vLLM, modelURI: "hf://x/y", workers: [{type: server, image: vllm}], minReplicas: 1, maxReplicas: 1, scaleToZeroGracePeriod: 30s}]}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {backends: [{name: main, type: vLLM, modelURI: "hf://x/y", workers: [{type: server, image: vllm}], minReplicas: 1, maxReplicas: 1}]}}`
fn mv_08_no_grace_period(i: usize, b: &ModelBackend, errs: &mut ErrorList) {
    if b.scale_to_zero_grace_period.is_some() {
        errs.push(FieldError::forbidden(
            "MV-08",
            backends().index(i).child("scaleToZeroGracePeriod"),
            "scaleToZeroGracePeriod must not be provided when model-level autoscaling is not set",
        ));
    }
}

/// MV-09: no `costExpansionRatePercent` (any value) without model-level autoscaling.
///
/// Refused: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {costExpansionRatePercent: 0, backends: [{name: main, type: vLLM, modelURI: "hf://x/y", workers: [{type: server, image: vllm}], minReplicas: 1, maxReplicas: 1}]}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {backends: [{name: main, type: vLLM, modelURI: "hf://x/y", workers: [{type: server, image: vllm}], minReplicas: 1, maxReplicas: 1}]}}`
fn mv_09_no_cost_expansion_rate(spec: &ModelSpec, errs: &mut ErrorList) {
    if spec.cost_expansion_rate_percent.is_some() {
        errs.push(FieldError::forbidden(
            "MV-09",
            Path::new("spec").child("costExpansionRatePercent"),
            "costExpansionRatePercent must not be provided when model-level autoscaling is not set",
        ));
    }
}

/// MV-10: a backend with its own autoscaling needs `minReplicas` ≥ 1.
///
/// Refused: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {backends: [{name: main, type: vLLM, modelURI: "hf://x/y", workers: [{type: server, image: vllm}], minReplicas: 0, maxReplicas: 2, autoscalingPolicy: {metrics: [{metricName: load, targetValue: "1"}]}}]}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {backends: [{name: main, type: vLLM, modelURI: "hf://x/y", workers: [{type: server, image: vllm}], minReplicas: 1, maxReplicas: 2, autoscalingPolicy: {metrics: [{metricName: load, targetValue: "1"}]}}]}}`
fn mv_10_backend_autoscaling_min(i: usize, b: &ModelBackend, errs: &mut ErrorList) {
    if b.autoscaling_policy.is_some() && b.min_replicas < 1 {
        errs.push(FieldError::invalid(
            "MV-10",
            backends().index(i).child("minReplicas"),
            b.min_replicas,
            "minReplicas must be >= 1 when backend-level autoscaling is set",
        ));
    }
}

/// MV-11: without any autoscaling, `minReplicas` = `maxReplicas` (0 = 0 passes, Q-03).
///
/// Refused: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {backends: [{name: main, type: vLLM, modelURI: "hf://x/y", minReplicas: 1, maxReplicas: 2, workers: [{type: server, image: vllm}]}]}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {backends: [{name: main, type: vLLM, modelURI: "hf://x/y", minReplicas: 2, maxReplicas: 2, workers: [{type: server, image: vllm}]}]}}`
fn mv_11_static_min_eq_max(i: usize, b: &ModelBackend, errs: &mut ErrorList) {
    if b.min_replicas != b.max_replicas {
        errs.push(FieldError::invalid(
            "MV-11",
            backends().index(i),
            format!(
                "minReplicas={}, maxReplicas={}",
                b.min_replicas, b.max_replicas
            ),
            "minReplicas and maxReplicas must be equal and > 0 when no autoscaling is set",
        ));
    }
}

/// MV-12: with model-level autoscaling, `minReplicas` ≥ 0.
///
/// Refused: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {costExpansionRatePercent: 200, autoscalingPolicy: {metrics: [{metricName: load, targetValue: "1"}]}, backends: [{name: main, type: vLLM, modelURI: "hf://x/y", workers: [{type: server, image: vllm}], minReplicas: -1, maxReplicas: 2, scalingCost: 10, scaleToZeroGracePeriod: 30s}]}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {costExpansionRatePercent: 200, autoscalingPolicy: {metrics: [{metricName: load, targetValue: "1"}]}, backends: [{name: main, type: vLLM, modelURI: "hf://x/y", workers: [{type: server, image: vllm}], minReplicas: 1, maxReplicas: 2, scalingCost: 10, scaleToZeroGracePeriod: 30s}]}}`
fn mv_12_min_non_negative(i: usize, b: &ModelBackend, errs: &mut ErrorList) {
    if b.min_replicas < 0 {
        errs.push(FieldError::invalid(
            "MV-12",
            backends().index(i).child("minReplicas"),
            b.min_replicas,
            "minReplicas must be >= 0 when model-level autoscaling is set",
        ));
    }
}

/// MV-13: with model-level autoscaling, every backend has a non-zero `scalingCost`.
///
/// Refused: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {costExpansionRatePercent: 200, autoscalingPolicy: {metrics: [{metricName: load, targetValue: "1"}]}, backends: [{name: main, type: vLLM, modelURI: "hf://x/y", workers: [{type: server, image: vllm}], minReplicas: 1, maxReplicas: 2, scaleToZeroGracePeriod: 30s}]}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {costExpansionRatePercent: 200, autoscalingPolicy: {metrics: [{metricName: load, targetValue: "1"}]}, backends: [{name: main, type: vLLM, modelURI: "hf://x/y", workers: [{type: server, image: vllm}], minReplicas: 1, maxReplicas: 2, scalingCost: 10, scaleToZeroGracePeriod: 30s}]}}`
fn mv_13_cost_required(i: usize, b: &ModelBackend, errs: &mut ErrorList) {
    if b.scaling_cost == 0 {
        errs.push(FieldError::required(
            "MV-13",
            backends().index(i).child("cost"),
            "cost must be provided when model-level autoscaling is set",
        ));
    }
}

/// MV-14: with model-level autoscaling, every backend has a `scaleToZeroGracePeriod`.
///
/// Options: `--endpoint=/validate-registry-volcano-sh-v1alpha1-model`
///
/// Refused: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {costExpansionRatePercent: 200, autoscalingPolicy: {metrics: [{metricName: load, targetValue: "1"}]}, backends: [{name: main, type: vLLM, modelURI: "hf://x/y", workers: [{type: server, image: vllm}], minReplicas: 1, maxReplicas: 2, scalingCost: 10}]}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {costExpansionRatePercent: 200, autoscalingPolicy: {metrics: [{metricName: load, targetValue: "1"}]}, backends: [{name: main, type: vLLM, modelURI: "hf://x/y", workers: [{type: server, image: vllm}], minReplicas: 1, maxReplicas: 2, scalingCost: 10, scaleToZeroGracePeriod: 30s}]}}`
fn mv_14_grace_period_required(i: usize, b: &ModelBackend, errs: &mut ErrorList) {
    if b.scale_to_zero_grace_period.is_none() {
        errs.push(FieldError::required(
            "MV-14",
            backends().index(i).child("scaleToZeroGracePeriod"),
            "scaleToZeroGracePeriod must be provided when model-level autoscaling is set",
        ));
    }
}

/// MV-15: with model-level autoscaling, Σ minReplicas ≥ 1 (also with no backends, Q-20).
///
/// Refused: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {costExpansionRatePercent: 200, autoscalingPolicy: {metrics: [{metricName: load, targetValue: "1"}]}, backends: [{name: main, type: vLLM, modelURI: "hf://x/y", workers: [{type: server, image: vllm}], minReplicas: 0, maxReplicas: 2, scalingCost: 10, scaleToZeroGracePeriod: 30s}]}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {costExpansionRatePercent: 200, autoscalingPolicy: {metrics: [{metricName: load, targetValue: "1"}]}, backends: [{name: main, type: vLLM, modelURI: "hf://x/y", workers: [{type: server, image: vllm}], minReplicas: 1, maxReplicas: 2, scalingCost: 10, scaleToZeroGracePeriod: 30s}]}}`
fn mv_15_min_sum(spec: &ModelSpec, errs: &mut ErrorList) {
    let sum: i64 = spec
        .backends
        .iter()
        .map(|b| i64::from(b.min_replicas))
        .sum();
    if sum < 1 {
        errs.push(FieldError::invalid(
            "MV-15",
            backends(),
            sum,
            "sum of all minReplicas must be >= 1 when model-level autoscaling is set",
        ));
    }
}

/// MV-16: with model-level autoscaling, `costExpansionRatePercent` is present (0 passes, Q-04).
///
/// Options: `--endpoint=/validate-registry-volcano-sh-v1alpha1-model`
///
/// Refused: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {autoscalingPolicy: {metrics: [{metricName: load, targetValue: "1"}]}, backends: [{name: main, type: vLLM, modelURI: "hf://x/y", workers: [{type: server, image: vllm}], minReplicas: 1, maxReplicas: 2, scalingCost: 10, scaleToZeroGracePeriod: 30s}]}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {costExpansionRatePercent: 200, autoscalingPolicy: {metrics: [{metricName: load, targetValue: "1"}]}, backends: [{name: main, type: vLLM, modelURI: "hf://x/y", workers: [{type: server, image: vllm}], minReplicas: 1, maxReplicas: 2, scalingCost: 10, scaleToZeroGracePeriod: 30s}]}}`
fn mv_16_cost_expansion_rate_required(spec: &ModelSpec, errs: &mut ErrorList) {
    if spec.cost_expansion_rate_percent.is_none() {
        errs.push(FieldError::required(
            "MV-16",
            Path::new("spec").child("costExpansionRatePercent"),
            "costExpansionRatePercent must be provided and > 0 when model-level autoscaling is set",
        ));
    }
}

/// MV-17: model-level and backend-level autoscaling exclude each other (path as upstream, Q-02).
///
/// Refused: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {costExpansionRatePercent: 200, autoscalingPolicy: {metrics: [{metricName: load, targetValue: "1"}]}, backends: [{name: main, type: vLLM, modelURI: "hf://x/y", workers: [{type: server, image: vllm}], minReplicas: 1, maxReplicas: 2, scalingCost: 10, scaleToZeroGracePeriod: 30s, autoscalingPolicy: {metrics: [{metricName: load, targetValue: "1"}]}}]}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {costExpansionRatePercent: 200, autoscalingPolicy: {metrics: [{metricName: load, targetValue: "1"}]}, backends: [{name: main, type: vLLM, modelURI: "hf://x/y", workers: [{type: server, image: vllm}], minReplicas: 1, maxReplicas: 2, scalingCost: 10, scaleToZeroGracePeriod: 30s}]}}`
fn mv_17_not_both(errs: &mut ErrorList) {
    errs.push(FieldError::forbidden(
        "MV-17",
        Path::new("spec").child("autoscalingPolicyRef"),
        "spec.autoscalingPolicyRef and spec.backends[].autoscalingPolicyRef cannot both be set; \
         choose model-level or backend-level autoscaling, not both",
    ));
}

/// MV-18..MV-21: worker count and worker types per backend type.
///
/// Refused: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {backends: [{name: main, type: vLLM, modelURI: "hf://x/y", minReplicas: 1, maxReplicas: 1, workers: [{type: prefill, image: vllm}]}]}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {backends: [{name: main, type: vLLM, modelURI: "hf://x/y", minReplicas: 1, maxReplicas: 1, workers: [{type: server, image: vllm}]}]}}`
fn mv_18_21_worker_types(spec: &ModelSpec, errs: &mut ErrorList) {
    for (i, b) in spec.backends.iter().enumerate() {
        let types: Vec<&str> = b.workers.iter().map(|w| w.type_.as_str()).collect();
        worker_type_rules(
            ["MV-18", "MV-19", "MV-20", "MV-21"],
            |s| BadValue::Str(s.to_owned()),
            &b.type_,
            &types,
            &backends().index(i).child("workers"),
            errs,
        );
    }
}

/// What a backend type requires of its workers' types, pinned and v1.0 alike: exactly one
/// `server` worker (ids 0, 1), only prefill/decode (id 2), no `server` in MindIE's
/// disaggregated form (id 3). `quote` prints a type as that release's apimachinery does.
pub(crate) fn worker_type_rules(
    ids: [&'static str; 4],
    quote: fn(&str) -> BadValue,
    backend_type: &str,
    types: &[&str],
    workers: &Path,
    errs: &mut ErrorList,
) {
    let t = backend_type;
    match t {
        "vLLM" | "SGLang" | "MindIE" => {
            if types.len() != 1 {
                errs.push(FieldError::invalid(
                    ids[0],
                    workers.clone(),
                    types.len(),
                    format!("If backend type is '{t}', there must be exactly one worker"),
                ));
            } else if types[0] != "server" {
                errs.push(FieldError::invalid(
                    ids[1],
                    workers.index(0).child("type"),
                    quote(types[0]),
                    format!("If backend type is '{t}', the worker type must be 'server'"),
                ));
            }
        }
        "vLLMDisaggregated" => {
            for (j, w) in types.iter().enumerate() {
                if !matches!(*w, "prefill" | "decode") {
                    errs.push(FieldError::invalid(
                        ids[2],
                        workers.index(j).child("type"),
                        quote(w),
                        "If backend type is 'vLLMDisaggregated', all workers must be type 'prefill' or 'decode'",
                    ));
                }
            }
        }
        "MindIEDisaggregated" => {
            for (j, w) in types.iter().enumerate() {
                if !matches!(*w, "prefill" | "decode" | "controller" | "coordinator") {
                    errs.push(FieldError::invalid(
                        ids[3],
                        workers.index(j).child("type"),
                        quote(w),
                        "If backend type is 'MindIEDisaggregated', all workers must be type 'prefill', \
                         'decode', 'controller', or 'coordinator' (not 'server')",
                    ));
                }
            }
        }
        _ => {}
    }
}

/// MV-22, MV-23: a LoRA adapter name differs from the Model's `metadata.name` and is
/// unique within its backend.
///
/// Refused: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {backends: [{name: main, type: vLLM, modelURI: "hf://x/y", minReplicas: 1, maxReplicas: 1, workers: [{type: server, image: vllm}], loraAdapters: [{name: m, artifactURL: "hf://a/b"}]}]}}`
///
/// Refused: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {backends: [{name: main, type: vLLM, modelURI: "hf://x/y", minReplicas: 1, maxReplicas: 1, workers: [{type: server, image: vllm}], loraAdapters: [{name: a, artifactURL: "hf://a/b"}, {name: a, artifactURL: "hf://a/c"}]}]}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {backends: [{name: main, type: vLLM, modelURI: "hf://x/y", minReplicas: 1, maxReplicas: 1, workers: [{type: server, image: vllm}], loraAdapters: [{name: a, artifactURL: "hf://a/b"}]}]}}`
fn mv_22_23_lora_names(model: &ModelObj, errs: &mut ErrorList) {
    let model_name = model.metadata.name.as_deref().unwrap_or_default();
    for (i, b) in model.spec.backends.iter().enumerate() {
        let mut seen = HashSet::new();
        for (j, l) in b.lora_adapters.iter().flatten().enumerate() {
            let path = || {
                backends()
                    .index(i)
                    .child("loraAdapters")
                    .index(j)
                    .child("name")
            };
            if l.name == model_name {
                errs.push(FieldError::invalid(
                    "MV-22",
                    path(),
                    l.name.as_str(),
                    "lora name cannot be the same as model name",
                ));
            }
            if !seen.insert(l.name.as_str()) {
                errs.push(FieldError::invalid(
                    "MV-23",
                    path(),
                    l.name.as_str(),
                    "lora name must be unique within the backend",
                ));
            }
        }
    }
}

/// Every Model rule, in the spec's order (§5).
pub fn validate_model(model: &ModelObj) -> ErrorList {
    let mut errs = ErrorList::new();
    let spec = &model.spec;
    mv_01_02_grace_period_range(spec, &mut errs);
    mv_03_min_le_max(spec, &mut errs);
    mv_04_max_replicas_sum(spec, &mut errs);
    mv_05_06_image(spec, &mut errs);
    mv_07_17_autoscaling_scope(spec, &mut errs);
    mv_18_21_worker_types(spec, &mut errs);
    mv_22_23_lora_names(model, &mut errs);
    errs
}

/// The quantities `encoding/json` parses while decoding a Model (each worker's resources,
/// each backend's environment divisors), refused as Kthena's decoder refuses them (HX-05).
fn check_quantities(model: &ModelObj) -> Result<(), String> {
    use admission_kit::compat::resources::{check_env, check_requirements};
    for (i, b) in model.spec.backends.iter().enumerate() {
        check_env("env", b.env.as_ref())
            .and_then(|()| {
                b.workers.iter().enumerate().try_for_each(|(j, w)| {
                    check_requirements("resources", w.resources.as_ref())
                        .map_err(|e| e.under(format_args!("workers[{j}]")))
                })
            })
            .map_err(|e| e.under(format_args!("spec.backends[{i}]")).to_string())?;
    }
    Ok(())
}

/// `/validate-registry-volcano-sh-v1alpha1-model`.
pub struct ModelValidator;

impl Validator for ModelValidator {
    type Object = ModelObj;

    fn reads_old_object(&self) -> bool {
        false
    }

    fn check_decoded(&self, model: &ModelObj) -> Result<(), String> {
        check_quantities(model)
    }

    fn validate(&self, req: &Request<ModelObj>, _: &Context) -> Verdict {
        validate_model(&req.object).into()
    }

    fn denial(&self, _: &Request<ModelObj>, errors: &[FieldError]) -> Status {
        denial(errors)
    }
}

/// MM-01, MM-02 (MM-03: nothing without model-level autoscaling). Returns the ids that acted.
///
/// MM-01: with model-level autoscaling, a backend without `scaleToZeroGracePeriod` gets 30 s.
///
/// Mutated: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {costExpansionRatePercent: 200, autoscalingPolicy: {metrics: [{metricName: load, targetValue: "1"}]}, backends: [{name: main, type: vLLM, modelURI: "hf://x/y", workers: [{type: server, image: vllm}], minReplicas: 1, maxReplicas: 2, scalingCost: 10}]}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {costExpansionRatePercent: 200, autoscalingPolicy: {metrics: [{metricName: load, targetValue: "1"}]}, backends: [{name: main, type: vLLM, modelURI: "hf://x/y", workers: [{type: server, image: vllm}], minReplicas: 1, maxReplicas: 2, scalingCost: 10, scaleToZeroGracePeriod: 30s}]}}`
///
/// MM-02: with model-level autoscaling, a missing `costExpansionRatePercent` becomes 200.
///
/// Mutated: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {autoscalingPolicy: {metrics: [{metricName: load, targetValue: "1"}]}, backends: [{name: main, type: vLLM, modelURI: "hf://x/y", workers: [{type: server, image: vllm}], minReplicas: 1, maxReplicas: 2, scalingCost: 10, scaleToZeroGracePeriod: 30s}]}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: Model, metadata: {name: m}, spec: {costExpansionRatePercent: 200, autoscalingPolicy: {metrics: [{metricName: load, targetValue: "1"}]}, backends: [{name: main, type: vLLM, modelURI: "hf://x/y", workers: [{type: server, image: vllm}], minReplicas: 1, maxReplicas: 2, scalingCost: 10, scaleToZeroGracePeriod: 30s}]}}`
pub fn default_model(spec: &mut ModelSpec) -> Vec<&'static str> {
    let mut applied = Vec::new();
    if spec.autoscaling_policy.is_none() {
        return applied;
    }
    for b in &mut spec.backends {
        if b.scale_to_zero_grace_period.is_none() {
            b.scale_to_zero_grace_period = Some(GoDuration::from_nanos(30_000_000_000));
            if !applied.contains(&"MM-01") {
                applied.push("MM-01");
            }
        }
    }
    if spec.cost_expansion_rate_percent.is_none() {
        spec.cost_expansion_rate_percent = Some(200);
        applied.push("MM-02");
    }
    applied
}

/// `/mutate-registry-volcano-sh-v1alpha1-model`.
pub struct ModelDefaulter;

impl Mutator for ModelDefaulter {
    type Object = ModelObj;

    fn reads_old_object(&self) -> bool {
        false
    }

    fn check_decoded(&self, model: &ModelObj) -> Result<(), String> {
        check_quantities(model)
    }

    fn mutate(&self, _: &Request<ModelObj>, model: &mut ModelObj, _: &Context) -> Verdict {
        Verdict {
            applied: default_model(&mut model.spec),
            ..Verdict::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn model(spec: serde_json::Value) -> ModelObj {
        serde_json::from_value(json!({"metadata": {"name": "m"}, "spec": spec})).unwrap()
    }

    fn backend(extra: serde_json::Value) -> serde_json::Value {
        let mut b = json!({"name": "b", "type": "vLLM", "modelURI": "hf://x", "minReplicas": 1,
                           "maxReplicas": 1, "workers": [{"type": "server", "image": "img"}]});
        if let (Some(b), Some(e)) = (b.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                b.insert(k.clone(), v.clone());
            }
        }
        b
    }

    fn rules(spec: serde_json::Value) -> Vec<String> {
        validate_model(&model(spec))
            .iter()
            .map(|e| format!("{} {}", e.rule, e))
            .collect()
    }

    fn policy() -> serde_json::Value {
        json!({"metrics": [{"metricName": "m", "targetValue": 1}]})
    }

    #[test]
    fn static_valid_model_passes() {
        assert!(rules(json!({"backends": [backend(json!({}))]})).is_empty());
    }

    #[test]
    fn mv_01_grace_over_1800s() {
        let s = json!({"autoscalingPolicy": policy(), "costExpansionRatePercent": 1,
                       "backends": [backend(json!({"scalingCost": 1, "scaleToZeroGracePeriod": "1801s"}))]});
        assert_eq!(
            rules(s),
            [
                "MV-01 spec.backends[0].scaleToZeroGracePeriod: Invalid value: \"30m1s\": scaleToZeroGracePeriod cannot exceed 1800 seconds"
            ]
        );
        let ok = json!({"autoscalingPolicy": policy(), "costExpansionRatePercent": 1,
                       "backends": [backend(json!({"scalingCost": 1, "scaleToZeroGracePeriod": "30m"}))]});
        assert!(rules(ok).is_empty());
    }

    #[test]
    fn mv_02_grace_negative() {
        let s = json!({"autoscalingPolicy": policy(), "costExpansionRatePercent": 1,
                       "backends": [backend(json!({"scalingCost": 1, "scaleToZeroGracePeriod": "-1s"}))]});
        assert_eq!(
            rules(s),
            [
                "MV-02 spec.backends[0].scaleToZeroGracePeriod: Invalid value: \"-1s\": scaleToZeroGracePeriod cannot be negative"
            ]
        );
    }

    #[test]
    fn mv_03_and_mv_11_both_fire_for_static_min_over_max() {
        let r = rules(json!({"backends": [backend(json!({"minReplicas": 3, "maxReplicas": 2}))]}));
        assert_eq!(r.len(), 2);
        assert!(r[0].starts_with("MV-03 spec.backends[0].minReplicas: Invalid value: 3"));
        assert!(r[1].starts_with(
            "MV-11 spec.backends[0]: Invalid value: \"minReplicas=3, maxReplicas=2\""
        ));
    }

    #[test]
    fn mv_04_max_sum_bound_and_no_wrap() {
        let b = |n: i32| backend(json!({"minReplicas": n, "maxReplicas": n}));
        assert!(rules(json!({"backends": [b(500_000), b(500_000)]})).is_empty());
        let r = rules(json!({"backends": [b(500_000), b(500_001)]}));
        assert_eq!(
            r,
            [
                "MV-04 spec.backends: Invalid value: 1000001: sum of maxReplicas across all backends (1000001) cannot exceed 1000000"
            ]
        );
        // Q-07 FIX: 2 × i32::MAX does not wrap to a negative sum.
        let r = rules(json!({"backends": [b(i32::MAX), b(i32::MAX)]}));
        assert!(r.iter().any(|e| e.starts_with("MV-04")), "{r:?}");
    }

    #[test]
    fn mv_05_06_images() {
        let w = |img: &str| backend(json!({"workers": [{"type": "server", "image": img}]}));
        assert_eq!(
            rules(json!({"backends": [w(" \t")]}))[0].split(' ').next(),
            Some("MV-05")
        );
        assert_eq!(
            rules(json!({"backends": [w("a b")]})),
            [
                "MV-06 spec.backends[0].workers[0].image: Invalid value: \"a b\": invalid container image reference: image cannot contain spaces"
            ]
        );
        assert!(rules(json!({"backends": [w("")]})).is_empty());
        assert!(
            rules(json!({"backends": [w("a\tb")]})).is_empty(),
            "Q-06: tabs pass"
        );
    }

    #[test]
    fn mv_07_08_09_static_forbids_autoscaling_fields() {
        let r = rules(json!({"costExpansionRatePercent": 0,
            "backends": [backend(json!({"scalingCost": 5, "scaleToZeroGracePeriod": "10s"}))]}));
        let ids: Vec<&str> = r.iter().map(|e| &e[..5]).collect();
        assert_eq!(ids, ["MV-07", "MV-08", "MV-09"]);
        assert!(r[0].contains("spec.backends[0].cost: Forbidden"));
    }

    #[test]
    fn mv_10_backend_autoscaling_needs_min_1_and_q09_exempts_others() {
        let r = rules(json!({"backends": [
            backend(json!({"minReplicas": 0, "maxReplicas": 3, "autoscalingPolicy": policy()})),
            backend(json!({"minReplicas": 1, "maxReplicas": 5}))]}));
        assert_eq!(
            r,
            [
                "MV-10 spec.backends[0].minReplicas: Invalid value: 0: minReplicas must be >= 1 when backend-level autoscaling is set"
            ]
        );
    }

    #[test]
    fn mv_11_static_min_ne_max() {
        let r = rules(json!({"backends": [backend(json!({"minReplicas": 1, "maxReplicas": 3}))]}));
        assert_eq!(
            r,
            [
                "MV-11 spec.backends[0]: Invalid value: \"minReplicas=1, maxReplicas=3\": minReplicas and maxReplicas must be equal and > 0 when no autoscaling is set"
            ]
        );
        assert!(
            rules(json!({"backends": [backend(json!({"minReplicas": 0, "maxReplicas": 0}))]}))
                .is_empty(),
            "Q-03"
        );
    }

    #[test]
    fn mv_12_to_16_model_level_requirements() {
        let r = rules(json!({"autoscalingPolicy": policy(),
            "backends": [backend(json!({"minReplicas": -1, "maxReplicas": 1}))]}));
        let ids: Vec<&str> = r.iter().map(|e| &e[..5]).collect();
        assert_eq!(ids, ["MV-12", "MV-13", "MV-14", "MV-15", "MV-16"]);
        assert!(r[1].contains("spec.backends[0].cost: Required value: cost must be provided"));
        assert!(r[4].contains("spec.costExpansionRatePercent: Required value"));
    }

    #[test]
    fn mv_15_fires_with_no_backends() {
        let r = rules(
            json!({"autoscalingPolicy": policy(), "costExpansionRatePercent": 0, "backends": []}),
        );
        assert_eq!(
            r,
            [
                "MV-15 spec.backends: Invalid value: 0: sum of all minReplicas must be >= 1 when model-level autoscaling is set"
            ]
        );
    }

    #[test]
    fn mv_17_both_levels_only_that_error() {
        let r = rules(json!({"autoscalingPolicy": policy(),
            "backends": [backend(json!({"autoscalingPolicy": policy(), "minReplicas": 0})),
                         backend(json!({"autoscalingPolicy": policy()}))]}));
        assert_eq!(r.len(), 1);
        assert!(r[0].starts_with("MV-17 spec.autoscalingPolicyRef: Forbidden"));
    }

    #[test]
    fn mv_18_19_single_worker_backends() {
        let r = rules(json!({"backends": [backend(json!({"type": "SGLang",
            "workers": [{"type": "server"}, {"type": "server"}]}))]}));
        assert_eq!(
            r,
            [
                "MV-18 spec.backends[0].workers: Invalid value: 2: If backend type is 'SGLang', there must be exactly one worker"
            ]
        );
        let r = rules(json!({"backends": [backend(json!({"type": "MindIE", "workers": [{}]}))]}));
        assert_eq!(
            r,
            [
                "MV-19 spec.backends[0].workers[0].type: Invalid value: \"\": If backend type is 'MindIE', the worker type must be 'server'"
            ]
        );
    }

    #[test]
    fn mv_20_21_disaggregated_worker_types() {
        let r = rules(
            json!({"backends": [backend(json!({"type": "vLLMDisaggregated",
            "workers": [{"type": "prefill"}, {"type": "server"}]}))]}),
        );
        assert_eq!(r.len(), 1);
        assert!(
            r[0].starts_with("MV-20 spec.backends[0].workers[1].type: Invalid value: \"server\"")
        );
        let r = rules(
            json!({"backends": [backend(json!({"type": "MindIEDisaggregated",
            "workers": [{"type": "controller"}, {"type": "coordinator"}, {"type": "server"}]}))]}),
        );
        assert_eq!(r.len(), 1);
        assert!(r[0].starts_with("MV-21 spec.backends[0].workers[2].type"));
    }

    #[test]
    fn mv_22_23_lora_names() {
        let l = |n: &str| json!({"name": n, "artifactURL": "hf://a"});
        let r = rules(json!({"backends": [
            backend(json!({"loraAdapters": [l("m"), l("a"), l("a")]})),
            backend(json!({"loraAdapters": [l("a")]}))]}));
        assert_eq!(
            r,
            [
                "MV-22 spec.backends[0].loraAdapters[0].name: Invalid value: \"m\": lora name cannot be the same as model name",
                "MV-23 spec.backends[0].loraAdapters[2].name: Invalid value: \"a\": lora name must be unique within the backend",
            ]
        );
    }

    #[test]
    fn mm_01_02_defaults_with_model_level_policy() {
        let mut m = model(json!({"autoscalingPolicy": {},
            "backends": [backend(json!({})), backend(json!({"scaleToZeroGracePeriod": "0.5m"}))]}));
        assert_eq!(default_model(&mut m.spec), ["MM-01", "MM-02"]);
        let g: Vec<&str> = m
            .spec
            .backends
            .iter()
            .map(|b| b.scale_to_zero_grace_period.as_ref().unwrap().text())
            .collect();
        assert_eq!(g, ["30s", "0.5m"]);
        assert_eq!(m.spec.cost_expansion_rate_percent, Some(200));
    }

    #[test]
    fn mm_03_nothing_without_model_level_policy() {
        let mut m = model(json!({"backends": [backend(json!({"autoscalingPolicy": policy()}))]}));
        let before = m.clone();
        assert!(default_model(&mut m.spec).is_empty());
        assert_eq!(m, before);
    }

    /// A worker quantity `ParseQuantity` rejects fails Kthena's decode (HX-05), answered
    /// with its plain-text 400; one it accepts is admitted.
    #[test]
    fn an_unparsable_worker_quantity_fails_the_decode() {
        let review = |cpu: &str| {
            let mut b = backend(json!({}));
            b["workers"][0]["resources"] = json!({"limits": {"cpu": cpu}});
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                   "request": {"uid": "u", "operation": "CREATE",
                               "object": {"metadata": {"name": "m"}, "spec": {"backends": [b]}}}})
        };
        let app = crate::app();
        for path in [
            "/validate-registry-volcano-sh-v1alpha1-model",
            "/mutate-registry-volcano-sh-v1alpha1-model",
        ] {
            let e = admission_testing::fixtures::answer_in_process(&app, path, &review("abc"), &[])
                .unwrap_err();
            assert!(
                e.starts_with("HTTP 400: failed to decode object: quantities must match the regular expression"),
                "{path}: {e}"
            );
            assert!(
                e.contains("spec.backends[0].workers[0].resources.limits.cpu"),
                "{e}"
            );
            let e = admission_testing::fixtures::answer_in_process(&app, path, &review("2 "), &[]);
            assert_eq!(
                e.map(|a| a["response"]["allowed"].clone()),
                Ok(json!(true)),
                "{path}"
            );
        }
    }
}
