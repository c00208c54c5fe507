//! WQ through the validator, in-process: the cluster state's quotas and the usage of their
//! `child-request` annotation.

use std::sync::Arc;

use admission_kit::cluster::state::StaticState;
use admission_kit::review::envelope::{Gvk, Gvr};
use serde_json::json;

use super::*;

/// A cluster state and the validator under some flags.
struct Cx {
    ctx: Context,
    validator: WorkloadValidator,
}

fn validator(flags: &[&str]) -> WorkloadValidator {
    let options = crate::options::Options::parse(flags.iter().copied()).unwrap();
    WorkloadValidator(Arc::new(crate::Service::new(options)))
}

fn ctx_with(used_gpu: &str, flags: &[&str]) -> Cx {
    let mut s = StaticState::default();
    s.add_value(json!({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota", "metadata": {"name": "team-a", "namespace": "team-a",
        "annotations": {"quota.scheduling.koordinator.sh/child-request":
            format!("{{\"nvidia.com/gpu\":\"{used_gpu}\"}}")}},
        "spec": {"max": {"nvidia.com/gpu": "32"}}}))
        .unwrap();
    let app = crate::app();
    Cx {
        ctx: Context::new(Arc::new(s)).with_gates(Arc::new(app.gates.clone())),
        validator: validator(flags),
    }
}

fn ctx(used_gpu: &str) -> Cx {
    ctx_with(used_gpu, &[])
}

fn template(gpu: u32) -> Value {
    json!({"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "main", "image": "i",
        "resources": {"requests": {"nvidia.com/gpu": gpu.to_string()},
                      "limits": {"nvidia.com/gpu": gpu.to_string()}}}]}})
}

fn pytorch(workers: u32) -> Value {
    json!({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"name": "llama-ft", "namespace": "team-a"},
        "spec": {"pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": template(8)},
            "Worker": {"replicas": workers, "template": template(8)}}}})
}

fn deployment(replicas: u32) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "team-a", "uid": "uid-web"},
        "spec": {"replicas": replicas, "template": template(1)}})
}

fn review(object: Value, old: Option<Value>) -> Request<Value> {
    let (group, version) = match object["apiVersion"]
        .as_str()
        .unwrap_or_default()
        .split_once('/')
    {
        Some((g, v)) => (g.to_owned(), v.to_owned()),
        None => (String::new(), "v1".to_owned()),
    };
    Request {
        uid: "u".into(),
        kind: Gvk {
            group,
            version,
            kind: object["kind"].as_str().unwrap_or_default().into(),
        },
        resource: Gvr::default(),
        sub_resource: None,
        name: object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .into(),
        namespace: Some("team-a".into()),
        operation: if old.is_some() {
            Operation::Update
        } else {
            Operation::Create
        },
        user_info: Default::default(),
        dry_run: false,
        object,
        old_object: old,
    }
}

fn run(c: &Cx, object: Value, old: Option<Value>) -> Verdict {
    c.validator.validate(&review(object, old), &c.ctx)
}

fn refusal(v: &Verdict) -> Option<(&'static str, String)> {
    v.refusal
        .as_ref()
        .map(|(rule, s)| (*rule, s.message.clone()))
}

#[test]
fn wq_2_a_job_that_can_never_fit_is_refused_with_the_arithmetic() {
    let v = run(&ctx("0"), pytorch(7), None);
    assert_eq!(
        refusal(&v),
        Some((
            "WQ-2",
            "PyTorchJob team-a/llama-ft needs nvidia.com/gpu=64 (Master 1×8, Worker 7×8); quota team-a allows at most nvidia.com/gpu=32".into()
        ))
    );
    assert!(run(&ctx("0"), pytorch(3), None).allowed());
}

#[test]
fn wq_3_a_job_above_what_is_free_now_is_admitted_with_a_warning_or_refused_as_a_gang() {
    let v = run(&ctx("24"), pytorch(1), None);
    assert!(v.allowed());
    assert_eq!(
        v.warnings,
        [
            "WQ-3: PyTorchJob team-a/llama-ft needs nvidia.com/gpu=16 (Master 1×8, Worker 1×8); quota team-a has nvidia.com/gpu=8 free now: some of its pods will be refused until quota frees up"
        ]
    );
    let gang = ctx_with("24", &["--workload-gang-kinds=kubeflow.org/PyTorchJob"]);
    assert_eq!(
        refusal(&run(&gang, pytorch(1), None)).map(|r| r.0),
        Some("WQ-3")
    );
    assert!(run(&ctx("16"), pytorch(1), None).warnings.is_empty());
}

#[test]
fn wq_4_an_update_checks_only_an_increase() {
    let v = run(&ctx("2"), deployment(40), Some(deployment(2)));
    assert_eq!(
        refusal(&v),
        Some((
            "WQ-2",
            "Deployment team-a/web needs nvidia.com/gpu=40 (40×1) (nvidia.com/gpu=38 more than now); quota team-a allows at most nvidia.com/gpu=32".into()
        ))
    );
    let up = run(&ctx("2"), deployment(3), Some(deployment(2)));
    assert!(up.allowed() && up.warnings.is_empty(), "{up:?}");
    // Full quota: a scale-down, or an unchanged request, is never held back.
    assert!(
        run(&ctx("32"), deployment(1), Some(deployment(2)))
            .warnings
            .is_empty()
    );
    assert!(
        run(&ctx("32"), deployment(2), Some(deployment(2)))
            .warnings
            .is_empty()
    );
}

#[test]
fn wq_1_bad_input_is_refused_naming_the_field() {
    let mut d = deployment(1);
    d["spec"]["template"]["spec"]["containers"] = json!([]);
    assert_eq!(
        refusal(&run(&ctx("0"), d, None)),
        Some((
            "WQ-1",
            "Deployment team-a/web: spec.template.spec.containers: Required value".into()
        ))
    );
    let mut d = deployment(1);
    d["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] =
        json!("lots");
    let (rule, text) = refusal(&run(&ctx("0"), d, None)).unwrap();
    assert_eq!(rule, "WQ-1");
    assert!(
        text.contains("spec.template.spec.containers[0].resources.requests"),
        "{text}"
    );
    let mut j = pytorch(1);
    j["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = json!(-1);
    assert_eq!(
        refusal(&run(&ctx("0"), j, None)),
        Some((
            "WQ-1",
            "PyTorchJob team-a/llama-ft: spec.pytorchReplicaSpecs.Worker.replicas: Invalid value: -1: must be greater than or equal to 0".into()
        ))
    );
}

#[test]
fn wq_5_pods_of_a_missing_quota_are_warned_of() {
    let mut d = deployment(1);
    d["spec"]["template"]["metadata"]["labels"]["quota.scheduling.koordinator.sh/name"] =
        json!("nope");
    let v = run(&ctx("0"), d, None);
    assert!(v.allowed());
    assert_eq!(
        v.warnings,
        [
            "WQ-5: Deployment team-a/web: its pods will be refused by PV-4: elastic quota nope not found"
        ]
    );
}

#[test]
fn wq_6_pod_rules_run_on_each_template() {
    let mut d = deployment(1);
    d["spec"]["template"]["metadata"]["annotations"] =
        json!({"scheduling.koordinator.sh/reserve-pod": "true"});
    let v = run(&ctx("0"), d.clone(), None);
    assert!(v.allowed());
    assert_eq!(v.warnings.len(), 1);
    assert!(
        v.warnings[0].starts_with(
            "WQ-6: Deployment team-a/web: pods of spec.template would be refused by PV-1:"
        ),
        "{:?}",
        v.warnings
    );
    let deny = ctx_with("0", &["--workload-template-rules-deny-kinds=*"]);
    assert_eq!(refusal(&run(&deny, d, None)).map(|r| r.0), Some("WQ-6"));
}

#[test]
fn a_kind_nobody_described_passes_untouched() {
    let mut o = deployment(100);
    o["apiVersion"] = json!("example.com/v1");
    assert!(run(&ctx("0"), o, None).warnings.is_empty());
}

/// `--workload-kinds-file`: read at first use, again when it changes; a bad change keeps the
/// kinds read before; a bad file at start stops the service with the reason.
#[test]
fn the_mapping_is_reread_on_change_and_a_bad_change_keeps_the_old_kinds() {
    let dir = std::env::temp_dir().join(format!("wq-mapping-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("kinds.yaml");
    let write = |text: &str, secs: u64| {
        std::fs::write(&path, text).unwrap();
        let f = std::fs::File::options().write(true).open(&path).unwrap();
        // Distinct modification times, whatever the file system's resolution.
        f.set_modified(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs))
            .unwrap();
    };
    let kind = |k: &str| {
        format!(
            "kinds:\n- {{group: example.com, version: v1, kind: {k}, resource: {}s, groups: [{{template: /spec/template}}]}}\n",
            k.to_lowercase()
        )
    };
    write(&kind("First"), 1_000);
    let flag = format!("--workload-kinds-file={}", path.display());
    let c = ctx_with("0", &[flag.as_str()]);
    let options = crate::options::Options::parse([flag.as_str()]).unwrap();
    let registered = mapped_endpoints(&options).unwrap();
    assert_eq!(
        (
            registered[0].path.as_str(),
            registered[0].name.as_deref(),
            registered[0].resource.as_str()
        ),
        (
            "/validate-workload",
            Some("validate-workload-example-com-v1-firsts"),
            "firsts"
        )
    );
    let names = |c: &Cx| {
        mapped(&c.validator.0)
            .iter()
            .map(|k| k.kind.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&c), ["First"]);
    write(&kind("Second"), 2_000);
    assert_eq!(names(&c), ["Second"]);
    write("kinds: [", 3_000);
    assert_eq!(
        names(&c),
        ["Second"],
        "a bad change keeps the kinds read before"
    );
    let at_start = crate::app_with(options).map(|_| ());
    assert!(
        at_start.unwrap_err().contains("kinds.yaml"),
        "a bad file stops the service"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// WQ-4 on the scale subresource (`kubectl scale`, an HPA): the Deployment is read as it is and
/// judged at the new count; a scale-down is not judged.
#[test]
fn wq_4_a_scale_up_through_the_scale_subresource_is_judged_on_the_workload() {
    let mut s = StaticState::default();
    s.add_value(json!({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota", "metadata": {"name": "team-a", "namespace": "team-a"},
        "spec": {"max": {"nvidia.com/gpu": "32"}}}))
        .unwrap();
    s.add_value(deployment(2)).unwrap();
    let app = crate::app();
    let c = Context::new(Arc::new(s)).with_gates(Arc::new(app.gates.clone()));
    let validator = validator(&[]);
    let scale_of = |n: u32, uid: &str| {
        json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
            "metadata": {"name": "web", "namespace": "team-a", "uid": uid}, "spec": {"replicas": n}})
    };
    let scale = |n: u32| scale_of(n, "uid-web");
    let review = |to: u32, from: u32| Request {
        kind: Gvk {
            group: "autoscaling".into(),
            version: "v1".into(),
            kind: "Scale".into(),
        },
        resource: Gvr {
            group: "apps".into(),
            version: "v1".into(),
            resource: "deployments".into(),
        },
        sub_resource: Some("scale".into()),
        ..super::tests::review(scale(to), Some(scale(from)))
    };
    let v = validator.validate(&review(40, 2), &c);
    assert_eq!(
        refusal(&v),
        Some((
            "WQ-2",
            "Deployment team-a/web needs nvidia.com/gpu=40 (40×1) (nvidia.com/gpu=38 more than now); quota team-a allows at most nvidia.com/gpu=32".into()
        ))
    );
    assert!(validator.validate(&review(3, 2), &c).allowed());
    // A review that does not carry the workload's uid (forged, naming another tenant's
    // Deployment) is not judged: nothing of the Deployment is read back in its answer.
    let forged = Request {
        object: scale_of(40, "guessed"),
        old_object: Some(scale_of(2, "guessed")),
        ..review(40, 2)
    };
    let v = validator.validate(&forged, &c);
    assert!(v.allowed() && v.warnings.is_empty(), "{v:?}");
    assert!(validator.validate(&review(1, 2), &c).warnings.is_empty());
}

#[test]
fn wq_7_a_rollout_that_cannot_start_in_a_full_quota_is_warned_of() {
    let image = |replicas: u32, image: &str| {
        let mut d = deployment(replicas);
        d["spec"]["template"]["spec"]["containers"][0]["image"] = json!(image);
        d
    };
    let v = run(&ctx("32"), image(3, "i:2"), Some(image(3, "i:1")));
    assert!(v.allowed());
    assert_eq!(
        v.warnings,
        [
            "WQ-7: Deployment team-a/web: its rolling update cannot start: a new Pod needs nvidia.com/gpu=1 and quota team-a has nvidia.com/gpu=0 free now, and maxUnavailable 25% of 3 replicas is 0, so no old Pod goes before a new one runs (maxSurge 25% is 1); it waits until quota frees up. spec.strategy.rollingUpdate.maxUnavailable of 1 or more (or spec.strategy.type Recreate) lets it complete"
        ]
    );
    assert_eq!(v.applied, ["WQ-7"]);
    // Room for one new Pod, or an old Pod that goes first (25% of 4 is 1): no warning.
    assert!(
        run(&ctx("31"), image(3, "i:2"), Some(image(3, "i:1")))
            .warnings
            .is_empty()
    );
    assert!(
        run(&ctx("32"), image(4, "i:2"), Some(image(4, "i:1")))
            .warnings
            .is_empty()
    );
}
