//! ModelServing validation (`docs/spec/kthena-v1.md` §9, MS-1..MS-19).

use std::collections::BTreeMap;

use admission_kit::compat::go::atoi;
use admission_kit::compat::validation::{PERCENT_MESSAGE, dns1035_label_errors, is_valid_percent};
use admission_kit::review::field::BadValue;
use admission_kit::{Context, ErrorList, FieldError, Path, Request, Status, Validator, Verdict};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::denial;
use crate::model::image_rule;
use crate::types::Obj;
use crate::v1::workload::{ModelServingSpec, PodTemplate, Role};

/// A ModelServing as the rules see it.
pub type ServingObj = Obj<ModelServingSpec>;

const ROLE_ROLLING_UPDATE: &str = "RoleRollingUpdate";
const GROUP_ROLLING_UPDATE: &str = "ServingGroupRollingUpdate";
const ROLE_RECREATE: &str = "RoleRecreate";
const GROUP_RECREATE: &str = "ServingGroupRecreate";

fn roles_path() -> Path {
    Path::new("spec").child("template").child("roles")
}

fn roles(spec: &ModelServingSpec) -> &[Role] {
    spec.template.roles.as_deref().unwrap_or_default()
}

/// A pointer to an int as apimachinery v0.34 prints it: `null` or the digits.
fn int_ptr(v: Option<i32>) -> BadValue {
    v.map_or_else(|| BadValue::Raw("null".to_owned()), BadValue::from)
}

/// An `IntOrString` as apimachinery v0.34 prints it (its JSON form).
fn int_or_string(v: &IntOrString) -> BadValue {
    match v {
        IntOrString::Int(i) => BadValue::from(*i),
        IntOrString::String(s) => BadValue::json_str(s),
    }
}

/// MS-1: for every role, the name the controller generates for its pods,
/// `<name>-<replicas>-<role>-<role replicas>-<worker replicas>` (absent replicas count 1), is a
/// DNS-1035 label.
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: sxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx}, spec: {replicas: 1, template: {roles: [{name: decode, replicas: 1, workerReplicas: 0, entryTemplate: {spec: {containers: [{name: c, image: x}]}}}]}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: 1, template: {roles: [{name: decode, replicas: 1, workerReplicas: 0, entryTemplate: {spec: {containers: [{name: c, image: x}]}}}]}}}`
fn ms_1_generated_names(ms: &ServingObj, errs: &mut ErrorList) {
    let replicas = ms.spec.replicas.unwrap_or(1);
    for role in roles(&ms.spec) {
        let generated = format!(
            "{}-{replicas}-{}-{}-{}",
            ms.metadata.name.as_deref().unwrap_or_default(),
            role.name,
            role.replicas.unwrap_or(1),
            role.worker_replicas
        );
        let why = dns1035_label_errors(&generated);
        if !why.is_empty() {
            errs.push(FieldError::invalid(
                "MS-1",
                Path::new("metadata").child("name"),
                ms.metadata.name.as_deref().unwrap_or_default(),
                format!("invalid name: {}", why.join("; ")),
            ));
        }
    }
}

/// MS-2: every role name is a DNS-1035 label.
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: 1, template: {roles: [{name: Decode, replicas: 1, entryTemplate: {spec: {containers: [{name: c, image: x}]}}}]}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: 1, template: {roles: [{name: decode, replicas: 1, workerReplicas: 0, entryTemplate: {spec: {containers: [{name: c, image: x}]}}}]}}}`
fn ms_2_role_names(spec: &ModelServingSpec, errs: &mut ErrorList) {
    for (i, role) in roles(spec).iter().enumerate() {
        let why = dns1035_label_errors(&role.name);
        if !why.is_empty() {
            errs.push(FieldError::invalid(
                "MS-2",
                roles_path().index(i).child("name"),
                role.name.as_str(),
                format!(
                    "role name must be a valid DNS-1035 label (lowercase alphanumeric characters or '-', must start with a letter): {}",
                    why.join("; ")
                ),
            ));
        }
    }
}

/// MS-3, MS-4: container images of the entry and worker templates are not whitespace only and
/// hold no ASCII space.
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: 1, template: {roles: [{name: decode, replicas: 1, workerReplicas: 0, entryTemplate: {spec: {containers: [{name: c, image: " "}]}}}]}}}`
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: 1, template: {roles: [{name: decode, replicas: 1, workerReplicas: 0, entryTemplate: {spec: {containers: [{name: c, image: "vllm latest"}]}}}]}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: 1, template: {roles: [{name: decode, replicas: 1, workerReplicas: 0, entryTemplate: {spec: {containers: [{name: c, image: "vllm:latest"}]}}}]}}}`
fn ms_3_4_images(spec: &ModelServingSpec, errs: &mut ErrorList) {
    let mut template = |t: &PodTemplate, path: Path| {
        let containers = t.spec.as_ref().map(|s| s.containers.as_slice());
        for (j, c) in containers.unwrap_or_default().iter().enumerate() {
            let img = c.image.as_deref().unwrap_or_default();
            image_rule(
                ["MS-3", "MS-4"],
                img,
                || {
                    path.child("spec")
                        .child("containers")
                        .index(j)
                        .child("image")
                },
                errs,
            );
        }
    };
    for (i, role) in roles(spec).iter().enumerate() {
        template(
            &role.entry_template,
            roles_path().index(i).child("entryTemplate"),
        );
        if let Some(w) = &role.worker_template {
            template(w, roles_path().index(i).child("workerTemplate"));
        }
    }
}

/// MS-5..MS-7: `spec.replicas` is set and not negative; roles exist; each role's replicas are
/// set and not negative.
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: -1, template: {roles: [{name: decode, replicas: 1, workerReplicas: 0, entryTemplate: {spec: {containers: [{name: c, image: x}]}}}]}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: 1, template: {roles: [{name: decode, replicas: 1, workerReplicas: 0, entryTemplate: {spec: {containers: [{name: c, image: x}]}}}]}}}`
fn ms_5_7_replicas(spec: &ModelServingSpec, errs: &mut ErrorList) {
    if spec.replicas.is_none_or(|r| r < 0) {
        errs.push(FieldError::invalid(
            "MS-5",
            Path::new("spec").child("replicas"),
            int_ptr(spec.replicas),
            "replicas must be a non-negative integer",
        ));
    }
    let Some(list) = spec.template.roles.as_ref().filter(|r| !r.is_empty()) else {
        let shown = if spec.template.roles.is_some() {
            "[]"
        } else {
            "null"
        };
        errs.push(FieldError::invalid(
            "MS-6",
            roles_path(),
            BadValue::Raw(shown.to_owned()),
            "roles must be specified",
        ));
        return;
    };
    for (i, role) in list.iter().enumerate() {
        if role.replicas.is_none_or(|r| r < 0) {
            errs.push(FieldError::invalid(
                "MS-7",
                roles_path().index(i).child("replicas"),
                int_ptr(role.replicas),
                "role replicas must be a non-negative integer",
            ));
        }
    }
}

/// `validateIntOrPercent`: a string is a percent of 0..=100, an int is not negative.
fn int_or_percent(rule: &'static str, v: &IntOrString, path: &Path, errs: &mut ErrorList) {
    match v {
        IntOrString::String(s) => {
            if !is_valid_percent(s) {
                errs.push(FieldError::invalid(
                    rule,
                    path.clone(),
                    int_or_string(v),
                    PERCENT_MESSAGE,
                ));
                return;
            }
            let digits = s.trim_end_matches('%');
            if atoi(digits).is_ok_and(|p| p <= 100) {
                return;
            }
            errs.push(FieldError::invalid(
                rule,
                path.clone(),
                int_or_string(v),
                "must be a valid percent value (0-100)",
            ));
        }
        IntOrString::Int(i) if *i < 0 => errs.push(FieldError::invalid(
            rule,
            path.clone(),
            i64::from(*i),
            "must be a non-negative integer",
        )),
        IntOrString::Int(_) => {}
    }
}

/// `intstr.GetScaledValueFromIntOrPercent(v, total, false)` with its error text.
fn scaled(v: &IntOrString, total: i64) -> Result<i64, String> {
    match v {
        IntOrString::Int(i) => Ok(i64::from(*i)),
        IntOrString::String(s) => {
            let Some(digits) = s.strip_suffix('%') else {
                return Err(
                    "invalid value for IntOrString: invalid type: string is not a percentage"
                        .to_owned(),
                );
            };
            let p = atoi(digits).map_err(|e| {
                format!(
                    "invalid value for IntOrString: invalid value {}: {e}",
                    admission_kit::compat::go::go_quote(s)
                )
            })?;
            // Go computes in float64 and truncates toward the floor; so do we.
            #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
            let v = (p as f64 * total as f64 / 100.0).floor() as i64;
            Ok(v)
        }
    }
}

/// A rolling update configuration (MS-8..MS-10).
///
/// MS-8: `rollingUpdateConfiguration` only with `ServingGroupRollingUpdate`.
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: 2, rolloutStrategy: {type: RoleRollingUpdate, rollingUpdateConfiguration: {maxUnavailable: 1}}, template: {roles: [{name: decode, replicas: 2, workerReplicas: 0, entryTemplate: {spec: {containers: [{name: c, image: x}]}}}]}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: 2, rolloutStrategy: {type: ServingGroupRollingUpdate, rollingUpdateConfiguration: {maxUnavailable: 1}}, template: {roles: [{name: decode, replicas: 2, workerReplicas: 0, entryTemplate: {spec: {containers: [{name: c, image: x}]}}}]}}}`
///
/// MS-9: its `maxUnavailable` and `partition` are ints or percents (0-100 %).
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: 2, rolloutStrategy: {type: ServingGroupRollingUpdate, rollingUpdateConfiguration: {maxUnavailable: "150%"}}, template: {roles: [{name: decode, replicas: 2, workerReplicas: 0, entryTemplate: {spec: {containers: [{name: c, image: x}]}}}]}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: 2, rolloutStrategy: {type: ServingGroupRollingUpdate, rollingUpdateConfiguration: {maxUnavailable: "50%"}}, template: {roles: [{name: decode, replicas: 2, workerReplicas: 0, entryTemplate: {spec: {containers: [{name: c, image: x}]}}}]}}}`
///
/// MS-10: with `spec.replicas` set, its `maxUnavailable` scales to more than zero.
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: 2, rolloutStrategy: {type: ServingGroupRollingUpdate, rollingUpdateConfiguration: {maxUnavailable: "10%"}}, template: {roles: [{name: decode, replicas: 2, workerReplicas: 0, entryTemplate: {spec: {containers: [{name: c, image: x}]}}}]}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: 2, rolloutStrategy: {type: ServingGroupRollingUpdate, rollingUpdateConfiguration: {maxUnavailable: "50%"}}, template: {roles: [{name: decode, replicas: 2, workerReplicas: 0, entryTemplate: {spec: {containers: [{name: c, image: x}]}}}]}}}`
fn ms_8_10_rolling_update(spec: &ModelServingSpec, errs: &mut ErrorList) {
    let Some(strategy) = &spec.rollout_strategy else {
        return;
    };
    let Some(config) = &strategy.rolling_update_configuration else {
        return;
    };
    let path = Path::new("spec")
        .child("rolloutStrategy")
        .child("rollingUpdateConfiguration");
    if strategy.type_ == ROLE_ROLLING_UPDATE {
        errs.push(FieldError::forbidden(
            "MS-8",
            path,
            "rollingUpdateConfiguration is only valid when rolloutStrategy.type is ServingGroupRollingUpdate",
        ));
        return;
    }
    let max_path = path.child("maxUnavailable");
    if let Some(m) = &config.max_unavailable {
        int_or_percent("MS-9", m, &max_path, errs);
    }
    if let Some(p) = &config.partition {
        int_or_percent("MS-9", p, &path.child("partition"), errs);
    }
    if let (Some(replicas), Some(m)) = (spec.replicas, &config.max_unavailable) {
        match scaled(m, replicas.into()) {
            Err(e) => errs.push(FieldError::invalid(
                "MS-10",
                max_path,
                int_or_string(m),
                format!("invalid maxUnavailable: {e}"),
            )),
            Ok(0) => errs.push(FieldError::invalid(
                "MS-10",
                path,
                "",
                "maxUnavailable cannot be 0",
            )),
            Ok(_) => {}
        }
    }
}

/// A role's `maxUnavailable` (MS-11..MS-13).
///
/// MS-11: it is an int or a percent (0-100 %).
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: 2, rolloutStrategy: {type: RoleRollingUpdate}, template: {roles: [{name: decode, replicas: 2, workerReplicas: 0, maxUnavailable: "x%", entryTemplate: {spec: {containers: [{name: c, image: x}]}}}]}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: 2, rolloutStrategy: {type: RoleRollingUpdate}, template: {roles: [{name: decode, replicas: 2, workerReplicas: 0, maxUnavailable: 1, entryTemplate: {spec: {containers: [{name: c, image: x}]}}}]}}}`
///
/// MS-12: it is set only with `RoleRollingUpdate`.
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: 2, rolloutStrategy: {type: ServingGroupRollingUpdate}, template: {roles: [{name: decode, replicas: 2, workerReplicas: 0, maxUnavailable: 1, entryTemplate: {spec: {containers: [{name: c, image: x}]}}}]}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: 2, rolloutStrategy: {type: RoleRollingUpdate}, template: {roles: [{name: decode, replicas: 2, workerReplicas: 0, maxUnavailable: 1, entryTemplate: {spec: {containers: [{name: c, image: x}]}}}]}}}`
///
/// MS-13: it scales to between 1 and the role's replicas.
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: 2, rolloutStrategy: {type: RoleRollingUpdate}, template: {roles: [{name: decode, replicas: 2, workerReplicas: 0, maxUnavailable: 3, entryTemplate: {spec: {containers: [{name: c, image: x}]}}}]}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: 2, rolloutStrategy: {type: RoleRollingUpdate}, template: {roles: [{name: decode, replicas: 2, workerReplicas: 0, maxUnavailable: 2, entryTemplate: {spec: {containers: [{name: c, image: x}]}}}]}}}`
fn ms_11_13_role_max_unavailable(spec: &ModelServingSpec, errs: &mut ErrorList) {
    let role_updates = spec
        .rollout_strategy
        .as_ref()
        .is_some_and(|s| s.type_ == ROLE_ROLLING_UPDATE);
    for (i, role) in roles(spec).iter().enumerate() {
        let Some(m) = &role.max_unavailable else {
            continue;
        };
        let path = roles_path().index(i).child("maxUnavailable");
        int_or_percent("MS-11", m, &path, errs);
        if !role_updates {
            errs.push(FieldError::forbidden(
                "MS-12",
                path.clone(),
                "maxUnavailable is only valid when rolloutStrategy.type is RoleRollingUpdate",
            ));
        }
        let replicas = i64::from(role.replicas.unwrap_or(1));
        let why = match scaled(m, replicas) {
            Err(e) => format!("invalid maxUnavailable: {e}"),
            Ok(0) => "maxUnavailable cannot be 0".to_owned(),
            Ok(v) if v > replicas => {
                format!("maxUnavailable cannot be greater than replicas ({replicas})")
            }
            Ok(_) => continue,
        };
        errs.push(FieldError::invalid("MS-13", path, int_or_string(m), why));
    }
}

/// The gang minimums, keys in sorted order (upstream walks a Go map) (MS-14..MS-16).
///
/// MS-14: every gang minimum names a role (the last of that name counts, as in upstream's map).
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: 2, template: {gangPolicy: {minRoleReplicas: {prefill: 1}}, roles: [{name: decode, replicas: 2, workerReplicas: 0, entryTemplate: {spec: {containers: [{name: c, image: x}]}}}]}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: 2, template: {gangPolicy: {minRoleReplicas: {decode: 1}}, roles: [{name: decode, replicas: 2, workerReplicas: 0, entryTemplate: {spec: {containers: [{name: c, image: x}]}}}]}}}`
///
/// MS-15: a gang minimum is at most its role's replicas.
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: 2, template: {gangPolicy: {minRoleReplicas: {decode: 3}}, roles: [{name: decode, replicas: 2, workerReplicas: 0, entryTemplate: {spec: {containers: [{name: c, image: x}]}}}]}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: 2, template: {gangPolicy: {minRoleReplicas: {decode: 2}}, roles: [{name: decode, replicas: 2, workerReplicas: 0, entryTemplate: {spec: {containers: [{name: c, image: x}]}}}]}}}`
///
/// MS-16: a gang minimum is not negative.
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: 2, template: {gangPolicy: {minRoleReplicas: {decode: -1}}, roles: [{name: decode, replicas: 2, workerReplicas: 0, entryTemplate: {spec: {containers: [{name: c, image: x}]}}}]}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: 2, template: {gangPolicy: {minRoleReplicas: {decode: 0}}, roles: [{name: decode, replicas: 2, workerReplicas: 0, entryTemplate: {spec: {containers: [{name: c, image: x}]}}}]}}}`
fn ms_14_16_gang(spec: &ModelServingSpec, errs: &mut ErrorList) {
    let Some(mins) = spec
        .template
        .gang_policy
        .as_ref()
        .and_then(|g| g.min_role_replicas.as_ref())
    else {
        return;
    };
    let path = Path::new("spec")
        .child("template")
        .child("gangPolicy")
        .child("minRoleReplicas");
    let by_name: BTreeMap<&str, &Role> = roles(spec).iter().map(|r| (r.name.as_str(), r)).collect();
    for (name, &min) in mins {
        let Some(role) = by_name.get(name.as_str()) else {
            errs.push(FieldError::invalid(
                "MS-14",
                path.key(name),
                name.as_str(),
                format!("role {name} does not exist in template.roles"),
            ));
            continue;
        };
        let replicas = role.replicas.unwrap_or(1);
        if min > replicas {
            errs.push(FieldError::invalid(
                "MS-15",
                path.key(name),
                min,
                format!(
                    "minRoleReplicas ({min}) for role {name} cannot exceed replicas ({replicas})"
                ),
            ));
        }
        if min < 0 {
            errs.push(FieldError::invalid(
                "MS-16",
                path.key(name),
                min,
                format!("minRoleReplicas for role {name} must be non-negative"),
            ));
        }
    }
}

/// MS-17, MS-18: worker replicas are not negative, and workers need a template.
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: 1, template: {roles: [{name: decode, replicas: 1, workerReplicas: -1, entryTemplate: {spec: {containers: [{name: c, image: x}]}}, workerTemplate: {spec: {containers: [{name: w, image: x}]}}}]}}}`
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: 1, template: {roles: [{name: decode, replicas: 1, workerReplicas: 1, entryTemplate: {spec: {containers: [{name: c, image: x}]}}}]}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: 1, template: {roles: [{name: decode, replicas: 1, workerReplicas: 1, entryTemplate: {spec: {containers: [{name: c, image: x}]}}, workerTemplate: {spec: {containers: [{name: w, image: x}]}}}]}}}`
fn ms_17_18_workers(spec: &ModelServingSpec, errs: &mut ErrorList) {
    for (i, role) in roles(spec).iter().enumerate() {
        if role.worker_replicas < 0 {
            errs.push(FieldError::invalid(
                "MS-17",
                roles_path().index(i).child("workerReplicas"),
                role.worker_replicas,
                "workerReplicas must be a non-negative integer",
            ));
        }
        if role.worker_replicas > 0 && role.worker_template.is_none() {
            errs.push(FieldError::required(
                "MS-18",
                roles_path().index(i).child("workerTemplate"),
                "workerTemplate is required when workerReplicas is greater than 0",
            ));
        }
    }
}

/// MS-19: after defaults (RoleRecreate, ServingGroupRollingUpdate), recreating whole groups does
/// not go with rolling roles one by one.
///
/// Refused: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: 2, recoveryPolicy: ServingGroupRecreate, rolloutStrategy: {type: RoleRollingUpdate}, template: {roles: [{name: decode, replicas: 2, workerReplicas: 0, entryTemplate: {spec: {containers: [{name: c, image: x}]}}}]}}}`
///
/// Admitted: `{apiVersion: workload.serving.volcano.sh/v1alpha1, kind: ModelServing, metadata: {name: s}, spec: {replicas: 2, recoveryPolicy: ServingGroupRecreate, rolloutStrategy: {type: ServingGroupRollingUpdate}, template: {roles: [{name: decode, replicas: 2, workerReplicas: 0, entryTemplate: {spec: {containers: [{name: c, image: x}]}}}]}}}`
fn ms_19_recovery_vs_rollout(spec: &ModelServingSpec, errs: &mut ErrorList) {
    let recovery = if spec.recovery_policy.is_empty() {
        ROLE_RECREATE
    } else {
        spec.recovery_policy.as_str()
    };
    let rollout = match &spec.rollout_strategy {
        Some(s) if !s.type_.is_empty() => s.type_.as_str(),
        _ => GROUP_ROLLING_UPDATE,
    };
    if recovery == GROUP_RECREATE && rollout == ROLE_ROLLING_UPDATE {
        errs.push(FieldError::invalid(
            "MS-19",
            Path::new("spec").child("rolloutStrategy").child("type"),
            BadValue::json_str(rollout),
            format!(
                "incompatible recoveryPolicy and rolloutStrategy.type after applying defaults: \
                 recoveryPolicy={recovery}, rolloutStrategy.type={rollout}; valid pairs: \
                 ({GROUP_RECREATE},{GROUP_ROLLING_UPDATE}) or ({ROLE_RECREATE},{ROLE_ROLLING_UPDATE})"
            ),
        ));
    }
}

/// Every ModelServing rule, in upstream's order.
pub fn validate_serving(ms: &ServingObj) -> ErrorList {
    let mut errs = ErrorList::new();
    let spec = &ms.spec;
    ms_1_generated_names(ms, &mut errs);
    ms_2_role_names(spec, &mut errs);
    ms_3_4_images(spec, &mut errs);
    ms_5_7_replicas(spec, &mut errs);
    ms_8_10_rolling_update(spec, &mut errs);
    ms_11_13_role_max_unavailable(spec, &mut errs);
    ms_14_16_gang(spec, &mut errs);
    ms_17_18_workers(spec, &mut errs);
    ms_19_recovery_vs_rollout(spec, &mut errs);
    errs
}

/// The quantities Go parses while decoding a ModelServing (the pod templates' containers),
/// refused as upstream's decoder refuses them.
fn check_quantities(ms: &ServingObj) -> Result<(), String> {
    use admission_kit::compat::resources::check_pod_spec;
    for (i, role) in roles(&ms.spec).iter().enumerate() {
        let templates = [
            ("entryTemplate", Some(&role.entry_template)),
            ("workerTemplate", role.worker_template.as_ref()),
        ];
        for (name, t) in templates {
            if let Some(spec) = t.and_then(|t| t.spec.as_ref()) {
                check_pod_spec(&format!("spec.template.roles[{i}].{name}.spec"), spec)
                    .map_err(|e| e.to_string())?;
            }
        }
    }
    Ok(())
}

/// `/validate-workload-ai-v1alpha1-modelserving`.
pub struct ServingValidator;

impl Validator for ServingValidator {
    type Object = ServingObj;

    fn reads_old_object(&self) -> bool {
        false
    }

    fn check_decoded(&self, ms: &ServingObj) -> Result<(), String> {
        check_quantities(ms)
    }

    fn validate(&self, req: &Request<ServingObj>, _: &Context) -> Verdict {
        validate_serving(&req.object).into()
    }

    fn denial(&self, _: &Request<ServingObj>, errors: &[FieldError]) -> Status {
        denial(errors)
    }
}
