//! The runtime plugins' TrainJob checks (spec §5.2–§5.7), one function per rule. Each plugin
//! checks only TrainJobs whose runtime enables it (its ML or pod group policy).
//!
//! Upstream runs the plugins in Go map order, which changes from process to process; ours run in
//! the order of upstream's plugin registry: flux, volcano, mpi, torch, jobset, xgboost.

use std::collections::BTreeSet;

use admission_kit::compat::validation::{
    HTTP_PATH_MESSAGE, dns1123_subdomain_errors, is_http_path,
};
use admission_kit::review::field::BadValue;
use admission_kit::{Context, ErrorList, FieldError, Path};
use k8s_openapi::api::core::v1::EnvVar;
use kube::api::ApiResource;
use serde_json::Value;

use super::Doc;
use super::gojson::{self, ENV_INJECTION_TARGET, ENV_VARS, RUNTIME_PATCHES, RUNTIME_REF};
use super::info::Info;
use super::types::TrainJob;

/// The TrainJob under review, and the stored one on update.
pub struct Job<'a> {
    /// The TrainJob.
    pub new: &'a Doc<TrainJob>,
    /// The stored TrainJob (update only).
    pub old: Option<&'a Doc<TrainJob>>,
}

impl Job<'_> {
    fn raw(&self, pointer: &str) -> Option<&Value> {
        self.new.at(pointer).filter(|v| !v.is_null())
    }

    fn env(&self) -> &[EnvVar] {
        self.new
            .typed
            .spec
            .trainer
            .as_ref()
            .map(|t| t.env.as_slice())
            .unwrap_or_default()
    }

    /// `spec.trainer.env` as Go prints it.
    fn env_printed(&self) -> BadValue {
        BadValue::Raw(printed(self.raw("/spec/trainer/env"), &ENV_VARS))
    }

    /// `spec.runtimeRef` as Go prints it.
    pub fn runtime_ref_printed(&self) -> BadValue {
        BadValue::Raw(match self.raw("/spec/runtimeRef") {
            Some(v) => gojson::print(v, &RUNTIME_REF),
            None => "{}".to_owned(),
        })
    }

    fn patches_printed(&self) -> BadValue {
        BadValue::Raw(printed(self.raw("/spec/runtimePatches"), &RUNTIME_PATCHES))
    }
}

fn printed(v: Option<&Value>, ty: &gojson::Ty) -> String {
    v.map_or_else(|| "null".to_owned(), |v| gojson::print(v, ty))
}

fn spec() -> Path {
    Path::new("spec")
}

fn trainer_env() -> Path {
    spec().child("trainer").child("env")
}

/// The reserved names among the trainer's env, sorted and printed as Go prints a `[]string`.
fn reserved_envs(env: &[EnvVar], reserved: &[&str]) -> Option<String> {
    let found: BTreeSet<&str> = env
        .iter()
        .map(|e| e.name.as_str())
        .filter(|n| reserved.contains(n))
        .collect();
    (!found.is_empty()).then(|| {
        let names: Vec<&str> = found.into_iter().collect();
        format!("[{}]", names.join(" "))
    })
}

fn reserved_env_error(rule: &'static str, job: &Job, names: String) -> FieldError {
    FieldError::invalid(
        rule,
        trainer_env(),
        job.env_printed(),
        format!("must not have reserved envs, invalid envs configured: {names}"),
    )
}

// ---- flux (§5.2) ----

/// FX-01: processes per node (the TrainJob's, else the policy's) are at least 1.
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: flux}, spec: {mlPolicy: {numNodes: 1, flux: {}}, template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// Refused: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: flux}, trainer: {numProcPerNode: 0}}}`
///
/// Admitted: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: flux}, trainer: {numProcPerNode: 2}}}`
pub fn fx_01_num_proc_per_node(info: &Info, job: &Job, errs: &mut ErrorList) {
    let Some(flux) = info.ml_policy.as_ref().and_then(|p| p.flux.as_ref()) else {
        return;
    };
    let n = job
        .new
        .typed
        .spec
        .trainer
        .as_ref()
        .and_then(|t| t.num_proc_per_node)
        .or(flux.num_proc_per_node);
    if let Some(n) = n
        && n < 1
    {
        errs.push(FieldError::invalid(
            "FX-01",
            spec().child("trainer").child("numProcPerNode"),
            n,
            "must be greater than or equal to 1 for Flux TrainJob",
        ));
    }
}

/// FX-02: the `node` job has no init container named `flux-installer` (Flux adds its own).
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: flux-bad}, spec: {mlPolicy: {numNodes: 1, flux: {}}, template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {initContainers: [{name: flux-installer, image: i}], containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: flux}, spec: {mlPolicy: {numNodes: 1, flux: {}}, template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// Refused: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: flux-bad}}}`
///
/// Admitted: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: flux}}}`
pub fn fx_02_reserved_init_container(info: &Info, errs: &mut ErrorList) {
    if info
        .ml_policy
        .as_ref()
        .and_then(|p| p.flux.as_ref())
        .is_none()
    {
        return;
    }
    for j in info.jobs.iter().filter(|j| j.name == "node") {
        for c in j
            .init_containers
            .iter()
            .filter(|c| c.name == "flux-installer")
        {
            errs.push(FieldError::invalid(
                "FX-02",
                spec().child("trainer").child("initContainers"),
                c.name.as_str(),
                "InitContainer 'flux-installer' is reserved",
            ));
        }
    }
}

// ---- volcano (§5.3) ----

const VOLCANO_QUEUE: &str = "scheduling.volcano.sh/queue-name";

fn volcano(info: &Info) -> bool {
    info.pod_group_policy
        .as_ref()
        .is_some_and(|p| p.volcano.as_ref().is_some_and(|v| !v.is_null()))
}

/// VC-01: a Volcano queue annotation, when present on the JobSet, is not empty.
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: vq-empty}, spec: {mlPolicy: {numNodes: 1, torch: {}}, podGroupPolicy: {volcano: {}}, template: {metadata: {annotations: {scheduling.volcano.sh/queue-name: ""}}, spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: vq}, spec: {mlPolicy: {numNodes: 1, torch: {}}, podGroupPolicy: {volcano: {}}, template: {metadata: {annotations: {scheduling.volcano.sh/queue-name: q}}, spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// Refused: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: vq-empty}}}`
///
/// Admitted: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: vq}}}`
pub fn vc_01_queue(info: &Info, errs: &mut ErrorList) {
    if !volcano(info) {
        return;
    }
    if info
        .annotations
        .as_ref()
        .and_then(|a| a.get(VOLCANO_QUEUE))
        .is_some_and(String::is_empty)
    {
        errs.push(FieldError::invalid(
            "VC-01",
            spec().child("annotations").key(VOLCANO_QUEUE),
            "",
            "Volcano queue name must not be empty",
        ));
    }
}

/// VC-02: each replicated job's priority class exists; the first `system-cluster-critical` or
/// `system-node-critical` ends the check (upstream returns there).
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: vpc}, spec: {mlPolicy: {numNodes: 1, torch: {}}, podGroupPolicy: {volcano: {}}, template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {priorityClassName: gold, containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: vsys}, spec: {mlPolicy: {numNodes: 1, torch: {}}, podGroupPolicy: {volcano: {}}, template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {priorityClassName: system-cluster-critical, containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// Refused: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: vpc}}}`
///
/// Admitted: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: vsys}}}`
pub fn vc_02_priority_class(info: &Info, ctx: &Context, errs: &mut ErrorList) {
    use k8s_openapi::api::scheduling::v1::PriorityClass;
    if !volcano(info) {
        return;
    }
    for j in &info.jobs {
        let Some(pc) = j.priority_class_name.as_deref() else {
            continue;
        };
        if pc == "system-cluster-critical" || pc == "system-node-critical" {
            return;
        }
        let why = match ctx.get::<PriorityClass>(None, pc) {
            Ok(Some(_)) => continue,
            Ok(None) => format!(
                "priorityclasses.scheduling.k8s.io {} not found",
                admission_kit::compat::go::go_quote(pc)
            ),
            Err(e) => e.to_string(),
        };
        errs.push(FieldError::invalid(
            "VC-02",
            spec().child("templateSpec").child("priorityClassName"),
            pc,
            format!(
                "PriorityClass {} doesn't exist: {why}",
                admission_kit::compat::go::go_quote(pc)
            ),
        ));
    }
}

// ---- mpi (§5.4) ----

const MPI_RESERVED: [&str; 4] = [
    "OMPI_MCA_orte_default_hostfile",
    "OMPI_MCA_plm_rsh_args",
    "OMPI_MCA_orte_keep_fqdn_hostnames",
    "OMPI_MCA_orte_set_default_slots",
];

/// MP-01: with `runLauncherAsNode`, a TrainJob of 2 or more nodes needs both a `launcher` and a
/// `node` job.
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: mpi}, spec: {mlPolicy: {numNodes: 1, mpi: {runLauncherAsNode: true}}, template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// Refused: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: mpi}, trainer: {numNodes: 2}}}`
///
/// Admitted: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: mpi}, trainer: {numNodes: 1}}}`
pub fn mp_01_launcher_as_node(info: &Info, job: &Job, errs: &mut ErrorList) {
    let Some(mpi) = info.ml_policy.as_ref().and_then(|p| p.mpi.as_ref()) else {
        return;
    };
    let Some(trainer) = &job.new.typed.spec.trainer else {
        return;
    };
    let nodes = trainer.num_nodes.unwrap_or(1);
    if nodes >= 2
        && mpi.run_launcher_as_node.unwrap_or(false)
        && (info.job("launcher").is_none() || info.job("node").is_none())
    {
        errs.push(FieldError::invalid(
            "MP-01",
            spec().child("trainer").child("numNodes"),
            nodes,
            "must have 1 when MPI trainingRuntime with enabled runLauncherAsNode does not have either launcher and node",
        ));
    }
}

/// MP-02: the trainer sets none of the environment variables MPI reserves.
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: mpi}, spec: {mlPolicy: {numNodes: 1, mpi: {}}, template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// Refused: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: mpi}, trainer: {env: [{name: OMPI_MCA_orte_keep_fqdn_hostnames, value: "true"}]}}}`
///
/// Admitted: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: mpi}, trainer: {env: [{name: OMPI_ALLOW_RUN_AS_ROOT, value: "1"}]}}}`
pub fn mp_02_reserved_envs(info: &Info, job: &Job, errs: &mut ErrorList) {
    if info
        .ml_policy
        .as_ref()
        .and_then(|p| p.mpi.as_ref())
        .is_none()
        || job.new.typed.spec.trainer.is_none()
    {
        return;
    }
    if let Some(names) = reserved_envs(job.env(), &MPI_RESERVED) {
        errs.push(reserved_env_error("MP-02", job, names));
    }
}

// ---- torch (§5.5) ----

const TORCH_RESERVED: [&str; 5] = [
    "PET_NNODES",
    "PET_NPROC_PER_NODE",
    "PET_NODE_RANK",
    "PET_MASTER_ADDR",
    "PET_MASTER_PORT",
];

fn torch(info: &Info) -> Option<&super::types::TorchPolicy> {
    info.ml_policy.as_ref().and_then(|p| p.torch.as_ref())
}

/// TO-01: every env injection target names a container (or init container) of the runtime.
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: torch-bad}, spec: {mlPolicy: {numNodes: 1, torch: {envInjection: {targets: [{jobName: node, containerNames: [sidecar]}]}}}, template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: torch}, spec: {mlPolicy: {numNodes: 1, torch: {envInjection: {targets: [{jobName: node, containerNames: [node]}]}}}, template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// Refused: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torch-bad}}}`
///
/// Admitted: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torch}}}`
pub fn to_01_env_injection_targets(info: &Info, errs: &mut ErrorList) {
    let Some(t) = torch(info).and_then(|t| t.env_injection.as_ref()) else {
        return;
    };
    for target in &t.targets {
        for c in &target.container_names {
            if info
                .job(&target.job_name)
                .is_some_and(|j| j.has_container(c))
            {
                continue;
            }
            let printed = gojson::print(
                &serde_json::to_value(target).unwrap_or_default(),
                &ENV_INJECTION_TARGET,
            );
            errs.push(FieldError::invalid(
                "TO-01",
                spec().child("runtimeRef"),
                BadValue::Raw(printed),
                format!(
                    "envInjection target podSet {} container {} not found in runtime template",
                    admission_kit::compat::go::go_quote(&target.job_name),
                    admission_kit::compat::go::go_quote(c)
                ),
            ));
        }
    }
}

/// TO-02: the trainer sets none of the environment variables torchrun reserves.
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: torch}, spec: {mlPolicy: {numNodes: 1, torch: {}}, template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// Refused: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torch}, trainer: {env: [{name: PET_NNODES, value: "2"}]}}}`
///
/// Admitted: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torch}, trainer: {env: [{name: NCCL_DEBUG, value: INFO}]}}}`
pub fn to_02_reserved_envs(info: &Info, job: &Job, errs: &mut ErrorList) {
    if torch(info).is_none() || job.new.typed.spec.trainer.is_none() {
        return;
    }
    if let Some(names) = reserved_envs(job.env(), &TORCH_RESERVED) {
        errs.push(reserved_env_error("TO-02", job, names));
    }
}

/// TorchTune jobs (`command: [tune, run]`): TO-03..TO-08, in [`super::torchtune`].
pub fn to_torchtune(info: &Info, job: &Job, errs: &mut ErrorList) {
    if torch(info).is_none() {
        return;
    }
    if let Some(trainer) = &job.new.typed.spec.trainer
        && trainer.command == ["tune", "run"]
    {
        super::torchtune::validate(info, job.new, trainer, errs);
    }
}

// ---- jobset (§5.6) ----

fn runtime_ref() -> Path {
    spec().child("runtimeRef")
}

fn runtime_patches() -> Path {
    spec().child("runtimePatches")
}

/// JS-01..JS-03 (dataset) and JS-04..JS-06 (model): an initializer the TrainJob configures has
/// its job, its container in that job, and the `initializer` volume mounted in the container.
fn js_initializer(
    ids: [&'static str; 3],
    step: &str,
    config: &str,
    info: &Info,
    job: &Job,
    errs: &mut ErrorList,
) {
    let Some(j) = info.job(step) else {
        errs.push(FieldError::invalid(
            ids[0],
            runtime_ref(),
            job.runtime_ref_printed(),
            format!("must have {step} job when trainJob is configured with input {config}"),
        ));
        return;
    };
    if !j.has_container(step) {
        errs.push(FieldError::invalid(
            ids[1],
            runtime_ref(),
            job.runtime_ref_printed(),
            format!("must have container with name - {step} in the {step} job"),
        ));
        return;
    }
    let mounted = info
        .jobs
        .iter()
        .filter(|j| j.name == step)
        .flat_map(|j| j.containers.iter().filter(|c| c.name == step))
        .any(|c| c.mounts.iter().any(|(_, name)| name == "initializer"));
    if !mounted {
        errs.push(FieldError::invalid(
            ids[2],
            runtime_ref(),
            job.runtime_ref_printed(),
            format!("must have volumeMount with name - initializer in container {step} of the {step} job"),
        ));
    }
}

/// The dataset and model initializer steps of a runtime's JobSet (JS-01..JS-06).
///
/// JS-01: a TrainJob that configures a dataset initializer runs on a runtime with a `dataset-initializer` job.
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: torch}, spec: {mlPolicy: {numNodes: 1, torch: {}}, template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: ok}, spec: {mlPolicy: {numNodes: 1, torch: {}}, template: {spec: {replicatedJobs: [{name: dataset-initializer, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer}}, spec: {template: {spec: {containers: [{name: dataset-initializer, image: x, volumeMounts: [{name: initializer, mountPath: /workspace}]}]}}}}}, {name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// Refused: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torch}, initializer: {dataset: {storageUri: "hf://x"}}}}`
///
/// Admitted: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: ok}, initializer: {dataset: {storageUri: "hf://x"}}}}`
///
/// JS-02: that job has a container named `dataset-initializer`.
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: no-container}, spec: {mlPolicy: {numNodes: 1, torch: {}}, template: {spec: {replicatedJobs: [{name: dataset-initializer, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer}}, spec: {template: {spec: {containers: [{name: other, image: x, volumeMounts: [{name: initializer, mountPath: /workspace}]}]}}}}}, {name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: ok}, spec: {mlPolicy: {numNodes: 1, torch: {}}, template: {spec: {replicatedJobs: [{name: dataset-initializer, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer}}, spec: {template: {spec: {containers: [{name: dataset-initializer, image: x, volumeMounts: [{name: initializer, mountPath: /workspace}]}]}}}}}, {name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// Refused: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: no-container}, initializer: {dataset: {storageUri: "hf://x"}}}}`
///
/// Admitted: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: ok}, initializer: {dataset: {storageUri: "hf://x"}}}}`
///
/// JS-03: that container mounts the `initializer` volume.
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: no-mount}, spec: {mlPolicy: {numNodes: 1, torch: {}}, template: {spec: {replicatedJobs: [{name: dataset-initializer, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer}}, spec: {template: {spec: {containers: [{name: dataset-initializer, image: x}]}}}}}, {name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: ok}, spec: {mlPolicy: {numNodes: 1, torch: {}}, template: {spec: {replicatedJobs: [{name: dataset-initializer, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: dataset-initializer}}, spec: {template: {spec: {containers: [{name: dataset-initializer, image: x, volumeMounts: [{name: initializer, mountPath: /workspace}]}]}}}}}, {name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// Refused: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: no-mount}, initializer: {dataset: {storageUri: "hf://x"}}}}`
///
/// Admitted: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: ok}, initializer: {dataset: {storageUri: "hf://x"}}}}`
///
/// JS-04: a TrainJob that configures a model initializer runs on a runtime with a `model-initializer` job.
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: torch}, spec: {mlPolicy: {numNodes: 1, torch: {}}, template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: ok}, spec: {mlPolicy: {numNodes: 1, torch: {}}, template: {spec: {replicatedJobs: [{name: model-initializer, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: model-initializer}}, spec: {template: {spec: {containers: [{name: model-initializer, image: x, volumeMounts: [{name: initializer, mountPath: /workspace}]}]}}}}}, {name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// Refused: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torch}, initializer: {model: {storageUri: "hf://x"}}}}`
///
/// Admitted: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: ok}, initializer: {model: {storageUri: "hf://x"}}}}`
///
/// JS-05: that job has a container named `model-initializer`.
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: no-container}, spec: {mlPolicy: {numNodes: 1, torch: {}}, template: {spec: {replicatedJobs: [{name: model-initializer, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: model-initializer}}, spec: {template: {spec: {containers: [{name: other, image: x, volumeMounts: [{name: initializer, mountPath: /workspace}]}]}}}}}, {name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: ok}, spec: {mlPolicy: {numNodes: 1, torch: {}}, template: {spec: {replicatedJobs: [{name: model-initializer, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: model-initializer}}, spec: {template: {spec: {containers: [{name: model-initializer, image: x, volumeMounts: [{name: initializer, mountPath: /workspace}]}]}}}}}, {name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// Refused: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: no-container}, initializer: {model: {storageUri: "hf://x"}}}}`
///
/// Admitted: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: ok}, initializer: {model: {storageUri: "hf://x"}}}}`
///
/// JS-06: that container mounts the `initializer` volume.
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: no-mount}, spec: {mlPolicy: {numNodes: 1, torch: {}}, template: {spec: {replicatedJobs: [{name: model-initializer, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: model-initializer}}, spec: {template: {spec: {containers: [{name: model-initializer, image: x}]}}}}}, {name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: ok}, spec: {mlPolicy: {numNodes: 1, torch: {}}, template: {spec: {replicatedJobs: [{name: model-initializer, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: model-initializer}}, spec: {template: {spec: {containers: [{name: model-initializer, image: x, volumeMounts: [{name: initializer, mountPath: /workspace}]}]}}}}}, {name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// Refused: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: no-mount}, initializer: {model: {storageUri: "hf://x"}}}}`
///
/// Admitted: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: ok}, initializer: {model: {storageUri: "hf://x"}}}}`
pub fn js_01_06_initializers(info: &Info, job: &Job, errs: &mut ErrorList) {
    let Some(init) = &job.new.typed.spec.initializer else {
        return;
    };
    if init.dataset.is_some() {
        let ids = ["JS-01", "JS-02", "JS-03"];
        js_initializer(ids, "dataset-initializer", "datasetConfig", info, job, errs);
    }
    if init.model.is_some() {
        let ids = ["JS-04", "JS-05", "JS-06"];
        js_initializer(ids, "model-initializer", "modelConfig", info, job, errs);
    }
}

/// The JobSet kind, read when runtime patches change (JS-08).
fn jobset_resource() -> ApiResource {
    ApiResource {
        group: "jobset.x-k8s.io".into(),
        version: "v1alpha2".into(),
        api_version: "jobset.x-k8s.io/v1alpha2".into(),
        kind: "JobSet".into(),
        plural: "jobsets".into(),
    }
}

fn patches_semantic(d: &Doc<TrainJob>) -> Value {
    match d.at("/spec/runtimePatches") {
        // No patches and an empty list are the same to Go's semantic equality.
        Some(v @ Value::Array(a)) if !a.is_empty() => gojson::semantic(v, &RUNTIME_PATCHES),
        _ => Value::Null,
    }
}

/// JS-07..JS-09: on update, runtime patches change only while the TrainJob is suspended before
/// or after the update, and only while no replicated job of its JobSet is active.
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: torch}, spec: {mlPolicy: {numNodes: 1, torch: {}}, template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torch}}}`
///
/// Refused on update: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torch}, runtimePatches: [{manager: acme.io/tuner, time: "2026-01-01T00:00:00Z"}]}}`
///
/// Admitted on update: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torch}, suspend: true, runtimePatches: [{manager: acme.io/tuner, time: "2026-01-01T00:00:00Z"}]}}`
pub fn js_07_09_patch_immutability(job: &Job, ctx: &Context, errs: &mut ErrorList) {
    let Some(old) = job.old else { return };
    if patches_semantic(old) == patches_semantic(job.new) {
        return;
    }
    let suspended = |d: &Doc<TrainJob>| d.typed.spec.suspend == Some(true);
    if !suspended(old) && !suspended(job.new) {
        errs.push(FieldError::forbidden(
            "JS-07",
            runtime_patches(),
            "RuntimePatches can only be modified when the TrainJob is suspended before or after the update",
        ));
        return;
    }
    let ns = job.new.typed.metadata.namespace.as_deref();
    let name = job.new.typed.metadata.name.as_deref().unwrap_or_default();
    match ctx.read_now(&jobset_resource(), ns, name) {
        // No name finds no JobSet, as upstream's cached client finds none.
        Ok(None) | Err(admission_kit::review::lookup::LookupError::EmptyName) => {}
        Ok(Some(js)) => {
            let statuses = js
                .data
                .pointer("/status/replicatedJobsStatus")
                .and_then(Value::as_array);
            for s in statuses.into_iter().flatten() {
                if s.get("active").and_then(Value::as_i64).unwrap_or(0) > 0 {
                    let rj = s.get("name").and_then(Value::as_str).unwrap_or_default();
                    errs.push(FieldError::forbidden(
                        "JS-08",
                        runtime_patches(),
                        format!("RuntimePatches cannot be modified when the JobSet's ReplicatedJob {rj} is still active"),
                    ));
                }
            }
        }
        Err(e) => errs.push(FieldError::internal(
            "JS-09",
            runtime_patches(),
            e.to_string(),
        )),
    }
}

/// JS-10: each patch's manager is a domain-prefixed path (`acme.io/foo`).
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: torch}, spec: {mlPolicy: {numNodes: 1, torch: {}}, template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// Refused: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torch}, runtimePatches: [{manager: me}]}}`
///
/// Admitted: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torch}, runtimePatches: [{manager: acme.io/tuner}]}}`
pub fn js_10_manager(job: &Job, errs: &mut ErrorList) {
    let path = runtime_patches().child("manager");
    for p in &job.new.typed.spec.runtime_patches {
        let m = p.manager.as_str();
        if m.is_empty() {
            errs.push(FieldError::required("JS-10", path.clone(), ""));
            continue;
        }
        let Some((host, rest)) = m
            .split_once('/')
            .filter(|(h, r)| !h.is_empty() && !r.is_empty())
        else {
            errs.push(FieldError::invalid(
                "JS-10",
                path.clone(),
                m,
                "must be a domain-prefixed path (such as \"acme.io/foo\")",
            ));
            continue;
        };
        for e in dns1123_subdomain_errors(host) {
            errs.push(FieldError::invalid("JS-10", path.clone(), host, e));
        }
        if !is_http_path(rest) {
            errs.push(FieldError::invalid(
                "JS-10",
                path.clone(),
                rest,
                HTTP_PATH_MESSAGE,
            ));
        }
    }
}

/// JS-11: a patch sets no env of the `dataset-initializer`, `model-initializer` or `node`
/// container (the runtime owns those). Upstream's checks that patched jobs and containers exist
/// in the runtime cannot fail here: the patch is merged into the runtime first.
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: torch}, spec: {mlPolicy: {numNodes: 1, torch: {}}, template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// Refused: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torch}, runtimePatches: [{manager: acme.io/tuner, trainingRuntimeSpec: {template: {spec: {replicatedJobs: [{name: node, template: {spec: {template: {spec: {containers: [{name: node, env: [{name: A, value: b}]}]}}}}}]}}}}]}}`
///
/// Admitted: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: torch}, runtimePatches: [{manager: acme.io/tuner, trainingRuntimeSpec: {template: {spec: {replicatedJobs: [{name: node, template: {spec: {template: {spec: {nodeSelector: {pool: a}}}}}}]}}}}]}}`
pub fn js_11_patched_envs(job: &Job, errs: &mut ErrorList) {
    for p in &job.new.typed.spec.runtime_patches {
        let Some(spec) = p
            .training_runtime_spec
            .as_ref()
            .and_then(|s| s.template.as_ref())
            .and_then(|t| t.spec.as_ref())
        else {
            continue;
        };
        for rj in &spec.replicated_jobs {
            let Some(pod) = rj
                .template
                .as_ref()
                .and_then(|t| t.spec.as_ref())
                .and_then(|s| s.template.as_ref())
                .and_then(|t| t.spec.as_ref())
            else {
                continue;
            };
            for c in &pod.containers {
                if !c.env.is_empty()
                    && matches!(
                        c.name.as_str(),
                        "dataset-initializer" | "model-initializer" | "node"
                    )
                {
                    errs.push(FieldError::invalid(
                        "JS-11",
                        runtime_patches(),
                        job.patches_printed(),
                        "must not have envs for the dataset-initializer, model-initializer, node containers",
                    ));
                }
            }
        }
    }
}

// ---- xgboost (§5.7) ----

const XGBOOST_RESERVED: [&str; 4] = [
    "DMLC_TRACKER_URI",
    "DMLC_TRACKER_PORT",
    "DMLC_TASK_ID",
    "DMLC_NUM_WORKER",
];

/// XG-01: the trainer sets none of the environment variables XGBoost reserves, each named.
///
/// State: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: ClusterTrainingRuntime, metadata: {name: xgb}, spec: {mlPolicy: {numNodes: 1, xgboost: {}}, template: {spec: {replicatedJobs: [{name: node, template: {metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}, spec: {template: {spec: {containers: [{name: node, image: x}]}}}}}]}}}}`
///
/// Refused: `{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, metadata: {name: j}, spec: {runtimeRef: {name: xgb}, trainer: {env: [{name: DMLC_NUM_WORKER, value: "4"}]}}}`
pub fn xg_01_reserved_envs(info: &Info, job: &Job, errs: &mut ErrorList) {
    if info
        .ml_policy
        .as_ref()
        .and_then(|p| p.xgboost.as_ref())
        .is_none()
    {
        return;
    }
    for (i, e) in job.env().iter().enumerate() {
        if XGBOOST_RESERVED.contains(&e.name.as_str()) {
            errs.push(FieldError::forbidden(
                "XG-01",
                trainer_env().index(i),
                format!("{} is reserved for the XGBoost runtime", e.name),
            ));
        }
    }
}

/// Every plugin's checks, in registry order.
pub fn validate(info: &Info, job: &Job, ctx: &Context, errs: &mut ErrorList) {
    fx_01_num_proc_per_node(info, job, errs);
    fx_02_reserved_init_container(info, errs);
    vc_01_queue(info, errs);
    vc_02_priority_class(info, ctx, errs);
    mp_01_launcher_as_node(info, job, errs);
    mp_02_reserved_envs(info, job, errs);
    to_01_env_injection_targets(info, errs);
    to_02_reserved_envs(info, job, errs);
    to_torchtune(info, job, errs);
    js_01_06_initializers(info, job, errs);
    js_07_09_patch_immutability(job, ctx, errs);
    js_10_manager(job, errs);
    js_11_patched_envs(job, errs);
    xg_01_reserved_envs(info, job, errs);
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use admission_kit::review::lookup::{ClusterState, LookupError, TypeKey};
    use kube::api::DynamicObject;
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    /// A state whose API server cannot be reached.
    struct Unreachable;

    impl ClusterState for Unreachable {
        fn get(
            &self,
            _: &TypeKey,
            _: Option<&str>,
            _: &str,
        ) -> Result<Option<Arc<DynamicObject>>, LookupError> {
            Err(LookupError::Unreadable("connection refused".into()))
        }
        fn list(
            &self,
            _: &TypeKey,
            _: Option<&str>,
        ) -> Result<Vec<Arc<DynamicObject>>, LookupError> {
            Err(LookupError::Unreadable("connection refused".into()))
        }
        fn read_now(
            &self,
            _: &ApiResource,
            _: Option<&str>,
            _: &str,
        ) -> Result<Option<Arc<DynamicObject>>, LookupError> {
            Err(LookupError::Unreadable("connection refused".into()))
        }
    }

    fn job(patch_manager: &str, suspend: bool) -> Doc<TrainJob> {
        Doc::deserialize(json!({
            "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": "tj", "namespace": "ns"},
            "spec": {"runtimeRef": {"name": "rt"}, "suspend": suspend,
                     "runtimePatches": [{"manager": patch_manager}]}
        }))
        .unwrap()
    }

    #[test]
    fn js_09_a_jobset_that_cannot_be_read_denies() {
        let (old, new) = (job("a.io/x", true), job("b.io/y", true));
        let j = Job {
            new: &new,
            old: Some(&old),
        };
        let ctx = Context::new(Arc::new(Unreachable));
        let mut errs = ErrorList::new();
        js_07_09_patch_immutability(&j, &ctx, &mut errs);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].rule, "JS-09");
        assert_eq!(
            errs[0].to_string(),
            "spec.runtimePatches: Internal error: connection refused"
        );
    }

    #[test]
    fn js_07_unchanged_patches_need_no_lookup() {
        let (old, new) = (job("a.io/x", false), job("a.io/x", false));
        let j = Job {
            new: &new,
            old: Some(&old),
        };
        let mut errs = ErrorList::new();
        js_07_09_patch_immutability(&j, &Context::new(Arc::new(Unreachable)), &mut errs);
        assert!(errs.is_empty());
    }
}
