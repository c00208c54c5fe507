//! AutoscalingPolicyBinding validation (spec §9, BV-01..04).

use admission_kit::{Context, ErrorList, FieldError, Path, Request, Status, Validator, Verdict};

use crate::denial;
use crate::types::{AutoscalingPolicy, AutoscalingPolicyBindingSpec, Obj};

/// An AutoscalingPolicyBinding as the rules see it.
pub type BindingObj = Obj<AutoscalingPolicyBindingSpec>;

/// Field paths use Go field names, as upstream.
fn scaling_configuration() -> Path {
    Path::new("spec").child("ScalingConfiguration")
}

fn policy_ref() -> Path {
    Path::new("spec").child("PolicyRef")
}

/// BV-01, BV-02: exactly one of optimizerConfiguration and scalingConfiguration.
///
/// State: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p, namespace: default}, spec: {metrics: [{metricName: load, targetValue: "1"}]}}`
///
/// Refused: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicyBinding, metadata: {name: b}, spec: {policyRef: {name: p}}}`
///
/// Refused: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicyBinding, metadata: {name: b}, spec: {policyRef: {name: p}, scalingConfiguration: {target: {targetRef: {name: m}}, minReplicas: 1, maxReplicas: 2}, optimizerConfiguration: {params: [{target: {targetRef: {name: m}}, minReplicas: 1, maxReplicas: 2, cost: 1}], costExpansionRatePercent: 200}}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicyBinding, metadata: {name: b}, spec: {policyRef: {name: p}, scalingConfiguration: {target: {targetRef: {name: m}}, minReplicas: 1, maxReplicas: 2}}}`
fn bv_01_02_one_configuration(spec: &AutoscalingPolicyBindingSpec, errs: &mut ErrorList) {
    match (spec.optimizer_configuration.is_some(), spec.scaling_configuration.is_some()) {
        (false, false) => errs.push(FieldError::required(
            "BV-01",
            scaling_configuration(),
            "spec.ScalingConfiguration should be set if spec.OptimizerConfiguration does not exist",
        )),
        (true, true) => errs.push(FieldError::forbidden(
            "BV-02",
            scaling_configuration(),
            "both spec.OptimizerConfiguration and spec.ScalingConfiguration can not be set at the same time",
        )),
        _ => {}
    }
}

/// BV-03, BV-04: the referenced AutoscalingPolicy exists in the binding's namespace; a lookup
/// that cannot answer denies (fail closed, Q-19).
///
/// State: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p, namespace: default}, spec: {metrics: [{metricName: load, targetValue: "1"}]}}`
///
/// Refused: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicyBinding, metadata: {name: b}, spec: {policyRef: {name: other}, scalingConfiguration: {target: {targetRef: {name: m}}, minReplicas: 1, maxReplicas: 2}}}`
///
/// Admitted: `{apiVersion: registry.volcano.sh/v1alpha1, kind: AutoscalingPolicyBinding, metadata: {name: b}, spec: {policyRef: {name: p}, scalingConfiguration: {target: {targetRef: {name: m}}, minReplicas: 1, maxReplicas: 2}}}`
fn bv_03_04_policy_exists(binding: &BindingObj, ctx: &Context, errs: &mut ErrorList) {
    let name = binding.spec.policy_ref.name.as_str();
    let ns = binding.metadata.namespace.as_deref().unwrap_or_default();
    match ctx.get::<AutoscalingPolicy>(Some(ns), name) {
        Ok(Some(_)) => {}
        Ok(None) => errs.push(FieldError::invalid(
            "BV-03",
            policy_ref(),
            name,
            format!("autoscaling policy resource {name} does not exist"),
        )),
        Err(e) => errs.push(FieldError::internal("BV-04", policy_ref(), e.to_string())),
    }
}

/// Every binding rule, in the spec's order (§9).
pub fn validate_binding(binding: &BindingObj, ctx: &Context) -> ErrorList {
    let mut errs = ErrorList::new();
    bv_01_02_one_configuration(&binding.spec, &mut errs);
    bv_03_04_policy_exists(binding, ctx, &mut errs);
    errs
}

/// `/validate-registry-volcano-sh-v1alpha1-autoscalingpolicybinding`.
pub struct BindingValidator;

impl Validator for BindingValidator {
    type Object = BindingObj;

    fn reads_old_object(&self) -> bool {
        false
    }

    fn validate(&self, req: &Request<BindingObj>, ctx: &Context) -> Verdict {
        validate_binding(&req.object, ctx).into()
    }

    fn denial(&self, _: &Request<BindingObj>, errors: &[FieldError]) -> Status {
        denial(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use admission_kit::cluster::state::StaticState;
    use serde_json::json;
    use std::sync::Arc;

    fn ctx() -> Context {
        let mut s = StaticState::default();
        s.add_value(json!({"apiVersion": "registry.volcano.sh/v1alpha1", "kind": "AutoscalingPolicy",
                           "metadata": {"name": "p", "namespace": "default"}, "spec": {"metrics": []}}))
            .unwrap();
        Context::new(Arc::new(s))
    }

    fn errors(spec: serde_json::Value, ns: &str) -> Vec<String> {
        let b: BindingObj = serde_json::from_value(
            json!({"metadata": {"name": "b", "namespace": ns}, "spec": spec}),
        )
        .unwrap();
        validate_binding(&b, &ctx())
            .iter()
            .map(|e| format!("{} {e}", e.rule))
            .collect()
    }

    #[test]
    fn bv_01_neither_configuration() {
        assert_eq!(
            errors(json!({"policyRef": {"name": "p"}}), "default"),
            [
                "BV-01 spec.ScalingConfiguration: Required value: spec.ScalingConfiguration should be set if spec.OptimizerConfiguration does not exist"
            ]
        );
    }

    #[test]
    fn bv_02_both_configurations() {
        let r = errors(
            json!({"policyRef": {"name": "p"}, "optimizerConfiguration": {"params": []},
                              "scalingConfiguration": {"minReplicas": 1, "maxReplicas": 1}}),
            "default",
        );
        assert_eq!(
            r,
            [
                "BV-02 spec.ScalingConfiguration: Forbidden: both spec.OptimizerConfiguration and spec.ScalingConfiguration can not be set at the same time"
            ]
        );
    }

    #[test]
    fn bv_03_policy_missing_in_this_namespace() {
        let s = json!({"policyRef": {"name": "p"}, "scalingConfiguration": {"minReplicas": 1, "maxReplicas": 1}});
        assert!(errors(s.clone(), "default").is_empty());
        assert_eq!(
            errors(s, "other"),
            [
                "BV-03 spec.PolicyRef: Invalid value: \"p\": autoscaling policy resource p does not exist"
            ]
        );
    }

    #[test]
    fn bv_04_lookup_failure_denies_and_runs_with_bv_01() {
        let r = errors(json!({}), "default");
        assert_eq!(
            r,
            [
                "BV-01 spec.ScalingConfiguration: Required value: spec.ScalingConfiguration should be set if spec.OptimizerConfiguration does not exist",
                "BV-04 spec.PolicyRef: Internal error: resource name may not be empty",
            ]
        );
    }
}
