//! decode → rules → encode of a realistic PyTorchJob review (a Master and three Workers with
//! torchrun, env, GPU and RDMA resources, affinity, tolerations and volumes).
//!
//! Run: `cargo bench -p training-webhook --bench review`.
// criterion_group! defines an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;

use admission_kit::review::handler::{Context, review_body};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const PYTORCHJOB_REVIEW: &str = include_str!("pytorchjob-review.json");

fn bench(c: &mut Criterion) {
    let app = training_webhook::app();
    let ctx = Context::default();
    let mut g = c.benchmark_group("pytorchjob-review");
    g.throughput(Throughput::Bytes(PYTORCHJOB_REVIEW.len() as u64));
    if let Some(ep) = app.endpoint("/validate-kubeflow-org-v1-pytorchjob") {
        g.bench_function("validate", |b| {
            b.iter(|| {
                let answer = review_body(
                    ep.handler.as_ref(),
                    black_box(PYTORCHJOB_REVIEW.as_bytes()),
                    &ctx,
                );
                black_box(answer.map(|a| a.review.to_bytes()))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
