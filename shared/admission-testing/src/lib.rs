//! Test support for the services built on `admission-kit`, kept out of the kit so that production
//! binaries do not carry it (services list this crate under `[dev-dependencies]` only):
//!
//! - [`fixtures`]: the case runner for `../shared/fixtures/{reviews,examples}/<domain>/`, in
//!   process or through a service binary's `review` command;
//! - [`fuzzing`]: the entry points of the libFuzzer targets in `fuzz/`;
//! - [`variants`]: the mutation fuzzer the test command runs over every domain's cases.

pub mod fixtures;
pub mod fuzzing;
pub mod variants;
