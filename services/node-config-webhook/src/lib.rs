//! Koordinator's node and ConfigMap admission (`docs/spec/node-config.md`): Node status
//! resource amplification (NS), Node label conflicts with SLO node strategies (NV), and the SLO
//! controller ConfigMap (CM). Rule functions and denials carry the spec's ids.

pub mod configmap;
pub mod node;
pub mod node_status;
pub mod slo;

use admission_kit::{App, FailurePolicy, Operation, Target};

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

/// The service: upstream paths, failure policies and gates (§0).
pub fn app() -> App {
    use FailurePolicy::{Fail, Ignore};
    use Operation::{Create, Delete, Update};
    App::new(
        "node-config-webhook",
        "Koordinator admission for Nodes, Node status (resource amplification) and the SLO controller ConfigMap.",
    )
    .feature_gates(&GATES)
    .mutate("/mutate-node-status", core("nodes/status", "Node", &[Create, Update]), Ignore, node_status::NodeStatusAmplifier)
    .gate("NodeMutatingWebhook")
    .validate("/validate-node", core("nodes", "Node", &[Create, Update]), Ignore, node::NodeValidator)
    .gate("NodeValidatingWebhook")
    .validate("/validate-configmap", core("configmaps", "ConfigMap", &[Create, Update, Delete]), Fail, configmap::SloConfigMapValidator)
    .gate("ConfigMapValidatingWebhook")
    .object_selector("koordinator.sh/configmap-type", &["slo-controller-config"])
    .option("config-namespace", "Namespace of the SLO controller ConfigMap.", "koordinator-system")
    .option("slo-config-name", "Name of the SLO controller ConfigMap.", "slo-controller-config")
    .option(
        "node-strategy-name-need-check",
        "Require unique names on node strategies (CM-5): true or false.",
        "false",
    )
    .watch_one::<k8s_openapi::api::core::v1::ConfigMap>("config-namespace", "slo-config-name")
    // CM-7 reads Node names and labels only: metadata alone is watched (a GPU Node with its
    // images and conditions is many times larger).
    .watch_metadata::<k8s_openapi::api::core::v1::Node>()
}
