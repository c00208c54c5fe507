//! The in-process paths whose instructions per review are guarded: each a service, an endpoint
//! and a bench payload of the repository. `review-loop` runs one of them; `cargo xtask
//! instructions` runs each under callgrind and compares with `baseline.json`.

use std::path::{Path, PathBuf};

/// One measured path.
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    /// Row name (`registry validate Model`).
    pub name: &'static str,
    /// Service whose endpoint table serves it.
    pub service: &'static str,
    /// Endpoint path.
    pub path: &'static str,
    /// Review body, relative to the workspace root.
    pub body: &'static str,
    /// The cluster state the service reads (`serve --state`), as the bench serves the path.
    pub state: Option<&'static str>,
    /// Through the kit's HTTP router, and how (`review-loop --served`): `plain`, `traceparent`
    /// or `exported`; the handler alone when `None`.
    pub served: Option<&'static str>,
}

/// Every guarded path.
pub const PATHS: [Measured; 12] = [
    Measured {
        name: "registry validate Model (4.6 KB)",
        service: "registry-webhook",
        path: "/validate-registry-volcano-sh-v1alpha1-model",
        body: "services/registry-webhook/benches/model-review.json",
        state: Some("services/registry-webhook/examples/state.yaml"),
        served: None,
    },
    Measured {
        name: "registry mutate Model (4.5 KB)",
        service: "registry-webhook",
        path: "/mutate-registry-volcano-sh-v1alpha1-model",
        body: "services/registry-webhook/benches/model-review-mutate.json",
        state: Some("services/registry-webhook/examples/state.yaml"),
        served: None,
    },
    Measured {
        name: "node-config mutate node status (22 KB)",
        service: "node-config-webhook",
        path: "/mutate-node-status",
        body: "services/node-config-webhook/benches/node-status-review.json",
        state: Some("services/node-config-webhook/examples/state.yaml"),
        served: None,
    },
    Measured {
        name: "training validate PyTorchJob (4.9 KB)",
        service: "training-webhook",
        path: "/validate-kubeflow-org-v1-pytorchjob",
        body: "services/training-webhook/benches/pytorchjob-review.json",
        state: None,
        served: None,
    },
    // A mutator that keeps its object as JSON (`Value`), Go's decode checked member by member.
    Measured {
        name: "training mutate TrainJob, Trainer v2.3 (2.9 KB)",
        service: "training-webhook",
        path: "/mutate-trainer-kubeflow-org-v1alpha1-trainjob",
        body: "services/training-webhook/benches/trainjob-review-mutate.json",
        state: Some("services/training-webhook/examples/state.yaml"),
        served: None,
    },
    Measured {
        name: "scheduling validate Pod (1.7 KB)",
        service: "scheduling-webhook",
        path: "/validate-pod",
        body: "services/scheduling-webhook/benches/pod-review.json",
        state: Some("services/scheduling-webhook/examples/state.yaml"),
        served: None,
    },
    Measured {
        name: "scheduling mutate Pod (1.7 KB)",
        service: "scheduling-webhook",
        path: "/mutate-pod",
        body: "services/scheduling-webhook/benches/pod-review.json",
        state: Some("services/scheduling-webhook/examples/state.yaml"),
        served: None,
    },
    // The same review through the router: what the endpoint's layers add, and what tracing
    // adds to them with export off (the API server's `traceparent` read and nothing more) and
    // on (the review span made, filled and handed to the exporter).
    Measured {
        name: "registry validate Model, served (4.6 KB)",
        service: "registry-webhook",
        path: "/validate-registry-volcano-sh-v1alpha1-model",
        body: "services/registry-webhook/benches/model-review.json",
        state: Some("services/registry-webhook/examples/state.yaml"),
        served: Some("plain"),
    },
    Measured {
        name: "registry validate Model, served, traceparent, export off (4.6 KB)",
        service: "registry-webhook",
        path: "/validate-registry-volcano-sh-v1alpha1-model",
        body: "services/registry-webhook/benches/model-review.json",
        state: Some("services/registry-webhook/examples/state.yaml"),
        served: Some("traceparent"),
    },
    Measured {
        name: "registry validate Model, served, traceparent, exported (4.6 KB)",
        service: "registry-webhook",
        path: "/validate-registry-volcano-sh-v1alpha1-model",
        body: "services/registry-webhook/benches/model-review.json",
        state: Some("services/registry-webhook/examples/state.yaml"),
        served: Some("exported"),
    },
    // The fixed part of a review alone: a validator that admits without looking, on the Model
    // review's endpoint kind (the object is skipped, not decoded), by itself and through the
    // router. What every path pays before its rules, and what cutting it is measured by.
    Measured {
        name: "trivial validator (4.6 KB)",
        service: TRIVIAL,
        path: TRIVIAL_PATH,
        body: "services/registry-webhook/benches/model-review.json",
        state: None,
        served: None,
    },
    Measured {
        name: "trivial validator, served (4.6 KB)",
        service: TRIVIAL,
        path: TRIVIAL_PATH,
        body: "services/registry-webhook/benches/model-review.json",
        state: None,
        served: Some("plain"),
    },
];

/// The service name of the trivial validator's endpoint table.
const TRIVIAL: &str = "trivial";
/// Its one endpoint.
const TRIVIAL_PATH: &str = "/validate-anything";

/// Admits every review without reading its object.
struct Admit;

impl admission_kit::Validator for Admit {
    type Object = serde::de::IgnoredAny;

    fn validate(
        &self,
        _: &admission_kit::Request<Self::Object>,
        _: &admission_kit::Context,
    ) -> admission_kit::Verdict {
        admission_kit::Verdict::default()
    }
}

/// One validating endpoint for Kthena's Model that admits everything.
fn trivial() -> admission_kit::App {
    admission_kit::App::new(TRIVIAL, "A validator that admits without looking.").validate(
        TRIVIAL_PATH,
        admission_kit::Target::resource("registry.volcano.sh", "v1alpha1", "models", "Model"),
        admission_kit::FailurePolicy::Fail,
        Admit,
    )
}

/// The endpoint table of `service`.
pub fn app(service: &str) -> Option<admission_kit::App> {
    match service {
        "registry-webhook" => Some(registry_webhook::app()),
        "node-config-webhook" => Some(node_config_webhook::app()),
        "training-webhook" => Some(training_webhook::app()),
        "scheduling-webhook" => Some(scheduling_webhook::app()),
        TRIVIAL => Some(trivial()),
        _ => None,
    }
}

/// The committed baseline: row name → instructions per review.
pub fn baseline_file(root: &Path) -> PathBuf {
    root.join("dev/instructions/baseline.json")
}
