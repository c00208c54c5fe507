//! Field errors in the shape of Kubernetes' `field.ErrorList`.
//!
//! A validator returns every problem it finds as a [`FieldError`]: the offending field path, the
//! error type, the bad value and a detail text. The kit turns the list into one denial, so each
//! denial names every offending field. Every error also carries the id of the rule that raised it
//! (e.g. `MV-03`), which the metrics and the decision log report.

use std::fmt::{self, Write as _};

use crate::compat::go::{Quantity, go_json_quote, go_quote};

/// A field path such as `spec.backends[0].workers[1].type`, built segment by segment.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Path(String);

impl Path {
    /// A path starting at a top-level field (`spec`, `metadata`…).
    pub fn new(root: &str) -> Self {
        Self(root.to_owned())
    }

    /// The path of a child field: `spec` → `spec.backends`.
    pub fn child(&self, name: &str) -> Self {
        let mut s = String::with_capacity(self.0.len() + 1 + name.len());
        s.push_str(&self.0);
        if !s.is_empty() {
            s.push('.');
        }
        s.push_str(name);
        Self(s)
    }

    /// The path of a list element: `spec.backends` → `spec.backends[3]`.
    pub fn index(&self, i: usize) -> Self {
        let mut s = self.0.clone();
        let _ = write!(s, "[{i}]");
        Self(s)
    }

    /// The path of a map entry: `metadata.labels` → `metadata.labels[app]`.
    pub fn key(&self, k: &str) -> Self {
        let mut s = self.0.clone();
        let _ = write!(s, "[{k}]");
        Self(s)
    }

    /// The path as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The error types of `k8s.io/apimachinery/pkg/util/validation/field`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorType {
    /// A required value is missing.
    Required,
    /// The value is malformed or out of range.
    Invalid,
    /// The value is not allowed here.
    Forbidden,
    /// The value is not one of the supported values.
    NotSupported,
    /// The value repeats one already given.
    Duplicate,
    /// There are too many items.
    TooMany,
    /// The value is too long.
    TooLong,
    /// The check itself failed (e.g. a lookup of cluster state); it denies.
    Internal,
}

impl ErrorType {
    /// The text apimachinery prints for this type.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorType::Required => "Required value",
            ErrorType::Invalid => "Invalid value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::TooMany => "Too many",
            ErrorType::TooLong => "Too long",
            ErrorType::Internal => "Internal error",
        }
    }
}

/// The bad value of a field error, rendered the way apimachinery renders it.
#[derive(Debug, Clone, PartialEq)]
pub enum BadValue {
    /// No value is printed (Required, Forbidden, Internal).
    None,
    /// An integer, printed as bare digits.
    Int(i64),
    /// A string, printed double-quoted with Go escaping.
    Str(String),
    /// A boolean.
    Bool(bool),
    /// Pre-rendered text, printed as is.
    Raw(String),
}

impl BadValue {
    /// A string printed as Go's JSON encoder writes it ([`go_json_quote`]): how apimachinery
    /// v0.34 prints values of named string types (`IntOrString`, enums) and quantities.
    pub fn json_str(s: &str) -> Self {
        BadValue::Raw(go_json_quote(s))
    }
}

/// A quantity as a field error shows it: written as a JSON number, its digits; else quoted text.
impl From<&Quantity> for BadValue {
    fn from(q: &Quantity) -> Self {
        if q.is_number() {
            BadValue::Raw(q.text().to_owned())
        } else {
            BadValue::Str(q.text().to_owned())
        }
    }
}

impl From<i64> for BadValue {
    fn from(v: i64) -> Self {
        BadValue::Int(v)
    }
}
impl From<i32> for BadValue {
    fn from(v: i32) -> Self {
        BadValue::Int(v.into())
    }
}
impl From<usize> for BadValue {
    fn from(v: usize) -> Self {
        BadValue::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}
impl From<&str> for BadValue {
    fn from(v: &str) -> Self {
        BadValue::Str(v.to_owned())
    }
}
impl From<String> for BadValue {
    fn from(v: String) -> Self {
        BadValue::Str(v)
    }
}
impl From<bool> for BadValue {
    fn from(v: bool) -> Self {
        BadValue::Bool(v)
    }
}

/// One problem with one field, tagged with the id of the rule that found it.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// The rule id from the spec (`MV-03`, `PV-01`…).
    pub rule: &'static str,
    /// What kind of problem this is.
    pub kind: ErrorType,
    /// The offending field.
    pub path: Path,
    /// The offending value, when the type prints one.
    pub value: BadValue,
    /// The explanation.
    pub detail: String,
}

impl FieldError {
    fn new(
        rule: &'static str,
        kind: ErrorType,
        path: Path,
        value: BadValue,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            rule,
            kind,
            path,
            value,
            detail: detail.into(),
        }
    }

    /// `Invalid value: <value>: <detail>`.
    pub fn invalid(
        rule: &'static str,
        path: Path,
        value: impl Into<BadValue>,
        detail: impl Into<String>,
    ) -> Self {
        Self::new(rule, ErrorType::Invalid, path, value.into(), detail)
    }

    /// `Required value: <detail>`.
    pub fn required(rule: &'static str, path: Path, detail: impl Into<String>) -> Self {
        Self::new(rule, ErrorType::Required, path, BadValue::None, detail)
    }

    /// `Forbidden: <detail>`.
    pub fn forbidden(rule: &'static str, path: Path, detail: impl Into<String>) -> Self {
        Self::new(rule, ErrorType::Forbidden, path, BadValue::None, detail)
    }

    /// `Internal error: <detail>`.
    pub fn internal(rule: &'static str, path: Path, detail: impl Into<String>) -> Self {
        Self::new(rule, ErrorType::Internal, path, BadValue::None, detail)
    }

    /// `Unsupported value: <value>: supported values: "a", "b"`.
    pub fn not_supported(
        rule: &'static str,
        path: Path,
        value: impl Into<BadValue>,
        supported: &[&str],
    ) -> Self {
        let mut detail = String::from("supported values: ");
        for (i, s) in supported.iter().enumerate() {
            if i > 0 {
                detail.push_str(", ");
            }
            detail.push_str(&go_quote(s));
        }
        Self::new(rule, ErrorType::NotSupported, path, value.into(), detail)
    }

    /// `Duplicate value: <value>`.
    pub fn duplicate(rule: &'static str, path: Path, value: impl Into<BadValue>) -> Self {
        Self::new(rule, ErrorType::Duplicate, path, value.into(), "")
    }

    /// The error without its path, as apimachinery's `ErrorBody`.
    pub fn body(&self) -> String {
        let mut s = String::from(self.kind.as_str());
        match self.kind {
            ErrorType::Required
            | ErrorType::Forbidden
            | ErrorType::Internal
            | ErrorType::TooLong => {}
            _ => match &self.value {
                BadValue::None => {}
                BadValue::Int(i) => {
                    let _ = write!(s, ": {i}");
                }
                BadValue::Bool(b) => {
                    let _ = write!(s, ": {b}");
                }
                BadValue::Str(v) => {
                    s.push_str(": ");
                    s.push_str(&go_quote(v));
                }
                BadValue::Raw(v) => {
                    s.push_str(": ");
                    s.push_str(v);
                }
            },
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.body())
    }
}

/// Every problem a validator found, in the order it found them.
pub type ErrorList = Vec<FieldError>;

/// The errors as apimachinery's `ErrorList.ToAggregate()` prints them (what controller-runtime
/// sends for a validator's error): duplicates dropped, one error as is, several as `[a, b]`.
pub fn aggregate(errors: &[FieldError]) -> String {
    let mut seen = Vec::<String>::new();
    for e in errors {
        let s = e.to_string();
        if !seen.contains(&s) {
            seen.push(s);
        }
    }
    if seen.len() == 1 {
        seen.remove(0)
    } else {
        format!("[{}]", seen.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_render_like_kubernetes() {
        let p = Path::new("spec")
            .child("backends")
            .index(0)
            .child("workers");
        assert_eq!(
            p.index(1).child("type").as_str(),
            "spec.backends[0].workers[1].type"
        );
        assert_eq!(
            Path::new("metadata").child("labels").key("a/b").as_str(),
            "metadata.labels[a/b]"
        );
    }

    #[test]
    fn bodies_render_like_apimachinery() {
        let p = Path::new("spec");
        assert_eq!(
            FieldError::invalid("X", p.child("n"), 3, "too big").to_string(),
            "spec.n: Invalid value: 3: too big"
        );
        assert_eq!(
            FieldError::invalid("X", p.child("s"), "a\tb", "bad").to_string(),
            "spec.s: Invalid value: \"a\\tb\": bad"
        );
        assert_eq!(
            FieldError::required("X", p.clone(), "must be set").to_string(),
            "spec: Required value: must be set"
        );
        assert_eq!(
            FieldError::forbidden("X", p.clone(), "no").to_string(),
            "spec: Forbidden: no"
        );
        assert_eq!(
            FieldError::internal("X", p.clone(), "boom").to_string(),
            "spec: Internal error: boom"
        );
        assert_eq!(
            FieldError::not_supported("X", p.clone(), "c", &["a", "b"]).to_string(),
            "spec: Unsupported value: \"c\": supported values: \"a\", \"b\""
        );
        assert_eq!(
            FieldError::duplicate("X", p, "a").to_string(),
            "spec: Duplicate value: \"a\""
        );
    }
}
