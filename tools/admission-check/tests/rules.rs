//! `admission-check rules` and `explain`: every rule id a service reports is documented beside
//! its rule (the doc comment the listing prints), every rule belongs to a family with kinds and
//! a spec page, and every example written beside a rule is decided as it says.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use admission_check::rules;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `"MV-03"`-shaped string literals in the code (before any test module) of a service.
fn reported_ids(service: &str) -> BTreeSet<String> {
    let mut files = Vec::new();
    rust_files(
        &repo().join("services").join(service).join("src"),
        &mut files,
    );
    let mut ids = BTreeSet::new();
    for f in files {
        if f.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for piece in code.split('"').skip(1).step_by(2) {
            let id_like = rules::is_rule_id(piece);
            if id_like {
                ids.insert(piece.to_owned());
            }
        }
    }
    ids
}

#[test]
fn every_reported_rule_id_is_documented_beside_its_rule() {
    let all = rules::all();
    let mut undocumented = Vec::new();
    for service in [
        "registry-webhook",
        "scheduling-webhook",
        "node-config-webhook",
        "training-webhook",
        "lifecycle-webhook",
        "quota-state",
    ] {
        for id in reported_ids(service) {
            if !all.iter().any(|r| r.doc.service == service && r.id == id) {
                undocumented.push(format!("{service} {id}"));
            }
        }
    }
    assert!(
        undocumented.is_empty(),
        "rule ids reported but documented nowhere (a `/// ID: …` paragraph above the rule): {undocumented:?}"
    );
    for r in &all {
        assert!(
            !r.kinds.is_empty() && !r.page.is_empty(),
            "{} of {}: no family in rules::FAMILIES",
            r.id,
            r.doc.service
        );
        assert!(repo().join(r.page).is_file(), "{}: {}", r.id, r.page);
        assert!(!r.summary().is_empty(), "{}", r.id);
    }
}

#[test]
fn every_example_beside_a_rule_is_decided_as_it_says() {
    let mut checked = 0;
    let mut wrong = Vec::new();
    let mut kinds = BTreeSet::new();
    for r in rules::all() {
        for (expect, manifest, said) in rules::checked_examples(&r) {
            kinds.insert(expect.label());
            if !rules::example_holds(&r, expect, &said) {
                wrong.push(format!(
                    "{} ({}): example {manifest} is {said}",
                    r.id, r.doc.service
                ));
            }
            checked += 1;
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(checked >= 60, "only {checked} examples");
    // Every kind of example paragraph is read and checked somewhere (a label the reader
    // dropped would leave its examples unchecked and the rules without examples).
    for label in rules::Expect::ALL.map(rules::Expect::label) {
        assert!(kinds.contains(label), "no `{label}` example is checked");
    }
}

#[test]
fn rules_lists_and_explain_describes() {
    let bin = env!("CARGO_BIN_EXE_admission-check");
    let out = Command::new(bin).arg("rules").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let count = rules::all().len();
    assert!(text.ends_with(&format!("{count} rules\n")), "{text}");
    assert!(
        text.lines().any(|l| l.starts_with("MV-19 ")
            && l.contains("registry-webhook")
            && l.contains("Model")
            && l.contains("services/registry-webhook/src/model.rs:")),
        "{text}"
    );
    let out = Command::new(bin)
        .args(["rules", "--json"])
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["rules"].as_array().unwrap().len(), count);

    let out = Command::new(bin)
        .args(["explain", "api-3"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("API-3 (kube-apiserver)\n"), "{text}");
    assert!(text.contains("example (refused): "), "{text}");
    assert!(text.contains("checked now: denied by API-3"), "{text}");
    assert!(text.contains("checked now: admitted"), "{text}");
    // An id two services use is explained for each.
    let out = Command::new(bin)
        .args(["explain", "PV-3"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("PV-3 (quota-state)"), "{text}");
    let out = Command::new(bin)
        .args(["explain", "XX-99"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
