//! The API server's schemas, as validation reads them: the OpenAPI v3 documents of the built-in
//! kinds (recorded from kube-apiserver v1.34.4, `openapi.json`) and the structural schemas of the
//! CRDs our services serve (`crd_schemas.json`). Both are pruned to what a check reads (types,
//! properties, items, map values, required, enums, bounds, lengths, the Kubernetes extensions)
//! and kept in one shape, [`Node`], so one walk serves both.
//!
//! Hand-written rather than a JSON Schema crate: the API server's rules are not JSON Schema's
//! (unknown fields are refused by strict decoding unless a node preserves them, `null` is dropped
//! before validation, `x-kubernetes-int-or-string` and embedded resources), and its messages name
//! fields its own way (`spec.containers[0].foo`).

use std::collections::BTreeMap;
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One schema node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Node {
    /// Another schema by name (OpenAPI `$ref`, `allOf: [{$ref}]`), to read instead of this.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// `type`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub ty: Option<String>,
    /// An object's known properties.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub properties: BTreeMap<String, Node>,
    /// An array's items.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub items: Option<Box<Node>>,
    /// A map's values (`additionalProperties` with a schema).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Box<Node>>,
    /// Any field goes below this node (`x-kubernetes-preserve-unknown-fields`,
    /// `additionalProperties: true`, an object with no properties in the built-in documents).
    #[serde(default, skip_serializing_if = "is_false")]
    pub open: bool,
    /// `x-kubernetes-embedded-resource`: an object with its own `apiVersion`, `kind` and
    /// `metadata`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub embedded: bool,
    /// `x-kubernetes-int-or-string`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub int_or_string: bool,
    /// `required`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<String>,
    /// `enum`.
    #[serde(default, rename = "enum", skip_serializing_if = "Vec::is_empty")]
    pub enumeration: Vec<Value>,
    /// `minimum`, exclusive when `exclusiveMinimum`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum: Option<f64>,
    /// `exclusiveMinimum`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub exclusive_minimum: bool,
    /// `maximum`, exclusive when `exclusiveMaximum`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maximum: Option<f64>,
    /// `exclusiveMaximum`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub exclusive_maximum: bool,
    /// `minLength`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_length: Option<u64>,
    /// `maxLength`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<u64>,
    /// `minItems`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_items: Option<u64>,
    /// `maxItems`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_items: Option<u64>,
    /// `pattern`: a Go regular expression a string matches somewhere (Go's `MatchString`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// A list `kubectl apply` merges item by item (`x-kubernetes-patch-strategy: merge`): by
    /// this field of its items (`x-kubernetes-patch-merge-key`, `name` for containers), or, when
    /// empty, as a set of values (finalizers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_key: Option<String>,
    /// `format`, when it is one of [`CHECKED_FORMATS`] (its name as the API server normalises
    /// it, without dashes): the others are not kept, so nothing refuses what is not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
}

/// The string formats checked here, of those the API server checks in a CRD's schema: the ones
/// the upstream CRDs use (`uri`, `date-time`, `byte`) and two of the same family.
pub const CHECKED_FORMATS: [&str; 5] = ["uri", "datetime", "date", "byte", "uuid"];

fn is_false(b: &bool) -> bool {
    !*b
}

impl Node {
    /// The node of an OpenAPI v3 or CRD schema (`openAPIV3Schema`), pruned. `open_objects`: an
    /// object with neither properties nor a map's values takes any field (the built-in
    /// documents write `RawExtension` so); in a CRD's structural schema it takes none.
    pub fn from_schema(v: &Value, open_objects: bool) -> Node {
        let mut n = Node::default();
        if let Some(r) = v["$ref"].as_str() {
            n.reference = Some(r.rsplit('/').next().unwrap_or(r).to_owned());
            return n;
        }
        if let Some([one]) = v["allOf"].as_array().map(Vec::as_slice) {
            let mut inner = Node::from_schema(one, open_objects);
            inner.merge_bounds(v);
            return inner;
        }
        n.ty = v["type"].as_str().map(str::to_owned);
        for (k, p) in v["properties"].as_object().into_iter().flatten() {
            n.properties
                .insert(k.clone(), Node::from_schema(p, open_objects));
        }
        if v["items"].is_object() {
            n.items = Some(Box::new(Node::from_schema(&v["items"], open_objects)));
        }
        match &v["additionalProperties"] {
            Value::Object(_) => {
                n.values = Some(Box::new(Node::from_schema(
                    &v["additionalProperties"],
                    open_objects,
                )));
            }
            Value::Bool(true) => n.open = true,
            _ => {}
        }
        n.open |= v["x-kubernetes-preserve-unknown-fields"] == Value::Bool(true);
        n.embedded = v["x-kubernetes-embedded-resource"] == Value::Bool(true);
        n.int_or_string = v["x-kubernetes-int-or-string"] == Value::Bool(true);
        // A quantity in a CRD: `anyOf: [{type: integer}, {type: string}]`.
        if let Some(any) = v["anyOf"].as_array() {
            let types: Vec<&str> = any.iter().filter_map(|a| a["type"].as_str()).collect();
            n.int_or_string |= types.contains(&"integer") && types.contains(&"string");
        }
        if open_objects
            && n.ty.as_deref() == Some("object")
            && n.properties.is_empty()
            && n.values.is_none()
        {
            n.open = true;
        }
        n.required = v["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r.as_str().map(str::to_owned))
            .collect();
        n.enumeration = v["enum"].as_array().cloned().unwrap_or_default();
        n.pattern = v["pattern"].as_str().map(str::to_owned);
        let strategy = v["x-kubernetes-patch-strategy"]
            .as_str()
            .unwrap_or_default();
        if strategy.split(',').any(|s| s == "merge") {
            n.merge_key = Some(
                v["x-kubernetes-patch-merge-key"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            );
        }
        n.format = v["format"]
            .as_str()
            .map(|f| f.replace('-', ""))
            .filter(|f| CHECKED_FORMATS.contains(&f.as_str()));
        n.merge_bounds(v);
        n
    }

    fn merge_bounds(&mut self, v: &Value) {
        let num = |k: &str| v[k].as_f64();
        let count = |k: &str| v[k].as_u64();
        self.minimum = self.minimum.or(num("minimum"));
        self.maximum = self.maximum.or(num("maximum"));
        self.exclusive_minimum |= v["exclusiveMinimum"] == Value::Bool(true);
        self.exclusive_maximum |= v["exclusiveMaximum"] == Value::Bool(true);
        self.min_length = self.min_length.or(count("minLength"));
        self.max_length = self.max_length.or(count("maxLength"));
        self.min_items = self.min_items.or(count("minItems"));
        self.max_items = self.max_items.or(count("maxItems"));
    }
}

/// Schemas by name, and the schema of each kind (`apiVersion/Kind`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Schemas {
    /// `apiVersion/Kind` → the name of its schema.
    pub kinds: BTreeMap<String, String>,
    /// Every schema a kind's reaches, by name.
    pub schemas: BTreeMap<String, Node>,
    /// The nodes' patterns, compiled once when first needed.
    #[serde(skip)]
    pub patterns: Patterns,
}

/// Compiled `pattern`s. Not part of the schemas' value: two copies are equal whatever each has
/// compiled, and a clone compiles again.
#[derive(Debug, Default)]
pub struct Patterns(std::sync::OnceLock<std::collections::HashMap<String, Option<regex::Regex>>>);

impl Clone for Patterns {
    fn clone(&self) -> Self {
        Patterns::default()
    }
}

impl PartialEq for Patterns {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Schemas {
    /// Whether `value` matches `pattern` (a node's), as Go's `regexp.MatchString` would; `None`
    /// when the pattern is none of the schemas' or does not compile here (it is then not
    /// checked: the API server refused the CRD if Go could not compile it either).
    pub fn matches(&self, pattern: &str, value: &str) -> Option<bool> {
        let compiled = self.patterns.0.get_or_init(|| {
            let mut all = std::collections::HashMap::new();
            for n in self.schemas.values() {
                n.patterns(&mut |p| {
                    all.entry(p.to_owned())
                        .or_insert_with(|| regex::Regex::new(p).ok());
                });
            }
            all
        });
        compiled.get(pattern)?.as_ref().map(|r| r.is_match(value))
    }
}

impl Schemas {
    /// The schemas of OpenAPI v3 documents (one per group-version, as the API server serves them
    /// under `/openapi/v3/…`), pruned: each kind's schema and every schema it reaches.
    pub fn from_openapi(documents: &[Value]) -> Schemas {
        let mut all = BTreeMap::new();
        let mut kinds = BTreeMap::new();
        for doc in documents {
            for (name, s) in doc["components"]["schemas"]
                .as_object()
                .into_iter()
                .flatten()
            {
                all.insert(name.clone(), Node::from_schema(s, true));
                for gvk in s["x-kubernetes-group-version-kind"]
                    .as_array()
                    .into_iter()
                    .flatten()
                {
                    let (group, version, kind) = (
                        gvk["group"].as_str().unwrap_or_default(),
                        gvk["version"].as_str().unwrap_or_default(),
                        gvk["kind"].as_str().unwrap_or_default(),
                    );
                    // Options and events every group repeats are no kinds one writes.
                    if s["properties"]["metadata"].is_null() || kind.ends_with("List") {
                        continue;
                    }
                    let api_version = if group.is_empty() {
                        version.to_owned()
                    } else {
                        format!("{group}/{version}")
                    };
                    kinds.insert(format!("{api_version}/{kind}"), name.clone());
                }
            }
        }
        // Keep what the kinds reach.
        let mut keep = std::collections::BTreeSet::new();
        let mut todo: Vec<String> = kinds.values().cloned().collect();
        while let Some(name) = todo.pop() {
            if !keep.insert(name.clone()) {
                continue;
            }
            if let Some(n) = all.get(&name) {
                n.references(&mut todo);
            }
        }
        let schemas = all.into_iter().filter(|(k, _)| keep.contains(k)).collect();
        Schemas {
            kinds,
            schemas,
            patterns: Patterns::default(),
        }
    }

    /// The schema of `api_version/kind`, if known.
    pub fn kind(&self, api_version: &str, kind: &str) -> Option<&Node> {
        self.schemas
            .get(self.kinds.get(&format!("{api_version}/{kind}"))?)
    }

    /// `n`, or the schema it refers to.
    pub fn resolve<'a>(&'a self, mut n: &'a Node) -> &'a Node {
        // A reference to a reference: bounded, as a cycle of plain references is no schema.
        for _ in 0..8 {
            match n.reference.as_ref().and_then(|r| self.schemas.get(r)) {
                Some(next) => n = next,
                None => break,
            }
        }
        n
    }
}

impl Node {
    fn patterns(&self, each: &mut impl FnMut(&str)) {
        if let Some(p) = &self.pattern {
            each(p);
        }
        for p in self.properties.values() {
            p.patterns(each);
        }
        for n in self.items.iter().chain(&self.values) {
            n.patterns(each);
        }
    }

    fn references(&self, out: &mut Vec<String>) {
        out.extend(self.reference.iter().cloned());
        for p in self.properties.values() {
            p.references(out);
        }
        for n in self.items.iter().chain(&self.values) {
            n.references(out);
        }
    }
}

/// The built-in kinds' schemas: kube-apiserver v1.34.4's OpenAPI v3 documents, pruned
/// (`openapi.json`, recorded from the project's control plane and held to it by
/// `tests/api_server_corpus.rs`).
static BUILT_IN: LazyLock<Schemas> =
    LazyLock::new(|| serde_json::from_str(include_str!("openapi.json")).unwrap_or_default());

/// The schemas of the upstream CRDs a cluster running our services installs (the pinned
/// releases' CRD files under `fixtures/crds/`), pruned when the binary was built
/// (`crd_schemas.json`, kept equal to [`crd_schemas`] of those files by a test).
static CRDS: LazyLock<Schemas> =
    LazyLock::new(|| serde_json::from_str(include_str!("crd_schemas.json")).unwrap_or_default());

/// Whether `group` is one of Kubernetes' own API groups (the core group, `apps`, `batch`, the
/// `*.k8s.io` groups kube-apiserver serves) rather than a CRD's: SIG projects' `*.sigs.k8s.io`
/// and `*.x-k8s.io` groups (ElasticQuota's `scheduling.sigs.k8s.io`, JobSet's), the Gateway
/// API's and the volume snapshots' are installed as CRDs.
pub fn is_built_in_group(group: &str) -> bool {
    !group.contains('.')
        || (group.ends_with(".k8s.io")
            && !group.ends_with(".sigs.k8s.io")
            && !group.ends_with(".x-k8s.io")
            && group != "gateway.networking.k8s.io"
            && group != "snapshot.storage.k8s.io")
}

/// The built-in kinds' schemas.
pub fn built_in() -> &'static Schemas {
    &BUILT_IN
}

/// The schemas of the CRDs this repository's services serve.
pub fn crds() -> &'static Schemas {
    &CRDS
}

/// The structural schemas of the CRDs (`apiextensions.k8s.io/v1` objects) in `crds`, by
/// `group/version/Kind`.
pub fn crd_schemas(crds: &[Value]) -> Schemas {
    let mut out = Schemas::default();
    for crd in crds {
        let spec = &crd["spec"];
        let (group, kind) = (
            spec["group"].as_str().unwrap_or_default(),
            spec["names"]["kind"].as_str().unwrap_or_default(),
        );
        for v in spec["versions"].as_array().into_iter().flatten() {
            let schema = &v["schema"]["openAPIV3Schema"];
            if !schema.is_object() {
                continue;
            }
            let version = v["name"].as_str().unwrap_or_default();
            let key = format!("{group}/{version}/{kind}");
            out.kinds.insert(key.clone(), key.clone());
            out.schemas.insert(key, Node::from_schema(schema, false));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `crd_schemas.json` is what the CRD files under `fixtures/crds/` say. After changing one:
    /// `ADMISSION_CHECK_BLESS=1 cargo test -p admission-check --lib crd_schemas`.
    #[test]
    fn crd_schemas_are_current() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/crds");
        let mut files = Vec::new();
        for dir in std::fs::read_dir(&root).unwrap().flatten() {
            for f in std::fs::read_dir(dir.path()).unwrap().flatten() {
                if f.path().extension().is_some_and(|e| e == "yaml") {
                    files.push(f.path());
                }
            }
        }
        files.sort();
        let files_crds: Vec<Value> = files
            .iter()
            .map(|f| serde_yaml_ng::from_str(&std::fs::read_to_string(f).unwrap()).unwrap())
            .collect();
        let generated = crd_schemas(&files_crds);
        assert!(
            generated
                .kinds
                .contains_key("scheduling.sigs.k8s.io/v1alpha1/ElasticQuota")
        );
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/crd_schemas.json");
        if std::env::var_os("ADMISSION_CHECK_BLESS").is_some() {
            std::fs::write(path, serde_json::to_string(&generated).unwrap() + "\n").unwrap();
        }
        assert!(
            *crds() == generated,
            "src/crd_schemas.json is stale: ADMISSION_CHECK_BLESS=1 cargo test -p admission-check --lib crd_schemas"
        );
    }

    #[test]
    fn the_built_in_schemas_hold_the_kinds_people_write() {
        for kind in [
            "v1/Pod",
            "v1/Service",
            "apps/v1/Deployment",
            "batch/v1/CronJob",
            "policy/v1/PodDisruptionBudget",
        ] {
            assert!(built_in().kinds.contains_key(kind), "{kind}");
        }
        let pod = built_in()
            .kind("v1", "Pod")
            .map(|n| n.properties.contains_key("spec"));
        assert_eq!(pod, Some(true));
    }
}
