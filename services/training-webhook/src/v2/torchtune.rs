//! TorchTune TrainJobs (`trainer.command: [tune, run]` on a torch runtime): TO-03..TO-08
//! (spec §5.5). The model comes from the runtime's name (`torchtune-llama3.2-1b` →
//! `llama3_2/1B`); the recipe configuration from nodes, processes per node, GPUs per node and the
//! LoRA/QLoRA arguments, as upstream chooses it.

use std::collections::BTreeMap;

use admission_kit::compat::go::Quantity;
use admission_kit::review::field::BadValue;
use admission_kit::{ErrorList, FieldError, Path};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;

use super::Doc;
use super::gojson::{self, RESOURCES};
use super::info::Info;
use super::types::{TrainJob, Trainer};

const LLAMA3_2_1B: &str = "llama3_2/1B";
const LLAMA3_2_3B: &str = "llama3_2/3B";
const LLAMA3_3_70B: &str = "llama3_3/70B";
const QWEN2_5_1_5B: &str = "qwen2_5/1.5B";
const SUPPORTED: [&str; 4] = [LLAMA3_2_1B, LLAMA3_2_3B, LLAMA3_3_70B, QWEN2_5_1_5B];
const IMMUTABLE: [&str; 4] = [
    "output_dir",
    "tokenizer.path",
    "checkpointer.checkpoint_dir",
    "tokenizer.merges_file",
];

/// The model a runtime name stands for: its three `-` fields' middle one with `.` as `_`, and
/// the last upper-cased; `""` unless there are exactly three.
pub fn model_of(runtime_name: &str) -> String {
    let fields: Vec<&str> = runtime_name.split('-').collect();
    match fields.as_slice() {
        [_, family, size] => format!("{}/{}", family.replace('.', "_"), size.to_uppercase()),
        _ => String::new(),
    }
}

/// Whether an argument `KEY=VALUE` whose key contains `item` has the value `true` (any case,
/// surrounding space ignored).
fn bool_arg(args: &[String], item: &str) -> bool {
    args.iter().any(|a| {
        a.split_once('=').is_some_and(|(name, value)| {
            name.contains(item) && value.trim().eq_ignore_ascii_case("true")
        })
    })
}

fn lora(args: &[String]) -> bool {
    args.iter().any(|a| a.contains("model.lora_attn_modules"))
}

fn qlora(args: &[String]) -> bool {
    !bool_arg(args, "model.use_dora") && bool_arg(args, "model.quantize_base")
}

/// Processes per node as upstream holds them: `auto` unless the TrainJob sets a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProcPerNode {
    Auto,
    Count(i32),
}

/// GPUs in a resource list: the first resource (in key order) whose name contains `gpu`,
/// rounded up to a whole number as `Quantity.Value()` does.
fn gpus(list: Option<&BTreeMap<String, K8sQuantity>>) -> i64 {
    list.into_iter()
        .flatten()
        .find(|(k, _)| k.to_lowercase().contains("gpu"))
        .and_then(|(_, q)| Quantity::from_json_text(&q.0).ok())
        .and_then(|q| q.value().milli_value_wide())
        .map(|m| {
            let whole = m.div_euclid(1000) + i128::from(m.rem_euclid(1000) != 0);
            i64::try_from(whole).unwrap_or(i64::MAX)
        })
        .unwrap_or(0)
}

fn gpus_of(
    requests: Option<&BTreeMap<String, K8sQuantity>>,
    limits: Option<&BTreeMap<String, K8sQuantity>>,
) -> i64 {
    match gpus(requests) {
        0 => gpus(limits).max(0),
        n => n,
    }
}

/// GPUs per node: the TrainJob's `resourcesPerNode`, else the runtime's `node` container
/// (a job named `node` or of the trainer step).
fn gpus_per_node(info: &Info, trainer: &Trainer) -> i64 {
    if let Some(r) = &trainer.resources_per_node {
        return gpus_of(r.requests.as_ref(), r.limits.as_ref());
    }
    for j in &info.jobs {
        if j.name != "node" && j.ancestor() != Some("trainer") {
            continue;
        }
        if let Some(res) = j
            .containers
            .iter()
            .find(|c| c.name == "node" && c.resources.is_some())
            .and_then(|c| c.resources.as_ref())
        {
            let list = |key: &str| -> Option<BTreeMap<String, K8sQuantity>> {
                res.get(key)
                    .and_then(|v| serde_json::from_value(v.clone()).ok())
            };
            return gpus_of(list("requests").as_ref(), list("limits").as_ref());
        }
    }
    0
}

/// The configuration suffix upstream's recipe choice ends in.
fn config_suffix(nodes: i32, procs: ProcPerNode, gpus: i64, args: &[String]) -> &'static str {
    if nodes == 1 && (procs == ProcPerNode::Count(1) || gpus == 1) {
        if qlora(args) {
            "_qlora_single_device"
        } else if lora(args) {
            "_lora_single_device"
        } else {
            "_full_single_device"
        }
    } else if nodes == 1 && qlora(args) {
        "_qlora"
    } else if nodes == 1 && lora(args) {
        "_lora"
    } else if nodes > 1 {
        "_full_multinode"
    } else {
        "_full"
    }
}

fn trainer_path() -> Path {
    Path::new("spec").child("trainer")
}

fn name_path() -> Path {
    Path::new("spec").child("runtimeRef").child("name")
}

/// The TorchTune rules (TO-03..TO-08) for a TorchTune TrainJob.
///
/// TO-03: the model the runtime's name stands for is one TorchTune offers here (Llama 3.2 1B and 3B, Llama 3.3 70B, Qwen2.5 1.5B).
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: torchtune-gpt-1b}, spec: {mlPolicy: {numNodes: 1, torch: {}}, template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: torchtune-llama3.2-1b}, spec: {mlPolicy: {numNodes: 1, torch: {}}, template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// Refused: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torchtune-gpt-1b}, trainer: {command: [tune, run]}}}`
///
/// Admitted: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torchtune-llama3.2-1b}, trainer: {command: [tune, run]}}}`
///
/// TO-04: one node, except for the 70B model.
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: torchtune-llama3.2-1b}, spec: {mlPolicy: {numNodes: 1, torch: {}}, template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// Refused: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torchtune-llama3.2-1b}, trainer: {command: [tune, run], numNodes: 2}}}`
///
/// Admitted: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torchtune-llama3.2-1b}, trainer: {command: [tune, run], numNodes: 1}}}`
///
/// TO-05: QLoRA is not offered for Qwen2.5 1.5B.
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: torchtune-qwen2.5-1.5b}, spec: {mlPolicy: {numNodes: 1, torch: {}}, template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// Refused: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torchtune-qwen2.5-1.5b}, trainer: {command: [tune, run], numProcPerNode: 1, args: [model.quantize_base=True]}}}`
///
/// Admitted: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torchtune-qwen2.5-1.5b}, trainer: {command: [tune, run], numProcPerNode: 1, args: ["model.lora_attn_modules=[q_proj,v_proj]"]}}}`
///
/// TO-06: QLoRA on the Llama 3.2 models runs on one device (`numProcPerNode` auto or 1, one GPU per node).
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: torchtune-llama3.2-1b}, spec: {mlPolicy: {numNodes: 1, torch: {}}, template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// Refused: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torchtune-llama3.2-1b}, trainer: {command: [tune, run], numProcPerNode: 2, args: [model.quantize_base=True]}}}`
///
/// Admitted: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torchtune-llama3.2-1b}, trainer: {command: [tune, run], numProcPerNode: 1, args: [model.quantize_base=True]}}}`
///
/// TO-07: LoRA and QLoRA run on one node.
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: torchtune-llama3.3-70b}, spec: {mlPolicy: {numNodes: 1, torch: {}}, template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// Refused: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torchtune-llama3.3-70b}, trainer: {command: [tune, run], numNodes: 2, args: ["model.lora_attn_modules=[q_proj,v_proj]"]}}}`
///
/// Admitted: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torchtune-llama3.3-70b}, trainer: {command: [tune, run], numNodes: 2}}}`
///
/// TO-08: the runtime's own settings (`output_dir`, the tokenizer and checkpoint paths) are not overridden in `args`.
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: torchtune-llama3.2-1b}, spec: {mlPolicy: {numNodes: 1, torch: {}}, template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// Refused: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torchtune-llama3.2-1b}, trainer: {command: [tune, run], args: [output_dir=/tmp/x]}}}`
///
/// Admitted: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torchtune-llama3.2-1b}, trainer: {command: [tune, run], args: [epochs=2]}}}`
pub fn validate(info: &Info, job: &Doc<TrainJob>, trainer: &Trainer, errs: &mut ErrorList) {
    let name = job.typed.spec.runtime_ref.name.as_str();
    let model = model_of(name);
    // TO-03: a supported model.
    if !SUPPORTED.contains(&model.as_str()) {
        errs.push(FieldError::invalid(
            "TO-03",
            name_path(),
            name,
            format!("must have a supported pretrained model, invalid model configured: {model}"),
        ));
    }
    let nodes = trainer.num_nodes.unwrap_or(1);
    // TO-04: one node, except for the 70B model.
    if nodes > 1 && model != LLAMA3_3_70B {
        errs.push(FieldError::invalid(
            "TO-04",
            trainer_path().child("numNodes"),
            nodes,
            format!("must be 1 for {model} model"),
        ));
    }
    let procs = trainer
        .num_proc_per_node
        .map_or(ProcPerNode::Auto, ProcPerNode::Count);
    let suffix = config_suffix(nodes, procs, gpus_per_node(info, trainer), &trainer.args);
    if suffix.contains("_qlora") {
        // TO-05: QLoRA is not offered for Qwen2.5 1.5B.
        if model == QWEN2_5_1_5B {
            errs.push(FieldError::invalid(
                "TO-05",
                name_path(),
                name,
                format!("QLoRA is not supported for {model} model"),
            ));
        }
        // TO-06: QLoRA on the Llama 3.2 models runs on one device.
        if !suffix.contains("_qlora_single_device")
            && (model == LLAMA3_2_1B || model == LLAMA3_2_3B)
        {
            let procs_printed = match procs {
                ProcPerNode::Auto => "\"auto\"".to_owned(),
                ProcPerNode::Count(n) => n.to_string(),
            };
            let resources = match job.at("/spec/trainer/resourcesPerNode") {
                Some(v) if !v.is_null() => gojson::print(v, &RESOURCES),
                _ => "null".to_owned(),
            };
            errs.push(FieldError::invalid(
                "TO-06",
                trainer_path().child("numProcPerNode"),
                BadValue::Raw(procs_printed),
                format!("must be auto or 1 for {model} model when using QLoRA"),
            ));
            errs.push(FieldError::invalid(
                "TO-06",
                trainer_path().child("resourcesPerNode"),
                BadValue::Raw(resources),
                format!("must have gpu resource with value 1 for {model} model when using QLoRA"),
            ));
        }
    }
    // TO-07: LoRA and QLoRA run on one node.
    if nodes > 1 && (lora(&trainer.args) || qlora(&trainer.args)) {
        errs.push(FieldError::invalid(
            "TO-07",
            trainer_path().child("numNodes"),
            nodes,
            "LoRA fine-tuning is not supported for multi-node training in TorchTune",
        ));
    }
    // TO-08: the runtime's own settings are not overridden.
    for (i, arg) in trainer.args.iter().enumerate() {
        let key = arg.split('=').next().unwrap_or_default();
        if IMMUTABLE.contains(&key) {
            errs.push(FieldError::invalid(
                "TO-08",
                trainer_path().child("args").index(i),
                arg.as_str(),
                format!(
                    "must not set immutable config {} in trainer args; it is managed by the runtime",
                    admission_kit::compat::go::go_quote(key)
                ),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_come_from_three_field_runtime_names() {
        assert_eq!(model_of("torchtune-llama3.2-1b"), "llama3_2/1B");
        assert_eq!(model_of("torchtune-qwen2.5-1.5b"), "qwen2_5/1.5B");
        assert_eq!(model_of("torch-distributed"), "");
        assert_eq!(model_of("a-b-c-d"), "");
    }

    #[test]
    fn qlora_needs_quantize_base_without_dora() {
        let a = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(qlora(&a(&["model.quantize_base= TRUE "])));
        assert!(!qlora(&a(&[
            "model.quantize_base=True",
            "model.use_dora=true"
        ])));
        assert!(!qlora(&a(&["model.quantize_base"])));
        assert!(lora(&a(&["model.lora_attn_modules=[q_proj]"])));
    }

    #[test]
    fn recipe_suffixes_follow_upstream() {
        let none: Vec<String> = vec![];
        assert_eq!(
            config_suffix(1, ProcPerNode::Auto, 1, &none),
            "_full_single_device"
        );
        assert_eq!(config_suffix(1, ProcPerNode::Auto, 2, &none), "_full");
        assert_eq!(
            config_suffix(2, ProcPerNode::Count(1), 1, &none),
            "_full_multinode"
        );
        let q = vec!["model.quantize_base=true".to_owned()];
        assert_eq!(config_suffix(1, ProcPerNode::Auto, 0, &q), "_qlora");
        assert_eq!(
            config_suffix(1, ProcPerNode::Count(1), 0, &q),
            "_qlora_single_device"
        );
    }
}
