//! Label selectors (`metav1.LabelSelector`) as `metav1.LabelSelectorAsSelector` validates and
//! matches them. Hand-written: kube-rs converts selectors to query strings for the API server but
//! has no in-process matcher with apimachinery's validation messages.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Why a selector is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(pub String);

/// A validated selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    reqs: Vec<(String, Op, Vec<String>)>,
    /// `matchLabels` and `matchExpressions` both empty: matches everything (as apimachinery's
    /// `labels.Everything()`); `None` selectors are handled by callers.
    empty: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

impl Selector {
    /// Validates a selector like `metav1.LabelSelectorAsSelector`.
    pub fn new(sel: &LabelSelector) -> Result<Self, SelectorError> {
        let mut reqs = Vec::new();
        for (k, v) in sel.match_labels.iter().flatten() {
            reqs.push((k.clone(), Op::In, vec![v.clone()]));
        }
        for e in sel.match_expressions.iter().flatten() {
            let values = e.values.clone().unwrap_or_default();
            let op = match e.operator.as_str() {
                "In" => Op::In,
                "NotIn" => Op::NotIn,
                "Exists" => Op::Exists,
                "DoesNotExist" => Op::DoesNotExist,
                other => {
                    return Err(SelectorError(format!(
                        "{other:?} is not a valid label selector operator"
                    )));
                }
            };
            match op {
                Op::In | Op::NotIn if values.is_empty() => {
                    return Err(SelectorError(
                        "for 'in', 'notin' operators, values set can't be empty".into(),
                    ));
                }
                Op::Exists | Op::DoesNotExist if !values.is_empty() => {
                    return Err(SelectorError(
                        "values set must be empty for exists and does not exist".into(),
                    ));
                }
                _ => {}
            }
            reqs.push((e.key.clone(), op, values));
        }
        Ok(Self {
            empty: reqs.is_empty(),
            reqs,
        })
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.reqs.iter().all(|(k, op, vals)| match op {
            Op::In => labels.get(k).is_some_and(|v| vals.contains(v)),
            Op::NotIn => labels.get(k).is_none_or(|v| !vals.contains(v)),
            Op::Exists => labels.contains_key(k),
            Op::DoesNotExist => !labels.contains_key(k),
        })
    }

    /// Whether the selector has no requirement at all.
    pub fn is_empty(&self) -> bool {
        self.empty
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(v: serde_json::Value) -> Result<Selector, SelectorError> {
        Selector::new(&serde_json::from_value(v).unwrap())
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn matches_labels_and_expressions() {
        let s = sel(serde_json::json!({"matchLabels": {"a": "1"},
            "matchExpressions": [{"key": "b", "operator": "In", "values": ["x", "y"]},
                                 {"key": "c", "operator": "DoesNotExist"}]}))
        .unwrap();
        assert!(s.matches(&labels(&[("a", "1"), ("b", "y")])));
        assert!(!s.matches(&labels(&[("a", "1"), ("b", "z")])));
        assert!(!s.matches(&labels(&[("a", "1"), ("b", "x"), ("c", "")])));
        let n = sel(serde_json::json!({"matchExpressions": [{"key": "b", "operator": "NotIn", "values": ["x"]}]})).unwrap();
        assert!(n.matches(&labels(&[])));
        assert!(
            sel(serde_json::json!({}))
                .unwrap()
                .matches(&labels(&[("any", "thing")]))
        );
    }

    #[test]
    fn invalid_selectors_are_refused() {
        assert!(
            sel(serde_json::json!({"matchExpressions": [{"key": "b", "operator": "In"}]})).is_err()
        );
        assert!(sel(serde_json::json!({"matchExpressions": [{"key": "b", "operator": "Exists", "values": ["x"]}]})).is_err());
        assert!(sel(serde_json::json!({"matchExpressions": [{"key": "b", "operator": "Near", "values": ["x"]}]})).is_err());
    }
}
