//! `/validate-pod-binding` (spec §5, PB): who may bind pods, when the gate and flags ask for it.

use std::sync::Arc;

use admission_kit::server::metrics::koord;
use admission_kit::{Context, Operation, Request, Status, Validator, Verdict};
use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use crate::options::{Options, entries};

/// `/validate-pod-binding`, under the service's options.
pub struct BindingValidator(pub Arc<Options>);

/// Whether PB is on: its gate, and a list of users allowed to bind.
pub fn admission_on(o: &Options, ctx: &Context) -> bool {
    ctx.gates().enabled("BindingAdmissionWebhook")
        && entries(&o.binding_admission_user_name).next().is_some()
}

impl Validator for BindingValidator {
    /// The Binding object; only the request's fields are read.
    type Object = Value;

    /// PB-6: a Binding by a user outside the allowed list is refused (403) for a Pod in scope
    /// (its namespace listed, no bypass label or annotation, not a dry run).
    ///
    /// Options: `--feature-gates=BindingAdmissionWebhook=true --binding-admission-user-name=koord-scheduler --binding-admission-namespaces=* --subresource=binding`
    ///
    /// State: `{apiVersion: v1, kind: Pod, metadata: {name: p, namespace: team-a}, spec: {containers: [{name: c, image: busybox}]}}`
    ///
    /// State: `{apiVersion: v1, kind: Pod, metadata: {name: q, namespace: kube-system}, spec: {containers: [{name: c, image: busybox}]}}`
    ///
    /// Refused: `{apiVersion: v1, kind: Binding, metadata: {name: p, namespace: team-a}, target: {kind: Node, name: n1}}`
    ///
    /// Admitted: `{apiVersion: v1, kind: Binding, metadata: {name: q, namespace: kube-system}, target: {kind: Node, name: n1}}`
    fn validate(&self, req: &Request<Value>, ctx: &Context) -> Verdict {
        let o = &self.0;
        if !admission_on(o, ctx) {
            return Verdict::default();
        }
        // Each outcome counted as upstream's `binding_admission_decisions_total{decision}`.
        let decide = |decision: &str| {
            koord::binding_decision(decision);
            Verdict::default()
        };
        if req.resource.resource != "pods"
            || req.sub_resource.as_deref() != Some("binding")
            || req.operation != Operation::Create
        {
            return decide("out_of_scope");
        }
        let username = req.user_info.username.as_deref().unwrap_or_default();
        if entries(&o.binding_admission_user_name).any(|u| username.contains(u)) {
            return decide("allowed_username");
        }
        let ns = req.namespace.as_deref().unwrap_or_default();
        if entries(&o.binding_admission_exclude_namespaces).any(|n| n == ns) {
            return decide("excluded_ns");
        }
        if !entries(&o.binding_admission_namespaces).any(|n| n == "*" || n == ns) {
            return decide("out_of_scope");
        }
        let Some(pod) = ctx.get::<Pod>(Some(ns), &req.name).ok().flatten() else {
            return decide("out_of_scope");
        };
        let has = |keys: &[String], map: &Option<std::collections::BTreeMap<String, String>>| {
            entries(keys).any(|k| map.as_ref().is_some_and(|m| m.contains_key(k)))
        };
        if has(&o.binding_admission_bypass_labels, &pod.metadata.labels) {
            return decide("bypass_label");
        }
        if has(
            &o.binding_admission_bypass_annotations,
            &pod.metadata.annotations,
        ) {
            return decide("bypass_annotation");
        }
        if req.dry_run || o.binding_admission_dry_run {
            return decide("dry_run");
        }
        koord::binding_decision("denied");
        Verdict {
            refusal: Some((
                "PB-6",
                Status::failure(
                    403,
                    "Forbidden",
                    "binding denied: username is not in the allowed list",
                ),
            )),
            ..Verdict::default()
        }
    }

    fn allowed_status(&self) -> Option<Status> {
        Some(Status::allowed())
    }
}
