//! Kubeflow Trainer v2.3 (`trainer.kubeflow.org/v1alpha1`, `docs/spec/trainer-v2.md`): the
//! TrainJob defaulter and validator, and the TrainingRuntime and ClusterTrainingRuntime
//! validators, at upstream's paths beside the v1 jobs.

mod crd_schema;
pub mod defaulter;
pub mod gojson;
pub mod info;
pub mod plugins;
pub mod runtimes;
pub mod torchtune;
pub mod trainjob;
pub mod types;

use admission_kit::{FieldError, Status};
use serde::de::{DeserializeOwned, Deserializer, Error as _};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An object decoded twice: typed for the rules, and as sent, since upstream prints parts of it
/// the way Go re-encodes them ([`gojson`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Doc<T> {
    /// The typed object.
    pub typed: T,
    /// The object as sent.
    pub raw: Value,
}

impl<'de, T: GoDecoded> Deserialize<'de> for Doc<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Value::deserialize(d)?;
        check_kind::<T>(&raw).map_err(D::Error::custom)?;
        // Go's reading of the object: nulls as zero values, wrong JSON types refused.
        let mut view = gojson::go_decode_view(&raw, T::LAYOUT, "").map_err(D::Error::custom)?;
        // An absent `metadata` or `spec` is Go's zero value.
        if let Some(m) = view.as_object_mut() {
            for k in ["metadata", "spec"] {
                m.entry(k)
                    .or_insert_with(|| Value::Object(serde_json::Map::new()));
            }
        }
        let typed = T::deserialize(&view).map_err(D::Error::custom)?;
        Ok(Self { typed, raw })
    }
}

/// A kind decoded as Go decodes it, by its layout ([`gojson`]).
pub trait GoDecoded: DeserializeOwned + kube::Resource<DynamicType = ()> {
    /// The kind's Go layout.
    const LAYOUT: &'static gojson::Ty;
}

impl GoDecoded for types::TrainJob {
    const LAYOUT: &'static gojson::Ty = &gojson::TRAIN_JOB;
}

impl GoDecoded for types::TrainingRuntime {
    const LAYOUT: &'static gojson::Ty = &gojson::RUNTIME;
}

impl GoDecoded for types::ClusterTrainingRuntime {
    const LAYOUT: &'static gojson::Ty = &gojson::RUNTIME;
}

/// Whether `raw` decodes as a `T` (kind, version and every field's JSON type), without building
/// the typed object: for the defaulter, which edits the JSON.
pub fn check_decodes<T: GoDecoded>(raw: &Value) -> Result<(), String> {
    check_kind::<T>(raw)?;
    gojson::go_decode_check(raw, T::LAYOUT, "")
}

/// What controller-runtime's decoder refuses before the object is typed: an `apiVersion` or
/// `kind` that is not a string, or a kind and version other than the endpoint's (either may be
/// absent: the decoder then takes the endpoint's). Its texts name Go's scheme, which differs
/// from build to build; ours name the same facts (spec Q-9).
fn check_kind<T: kube::Resource<DynamicType = ()>>(raw: &Value) -> Result<(), String> {
    let want_version = T::api_version(&());
    let want_kind = T::kind(&());
    let field = |key: &str| -> Result<Option<&str>, String> {
        match raw.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str()).filter(|s| !s.is_empty())),
            Some(other) => Err(format!(
                "couldn't get version/kind; json parse error: json: cannot unmarshal {} into Go struct field .{key} of type string",
                admission_kit::compat::go::go_json_kind(other)
            )),
        }
    };
    let version = field("apiVersion")?.unwrap_or(&want_version);
    let kind = field("kind")?.unwrap_or(&want_kind);
    if version == want_version && kind == want_kind {
        Ok(())
    } else if version == want_version {
        Err(format!(
            "unable to decode {version}, Kind={kind} into *v1alpha1.{want_kind}"
        ))
    } else {
        Err(format!(
            "no kind \"{kind}\" is registered for version \"{version}\""
        ))
    }
}

impl<T> Serialize for Doc<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.raw.serialize(s)
    }
}

impl<T> Doc<T> {
    /// The raw value at a JSON pointer (`None` when absent).
    pub fn at(&self, pointer: &str) -> Option<&Value> {
        self.raw.pointer(pointer)
    }
}

/// controller-runtime's denial of a validator's error list: 403 Forbidden with the list
/// aggregated (`[e1, e2]` when more than one).
pub fn denial(errors: &[FieldError]) -> Status {
    Status::failure(
        403,
        "Forbidden",
        admission_kit::review::field::aggregate(errors),
    )
}
