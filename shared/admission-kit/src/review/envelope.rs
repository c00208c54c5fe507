//! The AdmissionReview envelope, `admission.k8s.io/v1` and `v1beta1` (same JSON shape).
//!
//! Our own types rather than `kube::core::admission`: kube's response serialises the patch as a
//! JSON array of numbers (3-4 times larger than the base64 string the API server documents; we
//! send base64), its request type insists on a typed `Resource` object, and it cannot answer a
//! body it failed to decode with the apiVersion that body claimed. Objects stay raw JSON here and
//! are decoded into the handler's typed object once, by the handler (a validator decodes the
//! envelope with its typed object in one pass: [`ReviewIn`] is generic over the object's form).

use std::collections::BTreeMap;

use k8s_openapi::api::authentication::v1::UserInfo;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// `admission.k8s.io/v1`, the answer's apiVersion when the request's is unknown.
pub const V1: &str = "admission.k8s.io/v1";
/// `admission.k8s.io/v1beta1`.
pub const V1BETA1: &str = "admission.k8s.io/v1beta1";

/// A group/version/kind as the review carries it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gvk {
    /// API group (`""` for core).
    #[serde(default)]
    pub group: String,
    /// API version.
    #[serde(default)]
    pub version: String,
    /// Kind.
    #[serde(default)]
    pub kind: String,
}

/// A group/version/resource as the review carries it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gvr {
    /// API group (`""` for core).
    #[serde(default)]
    pub group: String,
    /// API version.
    #[serde(default)]
    pub version: String,
    /// Plural resource name.
    #[serde(default)]
    pub resource: String,
}

/// The operation under review.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Operation {
    /// An object is being created.
    Create,
    /// An object is being replaced or patched.
    Update,
    /// An object is being deleted.
    Delete,
    /// A connect request (exec, attach, port-forward…).
    Connect,
}

impl Operation {
    /// The wire name: `CREATE`, `UPDATE`, `DELETE`, `CONNECT`.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// The request half of an AdmissionReview, objects still raw (`O`, by default; a validator's
/// review decodes them as its typed object in the same pass), the old object as `P` (`O` unless
/// said: a mutator keeps the object raw and types the old one as it reads it).
#[derive(Debug, Deserialize)]
// Without the bound serde would ask `O: Default` for the defaulted `Option<O>` fields.
#[serde(
    rename_all = "camelCase",
    bound(deserialize = "O: Deserialize<'de>, P: Deserialize<'de>")
)]
pub struct RawRequest<O = Box<RawValue>, P = O> {
    /// Identifies this review; echoed in the response.
    pub uid: String,
    /// The kind of the object as it is stored.
    #[serde(default)]
    pub kind: Gvk,
    /// The resource being changed.
    #[serde(default)]
    pub resource: Gvr,
    /// The subresource (`status`, `binding`…) if any.
    #[serde(default)]
    pub sub_resource: Option<String>,
    /// The kind the client sent, when the API server converted it.
    #[serde(default)]
    pub request_kind: Option<Gvk>,
    /// The resource the client addressed, when the API server converted it.
    #[serde(default)]
    pub request_resource: Option<Gvr>,
    /// The object's name (may be empty on CREATE with generateName).
    #[serde(default)]
    pub name: Option<String>,
    /// The object's namespace, absent for cluster-scoped objects.
    #[serde(default)]
    pub namespace: Option<String>,
    /// What is being done.
    pub operation: Operation,
    /// Who is doing it.
    #[serde(default)]
    pub user_info: UserInfo,
    /// The new object (CREATE, UPDATE, CONNECT).
    #[serde(default)]
    pub object: Option<O>,
    /// The existing object (UPDATE, DELETE).
    #[serde(default)]
    pub old_object: Option<P>,
    /// Whether this is a dry run: the webhook must have no side effects.
    #[serde(default)]
    pub dry_run: Option<bool>,
    /// The operation's options (CreateOptions, UpdateOptions…).
    #[serde(default)]
    pub options: Option<Box<RawValue>>,
}

/// An incoming AdmissionReview, its objects as `O` (raw JSON by default), the old one as `P`.
#[derive(Debug, Deserialize)]
// Without the bound serde would ask `O: Default` for the defaulted `Option<O>` fields.
#[serde(
    rename_all = "camelCase",
    bound(deserialize = "O: Deserialize<'de>, P: Deserialize<'de>")
)]
pub struct ReviewIn<O = Box<RawValue>, P = O> {
    /// `admission.k8s.io/v1` or `admission.k8s.io/v1beta1`.
    #[serde(default)]
    pub api_version: Option<String>,
    /// `AdmissionReview`.
    #[serde(default)]
    pub kind: Option<String>,
    /// The request; a review without one is refused.
    #[serde(default)]
    pub request: Option<RawRequest<O, P>>,
}

/// The status of a denial, a subset of `metav1.Status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// `Failure` when set.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub status: Option<String>,
    /// Why, for a human.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// A machine-readable reason (`Invalid`, `Forbidden`…).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub reason: Option<String>,
    /// The HTTP code the API server reports to its client.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub code: Option<u16>,
}

impl Status {
    /// A status carrying only a message (the API server then reports 400 to its client).
    pub fn message(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            ..Self::default()
        }
    }

    /// Controller-runtime's status of an admission (`Allowed("")`): code 200 and nothing else.
    pub fn allowed() -> Self {
        Self {
            code: Some(200),
            ..Self::default()
        }
    }

    /// A status with only a code and a message: controller-runtime's `Errored(code, err)`.
    pub fn errored(code: u16, message: impl Into<String>) -> Self {
        Self {
            code: Some(code),
            message: message.into(),
            ..Self::default()
        }
    }

    /// A full `Failure` status with code and reason.
    pub fn failure(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Self {
            status: Some("Failure".to_owned()),
            message: message.into(),
            reason: Some(reason.to_owned()),
            code: Some(code),
        }
    }
}

/// The response half of an AdmissionReview.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    /// The request's uid.
    pub uid: String,
    /// The decision.
    pub allowed: bool,
    /// Why, when denied.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub status: Option<Status>,
    /// Base64 of an RFC 6902 JSON Patch, as the API server documents it.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub patch: Option<String>,
    /// `JSONPatch` when a patch is sent.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub patch_type: Option<String>,
    /// Warnings the API server passes to its client.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub warnings: Vec<String>,
    /// Annotations the API server records in its audit log.
    #[serde(skip_serializing_if = "BTreeMap::is_empty", default)]
    pub audit_annotations: BTreeMap<String, String>,
}

/// An outgoing AdmissionReview.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewOut {
    /// The apiVersion of the request this answers.
    pub api_version: String,
    /// `AdmissionReview`.
    pub kind: String,
    /// The answer.
    pub response: Response,
}

impl ReviewOut {
    /// Wraps a response in the envelope of `api_version` (v1 when empty or unknown).
    pub fn new(api_version: &str, response: Response) -> Self {
        let api_version = match api_version {
            V1BETA1 => V1BETA1,
            _ => V1,
        };
        Self {
            api_version: api_version.to_owned(),
            kind: "AdmissionReview".to_owned(),
            response,
        }
    }

    /// The JSON bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        // Serialising these plain structs cannot fail; an empty body would be refused loudly by
        // the API server rather than misread.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// The apiVersion a body claims, read leniently: used to answer a body we could not decode.
pub fn claimed_api_version(body: &[u8]) -> &'static str {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Probe {
        api_version: Option<String>,
    }
    match serde_json::from_slice::<Probe>(body) {
        Ok(Probe {
            api_version: Some(v),
        }) if v == V1BETA1 => V1BETA1,
        _ => {
            // A body that is not even a JSON object may still name its version.
            let text = String::from_utf8_lossy(&body[..body.len().min(4096)]);
            if text.contains(V1BETA1) { V1BETA1 } else { V1 }
        }
    }
}

/// The uid a body carries, read leniently, so that an error answer can still echo it.
pub fn claimed_uid(body: &[u8]) -> String {
    #[derive(Deserialize)]
    struct Req {
        uid: Option<serde_json::Value>,
    }
    #[derive(Deserialize)]
    struct Probe {
        request: Option<Req>,
    }
    match serde_json::from_slice::<Probe>(body) {
        Ok(Probe {
            request:
                Some(Req {
                    uid: Some(serde_json::Value::String(s)),
                }),
        }) => s,
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_in_the_requests_version() {
        assert_eq!(
            ReviewOut::new(V1BETA1, Response::default()).api_version,
            V1BETA1
        );
        assert_eq!(ReviewOut::new("", Response::default()).api_version, V1);
        assert_eq!(
            ReviewOut::new("bogus/v9", Response::default()).api_version,
            V1
        );
    }

    #[test]
    fn claims_are_read_from_broken_bodies() {
        assert_eq!(
            claimed_api_version(b"{\"apiVersion\":\"admission.k8s.io/v1beta1\",\"request\":7}"),
            V1BETA1
        );
        assert_eq!(
            claimed_api_version(b"{\"apiVersion\":\"admission.k8s.io/v1beta1\", oops"),
            V1BETA1
        );
        assert_eq!(claimed_api_version(b"not json"), V1);
        assert_eq!(
            claimed_uid(b"{\"request\":{\"uid\":\"abc\",\"operation\":5}}"),
            "abc"
        );
        assert_eq!(claimed_uid(b"[]"), "");
    }

    #[test]
    fn empty_response_fields_are_omitted() {
        let r = Response {
            uid: "u".into(),
            allowed: true,
            ..Response::default()
        };
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"uid":"u","allowed":true}"#
        );
    }
}
