//! Webhook configurations built from a service's endpoint table, so that what is registered with
//! an API server (by `cargo xtask up`, the end-to-end tests or a manifest) always matches what
//! the service serves.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ValidatingWebhook,
    ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};
use serde::{Deserialize, Serialize};

use crate::app::{App, FailurePolicy, WebhookKind};

/// One endpoint as registration sees it; `<binary> endpoints` prints these as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointInfo {
    /// URL path.
    pub path: String,
    /// `Validating` or `Mutating`.
    pub kind: String,
    /// `Fail` or `Ignore`.
    pub failure_policy: String,
    /// API group of the target resource.
    pub group: String,
    /// API version.
    pub version: String,
    /// Resource (with `/subresource` when it targets one).
    pub resource: String,
    /// Operations.
    pub operations: Vec<String>,
    /// `objectSelector`: label key and the values it may have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object_selector: Option<(String, Vec<String>)>,
}

impl EndpointInfo {
    /// Every endpoint of an app.
    pub fn of(app: &App) -> Vec<Self> {
        app.endpoints
            .iter()
            .map(|e| Self {
                path: e.path.to_owned(),
                kind: match e.kind {
                    WebhookKind::Validating => "Validating".into(),
                    WebhookKind::Mutating => "Mutating".into(),
                },
                failure_policy: e.failure_policy.as_str().to_owned(),
                group: e.target.group.clone(),
                version: e.target.version.clone(),
                resource: e.target.resource.clone(),
                operations: e
                    .target
                    .operations
                    .iter()
                    .map(|o| o.as_str().to_owned())
                    .collect(),
                object_selector: e
                    .object_selector
                    .map(|(k, v)| (k.to_owned(), v.iter().map(|s| (*s).to_owned()).collect())),
            })
            .collect()
    }
}

/// Where and how to register a service's endpoints.
#[derive(Debug, Clone)]
pub struct Registration {
    /// Name of both configurations.
    pub name: String,
    /// `https://host:port` the API server calls (url clientConfig).
    pub base_url: String,
    /// PEM CA bundle that signs the service's certificate.
    pub ca_bundle: Vec<u8>,
    /// Seconds the API server waits for an answer.
    pub timeout_seconds: i32,
    /// Which namespaces' objects are sent.
    pub namespace_selector: LabelSelector,
    /// Overrides every endpoint's failure policy (tests of the API server's behaviour).
    pub failure_policy: Option<FailurePolicy>,
    /// Labels every object must also carry to be sent (added to each `objectSelector`; lets
    /// parallel tests share a cluster for cluster-scoped kinds).
    pub object_labels: BTreeMap<String, String>,
}

/// The namespace label that opts a namespace out of every webhook of ours (any value).
pub const OPT_OUT_LABEL: &str = "admission-webhooks.io/exclude";

/// A selector of every namespace except those named and those carrying [`OPT_OUT_LABEL`].
pub fn all_namespaces_except(names: &[&str]) -> LabelSelector {
    LabelSelector {
        match_expressions: Some(vec![
            LabelSelectorRequirement {
                key: "kubernetes.io/metadata.name".into(),
                operator: "NotIn".into(),
                values: Some(names.iter().map(|s| (*s).to_owned()).collect()),
            },
            LabelSelectorRequirement {
                key: OPT_OUT_LABEL.into(),
                operator: "DoesNotExist".into(),
                values: None,
            },
        ]),
        ..LabelSelector::default()
    }
}

/// A selector of exactly one namespace.
pub fn only_namespace(name: &str) -> LabelSelector {
    LabelSelector {
        match_labels: Some(BTreeMap::from([(
            "kubernetes.io/metadata.name".to_owned(),
            name.to_owned(),
        )])),
        ..LabelSelector::default()
    }
}

fn webhook_name(path: &str, config: &str) -> String {
    format!(
        "{}.{config}.admission.local",
        path.trim_start_matches('/').replace('/', "-")
    )
}

/// The mutating and validating configurations for `endpoints` (either may hold no webhook).
pub fn configurations(
    reg: &Registration,
    endpoints: &[EndpointInfo],
) -> (MutatingWebhookConfiguration, ValidatingWebhookConfiguration) {
    let meta = ObjectMeta {
        name: Some(reg.name.clone()),
        ..ObjectMeta::default()
    };
    let client = |path: &str| WebhookClientConfig {
        url: Some(format!("{}{}", reg.base_url, path)),
        ca_bundle: Some(ByteString(reg.ca_bundle.clone())),
        service: None,
    };
    let rules = |e: &EndpointInfo| {
        Some(vec![RuleWithOperations {
            api_groups: Some(vec![e.group.clone()]),
            api_versions: Some(vec![e.version.clone()]),
            resources: Some(vec![e.resource.clone()]),
            operations: Some(e.operations.clone()),
            scope: None,
        }])
    };
    let policy = |e: &EndpointInfo| {
        Some(
            reg.failure_policy
                .map(|p| p.as_str().to_owned())
                .unwrap_or_else(|| e.failure_policy.clone()),
        )
    };
    let versions = Some(vec!["v1".to_owned(), "v1beta1".to_owned()]);
    let object_selector = |e: &EndpointInfo| {
        let exprs = e.object_selector.as_ref().map(|(k, v)| {
            vec![LabelSelectorRequirement {
                key: k.clone(),
                operator: "In".into(),
                values: Some(v.clone()),
            }]
        });
        let labels = (!reg.object_labels.is_empty()).then(|| reg.object_labels.clone());
        (exprs.is_some() || labels.is_some()).then_some(LabelSelector {
            match_expressions: exprs,
            match_labels: labels,
        })
    };
    let mutating = endpoints
        .iter()
        .filter(|e| e.kind == "Mutating")
        .map(|e| MutatingWebhook {
            name: webhook_name(&e.path, &reg.name),
            admission_review_versions: versions.clone().unwrap_or_default(),
            client_config: client(&e.path),
            failure_policy: policy(e),
            side_effects: "None".into(),
            timeout_seconds: Some(reg.timeout_seconds),
            namespace_selector: Some(reg.namespace_selector.clone()),
            reinvocation_policy: Some("IfNeeded".into()),
            object_selector: object_selector(e),
            rules: rules(e),
            ..MutatingWebhook::default()
        })
        .collect::<Vec<_>>();
    let validating = endpoints
        .iter()
        .filter(|e| e.kind == "Validating")
        .map(|e| ValidatingWebhook {
            name: webhook_name(&e.path, &reg.name),
            admission_review_versions: versions.clone().unwrap_or_default(),
            client_config: client(&e.path),
            failure_policy: policy(e),
            side_effects: "None".into(),
            timeout_seconds: Some(reg.timeout_seconds),
            namespace_selector: Some(reg.namespace_selector.clone()),
            object_selector: object_selector(e),
            rules: rules(e),
            ..ValidatingWebhook::default()
        })
        .collect::<Vec<_>>();
    (
        MutatingWebhookConfiguration {
            metadata: meta.clone(),
            webhooks: Some(mutating),
        },
        ValidatingWebhookConfiguration {
            metadata: meta,
            webhooks: Some(validating),
        },
    )
}
