//! Go's JSON view of Trainer values, from a table of Go struct layouts.
//!
//! Upstream prints a bad value that is a struct or a list as `encoding/json` marshals the Go
//! value: fields in Go declaration order, `omitempty` fields left out when empty, other fields
//! always present (a missing `name` as `""`), quantities in canonical form, times at second
//! precision. The defaulter's patch carries the same re-encoding (controller-runtime diffs the
//! request against the marshalled object). Neither serde's derived order (declaration) nor
//! k8s-openapi's (alphabetical) is Go's for every type, so the layouts are written out here for
//! the types upstream prints or re-encodes. Types not laid out ([`Ty::Any`]) print with sorted
//! keys, as Go prints a map: a difference only in nested types no rule prints in practice
//! (volume sources, affinity; spec Q-8).
//!
//! Hand-written: no crate knows Go's layouts of these types.

use admission_kit::compat::go::Quantity;
use admission_kit::compat::go::go_json_quote;
use serde_json::{Map, Value};

/// How a Go type marshals.
#[derive(Debug)]
pub enum Ty {
    /// `string` (and named string types).
    Str,
    /// Any integer type.
    Int,
    /// `bool`.
    Bool,
    /// `resource.Quantity`: canonical text.
    Quantity,
    /// `metav1.Time`: RFC 3339 in UTC, whole seconds.
    Time,
    /// A type not laid out here: kept as sent, printed with sorted keys.
    Any,
    /// `map[string]T`.
    Map(&'static Ty),
    /// `[]T`.
    List(&'static Ty),
    /// A struct: its fields in Go order.
    Struct(&'static [Field]),
}

/// When a field is left out of the marshalled object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Omit {
    /// Never (no `omitempty`, or a struct value, which `omitempty` never leaves out).
    Never,
    /// When empty: `""`, `0`, `false`, an empty list or map (`omitempty` on those).
    Empty,
    /// When nil: a pointer (or `omitzero` struct) field, printed whenever it is set.
    Nil,
}

/// One struct field.
#[derive(Debug)]
pub struct Field {
    /// The JSON key.
    pub key: &'static str,
    /// Its type.
    pub ty: &'static Ty,
    /// When it is left out.
    pub omit: Omit,
}

const fn f(key: &'static str, ty: &'static Ty, omit: Omit) -> Field {
    Field { key, ty, omit }
}

use Omit::{Empty, Never, Nil};

static STR: Ty = Ty::Str;
static INT: Ty = Ty::Int;
static BOOL: Ty = Ty::Bool;
static QTY: Ty = Ty::Quantity;
/// `metav1.Time`.
pub static TIME: Ty = Ty::Time;
static ANY: Ty = Ty::Any;
static STRS: Ty = Ty::List(&STR);
static STR_MAP: Ty = Ty::Map(&STR);
static QTY_MAP: Ty = Ty::Map(&QTY);

/// `metav1.ObjectMeta`.
pub static OBJECT_META: Ty = Ty::Struct(&[
    f("name", &STR, Empty),
    f("generateName", &STR, Empty),
    f("namespace", &STR, Empty),
    f("selfLink", &STR, Empty),
    f("uid", &STR, Empty),
    f("resourceVersion", &STR, Empty),
    f("generation", &INT, Empty),
    f("creationTimestamp", &TIME, Nil),
    f("deletionTimestamp", &TIME, Nil),
    f("deletionGracePeriodSeconds", &INT, Nil),
    f("labels", &STR_MAP, Empty),
    f("annotations", &STR_MAP, Empty),
    f("ownerReferences", &ANY, Empty),
    f("finalizers", &STRS, Empty),
    f("managedFields", &ANY, Empty),
]);

static OBJECT_FIELD_SELECTOR: Ty =
    Ty::Struct(&[f("apiVersion", &STR, Empty), f("fieldPath", &STR, Never)]);
static RESOURCE_FIELD_SELECTOR: Ty = Ty::Struct(&[
    f("containerName", &STR, Empty),
    f("resource", &STR, Never),
    f("divisor", &QTY, Never),
]);
static KEY_SELECTOR: Ty = Ty::Struct(&[
    f("name", &STR, Empty),
    f("key", &STR, Never),
    f("optional", &BOOL, Nil),
]);
static FILE_KEY_SELECTOR: Ty = Ty::Struct(&[
    f("volumeName", &STR, Never),
    f("path", &STR, Never),
    f("key", &STR, Never),
    f("optional", &BOOL, Nil),
]);
static ENV_VAR_SOURCE: Ty = Ty::Struct(&[
    f("fieldRef", &OBJECT_FIELD_SELECTOR, Nil),
    f("resourceFieldRef", &RESOURCE_FIELD_SELECTOR, Nil),
    f("configMapKeyRef", &KEY_SELECTOR, Nil),
    f("secretKeyRef", &KEY_SELECTOR, Nil),
    f("fileKeyRef", &FILE_KEY_SELECTOR, Nil),
]);
/// `corev1.EnvVar`.
pub static ENV_VAR: Ty = Ty::Struct(&[
    f("name", &STR, Never),
    f("value", &STR, Empty),
    f("valueFrom", &ENV_VAR_SOURCE, Nil),
]);
/// `[]corev1.EnvVar`.
pub static ENV_VARS: Ty = Ty::List(&ENV_VAR);
static LOCAL_OBJECT_REFERENCE: Ty = Ty::Struct(&[f("name", &STR, Empty)]);
static RESOURCE_CLAIM: Ty = Ty::Struct(&[f("name", &STR, Never), f("request", &STR, Empty)]);
static RESOURCE_CLAIMS: Ty = Ty::List(&RESOURCE_CLAIM);
/// `corev1.ResourceRequirements`.
pub static RESOURCES: Ty = Ty::Struct(&[
    f("limits", &QTY_MAP, Empty),
    f("requests", &QTY_MAP, Empty),
    f("claims", &RESOURCE_CLAIMS, Empty),
]);
static VOLUME_MOUNT: Ty = Ty::Struct(&[
    f("name", &STR, Never),
    f("readOnly", &BOOL, Empty),
    f("recursiveReadOnly", &STR, Nil),
    f("mountPath", &STR, Never),
    f("subPath", &STR, Empty),
    f("mountPropagation", &STR, Nil),
    f("subPathExpr", &STR, Empty),
]);
static VOLUME_MOUNTS: Ty = Ty::List(&VOLUME_MOUNT);
static CONTAINER_PORT: Ty = Ty::Struct(&[
    f("name", &STR, Empty),
    f("hostPort", &INT, Empty),
    f("containerPort", &INT, Never),
    f("protocol", &STR, Empty),
    f("hostIP", &STR, Empty),
]);
static ENV_FROM_SOURCE: Ty = Ty::Struct(&[
    f("prefix", &STR, Empty),
    f("configMapRef", &ANY, Nil),
    f("secretRef", &ANY, Nil),
]);
static SECURITY_CONTEXT: Ty = Ty::Struct(&[
    f("capabilities", &ANY, Nil),
    f("privileged", &BOOL, Nil),
    f("seLinuxOptions", &ANY, Nil),
    f("windowsOptions", &ANY, Nil),
    f("runAsUser", &INT, Nil),
    f("runAsGroup", &INT, Nil),
    f("runAsNonRoot", &BOOL, Nil),
    f("readOnlyRootFilesystem", &BOOL, Nil),
    f("allowPrivilegeEscalation", &BOOL, Nil),
    f("procMount", &STR, Nil),
    f("seccompProfile", &ANY, Nil),
    f("appArmorProfile", &ANY, Nil),
]);
static PORTS: Ty = Ty::List(&CONTAINER_PORT);
static ENV_FROM: Ty = Ty::List(&ENV_FROM_SOURCE);
/// `corev1.Container`.
pub static CONTAINER: Ty = Ty::Struct(&[
    f("name", &STR, Never),
    f("image", &STR, Empty),
    f("command", &STRS, Empty),
    f("args", &STRS, Empty),
    f("workingDir", &STR, Empty),
    f("ports", &PORTS, Empty),
    f("envFrom", &ENV_FROM, Empty),
    f("env", &ENV_VARS, Empty),
    f("resources", &RESOURCES, Never),
    f("resizePolicy", &ANY, Empty),
    f("restartPolicy", &STR, Nil),
    f("restartPolicyRules", &ANY, Empty),
    f("volumeMounts", &VOLUME_MOUNTS, Empty),
    f("volumeDevices", &ANY, Empty),
    f("livenessProbe", &ANY, Nil),
    f("readinessProbe", &ANY, Nil),
    f("startupProbe", &ANY, Nil),
    f("lifecycle", &ANY, Nil),
    f("terminationMessagePath", &STR, Empty),
    f("terminationMessagePolicy", &STR, Empty),
    f("imagePullPolicy", &STR, Empty),
    f("securityContext", &SECURITY_CONTEXT, Nil),
    f("stdin", &BOOL, Empty),
    f("stdinOnce", &BOOL, Empty),
    f("tty", &BOOL, Empty),
]);
/// `[]corev1.Container`.
pub static CONTAINERS: Ty = Ty::List(&CONTAINER);

static VOLUME: Ty = Ty::Struct(&[
    f("name", &STR, Never),
    f("hostPath", &ANY, Nil),
    f("emptyDir", &ANY, Nil),
    f("gcePersistentDisk", &ANY, Nil),
    f("awsElasticBlockStore", &ANY, Nil),
    f("gitRepo", &ANY, Nil),
    f("secret", &ANY, Nil),
    f("nfs", &ANY, Nil),
    f("iscsi", &ANY, Nil),
    f("glusterfs", &ANY, Nil),
    f("persistentVolumeClaim", &ANY, Nil),
    f("rbd", &ANY, Nil),
    f("flexVolume", &ANY, Nil),
    f("cinder", &ANY, Nil),
    f("cephfs", &ANY, Nil),
    f("flocker", &ANY, Nil),
    f("downwardAPI", &ANY, Nil),
    f("fc", &ANY, Nil),
    f("azureFile", &ANY, Nil),
    f("configMap", &ANY, Nil),
    f("vsphereVolume", &ANY, Nil),
    f("quobyte", &ANY, Nil),
    f("azureDisk", &ANY, Nil),
    f("photonPersistentDisk", &ANY, Nil),
    f("projected", &ANY, Nil),
    f("portworxVolume", &ANY, Nil),
    f("scaleIO", &ANY, Nil),
    f("storageos", &ANY, Nil),
    f("csi", &ANY, Nil),
    f("ephemeral", &ANY, Nil),
    f("image", &ANY, Nil),
]);
static TOLERATION: Ty = Ty::Struct(&[
    f("key", &STR, Empty),
    f("operator", &STR, Empty),
    f("value", &STR, Empty),
    f("effect", &STR, Empty),
    f("tolerationSeconds", &INT, Nil),
]);
static SCHEDULING_GATE: Ty = Ty::Struct(&[f("name", &STR, Never)]);
static VOLUMES: Ty = Ty::List(&VOLUME);
static LOCAL_OBJECT_REFERENCES: Ty = Ty::List(&LOCAL_OBJECT_REFERENCE);
static TOLERATIONS: Ty = Ty::List(&TOLERATION);
static SCHEDULING_GATES: Ty = Ty::List(&SCHEDULING_GATE);

static CONTAINER_PATCH: Ty = Ty::Struct(&[
    f("name", &STR, Empty),
    f("env", &ENV_VARS, Empty),
    f("volumeMounts", &VOLUME_MOUNTS, Empty),
    f("securityContext", &SECURITY_CONTEXT, Nil),
]);
static CONTAINER_PATCHES: Ty = Ty::List(&CONTAINER_PATCH);
static POD_SPEC_PATCH: Ty = Ty::Struct(&[
    f("serviceAccountName", &STR, Nil),
    f("volumes", &VOLUMES, Empty),
    f("initContainers", &CONTAINER_PATCHES, Empty),
    f("containers", &CONTAINER_PATCHES, Empty),
    f("imagePullSecrets", &LOCAL_OBJECT_REFERENCES, Empty),
    f("securityContext", &ANY, Nil),
    f("nodeSelector", &STR_MAP, Empty),
    f("affinity", &ANY, Nil),
    f("tolerations", &TOLERATIONS, Empty),
    f("schedulingGates", &SCHEDULING_GATES, Empty),
    f("terminationGracePeriodSeconds", &INT, Nil),
]);
static POD_TEMPLATE_PATCH: Ty = Ty::Struct(&[
    f("metadata", &OBJECT_META, Nil),
    f("spec", &POD_SPEC_PATCH, Nil),
]);
static JOB_SPEC_PATCH: Ty = Ty::Struct(&[f("template", &POD_TEMPLATE_PATCH, Nil)]);
static JOB_TEMPLATE_PATCH: Ty = Ty::Struct(&[
    f("metadata", &OBJECT_META, Nil),
    f("spec", &JOB_SPEC_PATCH, Nil),
]);
static REPLICATED_JOB_PATCH: Ty = Ty::Struct(&[
    f("name", &STR, Empty),
    f("template", &JOB_TEMPLATE_PATCH, Nil),
]);
static REPLICATED_JOB_PATCHES: Ty = Ty::List(&REPLICATED_JOB_PATCH);
static JOBSET_SPEC_PATCH: Ty = Ty::Struct(&[f("replicatedJobs", &REPLICATED_JOB_PATCHES, Empty)]);
static JOBSET_TEMPLATE_PATCH: Ty = Ty::Struct(&[
    f("metadata", &OBJECT_META, Nil),
    f("spec", &JOBSET_SPEC_PATCH, Nil),
]);
static TRAINING_RUNTIME_SPEC_PATCH: Ty = Ty::Struct(&[f("template", &JOBSET_TEMPLATE_PATCH, Nil)]);
/// `trainer.RuntimePatch`.
pub static RUNTIME_PATCH: Ty = Ty::Struct(&[
    f("manager", &STR, Empty),
    f("time", &TIME, Nil),
    f("trainingRuntimeSpec", &TRAINING_RUNTIME_SPEC_PATCH, Nil),
]);
/// `[]trainer.RuntimePatch`.
pub static RUNTIME_PATCHES: Ty = Ty::List(&RUNTIME_PATCH);
/// `trainer.RuntimeRef`.
pub static RUNTIME_REF: Ty = Ty::Struct(&[
    f("name", &STR, Empty),
    f("apiGroup", &STR, Nil),
    f("kind", &STR, Nil),
]);
/// `trainer.EnvInjectionTarget`.
pub static ENV_INJECTION_TARGET: Ty =
    Ty::Struct(&[f("jobName", &STR, Empty), f("containerNames", &STRS, Empty)]);
static STORAGE_INITIALIZER: Ty = Ty::Struct(&[
    f("storageUri", &STR, Nil),
    f("env", &ENV_VARS, Empty),
    f("secretRef", &LOCAL_OBJECT_REFERENCE, Nil),
]);
static INITIALIZER: Ty = Ty::Struct(&[
    f("dataset", &STORAGE_INITIALIZER, Nil),
    f("model", &STORAGE_INITIALIZER, Nil),
]);
static TRAINER: Ty = Ty::Struct(&[
    f("image", &STR, Nil),
    f("command", &STRS, Empty),
    f("args", &STRS, Empty),
    f("env", &ENV_VARS, Empty),
    f("numNodes", &INT, Nil),
    f("resourcesPerNode", &RESOURCES, Nil),
    f("numProcPerNode", &INT, Nil),
]);
static TRAIN_JOB_SPEC: Ty = Ty::Struct(&[
    f("runtimeRef", &RUNTIME_REF, Nil),
    f("initializer", &INITIALIZER, Nil),
    f("trainer", &TRAINER, Nil),
    f("runtimePatches", &RUNTIME_PATCHES, Empty),
    f("suspend", &BOOL, Nil),
    f("activeDeadlineSeconds", &INT, Empty),
    f("managedBy", &STR, Nil),
]);
/// `trainer.TrainJob` (status kept as sent: the defaulter never reaches it).
pub static TRAIN_JOB: Ty = Ty::Struct(&[
    f("apiVersion", &STR, Empty),
    f("kind", &STR, Empty),
    f("metadata", &OBJECT_META, Nil),
    f("spec", &TRAIN_JOB_SPEC, Nil),
    f("status", &ANY, Nil),
]);

static ENV_INJECTION_TARGETS: Ty = Ty::List(&ENV_INJECTION_TARGET);
static ENV_INJECTION: Ty = Ty::Struct(&[f("targets", &ENV_INJECTION_TARGETS, Empty)]);
static ML_POLICY: Ty = Ty::Struct(&[
    f("numNodes", &INT, Nil),
    f("torch", &TORCH_POLICY, Nil),
    f("mpi", &MPI_POLICY, Nil),
    f("flux", &FLUX_POLICY, Nil),
    f("jax", &ANY, Nil),
    f("xgboost", &ANY, Nil),
]);
static TORCH_POLICY: Ty = Ty::Struct(&[f("envInjection", &ENV_INJECTION, Nil)]);
static MPI_POLICY: Ty = Ty::Struct(&[
    f("numProcPerNode", &INT, Nil),
    f("mpiImplementation", &STR, Nil),
    f("sshAuthMountPath", &STR, Nil),
    f("runLauncherAsNode", &BOOL, Nil),
]);
static FLUX_POLICY: Ty = Ty::Struct(&[f("numProcPerNode", &INT, Nil)]);
/// The pod spec fields the rules read (the others are kept as sent).
static POD_SPEC: Ty = Ty::Struct(&[
    f("initContainers", &CONTAINERS, Empty),
    f("containers", &CONTAINERS, Empty),
    f("priorityClassName", &STR, Empty),
]);
static POD_TEMPLATE: Ty = Ty::Struct(&[
    f("metadata", &OBJECT_META, Never),
    f("spec", &POD_SPEC, Never),
]);
static JOB_SPEC: Ty = Ty::Struct(&[
    f("parallelism", &INT, Nil),
    f("template", &POD_TEMPLATE, Never),
]);
static JOB_TEMPLATE: Ty = Ty::Struct(&[
    f("metadata", &OBJECT_META, Never),
    f("spec", &JOB_SPEC, Never),
]);
static REPLICATED_JOB: Ty = Ty::Struct(&[
    f("name", &STR, Never),
    f("groupName", &STR, Empty),
    f("template", &JOB_TEMPLATE, Never),
    f("replicas", &INT, Never),
]);
static REPLICATED_JOBS: Ty = Ty::List(&REPLICATED_JOB);
static JOBSET_SPEC: Ty = Ty::Struct(&[
    f("replicatedJobs", &REPLICATED_JOBS, Empty),
    f("suspend", &BOOL, Nil),
    f("managedBy", &STR, Nil),
    f("ttlSecondsAfterFinished", &INT, Nil),
]);
static JOBSET_TEMPLATE: Ty = Ty::Struct(&[
    f("metadata", &OBJECT_META, Never),
    f("spec", &JOBSET_SPEC, Never),
]);
/// `trainer.TrainingRuntimeSpec`.
pub static RUNTIME_SPEC: Ty = Ty::Struct(&[
    f("mlPolicy", &ML_POLICY, Nil),
    f("podGroupPolicy", &ANY, Nil),
    f("template", &JOBSET_TEMPLATE, Never),
]);
/// `trainer.TrainingRuntime` and `trainer.ClusterTrainingRuntime`, as far as the rules read them.
pub static RUNTIME: Ty = Ty::Struct(&[
    f("apiVersion", &STR, Empty),
    f("kind", &STR, Empty),
    f("metadata", &OBJECT_META, Nil),
    f("spec", &RUNTIME_SPEC, Nil),
]);

/// `v` as Go's decoder reads it into a `ty`: a value of the wrong JSON type is an error (Go's
/// `UnmarshalTypeError`, in our words: spec Q-9), `null` is the zero value (a member left out,
/// a list item or map value zeroed). Members of types not laid out are only cleared of `null`s.
pub fn go_decode_view(v: &Value, ty: &Ty, path: &str) -> Result<Value, String> {
    let wrong = |want: &str| {
        Err(format!(
            "json: cannot unmarshal {} into Go value {} of type {want}",
            admission_kit::compat::go::go_json_kind(v),
            if path.is_empty() {
                "(the object)"
            } else {
                path
            }
        ))
    };
    match (ty, v) {
        (_, Value::Null) => Ok(Value::Null),
        (Ty::Time, Value::String(t)) => match t.parse::<jiff::Timestamp>() {
            Ok(_) => Ok(v.clone()),
            Err(e) => Err(format!(
                "parsing time {}: {e}",
                admission_kit::compat::go::go_quote(t)
            )),
        },
        (Ty::Str, Value::String(_)) | (Ty::Bool, Value::Bool(_)) => Ok(v.clone()),
        // apimachinery's own texts (`quantities must match …`, `unable to parse …`).
        (Ty::Quantity, Value::String(q)) => Quantity::from_json_text(q)
            .map(|_| v.clone())
            .map_err(|e| e.to_string()),
        (Ty::Quantity, Value::Number(n)) => Quantity::from_json_text(&n.to_string())
            .map(|_| v.clone())
            .map_err(|e| e.to_string()),
        (Ty::Int, Value::Number(n)) if n.is_i64() || n.is_u64() => Ok(v.clone()),
        (Ty::Str | Ty::Time, _) => wrong("string"),
        (Ty::Bool, _) => wrong("bool"),
        (Ty::Int, _) => wrong("integer"),
        (Ty::Quantity, _) => wrong("quantity"),
        (Ty::Struct(fields), Value::Object(m)) => {
            let mut out = Map::new();
            for (k, x) in m {
                if x.is_null() {
                    continue;
                }
                let sub = format!("{path}.{k}");
                let x = match fields.iter().find(|fl| fl.key == k) {
                    Some(fl) => go_decode_view(x, fl.ty, &sub)?,
                    None => go_decode_view(x, &ANY, &sub)?,
                };
                out.insert(k.clone(), x);
            }
            Ok(Value::Object(out))
        }
        (Ty::Struct(_), _) => wrong("object"),
        (Ty::List(item), Value::Array(a)) => a
            .iter()
            .map(|x| match x {
                Value::Null => Ok(zero_value(item)),
                x => go_decode_view(x, item, &format!("{path}[]")),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        (Ty::List(_), _) => wrong("array"),
        (Ty::Map(item), Value::Object(m)) => m
            .iter()
            .map(|(k, x)| {
                let x = match x {
                    Value::Null => zero_value(item),
                    x => go_decode_view(x, item, &format!("{path}.{k}"))?,
                };
                Ok((k.clone(), x))
            })
            .collect::<Result<Map<_, _>, String>>()
            .map(Value::Object),
        (Ty::Map(_), _) => wrong("map"),
        (Ty::Any, Value::Object(m)) => m
            .iter()
            .filter(|(_, x)| !x.is_null())
            .map(|(k, x)| Ok((k.clone(), go_decode_view(x, &ANY, path)?)))
            .collect::<Result<Map<_, _>, String>>()
            .map(Value::Object),
        (Ty::Any, other) => Ok(other.clone()),
    }
}

/// The text Go's `json.Marshal` writes for `v` read as a `ty`.
pub fn print(v: &Value, ty: &Ty) -> String {
    let mut out = String::new();
    write(v, ty, &mut out);
    out
}

fn write(v: &Value, ty: &Ty, out: &mut String) {
    match (ty, v) {
        (_, Value::Null) => out.push_str(zero_text(ty)),
        (Ty::Quantity, Value::String(s)) => out.push_str(&go_json_quote(&quantity_text(s))),
        (Ty::Quantity, Value::Number(n)) => {
            out.push_str(&go_json_quote(&quantity_text(&n.to_string())));
        }
        (Ty::Time, Value::String(s)) => out.push_str(&go_json_quote(&time_text(s))),
        (Ty::Struct(fields), Value::Object(m)) => {
            out.push('{');
            let mut first = true;
            for fl in fields.iter() {
                let fv = m.get(fl.key).unwrap_or(&Value::Null);
                if omitted(fv, fl) {
                    continue;
                }
                if !first {
                    out.push(',');
                }
                first = false;
                out.push_str(&go_json_quote(fl.key));
                out.push(':');
                if fv.is_null() {
                    write_zero(fl.ty, out);
                } else {
                    write(fv, fl.ty, out);
                }
            }
            out.push('}');
        }
        (Ty::List(item), Value::Array(a)) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                // Go decodes a null item of a struct list as the zero struct.
                if x.is_null() {
                    write_zero(item, out);
                } else {
                    write(x, item, out);
                }
            }
            out.push(']');
        }
        (Ty::Map(item), Value::Object(m)) => write_object(m, Some(item), out),
        (_, Value::Object(m)) => write_object(m, None, out),
        (_, Value::Array(a)) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(x, &ANY, out);
            }
            out.push(']');
        }
        (_, Value::String(s)) => out.push_str(&go_json_quote(s)),
        (_, other) => out.push_str(&other.to_string()),
    }
}

/// A map, or a value of no known layout: keys sorted, as Go writes maps.
fn write_object(m: &Map<String, Value>, item: Option<&Ty>, out: &mut String) {
    out.push('{');
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    for (i, k) in keys.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&go_json_quote(k));
        out.push(':');
        write(&m[k], item.unwrap_or(&ANY), out);
    }
    out.push('}');
}

fn omitted(v: &Value, fl: &Field) -> bool {
    match fl.omit {
        Never => false,
        Nil => v.is_null(),
        Empty => is_empty(v),
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
    }
}

fn zero_text(ty: &Ty) -> &'static str {
    match ty {
        Ty::Str => "\"\"",
        Ty::Int => "0",
        Ty::Bool => "false",
        Ty::Quantity => "\"0\"",
        _ => "null",
    }
}

fn write_zero(ty: &Ty, out: &mut String) {
    match ty {
        Ty::Struct(_) => write(&Value::Object(Map::new()), ty, out),
        _ => out.push_str(zero_text(ty)),
    }
}

fn zero_value(ty: &Ty) -> Value {
    match ty {
        Ty::Str => Value::String(String::new()),
        Ty::Int => Value::from(0),
        Ty::Bool => Value::Bool(false),
        Ty::Quantity => Value::String("0".into()),
        Ty::Struct(_) => {
            let mut v = Value::Object(Map::new());
            add_go_fields(&mut v, ty);
            v
        }
        _ => Value::Null,
    }
}

/// A quantity's text as Go prints it; text that does not parse stays (the decode refused it).
fn quantity_text(s: &str) -> String {
    Quantity::from_json_text(s)
        .map(|q| q.value().canonical())
        .unwrap_or_else(|_| s.to_owned())
}

/// A time as `metav1.Time` marshals it; text that does not parse stays.
pub fn time_text(s: &str) -> String {
    s.parse::<jiff::Timestamp>()
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_else(|_| s.to_owned())
}

/// What Go's decode-then-marshal adds to or rewrites in `v`: fields that are always written
/// appear (with their zero value), quantities and times take their printed form. Fields Go
/// would leave out are kept: controller-runtime drops those removals from the patch.
pub fn add_go_fields(v: &mut Value, ty: &Ty) {
    match (ty, v) {
        (Ty::Quantity, Value::String(s)) => {
            let t = quantity_text(s);
            if t != *s {
                *s = t;
            }
        }
        (Ty::Time, Value::String(s)) => {
            let t = time_text(s);
            if t != *s {
                *s = t;
            }
        }
        (Ty::Struct(fields), Value::Object(m)) => {
            for fl in fields.iter() {
                match m.get_mut(fl.key) {
                    Some(Value::Null) | None if fl.omit == Never => {
                        m.insert(fl.key.to_owned(), zero_value(fl.ty));
                    }
                    Some(fv) => add_go_fields(fv, fl.ty),
                    None => {}
                }
            }
        }
        (Ty::List(item), Value::Array(a)) => a.iter_mut().for_each(|x| {
            if x.is_null() {
                *x = zero_value(item);
            } else {
                add_go_fields(x, item);
            }
        }),
        (Ty::Map(item), Value::Object(m)) => m.values_mut().for_each(|x| add_go_fields(x, item)),
        _ => {}
    }
}

/// `v` as apimachinery's semantic equality sees it: fields Go does not know dropped, empty
/// lists and maps the same as absent ones, zero scalars the same as absent ones unless the
/// field is a pointer, quantities by value, times as instants.
pub fn semantic(v: &Value, ty: &Ty) -> Value {
    match (ty, v) {
        (Ty::Quantity, Value::String(s)) => Value::String(quantity_text(s)),
        (Ty::Time, Value::String(s)) => Value::String(
            s.parse::<jiff::Timestamp>()
                .map(|t| t.to_string())
                .unwrap_or_else(|_| s.clone()),
        ),
        (Ty::Struct(fields), Value::Object(m)) => {
            let mut out = Map::new();
            for fl in fields.iter() {
                let Some(fv) = m.get(fl.key) else { continue };
                let keep = match (fl.omit, fl.ty) {
                    (_, _) if fv.is_null() => false,
                    (Nil, _) => true,
                    (_, Ty::Struct(_)) => true,
                    _ => !is_empty(fv),
                };
                if keep {
                    out.insert(fl.key.to_owned(), semantic(fv, fl.ty));
                }
            }
            Value::Object(out)
        }
        (Ty::List(item), Value::Array(a)) => {
            Value::Array(a.iter().map(|x| semantic(x, item)).collect())
        }
        (Ty::Map(item), Value::Object(m)) => Value::Object(
            m.iter()
                .map(|(k, x)| (k.clone(), semantic(x, item)))
                .collect(),
        ),
        (_, other) => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_decode_view_zeroes_nulls_and_refuses_wrong_types() {
        let v = json!({"spec": {"runtimeRef": null, "trainer": {"env": [null, {"name": null}], "numNodes": 2},
            "runtimePatches": [{"manager": "m", "x": null}]}});
        assert_eq!(
            go_decode_view(&v, &TRAIN_JOB, "").unwrap(),
            json!({"spec": {"trainer": {"env": [{"name": ""}, {}], "numNodes": 2},
                "runtimePatches": [{"manager": "m"}]}})
        );
        let bad = json!({"spec": {"runtimeRef": []}});
        assert_eq!(
            go_decode_view(&bad, &TRAIN_JOB, "").unwrap_err(),
            "json: cannot unmarshal array into Go value .spec.runtimeRef of type object"
        );
        let bad = json!({"spec": {"trainer": {"numNodes": 1.5}}});
        assert!(go_decode_view(&bad, &TRAIN_JOB, "").is_err());
    }

    #[test]
    fn containers_print_in_go_order_with_go_zero_fields() {
        let v = json!([{"image": "i", "name": "x", "volumeMounts": [{"mountPath": "/a", "name": "v"}],
            "resources": {"limits": {"cpu": "1000m"}}, "env": [{"valueFrom": {"fieldRef": {"fieldPath": "p"}}}],
            "unknown": 1, "stdin": false}]);
        assert_eq!(
            print(&v, &CONTAINERS),
            r#"[{"name":"x","image":"i","env":[{"name":"","valueFrom":{"fieldRef":{"fieldPath":"p"}}}],"resources":{"limits":{"cpu":"1"}},"volumeMounts":[{"name":"v","mountPath":"/a"}]}]"#
        );
        assert_eq!(
            print(&json!([{}]), &CONTAINERS),
            r#"[{"name":"","resources":{}}]"#
        );
    }

    #[test]
    fn runtime_refs_and_patches_print_as_go_marshals_them() {
        let r = json!({"kind": "TrainingRuntime", "name": "x", "apiGroup": "trainer.kubeflow.org"});
        assert_eq!(
            print(&r, &RUNTIME_REF),
            r#"{"name":"x","apiGroup":"trainer.kubeflow.org","kind":"TrainingRuntime"}"#
        );
        let p = json!([{"time": "2026-01-01T01:00:00.5+01:00", "manager": "a<b"}]);
        assert_eq!(
            print(&p, &RUNTIME_PATCHES),
            r#"[{"manager":"a\u003cb","time":"2026-01-01T00:00:00Z"}]"#
        );
    }

    #[test]
    fn go_additions_add_always_written_fields_and_rewrite_quantities_and_times() {
        let mut v = json!({"spec": {"trainer": {"env": [{}], "resourcesPerNode": {"limits": {"cpu": "1000m"}}},
            "runtimePatches": [{"time": "2026-01-01T00:00:00.5Z", "x": 1}]}});
        add_go_fields(&mut v, &TRAIN_JOB);
        assert_eq!(
            v,
            json!({"spec": {"trainer": {"env": [{"name": ""}], "resourcesPerNode": {"limits": {"cpu": "1"}}},
                "runtimePatches": [{"time": "2026-01-01T00:00:00Z", "x": 1}]}})
        );
    }

    #[test]
    fn semantic_equality_ignores_empties_and_unknown_fields_but_not_set_pointers() {
        let a = json!({"manager": "m", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": []}}}, "x": 1});
        let b = json!({"manager": "m", "trainingRuntimeSpec": {"template": {"spec": {}}}});
        assert_eq!(semantic(&a, &RUNTIME_PATCH), semantic(&b, &RUNTIME_PATCH));
        let c = json!({"manager": "m"});
        assert_ne!(semantic(&a, &RUNTIME_PATCH), semantic(&c, &RUNTIME_PATCH));
    }
}
