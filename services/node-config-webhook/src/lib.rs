//! Koordinator's node and ConfigMap admission (`docs/spec/node-config.md`): Node status
//! resource amplification (NS), Node label conflicts with SLO node strategies (NV), and the SLO
//! controller ConfigMap (CM). Rule functions and denials carry the spec's ids.

pub mod configmap;
pub mod node;
pub mod node_status;
pub mod slo;

use std::sync::Arc;

use admission_kit::{App, FailurePolicy, Operation, Target};

/// Where Koordinator's SLO controller keeps its ConfigMap by default.
const CONFIG_NAMESPACE: &str = "koordinator-system";
/// The SLO controller ConfigMap's default name.
const CONFIG_NAME: &str = "slo-controller-config";

/// The service's options: flags of `serve` and `review`, parsed once.
#[derive(clap::Args, Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Namespace of the SLO controller ConfigMap.
    #[arg(long, default_value = CONFIG_NAMESPACE)]
    pub config_namespace: String,
    /// Name of the SLO controller ConfigMap.
    #[arg(long = "slo-config-name", default_value = CONFIG_NAME)]
    pub config_name: String,
    /// Require unique names on node strategies (CM-5): true or false.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub node_strategy_name_need_check: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            config_namespace: CONFIG_NAMESPACE.into(),
            config_name: CONFIG_NAME.into(),
            node_strategy_name_need_check: false,
        }
    }
}

/// Koordinator's gate names; ours default to on (the spec's fixture gate profile, §0).
pub const GATES: [(&str, bool); 3] = [
    ("NodeMutatingWebhook", true),
    ("NodeValidatingWebhook", true),
    ("ConfigMapValidatingWebhook", true),
];

fn core(resource: &str, kind: &str, operations: &'static [Operation]) -> Target {
    let t = Target::resource("", "v1", resource, kind).operations(operations);
    if kind == "Node" {
        t.cluster_scoped()
    } else {
        t
    }
}

/// The service under these of its flags (`--name=value`), as `serve` builds it: for tools that
/// run it under options. A flag it does not declare is an error.
pub fn app_from_flags<'a>(flags: impl IntoIterator<Item = &'a str>) -> Result<App, String> {
    admission_kit::cli::build_with::<Options>(flags, |o| Ok(app_with(o)))
}

/// The service at its default options.
pub fn app() -> App {
    app_with(Options::default())
}

/// The service: upstream paths, failure policies and gates (§0), under `options`.
pub fn app_with(options: Options) -> App {
    let options = Arc::new(options);
    use FailurePolicy::{Fail, Ignore};
    use Operation::{Create, Delete, Update};
    App::new(
        "node-config-webhook",
        "Koordinator admission for Nodes, Node status (resource amplification) and the SLO controller ConfigMap.",
    )
    .feature_gates(&GATES)
    .mutate("/mutate-node-status", core("nodes/status", "Node", &[Create, Update]), Ignore, node_status::NodeStatusAmplifier)
    .gate("NodeMutatingWebhook")
    .validate("/validate-node", core("nodes", "Node", &[Create, Update]), Ignore, node::NodeValidator(options.clone()))
    .gate("NodeValidatingWebhook")
    .validate("/validate-configmap", core("configmaps", "ConfigMap", &[Create, Update, Delete]), Fail, configmap::SloConfigMapValidator(options.clone()))
    .gate("ConfigMapValidatingWebhook")
    .object_selector("koordinator.sh/configmap-type", &["slo-controller-config"])
    .watch_one::<k8s_openapi::api::core::v1::ConfigMap>(
        options.config_namespace.clone(),
        options.config_name.clone(),
    )
    // CM-7 reads Node names and labels only: metadata alone is watched (a GPU Node with its
    // images and conditions is many times larger).
    .watch_metadata::<k8s_openapi::api::core::v1::Node>()
}

#[cfg(test)]
mod options_tests {
    use super::Options;

    #[test]
    fn the_flags_defaults_are_options_default() {
        assert_eq!(
            admission_kit::cli::defaults::<Options>(),
            Ok(Options::default())
        );
    }

    #[test]
    fn flags_are_read_as_serve_reads_them() {
        let o: Options = admission_kit::cli::parse_options([
            "--config-namespace=ops",
            "--slo-config-name",
            "slo",
            "--node-strategy-name-need-check=true",
        ])
        .unwrap();
        assert_eq!(
            (o.config_namespace.as_str(), o.config_name.as_str()),
            ("ops", "slo")
        );
        assert!(o.node_strategy_name_need_check);
        let bad = admission_kit::cli::parse_options::<Options, _, _>([
            "--node-strategy-name-need-check=yes",
        ]);
        assert!(bad.is_err_and(|e| e.contains("--node-strategy-name-need-check")));
    }
}
