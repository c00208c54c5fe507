//! `/mutate-reservation` (spec §6, RM): ClusterColocationProfiles applied to Reservations.

use std::collections::BTreeMap;

use admission_kit::{Context, Mutator, Operation, Request, Verdict};

use crate::profile;
use crate::types::Reservation;

/// `/mutate-reservation`.
pub struct ReservationMutator;

fn apply(r: &mut Reservation, ctx: &Context) -> Result<bool, String> {
    let labels = r.metadata.labels.clone().unwrap_or_default();
    let profiles = profile::matching(ctx, &labels, None)?;
    let mut applied = false;
    for p in &profiles {
        if !profile::applies(&p.spec)? {
            continue;
        }
        applied = true;
        profile::apply_metadata(&p.spec, &mut r.metadata);
        if let Some(q) = p.spec.qos_class.as_ref().filter(|s| !s.is_empty()) {
            r.metadata
                .labels
                .get_or_insert_with(BTreeMap::new)
                .insert("koordinator.sh/qosClass".into(), q.clone());
        }
        if let Some(kp) = p.spec.koordinator_priority {
            r.metadata
                .labels
                .get_or_insert_with(BTreeMap::new)
                .insert("koordinator.sh/priority".into(), kp.to_string());
        }
        if let Some(t) = r.spec.template.as_mut() {
            // Go's template always has a pod spec; ours keeps an absent one absent unless the
            // profile writes into it (an empty spec added would be a no-op patch operation).
            let mut spec = t.spec.clone().unwrap_or_default();
            profile::apply_pod_spec(&p.spec, &mut spec, ctx)?;
            if t.spec.is_some() || spec != Default::default() {
                t.spec = Some(spec);
            }
        }
        if let Some(patch) = &p.spec.patch {
            let mut v = serde_json::to_value(&*r).map_err(|e| e.to_string())?;
            profile::merge_patch(&mut v, patch);
            *r = serde_json::from_value(v)
                .map_err(|e| format!("failed to apply profile patch: {e}"))?;
        }
    }
    Ok(applied)
}

impl Mutator for ReservationMutator {
    type Object = Reservation;

    /// A quantity Go's decoder refuses fails the decode here too; so do a `spec.ttl` that is not
    /// a Go duration and a `spec.expires` that is not an RFC 3339 time (the CRD declares free
    /// strings, and the mutator sees them before the schema).
    fn check_decoded(&self, r: &Reservation) -> Result<(), String> {
        use admission_kit::compat::go::{check_metav1_duration, check_metav1_time};
        let null = serde_json::Value::Null;
        check_metav1_duration(r.spec.ttl.as_ref().unwrap_or(&null))?;
        check_metav1_time(r.spec.expires.as_ref().unwrap_or(&null))?;
        let pod = r.spec.template.as_ref().and_then(|t| t.spec.as_ref());
        pod.map_or(Ok(()), |p| {
            admission_kit::compat::resources::check_pod_spec("spec.template.spec", p)
        })
        .map_err(|e| e.to_string())
    }

    fn mutate(&self, req: &Request<Reservation>, r: &mut Reservation, ctx: &Context) -> Verdict {
        admission_kit::server::metrics::koord::timed_with(
            "mutate",
            "reservation",
            req.operation.as_str(),
            "ClusterColocationProfile",
            || reservation_profiles(req, r, ctx),
            Verdict::allowed,
        )
    }
}

/// The body of the handler, timed under upstream's plugin name `ClusterColocationProfile`.
///
/// RM-1: a new Reservation's template gets the colocation profiles that select it, as PM-1
/// gives them to Pods, except that a profile's namespace selector is not consulted.
///
/// State: `{apiVersion: config.koordinator.sh/v1alpha1, kind: ClusterColocationProfile, metadata: {name: colocate}, spec: {selector: {matchLabels: {colocate: "true"}}, labels: {team: a}}}`
///
/// Mutated: `{apiVersion: scheduling.koordinator.sh/v1alpha1, kind: Reservation, metadata: {name: r, labels: {colocate: "true"}}, spec: {template: {spec: {containers: [{name: c, image: busybox}]}}, owners: [{object: {name: p}}], ttl: 1h}}`
///
/// Admitted: `{apiVersion: scheduling.koordinator.sh/v1alpha1, kind: Reservation, metadata: {name: r2}, spec: {template: {spec: {containers: [{name: c, image: busybox}]}}, owners: [{object: {name: p}}], ttl: 1h}}`
fn reservation_profiles(req: &Request<Reservation>, r: &mut Reservation, ctx: &Context) -> Verdict {
    if req.resource.resource != "reservations"
        || req.sub_resource.as_deref().is_some_and(|s| !s.is_empty())
        || req.operation != Operation::Create
    {
        return Verdict::default();
    }
    match apply(r, ctx) {
        Ok(true) => Verdict {
            applied: vec!["RM-1"],
            ..Verdict::default()
        },
        Ok(false) => Verdict::default(),
        Err(e) => Verdict::errored("RM-1", 500, e),
    }
}
