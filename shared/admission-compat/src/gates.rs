//! Feature gates as Kubernetes components spell them: `--feature-gates=Name=true,Other=false`.
//!
//! A service declares its gates with defaults; an endpoint may depend on one (when off, the path
//! stays served and admits everything, said at start and in `admission_webhook_enabled`), and
//! rules read the gates that change their behaviour through `Context::gates` (the kit).

use std::collections::BTreeMap;

/// Why a `--feature-gates` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    /// The name is not a gate of this service.
    #[error("unrecognized feature gate: {0}")]
    Unknown(String),
    /// The value is not a boolean.
    #[error("invalid value of {0}={1}, err: strconv.ParseBool: parsing {1:?}: invalid syntax")]
    Value(String, String),
    /// An entry is not `Name=value`.
    #[error("missing bool value for {0}")]
    Missing(String),
}

/// A service's gates and their values.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeatureGates {
    values: BTreeMap<&'static str, bool>,
}

/// Go's `strconv.ParseBool`.
fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

impl FeatureGates {
    /// Gates with their defaults.
    pub fn new(defaults: &[(&'static str, bool)]) -> Self {
        Self {
            values: defaults.iter().copied().collect(),
        }
    }

    /// Applies `Name=bool,Name=bool` over the current values.
    pub fn apply(&mut self, spec: &str) -> Result<(), GateError> {
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, value) = part
                .split_once('=')
                .ok_or_else(|| GateError::Missing(part.to_owned()))?;
            let (name, value) = (name.trim(), value.trim());
            let key = self
                .values
                .keys()
                .find(|k| **k == name)
                .copied()
                .ok_or_else(|| GateError::Unknown(name.to_owned()))?;
            let v = parse_bool(value)
                .ok_or_else(|| GateError::Value(name.to_owned(), value.to_owned()))?;
            self.values.insert(key, v);
        }
        Ok(())
    }

    /// Whether `name` is on (an undeclared gate is off).
    pub fn enabled(&self, name: &str) -> bool {
        self.values.get(name).copied().unwrap_or(false)
    }

    /// Every gate and its value.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, bool)> + '_ {
        self.values.iter().map(|(k, v)| (*k, *v))
    }

    /// Whether the service declares any gate.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_kubernetes_components() {
        let mut g = FeatureGates::new(&[("A", true), ("B", false)]);
        g.apply("A=false, B=T").unwrap();
        assert!(!g.enabled("A"));
        assert!(g.enabled("B"));
        assert!(!g.enabled("C"));
        assert_eq!(g.apply("C=true"), Err(GateError::Unknown("C".into())));
        assert!(matches!(g.apply("A=yes"), Err(GateError::Value(..))));
        assert_eq!(g.apply("A"), Err(GateError::Missing("A".into())));
        g.apply("").unwrap();
    }
}
