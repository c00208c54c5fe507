//! The in-process quota tree is derived once per set of state objects.

use std::sync::Arc;

use admission_kit::Context;
use admission_kit::cluster::state::StaticState;
use scheduling_webhook::quota::{QuotaCache, state_quotas};
use serde_json::json;

fn state(max_cpu: &str) -> Context {
    let mut s = StaticState::default();
    s.add_value(
        json!({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
        "metadata": {"name": "team", "namespace": "team"}, "spec": {"max": {"cpu": max_cpu}}}),
    )
    .unwrap();
    Context::new(Arc::new(s))
}

fn max_cpu(cache: &QuotaCache, c: &Context) -> String {
    let q = state_quotas(cache, c).unwrap();
    q.objects[0].spec.max.as_ref().unwrap()["cpu"].0.clone()
}

#[test]
fn derived_once_per_set_of_objects_and_again_for_others() {
    let (a, b) = (state("10"), state("20"));
    let cache = QuotaCache::default();
    let first = state_quotas(&cache, &a).unwrap();
    assert!(
        Arc::ptr_eq(&first, &state_quotas(&cache, &a).unwrap()),
        "the same objects: the same derivation"
    );
    // Another state's objects, even of the same quota: derived from them, never the cached.
    for _ in 0..3 {
        assert_eq!(max_cpu(&cache, &a), "10");
        assert_eq!(max_cpu(&cache, &b), "20");
    }
    assert!(!Arc::ptr_eq(&first, &state_quotas(&cache, &a).unwrap()));
    assert!(
        state_quotas(&cache, &a)
            .unwrap()
            .topology
            .quotas
            .contains_key("team")
    );
}
