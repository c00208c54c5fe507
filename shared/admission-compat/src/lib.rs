//! Layer 1, Go compatibility: what upstream's Go code computes and prints, reproduced so our
//! decisions and messages match: Go durations and quantities ([`go`]), label selectors
//! ([`selector`]), feature gates ([`gates`]), resource arithmetic and the pod-request formula
//! ([`resources`]), apimachinery's name and percent checks ([`validation`]), `encoding/json`'s reading of `null` as
//! the zero value ([`zero`]).
//!
//! The admission kit's bottom layer, a crate of its own: it depends on no other crate of this
//! repository, and the kit shows it as `admission_kit::compat`.

pub mod gates;
pub mod go;
pub mod resources;
pub mod selector;
pub mod validation;
pub mod zero;
