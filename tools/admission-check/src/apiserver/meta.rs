//! Object metadata as the API server validates it on every kind: the name's grammar (which
//! depends on the kind), the namespace's, and the keys and values of labels and annotations.

use admission_compat::validation::{
    dns1035_label_errors, dns1123_label_errors, dns1123_subdomain_errors, label_value_errors,
    qualified_name_errors,
};
use serde_json::Value;

use super::{Finding, finding, quoted};

/// A name grammar: what is wrong with a name.
type Grammar = fn(&str) -> Vec<String>;

/// The grammar a kind's names follow, and the longest name it takes.
fn name_rule(api_version: &str, kind: &str) -> (Grammar, Option<usize>) {
    match (api_version, kind) {
        ("v1", "Namespace") | ("apps/v1", "StatefulSet") => (dns1123_label_errors, None),
        ("v1", "Service") => (dns1035_label_errors, None),
        // A CronJob's Jobs are named after it with an 11-character suffix.
        ("batch/v1", "CronJob") => (dns1123_subdomain_errors, Some(52)),
        _ => (dns1123_subdomain_errors, None),
    }
}

/// API-4: names follow their kind's grammar: a DNS-1123 subdomain for most kinds (lower case,
/// digits, `-` and `.`, at most 253 characters), a DNS-1123 label for Namespaces and
/// StatefulSets (no dots, at most 63), a DNS-1035 label for Services (starting with a letter);
/// a CronJob's name at most 52 characters; `generateName` the same grammar as a prefix (a trailing
/// `-` is fine); `metadata.namespace` a DNS-1123 label. Refused with 422 before any webhook.
///
/// Refused: `{apiVersion: v1, kind: ConfigMap, metadata: {name: My_Config}}`
///
/// Admitted: `{apiVersion: v1, kind: ConfigMap, metadata: {name: my-config.v1}}`
pub fn api_4_names(object: &Value) -> Vec<Finding> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let meta = &object["metadata"];
    let (grammar, longest) = name_rule(api_version, kind);
    let mut out = Vec::new();
    let mut refuse = |field: &str, value: &str, why: Vec<String>| {
        for msg in why {
            out.push(finding(
                "API-4",
                field.to_owned(),
                format!("Invalid value: {}: {msg}", quoted(value)),
            ));
        }
    };
    if let Some(name) = meta["name"].as_str().filter(|n| !n.is_empty()) {
        let mut why = grammar(name);
        if let Some(max) = longest.filter(|max| name.len() > *max) {
            why.push(format!("must be no more than {max} characters"));
        }
        refuse("metadata.name", name, why);
    }
    if let Some(prefix) = meta["generateName"].as_str().filter(|n| !n.is_empty()) {
        // apimachinery checks a prefix with its trailing dash masked.
        let masked = match prefix.strip_suffix('-') {
            Some(head) => format!("{head}a"),
            None => prefix.to_owned(),
        };
        refuse("metadata.generateName", prefix, grammar(&masked));
    }
    if let Some(ns) = meta["namespace"].as_str().filter(|n| !n.is_empty()) {
        refuse("metadata.namespace", ns, dns1123_label_errors(ns));
    }
    out
}

/// API-5: label keys are qualified names (an optional DNS-1123 subdomain and `/`, then at most
/// 63 characters of letters, digits, `-`, `_` and `.`, starting and ending alphanumeric), label
/// values empty or at most 63 such characters, annotation keys qualified names too; on the
/// object and on every Pod template it carries. Refused with 422 before any webhook.
///
/// Refused: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, labels: {team: a b}}}`
///
/// Admitted: `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, labels: {example.com/team: a-b}}}`
pub fn api_5_labels(meta: &Value, at: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    for (k, v) in meta["labels"].as_object().into_iter().flatten() {
        let field = format!("{at}.labels[{k}]");
        let why = qualified_name_errors(k)
            .into_iter()
            .map(|m| (k.as_str(), m))
            .chain(
                v.as_str()
                    .map(label_value_errors)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|m| (v.as_str().unwrap_or_default(), m)),
            );
        for (value, msg) in why {
            out.push(finding(
                "API-5",
                field.clone(),
                format!("Invalid value: {}: {msg}", quoted(value)),
            ));
        }
    }
    for k in meta["annotations"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
    {
        // The API server checks annotation keys lower-cased.
        for msg in qualified_name_errors(&k.to_lowercase()) {
            out.push(finding(
                "API-5",
                format!("{at}.annotations[{k}]"),
                format!("Invalid value: {}: {msg}", quoted(k)),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::apiserver::tests::fields;

    #[test]
    fn api_4_reads_the_grammar_of_the_kind() {
        let named = |api: &str, kind: &str, meta: Value| {
            api_4_names(&json!({"apiVersion": api, "kind": kind, "metadata": meta}))
        };
        assert!(named("v1", "Pod", json!({"name": "web.v1"})).is_empty());
        assert_eq!(
            fields(&named("v1", "Pod", json!({"name": "Web"}))),
            ["metadata.name"]
        );
        assert_eq!(named("v1", "Service", json!({"name": "1web"})).len(), 1);
        let ns = named("v1", "Namespace", json!({"name": "team.a"}));
        assert!(ns[0].message.ends_with("must not contain dots"), "{ns:?}");
        assert_eq!(
            named("apps/v1", "StatefulSet", json!({"name": "db.v1"})).len(),
            1
        );
        assert!(named("batch/v1", "CronJob", json!({"name": "c".repeat(52)})).is_empty());
        assert_eq!(
            named("batch/v1", "CronJob", json!({"name": "c".repeat(53)})).len(),
            1
        );
        assert!(named("v1", "Pod", json!({"generateName": "web-"})).is_empty());
        assert_eq!(
            fields(&named("v1", "Pod", json!({"generateName": "Web-"}))),
            ["metadata.generateName"]
        );
        assert_eq!(
            fields(&named(
                "v1",
                "Pod",
                json!({"name": "p", "namespace": "Dev"})
            )),
            ["metadata.namespace"]
        );
    }

    #[test]
    fn api_5_names_each_bad_key_and_value() {
        let f = api_5_labels(
            &json!({"labels": {"team": "a b", "-x": "ok", "example.com/y": "v".repeat(63)},
                    "annotations": {"a/b/c": "x", "Free-Text": "any: text"}}),
            "metadata",
        );
        assert_eq!(
            fields(&f),
            [
                "metadata.labels[-x]",
                "metadata.labels[team]",
                "metadata.annotations[a/b/c]"
            ]
        );
        assert!(
            f[1].message
                .starts_with("Invalid value: \"a b\": a valid label"),
            "{f:?}"
        );
        let t = api_5_labels(
            &json!({"labels": {"app": "v".repeat(64)}}),
            "spec.template.metadata",
        );
        assert_eq!(fields(&t), ["spec.template.metadata.labels[app]"]);
    }
}
