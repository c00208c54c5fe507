//! admission-check as its users run it: the binary on the upstream examples, the samples, the
//! test suites, every output format (JUnit read by junitparser, SARIF checked by Microsoft's
//! validator) and every exit code.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

const DOMAINS: [&str; 4] = ["registry", "scheduling", "node-config", "training"];

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn repo() -> PathBuf {
    crate_dir().join("../..")
}

fn fixtures() -> PathBuf {
    admission_testing::fixtures::fixtures_root()
}

fn check(args: &[&str]) -> Output {
    check_with_stdin(args, None)
}

fn check_with_stdin(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_admission-check"))
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("admission-check starts");
    let mut input = child.stdin.take().expect("stdin");
    if let Some(s) = stdin {
        // A command that exits before reading closes the pipe: not this test's concern.
        let _ = input.write_all(s.as_bytes());
    }
    drop(input);
    child.wait_with_output().expect("admission-check runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json_of(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(o)))
}

fn suite(domain: &str) -> PathBuf {
    crate_dir().join("suites").join(format!("{domain}.yaml"))
}

#[test]
fn every_upstream_example_suite_passes() {
    let paths: Vec<String> = DOMAINS
        .iter()
        .map(|d| suite(d).display().to_string())
        .collect();
    let args: Vec<&str> = std::iter::once("--test")
        .chain(paths.iter().map(String::as_str))
        .collect();
    let out = check(&args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let text = stdout(&out);
    assert!(text.contains("98 tests: 98 passed, 0 failed"), "{text}");
}

/// The suites are the fixtures' cases on the raw manifests: one test per raw file, with the
/// fixture's endpoint, operation, state, old object and expectation. A test may differ only
/// where it says why (`why`), and then only in how the manifest reaches the endpoint.
#[test]
fn the_suites_say_what_the_fixtures_say() {
    for domain in DOMAINS {
        let text = std::fs::read_to_string(suite(domain)).unwrap();
        let s: Value = serde_yaml_ng::from_str(&text).unwrap();
        let tests = s["tests"].as_array().unwrap();
        let raw_dir = fixtures().join("examples/raw").join(domain);
        let mut raw: Vec<String> = std::fs::read_dir(&raw_dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".yaml"))
            .collect();
        raw.sort();
        let named: Vec<String> = tests
            .iter()
            .map(|t| t["resources"][0].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(named, raw, "{domain}: one test per raw manifest");
        for t in tests {
            let name = t["name"].as_str().unwrap();
            assert_eq!(t["resources"].as_array().unwrap().len(), 1, "{name}");
            let case: Value = serde_json::from_str(
                &std::fs::read_to_string(
                    fixtures()
                        .join("examples")
                        .join(domain)
                        .join(format!("{name}.json")),
                )
                .unwrap(),
            )
            .unwrap();
            let req = &case["review"]["request"];
            let e = &case["expect"];
            let want = if e["allowed"].as_bool().unwrap() {
                "admitted"
            } else {
                "denied"
            };
            assert_eq!(t["expect"]["result"], want, "{name}");
            let msgs = |v: &Value| v.as_array().cloned().unwrap_or_default();
            assert_eq!(
                msgs(&t["expect"]["messageContains"]),
                msgs(&e["message_contains"]),
                "{name}"
            );
            if let Some(p) = e.get("patch") {
                let want = if p.is_null() {
                    Value::Array(vec![])
                } else {
                    p.clone()
                };
                assert_eq!(t["expect"]["patch"], want, "{name}");
            }
            assert_eq!(
                t["state"],
                case.get("state").cloned().unwrap_or(Value::Null),
                "{name}"
            );
            assert_eq!(
                t["old"],
                req.get("oldObject").cloned().unwrap_or(Value::Null),
                "{name}"
            );
            let op = t["operation"].as_str().unwrap_or("CREATE");
            assert_eq!(op, req["operation"], "{name}");
            assert_eq!(t.get("subresource"), req.get("subResource"), "{name}");
            match &t["endpoints"] {
                Value::Null => assert!(
                    t.get("why").is_some(),
                    "{name}: all endpoints run without a why"
                ),
                eps => assert_eq!(eps, &serde_json::json!([case["path"]]), "{name}"),
            }
            if t.get("render").is_some() || t.get("labels").is_some() {
                assert!(
                    t.get("why").is_some(),
                    "{name}: rendered or relabelled without a why"
                );
            }
        }
    }
}

#[test]
fn a_suite_reports_each_mismatch_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let raw = fixtures().join("examples/raw/registry");
    let file = dir.path().join("wrong.yaml");
    std::fs::write(
        &file,
        format!(
            "name: wrong on purpose\nbase: {}\ntests:\n\
             - name: a valid Model said to be denied\n  resources: [001-model-qwen2.5-0.5b-static-valid.yaml]\n  expect: {{result: denied, rules: [MV-11]}}\n\
             - name: a converted manifest no endpoint serves\n  resources: [020-policy-doc-scaling-policy-valid.yaml]\n  endpoints: [/validate-registry-volcano-sh-v1alpha1-autoscalingpolicy]\n  expect: {{result: admitted}}\n\
             - name: right\n  resources: [006-model-qwen-coder-32b-static-min-ne-max-denied.yaml]\n  expect: {{result: denied, rules: [MV-11]}}\n",
            raw.display()
        ),
    )
    .unwrap();
    let out = check(&["--test", file.to_str().unwrap()]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
    assert!(
        text.contains("FAIL  wrong on purpose / a valid Model said to be denied"),
        "{text}"
    );
    assert!(text.contains("expected DENIED, got ADMITTED"), "{text}");
    assert!(
        text.contains("expected rule MV-11 among the denial's rules"),
        "{text}"
    );
    assert!(
        text.contains("endpoint /validate-registry-volcano-sh-v1alpha1-autoscalingpolicy was not called (no webhook serves AutoscalingPolicy workload.serving.volcano.sh/v1alpha1"),
        "{text}"
    );
    assert!(text.contains("PASS  wrong on purpose / right"), "{text}");
    assert!(text.contains("3 tests: 1 passed, 2 failed"), "{text}");
}

/// Every service's samples, as `cargo xtask up` applies them in order to an empty cluster: the
/// file name says whether each is admitted or refused.
#[test]
fn the_samples_are_admitted_or_refused_as_their_names_say() {
    for svc in [
        "registry-webhook",
        "scheduling-webhook",
        "node-config-webhook",
        "training-webhook",
    ] {
        let dir = format!("services/{svc}/examples/samples");
        // The samples are the whole cluster they describe (a binding before its policy).
        let out = check(&["-o", "json", "--complete-state", &dir]);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{svc}: some samples are refused: {}",
            stderr(&out)
        );
        let report = json_of(&out);
        let results = report["results"].as_array().unwrap();
        assert!(results.len() >= 4, "{svc}");
        for r in results {
            let file = r["file"].as_str().unwrap();
            let want = if file.ends_with("-refused.yaml") {
                "denied"
            } else {
                "admitted"
            };
            assert_eq!(r["result"], want, "{file}: {r:#}");
            if want == "denied" {
                let findings = &r["refusals"][0]["findings"];
                assert!(
                    findings[0]["rule"].as_str().is_some_and(|s| !s.is_empty()),
                    "{file}: {r:#}"
                );
            }
        }
    }
}

#[test]
fn text_output_names_rule_field_and_shows_the_mutation_as_a_diff() {
    let out = check(&["services/registry-webhook/examples/samples"]);
    let text = stdout(&out);
    assert!(
        text.contains("05-model-prefill-worker-refused.yaml:1  Model default/translator  DENIED"),
        "{text}"
    );
    assert!(
        text.contains("    MV-19  spec.backends[0].workers[0].type (line 14, column 11): "),
        "{text}"
    );
    assert!(
        text.contains("  mutated by /mutate-registry-volcano-sh-v1alpha1-model:"),
        "{text}"
    );
    assert!(
        text.contains("    +  costExpansionRatePercent: 200"),
        "{text}"
    );
    // The binding names a policy the samples never create: undecided, naming it.
    assert!(
        text.contains("AutoscalingPolicyBinding default/batch-scaling  UNDECIDED\n  undecided: the refusal below rests on objects the state does not hold: AutoscalingPolicy default/batch-policy"),
        "{text}"
    );
    assert!(
        text.contains(
            "7 objects: 4 admitted, 0 admitted with warnings, 2 denied, 1 undecided (state missing)"
        ),
        "{text}"
    );
}

#[test]
fn exit_codes_say_admitted_denied_or_unreadable() {
    let model = std::fs::read_to_string(
        repo().join("services/registry-webhook/examples/samples/02-model-static-admitted.yaml"),
    )
    .unwrap();
    let out = check_with_stdin(&[], Some(&model));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stdout(&out).starts_with("-:1  Model default/summarizer  ADMITTED"),
        "{}",
        stdout(&out)
    );

    let out = check(&["services/registry-webhook/examples/samples/04-model-replicas-refused.yaml"]);
    assert_eq!(out.status.code(), Some(1));

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        format!("{model}---\napiVersion: v1\nkind: [unclosed\n"),
    )
    .unwrap();
    let out = check(&[bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("{}: document 2 (line ", bad.display())),
        "{err}"
    );
    assert!(
        stdout(&out).starts_with(&format!("{}  UNREADABLE\n", bad.display()))
            && stdout(&out).contains("\n0 objects"),
        "nothing of an unreadable file is checked: {}",
        stdout(&out)
    );

    let out = check(&["no/such/file.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("cannot read no/such/file.yaml"),
        "{}",
        stderr(&out)
    );

    let out = check(&[
        "--endpoint",
        "/nope",
        "services/registry-webhook/examples/samples",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no endpoint \"/nope\"; known: "),
        "{}",
        stderr(&out)
    );
}

/// `--mode warn|audit`: every denial reported as a would-be denial in each format, exit 0;
/// unreadable input still exits 2; a test suite refuses the flag.
#[test]
fn trial_modes_report_would_be_denials_and_exit_0() {
    let refused = "services/registry-webhook/examples/samples/04-model-replicas-refused.yaml";
    for mode in ["warn", "audit"] {
        let out = check(&["--mode", mode, refused]);
        assert_eq!(out.status.code(), Some(0), "{mode}: {}", stdout(&out));
        let text = stdout(&out);
        assert!(
            text.contains("DENIED")
                && text.contains(&format!(
                    "mode {mode}: denials are what enforcing would refuse"
                )),
            "{text}"
        );

        let json = json_of(&check(&["--mode", mode, "-o", "json", refused]));
        assert_eq!(json["mode"], mode);
        assert_eq!(json["summary"]["denied"], 1);

        let sarif: Value =
            serde_json::from_slice(&check(&["--mode", mode, "-o", "sarif", refused]).stdout)
                .unwrap();
        let results = sarif["runs"][0]["results"].as_array().unwrap();
        assert!(!results.is_empty());
        for r in results {
            assert_eq!(r["level"], "warning", "{r}");
            assert!(
                r["message"]["text"]
                    .as_str()
                    .unwrap()
                    .contains(&format!("would be denied ({mode})")),
                "{r}"
            );
        }

        let junit = stdout(&check(&["--mode", mode, "-o", "junit", refused]));
        assert!(
            junit.contains("<skipped")
                && junit.contains("would-deny")
                && !junit.contains("<failure"),
            "{junit}"
        );
    }
    // Enforce is the default, and its report names no mode.
    let json = json_of(&check(&["-o", "json", refused]));
    assert!(json.get("mode").is_none());
    assert_eq!(
        check(&["--mode", "enforce", refused]).status.code(),
        Some(1)
    );
    assert_eq!(
        check(&["--mode", "audit", "no/such/file.yaml"])
            .status
            .code(),
        Some(2)
    );
    let out = check(&["--mode", "loud", refused]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("unknown enforcement mode \"loud\""),
        "{}",
        stderr(&out)
    );
    let out = check(&[
        "--test",
        "--mode",
        "audit",
        &suite("registry").display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--mode applies to manifests"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn excluded_namespaces_are_not_sent_and_can_be_included() {
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: kube-system, labels: {koordinator.sh/qosClass: BE, koordinator.sh/priority-class: koord-prod}}\nspec: {containers: [{name: c, image: busybox}]}\n";
    let out = check_with_stdin(&["-o", "json"], Some(pod));
    assert_eq!(out.status.code(), Some(0));
    let r = &json_of(&out)["results"][0];
    assert!(
        r["skipped"]
            .as_str()
            .unwrap()
            .contains("namespace kube-system is excluded"),
        "{r:#}"
    );

    let out = check_with_stdin(&["-o", "json", "--exclude-namespace", ""], Some(pod));
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let r = &json_of(&out)["results"][0];
    assert_eq!(r["refusals"][0]["findings"][0]["rule"], "PV-2", "{r:#}");
}

#[test]
fn old_objects_make_updates_and_subresources_route_to_their_endpoints() {
    // A Node status update (the kubelet's), from the upstream example and the fixture's old Node.
    let case: Value = serde_json::from_str(
        &std::fs::read_to_string(
            fixtures().join("examples/node-config/020-node-status-amplify-cpu-1.5-converted.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old.json");
    std::fs::write(&old, case["review"]["request"]["oldObject"].to_string()).unwrap();
    let raw =
        fixtures().join("examples/raw/node-config/020-node-status-amplify-cpu-1.5-converted.yaml");
    let out = check(&[
        "-o",
        "json",
        "--old",
        old.to_str().unwrap(),
        "--subresource",
        "status",
        raw.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r = &json_of(&out)["results"][0];
    assert_eq!(r["operation"], "UPDATE");
    assert_eq!(
        r["endpoints"],
        serde_json::json!(["/mutate-node-status"]),
        "{r:#}"
    );
    assert_eq!(
        r["mutated"]["status"]["allocatable"]["cpu"], "1500m",
        "{r:#}"
    );

    // Without the subresource it is an update of the Node itself: the validating endpoint.
    let out = check(&[
        "-o",
        "json",
        "--old",
        old.to_str().unwrap(),
        raw.to_str().unwrap(),
    ]);
    let r = &json_of(&out)["results"][0];
    assert_eq!(
        r["endpoints"],
        serde_json::json!(["/validate-node"]),
        "{r:#}"
    );

    // An ElasticQuota is mutated on CREATE only.
    let quota = "services/scheduling-webhook/examples/samples/01-quota-team-a-admitted.yaml";
    let out = check(&["-o", "json", "--old", quota, quota]);
    let r = &json_of(&out)["results"][0];
    assert_eq!(r["operation"], "UPDATE");
    assert!(r["mutations"].as_array().unwrap().is_empty(), "{r:#}");
}

#[test]
fn admission_reviews_lists_and_json_are_read() {
    let review = fixtures().join("reviews/registry/001-model-valid-static.json");
    let case: Value = serde_json::from_str(&std::fs::read_to_string(&review).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("review.json");
    std::fs::write(&file, case["review"].to_string()).unwrap();
    let out = check(&["-o", "json", file.to_str().unwrap()]);
    let r = &json_of(&out)["results"][0];
    assert_eq!(r["kind"], "Model", "{r:#}");
    assert_eq!(
        r["result"],
        if case["expect"]["allowed"] == true {
            "admitted"
        } else {
            "denied"
        }
    );

    let list = r#"{"apiVersion":"v1","kind":"List","items":[
        {"apiVersion":"kubeflow.org/v1","kind":"PyTorchJob","metadata":{"name":"a"},"spec":{"pytorchReplicaSpecs":{"Master":{"replicas":2,"template":{"spec":{"containers":[{"name":"pytorch","image":"x"}]}}}}}},
        {"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"plain"}}]}"#;
    let out = check_with_stdin(&["-o", "json"], Some(list));
    let v = json_of(&out);
    assert_eq!(v["results"][0]["item"], 0);
    assert_eq!(v["results"][0]["result"], "denied", "{v:#}");
    assert_eq!(v["results"][1]["result"], "admitted");
    assert_eq!(v["summary"]["objects"], 2);
}

fn validators() -> testenv::tools::ReportValidators {
    testenv::tools::report_validators().unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn junit_output_is_read_by_a_junit_reader() {
    let out = check(&[
        "-o",
        "junit",
        "services/registry-webhook/examples/samples",
        "services/training-webhook/examples/samples",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let dir = tempfile::tempdir().unwrap();
    let xml = dir.path().join("report.xml");
    std::fs::write(&xml, &out.stdout).unwrap();
    let reader = r#"
import json, sys
from junitparser import JUnitXml, Failure, Skipped
xml = JUnitXml.fromfile(sys.argv[1])
out = []
for s in xml:
    for c in s:
        failed = any(isinstance(r, Failure) for r in c.result)
        skipped = any(isinstance(r, Skipped) for r in c.result)
        message = ' '.join((r.message or '') for r in c.result)
        out.append({'suite': s.name, 'case': c.name, 'failed': failed, 'skipped': skipped,
                    'message': message, 'time': c.time})
print(json.dumps(out))
"#;
    let read = Command::new("python3")
        .args(["-c", reader, xml.to_str().unwrap()])
        .env("PYTHONPATH", validators().junitparser_path)
        .output()
        .unwrap();
    assert!(
        read.status.success(),
        "{}",
        String::from_utf8_lossy(&read.stderr)
    );
    let cases: Vec<Value> = serde_json::from_slice(&read.stdout).unwrap();
    assert_eq!(cases.len(), 11);
    let failed: BTreeMap<String, String> = cases
        .iter()
        .filter(|c| c["failed"] == true)
        .map(|c| {
            (
                c["suite"].as_str().unwrap().to_owned(),
                c["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    // The binding to a policy no sample creates is undecided: skipped, saying why; every
    // other refused sample fails.
    for c in &cases {
        let suite = c["suite"].as_str().unwrap();
        let undecided = suite.ends_with("07-binding-missing-policy-refused.yaml");
        assert_eq!(c["skipped"] == true, undecided, "{c}");
        assert_eq!(
            c["failed"] == true,
            suite.ends_with("-refused.yaml") && !undecided,
            "{c}"
        );
        if undecided {
            assert!(
                c["message"]
                    .as_str()
                    .unwrap()
                    .contains("undecided: would be denied"),
                "{c}"
            );
        }
        assert!(c["time"].as_f64().is_some(), "{c}");
    }
    // Every test case and suite carries its time.
    let text = stdout(&out);
    for line in text
        .lines()
        .filter(|l| l.contains("<testcase") || l.contains("<testsuite "))
    {
        assert!(line.contains(" time=\""), "{line}");
    }
    assert!(
        failed
            .values()
            .any(|m| m.contains("minReplicas and maxReplicas must be equal")),
        "{failed:?}"
    );
}

#[test]
fn sarif_output_is_valid_sarif_2_1_0() {
    let out = check(&[
        "-o",
        "sarif",
        "--docs-url",
        "https://example.org/admission-webhooks/blob/v1",
        "services/registry-webhook/examples/samples",
        "services/scheduling-webhook/examples/samples",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let log: Value = json_of(&out);
    // Rules are described by their own documentation and link the page that specifies them.
    let driver = &log["runs"][0]["tool"]["driver"];
    assert_eq!(
        driver["informationUri"],
        "https://example.org/admission-webhooks/blob/v1/docs/admission-check.md"
    );
    let rule = driver["rules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == "MV-19")
        .unwrap_or_else(|| panic!("{driver:#}"));
    assert_eq!(
        rule["helpUri"],
        "https://example.org/admission-webhooks/blob/v1/docs/registry-webhook.md"
    );
    assert_eq!(
        rule["shortDescription"]["text"], "worker count and worker types per backend type",
        "{rule:#}"
    );
    assert!(
        rule["help"]["text"]
            .as_str()
            .unwrap()
            .contains("services/registry-webhook/src/model.rs:"),
        "{rule:#}"
    );
    let results = log["runs"][0]["results"].as_array().unwrap();
    // Each result at its field's line (MV-19: `spec.backends[0].workers[0].type`, line 14 of
    // the sample), not at the document's first.
    let mv19 = results
        .iter()
        .find(|r| r["ruleId"] == "MV-19")
        .unwrap_or_else(|| panic!("{log:#}"));
    assert_eq!(
        mv19["locations"][0]["physicalLocation"]["region"]["startLine"], 14,
        "{mv19:#}"
    );
    assert_eq!(
        mv19["locations"][0]["physicalLocation"]["region"]["startColumn"], 11,
        "{mv19:#}"
    );
    let errors = sarif_errors(&log);
    assert!(errors.is_empty(), "{errors:#?}");
    // GitHub code scanning's own rules (GH2012: every rule has help) pass too.
    let github = sarif_errors_of_kind(&log, "Gh");
    assert!(github.is_empty(), "{github:#?}");
    // The validator does find errors: a log without its tool's name.
    let mut broken = log.clone();
    broken["runs"][0]["tool"]["driver"]
        .as_object_mut()
        .unwrap()
        .remove("name");
    assert!(!sarif_errors(&broken).is_empty());
}

/// The error-level findings of Microsoft's SARIF validator on `log`.
fn sarif_errors(log: &Value) -> Vec<Value> {
    sarif_errors_of_kind(log, "Sarif")
}

/// The error-level findings of the validator's rules of `kind` (`Sarif`, or `Gh` for GitHub's).
fn sarif_errors_of_kind(log: &Value, kind: &str) -> Vec<Value> {
    let dir = tempfile::tempdir().unwrap();
    let (file, report) = (
        dir.path().join("out.sarif"),
        dir.path().join("validation.sarif"),
    );
    std::fs::write(&file, log.to_string()).unwrap();
    let v = Command::new(validators().sarif_multitool)
        .arg("validate")
        .arg(&file)
        .args(["--rule-kind", kind])
        .arg("-o")
        .arg(&report)
        .env("DOTNET_CLI_TELEMETRY_OPTOUT", "1")
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&v.stdout),
        String::from_utf8_lossy(&v.stderr)
    );
    assert!(v.status.success(), "{said}");
    let validation: Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    validation["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["level"] == "error")
        .cloned()
        .collect()
}

/// API-1..3: what the API server refuses before any webhook is a denial with its own rule id
/// at the field's line (an unquoted YAML boolean label, a string port, a container without an
/// image), and the webhooks' findings on the quoted object are reported beside it.
#[test]
fn what_the_api_server_refuses_first_is_denied_by_its_own_rules() {
    let raw = fixtures()
        .join("examples/raw/scheduling/005-mutate-quota-advanced-missing-parent-denied.yaml");
    let out = check(&["-o", "json", raw.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let r = &json_of(&out)["results"][0];
    assert_eq!(r["result"], "denied", "{r:#}");
    let api = &r["refusals"][0];
    assert_eq!(api["service"], "kube-apiserver", "{r:#}");
    assert_eq!(api["code"], 400, "{r:#}");
    let is_parent = api["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["field"] == "metadata.labels[quota.scheduling.koordinator.sh/is-parent]")
        .unwrap_or_else(|| panic!("{r:#}"));
    assert_eq!(is_parent["rule"], "API-1");
    assert_eq!(is_parent["line"], 7, "{r:#}");
    // The webhook's own refusal of the quoted object is there too.
    assert!(
        r["refusals"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["service"] == "scheduling-webhook"),
        "{r:#}"
    );
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    ports: [{containerPort: \"80\"}]\n";
    let out = check_with_stdin(&["-o", "json"], Some(pod));
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let findings = &json_of(&out)["results"][0]["refusals"][0]["findings"];
    let got: Vec<(String, String, u64)> = findings
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap().to_owned(),
                f["field"].as_str().unwrap().to_owned(),
                f["line"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (
                "API-2".into(),
                "spec.containers[0].ports[0].containerPort".into(),
                7
            ),
            ("API-3".into(), "spec.containers[0].image".into(), 6),
        ],
        "{findings:#}"
    );
}

/// A refusal that rests on an object the state lacks is UNDECIDED (exit 4), naming what is
/// missing; given the object it is decided, and with `--complete-state` (as with
/// `--kubeconfig`) an absent object is absent and the refusal a denial. The JSON report has a
/// format version and counts undecided and skipped objects.
#[test]
fn a_refusal_resting_on_absent_state_is_undecided() {
    let dir = fixtures().join("examples/raw/kubeflow-trainer-v2.3.0");
    let job = dir.join("examples_yaml_01-multi-node.yaml");
    let job = job.to_str().unwrap();
    let out = check(&["-o", "json", job]);
    assert_eq!(out.status.code(), Some(4), "{}", stdout(&out));
    let report = json_of(&out);
    assert_eq!(report["format"], 2);
    let r = &report["results"][0];
    assert_eq!(r["result"], "undecided", "{r:#}");
    assert_eq!(
        r["missing"],
        serde_json::json!(["ClusterTrainingRuntime torch-distributed"]),
        "{r:#}"
    );
    assert_eq!(report["summary"]["undecided"], 1, "{report:#}");
    assert_eq!(report["summary"]["denied"], 0, "{report:#}");
    let complete = check(&["--complete-state", job]);
    assert_eq!(complete.status.code(), Some(1), "{}", stdout(&complete));
    assert!(stdout(&complete).contains("TrainJob default/multi-node-example  DENIED"));
    let runtime = dir.join("manifests_base_runtimes_torch_distributed.yaml");
    let given = check(&["--state", runtime.to_str().unwrap(), "-o", "json", job]);
    assert_eq!(given.status.code(), Some(0), "{}", stdout(&given));
    // A quota whose parent the state lacks: the tree rules refuse it, undecided.
    let child = "apiVersion: scheduling.sigs.k8s.io/v1alpha1\nkind: ElasticQuota\nmetadata: {name: child, namespace: team-a, labels: {quota.scheduling.koordinator.sh/parent: team}}\nspec: {max: {cpu: \"1\"}, min: {cpu: \"1\"}}\n";
    let out = check_with_stdin(&["-o", "json"], Some(child));
    let r = &json_of(&out)["results"][0];
    assert_eq!(out.status.code(), Some(4), "{r:#}");
    assert_eq!(
        r["missing"],
        serde_json::json!(["ElasticQuota team (the parent)"]),
        "{r:#}"
    );
    // A denial elsewhere in the run outranks an undecided object (exit 1); an object no webhook
    // sees counts as skipped.
    let cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain}\n";
    let bad =
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n";
    let both = check_with_stdin(&["-o", "json", job, "-"], Some(&format!("{cm}{bad}")));
    assert_eq!(both.status.code(), Some(1), "{}", stdout(&both));
    let summary = &json_of(&both)["summary"];
    assert_eq!(
        (
            &summary["undecided"],
            &summary["denied"],
            &summary["skipped"]
        ),
        (
            &serde_json::json!(1),
            &serde_json::json!(1),
            &serde_json::json!(1)
        ),
        "{summary:#}"
    );
}

/// The whole upstream corpus (`fixtures/examples/raw/`, every folder) as a platform
/// team would run it, with Koordinator's profile: every manifest file is decided (a result per
/// object) or named on stderr as unreadable, and every workload whose Pod template a Pod
/// endpoint sees had its template checked (no silent pass of a template a Pod rule refuses).
#[test]
fn every_upstream_corpus_file_is_decided_or_named_unreadable() {
    let raw = fixtures().join("examples/raw");
    let mut folders: Vec<std::path::PathBuf> = std::fs::read_dir(&raw)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    folders.sort();
    assert!(folders.len() >= 6, "{folders:?}");
    let mut templates = 0;
    for folder in &folders {
        let out = check(&[
            "--profile",
            "koordinator",
            "--exclude-namespace",
            "",
            "-o",
            "json",
            folder.to_str().unwrap(),
        ]);
        let (report, err) = (json_of(&out), stderr(&out));
        let results = report["results"].as_array().unwrap();
        let mut files: Vec<std::path::PathBuf> = Vec::new();
        let mut stack = vec![folder.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if p
                    .extension()
                    .is_some_and(|x| x == "yaml" || x == "yml" || x == "json")
                {
                    files.push(p);
                }
            }
        }
        assert!(!files.is_empty(), "{folder:?}");
        for f in &files {
            let name = f.to_str().unwrap();
            let decided = results.iter().any(|r| r["file"] == name);
            let named = err.contains(&format!("{name}:"));
            assert!(decided || named, "{name}: neither decided nor named\n{err}");
        }
        // Exit 2 exactly when a file was unreadable; otherwise the verdicts decide.
        let unread = files
            .iter()
            .any(|f| err.contains(&format!("{}:", f.display())));
        assert_eq!(
            out.status.code() == Some(2),
            unread,
            "{folder:?}: {:?}\n{err}",
            out.status.code()
        );
        // The objects as read, by file, document and List item.
        let read: BTreeMap<(String, u64, Option<u64>), Value> = files
            .iter()
            .filter_map(|f| admission_check::input::read(std::slice::from_ref(f)).ok())
            .flatten()
            .map(|m| {
                let key = (
                    m.source.file.clone(),
                    m.source.document as u64,
                    m.source.item.map(|i| i as u64),
                );
                (key, m.object)
            })
            .collect();
        for r in results {
            let key = (
                r["file"].as_str().unwrap().to_owned(),
                r["document"].as_u64().unwrap(),
                r["item"].as_u64(),
            );
            let object = match &r["mutated"] {
                Value::Null => read[&key].clone(),
                m => m.clone(),
            };
            let ns = r["namespace"].as_str().unwrap_or("default");
            let pods = admission_check::templates::pods_of(&object, ns);
            if pods.is_empty() || matches!(r["result"].as_str(), Some("denied" | "undecided")) {
                continue;
            }
            templates += pods.len();
            for p in &pods {
                let said = format!("the Pods of {} checked", p.path);
                assert!(
                    r["notes"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|n| n.as_str().unwrap().starts_with(&said)),
                    "{}: {said} missing: {r:#}",
                    r["file"]
                );
            }
        }
        eprintln!("{}: {}", folder.display(), report["summary"]);
    }
    assert!(
        templates > 0,
        "no workload template in the corpus was checked"
    );
}

/// Workload quota offline (WQ, `docs/workload-quota.md`): a Deployment and a PyTorchJob judged
/// whole against the quota given with `--state`, its usage read from the `child-request`
/// annotation.
#[test]
fn workloads_are_judged_whole_against_the_state_quotas() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state.yaml");
    std::fs::write(
        &state,
        "apiVersion: scheduling.sigs.k8s.io/v1alpha1\nkind: ElasticQuota\nmetadata: {name: team-a, namespace: team-a, annotations: {quota.scheduling.koordinator.sh/child-request: '{\"nvidia.com/gpu\":\"24\"}'}}\nspec: {max: {nvidia.com/gpu: \"32\"}}\n",
    )
    .unwrap();
    let container = "{name: pytorch, image: i, resources: {requests: {nvidia.com/gpu: \"8\"}, limits: {nvidia.com/gpu: \"8\"}}}";
    let job = |name: &str, workers: u32| {
        format!(
            "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {{name: {name}, namespace: team-a}}\nspec:\n  pytorchReplicaSpecs:\n    Master: {{replicas: 1, template: {{spec: {{containers: [{container}]}}}}}}\n    Worker: {{replicas: {workers}, template: {{spec: {{containers: [{container}]}}}}}}\n"
        )
    };
    let manifests = dir.path().join("jobs.yaml");
    std::fs::write(
        &manifests,
        format!("{}---\n{}", job("llama-ft", 7), job("small", 1)),
    )
    .unwrap();
    let out = check(&[
        "--state",
        state.to_str().unwrap(),
        manifests.to_str().unwrap(),
    ]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
    assert!(
        text.contains("[WQ-2] PyTorchJob team-a/llama-ft needs nvidia.com/gpu=64 (Master 1×8, Worker 7×8); quota team-a allows at most nvidia.com/gpu=32"),
        "{text}"
    );
    assert!(
        text.contains("warning: WQ-3: PyTorchJob team-a/small needs nvidia.com/gpu=16 (Master 1×8, Worker 1×8); quota team-a has nvidia.com/gpu=8 free now"),
        "{text}"
    );
    assert!(
        text.contains("1 admitted with warnings, 1 denied"),
        "{text}"
    );
}

/// An object of a group our webhooks serve, in a version they do not (a newer upstream release),
/// is UNCHECKED, never ADMITTED; `--strict` fails the run on it. A group nobody here serves is
/// still just not sent.
#[test]
fn a_served_group_in_an_unknown_version_is_unchecked_and_fails_under_strict() {
    let manifest = "apiVersion: registry.volcano.sh/v1beta1\nkind: Model\nmetadata: {name: m, namespace: team-a}\nspec: {}\n---\napiVersion: example.com/v1\nkind: Thing\nmetadata: {name: t, namespace: team-a}\n";
    let out = check_with_stdin(&[], Some(manifest));
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("-:1  Model team-a/m  UNCHECKED"), "{text}");
    assert!(
        text.contains("unchecked, unknown version: the webhooks here serve registry.volcano.sh in v1alpha1 only, not v1beta1"),
        "{text}"
    );
    assert!(text.contains("-:2  Thing team-a/t  ADMITTED"), "{text}");
    assert!(text.contains("1 unchecked (unknown version)"), "{text}");
    let strict = check_with_stdin(&["--strict"], Some(manifest));
    assert_eq!(strict.status.code(), Some(1), "{}", stdout(&strict));
    let json = json_of(&check_with_stdin(&["-o", "json"], Some(manifest)));
    assert_eq!(json["results"][0]["result"], "unchecked");
    assert_eq!(json["summary"]["unchecked"], 1);
    let junit = stdout(&check_with_stdin(&["-o", "junit"], Some(manifest)));
    assert!(junit.contains("<skipped"), "{junit}");
}

/// Input the manifest reader used to get wrong: a UTF-8 byte-order mark, flow-style YAML that
/// looks like JSON, and a key given twice (refused with its line, as the API server's strict
/// field validation refuses it).
#[test]
fn boms_flow_yaml_and_duplicate_keys_are_read_as_kubectl_reads_them() {
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: team-a}\nspec: {containers: [{name: c, image: busybox}]}\n";
    let out = check_with_stdin(&[], Some(&format!("\u{feff}{pod}")));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let flow = "{apiVersion: v1, kind: Pod, metadata: {name: p, namespace: team-a}, spec: {containers: [{name: c, image: busybox}]}}\n";
    let out = check_with_stdin(&[], Some(flow));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stdout(&out).contains("Pod team-a/p  ADMITTED"),
        "{}",
        stdout(&out)
    );
    // A key given twice: kubectl keeps the last value and says nothing, the API server never
    // sees the first; admitted, with a warning naming the key.
    for text in [
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: p\n  name: q\n",
        r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "p", "name": "q"}}"#,
    ] {
        let out = check_with_stdin(&["-o", "json"], Some(text));
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}{}",
            stdout(&out),
            stderr(&out)
        );
        let r = &json_of(&out)["results"][0];
        assert_eq!(r["name"], "q", "{r:#}");
        assert_eq!(r["result"], "warned", "{r:#}");
        assert!(
            r["warnings"][0]
                .as_str()
                .unwrap()
                .starts_with("metadata.name: the key is given twice"),
            "{r:#}"
        );
    }
}

/// The same object twice in one run is created, then updated, as `kubectl apply` sends them;
/// objects given with --old are in the cluster state the rules read.
#[test]
fn a_repeated_identity_is_an_update_and_old_objects_join_the_state() {
    let pod = |qos: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: p, namespace: team-a, labels: {{koordinator.sh/qosClass: {qos}}}}}\nspec: {{containers: [{{name: c, image: busybox}}]}}\n"
        )
    };
    // PV-2: the QoS class of a Pod is immutable, so the second is refused as an UPDATE.
    let out = check_with_stdin(
        &["-o", "json"],
        Some(&format!("{}---\n{}", pod("LS"), pod("BE"))),
    );
    let json = json_of(&out);
    assert_eq!(json["results"][0]["operation"], "CREATE", "{json}");
    assert_eq!(json["results"][1]["operation"], "UPDATE", "{json}");
    assert_eq!(json["results"][1]["result"], "denied", "{json}");
    // A quota given only with --old is found by the pod's quota rules.
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old.yaml");
    std::fs::write(
        &old,
        "apiVersion: scheduling.sigs.k8s.io/v1alpha1\nkind: ElasticQuota\nmetadata: {name: team-a, namespace: team-a}\nspec: {max: {cpu: \"1\"}}\n",
    )
    .unwrap();
    let big = "apiVersion: v1\nkind: Pod\nmetadata: {name: big, namespace: team-a, labels: {quota.scheduling.koordinator.sh/name: team-a}}\nspec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: \"2\"}}}]}\n";
    let out = check_with_stdin(&["--old", old.to_str().unwrap()], Some(big));
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stdout(&out).contains("exceeded quota"), "{}", stdout(&out));
}

/// Directory mode file by file: a Helm template is named on stderr, a chart's `Chart.yaml` and a
/// Kustomization (no objects) are named as ignored, every other file is still checked, and the
/// run ends with exit 2.
#[test]
fn one_unreadable_file_does_not_hide_the_others() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("Chart.yaml"),
        "apiVersion: v2\nname: demo\nversion: 0.1.0\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("deployment.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {{ .Release.Name }}\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("pod.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: team-a}\nspec: {containers: [{name: c, image: busybox}]}\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [pod.yaml]\n",
    )
    .unwrap();
    let out = check(&[dir.path().to_str().unwrap()]);
    let (text, err) = (stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(2), "{text}{err}");
    assert!(text.contains("Pod team-a/p  ADMITTED"), "{text}");
    // Tools' configuration is named and left out, neither admitted nor refused.
    assert!(
        text.contains(
            "Chart.yaml:1    IGNORED\n  not a Kubernetes object but a Helm chart's Chart.yaml"
        ),
        "{text}"
    );
    assert!(
        text.contains("kustomization.yaml:1  Kustomization  IGNORED"),
        "{text}"
    );
    assert!(
        text.contains(
            "1 objects: 1 admitted, 0 admitted with warnings, 0 denied; 2 documents ignored"
        ),
        "{text}"
    );
    // The file that cannot be read is in the report people read, and counted.
    assert!(
        text.contains("deployment.yaml  UNREADABLE\n  ")
            && text.contains(
                "deployment.yaml: document 1 (line 4): a Go or Helm template, not a manifest"
            ),
        "{text}"
    );
    assert!(text.contains("; 1 files unreadable"), "{text}");
    assert!(
        err.contains("deployment.yaml: document 1 (line 4)"),
        "and on stderr: {err}"
    );
    let dir_arg = dir.path().to_str().unwrap();
    let template = dir.path().join("deployment.yaml").display().to_string();
    // JSON: listed and counted, beside the results.
    let json = check(&["-o", "json", dir_arg]);
    assert_eq!(json.status.code(), Some(2));
    let report = json_of(&json);
    assert_eq!(report["summary"]["unreadable"], 1, "{report:#}");
    assert_eq!(report["summary"]["objects"], 1, "{report:#}");
    assert_eq!(
        report["unreadable"],
        serde_json::json!([{"file": template, "document": 1, "line": 4,
            "message": "a Go or Helm template, not a manifest: render it first (`helm template`, `kustomize build`) and check the output"}]),
        "{report:#}"
    );
    assert!(stderr(&json).contains("deployment.yaml: document 1 (line 4)"));
    // JUnit: an errored case of its own.
    let junit = stdout(&check(&["-o", "junit", dir_arg]));
    assert!(
        junit.contains("errors=\"1\"")
            && junit.contains(&format!("{template}:4 unreadable"))
            && junit.contains("type=\"unreadable\""),
        "{junit}"
    );
    // SARIF: an error at the line, a failed invocation, and still a valid log.
    let sarif = json_of(&check(&["-o", "sarif", dir_arg]));
    let run = &sarif["runs"][0];
    let result = run["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["ruleId"] == "unreadable")
        .unwrap_or_else(|| panic!("{sarif:#}"));
    assert_eq!(result["level"], "error");
    assert_eq!(
        result["locations"][0]["physicalLocation"]["region"]["startLine"], 4,
        "{result:#}"
    );
    assert_eq!(run["invocations"][0]["executionSuccessful"], false);
    assert_eq!(
        run["invocations"][0]["toolExecutionNotifications"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    let errors = sarif_errors(&sarif);
    assert!(errors.is_empty(), "{errors:#?}");
    let github = sarif_errors_of_kind(&sarif, "Gh");
    assert!(github.is_empty(), "{github:#?}");
}

/// WQ-6 judges a workload's Pod template with the state the Pod check reads (the template's
/// Pods get their PriorityClass's priority when created), and its warning is located at the
/// template it names.
#[test]
fn template_warnings_read_the_pods_state_and_sit_at_the_template() {
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: team-a}\nspec:\n  replicas: 1\n  selector: {matchLabels: {app: a}}\n  template:\n    metadata:\n      labels: {app: a, koordinator.sh/qosClass: BE}\n    spec:\n      priorityClassName: koord-prod\n      containers: [{name: c, image: busybox, resources: {requests: {cpu: '1'}, limits: {cpu: '1'}}}]\n";
    let out = check_with_stdin(&["--profile", "koordinator"], Some(deployment));
    let text = stdout(&out);
    assert!(
        text.contains("WQ-6: Deployment team-a/d: pods of spec.template would be refused by PV-2: Pod: Forbidden: koordinator.sh/qosClass=BE and priorityClass=koord-prod cannot be used in combination"),
        "{text}"
    );
    let sarif = json_of(&check_with_stdin(
        &["--profile", "koordinator", "-o", "sarif"],
        Some(deployment),
    ));
    let wq6 = sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["ruleId"] == "WQ-6")
        .unwrap_or_else(|| panic!("{sarif:#}"));
    assert_eq!(
        wq6["locations"][0]["physicalLocation"]["region"],
        serde_json::json!({"startLine": 7, "startColumn": 3}),
        "{wq6:#}"
    );
}

/// A quota-tree refusal names the field it is about and is located there.
#[test]
fn quota_tree_findings_sit_at_their_field() {
    let quota = "apiVersion: scheduling.sigs.k8s.io/v1alpha1\nkind: ElasticQuota\nmetadata:\n  name: team-a\n  namespace: team-a\n  labels:\n    quota.scheduling.koordinator.sh/parent: nobody\nspec:\n  max: {cpu: '2'}\n  min: {cpu: '3'}\n";
    let alone = quota.replace(
        "    quota.scheduling.koordinator.sh/parent: nobody\n",
        "    team: a\n",
    );
    let text = stdout(&check_with_stdin(&["--complete-state"], Some(&alone)));
    assert!(
        text.contains(
            "QV-S  spec.min[cpu] (line 10, column 9): resourceKey cpu of quota team-a min 3 > max 2"
        ),
        "{text}"
    );
    // The mutator looks the parent up first (QM-3); the validator's QV-T says the same.
    let orphan = quota.replace("  min: {cpu: '3'}", "  min: {cpu: '1'}");
    let text = stdout(&check_with_stdin(&["--complete-state"], Some(&orphan)));
    assert!(
        text.contains("QM-3  metadata.labels[quota.scheduling.koordinator.sh/parent] (line 7, column 5): fill quota team-a failed, parent not exist"),
        "{text}"
    );
    let text = stdout(&check_with_stdin(
        &[
            "--complete-state",
            "--endpoint",
            "/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota",
        ],
        Some(&orphan),
    ));
    assert!(
        text.contains("QV-T  metadata.labels[quota.scheduling.koordinator.sh/parent] (line 7, column 5): team-a has parentName nobody but not find parentInfo in quotaInfoMap"),
        "{text}"
    );
}

/// `--profile koordinator`: Koordinator's PriorityClasses, which every installation has, so its
/// own BE pods are not refused for want of them.
#[test]
fn the_koordinator_profile_adds_its_priority_classes() {
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: be, namespace: team-a, labels: {koordinator.sh/qosClass: BE}}\nspec:\n  priorityClassName: koord-batch\n  containers: [{name: c, image: busybox, resources: {requests: {kubernetes.io/batch-cpu: \"1000\"}, limits: {kubernetes.io/batch-cpu: \"1000\"}}}]\n";
    // Without the classes, the refusal rests on a PriorityClass the state lacks: undecided
    // (exit 4), naming it; with --complete-state the same refusal is a denial.
    let without = check_with_stdin(&[], Some(pod));
    assert_eq!(without.status.code(), Some(4), "{}", stdout(&without));
    assert!(
        stdout(&without).contains("Pod team-a/be  UNDECIDED")
            && stdout(&without).contains("the state does not hold: PriorityClass koord-batch"),
        "{}",
        stdout(&without)
    );
    let complete = check_with_stdin(&["--complete-state"], Some(pod));
    assert_eq!(complete.status.code(), Some(1), "{}", stdout(&complete));
    assert!(stdout(&complete).contains("Pod team-a/be  DENIED"));
    let with = check_with_stdin(&["--profile", "koordinator"], Some(pod));
    assert_eq!(with.status.code(), Some(0), "{}", stdout(&with));
    assert!(
        stdout(&with).contains("Pod team-a/be  ADMITTED"),
        "{}",
        stdout(&with)
    );
}

/// `--test` honours `--state` (joined to every test's state) and `-o junit`/`sarif`, and one
/// unreadable suite does not hide the others' results (exit 2 at the end).
#[test]
fn test_suites_honour_state_and_outputs_and_survive_an_unreadable_suite() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("pod.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: big, namespace: team-a, labels: {quota.scheduling.koordinator.sh/name: team-a}}\nspec: {containers: [{name: c, image: busybox, resources: {requests: {cpu: \"2\"}}}]}\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("quota.yaml"),
        "apiVersion: scheduling.sigs.k8s.io/v1alpha1\nkind: ElasticQuota\nmetadata: {name: team-a, namespace: team-a}\nspec: {max: {cpu: \"1\"}}\n",
    )
    .unwrap();
    let suite = dir.path().join("quota-suite.yaml");
    std::fs::write(
        &suite,
        "name: quota from --state\ntests:\n- name: over the quota\n  resources: [pod.yaml]\n  expect: {result: denied, messageContains: [exceeded quota]}\n",
    )
    .unwrap();
    let broken = dir.path().join("broken-suite.yaml");
    std::fs::write(&broken, "name: [unclosed\n").unwrap();
    let state = dir.path().join("quota.yaml");
    let args = |extra: &[&str]| {
        let mut a = vec![
            "--test",
            "--state",
            state.to_str().unwrap(),
            suite.to_str().unwrap(),
        ];
        a.extend_from_slice(extra);
        a.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let run = |a: Vec<String>| check(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let out = run(args(&[]));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stdout(&out).contains("PASS  quota from --state / over the quota"),
        "{}",
        stdout(&out)
    );
    let junit = run(args(&["-o", "junit"]));
    assert!(
        stdout(&junit).contains("<testcase name=\"over the quota\""),
        "{}",
        stdout(&junit)
    );
    let sarif = json_of(&run(args(&["-o", "sarif"])));
    assert_eq!(sarif["version"], "2.1.0");
    let both = run(args(&[broken.to_str().unwrap()]));
    assert_eq!(both.status.code(), Some(2), "{}", stdout(&both));
    assert!(
        stdout(&both).contains("PASS  quota from --state"),
        "{}",
        stdout(&both)
    );
    assert!(
        stderr(&both).contains("broken-suite.yaml"),
        "{}",
        stderr(&both)
    );
}

/// A suite's endpoint typo is named as such, and "admitted" of an object nothing checked fails
/// (it would pass whatever the rules say).
#[test]
fn a_suite_names_endpoint_typos_and_refuses_admitted_for_what_nothing_checked() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("thing.yaml"),
        "apiVersion: example.com/v1\nkind: Thing\nmetadata: {name: t, namespace: team-a}\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("pod.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: team-a}\nspec: {containers: [{name: c, image: busybox}]}\n",
    )
    .unwrap();
    let suite = dir.path().join("suite.yaml");
    std::fs::write(
        &suite,
        "name: s\ntests:\n- name: unchecked kind\n  resources: [thing.yaml]\n  expect: {result: admitted}\n- name: typo\n  resources: [pod.yaml]\n  endpoints: [/validate-podd]\n  expect: {result: admitted}\n",
    )
    .unwrap();
    let out = check(&["--test", suite.to_str().unwrap()]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("FAIL  s / unchecked kind"), "{text}");
    assert!(
        text.contains("nothing checked it (no webhook serves Thing example.com/v1 on CREATE)"),
        "{text}"
    );
    assert!(text.contains("FAIL  s / typo"), "{text}");
    assert!(
        text.contains("no endpoint \"/validate-podd\"; known: "),
        "{text}"
    );
}

/// Kthena v1.0's published examples: admission-check decides each object of a Kthena kind as the
/// real API server with upstream's CRDs and handlers does (the e2e test's expected answers,
/// `dev/e2e/tests/kthena_v1_examples.json`); that takes the CRD's defaults, applied before
/// any webhook (a ModelServing without `replicas` is sent with 1, not refused by MS-5).
#[test]
fn kthena_v1_examples_are_decided_as_the_cluster_decides_them() {
    let dir = fixtures().join("examples/raw/kthena-v1.0.0");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| p.display().to_string())
        .collect();
    files.sort();
    let args: Vec<&str> = ["-o", "json"]
        .into_iter()
        .chain(files.iter().map(String::as_str))
        .collect();
    let report = json_of(&check(&args));
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("dev/e2e/tests/kthena_v1_examples.json")).unwrap(),
    )
    .unwrap();
    let mut seen = 0;
    for r in report["results"].as_array().unwrap() {
        let group = r["apiVersion"].as_str().unwrap_or_default();
        if !group.contains(".serving.volcano.sh/") {
            continue;
        }
        let file = std::path::Path::new(r["file"].as_str().unwrap());
        let id = format!(
            "{}#{}",
            file.file_name().unwrap().to_string_lossy(),
            r["document"].as_u64().unwrap() - 1
        );
        let want = if expected[&id]["allowed"].as_bool().unwrap() {
            "admitted"
        } else {
            "denied"
        };
        // The one difference is the reader's: this file's `defaultMode: 0777` is octal 511 to
        // kubectl (YAML 1.1, as admission-check reads it) but the string "0777" to the e2e
        // test's YAML 1.2 reader, whose request the CRD schema refuses. Read as kubectl reads
        // it, the ModelServing reaches the webhooks, which admit it.
        let want = if id == "models_deepseek-v4-flash_modelserving.yaml#0" {
            assert_eq!(
                want, "denied",
                "the e2e answer changed: drop this exception"
            );
            assert!(r["refusals"].as_array().unwrap().is_empty(), "{id}: {r}");
            "admitted"
        } else {
            want
        };
        assert_eq!(r["result"].as_str(), Some(want), "{id}: {r}");
        seen += 1;
    }
    assert_eq!(seen, expected.as_object().unwrap().len());
}

/// Kubeflow Trainer v2.3's published examples: admission-check decides each as the real API
/// server with upstream's CRDs and handlers does (`dev/e2e/tests/trainer_v2_examples.json`),
/// given the runtimes first, as the e2e test creates them first: a TrainJob is judged against
/// the runtime it names, which admission-check finds among the manifests before it.
#[test]
fn trainer_v2_examples_are_decided_as_the_cluster_decides_them() {
    let dir = fixtures().join("examples/raw/kubeflow-trainer-v2.3.0");
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    // Files holding only runtimes first; a file with both has its runtime first already.
    let only_runtimes = |p: &std::path::PathBuf| {
        !std::fs::read_to_string(p)
            .unwrap()
            .contains("kind: TrainJob")
    };
    files.sort_by_key(|p| (!only_runtimes(p), p.clone()));
    let files: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
    let args: Vec<&str> = ["-o", "json"]
        .into_iter()
        .chain(files.iter().map(String::as_str))
        .collect();
    let report = json_of(&check(&args));
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("dev/e2e/tests/trainer_v2_examples.json")).unwrap(),
    )
    .unwrap();
    let mut seen = 0;
    for r in report["results"].as_array().unwrap() {
        let file = std::path::Path::new(r["file"].as_str().unwrap());
        let id = format!(
            "{}#{}",
            file.file_name().unwrap().to_string_lossy(),
            r["document"].as_u64().unwrap() - 1
        );
        let want = if expected[&id]["allowed"].as_bool().unwrap() {
            "admitted"
        } else {
            "denied"
        };
        assert_eq!(r["result"].as_str(), Some(want), "{id}: {r}");
        seen += 1;
    }
    // The e2e test's two extra TrainJobs are not files.
    assert_eq!(seen, expected.as_object().unwrap().len() - 2);
}

/// A workload is admitted by the API server whatever its template says, but its controller's
/// Pods are then refused: each template is checked as the Pod its controller creates, and a
/// refusal names the workload's own field.
#[test]
fn pod_templates_are_checked_as_the_pods_their_controllers_create() {
    let template = "{metadata: {labels: {app: w, koordinator.sh/qosClass: BE, koordinator.sh/priority-class: koord-prod}}, spec: {containers: [{name: c, image: busybox}]}}";
    let workloads = [
        (
            "Deployment",
            "apps/v1",
            format!("{{replicas: 2, selector: {{matchLabels: {{app: w}}}}, template: {template}}}"),
            "spec.template",
        ),
        (
            "DaemonSet",
            "apps/v1",
            format!("{{selector: {{matchLabels: {{app: w}}}}, template: {template}}}"),
            "spec.template",
        ),
        (
            "CronJob",
            "batch/v1",
            format!(
                "{{schedule: '* * * * *', jobTemplate: {{spec: {{template: {}}}}}}}",
                // A Job's Pods must not restart in place (API-9).
                template.replace(
                    "spec: {containers",
                    "spec: {restartPolicy: OnFailure, containers"
                )
            ),
            "spec.jobTemplate.spec.template",
        ),
    ];
    for (kind, api_version, spec, path) in workloads {
        let manifest = format!(
            "apiVersion: {api_version}\nkind: {kind}\nmetadata: {{name: w, namespace: team-a}}\nspec: {spec}\n"
        );
        let out = check_with_stdin(&["-o", "json"], Some(&manifest));
        assert_eq!(out.status.code(), Some(1), "{kind}: {}", stdout(&out));
        let r = &json_of(&out)["results"][0];
        assert_eq!(r["result"], "denied", "{r:#}");
        let refusal = &r["refusals"][0];
        assert_eq!(refusal["findings"][0]["rule"], "PV-2", "{r:#}");
        // Located in the workload's text: its spec is on line 4.
        assert_eq!(refusal["findings"][0]["line"], 4, "{r:#}");
        assert!(
            refusal["findings"][0]["field"]
                .as_str()
                .unwrap()
                .starts_with(path),
            "{r:#}"
        );
        assert!(
            refusal["message"].as_str().unwrap().starts_with(&format!(
                "the workload is admitted, but the Pods of {path} would be refused"
            )),
            "{r:#}"
        );
        // The same template at a QoS the priority allows: admitted, and its Pods were checked.
        let fine = manifest.replace("koordinator.sh/qosClass: BE", "koordinator.sh/qosClass: LS");
        let out = check_with_stdin(&["-o", "json"], Some(&fine));
        assert_eq!(out.status.code(), Some(0), "{kind}: {}", stdout(&out));
        let r = &json_of(&out)["results"][0];
        assert!(r.get("skipped").is_none(), "{r:#}");
        assert!(
            r["notes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|n| n.as_str().unwrap().starts_with(&format!(
                    "the Pods of {path} checked as its controller creates them: "
                ))),
            "{r:#}"
        );
    }
}

/// A namespace the state does not give exists, unlabelled (but for the name label the API server
/// sets), as in a cluster: a colocation profile whose namespaceSelector asks for a label does
/// not apply there, and does where the state's namespace carries it.
#[test]
fn a_namespace_absent_from_the_state_exists_unlabelled() {
    let dir = tempfile::tempdir().unwrap();
    let profile = "apiVersion: config.koordinator.sh/v1alpha1\nkind: ClusterColocationProfile\nmetadata: {name: colocation}\nspec:\n  namespaceSelector: {matchLabels: {koordinator.sh/enable-colocation: \"true\"}}\n  selector: {matchLabels: {app: batch}}\n  qosClass: LS\n  labels: {koordinator.sh/mutated: \"true\"}\n";
    let labelled = "apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a, labels: {koordinator.sh/enable-colocation: \"true\"}}\n";
    let state = dir.path().join("state.yaml");
    std::fs::write(&state, format!("{profile}---\n{labelled}")).unwrap();
    let state = state.display().to_string();
    let pod = |ns: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: p, namespace: {ns}, labels: {{app: batch}}}}\nspec: {{containers: [{{name: c, image: busybox}}]}}\n"
        )
    };
    let mutated = |ns: &str| {
        let out = check_with_stdin(&["-o", "json", "--state", &state], Some(&pod(ns)));
        let r = &json_of(&out)["results"][0];
        assert_eq!(r["result"], "admitted", "{r:#}");
        !r["mutations"].as_array().unwrap().is_empty()
    };
    assert!(
        mutated("team-a"),
        "the profile applies in its labelled namespace"
    );
    assert!(
        !mutated("team-b"),
        "an absent namespace has no labels the profile asks for"
    );
}

/// As `kubectl apply` sends them: the same manifest again changes nothing (nothing is sent); a
/// changed one is an UPDATE of the object as stored, the manifest merged in (what the webhooks
/// set, such as a Pod's priority, kept); objects named by `generateName` are each a new object.
#[test]
fn repeats_are_applied_as_kubectl_apply_sends_them() {
    let pod = |labels: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: p, namespace: team-a, labels: {{{labels}}}}}\nspec: {{priorityClassName: koord-batch, containers: [{{name: c, image: busybox}}]}}\n"
        )
    };
    let run = |text: &str| {
        let out = check_with_stdin(&["-o", "json", "--profile", "koordinator"], Some(text));
        (out.status.code(), json_of(&out))
    };
    let (code, json) = run(&format!("{}---\n{}", pod("app: a"), pod("app: a")));
    assert_eq!(code, Some(0), "{json:#}");
    assert_eq!(json["results"][0]["operation"], "CREATE", "{json:#}");
    assert_eq!(json["results"][1]["operation"], "UNCHANGED", "{json:#}");
    assert_eq!(json["results"][1]["result"], "admitted", "{json:#}");
    assert!(
        json["results"][1]["endpoints"]
            .as_array()
            .unwrap()
            .is_empty(),
        "{json:#}"
    );
    // A new label: an UPDATE of the stored Pod, whose priority the first check set.
    let (code, json) = run(&format!("{}---\n{}", pod("app: a"), pod("app: a, tier: x")));
    assert_eq!(json["results"][1]["operation"], "UPDATE", "{json:#}");
    assert_eq!(code, Some(0), "{json:#}");
    assert_eq!(json["results"][1]["result"], "admitted", "{json:#}");
    let generated = "apiVersion: v1\nkind: Pod\nmetadata: {generateName: p-, namespace: team-a, labels: {koordinator.sh/qosClass: LS}}\nspec: {containers: [{name: c, image: busybox}]}\n";
    let other = generated.replace("qosClass: LS", "qosClass: BE");
    let (_, json) = run(&format!("{generated}---\n{other}"));
    assert_eq!(json["results"][0]["operation"], "CREATE", "{json:#}");
    assert_eq!(json["results"][1]["operation"], "CREATE", "{json:#}");
}

/// `--strict` fails a run that read no Kubernetes object: an empty file, only tools'
/// configuration; without it, such a run passes and says it checked nothing.
#[test]
fn strict_fails_on_zero_objects() {
    for input in [
        "",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n",
    ] {
        let out = check_with_stdin(&["--strict"], Some(input));
        assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
        assert!(
            stderr(&out).contains("--strict: no Kubernetes object was read"),
            "{}",
            stderr(&out)
        );
        let out = check_with_stdin(&[], Some(input));
        assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
        assert!(
            stdout(&out).starts_with("0 objects") || stdout(&out).contains("\n0 objects"),
            "{}",
            stdout(&out)
        );
    }
}
