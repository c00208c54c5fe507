//! Layer 2, one review: the AdmissionReview envelope ([`envelope`]), typed handlers and their
//! context ([`handler`]), field paths and errors ([`field`]), enforcement modes ([`mode`], [`enforcement`]), the JSON Patch by diff ([`diff`])
//! fitted onto the raw object ([`skeleton`]), objects decoded without their managed fields
//! ([`unmanaged`]), typed object helpers ([`object`]), the endpoint table ([`app`]) and the
//! cluster lookup interface rules read through ([`lookup`]).
//!
//! May use: [`crate::compat`].

pub mod app;
pub mod diff;
pub mod enforcement;
pub mod envelope;
pub mod field;
pub mod handler;
pub mod lookup;
pub mod mode;
pub mod object;

mod skeleton;
mod unmanaged;
