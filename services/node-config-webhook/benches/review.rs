//! decode → rules → encode of a Node status review (a realistic ~10 KB GPU Node, sent with its
//! old object as the API server does), amplifying cpu and memory: the hot path of the service,
//! since every kubelet heartbeat that changes status passes through it.
//!
//! Run: `cargo bench -p node-config-webhook --bench review`.
// criterion_group! defines an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;

use admission_kit::review::handler::{Context, review_body};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const NODE_STATUS_REVIEW: &str = include_str!("node-status-review.json");

fn bench(c: &mut Criterion) {
    let app = node_config_webhook::app();
    let ctx = Context::default();
    let mut g = c.benchmark_group("node-status-review");
    g.throughput(Throughput::Bytes(NODE_STATUS_REVIEW.len() as u64));
    if let Some(ep) = app.endpoint("/mutate-node-status") {
        g.bench_function("mutate", |b| {
            b.iter(|| {
                let answer = review_body(
                    ep.handler.as_ref(),
                    black_box(NODE_STATUS_REVIEW.as_bytes()),
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
