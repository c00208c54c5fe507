//! Layer 3, serving: HTTPS with limits and routing by the endpoint table ([`http`]), TLS from
//! files and self-made CAs ([`tls`], [`mtls`]), connection age and idleness ([`conns`], [`idle`]),
//! the in-flight budget ([`budget`]) and returning memory after bursts ([`trim`]), Prometheus
//! metrics ([`metrics`]), JSON logs and OTLP traces ([`telemetry`]) and their context across
//! calls ([`trace`]), the runtime's threads ([`runtime`]).
//!
//! May use: [`crate::compat`], [`crate::review`].

pub mod budget;
pub mod conns;
pub mod http;
pub mod idle;
pub mod metrics;
pub mod mtls;
pub mod runtime;
pub mod telemetry;
pub mod tls;
pub mod trace;
pub mod trim;
