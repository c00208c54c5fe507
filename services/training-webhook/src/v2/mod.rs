//! Kubeflow Trainer v2.3 (`trainer.kubeflow.org/v1alpha1`, `docs/spec/trainer-v2.md`): the
//! TrainJob defaulter and validator, and the TrainingRuntime and ClusterTrainingRuntime
//! validators, at upstream's paths beside the v1 jobs.

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

impl<'de, T: DeserializeOwned> Deserialize<'de> for Doc<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Value::deserialize(d)?;
        let typed = T::deserialize(&raw).map_err(D::Error::custom)?;
        Ok(Self { typed, raw })
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
    Status::failure(403, "Forbidden", admission_kit::field::aggregate(errors))
}
