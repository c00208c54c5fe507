//! The API server's defaulting of custom resources: before any webhook sees an object, every
//! absent (or `null`) property whose schema has a `default` gets it, at every depth the object
//! reaches (object properties, array items, map values), the default itself defaulted again.
//! Without it a checker would judge objects the cluster never sends (a ModelServing without
//! `replicas` is refused by MS-5, but the CRD's `default: 1` is what the webhook sees).
//!
//! Hand-written: apiextensions-apiserver's structural defaulting is Go, and the walk is short.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde_json::Value;

/// The schema of `group/version, kind` among `crds`, if one is served.
pub fn schema_of<'a>(
    crds: &'a [CustomResourceDefinition],
    group: &str,
    version: &str,
    kind: &str,
) -> Option<&'a JSONSchemaProps> {
    let crd = crds
        .iter()
        .find(|c| c.spec.group == group && c.spec.names.kind == kind)?;
    crd.spec
        .versions
        .iter()
        .find(|v| v.name == version)?
        .schema
        .as_ref()?
        .open_api_v3_schema
        .as_ref()
}

/// Fills the schema's defaults into `v`, as the API server does on create and update.
pub fn apply(schema: &JSONSchemaProps, v: &mut Value) {
    match v {
        Value::Object(map) => {
            for (key, prop) in schema.properties.iter().flatten() {
                let missing = map.get(key).is_none_or(Value::is_null);
                if missing && let Some(d) = &prop.default {
                    map.insert(key.clone(), d.0.clone());
                }
                if let Some(child) = map.get_mut(key) {
                    apply(prop, child);
                }
            }
            if let Some(JSONSchemaPropsOrBool::Schema(values)) = &schema.additional_properties {
                for child in map.values_mut() {
                    apply(values, child);
                }
            }
        }
        Value::Array(items) => {
            if let Some(JSONSchemaPropsOrArray::Schema(item)) = &schema.items {
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

    fn schema(v: Value) -> JSONSchemaProps {
        serde_json::from_value(v).unwrap()
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
}
