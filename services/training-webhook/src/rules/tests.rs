//! One test per rule, named by its TR id.

use super::*;
use admission_kit::review::envelope::{Gvk, Gvr};
use admission_kit::review::field::aggregate;
use serde_json::{Value, json};

fn request<J: JobKind>(op: Operation, obj: Value, old: Option<Value>) -> Request<SpecView<J>> {
    Request {
        uid: "u".into(),
        kind: Gvk::default(),
        resource: Gvr::default(),
        sub_resource: None,
        name: String::new(),
        namespace: Some("ns".into()),
        operation: op,
        user_info: Default::default(),
        dry_run: false,
        object: serde_json::from_value(obj).unwrap(),
        old_object: old.map(|o| serde_json::from_value(o).unwrap()),
    }
}

fn replica(container: &str, image: &str, replicas: Option<i32>) -> Value {
    let mut r =
        json!({"template": {"spec": {"containers": [{"name": container, "image": image}]}}});
    if let Some(n) = replicas {
        r["replicas"] = json!(n);
    }
    r
}

fn job(name: &str, spec: Value) -> Value {
    json!({"metadata": {"name": name}, "spec": spec})
}

fn errors<J: JobKind>(obj: Value) -> Vec<String> {
    validate_job::<J>(&request::<J>(Operation::Create, obj, None))
        .0
        .iter()
        .map(|e| format!("{} {e}", e.rule))
        .collect()
}

fn pytorch(spec: Value) -> Vec<String> {
    errors::<PyTorchJobSpec>(job("train", spec))
}

#[test]
fn valid_jobs_pass() {
    assert!(pytorch(json!({"pytorchReplicaSpecs": {"Master": replica("pytorch", "img", Some(1)), "Worker": replica("pytorch", "img", Some(2))}})).is_empty());
    assert!(
        errors::<TFJobSpec>(job(
            "tf",
            json!({"tfReplicaSpecs": {"Worker": replica("tensorflow", "img", None)}})
        ))
        .is_empty()
    );
    assert!(
        errors::<XGBoostJobSpec>(job(
            "x",
            json!({"xgbReplicaSpecs": {"Master": replica("xgboost", "img", Some(1))}})
        ))
        .is_empty()
    );
    assert!(
        errors::<PaddleJobSpec>(job(
            "p",
            json!({"paddleReplicaSpecs": {"Worker": replica("paddle", "img", Some(0))}})
        ))
        .is_empty()
    );
    assert!(
        errors::<JAXJobSpec>(job(
            "j",
            json!({"jaxReplicaSpecs": {"Worker": replica("jax", "img", None)}})
        ))
        .is_empty()
    );
}

#[test]
fn tr_01_dns1035_names() {
    let spec = json!({"tfReplicaSpecs": {}});
    for bad in ["0-test", "a.b", "Test", "", "a-"] {
        let e = errors::<TFJobSpec>(job(bad, spec.clone()));
        assert!(
            e[0].starts_with(&format!(
                "TR-01 metadata.name: Invalid value: {:?}: should match: a DNS-1035 label",
                bad
            )),
            "{e:?}"
        );
    }
    let e = errors::<TFJobSpec>(job(&"a".repeat(64), spec.clone()));
    assert!(
        e[0].ends_with("should match: must be no more than 63 characters"),
        "{e:?}"
    );
    let e = errors::<TFJobSpec>(job(&format!("{}-", "a".repeat(63)), spec.clone()));
    assert!(
        e[0].contains("should match: must be no more than 63 characters,a DNS-1035"),
        "{e:?}"
    );
    assert!(errors::<TFJobSpec>(job(&"a".repeat(63), spec)).is_empty());
}

#[test]
fn tr_02_managed_by_values() {
    let with = |v: &str| pytorch(json!({"runPolicy": {"managedBy": v}, "pytorchReplicaSpecs": {}}));
    assert!(with("kueue.x-k8s.io/multikueue").is_empty());
    assert_eq!(
        with(""),
        [
            "TR-02 spec.runPolicy.managedBy: Unsupported value: \"\": supported values: \"kubeflow.org/training-operator\", \"kueue.x-k8s.io/multikueue\""
        ]
    );
    // JAXJob skips it (Q3).
    assert!(
        errors::<JAXJobSpec>(job(
            "j",
            json!({"runPolicy": {"managedBy": "x"}, "jaxReplicaSpecs": {}})
        ))
        .is_empty()
    );
}

#[test]
fn tr_03_managed_by_immutable_including_pytorch() {
    let obj = |m: Option<&str>| {
        let rp = m.map(|m| json!({"managedBy": m})).unwrap_or(json!({}));
        job("train", json!({"runPolicy": rp, "pytorchReplicaSpecs": {}}))
    };
    let run = |old: Option<&str>, new: Option<&str>| {
        validate_job::<PyTorchJobSpec>(&request(Operation::Update, obj(new), Some(obj(old))))
            .0
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        run(
            Some("kubeflow.org/training-operator"),
            Some("kueue.x-k8s.io/multikueue")
        ),
        [
            "spec.runPolicy.managedBy: Invalid value: \"kueue.x-k8s.io/multikueue\": field is immutable"
        ]
    );
    assert_eq!(
        run(Some("kubeflow.org/training-operator"), None),
        ["spec.runPolicy.managedBy: Invalid value: \"null\": field is immutable"]
    );
    assert_eq!(
        run(None, Some("kubeflow.org/training-operator")).len(),
        1,
        "Q4: absent → set"
    );
    assert!(run(None, None).is_empty());
}

#[test]
fn tr_04_map_required_but_empty_passes() {
    assert_eq!(
        pytorch(json!({})),
        ["TR-04 spec.pytorchReplicaSpecs: Required value: must be required"]
    );
    assert!(pytorch(json!({"pytorchReplicaSpecs": {}})).is_empty(), "Q9");
}

#[test]
fn tr_05_replica_keys() {
    let e = pytorch(json!({"pytorchReplicaSpecs": {"worker": replica("pytorch", "i", None)}}));
    assert_eq!(
        e,
        [
            "TR-05 spec.pytorchReplicaSpecs[worker]: Unsupported value: \"worker\": supported values: \"Master\", \"Worker\""
        ]
    );
    let e = errors::<JAXJobSpec>(job(
        "j",
        json!({"jaxReplicaSpecs": {"Master": replica("jax", "i", None)}}),
    ));
    assert_eq!(
        e,
        [
            "TR-05 spec.jaxReplicaSpecs[Master]: Unsupported value: \"Master\": supported values: \"Worker\""
        ]
    );
    assert!(
        errors::<TFJobSpec>(job(
            "t",
            json!({"tfReplicaSpecs": {"Foo": replica("tensorflow", "i", None)}})
        ))
        .is_empty(),
        "Q1"
    );
}

#[test]
fn tr_06_and_tr_08_no_containers() {
    let e = errors::<TFJobSpec>(job(
        "t",
        json!({"tfReplicaSpecs": {"Worker": {"template": {"spec": {"containers": []}}}}}),
    ));
    assert_eq!(
        e,
        [
            "TR-06 spec.tfReplicaSpecs[Worker].template.spec.containers: Required value: must be specified",
            "TR-08 spec.tfReplicaSpecs[Worker].template.spec.containers: Required value: must have at least one container with name tensorflow",
        ]
    );
}

#[test]
fn tr_07_each_container_without_image() {
    let e = pytorch(
        json!({"pytorchReplicaSpecs": {"Worker": {"template": {"spec": {"containers": [{"name": "pytorch"}, {"name": "side", "image": ""}]}}}}}),
    );
    assert_eq!(
        e,
        [
            "TR-07 spec.pytorchReplicaSpecs[Worker].template.spec.containers[0].image: Required value: must be required",
            "TR-07 spec.pytorchReplicaSpecs[Worker].template.spec.containers[1].image: Required value: must be required",
        ]
    );
}

#[test]
fn tr_08_default_container_name_and_paddle_quotes_it() {
    let e = errors::<PaddleJobSpec>(job(
        "p",
        json!({"paddleReplicaSpecs": {"Worker": replica("main", "i", None)}}),
    ));
    assert_eq!(
        e,
        [
            "TR-08 spec.paddleReplicaSpecs[Worker].template.spec.containers: Required value: must have at least one container with name \"paddle\""
        ]
    );
}

#[test]
fn tr_09_pytorch_master_exactly_one() {
    for r in [None, Some(0), Some(2)] {
        let e = pytorch(json!({"pytorchReplicaSpecs": {"Master": replica("pytorch", "i", r)}}));
        assert_eq!(
            e,
            ["TR-09 spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1"],
            "{r:?}"
        );
    }
}

#[test]
fn tr_10_pytorch_others_at_least_one() {
    let e = pytorch(json!({"pytorchReplicaSpecs": {"Worker": replica("pytorch", "i", Some(0))}}));
    assert_eq!(
        e,
        ["TR-10 spec.pytorchReplicaSpecs[Worker].replicas: Forbidden: must be at least 1"]
    );
    assert!(
        pytorch(json!({"pytorchReplicaSpecs": {"Worker": replica("pytorch", "i", None)}}))
            .is_empty()
    );
}

#[test]
fn tr_11_elastic_needs_worker() {
    let e = pytorch(
        json!({"elasticPolicy": {}, "pytorchReplicaSpecs": {"Master": replica("pytorch", "i", Some(1))}}),
    );
    assert_eq!(
        e,
        [
            "TR-11 spec.pytorchReplicaSpecs[Worker]: Required value: must be configured if elastic policy is used"
        ]
    );
}

#[test]
fn tr_12_13_nproc_per_node() {
    let obj = |nproc: Option<&str>| {
        let mut s = json!({"elasticPolicy": {"nProcPerNode": 0}, "pytorchReplicaSpecs": {"Worker": replica("pytorch", "i", None)}});
        if let Some(n) = nproc {
            s["nprocPerNode"] = json!(n);
        }
        request::<PyTorchJobSpec>(Operation::Create, job("t", s), None)
    };
    let (e, w) = validate_job(&obj(None));
    assert!(e.is_empty());
    assert_eq!(
        w,
        ["spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead"]
    );
    let (e, w) = validate_job(&obj(Some("auto")));
    assert_eq!(
        e.iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["spec.elasticPolicy.nProcPerNode: Forbidden: must not be used with spec.nprocPerNode"]
    );
    assert_eq!(w.len(), 1);
}

#[test]
fn tr_14_tf_chief_and_master() {
    let e = errors::<TFJobSpec>(job(
        "t",
        json!({"tfReplicaSpecs": {"Chief": replica("tensorflow", "i", None), "Master": replica("tensorflow", "i", None)}}),
    ));
    assert_eq!(
        e,
        ["TR-14 spec.tfReplicaSpecs: Forbidden: must not have more than 1 Chief or Master role"]
    );
}

#[test]
fn tr_15_16_xgboost_master() {
    let e = errors::<XGBoostJobSpec>(job(
        "x",
        json!({"xgbReplicaSpecs": {"Master": replica("xgboost", "i", Some(2))}}),
    ));
    assert_eq!(
        e,
        ["TR-15 spec.xgbReplicaSpecs[Master].replicas: Forbidden: must be 1"]
    );
    let e = errors::<XGBoostJobSpec>(job("x", json!({"xgbReplicaSpecs": {}})));
    assert_eq!(
        e,
        ["TR-16 spec.xgbReplicaSpecs[Master]: Required value: must be present"]
    );
}

#[test]
fn fix_2_null_replica_spec_is_empty() {
    let e = pytorch(json!({"pytorchReplicaSpecs": {"Master": null}}));
    let ids: Vec<&str> = e.iter().map(|s| &s[..5]).collect();
    assert_eq!(ids, ["TR-06", "TR-08", "TR-09"]);
}

#[test]
fn aggregate_drops_duplicates_and_brackets_several() {
    let e = |d: &str| FieldError::required("X", Path::new("a"), d);
    assert_eq!(aggregate(&[e("x")]), "a: Required value: x");
    assert_eq!(
        aggregate(&[e("x"), e("x"), e("y")]),
        "[a: Required value: x, a: Required value: y]"
    );
}

/// A quantity `ParseQuantity` rejects (minimum resources, a replica's pod template)
/// fails the Training Operator's decode: refused with code 400 and apimachinery's text.
#[test]
fn an_unparsable_quantity_fails_the_decode_with_code_400() {
    let mut with_template = replica("pytorch", "img", Some(1));
    with_template["template"]["spec"]["containers"][0]["resources"] =
        json!({"requests": {"memory": "1Gi2"}});
    for (spec, expected, at) in [
        (
            json!({"runPolicy": {"schedulingPolicy": {"minResources": {"cpu": "abc"}}},
                   "pytorchReplicaSpecs": {"Master": replica("pytorch", "img", Some(1))}}),
            "quantities must match the regular expression",
            "spec.runPolicy.schedulingPolicy.minResources.cpu",
        ),
        (
            json!({"pytorchReplicaSpecs": {"Master": with_template}}),
            "unable to parse quantity's suffix",
            "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].resources.requests.memory",
        ),
    ] {
        let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "t-3", "operation": "CREATE", "object": job("train", spec)}});
        let a = admission_testing::fixtures::answer_in_process(
            &crate::app(),
            "/validate-kubeflow-org-v1-pytorchjob",
            &review,
            &[],
        )
        .unwrap();
        let r = &a["response"];
        assert_eq!(
            (
                r["uid"].as_str(),
                r["allowed"].as_bool(),
                r["status"]["code"].as_i64()
            ),
            (Some("t-3"), Some(false), Some(400)),
            "{a}"
        );
        let message = r["status"]["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with(expected) && message.ends_with(at),
            "{message}"
        );
    }
}
