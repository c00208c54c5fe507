//! The runtime as a TrainJob sees it (upstream's `runtime.Info`): the runtime's JobSet template
//! with the TrainJob's runtime patches merged in, as a strategic merge patch merges them
//! (replicated jobs by `name`, containers and init containers by `name`, volume mounts by
//! `mountPath`, labels and annotations key by key), replicated jobs back in the runtime's order.
//! Only what the plugin rules read is merged (spec §5.1).

use std::collections::BTreeMap;

use super::types::{
    ContainerPatch, JobSetTemplateSpec, LABEL_ANCESTOR, MLPolicy, PodGroupPolicy,
    ReplicatedJobPatch, RuntimePatch, TrainingRuntimeSpec, container_name,
};
use serde_json::Value;

/// A container of the merged template.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Container {
    /// Its name.
    pub name: String,
    /// Its volume mounts: (mount path, volume name), in merged order.
    pub mounts: Vec<(String, String)>,
    /// Its `resources`, as sent.
    pub resources: Option<Value>,
}

/// A replicated job of the merged template (upstream's pod set).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Job {
    /// Its name.
    pub name: String,
    /// The Job template's labels (the ancestor label among them).
    pub labels: BTreeMap<String, String>,
    /// Containers.
    pub containers: Vec<Container>,
    /// Init containers.
    pub init_containers: Vec<Container>,
    /// The pod template's priority class.
    pub priority_class_name: Option<String>,
    order: usize,
}

impl Job {
    /// The `trainer.kubeflow.org/trainjob-ancestor-step` label.
    pub fn ancestor(&self) -> Option<&str> {
        self.labels.get(LABEL_ANCESTOR).map(String::as_str)
    }

    /// Whether a container or init container has this name.
    pub fn has_container(&self, name: &str) -> bool {
        self.find_container(name).is_some()
    }

    /// A container of this name, else an init container of it (upstream's lookup order).
    pub fn find_container(&self, name: &str) -> Option<&Container> {
        self.containers
            .iter()
            .chain(&self.init_containers)
            .find(|c| c.name == name)
    }
}

/// The merged runtime.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Info {
    /// The ML policy.
    pub ml_policy: Option<MLPolicy>,
    /// The pod group policy.
    pub pod_group_policy: Option<PodGroupPolicy>,
    /// The JobSet annotations the TrainJob's JobSet would get (`None`: the template has none).
    pub annotations: Option<BTreeMap<String, String>>,
    /// Replicated jobs, in the runtime's order.
    pub jobs: Vec<Job>,
}

impl Info {
    /// A replicated job by name.
    pub fn job(&self, name: &str) -> Option<&Job> {
        self.jobs.iter().find(|j| j.name == name)
    }
}

/// Why a patch could not be merged: a list entry without its merge key. The CRD refuses such
/// patches; upstream's webhook panics on them (spec F-1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeError {
    /// Index of the runtime patch.
    pub patch: usize,
    /// Index of the replicated job patch.
    pub job: usize,
    /// `containers`/`initContainers` and the index of the nameless entry, when it is one.
    pub container: Option<(&'static str, usize)>,
}

fn container_from(c: &Value) -> Container {
    let mounts = c
        .get("volumeMounts")
        .and_then(Value::as_array)
        .map(|ms| {
            ms.iter()
                .map(|m| (str_of(m, "mountPath"), str_of(m, "name")))
                .collect()
        })
        .unwrap_or_default();
    Container {
        name: container_name(c).to_owned(),
        mounts,
        resources: c.get("resources").filter(|r| !r.is_null()).cloned(),
    }
}

fn str_of(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn merge_map(into: &mut BTreeMap<String, String>, from: Option<&BTreeMap<String, String>>) {
    if let Some(from) = from {
        into.extend(from.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
}

fn merge_containers(
    into: &mut Vec<Container>,
    patches: &[ContainerPatch],
    which: &'static str,
) -> Result<(), (&'static str, usize)> {
    // A list the runtime lacks takes the patch's as it is: only a merge needs the keys.
    let merging = !into.is_empty();
    for (i, p) in patches.iter().enumerate() {
        // Go's encoder leaves an empty name out, and the merge then finds no key.
        if p.name.is_empty() && merging {
            return Err((which, i));
        }
        let at = match into.iter().position(|c| c.name == p.name) {
            Some(at) => at,
            None => {
                into.push(Container {
                    name: p.name.clone(),
                    ..Container::default()
                });
                into.len() - 1
            }
        };
        for m in &p.volume_mounts {
            let mounts = &mut into[at].mounts;
            match mounts.iter_mut().find(|(path, _)| *path == m.mount_path) {
                Some(existing) => existing.1 = m.name.clone(),
                None => mounts.push((m.mount_path.clone(), m.name.clone())),
            }
        }
    }
    Ok(())
}

fn merge_job(jobs: &mut Vec<Job>, p: &ReplicatedJobPatch) -> Result<(), (&'static str, usize)> {
    let at = match jobs.iter().position(|j| j.name == p.name) {
        Some(at) => at,
        None => {
            // Upstream restores the runtime's order from a map that gives unknown names 0. A new
            // job is the patch's as it is (its lists are not merged into anything).
            jobs.push(Job {
                name: p.name.clone(),
                ..Job::default()
            });
            let job = jobs.len() - 1;
            let lists = |c: &[ContainerPatch]| -> Vec<Container> {
                c.iter()
                    .map(|c| Container {
                        name: c.name.clone(),
                        mounts: c
                            .volume_mounts
                            .iter()
                            .map(|m| (m.mount_path.clone(), m.name.clone()))
                            .collect(),
                        resources: None,
                    })
                    .collect()
            };
            let t = p.template.as_ref();
            jobs[job].labels = t
                .and_then(|t| t.metadata.as_ref())
                .and_then(|m| m.labels.clone())
                .unwrap_or_default();
            if let Some(pod) = t
                .and_then(|t| t.spec.as_ref())
                .and_then(|s| s.template.as_ref())
                .and_then(|t| t.spec.as_ref())
            {
                jobs[job].containers = lists(&pod.containers);
                jobs[job].init_containers = lists(&pod.init_containers);
            }
            return Ok(());
        }
    };
    let job = &mut jobs[at];
    let Some(template) = &p.template else {
        return Ok(());
    };
    merge_map(
        &mut job.labels,
        template.metadata.as_ref().and_then(|m| m.labels.as_ref()),
    );
    let Some(spec) = template
        .spec
        .as_ref()
        .and_then(|s| s.template.as_ref())
        .and_then(|t| t.spec.as_ref())
    else {
        return Ok(());
    };
    merge_containers(
        &mut job.init_containers,
        &spec.init_containers,
        "initContainers",
    )?;
    merge_containers(&mut job.containers, &spec.containers, "containers")
}

/// The runtime with the patches merged in, or where a patch cannot merge.
pub fn runtime_info(
    runtime: &TrainingRuntimeSpec,
    patches: &[RuntimePatch],
) -> Result<Info, MergeError> {
    let template: &JobSetTemplateSpec = &runtime.template;
    let mut annotations = template
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.clone());
    let mut jobs: Vec<Job> = template
        .spec
        .replicated_jobs
        .iter()
        .enumerate()
        .map(|(order, rj)| {
            let pod = &rj.template.spec.template.spec;
            Job {
                name: rj.name.clone(),
                labels: rj
                    .template
                    .metadata
                    .as_ref()
                    .and_then(|m| m.labels.clone())
                    .unwrap_or_default(),
                containers: pod.containers.iter().map(container_from).collect(),
                init_containers: pod.init_containers.iter().map(container_from).collect(),
                priority_class_name: pod.priority_class_name.clone(),
                order,
            }
        })
        .collect();
    for (pi, patch) in patches.iter().enumerate() {
        let Some(t) = patch
            .training_runtime_spec
            .as_ref()
            .and_then(|s| s.template.as_ref())
        else {
            continue;
        };
        if let Some(a) = t.metadata.as_ref().and_then(|m| m.annotations.as_ref())
            && !a.is_empty()
        {
            merge_map(annotations.get_or_insert_with(BTreeMap::new), Some(a));
        }
        let Some(spec) = &t.spec else { continue };
        for (ji, rj) in spec.replicated_jobs.iter().enumerate() {
            let err = |container| MergeError {
                patch: pi,
                job: ji,
                container,
            };
            // With no replicated jobs to merge into, the patch's list is taken as it is.
            if rj.name.is_empty() && !jobs.is_empty() {
                return Err(err(None));
            }
            merge_job(&mut jobs, rj).map_err(|c| err(Some(c)))?;
        }
    }
    jobs.sort_by_key(|j| j.order);
    Ok(Info {
        ml_policy: runtime.ml_policy.clone(),
        pod_group_policy: runtime.pod_group_policy.clone(),
        annotations,
        jobs,
    })
}
