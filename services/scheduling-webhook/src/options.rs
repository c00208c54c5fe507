//! The service's options: flags of `serve` and `review`, parsed once into [`Options`] and held by
//! the handlers (through [`crate::Service`]).

use std::path::PathBuf;

/// What PV-4 and the other quota rules answer when quota-state cannot.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Unavailable {
    /// Refuse, naming the cause (fail closed).
    #[default]
    Deny,
    /// Admit with a warning.
    Allow,
}

/// Which quotas a pod's quota label may name (PV-S1).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LabelScope {
    /// Whatever quota the label names, as upstream.
    #[default]
    Any,
    /// Only a quota of the pod's namespace or one whose namespaces annotation lists it.
    Namespace,
}

/// The service's flags.
#[derive(clap::Args, Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// quota-state's gRPC address, asked every quota question (PV-3.2, PV-4 check-and-reserve,
    /// PM-3, QM-3, QV): https://host:port with mutual TLS (--quota-state-client-secret, or the
    /// --quota-state-*-file options), http://host:port only against a quota-state run with
    /// --insecure-plaintext; empty: evaluate in-process from the cluster state.
    #[arg(long, default_value = "")]
    pub quota_state_url: String,
    /// Secret (namespace/name, or name in $POD_NAMESPACE) holding tls.crt, tls.key and ca.crt
    /// for mutual TLS with quota-state (quota-state's managed client Secret, or cert-manager's):
    /// read from the API and watched, so a renewal applies at once; instead of the
    /// --quota-state-*-file options.
    #[arg(long, default_value = "")]
    pub quota_state_client_secret: String,
    /// PEM CA that quota-state's serving certificate must chain to (https URLs; reloaded when it
    /// changes).
    #[arg(long)]
    pub quota_state_ca_file: Option<PathBuf>,
    /// PEM client certificate presented to quota-state (its names must include one quota-state
    /// allows, scheduling-webhook by default; reloaded when it changes).
    #[arg(long)]
    pub quota_state_cert_file: Option<PathBuf>,
    /// PEM private key of --quota-state-cert-file.
    #[arg(long)]
    pub quota_state_key_file: Option<PathBuf>,
    /// Name quota-state's certificate must carry (default: the URL's host).
    #[arg(long, default_value = "")]
    pub quota_state_server_name: String,
    /// In a fleet (one quota-state for several clusters, docs/fleet-quota.md): this cluster's
    /// name as the fleet knows it, sent with every admission and release; quota-state refuses
    /// the calls when the client certificate names another cluster (a copied Secret), rather
    /// than charge the wrong cluster. Empty: not sent.
    #[arg(long, default_value = "", value_parser = cluster_name)]
    pub quota_state_cluster: String,
    /// AdmitPods calls out to quota-state at once; the pods whose reviews arrive meanwhile go
    /// together in the next call. 1 suits a quota-state in the same cluster (fuller batches,
    /// less overhead); a fleet member far from its hub sets more, so that a review does not wait
    /// a round trip behind the previous batch (docs/fleet-quota.md#latency).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=64))]
    pub quota_state_calls_in_flight: u8,
    /// Deadline of each quota-state call, in milliseconds (well under timeoutSeconds).
    #[arg(long, default_value_t = 2000)]
    pub quota_state_timeout_ms: u64,
    /// When quota-state cannot answer: deny (fail closed) or allow (admit with a warning).
    #[arg(long, value_enum, default_value_t = Unavailable::Deny)]
    pub quota_unavailable: Unavailable,
    /// PV-S1 (S-FIX-2, opt-in): `namespace` lets a pod's quota label name only a quota of its
    /// namespace or one whose namespaces annotation lists it, and the system, default and root
    /// quotas only from --quota-system-namespaces; `any` charges whatever quota the label names,
    /// as upstream (the default: upstream's own tests and documents keep quotas in a central
    /// namespace and label pods of others).
    #[arg(long, value_enum, default_value_t = LabelScope::Any)]
    pub quota_label_scope: LabelScope,
    /// PV-S1: comma list of the namespaces whose pods may name the system, default and root
    /// quotas.
    #[arg(long, value_delimiter = ',', default_value = SYSTEM_NAMESPACES)]
    pub quota_system_namespaces: Vec<String>,
    /// WQ-1: a YAML or JSON file of further workload kinds (group, version, kind, resource,
    /// policy, and the JSON Pointers of each pod group's replicas and template;
    /// docs/workload-quota.md), read at start and whenever it changes (a mounted ConfigMap); a
    /// bad file refuses to start, a bad change keeps the kinds read before. Their reviews are
    /// sent to /validate-workload.
    #[arg(long)]
    pub workload_kinds_file: Option<PathBuf>,
    /// WQ-3: comma list of built-in workload kinds (Kind or group/Kind, `*` for all) refused,
    /// rather than admitted with a warning, when their peak is above what their quota has free
    /// now.
    #[arg(long, value_delimiter = ',')]
    pub workload_gang_kinds: Vec<String>,
    /// WQ-6: comma list of workload kinds (Kind or group/Kind, `*` for all) refused, rather than
    /// admitted with a warning, when the pod rules would refuse the pods of one of their
    /// templates.
    #[arg(long, value_delimiter = ',')]
    pub workload_template_rules_deny_kinds: Vec<String>,
    /// Namespace of the PV-6 ConfigMap.
    #[arg(long, default_value = ENHANCED_VALIDATOR_NAMESPACE)]
    pub enhanced_validator_config_namespace: String,
    /// Name of the PV-6 ConfigMap.
    #[arg(long, default_value = ENHANCED_VALIDATOR_NAME)]
    pub enhanced_validator_config_name: String,
    /// PB: comma list of username substrings allowed to bind (empty: off).
    #[arg(long, value_delimiter = ',')]
    pub binding_admission_user_name: Vec<String>,
    /// PB: comma list of namespaces enforced (`*` = all).
    #[arg(long, value_delimiter = ',')]
    pub binding_admission_namespaces: Vec<String>,
    /// PB: namespaces never enforced.
    #[arg(long, value_delimiter = ',', default_value = "kube-system")]
    pub binding_admission_exclude_namespaces: Vec<String>,
    /// PB: pod label keys that bypass the check.
    #[arg(long, value_delimiter = ',', default_value = BYPASS_LABEL)]
    pub binding_admission_bypass_labels: Vec<String>,
    /// PB: pod annotation keys that bypass the check.
    #[arg(long, value_delimiter = ',')]
    pub binding_admission_bypass_annotations: Vec<String>,
    /// PB: log instead of deny (true/false).
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub binding_admission_dry_run: bool,
}

const SYSTEM_NAMESPACES: &str = "kube-system,koordinator-system";
const ENHANCED_VALIDATOR_NAMESPACE: &str = "koordinator-system";
const ENHANCED_VALIDATOR_NAME: &str = "pod-enhanced-validator-config";
const BYPASS_LABEL: &str = "koordinator.sh/binding-admission-bypass";

impl Default for Options {
    fn default() -> Self {
        let list = |s: &str| s.split(',').map(str::to_owned).collect();
        Self {
            quota_state_url: String::new(),
            quota_state_client_secret: String::new(),
            quota_state_ca_file: None,
            quota_state_cert_file: None,
            quota_state_key_file: None,
            quota_state_server_name: String::new(),
            quota_state_cluster: String::new(),
            quota_state_calls_in_flight: 1,
            quota_state_timeout_ms: 2000,
            quota_unavailable: Unavailable::Deny,
            quota_label_scope: LabelScope::Any,
            quota_system_namespaces: list(SYSTEM_NAMESPACES),
            workload_kinds_file: None,
            workload_gang_kinds: Vec::new(),
            workload_template_rules_deny_kinds: Vec::new(),
            enhanced_validator_config_namespace: ENHANCED_VALIDATOR_NAMESPACE.into(),
            enhanced_validator_config_name: ENHANCED_VALIDATOR_NAME.into(),
            binding_admission_user_name: Vec::new(),
            binding_admission_namespaces: Vec::new(),
            binding_admission_exclude_namespaces: list("kube-system"),
            binding_admission_bypass_labels: list(BYPASS_LABEL),
            binding_admission_bypass_annotations: Vec::new(),
            binding_admission_dry_run: false,
        }
    }
}

/// `--quota-state-cluster`: empty, or a DNS label (quota-state refuses any other name).
fn cluster_name(s: &str) -> Result<String, String> {
    if s.is_empty() || quota_protocol::spec::is_cluster_name(s) {
        Ok(s.to_owned())
    } else {
        Err("a DNS label (lower-case letters, digits and '-', at most 63)".into())
    }
}

/// A comma list's entries, trimmed, without empty ones (`--x=` is an empty list).
pub fn entries(list: &[String]) -> impl Iterator<Item = &str> {
    list.iter().map(|s| s.trim()).filter(|s| !s.is_empty())
}

impl Options {
    /// The options of these flags (`--name=value`, as `serve` reads them).
    pub fn parse<'a>(flags: impl IntoIterator<Item = &'a str>) -> Result<Self, String> {
        admission_kit::cli::parse_options(flags)
    }

    /// Whether quota questions go to quota-state.
    pub fn quota_state(&self) -> bool {
        !self.quota_state_url.is_empty()
    }

    /// Whether this webhook is a fleet member's (`--quota-state-cluster` set).
    pub fn fleet_member(&self) -> bool {
        !self.quota_state_cluster.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flags_defaults_are_options_default() {
        assert_eq!(
            admission_kit::cli::defaults::<Options>(),
            Ok(Options::default())
        );
    }

    #[test]
    fn bad_values_are_refused_naming_the_flag() {
        for (flag, says) in [
            (
                "--quota-state-calls-in-flight=0",
                "--quota-state-calls-in-flight",
            ),
            (
                "--quota-state-calls-in-flight=65",
                "--quota-state-calls-in-flight",
            ),
            ("--quota-state-cluster=Not_A_Label", "--quota-state-cluster"),
            ("--quota-unavailable=maybe", "--quota-unavailable"),
            ("--quota-label-scope=cluster", "--quota-label-scope"),
            (
                "--binding-admission-dry-run=yes",
                "--binding-admission-dry-run",
            ),
            ("--quota-state-timeout-ms=soon", "--quota-state-timeout-ms"),
        ] {
            let err = Options::parse([flag]).unwrap_err();
            assert!(err.contains(says), "{flag}: {err}");
        }
    }

    #[test]
    fn lists_are_comma_separated_and_an_empty_value_is_an_empty_list() {
        let o = Options::parse([
            "--binding-admission-user-name= koord-scheduler ,x",
            "--binding-admission-exclude-namespaces=",
        ])
        .unwrap();
        assert_eq!(
            entries(&o.binding_admission_user_name).collect::<Vec<_>>(),
            ["koord-scheduler", "x"]
        );
        assert_eq!(entries(&o.binding_admission_exclude_namespaces).count(), 0);
        assert_eq!(
            entries(&o.quota_system_namespaces).collect::<Vec<_>>(),
            ["kube-system", "koordinator-system"]
        );
    }
}
