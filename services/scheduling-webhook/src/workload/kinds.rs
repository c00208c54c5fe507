//! Where a workload kind keeps its pods (WQ-1, `docs/workload-quota.md`): each kind is a list of
//! pod groups, each a pod template and the replica counts that multiply it. The built-in kinds
//! are written in the same form as a platform team's mapping file (`--workload-kinds-file`), so
//! one reader serves both.
//!
//! Paths are JSON Pointers (RFC 6901), read with `serde_json::Value::pointer`: a standard every
//! JSON library implements and that `serde_json` already carries, where a JSONPath engine would
//! add a dependency for the one wildcard a mapping needs (`each`).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

/// What a workload's gang policy makes of WQ-3 (peak above what is free now).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// Admit with a warning naming what is free now.
    #[default]
    Warn,
    /// Refuse: the workload needs all its pods at once.
    Gang,
}

/// One group of identical pods.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Group {
    /// A map or list each of whose entries is one group (the other paths are then read inside
    /// the entry); absent: the paths are read from the object.
    #[serde(default)]
    pub each: Option<String>,
    /// The group's name in messages: a pointer to a string (inside the entry with `each`), or,
    /// with `each` over a map and no `role`, the entry's key.
    #[serde(default)]
    pub role: Option<String>,
    /// A fixed name in messages (`Head`), when no pointer names it.
    #[serde(default)]
    pub name: Option<String>,
    /// Pointers to replica counts, multiplied (JobSet: replicas × parallelism); none: one pod.
    #[serde(default)]
    pub replicas: Vec<String>,
    /// The count when a replica pointer finds nothing or null (Kubernetes and Kubeflow default
    /// replicas to 1).
    #[serde(default = "one")]
    pub default_replicas: i64,
    /// A pointer whose count, when present, bounds the product (a Job runs at most
    /// `completions` pods at once).
    #[serde(default)]
    pub at_most: Option<String>,
    /// Pointer to the pod template (`metadata` and `spec`).
    pub template: String,
}

fn one() -> i64 {
    1
}

/// A workload kind: what it is and where its pods are.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Kind {
    /// API group ("" for the core group).
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Plural resource name (what a webhook rule names).
    pub resource: String,
    /// WQ-3's answer for this kind.
    #[serde(default)]
    pub policy: Policy,
    /// The count its `scale` subresource sets (`kubectl scale`, an HPA), as a JSON Pointer:
    /// the CRD's `specReplicasPath` (`.spec.replicas` is `/spec/replicas`). None: no scale
    /// subresource judged.
    #[serde(default)]
    pub scale: Option<String>,
    /// The pod groups.
    pub groups: Vec<Group>,
}

/// The mapping file: kinds beyond the built-in ones.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mapping {
    /// The kinds.
    pub kinds: Vec<Kind>,
}

fn group(replicas: &[&str], template: &str) -> Group {
    Group {
        each: None,
        role: None,
        name: None,
        replicas: replicas.iter().map(|s| (*s).to_owned()).collect(),
        default_replicas: 1,
        at_most: None,
        template: template.to_owned(),
    }
}

fn replica_specs(field: &str) -> Vec<Group> {
    vec![Group {
        each: Some(format!("/spec/{field}")),
        replicas: vec!["/replicas".into()],
        ..group(&[], "/template")
    }]
}

fn kind(group: &str, version: &str, kind: &str, resource: &str, groups: Vec<Group>) -> Kind {
    Kind {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        resource: resource.into(),
        policy: Policy::Warn,
        scale: None,
        groups,
    }
}

fn scaled(mut k: Kind, pointer: &str) -> Kind {
    k.scale = Some(pointer.into());
    k
}

/// The built-in kinds (WQ-1): apps/v1 Deployment, ReplicaSet, StatefulSet; batch/v1 Job (its
/// `parallelism`, at most `completions`) and CronJob (its job template); the Kubeflow v1 jobs
/// (Σ over `*ReplicaSpecs`) and the v2beta1 MPIJob.
pub fn builtin() -> Vec<Kind> {
    let job = |prefix: &str| Group {
        at_most: Some(format!("{prefix}/completions")),
        ..group(
            &[&format!("{prefix}/parallelism")],
            &format!("{prefix}/template"),
        )
    };
    vec![
        scaled(
            kind(
                "apps",
                "v1",
                "Deployment",
                "deployments",
                vec![group(&["/spec/replicas"], "/spec/template")],
            ),
            "/spec/replicas",
        ),
        scaled(
            kind(
                "apps",
                "v1",
                "ReplicaSet",
                "replicasets",
                vec![group(&["/spec/replicas"], "/spec/template")],
            ),
            "/spec/replicas",
        ),
        scaled(
            kind(
                "apps",
                "v1",
                "StatefulSet",
                "statefulsets",
                vec![group(&["/spec/replicas"], "/spec/template")],
            ),
            "/spec/replicas",
        ),
        kind("batch", "v1", "Job", "jobs", vec![job("/spec")]),
        kind(
            "batch",
            "v1",
            "CronJob",
            "cronjobs",
            vec![job("/spec/jobTemplate/spec")],
        ),
        scaled(
            kind(
                "kubeflow.org",
                "v1",
                "PyTorchJob",
                "pytorchjobs",
                replica_specs("pytorchReplicaSpecs"),
            ),
            "/spec/pytorchReplicaSpecs/Worker/replicas",
        ),
        kind(
            "kubeflow.org",
            "v1",
            "TFJob",
            "tfjobs",
            replica_specs("tfReplicaSpecs"),
        ),
        kind(
            "kubeflow.org",
            "v1",
            "XGBoostJob",
            "xgboostjobs",
            replica_specs("xgbReplicaSpecs"),
        ),
        scaled(
            kind(
                "kubeflow.org",
                "v1",
                "PaddleJob",
                "paddlejobs",
                replica_specs("paddleReplicaSpecs"),
            ),
            "/spec/paddleReplicaSpecs/Worker/replicas",
        ),
        scaled(
            kind(
                "kubeflow.org",
                "v1",
                "JAXJob",
                "jaxjobs",
                replica_specs("jaxReplicaSpecs"),
            ),
            "/spec/jaxReplicaSpecs/Worker/replicas",
        ),
        kind(
            "kubeflow.org",
            "v1",
            "MPIJob",
            "mpijobs",
            replica_specs("mpiReplicaSpecs"),
        ),
        kind(
            "kubeflow.org",
            "v2beta1",
            "MPIJob",
            "mpijobs",
            replica_specs("mpiReplicaSpecs"),
        ),
    ]
}

/// Why a mapping is refused.
#[derive(Debug, thiserror::Error)]
pub enum MappingError {
    /// The file cannot be read.
    #[error("workload kinds file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// It does not parse as the mapping.
    #[error("workload kinds file {path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// The parser's text.
        message: String,
    },
    /// It parses but says something that cannot hold.
    #[error("workload kinds file {path}: kinds[{index}] ({kind}): {message}")]
    Invalid {
        /// The file.
        path: String,
        /// Which kind.
        index: usize,
        /// Its name.
        kind: String,
        /// What is wrong.
        message: String,
    },
}

fn check_pointer(p: &str, what: &str) -> Result<(), String> {
    if p.is_empty() || p.starts_with('/') {
        Ok(())
    } else {
        Err(format!(
            "{what} {p:?} is not a JSON Pointer (it starts with '/')"
        ))
    }
}

/// Parses and checks a mapping (YAML or JSON): every pointer well formed, every kind with a
/// group, names Kubernetes accepts, no kind given twice nor a built-in one redefined.
pub fn parse(path: &str, text: &str) -> Result<Vec<Kind>, MappingError> {
    let m: Mapping = serde_yaml_ng::from_str(text).map_err(|e| MappingError::Parse {
        path: path.into(),
        message: e.to_string(),
    })?;
    let builtin = builtin();
    let mut seen = BTreeMap::new();
    for (index, k) in m.kinds.iter().enumerate() {
        let invalid = |message: String| MappingError::Invalid {
            path: path.into(),
            index,
            kind: format!("{}/{}/{}", k.group, k.version, k.kind),
            message,
        };
        if k.version.is_empty() || k.kind.is_empty() || k.resource.is_empty() {
            return Err(invalid("version, kind and resource are required".into()));
        }
        if !k
            .resource
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        {
            return Err(invalid(format!(
                "resource {:?} is not a plural resource name",
                k.resource
            )));
        }
        if k.groups.is_empty() {
            return Err(invalid("at least one group is required".into()));
        }
        let key = (k.group.clone(), k.version.clone(), k.kind.clone());
        if builtin
            .iter()
            .any(|b| (&b.group, &b.version, &b.kind) == (&key.0, &key.1, &key.2))
        {
            return Err(invalid("is built in already".into()));
        }
        if seen.insert(key, index).is_some() {
            return Err(invalid("is given twice".into()));
        }
        if let Some(p) = &k.scale {
            check_pointer(p, "scale").map_err(invalid)?;
        }
        for (gi, g) in k.groups.iter().enumerate() {
            let at = |m: String| invalid(format!("groups[{gi}]: {m}"));
            for p in g.each.iter().chain(&g.role).chain(&g.at_most) {
                check_pointer(p, "pointer").map_err(at)?;
            }
            for p in &g.replicas {
                check_pointer(p, "replicas").map_err(at)?;
            }
            check_pointer(&g.template, "template").map_err(at)?;
            if !(0..=i64::from(i32::MAX)).contains(&g.default_replicas) {
                return Err(at(format!(
                    "defaultReplicas {} is not between 0 and 2147483647",
                    g.default_replicas
                )));
            }
        }
    }
    Ok(m.kinds)
}

/// Reads and checks the mapping file at `path` (see [`parse`]).
pub fn read(path: &std::path::Path) -> Result<Vec<Kind>, MappingError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| MappingError::Read {
        path: shown.clone(),
        source,
    })?;
    parse(&shown, &text)
}

/// One group of a workload as read from an object: where it is, its name, how many pods it
/// runs at once, and its pod template.
#[derive(Debug, Clone, PartialEq)]
pub struct Found<'a> {
    /// The template's field path (`spec.pytorchReplicaSpecs.Worker.template`).
    pub path: String,
    /// Its name in messages ("" for a kind with one group).
    pub role: String,
    /// Pods at once.
    pub replicas: i64,
    /// The template.
    pub template: &'a Value,
}

/// A field path in Kubernetes' dotted form from a JSON Pointer.
pub fn dotted(pointer: &str) -> String {
    pointer
        .split('/')
        .skip(1)
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect::<Vec<_>>()
        .join(".")
}

fn join(base: &str, pointer: &str) -> String {
    format!("{base}{pointer}")
}

/// A replica count at `pointer` of `object` (`base` its place for messages): `default` when
/// absent or null; an error naming the field when it is not an integer between 0 and 2^31 − 1.
fn count(object: &Value, base: &str, pointer: &str, default: i64) -> Result<i64, String> {
    match object.pointer(pointer) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => {
            let field = dotted(&join(base, pointer));
            match v.as_i64() {
                Some(n) if n < 0 => Err(format!(
                    "{field}: Invalid value: {n}: must be greater than or equal to 0"
                )),
                Some(n) if n > i64::from(i32::MAX) => Err(format!(
                    "{field}: Invalid value: {n}: must be at most 2147483647"
                )),
                Some(n) => Ok(n),
                None => Err(format!("{field}: Invalid value: {v}: must be an integer")),
            }
        }
    }
}

/// The groups of `object` as `kind` describes them, or the first field that cannot be read.
pub fn groups<'a>(kind: &Kind, object: &'a Value) -> Result<Vec<Found<'a>>, String> {
    let mut out = Vec::new();
    for g in &kind.groups {
        let entries: Vec<(String, String, &Value)> = match &g.each {
            None => vec![(String::new(), String::new(), object)],
            Some(each) => match object.pointer(each) {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Object(m)) => m
                    .iter()
                    .map(|(k, v)| {
                        let token = k.replace('~', "~0").replace('/', "~1");
                        (format!("{each}/{token}"), k.clone(), v)
                    })
                    .collect(),
                Some(Value::Array(a)) => a
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (format!("{each}/{i}"), i.to_string(), v))
                    .collect(),
                Some(v) => {
                    return Err(format!(
                        "{}: Invalid value: {v}: must be a map or a list",
                        dotted(each)
                    ));
                }
            },
        };
        for (base, key, entry) in entries {
            let mut replicas: i64 = 1;
            for p in &g.replicas {
                let n = count(entry, &base, p, g.default_replicas)?;
                replicas = replicas.saturating_mul(n);
            }
            if let Some(p) = &g.at_most
                && entry.pointer(p).is_some_and(|v| !v.is_null())
            {
                replicas = replicas.min(count(entry, &base, p, replicas)?);
            }
            let role = match (&g.role, &g.name) {
                (Some(p), _) => entry
                    .pointer(p)
                    .and_then(Value::as_str)
                    .unwrap_or(&key)
                    .to_owned(),
                (None, Some(n)) => n.clone(),
                (None, None) => key,
            };
            let path = dotted(&join(&base, &g.template));
            let Some(template) = entry.pointer(&g.template).filter(|v| !v.is_null()) else {
                if replicas == 0 {
                    continue;
                }
                return Err(format!("{path}: Required value"));
            };
            out.push(Found {
                path,
                role,
                replicas,
                template,
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn builtin_kind(k: &str) -> Kind {
        builtin()
            .into_iter()
            .find(|b| b.kind == k)
            .unwrap_or_else(|| panic!("{k} is built in"))
    }

    #[test]
    fn wq_1_kubeflow_replica_specs_are_summed_per_role() {
        let job = json!({"spec": {"pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": {"spec": {}}},
            "Worker": {"template": {"spec": {}}}}}});
        let found = groups(&builtin_kind("PyTorchJob"), &job).unwrap();
        let got: Vec<(&str, i64, &str)> = found
            .iter()
            .map(|f| (f.role.as_str(), f.replicas, f.path.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("Master", 1, "spec.pytorchReplicaSpecs.Master.template"),
                ("Worker", 1, "spec.pytorchReplicaSpecs.Worker.template")
            ]
        );
    }

    #[test]
    fn wq_1_a_job_runs_its_parallelism_bounded_by_its_completions() {
        let job = |p: Value, c: Value| json!({"spec": {"parallelism": p, "completions": c, "template": {"spec": {}}}});
        let k = builtin_kind("Job");
        let n = |o: &Value| groups(&k, o).unwrap()[0].replicas;
        assert_eq!(n(&job(json!(5), json!(2))), 2);
        assert_eq!(n(&job(json!(5), Value::Null)), 5);
        assert_eq!(n(&job(Value::Null, Value::Null)), 1);
        assert_eq!(n(&job(json!(0), json!(3))), 0);
    }

    #[test]
    fn wq_1_a_cronjob_runs_its_job_template() {
        let cron = json!({"spec": {"jobTemplate": {"spec": {"parallelism": 4, "completions": 3,
            "template": {"spec": {}}}}}});
        let found = groups(&builtin_kind("CronJob"), &cron).unwrap();
        assert_eq!(
            (found[0].replicas, found[0].path.as_str()),
            (3, "spec.jobTemplate.spec.template")
        );
    }

    #[test]
    fn wq_1_bad_counts_name_their_field() {
        let k = builtin_kind("Deployment");
        for (v, text) in [
            (
                json!(-1),
                "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
            ),
            (
                json!(4_294_967_296_i64),
                "spec.replicas: Invalid value: 4294967296: must be at most 2147483647",
            ),
            (
                json!("3"),
                "spec.replicas: Invalid value: \"3\": must be an integer",
            ),
        ] {
            let o = json!({"spec": {"replicas": v, "template": {}}});
            assert_eq!(groups(&k, &o).unwrap_err(), text);
        }
        let o = json!({"spec": {"replicas": 2}});
        assert_eq!(groups(&k, &o).unwrap_err(), "spec.template: Required value");
    }

    #[test]
    fn a_mapping_reads_lists_with_names_and_multiplied_counts() {
        let text = r#"
kinds:
- group: jobset.x-k8s.io
  version: v1alpha2
  kind: JobSet
  resource: jobsets
  policy: gang
  groups:
  - each: /spec/replicatedJobs
    role: /name
    replicas: [/replicas, /template/spec/parallelism]
    template: /template/spec/template
"#;
        let kinds = parse("kinds.yaml", text).unwrap();
        assert_eq!(kinds[0].policy, Policy::Gang);
        let o = json!({"spec": {"replicatedJobs": [
            {"name": "workers", "replicas": 2,
             "template": {"spec": {"parallelism": 4, "template": {"spec": {}}}}}]}});
        let found = groups(&kinds[0], &o).unwrap();
        assert_eq!(
            (
                found[0].role.as_str(),
                found[0].replicas,
                found[0].path.as_str()
            ),
            ("workers", 8, "spec.replicatedJobs.0.template.spec.template")
        );
    }

    #[test]
    fn a_bad_mapping_is_a_clear_error() {
        for (text, want) in [
            ("kinds: [", "workload kinds file f: "),
            (
                "kinds:\n- {group: a, version: v1, kind: K, resource: ks, groups: [{template: spec}]}",
                "kinds[0] (a/v1/K): groups[0]: template \"spec\" is not a JSON Pointer",
            ),
            (
                "kinds:\n- {group: apps, version: v1, kind: Deployment, resource: deployments, groups: [{template: /spec}]}",
                "is built in already",
            ),
            (
                "kinds:\n- {group: a, version: v1, kind: K, resource: ks, groups: []}",
                "at least one group",
            ),
            (
                "kinds:\n- {group: a, version: v1, kind: K, resource: ks, groups: [{template: /t, surprise: 1}]}",
                "unknown field",
            ),
        ] {
            let e = parse("f", text).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
