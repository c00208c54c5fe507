//! Arbitrary text as one key of the SLO controller ConfigMap (the first byte picks the key,
//! the rest is its value; a second value for `system-config` follows a NUL byte), decided by
//! /validate-configmap: the SLO parsers without the JSON escaping a whole review would need.
#![no_main]

use std::sync::LazyLock;

static SERVICE: LazyLock<(admission_kit::App, admission_kit::review::handler::Context)> =
    LazyLock::new(|| admission_fuzz::service(node_config_webhook::app(), ""));

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let keys = &node_config_webhook::slo::KEYS;
    let key = keys[usize::from(pick) % keys.len()].name;
    let text = String::from_utf8_lossy(rest);
    let (value, system) = text.split_once('\0').unwrap_or((&text, "{}"));
    let mut data = serde_json::Map::new();
    data.insert(key.into(), value.into());
    if key != "system-config" {
        data.insert("system-config".into(), system.into());
    }
    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "fuzz", "operation": "CREATE",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "slo-controller-config", "namespace": "koordinator-system",
            "object": {"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "slo-controller-config", "namespace": "koordinator-system",
                                    "labels": {"koordinator.sh/configmap-type": "slo-controller-config"}},
                       "data": data}
        }
    });
    let Ok(body) = serde_json::to_vec(&review) else {
        return;
    };
    let (app, ctx) = &*SERVICE;
    let Some(i) = app
        .endpoints
        .iter()
        .position(|e| e.path == "/validate-configmap")
    else {
        return;
    };
    let mut input = vec![u8::try_from(i).unwrap_or(0)];
    input.extend_from_slice(&body);
    admission_testing::fuzzing::review(app, ctx, &input);
});
