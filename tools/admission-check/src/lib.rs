//! `admission-check`: checks plain manifests offline against the rules of every webhook service
//! in this repository, as the API server would admit them: each object is routed by its group,
//! version, kind and subresource to every endpoint registered for it, mutating endpoints first
//! and then validating endpoints on the mutated object, through the services' own endpoint
//! tables (no rule is copied here).
//!
//! Modules: [`input`] reads manifests, [`apiserver`] refuses what the API server refuses
//! before any webhook, [`locate`] finds a field's line in them, [`catalog`] routes and calls the endpoints, [`report`]
//! renders results (text, JSON, JUnit, SARIF), [`suite`] runs test suites, [`rules`] lists the rules from their doc
//! comments ([`rule_id`]: what an id looks like), [`defaults`] carries the CRDs' defaults, [`templates`]
//! derives the Pods a workload's controller creates, [`cluster`] reads
//! state from a live cluster, [`cli`] is the command line.

pub mod apiserver;
pub mod catalog;
pub mod cli;
pub mod cluster;
pub mod defaults;
pub mod input;
pub mod locate;
pub mod report;
/// What a rule id looks like (`MV-03`, `NS-FIX-1`, `QV-C1`, `QV-S`).
pub mod rule_id;
pub mod rules;
pub mod schema;
pub mod suite;
pub mod templates;

use admission_kit::App;

/// `service`'s endpoint table under these of its flags (`--name=value`).
pub fn service_with<'a>(
    service: &str,
    flags: impl IntoIterator<Item = &'a str>,
) -> Result<App, String> {
    let built = match service {
        "registry-webhook" => registry_webhook::app_from_flags(flags),
        "node-config-webhook" => node_config_webhook::app_from_flags(flags),
        "training-webhook" => training_webhook::app_from_flags(flags),
        "scheduling-webhook" => scheduling_webhook::app_from_flags(flags),
        other => return Err(format!("no service {other}")),
    };
    built.map_err(|e| format!("{service}: {e}"))
}

/// Every webhook service's endpoint table.
pub fn services() -> Vec<App> {
    vec![
        registry_webhook::app(),
        node_config_webhook::app(),
        training_webhook::app(),
        scheduling_webhook::app(),
    ]
}
