//! The common kit every admission webhook service is built from.
//!
//! A service is its rules plus a table of endpoints ([`App`]); the kit supplies the rest:
//!
//! - [`review`]: the AdmissionReview envelope (v1 and v1beta1);
//! - [`handler`]: typed [`Validator`]s and [`Mutator`]s, field errors turned into one denial,
//!   JSON Patches computed by diffing;
//! - [`field`]: Kubernetes-style field paths and errors;
//! - [`go`]: Go duration and quantity values as the upstream Go code reads them;
//! - [`state`]: the cluster-state lookup rules use (watch caches in `serve`, files in `review`);
//! - [`server`], [`tls`], [`metrics`], [`telemetry`]: HTTPS with certificate reload, limits,
//!   Prometheus metrics, JSON logs and OTLP traces, graceful shutdown;
//! - [`cli`]: the `serve`, `review` and `crd` commands.

pub mod app;
pub mod cli;
pub mod conns;
mod diff;
pub mod field;
pub mod fixtures;
pub mod fuzzing;
pub mod gates;
pub mod go;
pub mod handler;
pub mod idle;
pub mod managed;
pub mod metrics;
pub mod mtls;
pub mod object;
pub mod registration;
pub mod resources;
pub mod review;
pub mod selector;
pub mod server;
mod skeleton;
pub mod state;
pub mod telemetry;
pub mod tls;
pub mod trim;
pub mod validation;
pub mod variants;

pub use app::{
    App, DecodeErrors, FailurePolicy, ObjectSelector, SelectorOperator, SideEffects, Target,
    WebhookKind,
};
pub use field::{BadValue, ErrorList, ErrorType, FieldError, Path};
pub use handler::{Context, Mutator, Request, Validator, Verdict};
pub use object::SpecView;
pub use review::{Operation, Status};
