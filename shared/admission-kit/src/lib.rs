//! The common kit every admission webhook service is built from.
//!
//! A service is its rules plus a table of endpoints ([`App`]); the kit supplies the rest, in four
//! layers. Each layer uses only the layers listed before it (`tests/layers.rs` checks this, and
//! that no two modules import each other in a circle):
//!
//! 1. [`compat`]: Go compatibility, the values and texts upstream's Go code produces (durations,
//!    quantities, `%q`, label selectors, feature gates, resource arithmetic, apimachinery's name
//!    checks). Its own crate, `admission-compat`, shown here as a module (as `kube` shows its
//!    parts): it cannot use the kit, and crates that need only it (`quota-protocol`) link
//!    nothing else.
//! 2. [`review`]: one AdmissionReview from bytes to answer: the envelope, typed [`Validator`]s and
//!    [`Mutator`]s, field errors, the patch by diff, the endpoint table ([`App`]) and the lookup
//!    interface rules read the cluster through.
//! 3. [`server`]: serving reviews: HTTPS and its limits, TLS and certificate reload, connections,
//!    the in-flight budget, Prometheus metrics, logs and OTLP traces.
//! 4. [`cluster`]: talking to the API server: watch-cache state, managed certificates,
//!    self-registration.
//!
//! On top, [`cli`] is a service's `main`: the `serve`, `review`, `crd` and `endpoints` commands.
//!
//! Features: `serve` (default) is what a webhook process needs beyond its rules: the `serve`
//! command, with `certificates` (issuing them: `--tls-mode self-signed` and `managed`, and the
//! Lease electing the replica that writes them; rcgen and kube-lease-manager) and `otlp` (span
//! export; opentelemetry-otlp and its gRPC client). Every webhook offers all three as run-time
//! options, so every webhook binary links them; admission-check, which only runs the rules,
//! leaves them out.
//!
//! Test support (fixture runner, fuzz entry points, variant generator) is the separate
//! `admission-testing` crate, so production binaries do not carry it.

pub mod cli;
pub mod cluster;
pub use admission_compat as compat;
pub mod review;
pub mod server;

pub use review::app::{
    App, DecodeErrors, FailurePolicy, Keep, ObjectSelector, SelectorOperator, SideEffects, Target,
    WebhookKind,
};
pub use review::envelope::{Operation, Status};
pub use review::field::{BadValue, ErrorList, ErrorType, FieldError, Path};
pub use review::handler::{Context, Mutator, Request, Validator, Verdict};
pub use review::object::SpecView;
