//! The API server's defaulting of custom resources: before any webhook sees an object, every
//! absent (or `null`) property whose schema has a `default` gets it, at every depth the object
//! reaches (object properties, array items, map values), the default itself defaulted again.
//! Without it a checker would judge objects the cluster never sends (a ModelServing without
//! `replicas` is refused by MS-5, but the CRD's `default: 1` is what the webhook sees).
//!
//! Hand-written: apiextensions-apiserver's structural defaulting is Go, and the walk is short.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use admission_kit::App;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What defaulting reads of a CRD schema: the `default`s and the way down to them (object
/// properties, array items, map values). Nodes with no default at or below them are left out,
/// where the walk would change nothing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Defaults {
    /// The node's own default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// Object properties with a default at or below them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub properties: BTreeMap<String, Defaults>,
    /// Array items, when they hold a default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<Box<Defaults>>,
    /// Map values (`additionalProperties`), when they hold a default.
    #[serde(
        default,
        rename = "additionalProperties",
        skip_serializing_if = "Option::is_none"
    )]
    pub additional_properties: Option<Box<Defaults>>,
}

impl Defaults {
    /// The defaults of `schema`; `None` when it has none at any depth.
    pub fn of(schema: &JSONSchemaProps) -> Option<Self> {
        let properties: BTreeMap<String, Defaults> = schema
            .properties
            .iter()
            .flatten()
            .filter_map(|(k, p)| Some((k.clone(), Self::of(p)?)))
            .collect();
        let items = match &schema.items {
            Some(JSONSchemaPropsOrArray::Schema(item)) => Self::of(item).map(Box::new),
            _ => None,
        };
        let additional_properties = match &schema.additional_properties {
            Some(JSONSchemaPropsOrBool::Schema(values)) => Self::of(values).map(Box::new),
            _ => None,
        };
        let d = Self {
            default: schema.default.as_ref().map(|d| d.0.clone()),
            properties,
            items,
            additional_properties,
        };
        (d != Self::default()).then_some(d)
    }
}

/// Per service, the defaults of each kind it serves, by `group/version/Kind`.
pub type Table = BTreeMap<String, BTreeMap<String, Defaults>>;

/// The defaults of every CRD `apps` serve. Generating a CRD walks every type of its schema
/// (a third of a second for the four services in a release build, seconds in a debug build).
pub fn generate(apps: &[App]) -> Table {
    apps.iter()
        .map(|app| {
            let kinds = app
                .custom_resource_definitions()
                .iter()
                .flat_map(|crd| {
                    crd.spec.versions.iter().filter_map(move |v| {
                        let schema = v.schema.as_ref()?.open_api_v3_schema.as_ref()?;
                        let key = format!("{}/{}/{}", crd.spec.group, v.name, crd.spec.names.kind);
                        Some((key, Defaults::of(schema)?))
                    })
                })
                .collect();
            (app.name.to_owned(), kinds)
        })
        .collect()
}

/// The table of this repository's services as generated when the binary was built:
/// `crd_defaults.json`, which `built_in_table_is_current` keeps equal to [`generate`] of
/// [`crate::services`]. Built in rather than generated per run because every run that checks
/// one custom resource paid the generation (0.3 s of a pre-commit hook's run on one file).
static BUILT_IN: LazyLock<Option<Table>> =
    LazyLock::new(|| serde_json::from_str(include_str!("crd_defaults.json")).ok());

/// The defaults table of `apps`: each service's from the built-in table, generated for a
/// service it does not know (a test's own service).
pub fn for_apps(apps: &[App]) -> Table {
    apps.iter()
        .map(
            |app| match BUILT_IN.as_ref().and_then(|t| t.get(app.name)) {
                Some(kinds) => (app.name.to_owned(), kinds.clone()),
                None => generate(std::slice::from_ref(app))
                    .pop_first()
                    .unwrap_or_else(|| (app.name.to_owned(), BTreeMap::new())),
            },
        )
        .collect()
}

/// The defaults of `group/version, kind` in `table`, the first service serving it first.
pub fn lookup<'a>(
    table: &'a Table,
    apps: &[App],
    group: &str,
    version: &str,
    kind: &str,
) -> Option<&'a Defaults> {
    let key = format!("{group}/{version}/{kind}");
    apps.iter()
        .find_map(|app| table.get(app.name).and_then(|kinds| kinds.get(&key)))
}

/// Fills the defaults into `v`, as the API server does on create and update.
pub fn apply(schema: &Defaults, v: &mut Value) {
    match v {
        Value::Object(map) => {
            for (key, prop) in &schema.properties {
                let missing = map.get(key).is_none_or(Value::is_null);
                if missing && let Some(d) = &prop.default {
                    map.insert(key.clone(), d.clone());
                }
                if let Some(child) = map.get_mut(key) {
                    apply(prop, child);
                }
            }
            if let Some(values) = &schema.additional_properties {
                for child in map.values_mut() {
                    apply(values, child);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = &schema.items {
                for child in items {
                    apply(item, child);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema(v: Value) -> Defaults {
        Defaults::of(&serde_json::from_value(v).unwrap()).unwrap_or_default()
    }

    #[test]
    fn absent_and_null_properties_take_defaults_at_every_depth() {
        let s = schema(
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "replicas": {"type": "integer", "default": 1},
            "rollout": {"type": "object", "properties": {"type": {"type": "string", "default": "Rolling"}}},
            "roles": {"type": "array", "items": {"type": "object", "properties": {
                "replicas": {"type": "integer", "default": 1}}}},
            "sources": {"type": "object", "additionalProperties": {"type": "object", "properties": {
                "port": {"type": "integer", "default": 8100}}}}}}}}),
        );
        let mut v = json!({"spec": {"replicas": null, "rollout": {}, "roles": [{}, {"replicas": 3}],
                                     "sources": {"a": {}}}});
        apply(&s, &mut v);
        assert_eq!(
            v,
            json!({"spec": {"replicas": 1, "rollout": {"type": "Rolling"},
                            "roles": [{"replicas": 1}, {"replicas": 3}], "sources": {"a": {"port": 8100}}}})
        );
    }

    #[test]
    fn an_absent_parent_is_not_created() {
        let s = schema(
            json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "rollout": {"type": "object", "properties": {"type": {"type": "string", "default": "R"}}}}}}}),
        );
        let mut v = json!({"spec": {}});
        apply(&s, &mut v);
        assert_eq!(v, json!({"spec": {}}));
    }

    #[test]
    fn only_the_way_to_defaults_is_kept() {
        let s = schema(json!({"type": "object", "properties": {
            "a": {"type": "object", "properties": {"b": {"type": "string"}}},
            "c": {"type": "array", "items": {"type": "object", "properties": {
                "d": {"type": "integer", "default": 2}, "e": {"type": "string"}}}}}}));
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            json!({"properties": {"c": {"items": {"properties": {"d": {"default": 2}}}}}})
        );
    }

    /// `crd_defaults.json` is what the services' CRDs say today. After a change to a served
    /// type: `ADMISSION_CHECK_BLESS=1 cargo test -p admission-check --lib built_in_table`.
    #[test]
    fn built_in_table_is_current() {
        let generated = generate(&crate::services());
        let text = format!("{}\n", serde_json::to_string_pretty(&generated).unwrap());
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/crd_defaults.json");
        if std::env::var_os("ADMISSION_CHECK_BLESS").is_some() {
            std::fs::write(path, &text).unwrap();
        }
        assert_eq!(
            BUILT_IN.as_ref(),
            Some(&generated),
            "src/crd_defaults.json is stale: ADMISSION_CHECK_BLESS=1 cargo test -p admission-check --lib built_in_table"
        );
    }
}
