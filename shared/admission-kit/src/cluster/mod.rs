//! Layer 4, the API server: cluster state kept by watches or read from files ([`state`]),
//! certificates the service manages in Secrets (`managed`, feature `certificates`), self-registration of the webhook
//! configurations ([`registration`]).
//!
//! May use: [`crate::compat`], [`crate::review`], [`crate::server`].

pub mod backoff;
#[cfg(feature = "certificates")]
pub mod managed;
pub mod peers;
pub mod registration;
pub mod state;
