//! AutoscalingPolicy validation (spec §7, PV-01..08) and defaulting (spec §8, PM-01..07).

use std::collections::HashSet;

use admission_kit::compat::go::GoDuration;
use admission_kit::{
    Context, ErrorList, FieldError, Mutator, Path, Request, Status, Validator, Verdict,
};

use crate::denial;
use crate::types::{
    AutoscalingPolicyBehavior, AutoscalingPolicySpec, Obj, PanicPolicy, ScaleUpPolicy, StablePolicy,
};

/// An AutoscalingPolicy as the rules see it.
pub type PolicyObj = Obj<AutoscalingPolicySpec>;

const THIRTY_MINUTES: i64 = 30 * 60 * 1_000_000_000;

/// PV-01, PV-02: each metric's target is > 0 and finite; names are unique.
///
/// Refused: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{metricName: m, targetValue: "0"}]}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{metricName: m, targetValue: "10"}]}}`
fn pv_01_02_metrics(spec: &AutoscalingPolicySpec, errs: &mut ErrorList) {
    let metrics = Path::new("spec").child("metrics");
    let mut seen = HashSet::new();
    for (i, m) in spec.metrics.iter().enumerate() {
        if !target_ok(&m.target_value) {
            // FIX Q-11: the quantity as written, not a Go struct dump.
            errs.push(FieldError::invalid(
                "PV-01",
                metrics.index(i).child("targetValue"),
                admission_kit::review::field::BadValue::from(&m.target_value),
                "metric target value must be greater than 0 and not equal to infinity",
            ));
        }
        if !seen.insert(m.metric_name.as_str()) {
            errs.push(FieldError::invalid(
                "PV-02",
                metrics.index(i).child("metricName"),
                m.metric_name.as_str(),
                format!("duplicate metric name {} is not allowed", m.metric_name),
            ));
        }
    }
}

/// A metric target is above zero and finite (PV-01; v1.0's metric rules alike).
pub(crate) fn target_ok(q: &admission_kit::compat::go::Quantity) -> bool {
    let v = q.value();
    !(v.is_zero() || v.negative || !v.to_f64().is_finite())
}

/// A duration out of 0..=30m, as a field error (FIX Q-21: Go duration text, quoted).
fn out_of_range(
    rule: &'static str,
    d: &GoDuration,
    path: Path,
    detail: &str,
    errs: &mut ErrorList,
) {
    if d.nanos() < 0 || d.nanos() > THIRTY_MINUTES {
        errs.push(FieldError::invalid(rule, path, d.canonical(), detail));
    }
}

const STABLE_PERIOD: &str = "stable policy period must be between 0 and 30 minutes";
const STABLE_WINDOW: &str = "stable policy stabilization window must be between 0 and 30 minutes";

/// PV-03, PV-04: scale-down period and stabilization window within 0..=30m.
///
/// Refused: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{metricName: m, targetValue: "10"}], behavior: {scaleDown: {period: 31m}}}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{metricName: m, targetValue: "10"}], behavior: {scaleDown: {period: 5m}}}}`
fn pv_03_04_scale_down(
    b: &AutoscalingPolicyBehavior,
    ids: &[&'static str; 6],
    errs: &mut ErrorList,
) {
    let Some(sd) = &b.scale_down else { return };
    let path = Path::new("spec").child("behavior").child("scaleDown");
    if let Some(p) = &sd.period {
        out_of_range(ids[0], p, path.child("period"), STABLE_PERIOD, errs);
    }
    if let Some(w) = &sd.stabilization_window {
        out_of_range(
            ids[1],
            w,
            path.child("stabilizationWindow"),
            STABLE_WINDOW,
            errs,
        );
    }
}

/// PV-05, PV-06: scale-up stable period and stabilization window within 0..=30m.
///
/// Refused: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{metricName: m, targetValue: "10"}], behavior: {scaleUp: {stablePolicy: {period: 31m}}}}}`
///
/// Refused: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{metricName: m, targetValue: "10"}], behavior: {scaleUp: {stablePolicy: {stabilizationWindow: 31m}}}}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{metricName: m, targetValue: "10"}], behavior: {scaleUp: {stablePolicy: {period: 1m, stabilizationWindow: 30m}}}}}`
fn pv_05_06_scale_up_stable(
    b: &AutoscalingPolicyBehavior,
    ids: &[&'static str; 6],
    errs: &mut ErrorList,
) {
    let Some(sp) = b.scale_up.as_ref().and_then(|u| u.stable_policy.as_ref()) else {
        return;
    };
    let path = Path::new("spec")
        .child("behavior")
        .child("scaleUp")
        .child("stablePolicy");
    if let Some(p) = &sp.period {
        out_of_range(ids[2], p, path.child("period"), STABLE_PERIOD, errs);
    }
    if let Some(w) = &sp.stabilization_window {
        out_of_range(
            ids[3],
            w,
            path.child("stabilizationWindow"),
            STABLE_WINDOW,
            errs,
        );
    }
}

/// PV-07, PV-08: panic period (always checked) and panic mode hold within 0..=30m.
///
/// Refused: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{metricName: m, targetValue: "10"}], behavior: {scaleUp: {panicPolicy: {period: 31m}}}}}`
///
/// Refused: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{metricName: m, targetValue: "10"}], behavior: {scaleUp: {panicPolicy: {period: 1m, panicModeHold: 31m}}}}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{metricName: m, targetValue: "10"}], behavior: {scaleUp: {panicPolicy: {period: 1m, panicModeHold: 1m}}}}}`
fn pv_07_08_panic(b: &AutoscalingPolicyBehavior, ids: &[&'static str; 6], errs: &mut ErrorList) {
    let Some(pp) = b.scale_up.as_ref().and_then(|u| u.panic_policy.as_ref()) else {
        return;
    };
    let path = Path::new("spec")
        .child("behavior")
        .child("scaleUp")
        .child("panicPolicy");
    out_of_range(
        ids[4],
        &pp.period,
        path.child("period"),
        "panic policy period must be between 0 and 30 minutes",
        errs,
    );
    if let Some(h) = &pp.panic_mode_hold {
        out_of_range(
            ids[5],
            h,
            path.child("panicModeHold"),
            "panic policy panic mode hold must be between 0 and 30 minutes",
            errs,
        );
    }
}

/// Every AutoscalingPolicy rule, in the spec's order (§7).
pub fn validate_policy(spec: &AutoscalingPolicySpec) -> ErrorList {
    let mut errs = ErrorList::new();
    pv_01_02_metrics(spec, &mut errs);
    if let Some(b) = &spec.behavior {
        behavior_rules(
            b,
            &["PV-03", "PV-04", "PV-05", "PV-06", "PV-07", "PV-08"],
            &mut errs,
        );
    }
    errs
}

/// The duration bounds of a scaling behaviour (PV-03..08), which Kthena v1.0 kept: `ids` name
/// them in that order.
pub(crate) fn behavior_rules(
    b: &AutoscalingPolicyBehavior,
    ids: &[&'static str; 6],
    errs: &mut ErrorList,
) {
    pv_03_04_scale_down(b, ids, errs);
    pv_05_06_scale_up_stable(b, ids, errs);
    pv_07_08_panic(b, ids, errs);
}

/// `/validate-registry-volcano-sh-v1alpha1-autoscalingpolicy`.
pub struct PolicyValidator;

impl Validator for PolicyValidator {
    type Object = PolicyObj;

    fn reads_old_object(&self) -> bool {
        false
    }

    fn validate(&self, req: &Request<PolicyObj>, _: &Context) -> Verdict {
        validate_policy(&req.object.spec).into()
    }

    fn denial(&self, _: &Request<PolicyObj>, errors: &[FieldError]) -> Status {
        denial(errors)
    }
}

fn dur(text: &str) -> GoDuration {
    GoDuration::parse(text).unwrap_or_default()
}

fn stable(instances: i32, window: &str) -> StablePolicy {
    StablePolicy {
        instances: Some(instances),
        percent: Some(100),
        period: Some(dur("1m0s")),
        select_policy: "Or".to_owned(),
        stabilization_window: Some(dur(window)),
    }
}

/// DEFAULT_SCALE_DOWN (§8; Q-12: upstream's values, not the CRD's).
fn default_scale_down() -> StablePolicy {
    stable(0, "5m0s")
}

/// DEFAULT_STABLE_UP.
fn default_stable_up() -> StablePolicy {
    stable(4, "0s")
}

/// DEFAULT_PANIC.
fn default_panic() -> PanicPolicy {
    PanicPolicy {
        percent: Some(0),
        period: dur("0s"),
        panic_threshold_percent: Some(200),
        panic_mode_hold: Some(dur("0s")),
    }
}

/// DEFAULT_SCALE_UP.
fn default_scale_up() -> ScaleUpPolicy {
    ScaleUpPolicy {
        stable_policy: Some(default_stable_up()),
        panic_policy: Some(default_panic()),
    }
}

fn stable_empty(p: &Option<StablePolicy>) -> bool {
    p.as_ref().is_none_or(StablePolicy::is_empty)
}

fn panic_empty(p: &Option<PanicPolicy>) -> bool {
    p.as_ref().is_none_or(PanicPolicy::is_empty)
}

fn scale_up_empty(u: &Option<ScaleUpPolicy>) -> bool {
    u.as_ref()
        .is_none_or(|u| stable_empty(&u.stable_policy) && panic_empty(&u.panic_policy))
}

/// PM-01..PM-07, in order, stopping where the spec says. Returns the ids that acted.
pub fn default_policy(spec: &mut AutoscalingPolicySpec) -> Vec<&'static str> {
    default_behavior(&mut spec.behavior)
}

/// PM-01..PM-07 on a policy's behaviour (Kthena v1.0's mutator is the pinned one).
///
/// PM-01: a policy without any behaviour gets the default scale-up and scale-down.
///
/// Mutated: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{metricName: m, targetValue: "10"}]}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{metricName: m, targetValue: "10"}], behavior: {scaleUp: {stablePolicy: {period: 1m, stabilizationWindow: 0s}, panicPolicy: {period: 1m, panicModeHold: 0s}}, scaleDown: {period: 1m, stabilizationWindow: 5m}}}}`
///
/// PM-02: an empty scale-down becomes the default scale-down.
///
/// Mutated: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{metricName: m, targetValue: "10"}], behavior: {scaleUp: {stablePolicy: {period: 1m, stabilizationWindow: 0s}}}}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{metricName: m, targetValue: "10"}], behavior: {scaleUp: {stablePolicy: {period: 1m, stabilizationWindow: 0s}, panicPolicy: {period: 1m, panicModeHold: 0s}}, scaleDown: {period: 1m, stabilizationWindow: 5m}}}}`
///
/// PM-03: a scale-down without a stabilisation window gets 5 minutes.
///
/// Mutated: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{metricName: m, targetValue: "10"}], behavior: {scaleDown: {period: 1m}}}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{metricName: m, targetValue: "10"}], behavior: {scaleUp: {stablePolicy: {period: 1m, stabilizationWindow: 0s}, panicPolicy: {period: 1m, panicModeHold: 0s}}, scaleDown: {period: 1m, stabilizationWindow: 5m}}}}`
///
/// PM-04: an empty scale-up becomes the default scale-up.
///
/// Mutated: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{metricName: m, targetValue: "10"}], behavior: {scaleDown: {period: 1m}}}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{metricName: m, targetValue: "10"}], behavior: {scaleUp: {stablePolicy: {period: 1m, stabilizationWindow: 0s}, panicPolicy: {period: 1m, panicModeHold: 0s}}, scaleDown: {period: 1m, stabilizationWindow: 5m}}}}`
///
/// PM-05: a scale-up without a stable policy gets the default one.
///
/// Mutated: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{metricName: m, targetValue: "10"}], behavior: {scaleUp: {panicPolicy: {period: 1m}}}}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{metricName: m, targetValue: "10"}], behavior: {scaleUp: {stablePolicy: {period: 1m, stabilizationWindow: 0s}, panicPolicy: {period: 1m, panicModeHold: 0s}}, scaleDown: {period: 1m, stabilizationWindow: 5m}}}}`
///
/// PM-06: a stable scale-up policy without a stabilisation window gets 0 s.
///
/// Mutated: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{metricName: m, targetValue: "10"}], behavior: {scaleUp: {stablePolicy: {period: 1m}}}}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{metricName: m, targetValue: "10"}], behavior: {scaleUp: {stablePolicy: {period: 1m, stabilizationWindow: 0s}, panicPolicy: {period: 1m, panicModeHold: 0s}}, scaleDown: {period: 1m, stabilizationWindow: 5m}}}}`
///
/// PM-07: a scale-up without a panic policy gets the default one.
///
/// Mutated: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{metricName: m, targetValue: "10"}], behavior: {scaleUp: {stablePolicy: {period: 1m, stabilizationWindow: 0s}}}}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{metricName: m, targetValue: "10"}], behavior: {scaleUp: {stablePolicy: {period: 1m, stabilizationWindow: 0s}, panicPolicy: {period: 1m, panicModeHold: 0s}}, scaleDown: {period: 1m, stabilizationWindow: 5m}}}}`
pub(crate) fn default_behavior(
    behavior: &mut Option<AutoscalingPolicyBehavior>,
) -> Vec<&'static str> {
    let mut applied = Vec::new();
    let behavior_empty = behavior
        .as_ref()
        .is_none_or(|b| scale_up_empty(&b.scale_up) && stable_empty(&b.scale_down));
    if behavior_empty {
        // PM-01
        *behavior = Some(AutoscalingPolicyBehavior {
            scale_up: Some(default_scale_up()),
            scale_down: Some(default_scale_down()),
        });
        applied.push("PM-01");
        return applied;
    }
    let Some(b) = behavior.as_mut() else {
        return applied;
    };
    match b.scale_down.as_mut() {
        Some(sd) if !sd.is_empty() => {
            if sd.stabilization_window.is_none() {
                sd.stabilization_window = Some(dur("5m"));
                applied.push("PM-03");
            }
        }
        _ => {
            b.scale_down = Some(default_scale_down());
            applied.push("PM-02");
        }
    }
    if scale_up_empty(&b.scale_up) {
        b.scale_up = Some(default_scale_up());
        applied.push("PM-04");
        return applied;
    }
    let Some(up) = b.scale_up.as_mut() else {
        return applied;
    };
    match up.stable_policy.as_mut() {
        Some(sp) if !sp.is_empty() => {
            if sp.stabilization_window.is_none() {
                sp.stabilization_window = Some(dur("0s"));
                applied.push("PM-06");
            }
        }
        _ => {
            up.stable_policy = Some(default_stable_up());
            applied.push("PM-05");
        }
    }
    if panic_empty(&up.panic_policy) {
        up.panic_policy = Some(default_panic());
        applied.push("PM-07");
    }
    applied
}

/// `/mutate-registry-volcano-sh-v1alpha1-autoscalingpolicy`.
pub struct PolicyDefaulter;

impl Mutator for PolicyDefaulter {
    type Object = PolicyObj;

    fn reads_old_object(&self) -> bool {
        false
    }

    fn mutate(&self, _: &Request<PolicyObj>, policy: &mut PolicyObj, _: &Context) -> Verdict {
        Verdict {
            applied: default_policy(&mut policy.spec),
            ..Verdict::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: serde_json::Value) -> AutoscalingPolicySpec {
        serde_json::from_value(v).unwrap()
    }

    fn errors(v: serde_json::Value) -> Vec<String> {
        validate_policy(&spec(v))
            .iter()
            .map(|e| format!("{} {e}", e.rule))
            .collect()
    }

    #[test]
    fn pv_01_target_must_be_positive() {
        let r = errors(json!({"metrics": [{"metricName": "a", "targetValue": "0"},
                                          {"metricName": "b", "targetValue": -1},
                                          {"metricName": "c"},
                                          {"metricName": "d", "targetValue": "500m"}]}));
        assert_eq!(
            r,
            [
                "PV-01 spec.metrics[0].targetValue: Invalid value: \"0\": metric target value must be greater than 0 and not equal to infinity",
                "PV-01 spec.metrics[1].targetValue: Invalid value: -1: metric target value must be greater than 0 and not equal to infinity",
                "PV-01 spec.metrics[2].targetValue: Invalid value: \"0\": metric target value must be greater than 0 and not equal to infinity",
            ]
        );
    }

    #[test]
    fn pv_02_duplicate_names_after_the_first() {
        let r = errors(json!({"metrics": [{"metricName": "cpu", "targetValue": 1},
                                          {"metricName": "cpu", "targetValue": 1},
                                          {"metricName": "cpu", "targetValue": 1}]}));
        assert_eq!(r.len(), 2);
        assert!(r[0].starts_with("PV-02 spec.metrics[1].metricName: Invalid value: \"cpu\": duplicate metric name cpu is not allowed"));
    }

    #[test]
    fn pv_03_to_08_duration_bounds() {
        let ok = json!({"metrics": [], "behavior": {
            "scaleDown": {"period": "30m", "stabilizationWindow": "0s"},
            "scaleUp": {"stablePolicy": {"period": "1800s", "stabilizationWindow": "30m"},
                        "panicPolicy": {"period": "0s", "panicModeHold": "30m"}}}});
        assert!(errors(ok).is_empty());
        let bad = json!({"metrics": [], "behavior": {
            "scaleDown": {"period": "-1m", "stabilizationWindow": "30m1s"},
            "scaleUp": {"stablePolicy": {"period": "31m", "stabilizationWindow": "1800.5s"},
                        "panicPolicy": {"period": "-5s", "panicModeHold": "1h"}}}});
        assert_eq!(
            errors(bad),
            [
                "PV-03 spec.behavior.scaleDown.period: Invalid value: \"-1m0s\": stable policy period must be between 0 and 30 minutes",
                "PV-04 spec.behavior.scaleDown.stabilizationWindow: Invalid value: \"30m1s\": stable policy stabilization window must be between 0 and 30 minutes",
                "PV-05 spec.behavior.scaleUp.stablePolicy.period: Invalid value: \"31m0s\": stable policy period must be between 0 and 30 minutes",
                "PV-06 spec.behavior.scaleUp.stablePolicy.stabilizationWindow: Invalid value: \"30m0.5s\": stable policy stabilization window must be between 0 and 30 minutes",
                "PV-07 spec.behavior.scaleUp.panicPolicy.period: Invalid value: \"-5s\": panic policy period must be between 0 and 30 minutes",
                "PV-08 spec.behavior.scaleUp.panicPolicy.panicModeHold: Invalid value: \"1h0m0s\": panic policy panic mode hold must be between 0 and 30 minutes",
            ]
        );
    }

    #[test]
    fn q10_tolerance_and_threshold_not_checked() {
        assert!(
            errors(json!({"tolerancePercent": 101, "metrics": [], "behavior": {
            "scaleUp": {"panicPolicy": {"period": "1s", "panicThresholdPercent": 99}}}}))
            .is_empty()
        );
    }

    fn defaulted(v: serde_json::Value) -> (Vec<&'static str>, serde_json::Value) {
        let mut s = spec(v);
        let applied = default_policy(&mut s);
        (applied, serde_json::to_value(&s).unwrap())
    }

    #[test]
    fn pm_01_full_default_for_absent_or_empty_behavior() {
        for v in [
            json!({"metrics": []}),
            json!({"metrics": [], "behavior": {}}),
            json!({"metrics": [], "behavior": {"scaleUp": {"panicPolicy": {"period": "0s"}}}}),
        ] {
            let (applied, out) = defaulted(v);
            assert_eq!(applied, ["PM-01"]);
            assert_eq!(
                out["behavior"]["scaleDown"],
                json!({"instances":0,"percent":100,"period":"1m0s","selectPolicy":"Or","stabilizationWindow":"5m0s"})
            );
            assert_eq!(
                out["behavior"]["scaleUp"]["panicPolicy"],
                json!({"percent":0,"period":"0s","panicThresholdPercent":200,"panicModeHold":"0s"})
            );
            assert_eq!(out["behavior"]["scaleUp"]["stablePolicy"]["instances"], 4);
        }
    }

    #[test]
    fn pm_02_and_pm_04() {
        let (applied, out) = defaulted(
            json!({"metrics": [], "behavior": {"scaleDown": {}, "scaleUp": {"stablePolicy": {"instances": 2}}}}),
        );
        assert_eq!(applied, ["PM-02", "PM-06", "PM-07"]);
        assert_eq!(out["behavior"]["scaleDown"]["stabilizationWindow"], "5m0s");
        let (applied, _) =
            defaulted(json!({"metrics": [], "behavior": {"scaleDown": {"instances": 1}}}));
        assert_eq!(applied, ["PM-03", "PM-04"]);
    }

    #[test]
    fn pm_03_05_06_07_partial_fills() {
        let (applied, out) = defaulted(json!({"metrics": [], "behavior": {
            "scaleDown": {"instances": 1, "percent": 100, "period": "15s", "selectPolicy": "Or"},
            "scaleUp": {"panicPolicy": {"period": "10s"}}}}));
        assert_eq!(applied, ["PM-03", "PM-05"]);
        assert_eq!(out["behavior"]["scaleDown"]["stabilizationWindow"], "5m");
        assert_eq!(
            out["behavior"]["scaleUp"]["stablePolicy"]["stabilizationWindow"],
            "0s"
        );
        assert_eq!(out["behavior"]["scaleUp"]["panicPolicy"]["period"], "10s");
    }

    #[test]
    fn nothing_to_do_when_complete() {
        let (applied, _) = defaulted(json!({"metrics": [], "behavior": {
            "scaleDown": {"stabilizationWindow": "1m"},
            "scaleUp": {"stablePolicy": {"stabilizationWindow": "0s"}, "panicPolicy": {"percent": 1}}}}));
        assert!(applied.is_empty());
    }
}
