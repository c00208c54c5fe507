//! The fuzz target's entry point (feature `testing`, never in the service's binary): the deletion
//! and eviction webhooks on arbitrary bytes, over a cluster in memory that holds one opted-in,
//! running Pod (`serving/llm-0`) whose drain endpoint answers as the input's first byte says.
//! What must hold for any input: no panic, no hang, and every review either answered with an
//! AdmissionReview that encodes or refused with a review error.

use std::sync::Arc;
use std::time::Duration;

use admission_kit::review::handler::{Context, review_body};
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;

use crate::call::{Answer, Caller, Target};
use crate::cluster::Memory;
use crate::options::Options;
use crate::rules::Drainer;

/// A drain endpoint that always gives the same answer, at once.
struct Answers(Answer);

impl Caller for Answers {
    fn drain<'a>(&'a self, _: &'a Target, _: Duration) -> BoxFuture<'a, Answer> {
        Box::pin(std::future::ready(self.0.clone()))
    }
}

/// The Pod the cluster holds, which reviews may name (or not).
fn pod() -> Option<Pod> {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "llm-0", "namespace": "serving", "uid": "u-1",
                     "labels": {crate::LABEL: "true"},
                     "annotations": {crate::PORT_ANNOTATION: "8080"}},
        "spec": {"nodeName": "node-a", "containers": [{"name": "server", "image": "x"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.7"}
    }))
    .ok()
}

/// The two endpoints under each drain answer, built once, and a runtime to decide on: every
/// future of the in-memory cluster and caller completes at once, so a review is decided without
/// waiting (a fresh runtime per review made the target twenty times slower).
pub struct Fuzzer {
    runtime: tokio::runtime::Runtime,
    apps: Vec<admission_kit::App>,
}

impl Fuzzer {
    /// The apps for the three answers, over one cluster each.
    pub fn new() -> Result<Self, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let options = Options::with(&[("drain-record-namespace", "ops")])?;
        let answers = [
            Answer::Done,
            Answer::Draining(Some("checkpointing".into())),
            Answer::Unanswered("connection refused".into()),
        ];
        let apps = answers
            .into_iter()
            .map(|answer| {
                let cluster = Memory::default();
                if let (Some(p), Ok(mut pods), Ok(mut nodes)) =
                    (pod(), cluster.pods.lock(), cluster.nodes.lock())
                {
                    pods.insert("serving/llm-0".into(), p);
                    nodes.push("node-a".into());
                }
                let drainer = Drainer::new(
                    Arc::new(cluster),
                    Arc::new(Answers(answer)),
                    options.clone(),
                );
                crate::app_with(drainer)
            })
            .collect();
        Ok(Self { runtime, apps })
    }

    /// Runs `data` through one of the two endpoints: its first byte picks the endpoint and the
    /// drain endpoint's answer, the rest is the request body, decoded, decided and encoded as the
    /// server does.
    pub fn run(&self, data: &[u8]) {
        let Some((&pick, body)) = data.split_first() else {
            return;
        };
        let app = &self.apps[usize::from(pick) % self.apps.len()];
        let endpoint = &app.endpoints[usize::from(pick / 3) % app.endpoints.len()];
        let _in = self.runtime.enter();
        if let Ok(answer) = review_body(&*endpoint.handler, body, &Context::default()) {
            // The answer must encode: it is what the API server reads.
            if serde_json::to_vec(&answer.review).is_err() {
                panic!("an answer that does not encode");
            }
        }
    }
}
