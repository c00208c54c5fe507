//! decode → rules → encode for a realistic ~5 KB Model review (two backends, env, resources,
//! affinity, engine config, LoRA adapters, model-level autoscaling), validating and mutating.
//!
//! Run: `cargo bench -p registry-webhook --bench review`.
// criterion_group! defines an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;

use admission_kit::review::handler::{Context, review_body};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const MODEL_REVIEW: &str = include_str!("model-review.json");

fn mutate_input() -> Vec<u8> {
    // Drop what the defaulter fills in, so the mutating path computes a real patch.
    let mut v: serde_json::Value = serde_json::from_str(MODEL_REVIEW).unwrap_or_default();
    let spec = &mut v["request"]["object"]["spec"];
    if let Some(m) = spec.as_object_mut() {
        m.remove("costExpansionRatePercent");
    }
    if let Some(b) = spec["backends"][1].as_object_mut() {
        b.remove("scaleToZeroGracePeriod");
    }
    serde_json::to_vec(&v).unwrap_or_default()
}

fn bench(c: &mut Criterion) {
    let app = registry_webhook::app();
    let ctx = Context::default();
    let mut g = c.benchmark_group("model-review");
    g.throughput(Throughput::Bytes(MODEL_REVIEW.len() as u64));
    for (name, path, body) in [
        (
            "validate",
            "/validate-registry-volcano-sh-v1alpha1-model",
            MODEL_REVIEW.as_bytes().to_vec(),
        ),
        (
            "mutate",
            "/mutate-registry-volcano-sh-v1alpha1-model",
            mutate_input(),
        ),
    ] {
        let Some(ep) = app.endpoint(path) else {
            continue;
        };
        g.bench_function(name, |b| {
            b.iter(|| {
                let answer = review_body(ep.handler.as_ref(), black_box(&body), &ctx);
                black_box(answer.map(|a| a.review.to_bytes()))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
