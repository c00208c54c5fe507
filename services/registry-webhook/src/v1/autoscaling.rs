//! AutoscalingPolicy v1.0 validation (`docs/spec/kthena-v1.md` §7, AP-1..AP-27) and defaulting
//! (§8: the pinned PM-01..07, unchanged upstream).

use std::collections::{BTreeMap, HashSet};

use admission_kit::review::field::BadValue;
use admission_kit::{
    Context, ErrorList, FieldError, Mutator, Path, Request, Status, Validator, Verdict,
};
use k8s_openapi::api::core::v1::ObjectReference;

use crate::denial;
use crate::policy::{behavior_rules, default_behavior, target_ok};
use crate::types::Obj;
use crate::v1::workload::{
    AutoscalingPolicySpec, DisaggregatedTarget, Metric, MetricSource, RoleScalingParam,
};

/// An AutoscalingPolicy (v1.0) as the rules see it.
pub type ApObj = Obj<AutoscalingPolicySpec>;

fn spec_path() -> Path {
    Path::new("spec")
}

/// A quantity as apimachinery v0.34 prints a `resource.Quantity` bad value: its JSON form.
fn quantity_value(q: &admission_kit::compat::go::Quantity) -> BadValue {
    BadValue::Str(q.value().canonical())
}

/// The metric checks, shared by `spec.metrics` (AP-1, AP-2) and a role's (AP-10, AP-11): the
/// target is above zero and finite; names are unique after the first.
fn metric_rules(ids: [&'static str; 2], metrics: &[Metric], path: &Path, errs: &mut ErrorList) {
    let mut seen = HashSet::new();
    for (i, m) in metrics.iter().enumerate() {
        if !target_ok(&m.target_value) {
            errs.push(FieldError::invalid(
                ids[0],
                path.index(i).child("targetValue"),
                quantity_value(&m.target_value),
                "metric target value must be greater than 0 and not equal to infinity",
            ));
        }
        if !seen.insert(m.name.as_str()) {
            errs.push(FieldError::invalid(
                ids[1],
                path.index(i).child("name"),
                m.name.as_str(),
                format!("duplicate metric name {} is not allowed", m.name),
            ));
        }
    }
}

/// AP-1, AP-2 on `spec.metrics`.
///
/// AP-1: each metric's target value is above zero and finite.
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "0"}], homogeneousTarget: {minReplicas: 1, maxReplicas: 6, target: {targetRef: {kind: ModelServing, name: ms}, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "0.5"}], homogeneousTarget: {minReplicas: 1, maxReplicas: 6, target: {targetRef: {kind: ModelServing, name: ms}, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}`
///
/// AP-2: no metric name is given twice.
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}, {name: rps, targetValue: "2"}], homogeneousTarget: {minReplicas: 1, maxReplicas: 6, target: {targetRef: {kind: ModelServing, name: ms}, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}`
fn ap_1_2_metrics(spec: &AutoscalingPolicySpec, errs: &mut ErrorList) {
    let metrics = spec.metrics.as_deref().unwrap_or_default();
    metric_rules(
        ["AP-1", "AP-2"],
        metrics,
        &spec_path().child("metrics"),
        errs,
    );
}

/// AP-4, AP-5: a target names a ModelServing (or no kind) and has a name.
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], homogeneousTarget: {minReplicas: 1, maxReplicas: 6, target: {targetRef: {kind: Deployment, name: ms}, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}`
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], homogeneousTarget: {minReplicas: 1, maxReplicas: 6, target: {targetRef: {kind: ModelServing}, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}`
fn ap_4_5_target_ref(r: &ObjectReference, path: Path, errs: &mut ErrorList) {
    let kind = r.kind.as_deref().unwrap_or_default();
    if !kind.is_empty() && kind != "ModelServing" {
        errs.push(FieldError::invalid(
            "AP-4",
            path.child("kind"),
            kind,
            format!("targetRef.kind must be ModelServing, but got {kind}"),
        ));
    }
    let name = r.name.as_deref().unwrap_or_default();
    if name.is_empty() {
        errs.push(FieldError::invalid(
            "AP-5",
            path.child("name"),
            name,
            "targetRef.name must be set, but got empty",
        ));
    }
}

/// AP-3: exactly one of the three targets is set; then AP-4, AP-5 on the one set.
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}]}}`
fn ap_3_5_target(spec: &AutoscalingPolicySpec, errs: &mut ErrorList) {
    let count = usize::from(spec.homogeneous_target.is_some())
        + usize::from(spec.heterogeneous_target.is_some())
        + usize::from(spec.disaggregated_target.is_some());
    if count != 1 {
        errs.push(FieldError::invalid(
            "AP-3",
            spec_path(),
            count,
            "exactly one of homogeneousTarget, heterogeneousTarget, or disaggregatedTarget must be set",
        ));
        return;
    }
    if let Some(h) = &spec.homogeneous_target {
        let path = spec_path()
            .child("homogeneousTarget")
            .child("target")
            .child("targetRef");
        ap_4_5_target_ref(&h.target.target_ref, path, errs);
    } else if let Some(h) = &spec.heterogeneous_target {
        for (i, p) in h.params.iter().flatten().enumerate() {
            let path = spec_path()
                .child("heterogeneousTarget")
                .child("params")
                .index(i)
                .child("target")
                .child("targetRef");
            ap_4_5_target_ref(&p.target.target_ref, path, errs);
        }
    } else if let Some(d) = &spec.disaggregated_target {
        let path = spec_path().child("disaggregatedTarget").child("targetRef");
        ap_4_5_target_ref(&d.target_ref, path, errs);
    }
}

/// AP-6: a homogeneous or heterogeneous target needs `spec.metrics`.
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {homogeneousTarget: {minReplicas: 1, maxReplicas: 6, target: {targetRef: {kind: ModelServing, name: ms}, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], homogeneousTarget: {minReplicas: 1, maxReplicas: 6, target: {targetRef: {kind: ModelServing, name: ms}, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}`
fn ap_6_metrics_required(spec: &AutoscalingPolicySpec, errs: &mut ErrorList) {
    let has_target = spec.homogeneous_target.is_some() || spec.heterogeneous_target.is_some();
    if has_target && spec.metrics.as_ref().is_none_or(Vec::is_empty) {
        errs.push(FieldError::required(
            "AP-6",
            spec_path().child("metrics"),
            "at least one metric must be set",
        ));
    }
}

fn disaggregated() -> Path {
    spec_path().child("disaggregatedTarget")
}

/// A role whose bounds are equal and positive never scales, so needs no metrics.
fn is_fixed(p: &RoleScalingParam) -> bool {
    p.max_replicas > 0 && p.min_replicas == p.max_replicas
}

/// AP-7..AP-13 for one role of a disaggregated target.
///
/// AP-7: a role of a disaggregated target has a name (naming a role of the ModelServing's
/// template).
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {"": {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}}`
///
/// AP-8: a role's `minReplicas` is at most its `maxReplicas`.
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 5, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}}`
///
/// AP-9: a role that is not fixed (min = max) has metrics when `spec.metrics` is empty.
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4}, decode: {minReplicas: 1, maxReplicas: 4}}}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 2, maxReplicas: 2}, decode: {minReplicas: 2, maxReplicas: 2}}}}}`
///
/// AP-10: each of a role's own metrics has a target above zero and finite (as AP-1).
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metrics: [{name: rps, targetValue: "0"}], metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metrics: [{name: rps, targetValue: "2"}], metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}}`
///
/// AP-11: no metric name is given twice among a role's own metrics (as AP-2).
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metrics: [{name: rps, targetValue: "1"}, {name: rps, targetValue: "2"}], metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}}`
///
/// AP-12: a role that is not fixed has `metricSources` when metrics are configured.
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}}`
///
/// AP-13: each `metricSources` key names an effective metric of the role.
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {qps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}}`
fn ap_7_13_role(name: &str, p: &RoleScalingParam, spec_metrics: &[Metric], errs: &mut ErrorList) {
    if name.is_empty() {
        errs.push(FieldError::invalid(
            "AP-7",
            disaggregated().child("roles"),
            name,
            "role name must refer to a ModelServing.spec.template.roles[].name and must not be empty",
        ));
        return;
    }
    let role = disaggregated().child("roles").key(name);
    let fixed = is_fixed(p);
    if p.min_replicas > p.max_replicas {
        errs.push(FieldError::invalid(
            "AP-8",
            role.child("minReplicas"),
            p.min_replicas,
            "minReplicas must be <= maxReplicas",
        ));
    }
    let own = p.metrics.as_deref().unwrap_or_default();
    if !fixed && own.is_empty() && spec_metrics.is_empty() {
        errs.push(FieldError::required(
            "AP-9",
            role.child("metrics"),
            "metrics must be set on every non-fixed role when spec.metrics is empty",
        ));
    }
    let mut effective: HashSet<&str> = HashSet::new();
    if own.is_empty() && !fixed {
        effective.extend(spec_metrics.iter().map(|m| m.name.as_str()));
    }
    metric_rules(["AP-10", "AP-11"], own, &role.child("metrics"), errs);
    effective.extend(own.iter().map(|m| m.name.as_str()));
    if fixed {
        return;
    }
    let empty = BTreeMap::new();
    let sources: &BTreeMap<String, MetricSource> = p.metric_sources.as_ref().unwrap_or(&empty);
    if sources.is_empty() && !effective.is_empty() {
        errs.push(FieldError::invalid(
            "AP-12",
            role.child("metricSources"),
            0usize,
            "metricSources must be set on every non-fixed role when metrics are configured",
        ));
        return;
    }
    for key in sources.keys() {
        if !effective.contains(key.as_str()) {
            errs.push(FieldError::invalid(
                "AP-13",
                role.child("metricSources").key(key),
                key.as_str(),
                "metricSources key must match an effective metric name",
            ));
        }
    }
}

/// The ratio constraint of a disaggregated target (AP-14..AP-21).
///
/// AP-14: the ratio constraint names two different roles.
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}, ratioConstraint: {numeratorRole: prefill, denominatorRole: prefill, minRatio: "1", maxRatio: "2"}}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}, ratioConstraint: {numeratorRole: prefill, denominatorRole: decode, minRatio: "1", maxRatio: "2"}}}}`
///
/// AP-15: its `numeratorRole` is one of the target's roles.
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}, ratioConstraint: {numeratorRole: encode, denominatorRole: decode, minRatio: "1", maxRatio: "2"}}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}, ratioConstraint: {numeratorRole: prefill, denominatorRole: decode, minRatio: "1", maxRatio: "2"}}}}`
///
/// AP-16: its `denominatorRole` is one of the target's roles.
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}, ratioConstraint: {numeratorRole: prefill, denominatorRole: encode, minRatio: "1", maxRatio: "2"}}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}, ratioConstraint: {numeratorRole: prefill, denominatorRole: decode, minRatio: "1", maxRatio: "2"}}}}`
///
/// AP-17: its `minRatio` is at most its `maxRatio`.
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}, ratioConstraint: {numeratorRole: prefill, denominatorRole: decode, minRatio: "3", maxRatio: "2"}}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}, ratioConstraint: {numeratorRole: prefill, denominatorRole: decode, minRatio: "1", maxRatio: "2"}}}}`
///
/// AP-18: its two roles can both scale to zero (`minReplicas: 0`) or neither can.
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 0, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}, ratioConstraint: {numeratorRole: prefill, denominatorRole: decode, minRatio: "0", maxRatio: "2"}}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 0, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 0, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}, ratioConstraint: {numeratorRole: prefill, denominatorRole: decode, minRatio: "0", maxRatio: "2"}}}}`
///
/// AP-19: both ratios are finite.
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}, ratioConstraint: {numeratorRole: prefill, denominatorRole: decode, minRatio: "1", maxRatio: "1e400"}}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}, ratioConstraint: {numeratorRole: prefill, denominatorRole: decode, minRatio: "1", maxRatio: "2"}}}}`
///
/// AP-20: `minRatio` is at least zero and `maxRatio` above zero.
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}, ratioConstraint: {numeratorRole: prefill, denominatorRole: decode, minRatio: "-1", maxRatio: "2"}}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}, ratioConstraint: {numeratorRole: prefill, denominatorRole: decode, minRatio: "1", maxRatio: "2"}}}}`
///
/// AP-21: the ratio can be met within the two roles' replica bounds.
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}, ratioConstraint: {numeratorRole: prefill, denominatorRole: decode, minRatio: "5", maxRatio: "6"}}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}, ratioConstraint: {numeratorRole: prefill, denominatorRole: decode, minRatio: "1", maxRatio: "2"}}}}`
fn ap_14_21_ratio(t: &DisaggregatedTarget, errs: &mut ErrorList) {
    let Some(c) = &t.ratio_constraint else { return };
    let ratio = disaggregated().child("ratioConstraint");
    if c.numerator_role == c.denominator_role {
        errs.push(FieldError::invalid(
            "AP-14",
            ratio.child("denominatorRole"),
            c.denominator_role.as_str(),
            "numeratorRole and denominatorRole must differ",
        ));
    }
    let num = t.roles.get(&c.numerator_role);
    let den = t.roles.get(&c.denominator_role);
    if num.is_none() {
        errs.push(FieldError::invalid(
            "AP-15",
            ratio.child("numeratorRole"),
            c.numerator_role.as_str(),
            "numeratorRole must exist in roles",
        ));
    }
    if den.is_none() {
        errs.push(FieldError::invalid(
            "AP-16",
            ratio.child("denominatorRole"),
            c.denominator_role.as_str(),
            "denominatorRole must exist in roles",
        ));
    }
    let (min, max) = (c.min_ratio.value(), c.max_ratio.value());
    if min.cmp_value(max) == std::cmp::Ordering::Greater {
        errs.push(FieldError::invalid(
            "AP-17",
            ratio.child("minRatio"),
            min.canonical(),
            "minRatio must be <= maxRatio",
        ));
    }
    let (Some(num), Some(den)) = (num, den) else {
        return;
    };
    if (num.min_replicas == 0) != (den.min_replicas == 0) {
        errs.push(FieldError::invalid(
            "AP-18",
            ratio.clone(),
            "scale-to-zero bounds",
            "ratio roles must be scalable-to-zero together",
        ));
    }
    let (lo, hi) = (min.to_f64(), max.to_f64());
    if !lo.is_finite() || !hi.is_finite() {
        errs.push(FieldError::invalid(
            "AP-19",
            ratio,
            "ratio",
            "ratio values must be finite",
        ));
    } else if lo < 0.0 || hi <= 0.0 {
        errs.push(FieldError::invalid(
            "AP-20",
            ratio,
            "ratio",
            "minRatio must be >= 0 and maxRatio must be > 0",
        ));
    } else {
        let unreachable = || {
            FieldError::invalid(
                "AP-21",
                ratio.clone(),
                "bounds",
                "ratioConstraint is not achievable within role replica bounds",
            )
        };
        if den.max_replicas > 0 && f64::from(num.min_replicas) / f64::from(den.max_replicas) > hi {
            errs.push(unreachable());
        }
        if den.min_replicas > 0 && f64::from(num.max_replicas) / f64::from(den.min_replicas) < lo {
            errs.push(unreachable());
        }
    }
}

/// AP-7..AP-21 on a disaggregated target; roles in name order (upstream walks a Go map).
fn ap_7_21_disaggregated(spec: &AutoscalingPolicySpec, errs: &mut ErrorList) {
    let Some(t) = &spec.disaggregated_target else {
        return;
    };
    let spec_metrics = spec.metrics.as_deref().unwrap_or_default();
    for (name, p) in &t.roles {
        ap_7_13_role(name, p, spec_metrics, errs);
    }
    ap_14_21_ratio(t, errs);
}

/// Every v1.0 AutoscalingPolicy rule, in upstream's order.
///
/// `spec.behavior` is held to the pinned policy's PV-03..PV-08 (AP-22..AP-27).
///
/// AP-22: `spec.behavior.scaleDown.period` is within 0..30 minutes (the pinned policy's PV-03).
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], behavior: {scaleDown: {period: "31m"}}, disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], behavior: {scaleDown: {period: "30m"}}, disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}}`
///
/// AP-23: `spec.behavior.scaleDown.stabilizationWindow` is within 0..30 minutes (PV-04).
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], behavior: {scaleDown: {stabilizationWindow: "31m"}}, disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], behavior: {scaleDown: {stabilizationWindow: "30m"}}, disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}}`
///
/// AP-24: `spec.behavior.scaleUp.stablePolicy.period` is within 0..30 minutes (PV-05).
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], behavior: {scaleUp: {stablePolicy: {period: "31m"}}}, disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], behavior: {scaleUp: {stablePolicy: {period: "30m"}}}, disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}}`
///
/// AP-25: `spec.behavior.scaleUp.stablePolicy.stabilizationWindow` is within 0..30 minutes (PV-06).
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], behavior: {scaleUp: {stablePolicy: {stabilizationWindow: "31m"}}}, disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], behavior: {scaleUp: {stablePolicy: {stabilizationWindow: "30m"}}}, disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}}`
///
/// AP-26: `spec.behavior.scaleUp.panicPolicy.period` is within 0..30 minutes (PV-07).
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], behavior: {scaleUp: {panicPolicy: {period: "31m"}}}, disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], behavior: {scaleUp: {panicPolicy: {period: "30m"}}}, disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}}`
///
/// AP-27: `spec.behavior.scaleUp.panicPolicy.panicModeHold` is within 0..30 minutes (PV-08).
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], behavior: {scaleUp: {panicPolicy: {period: "10s", panicModeHold: "31m"}}}, disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: AutoscalingPolicy, metadata: {name: p}, spec: {metrics: [{name: rps, targetValue: "1"}], behavior: {scaleUp: {panicPolicy: {period: "10s", panicModeHold: "30m"}}}, disaggregatedTarget: {targetRef: {kind: ModelServing, name: ms}, roles: {prefill: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}, decode: {minReplicas: 1, maxReplicas: 4, metricSources: {rps: {prometheus: {serverURL: "http://p:9090", query: "sum(x)"}}}}}}}}`
pub fn validate_autoscaling(spec: &AutoscalingPolicySpec) -> ErrorList {
    let mut errs = ErrorList::new();
    ap_1_2_metrics(spec, &mut errs);
    ap_3_5_target(spec, &mut errs);
    ap_6_metrics_required(spec, &mut errs);
    ap_7_21_disaggregated(spec, &mut errs);
    if let Some(b) = &spec.behavior {
        behavior_rules(
            b,
            &["AP-22", "AP-23", "AP-24", "AP-25", "AP-26", "AP-27"],
            &mut errs,
        );
    }
    errs
}

/// `/validate/autoscalingpolicy`.
pub struct AutoscalingValidator;

impl Validator for AutoscalingValidator {
    type Object = ApObj;

    fn reads_old_object(&self) -> bool {
        false
    }

    fn validate(&self, req: &Request<ApObj>, _: &Context) -> Verdict {
        validate_autoscaling(&req.object.spec).into()
    }

    fn denial(&self, _: &Request<ApObj>, errors: &[FieldError]) -> Status {
        denial(errors)
    }
}

/// `/mutate/autoscalingpolicy`: the pinned defaults (PM-01..07).
pub struct AutoscalingDefaulter;

impl Mutator for AutoscalingDefaulter {
    type Object = ApObj;

    fn reads_old_object(&self) -> bool {
        false
    }

    fn mutate(&self, _: &Request<ApObj>, policy: &mut ApObj, _: &Context) -> Verdict {
        Verdict {
            applied: default_behavior(&mut policy.spec.behavior),
            ..Verdict::default()
        }
    }
}
