//! Drain before delete (`docs/lifecycle-webhook.md`): a Pod that opts in is asked to drain when it is
//! deleted or evicted, and the deletion is refused (and retried by its sender) until the Pod
//! says it has drained or its deadline passes. Rule functions and answers carry the ids LD-1 …
//! LD-11.
//!
//! - [`rules`]: the rules and the two validators;
//! - [`call`]: the drain call to the Pod's own IP;
//! - [`record`]: each drain's start and deadline, one record every replica shares;
//! - [`cluster`]: what the rules read and write through the API;
//! - [`options`]: the service's flags;
//! - `fuzzing` (feature `testing`): the fuzz target's entry point.

pub mod call;
pub mod cluster;
#[cfg(feature = "testing")]
pub mod fuzzing;
pub mod options;
pub mod record;
pub mod rules;

use std::sync::Arc;

use admission_kit::{App, FailurePolicy, Operation, SideEffects, Target};

/// The label a Pod opts in with (value `"true"`): the deletion webhook's objectSelector, so no
/// other deletion in the cluster reaches the service.
pub const LABEL: &str = "drain.admission-webhooks.io/enabled";
/// The drain port: a number or the name of a container port.
pub const PORT_ANNOTATION: &str = "drain.admission-webhooks.io/port";
/// The drain path (default [`rules::DEFAULT_PATH`]).
pub const PATH_ANNOTATION: &str = "drain.admission-webhooks.io/path";
/// How long the Pod may drain (a Go duration; `--default-drain-timeout`, at most
/// `--max-drain-timeout`).
pub const TIMEOUT_ANNOTATION: &str = "drain.admission-webhooks.io/timeout";

/// The service at its default options, with the API from its environment and drain calls
/// over HTTP.
pub fn app() -> Result<App, String> {
    app_from(options::Flags::default())
}

/// The service under these flags, with the API from its environment and drain calls over HTTP;
/// `Err` says why the flags cannot be used.
pub fn app_from(flags: options::Flags) -> Result<App, String> {
    Ok(app_with(rules::Drainer::new(
        Arc::new(cluster::Kube::from_environment()),
        Arc::new(call::Http::default()),
        flags.options()?,
    )))
}

/// The service with these rules' dependencies and options (tests give their own API client).
pub fn app_with(drainer: rules::Drainer) -> App {
    use FailurePolicy::Ignore;
    admission_kit::server::metrics::drains_known();
    let drainer = Arc::new(drainer);
    let pods = Target::resource("", "v1", "pods", "Pod").operations(&[Operation::Delete]);
    let evictions =
        Target::resource("", "v1", "pods/eviction", "Eviction").operations(&[Operation::Create]);
    App::new(
        "lifecycle-webhook",
        "Drain before delete: deletions and evictions of opted-in Pods wait until they have drained.",
    )
    // A drain call waits on a Pod: the API server's own limit backs up --review-deadline (≤ 1 s).
    .timeout_seconds(2)
    // Ignore: when the service is down, deletions proceed (without a drain).
    .validate("/validate-pod-deletion", pods, Ignore, rules::PodDeletion(drainer.clone()))
    .object_selector(LABEL, &["true"])
    .side_effects(SideEffects::NoneOnDryRun)
    .validate("/validate-pod-eviction", evictions, Ignore, rules::PodEviction(drainer))
    .side_effects(SideEffects::NoneOnDryRun)
}
