//! Test support for the services built on `admission-kit`, kept out of the kit so that production
//! binaries do not carry it (services list this crate under `[dev-dependencies]` only):
//!
//! - [`fixtures`]: the case runner for `fixtures/{reviews,examples}/<domain>/`, in
//!   process or through a service binary's `review` command;
//! - [`fuzzing`]: the entry points of the libFuzzer targets in `fuzz/`;
//! - [`variants`]: the mutation fuzzer the test command runs over every domain's cases;
//! - [`request`]: a review request for calling a rule directly in a unit test.

pub mod fixtures;
pub mod fuzzing;
pub mod variants;

use admission_kit::review::envelope::{Gvk, Gvr};
use admission_kit::{Operation, Request};
use serde_json::Value;

/// A review request for calling a rule directly: uid `u`, namespace `ns`, `resource`, the
/// object's own name, `obj` (and `old`) decoded as `T`. Panics on an object `T` cannot decode:
/// a test's own input is wrong then.
pub fn request<T: serde::de::DeserializeOwned>(
    resource: &str,
    op: Operation,
    obj: Value,
    old: Option<Value>,
) -> Request<T> {
    Request {
        uid: "u".into(),
        kind: Gvk::default(),
        resource: Gvr {
            resource: resource.into(),
            ..Gvr::default()
        },
        sub_resource: None,
        name: obj["metadata"]["name"].as_str().unwrap_or_default().into(),
        namespace: Some("ns".into()),
        operation: op,
        user_info: Default::default(),
        dry_run: false,
        object: serde_json::from_value(obj).expect("the test's object decodes"),
        old_object: old.map(|o| serde_json::from_value(o).expect("the test's old object decodes")),
    }
}
