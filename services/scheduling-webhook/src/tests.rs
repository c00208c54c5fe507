//! Rule tests by spec id (fixture files cover the full request path; these pin each rule).

use std::sync::Arc;

use admission_kit::cluster::state::StaticState;
use admission_kit::{Context, Mutator, Operation, Validator};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use crate::types::ElasticQuota;

fn ctx(state: Vec<Value>) -> Context {
    let mut s = StaticState::default();
    for o in state {
        s.add_value(o).unwrap();
    }
    let app = crate::app();
    Context::new(Arc::new(s)).with_gates(Arc::new(app.gates.clone()))
}

/// The service at its default options.
fn svc() -> Arc<crate::Service> {
    Arc::new(crate::Service::default())
}

/// The service under these flags.
fn svc_with(flags: &[&str]) -> Arc<crate::Service> {
    Arc::new(crate::Service::new(
        crate::options::Options::parse(flags.iter().copied()).unwrap(),
    ))
}

use admission_testing::request as req;

fn pod(labels: Value, spec: Value) -> Value {
    json!({"metadata": {"name": "p", "namespace": "ns", "labels": labels}, "spec": spec})
}

fn containers(requests: Value) -> Value {
    json!({"containers": [{"name": "main", "resources": {"requests": requests, "limits": requests}}]})
}

fn validate(p: Value, old: Option<Value>, state: Vec<Value>) -> Option<String> {
    let op = if old.is_some() {
        Operation::Update
    } else {
        Operation::Create
    };
    let v = crate::pod_validate::PodValidator(svc())
        .validate(&req::<Pod>("pods", op, p, old), &ctx(state));
    v.refusal.map(|(rule, s)| format!("{rule} {}", s.message))
}

#[test]
fn pv_1_reserve_pod_annotation() {
    let mut p = pod(json!({}), containers(json!({})));
    p["metadata"]["annotations"] = json!({"scheduling.koordinator.sh/reserve-pod": "x"});
    assert_eq!(
        validate(p, None, vec![]).unwrap(),
        "PV-1 annotations.scheduling.koordinator.sh/reserve-pod: Forbidden: cannot set in annotations"
    );
}

#[test]
fn pv_2_batch_resources_need_be_and_be_needs_a_class() {
    let e = validate(
        pod(
            json!({}),
            containers(json!({"kubernetes.io/batch-cpu": "1000"})),
        ),
        None,
        vec![],
    )
    .unwrap();
    assert!(
        e.contains("must specify koordinator QoS BE with koordinator colocation resources"),
        "{e}"
    );
    let e = validate(
        pod(
            json!({"koordinator.sh/qosClass": "BE"}),
            containers(json!({})),
        ),
        None,
        vec![],
    )
    .unwrap();
    assert!(e.ends_with("Pod: Forbidden: koordinator.sh/qosClass=BE and priorityClass= cannot be used in combination"), "{e}");
    assert!(validate(pod(json!({"koordinator.sh/qosClass": "BE", "koordinator.sh/priority-class": "koord-batch"}), containers(json!({}))), None, vec![]).is_none());
}

#[test]
fn pv_2_lsr_needs_whole_cpus_and_update_immutability() {
    let lsr = |cpu: &str| {
        pod(
            json!({"koordinator.sh/qosClass": "LSR", "koordinator.sh/priority-class": "koord-prod"}),
            containers(json!({"cpu": cpu})),
        )
    };
    assert!(validate(lsr("2"), None, vec![]).is_none());
    assert!(
        validate(lsr("1500m"), None, vec![])
            .unwrap()
            .contains("Invalid value: \"1500m\": the requested CPUs of LSR Pod must be integer")
    );
    let old = pod(
        json!({"koordinator.sh/qosClass": "LS"}),
        containers(json!({})),
    );
    let new = pod(
        json!({"koordinator.sh/qosClass": "LSE"}),
        containers(json!({"cpu": "1"})),
    );
    assert!(
        validate(new, Some(old), vec![])
            .unwrap()
            .contains("labels.koordinator.sh/qosClass: Invalid value: \"LSE\": field is immutable")
    );
}

#[test]
fn pv_3_preemptible_label_and_parent_quota() {
    let old = pod(
        json!({"quota.scheduling.koordinator.sh/preemptible": "true"}),
        containers(json!({})),
    );
    let new = pod(json!({}), containers(json!({})));
    assert_eq!(
        validate(new, Some(old), vec![]).unwrap(),
        "PV-3 Preemptible label is forbidden modify now."
    );
    let parent = json!({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
        "metadata": {"name": "pq", "namespace": "ns", "labels": {"quota.scheduling.koordinator.sh/is-parent": "true"}}, "spec": {"max": {"cpu": "4"}}});
    let e = validate(
        pod(
            json!({"quota.scheduling.koordinator.sh/name": "pq"}),
            containers(json!({})),
        ),
        None,
        vec![parent],
    )
    .unwrap();
    assert_eq!(
        e,
        "PV-3 pod can not be linked to a parentQuotaGroup,quota:pq, pod:p"
    );
}

#[test]
fn pv_4_quota_exceeded_lists_only_exceeded_keys() {
    let q = json!({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
        "metadata": {"name": "q", "namespace": "team", "annotations": {"quota.scheduling.koordinator.sh/child-request": "{\"cpu\":\"3\",\"memory\":\"1Gi\"}"}},
        "spec": {"max": {"cpu": "4", "memory": "8Gi"}}});
    let e = validate(
        pod(
            json!({"quota.scheduling.koordinator.sh/name": "q"}),
            containers(json!({"cpu": "2", "memory": "1Gi"})),
        ),
        None,
        vec![q],
    )
    .unwrap();
    assert_eq!(
        e,
        "PV-4 exceeded quota: team/q, requested: cpu=2, used: cpu=3, limited: cpu=4"
    );
}

/// S-FIX-1: exact amounts in-process too; what cannot be counted is refused, named.
#[test]
fn pv_4_amounts_are_exact_and_never_clamped() {
    let q = json!({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
        "metadata": {"name": "q", "namespace": "team", "annotations": {"quota.scheduling.koordinator.sh/child-request": "{\"cpu\":\"9901\",\"memory\":\"9Pi\"}"}},
        "spec": {"max": {"cpu": "10k", "memory": "10Pi"}}});
    let check = |requests: Value| {
        validate(
            pod(
                json!({"quota.scheduling.koordinator.sh/name": "q"}),
                containers(requests),
            ),
            None,
            vec![q.clone()],
        )
    };
    assert_eq!(
        check(json!({"cpu": "9223372036854775"})).unwrap(),
        "PV-4 exceeded quota: team/q, requested: cpu=9223372036854775, used: cpu=9901, limited: cpu=10k"
    );
    // Petabytes: thousandths beyond 2^63, still exact (1Pi fits, 1Pi + 1 does not).
    assert_eq!(check(json!({"memory": "1Pi"})), None);
    assert_eq!(
        check(json!({"memory": "1125899906842625"})).unwrap(),
        "PV-4 exceeded quota: team/q, requested: memory=1125899906842625, used: memory=9Pi, limited: memory=10Pi"
    );
    let e = check(json!({"cpu": "1e40"})).unwrap();
    assert!(e.contains("cpu=1e40 is too large to be counted"), "{e}");
}

/// Sub-milli requests add exactly, as upstream's `Quantity.Add`: three containers of
/// `500u` cpu are `1500u` (they fit a `2m` quota that rounded thousandths, 3m, would exceed), and
/// a refusal prints the exact amounts.
#[test]
fn pv_4_adds_sub_milli_amounts_exactly() {
    let q = |used: &str| {
        json!({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
        "metadata": {"name": "q", "namespace": "team", "annotations": {"quota.scheduling.koordinator.sh/child-request": format!("{{\"cpu\":\"{used}\"}}")}},
        "spec": {"max": {"cpu": "2m"}}})
    };
    let three = json!({"containers": [
        {"name": "a", "resources": {"requests": {"cpu": "500u"}}},
        {"name": "b", "resources": {"requests": {"cpu": "500u"}}},
        {"name": "c", "resources": {"requests": {"cpu": "500u"}}}
    ]});
    let check = |used: &str| {
        validate(
            pod(
                json!({"quota.scheduling.koordinator.sh/name": "q"}),
                three.clone(),
            ),
            None,
            vec![q(used)],
        )
    };
    assert_eq!(check("0"), None);
    assert_eq!(check("500u"), None, "1500u + 500u = 2m, not above");
    assert_eq!(
        check("501u").unwrap(),
        "PV-4 exceeded quota: team/q, requested: cpu=1500u, used: cpu=501u, limited: cpu=2m"
    );
}

#[test]
fn pv_5_gpu_rules() {
    let e = validate(
        pod(json!({}), containers(json!({"koordinator.sh/gpu": "150"}))),
        None,
        vec![],
    )
    .unwrap();
    assert!(
        e.contains("Invalid value: \"150\": the requested GPU must be percentage of 100"),
        "{e}"
    );
    let e = validate(
        pod(
            json!({}),
            containers(json!({"koordinator.sh/gpu.shared": "2", "koordinator.sh/gpu-core": "100"})),
        ),
        None,
        vec![],
    )
    .unwrap();
    assert!(
        e.contains("GPU memory and GPU memory ratio all is zero"),
        "{e}"
    );
}

#[test]
fn pv_6_enhanced_validator_required_labels() {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "pod-enhanced-validator-config", "namespace": "koordinator-system"},
        "data": {"enable": "true", "rules": "[{\"name\":\"r\",\"requiredLabels\":[\"team\",\"cost\"]}]"}});
    let e = validate(
        pod(json!({}), containers(json!({}))),
        None,
        vec![cm.clone()],
    )
    .unwrap();
    assert_eq!(e, "PV-6 required labels are missing: [team cost]");
    assert!(
        validate(
            pod(
                json!({"pod.koordinator.sh/skip-enhanced-validation": "true"}),
                containers(json!({}))
            ),
            None,
            vec![cm]
        )
        .is_none()
    );
}

fn mutate(p: Value, state: Vec<Value>) -> (admission_kit::Verdict, Pod) {
    let r = req::<Pod>("pods", Operation::Create, p, None);
    let mut obj = r.object.clone();
    let v = crate::pod_mutate::PodMutator(svc()).mutate(&r, &mut obj, &ctx(state));
    (v, obj)
}

#[test]
fn pm_1_profile_and_pm_1_7_batch_translation() {
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}});
    let profile = json!({"apiVersion": "config.koordinator.sh/v1alpha1", "kind": "ClusterColocationProfile", "metadata": {"name": "batch"},
        "spec": {"selector": {"matchLabels": {"app": "x"}}, "qosClass": "BE", "labels": {"koordinator.sh/priority-class": "koord-batch"}}});
    let (v, p) = mutate(
        pod(
            json!({"app": "x"}),
            containers(json!({"cpu": "500m", "memory": "1024Mi"})),
        ),
        vec![ns, profile],
    );
    assert!(v.applied.contains(&"PM-1"));
    let req = p.spec.unwrap().containers[0]
        .resources
        .clone()
        .unwrap()
        .requests
        .unwrap();
    assert_eq!(req["kubernetes.io/batch-cpu"].0, "500");
    assert_eq!(req["kubernetes.io/batch-memory"].0, "1Gi");
    assert!(!req.contains_key("cpu"));
}

#[test]
fn pm_2_extended_resource_spec_annotation() {
    let (v, p) = mutate(
        pod(
            json!({}),
            containers(json!({"kubernetes.io/batch-cpu": "1000"})),
        ),
        vec![],
    );
    assert!(v.applied.contains(&"PM-2"));
    assert_eq!(
        p.metadata.annotations.unwrap()["node.koordinator.sh/extended-resource-spec"],
        "{\"containers\":{\"main\":{\"limits\":{\"kubernetes.io/batch-cpu\":\"1k\"},\"requests\":{\"kubernetes.io/batch-cpu\":\"1k\"}}}}"
    );
}

/// PM-4 on a pod whose one container requests `gpu` of `koordinator.sh/gpu`: the container's
/// requests after the mutation, and its gpu-core, gpu-memory-ratio and gpu.shared.
fn pm_4_split(gpu: &str) -> (admission_kit::compat::resources::ResourceList, [String; 3]) {
    let (_, p) = mutate(
        pod(json!({}), containers(json!({"koordinator.sh/gpu": gpu}))),
        vec![],
    );
    let req = p
        .spec
        .and_then(|s| s.containers.into_iter().next())
        .and_then(|c| c.resources)
        .and_then(|r| r.requests)
        .unwrap_or_default();
    let of = |k: &str| req.get(k).map(|q| q.0.clone()).unwrap_or_default();
    let split = [
        of("koordinator.sh/gpu-core"),
        of("koordinator.sh/gpu-memory-ratio"),
        of("koordinator.sh/gpu.shared"),
    ];
    (req, split)
}

#[test]
fn pm_4_gpu_split_and_shared() {
    let (req, split) = pm_4_split("200");
    assert_eq!(split, ["200", "200", "2"]);
    assert!(!req.contains_key("koordinator.sh/gpu"));
}

fn quota(name: &str, labels: Value, spec: Value) -> Value {
    json!({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota", "metadata": {"name": name, "namespace": "ns", "labels": labels}, "spec": spec})
}

#[test]
fn qm_2_to_4_defaults() {
    let r = req::<ElasticQuota>(
        "elasticquotas",
        Operation::Create,
        quota(
            "q",
            json!({}),
            json!({"max": {"cpu": "1000", "memory": "1024Mi"}}),
        ),
        None,
    );
    let mut obj = r.object.clone();
    let v = crate::quota::QuotaDefaulter(svc()).mutate(&r, &mut obj, &ctx(vec![]));
    assert_eq!(v.applied, ["QM-2", "QM-4"]);
    assert_eq!(
        obj.metadata.labels.unwrap()["quota.scheduling.koordinator.sh/parent"],
        "koordinator-root-quota"
    );
    assert_eq!(
        obj.metadata.annotations.unwrap()["quota.scheduling.koordinator.sh/shared-weight"],
        "{\"cpu\":\"1k\",\"memory\":\"1Gi\"}"
    );
    let r = req::<ElasticQuota>(
        "elasticquotas",
        Operation::Create,
        quota(
            "c",
            json!({"quota.scheduling.koordinator.sh/parent": "nope"}),
            json!({}),
        ),
        None,
    );
    let mut obj = r.object.clone();
    let v = crate::quota::QuotaDefaulter(svc()).mutate(&r, &mut obj, &ctx(vec![]));
    assert_eq!(
        v.refusal.unwrap().1.message,
        "fill quota c failed, parent not exist"
    );
}

fn qv(op: Operation, obj: Value, old: Option<Value>, state: Vec<Value>) -> Option<String> {
    let v = crate::quota::QuotaValidator(svc()).validate(
        &req::<ElasticQuota>("elasticquotas", op, obj, old),
        &ctx(state),
    );
    v.refusal.map(|(_, s)| s.message)
}

#[test]
fn qv_s_self_checks() {
    assert_eq!(
        qv(
            Operation::Create,
            quota("q", json!({}), json!({"max": {"cpu": "-1"}})),
            None,
            vec![]
        )
        .unwrap(),
        "q quota.Spec.Max's value < 0, in dimensions :[cpu]"
    );
    assert_eq!(
        qv(
            Operation::Create,
            quota(
                "q",
                json!({}),
                json!({"max": {"cpu": "1"}, "min": {"cpu": "2"}})
            ),
            None,
            vec![]
        )
        .unwrap(),
        "resourceKey cpu of quota q min 2 > max 1"
    );
}

#[test]
fn qv_c_t_d_tree_rules() {
    let parent = quota(
        "p",
        json!({"quota.scheduling.koordinator.sh/is-parent": "true"}),
        json!({"max": {"cpu": "10"}, "min": {"cpu": "4"}}),
    );
    let child = |min: &str| {
        quota(
            "c",
            json!({"quota.scheduling.koordinator.sh/parent": "p"}),
            json!({"max": {"cpu": "10"}, "min": {"cpu": min}}),
        )
    };
    assert!(qv(Operation::Create, child("3"), None, vec![parent.clone()]).is_none());
    assert_eq!(
        qv(Operation::Create, child("5"), None, vec![parent.clone()]).unwrap(),
        "checkMinQuotaSum all brothers' MinQuota > parent MinQuota, parent: p"
    );
    assert_eq!(
        qv(
            Operation::Create,
            child("3"),
            None,
            vec![parent.clone(), child("3")]
        )
        .unwrap(),
        "AddQuota quota already exist:c"
    );
    assert_eq!(
        qv(
            Operation::Delete,
            parent.clone(),
            None,
            vec![parent, child("3")]
        )
        .unwrap(),
        "delete quota failed, quota p has 1 child quotas"
    );
    assert_eq!(
        qv(
            Operation::Delete,
            quota("koordinator-default-quota", json!({}), json!({})),
            None,
            vec![]
        )
        .unwrap(),
        "can not delete quotaGroup :koordinator-default-quota"
    );
}

#[test]
fn priority_bands_and_effective_class() {
    let p = |labels: Value, priority: Option<i32>| -> Pod {
        let mut v = pod(labels, json!({"containers": [{"name": "m"}]}));
        if let Some(pr) = priority {
            v["spec"]["priority"] = json!(pr);
        }
        serde_json::from_value(v).unwrap()
    };
    assert_eq!(
        crate::raw_priority_class(&p(json!({}), Some(5500))),
        Some("koord-batch")
    );
    assert_eq!(crate::raw_priority_class(&p(json!({}), Some(6000))), None);
    assert_eq!(
        crate::raw_priority_class(&p(
            json!({"koordinator.sh/priority-class": "bogus"}),
            Some(9000)
        )),
        None,
        "an invalid label wins"
    );
    assert_eq!(
        crate::effective_priority_class(&p(json!({}), None)).as_deref(),
        Some("koord-batch"),
        "BestEffort → BE → batch"
    );
}

/// While quota-state cannot be asked: only pods no quota concerns pass without it.
#[test]
fn outage_admits_only_pods_no_quota_concerns() {
    let quota = |name: &str, ns: &str, namespaces: Option<&str>| {
        let mut q = json!({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": name, "namespace": ns}, "spec": {"max": {"cpu": "10"}}});
        if let Some(n) = namespaces {
            q["metadata"]["annotations"] = json!({"quota.scheduling.koordinator.sh/namespaces": n});
        }
        q
    };
    let c = ctx(vec![
        quota("team-a", "team-a", None),
        quota("shared", "infra", Some("[\"listed\"]")),
    ]);
    let pod = |labels: Value| -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p", "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}))
        .unwrap()
    };
    let s = svc();
    let no_quota = |p: &Pod, ns: &str| crate::quota::concerns_no_quota(&s, p, ns, &c);
    assert!(no_quota(&pod(json!({})), "plain"));
    assert!(
        !no_quota(&pod(json!({})), "team-a"),
        "QN-3: a quota named like the namespace"
    );
    assert!(
        !no_quota(&pod(json!({})), "listed"),
        "QN-4: a quota listing the namespace"
    );
    assert!(
        !no_quota(
            &pod(json!({"quota.scheduling.koordinator.sh/name": "team-a"})),
            "plain"
        ),
        "QN-1: a quota label"
    );
    assert!(
        no_quota(
            &pod(json!({"quota.scheduling.koordinator.sh/name": "koordinator-default-quota"})),
            "plain"
        ),
        "the default quota is never checked"
    );
}

/// In a fleet member the quotas live in the hub: while quota-state cannot be asked, a quota
/// label concerns the pod, and an unlabelled pod's namespace is what quota-state last said of it
/// (never said: concerned), whatever the member's own ElasticQuotas.
#[test]
fn a_fleet_member_scopes_outages_by_what_quota_state_said() {
    let s = svc_with(&["--quota-state-cluster=east"]);
    let c = ctx(vec![]);
    let pod = |labels: Value| -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p", "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}))
        .unwrap()
    };
    let no_quota = |p: &Pod, ns: &str| crate::quota::concerns_no_quota(&s, p, ns, &c);
    let labelled = pod(json!({"quota.scheduling.koordinator.sh/name": "team-a"}));
    assert!(
        !no_quota(&labelled, "fleet-plain"),
        "QN-1: a label names a hub quota"
    );
    assert!(
        !no_quota(&pod(json!({})), "fleet-never-asked"),
        "unknown: concerned"
    );
    crate::quota_client::remember_for_tests(&s.quota, "fleet-plain", false);
    crate::quota_client::remember_for_tests(&s.quota, "fleet-bound", true);
    assert!(no_quota(&pod(json!({})), "fleet-plain"));
    assert!(!no_quota(&pod(json!({})), "fleet-bound"));
    assert!(no_quota(
        &pod(json!({"quota.scheduling.koordinator.sh/name": "koordinator-default-quota"})),
        "fleet-bound"
    ));
}

/// Koordinator's §8 metrics, with its names and labels, after a pod, a quota and a binding.
#[test]
fn koordinator_metrics_are_recorded_with_upstream_names() {
    let p = pod(json!({}), containers(json!({"cpu": "1"})));
    crate::pod_validate::PodValidator(svc()).validate(
        &req::<Pod>("pods", Operation::Create, p.clone(), None),
        &ctx(vec![]),
    );
    let r = req::<Pod>("pods", Operation::Create, p, None);
    let mut obj = r.object.clone();
    crate::pod_mutate::PodMutator(svc()).mutate(&r, &mut obj, &ctx(vec![]));
    let r = req::<ElasticQuota>(
        "elasticquotas",
        Operation::Create,
        quota(
            "metrics-q",
            json!({}),
            json!({"max": {"cpu": "1000", "memory": "1Ki"}}),
        ),
        None,
    );
    let mut obj = r.object.clone();
    crate::quota::QuotaDefaulter(svc()).mutate(&r, &mut obj, &ctx(vec![]));
    // QM-5's gauge: once the quota exists, from the weights QM-4 defaulted onto it.
    let created = serde_json::to_value(&obj).unwrap();
    let weights =
        crate::quota::qm_5_created_shared_weight(&ctx(vec![created]), Some("ns"), "metrics-q")
            .unwrap();
    assert!(
        crate::quota::qm_5_created_shared_weight(&ctx(vec![]), Some("ns"), "metrics-q").is_none(),
        "no quota, no weights"
    );
    for (resource, units) in weights {
        admission_kit::server::metrics::koord::shared_weight("metrics-q", &resource, units);
    }
    let text = String::from_utf8(
        admission_kit::server::metrics::Metrics::new()
            .unwrap()
            .render(),
    )
    .unwrap();
    for want in [
        "koord_manager_webhook_webhook_duration_milliseconds_bucket{object_type=\"pod\",operation=\"CREATE\",plugin_name=\"ClusterReservation\",status=\"allowed\",webhook_type=\"validate\",le=\"0.001\"}",
        "plugin_name=\"EvaluateQuota\"",
        "plugin_name=\"MultiQuotaTree\",status=\"allowed\",webhook_type=\"mutate\"",
        "object_type=\"elasticquota\",operation=\"CREATE\",plugin_name=\"QuotaMetaChecker\"",
        "koord_manager_webhook_quota_shared_weight{elasticquota_name=\"metrics-q\",resource_name=\"cpu\"} 1000",
        "koord_manager_webhook_quota_shared_weight{elasticquota_name=\"metrics-q\",resource_name=\"memory\"} 1024",
    ] {
        assert!(text.contains(want), "missing {want}");
    }
    // 20 buckets from 0.001 ms, doubling, as upstream.
    assert!(text.contains("le=\"524.288\""));
}

/// Runs one CREATE review through the endpoint at `path` the way the server does, answering a
/// decode error as controller-runtime does.
fn answer(path: &str, resource: &str, object: Value, state: Vec<Value>) -> Value {
    let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "u-3", "operation": "CREATE", "name": object["metadata"]["name"],
                    "namespace": "ns", "kind": {"group": "", "version": "v1", "kind": "X"},
                    "resource": {"group": "", "version": "v1", "resource": resource},
                    "object": object}});
    admission_testing::fixtures::answer_in_process(&crate::app(), path, &body, &state).unwrap()
}

/// The object after applying an answer's patch.
fn patched(object: &Value, answer: &Value) -> Value {
    admission_testing::fixtures::apply_b64(object, answer["response"]["patch"].as_str()).unwrap()
}

const QM: &str = "/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota";
const FORMAT: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

#[test]
fn an_unparsable_quantity_fails_the_decode_with_code_400() {
    for (path, resource, object) in [
        (
            QM,
            "elasticquotas",
            quota("q", json!({}), json!({"max": {"cpu": "abc"}})),
        ),
        (
            "/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota",
            "elasticquotas",
            quota("q", json!({}), json!({"min": {"cpu": "0x10"}})),
        ),
        (
            "/mutate-pod",
            "pods",
            pod(json!({}), containers(json!({"cpu": ""}))),
        ),
        (
            "/mutate-reservation",
            "reservations",
            json!({"metadata": {"name": "r"}, "spec": {"template": {"spec": containers(json!({"memory": "1e"}))}}}),
        ),
    ] {
        let a = answer(path, resource, object, vec![]);
        let r = &a["response"];
        assert_eq!(
            (r["uid"].as_str(), r["allowed"].as_bool()),
            (Some("u-3"), Some(false)),
            "{path}: {a}"
        );
        assert_eq!(r["status"]["code"], 400, "{path}: {a}");
        let message = r["status"]["message"].as_str().unwrap_or_default();
        let expected = if path == "/mutate-reservation" {
            "unable to parse quantity's suffix"
        } else {
            FORMAT
        };
        assert!(message.starts_with(expected), "{path}: {message}");
    }
}

#[test]
fn qm_4_prints_quantities_as_go_prints_them() {
    // Sub-milli values keep their value; spellings Go keeps are kept; others are canonical.
    let object = quota(
        "q",
        json!({}),
        json!({"max": {"cpu": "500u", "memory": "+1Gi", "ephemeral-storage": " 2048Mi ", "x": "1E3"}}),
    );
    let a = answer(QM, "elasticquotas", object.clone(), vec![]);
    assert_eq!(a["response"]["allowed"], true, "{a}");
    let out = patched(&object, &a);
    assert_eq!(
        out["metadata"]["annotations"]["quota.scheduling.koordinator.sh/shared-weight"],
        r#"{"cpu":"500u","ephemeral-storage":"2Gi","memory":"+1Gi","x":"1E3"}"#
    );
}

#[test]
fn qm_4_refuses_an_unparsable_shared_weight_with_go_texts() {
    for (weight, detail) in [
        (r#"{"cpu":"abc"}"#, FORMAT),
        (r#"{"cpu":"1K"}"#, "unable to parse quantity's suffix"),
        (r#"{"cpu":true}"#, FORMAT),
        (
            "[1]",
            "json: cannot unmarshal array into Go value of type v1.ResourceList",
        ),
        ("{", "unexpected end of JSON input"),
    ] {
        let mut object = quota("q", json!({}), json!({"max": {"cpu": "1"}}));
        object["metadata"]["annotations"] =
            json!({"quota.scheduling.koordinator.sh/shared-weight": weight});
        let a = answer(QM, "elasticquotas", object, vec![]);
        let r = &a["response"];
        assert_eq!(
            (r["allowed"].as_bool(), r["status"]["code"].as_i64()),
            (Some(false), Some(400)),
            "{a}"
        );
        assert_eq!(
            r["status"]["message"],
            format!("fillDefaultQuotaInfo unmarshal sharedWeight failed:{detail}"),
            "{weight}"
        );
    }
    // A null entry is Go's zero quantity, kept as "0"; a trimmed one is canonical.
    let mut object = quota(
        "q",
        json!({}),
        json!({"max": {"cpu": "1", "memory": "1Gi"}}),
    );
    object["metadata"]["annotations"] =
        json!({"quota.scheduling.koordinator.sh/shared-weight": r#"{"cpu":null}"#});
    let a = answer(QM, "elasticquotas", object.clone(), vec![]);
    assert_eq!(
        patched(&object, &a)["metadata"]["annotations"]["quota.scheduling.koordinator.sh/shared-weight"],
        r#"{"cpu":"0","memory":"1Gi"}"#
    );
}

#[test]
fn pv_5_rounds_a_negative_fraction_away_from_zero() {
    // Go's Value() of -100m is -1 (not 0), so "must be greater than zero" does not apply; 100m
    // is 1; 0 is refused.
    let gpu = |v: &str| {
        validate(
            pod(json!({}), containers(json!({"koordinator.sh/gpu": v}))),
            None,
            vec![],
        )
    };
    assert_eq!(gpu("-100m"), None);
    assert_eq!(gpu("100m"), None);
    let e = gpu("0").unwrap();
    assert!(
        e.contains("the requested GPU must be greater than zero"),
        "{e}"
    );
}

/// PM-1.7 batch cpu of an absurd request (found by the variant fuzzer: the product overflowed,
/// a panic in debug builds): saturates instead.
#[test]
fn pm_1_7_batch_cpu_of_a_huge_request_does_not_overflow() {
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    assert_eq!(
        crate::pod_mutate::milli_text(&Quantity("1500m".into())).0,
        "1500"
    );
    let huge = crate::pod_mutate::milli_text(&Quantity("1e40".into())).0;
    assert!(!huge.starts_with('-'), "{huge}");
}

/// QV-S: quantities compare exactly and print as Go prints them (sub-milli values,
/// spellings Go keeps); the shared-weight annotation decodes as a Go ResourceList.
#[test]
fn qv_s_compares_and_prints_quantities_as_go() {
    let create = |spec: Value, annotations: Value| {
        let mut q = quota("q", json!({}), spec);
        q["metadata"]["annotations"] = annotations;
        qv(Operation::Create, q, None, vec![])
    };
    assert_eq!(
        create(
            json!({"max": {"cpu": "400u"}, "min": {"cpu": "500u"}}),
            json!({})
        )
        .as_deref(),
        Some("resourceKey cpu of quota q min 500u > max 400u")
    );
    assert_eq!(
        create(
            json!({"max": {"cpu": "+1"}, "min": {"cpu": "1001m"}}),
            json!({})
        )
        .as_deref(),
        Some("resourceKey cpu of quota q min 1001m > max +1")
    );
    assert_eq!(
        create(
            json!({"max": {"cpu": "1"}, "min": {"cpu": "1000m"}}),
            json!({})
        ),
        None
    );
    assert_eq!(
        create(json!({"max": {"cpu": "-100u"}}), json!({})).as_deref(),
        Some("q quota.Spec.Max's value < 0, in dimensions :[cpu]")
    );
    let sw = "quota.scheduling.koordinator.sh/shared-weight";
    assert_eq!(
        create(
            json!({"max": {"cpu": "1"}}),
            json!({sw: "{\"cpu\":\"-1m\"}"})
        )
        .as_deref(),
        Some(
            "q quota.Annotation[quota.scheduling.koordinator.sh/shared-weight]'s value < 0, in dimension :[cpu]"
        )
    );
    assert_eq!(
        create(json!({"max": {"cpu": "1"}}), json!({sw: "{\"cpu\":1,}"})).as_deref(),
        Some("invalid character '}' looking for beginning of object key string")
    );
}

/// A JSON `null` list item (containers, tolerations, owner references) or map
/// value reaches the mutators before any schema; upstream's decoder reads it as the zero value
/// and decides, so do we (it used to be a decode error, code 400).
#[test]
fn null_items_read_as_go_zero_values() {
    let mut p = pod(
        json!({"koordinator.sh/qosClass": "LS", "x": null}),
        containers(json!({"cpu": "1"})),
    );
    p["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .insert(0, Value::Null);
    p["spec"]["tolerations"] = json!([null]);
    p["metadata"]["ownerReferences"] = json!([null]);
    for (path, resource, object) in [
        ("/mutate-pod", "pods", p.clone()),
        ("/validate-pod", "pods", p.clone()),
        (
            "/mutate-reservation",
            "reservations",
            json!({"metadata": {"name": "r"}, "spec": {"template": {"spec": p["spec"].clone()}}}),
        ),
        (
            QM,
            "elasticquotas",
            json!({"metadata": {"name": "q", "labels": {"a": null}}, "spec": {"max": {"cpu": "1"}}}),
        ),
    ] {
        let a = answer(path, resource, object.clone(), vec![]);
        assert_eq!(a["response"]["allowed"], true, "{path}: {a}");
        // A patch, if any, applies to the object as it was sent.
        let _ = patched(&object, &a);
    }
    // QM-2 adds the parent label beside the null one (Go's ""), which the patch leaves alone.
    let object = quota("q", json!({"a": null}), json!({"max": {"cpu": "1"}}));
    let out = patched(
        &object,
        &answer(QM, "elasticquotas", object.clone(), vec![]),
    );
    assert_eq!(
        out["metadata"]["labels"],
        json!({"a": null, "quota.scheduling.koordinator.sh/parent": "koordinator-root-quota"})
    );
    // Without the zero reading, the same Pod is a decode error.
    assert!(serde_json::from_value::<Pod>(p).is_err());
}

/// An ElasticQuota or Reservation without `spec` or `metadata` is Go's zero
/// spec or metadata, defaulted as any other (it used to fail "missing field").
#[test]
fn objects_without_spec_or_metadata_are_zero_values() {
    let a = answer(
        QM,
        "elasticquotas",
        json!({"metadata": {"name": "q"}}),
        vec![],
    );
    assert_eq!(a["response"]["allowed"], true, "{a}");
    let out = patched(&json!({"metadata": {"name": "q"}}), &a);
    assert_eq!(
        out["metadata"]["annotations"]["quota.scheduling.koordinator.sh/shared-weight"], "null",
        "QM-4 of an absent spec.max"
    );
    let no_meta = json!({"spec": {"max": {"cpu": "2"}}});
    let a = answer(QM, "elasticquotas", no_meta.clone(), vec![]);
    let out = patched(&no_meta, &a);
    assert_eq!(
        out["metadata"]["labels"]["quota.scheduling.koordinator.sh/parent"],
        "koordinator-root-quota",
        "{a}"
    );
    assert_eq!(
        out["metadata"]["annotations"]["quota.scheduling.koordinator.sh/shared-weight"],
        r#"{"cpu":"2"}"#
    );
    for object in [json!({"metadata": {"name": "r"}}), json!({})] {
        let a = answer(
            "/mutate-reservation",
            "reservations",
            object.clone(),
            vec![],
        );
        assert_eq!(a["response"]["allowed"], true, "{object}: {a}");
    }
    let a = answer(
        "/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota",
        "elasticquotas",
        json!({"metadata": {"name": "q"}}),
        vec![],
    );
    assert_eq!(a["response"]["allowed"], true, "{a}");
}

/// A quota's quantities of 8Ei and above come back at Go's int64 cap (and
/// values finer than a nano rounded up) in the patch of a mutated quota, as upstream's
/// re-encoded object carries them; other spellings are left as written (F-1), and an unmutated
/// quota gets no patch.
#[test]
fn qm_6_reprints_what_go_decoded_to_another_value() {
    let object = quota(
        "q",
        json!({}),
        json!({"max": {"cpu": "8Ei", "memory": "10Ei", "pods": "1000m", "x": "0.1n"},
               "min": {"cpu": "9Ei", "memory": "7Ei"}}),
    );
    let a = answer(QM, "elasticquotas", object.clone(), vec![]);
    let out = patched(&object, &a);
    let cap = "9223372036854775807";
    assert_eq!(
        out["spec"],
        json!({"max": {"cpu": cap, "memory": cap, "pods": "1000m", "x": "1n"},
               "min": {"cpu": cap, "memory": "7Ei"}}),
        "{a}"
    );
    assert_eq!(
        out["metadata"]["annotations"]["quota.scheduling.koordinator.sh/shared-weight"],
        format!(r#"{{"cpu":"{cap}","memory":"{cap}","pods":"1","x":"1n"}}"#)
    );
    // Nothing to default (the root quota): no patch at all, the values stay as written.
    let root = quota(
        "koordinator-root-quota",
        json!({}),
        json!({"max": {"cpu": "8Ei"}}),
    );
    let a = answer(QM, "elasticquotas", root, vec![]);
    assert_eq!(a["response"]["patch"], Value::Null, "{a}");
}

/// PM-FIX-1 (`docs/upstream-parity.md`): beyond 2^63 thousandths (batch cpu)
/// or units (GPU), upstream's `MilliValue()`/`Value()` keep the low 64 bits and its patch writes
/// a negative or unrelated number into the Pod (and PV-5 judges that number); ours uses the
/// exact value.
#[test]
fn pm_fix_1_batch_cpu_and_gpu_beyond_int64_keep_exact_values() {
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    // 10^16 CPUs are 10^19 thousandths (`10E`): Go's int64 product wraps to
    // -8446744073709551616.
    assert_eq!(
        crate::pod_mutate::milli_text(&Quantity("10000000000000000".into())).0,
        "10E"
    );
    let (_, split) = pm_4_split("20000000000000000000");
    assert_eq!(
        split,
        [
            "20000000000000000000",
            "20000000000000000000",
            "200000000000000000"
        ]
    );
    // PV-5 reads the same exact value: 2e19 GPUs are whole cards, where upstream's wrapped
    // `Value()` (1553255926290448384) is "not a percentage of 100".
    let huge = pod(
        json!({}),
        containers(json!({"koordinator.sh/gpu": "20000000000000000000"})),
    );
    assert_eq!(validate(huge, None, vec![]), None);
}

/// A Reservation's `spec.ttl` that is not a Go duration, or `spec.expires` that
/// is not an RFC 3339 time, fails upstream's decode (code 400, Go's words); good ones and `null`
/// are admitted and left as sent.
#[test]
fn reservation_ttl_and_expires_decode_as_go() {
    let reservation = |spec: Value| json!({"metadata": {"name": "r"}, "spec": spec});
    for (spec, message) in [
        (
            json!({"ttl": "1d"}),
            r#"time: unknown unit "d" in duration "1d""#,
        ),
        (json!({"ttl": "1"}), r#"time: missing unit in duration "1""#),
        (
            json!({"ttl": 30}),
            "json: cannot unmarshal number into Go value of type string",
        ),
        (
            json!({"expires": "tomorrow"}),
            r#"parsing time "tomorrow" as "2006-01-02T15:04:05Z07:00""#,
        ),
    ] {
        let a = answer(
            "/mutate-reservation",
            "reservations",
            reservation(spec.clone()),
            vec![],
        );
        let r = &a["response"];
        assert_eq!(
            (r["allowed"].as_bool(), r["status"]["code"].as_i64()),
            (Some(false), Some(400)),
            "{spec}: {a}"
        );
        let text = r["status"]["message"].as_str().unwrap_or_default();
        assert!(text.starts_with(message), "{spec}: {text}");
    }
    for spec in [
        json!({"ttl": "1h30m", "expires": "2026-11-27T00:00:00Z"}),
        json!({"ttl": null, "expires": null}),
    ] {
        let a = answer(
            "/mutate-reservation",
            "reservations",
            reservation(spec.clone()),
            vec![],
        );
        assert_eq!(a["response"]["allowed"], true, "{spec}: {a}");
        assert_eq!(a["response"]["patch"], Value::Null, "{spec}: {a}");
    }
}

/// Found by the differential run against upstream: PM-2 reads the annotation it compares as upstream's
/// `json.Unmarshal` into `extension.ExtendedResourceSpec` does, so an annotation of the wrong
/// JSON shape fails the request (500, Go's words) instead of being overwritten.
#[test]
fn pm_2_an_annotation_go_cannot_decode_fails_the_request() {
    let with = |annotation: &str| {
        let mut p = pod(
            json!({}),
            containers(json!({"kubernetes.io/batch-cpu": "1000"})),
        );
        p["metadata"]["annotations"] =
            json!({"node.koordinator.sh/extended-resource-spec": annotation});
        mutate(p, vec![]).0
    };
    for (annotation, go) in [
        (
            "10000000000000000",
            "json: cannot unmarshal number into Go value of type extension.ExtendedResourceSpec",
        ),
        (
            r#"{"containers": []}"#,
            "json: cannot unmarshal array into Go struct field ExtendedResourceSpec.containers of type map[string]extension.ExtendedResourceContainerSpec",
        ),
        ("-", "invalid character ' ' in numeric literal"),
    ] {
        let v = with(annotation);
        let (rule, status) = v.refusal.expect(annotation);
        assert_eq!((rule, status.code), ("PM-2", Some(500)), "{annotation}");
        assert_eq!(
            status.message,
            format!("failed to get current extended resource spec, err: {go}")
        );
    }
    // null and an empty object are Go's zero spec: rewritten as any other.
    for annotation in ["null", "{}"] {
        let v = with(annotation);
        assert!(v.allowed(), "{annotation}: {:?}", v.refusal);
    }
}

/// The Pod watch runs only when a rule reads Pods: with quota-state asked and PB off
/// (the deployed configuration) no rule does.
#[test]
fn pods_are_watched_only_when_a_rule_reads_them() {
    let app = crate::app();
    let reads = |flags: &[&str], gates: &str| {
        let gates = app.prepare(Some(gates)).unwrap().gates;
        let settings = Context::new(Arc::new(StaticState::default())).with_gates(gates);
        crate::rules_read_pods(&svc_with(flags).options, &settings)
    };
    let url = "--quota-state-url=https://quota-state:9090";
    let user = "--binding-admission-user-name=koord-scheduler";
    let pb = "BindingAdmissionWebhook=true";
    // Quotas in-process: QV counts a quota's pods.
    assert!(reads(&[], ""));
    // The deployed configuration.
    assert!(!reads(&[url], ""));
    // PB needs both its gate and a user list, as PB-6 does.
    assert!(reads(&[url, user], pb));
    assert!(!reads(&[url, user], ""));
    assert!(!reads(&[url, "--binding-admission-user-name= , "], pb));
}

/// `/validate-pod-binding` is registered only when PB can refuse (its gate and a user
/// list): otherwise every scheduled Pod would cost the API server a call that admits. Served
/// either way.
#[test]
fn pod_bindings_are_sent_only_when_pb_is_on() {
    use admission_kit::review::app::EndpointInfo;
    let app = crate::app();
    let registered = |user: &str, gates: &str| {
        let flag = format!("--binding-admission-user-name={user}");
        let app =
            crate::app_with(crate::options::Options::parse([flag.as_str()]).unwrap()).unwrap();
        let settings = Context::new(Arc::new(StaticState::default()))
            .with_gates(app.prepare(Some(gates)).unwrap().gates);
        EndpointInfo::registered(&app, &settings)
            .iter()
            .any(|e| e.path == "/validate-pod-binding")
    };
    let pb = "BindingAdmissionWebhook=true";
    assert!(registered("koord-scheduler", pb));
    assert!(!registered("koord-scheduler", ""));
    assert!(!registered("", pb));
    assert!(
        EndpointInfo::of(&app)
            .iter()
            .any(|e| e.path == "/validate-pod-binding"),
        "listed by `endpoints` for manifests that turn PB on"
    );
    assert!(app.endpoint("/validate-pod-binding").is_some());
}

/// PM-3 asks quota-state for a pod's tree only when an ElasticQuotaProfile names a
/// tree; otherwise the pod is left as it is, even with quota-state unreachable and
/// `--quota-unavailable=deny`.
#[test]
fn pm_3_asks_quota_state_only_when_a_profile_names_a_tree() {
    let app = crate::app();
    // Nothing listens on port 9; the call also cannot wait outside a runtime.
    let service = svc_with(&["--quota-state-url=http://127.0.0.1:9"]);
    let run = |state: Vec<Value>| {
        let mut s = StaticState::default();
        for v in state {
            s.add_value(v).unwrap();
        }
        let ctx = Context::new(Arc::new(s)).with_gates(Arc::new(app.gates.clone()));
        let p = pod(
            json!({"quota.scheduling.koordinator.sh/name": "team-a"}),
            containers(json!({"cpu": "1"})),
        );
        let r = req::<Pod>("pods", Operation::Create, p, None);
        let mut obj = r.object.clone();
        let v = crate::pod_mutate::PodMutator(service.clone()).mutate(&r, &mut obj, &ctx);
        (v, obj)
    };
    // The pod's quota exists, so the pod concerns a quota (an outage is not ignored for it).
    let team = quota("team-a", json!({}), json!({"max": {"cpu": "10"}}));
    let (v, obj) = run(vec![team.clone()]);
    assert!(v.errors.is_empty() && v.refusal.is_none(), "{v:?}");
    assert!(v.warnings.is_empty(), "{v:?}");
    assert!(obj.spec.unwrap().affinity.is_none());
    // A profile of some tree: the tree matters, and quota-state cannot say it.
    let profile = json!({"apiVersion": "quota.koordinator.sh/v1alpha1", "kind": "ElasticQuotaProfile",
        "metadata": {"name": "p", "namespace": "kube-system", "labels": {"quota.scheduling.koordinator.sh/tree-id": "tree1"}},
        "spec": {"quotaName": "team-a", "nodeSelector": {"matchLabels": {"pool": "a"}}}});
    let (v, _) = run(vec![team, profile]);
    let said = format!("{v:?}");
    assert!(said.contains("quota-state unavailable"), "{said}");
}
