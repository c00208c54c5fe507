//! Every node-config case in fixtures/reviews/node-config and examples/node-config,
//! through the handler in-process and through `node-config-webhook review`.

use admission_testing::fixtures::{check_in_process, check_with_binary, fixtures_root, run_all};
use std::path::Path;

#[test]
fn node_config_fixtures_pass_in_process() {
    let app = node_config_webhook::app();
    let root = fixtures_root();
    match run_all(&root, "node-config", |c| check_in_process(&app, c)) {
        Ok(n) => assert!(n >= 58, "only {n} cases found"),
        Err(e) => panic!("{e}"),
    }
    // Koordinator's §8 histogram, one plugin per webhook, allowed and rejected.
    let text = String::from_utf8(
        admission_kit::server::metrics::Metrics::new()
            .unwrap()
            .render(),
    )
    .unwrap();
    for plugin in [
        "NodeResourceAmplificationPlugin",
        "SLOManagerConfigConflictForNode",
        "SLOConfig",
    ] {
        assert!(
            text.contains(&format!("plugin_name=\"{plugin}\"")),
            "{plugin} not recorded"
        );
    }
    assert!(text.contains("object_type=\"configmap\",operation=\"CREATE\",plugin_name=\"SLOConfig\",status=\"rejected\""));
}

#[test]
fn node_config_fixtures_pass_through_the_review_command() {
    let bin = Path::new(env!("CARGO_BIN_EXE_node-config-webhook"));
    let root = fixtures_root();
    match run_all(&root, "node-config", |c| check_with_binary(bin, c)) {
        Ok(n) => assert!(n >= 58, "only {n} cases found"),
        Err(e) => panic!("{e}"),
    }
}

/// The mutation fuzzer: seeded variants of every case keep every property that holds
/// whatever upstream decides (`admission_testing::variants`). `ADMISSION_VARIANTS_PER_CASE` and
/// `ADMISSION_VARIANTS_SEED` make another or a longer run.
#[test]
fn node_config_variants_keep_every_property() {
    admission_testing::variants::check_domain(&node_config_webhook::app(), "node-config");
}
