//! Quotas added to the state one at a time (admission-check remembers each quota it admits)
//! extend the last derivation of the quota tree in place instead of deriving it anew per quota,
//! which made n quotas cost n² (its own process: the derivation cache is process-wide).

use std::sync::Arc;

use admission_kit::Context;
use admission_kit::cluster::state::GrowingState;
use quota_protocol::tree::Topology;
use scheduling_webhook::quota::{QuotaCache, StateQuotas, state_quotas};
use serde_json::json;

fn add(state: &GrowingState, name: &str, namespace: &str, parent: &str) {
    let q = json!({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": namespace,
            "labels": {"quota.scheduling.koordinator.sh/parent": parent},
            "annotations": {"quota.scheduling.koordinator.sh/namespaces": "[\"apps\"]"}},
        "spec": {"max": {"cpu": "1"}}});
    state.add_value(q).unwrap();
}

/// The derivation's address (it is dropped: the next one may extend it in place) and whether
/// its tree is the one derived from scratch.
fn derive(cache: &QuotaCache, ctx: &Context) -> (usize, Arc<StateQuotas>) {
    let d = state_quotas(cache, ctx).unwrap();
    let objects: Vec<_> = d.objects.iter().map(|q| &**q).collect();
    assert_eq!(d.topology, Topology::from_objects(objects.iter().copied()));
    (Arc::as_ptr(&d) as usize, d)
}

#[test]
fn added_quotas_extend_the_derivation_as_a_new_one_would() {
    let state = Arc::new(GrowingState::default());
    let ctx = Context::new(state.clone());
    let cache = QuotaCache::default();
    add(&state, "m", "quotas", "koordinator-root-quota");
    let (first, d) = derive(&cache, &ctx);
    drop(d);
    for name in ["x", "c", "a", "k"] {
        add(&state, name, "quotas", "m");
        let (at, d) = derive(&cache, &ctx);
        assert_eq!(at, first, "{name}: extended in place");
        drop(d);
    }
    let (_, d) = derive(&cache, &ctx);
    assert_eq!(d.objects.len(), 5);
    // `apps` is bound by the first quota by name, though `a` came after `m`, `x` and `c`.
    assert_eq!(d.topology.namespaces["apps"], "a");
    assert_eq!(d.topology.children["m"].len(), 4);
    drop(d);

    // A second quota named `c` (another namespace): derived anew, and still right.
    add(&state, "c", "other", "x");
    let (at, d) = derive(&cache, &ctx);
    assert_ne!(at, first, "derived anew");
    assert_eq!(d.objects.len(), 6);
    // While a review holds the derivation, a new quota derives anew rather than change it.
    add(&state, "b", "quotas", "m");
    let (_, held) = (at, d);
    let (at2, d2) = derive(&cache, &ctx);
    assert_ne!(at2, Arc::as_ptr(&held) as usize);
    assert_eq!(held.objects.len(), 6, "the held derivation is unchanged");
    assert_eq!(d2.objects.len(), 7);
}
