//! Webhook configurations built from a service's endpoint table, so that what is registered with
//! an API server (by `cargo xtask up`, the end-to-end tests or a manifest) always matches what
//! the service serves.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ServiceReference,
    ValidatingWebhook, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};
use kube::api::{Api, Patch, PatchParams};

use crate::review::app::{EndpointInfo, FailurePolicy};

/// How the API server reaches the webhooks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientTarget {
    /// `https://host:port` (url clientConfig): loopback runs and tests.
    Url(String),
    /// A Service in the cluster (service clientConfig).
    Service {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Its port.
        port: i32,
    },
}

/// Where and how to register a service's endpoints.
#[derive(Debug, Clone)]
pub struct Registration {
    /// Name of both configurations.
    pub name: String,
    /// How the API server reaches the service.
    pub client: ClientTarget,
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
    let client = |path: &str| match &reg.client {
        ClientTarget::Url(base) => WebhookClientConfig {
            url: Some(format!("{base}{path}")),
            ca_bundle: Some(ByteString(reg.ca_bundle.clone())),
            service: None,
        },
        ClientTarget::Service {
            namespace,
            name,
            port,
        } => WebhookClientConfig {
            url: None,
            ca_bundle: Some(ByteString(reg.ca_bundle.clone())),
            service: Some(ServiceReference {
                namespace: namespace.clone(),
                name: name.clone(),
                path: Some(path.to_owned()),
                port: Some(*port),
            }),
        },
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
        let exprs = e.object_selector.as_ref().map(|s| {
            vec![LabelSelectorRequirement {
                key: s.key.clone(),
                operator: s.operator.as_str().into(),
                values: Some(s.values.clone()),
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
            name: webhook_name(e.name.as_deref().unwrap_or(&e.path), &reg.name),
            admission_review_versions: versions.clone().unwrap_or_default(),
            client_config: client(&e.path),
            failure_policy: policy(e),
            side_effects: e.side_effects.clone(),
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
            name: webhook_name(e.name.as_deref().unwrap_or(&e.path), &reg.name),
            admission_review_versions: versions.clone().unwrap_or_default(),
            client_config: client(&e.path),
            failure_policy: policy(e),
            side_effects: e.side_effects.clone(),
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

/// What the configurations trust now, as the certificate writer sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Registered {
    /// Every webhook of every configuration carries exactly the bundle.
    pub holds_bundle: bool,
    /// The CA certificates (PEM each) the configurations carry now.
    pub cas: Vec<String>,
    /// The configurations trusted no CA before the writer last registered a bundle: nothing was
    /// verifiable anyway, so a pending CA may be promoted without waiting (first install).
    pub fresh: bool,
}

/// Why the configurations could not be read or updated.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    /// The API server refused or could not be reached.
    #[error("{0}: {1}")]
    Api(String, kube::Error),
    /// Neither configuration exists (patch-only mode needs them applied first).
    #[error(
        "no MutatingWebhookConfiguration or ValidatingWebhookConfiguration named {0:?}: apply the service's manifests first"
    )]
    Missing(String),
}

/// How a service keeps its webhook configurations current with its CA bundle.
#[derive(Debug, Clone)]
pub enum Registrar {
    /// Nobody: the caBundle is someone else's business.
    Off,
    /// Patch-only: the configurations named `name` come from manifests; only the `caBundle` of
    /// each of their webhooks is set, by a JSON patch under our own field manager, so a tool
    /// that owns every other field (kubectl, a GitOps controller) never fights over it.
    CaBundle {
        /// Name of both configurations.
        name: String,
        /// Field manager of the patches.
        field_manager: String,
    },
    /// Self-registration: both configurations are applied whole from the endpoint table
    /// (server-side apply, forced, our field manager).
    Full {
        /// Where and how (its `ca_bundle` is replaced by the bundle).
        registration: Registration,
        /// The endpoint table.
        endpoints: Vec<EndpointInfo>,
        /// Field manager of the applies.
        field_manager: String,
    },
}

/// The two webhook configuration kinds, as the caBundle keeper reads them.
trait Configuration:
    kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug
{
    /// Each webhook's name and client configuration.
    fn clients(&self) -> Vec<(&str, &WebhookClientConfig)>;
}

/// The two kinds hold different webhook types with the same `name` and `client_config`.
macro_rules! configuration {
    ($($kind:ty),*) => {$(
        impl Configuration for $kind {
            fn clients(&self) -> Vec<(&str, &WebhookClientConfig)> {
                self.webhooks
                    .iter()
                    .flatten()
                    .map(|w| (w.name.as_str(), &w.client_config))
                    .collect()
            }
        }
    )*};
}

configuration!(MutatingWebhookConfiguration, ValidatingWebhookConfiguration);

/// The configuration of kind `K` named `name`, if any.
async fn get<K: Configuration>(
    client: &kube::Client,
    name: &str,
) -> Result<Option<K>, RegisterError> {
    Api::<K>::all(client.clone())
        .get_opt(name)
        .await
        .map_err(|e| RegisterError::Api(format!("get {} {name}", K::kind(&())), e))
}

/// The caBundle of every webhook of both configurations named `name` (absent ones skipped):
/// `None` when neither exists.
async fn bundles(client: &kube::Client, name: &str) -> Result<Option<Vec<Vec<u8>>>, RegisterError> {
    let m = get::<MutatingWebhookConfiguration>(client, name).await?;
    let v = get::<ValidatingWebhookConfiguration>(client, name).await?;
    if m.is_none() && v.is_none() {
        return Ok(None);
    }
    let bundle = |c: &WebhookClientConfig| c.ca_bundle.clone().map(|b| b.0).unwrap_or_default();
    let mut out: Vec<Vec<u8>> = Vec::new();
    for clients in [
        m.as_ref().map(Configuration::clients),
        v.as_ref().map(Configuration::clients),
    ]
    .into_iter()
    .flatten()
    {
        out.extend(clients.into_iter().map(|(_, c)| bundle(c)));
    }
    Ok(Some(out))
}

impl Registrar {
    /// Whether it applies whole configurations (self-registration).
    pub fn is_full(&self) -> bool {
        matches!(self, Self::Full { .. })
    }

    fn name(&self) -> Option<&str> {
        match self {
            Self::Off => None,
            Self::CaBundle { name, .. } => Some(name),
            Self::Full { registration, .. } => Some(&registration.name),
        }
    }

    /// What the configurations trust now, against the bundle `bundle` (PEM).
    pub async fn observe(
        &self,
        client: &kube::Client,
        bundle: &str,
    ) -> Result<Registered, RegisterError> {
        let Some(name) = self.name() else {
            return Ok(Registered {
                holds_bundle: true,
                ..Registered::default()
            });
        };
        let Some(now) = bundles(client, name).await? else {
            return Ok(Registered::default());
        };
        let mut cas = Vec::new();
        for b in &now {
            for c in crate::server::tls::pem_blocks(&String::from_utf8_lossy(b)) {
                if !cas.contains(&c) {
                    cas.push(c);
                }
            }
        }
        let mut holds = !now.is_empty() && now.iter().all(|b| b.as_slice() == bundle.as_bytes());
        if let Self::Full { endpoints, .. } = self {
            holds &= now.len() == endpoints.len();
        }
        Ok(Registered {
            holds_bundle: holds,
            cas,
            fresh: false,
        })
    }

    /// Sets the configurations' caBundle to `bundle` (PEM); in self-registration, applies them
    /// whole.
    pub async fn register(&self, client: &kube::Client, bundle: &str) -> Result<(), RegisterError> {
        match self {
            Self::Off => Ok(()),
            Self::CaBundle {
                name,
                field_manager,
            } => patch_ca_bundles(client, name, field_manager, bundle).await,
            Self::Full {
                registration,
                endpoints,
                field_manager,
            } => {
                let reg = Registration {
                    ca_bundle: bundle.as_bytes().to_vec(),
                    ..registration.clone()
                };
                apply(client, &reg, endpoints, field_manager).await
            }
        }
    }
}

/// JSON patch setting `/webhooks/<i>/clientConfig/caBundle` of each webhook, each guarded by a
/// test of the webhook's name (a reordered list fails the patch instead of mixing them up).
fn ca_bundle_patch(names: &[String], bundle: &str) -> Result<json_patch::Patch, serde_json::Error> {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(bundle);
    let ops: Vec<serde_json::Value> = names
        .iter()
        .enumerate()
        .flat_map(|(i, n)| {
            [
                serde_json::json!({"op": "test", "path": format!("/webhooks/{i}/name"), "value": n}),
                serde_json::json!({"op": "add", "path": format!("/webhooks/{i}/clientConfig/caBundle"), "value": b64}),
            ]
        })
        .collect();
    serde_json::from_value(serde_json::Value::Array(ops))
}

/// Sets the caBundle of every webhook of the `K` named `name`; `false` when there is none.
async fn patch_ca_bundle<K: Configuration>(
    client: &kube::Client,
    name: &str,
    pp: &PatchParams,
    bundle: &str,
) -> Result<bool, RegisterError> {
    let Some(obj) = get::<K>(client, name).await? else {
        return Ok(false);
    };
    let names: Vec<String> = obj.clients().iter().map(|(n, _)| (*n).to_owned()).collect();
    let patch = ca_bundle_patch(&names, bundle)
        .map_err(|e| RegisterError::Api("caBundle patch".into(), kube::Error::SerdeError(e)))?;
    Api::<K>::all(client.clone())
        .patch(name, pp, &Patch::<()>::Json(patch))
        .await
        .map_err(|e| RegisterError::Api(format!("patch {} {name} caBundle", K::kind(&())), e))?;
    Ok(true)
}

async fn patch_ca_bundles(
    client: &kube::Client,
    name: &str,
    field_manager: &str,
    bundle: &str,
) -> Result<(), RegisterError> {
    let pp = PatchParams {
        field_manager: Some(field_manager.to_owned()),
        ..PatchParams::default()
    };
    let m = patch_ca_bundle::<MutatingWebhookConfiguration>(client, name, &pp, bundle).await?;
    let v = patch_ca_bundle::<ValidatingWebhookConfiguration>(client, name, &pp, bundle).await?;
    if m || v {
        Ok(())
    } else {
        Err(RegisterError::Missing(name.to_owned()))
    }
}

/// Server-side applies both configurations of `reg` (a kind without webhooks is skipped).
pub async fn apply(
    client: &kube::Client,
    reg: &Registration,
    endpoints: &[EndpointInfo],
    field_manager: &str,
) -> Result<(), RegisterError> {
    let (m, v) = configurations(reg, endpoints);
    let pp = PatchParams::apply(field_manager).force();
    if m.webhooks.as_ref().is_some_and(|w| !w.is_empty()) {
        Api::<MutatingWebhookConfiguration>::all(client.clone())
            .patch(&reg.name, &pp, &Patch::Apply(&m))
            .await
            .map_err(|e| {
                RegisterError::Api(
                    format!("apply MutatingWebhookConfiguration {}", reg.name),
                    e,
                )
            })?;
    }
    if v.webhooks.as_ref().is_some_and(|w| !w.is_empty()) {
        Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .patch(&reg.name, &pp, &Patch::Apply(&v))
            .await
            .map_err(|e| {
                RegisterError::Api(
                    format!("apply ValidatingWebhookConfiguration {}", reg.name),
                    e,
                )
            })?;
    }
    Ok(())
}
