//! Every registry case in fixtures/reviews/registry and examples/registry, through the
//! handler in-process and through `registry-webhook review`.

use admission_testing::fixtures::{check_in_process, check_with_binary, fixtures_root, run_all};
use std::path::Path;

#[test]
fn registry_fixtures_pass_in_process() {
    let app = registry_webhook::app();
    let root = fixtures_root();
    match run_all(&root, "registry", |c| check_in_process(&app, c)) {
        Ok(n) => assert!(n >= 85, "only {n} cases found"),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn registry_fixtures_pass_through_the_review_command() {
    let bin = Path::new(env!("CARGO_BIN_EXE_registry-webhook"));
    let root = fixtures_root();
    match run_all(&root, "registry", |c| check_with_binary(bin, c)) {
        Ok(n) => assert!(n >= 85, "only {n} cases found"),
        Err(e) => panic!("{e}"),
    }
}

/// The mutation fuzzer: seeded variants of every case keep every property that holds
/// whatever upstream decides (`admission_testing::variants`). `ADMISSION_VARIANTS_PER_CASE` and
/// `ADMISSION_VARIANTS_SEED` make another or a longer run.
#[test]
fn registry_variants_keep_every_property() {
    admission_testing::variants::check_domain(&registry_webhook::app(), "registry");
}

/// Kthena v1.0's cases (ours, derived from upstream's webhook tests at v1.0.0; the source of
/// each names the test and the rule ids), in-process and through `registry-webhook review`.
#[test]
fn kthena_v1_fixtures_pass() {
    let app = registry_webhook::app();
    let bin = Path::new(env!("CARGO_BIN_EXE_registry-webhook"));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    for (how, n) in [
        (
            "in process",
            run_all(&root, "kthena-v1", |c| check_in_process(&app, c)),
        ),
        (
            "review command",
            run_all(&root, "kthena-v1", |c| check_with_binary(bin, c)),
        ),
    ] {
        match n {
            Ok(n) => assert!(n >= 88, "{how}: only {n} cases found"),
            Err(e) => panic!("{how}: {e}"),
        }
    }
}

/// The mutation fuzzer on Kthena v1.0's cases.
#[test]
fn kthena_v1_variants_keep_every_property() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    admission_testing::variants::check_cases(&registry_webhook::app(), &root, "kthena-v1");
}

/// Kthena's handlers never read `request.oldObject`, so an UPDATE is decided on
/// its object whatever the old object is (null items, wrong types, not an object at all): every
/// registry case sent as an UPDATE with such an old object gets the answer it gets with its own
/// object as the old one.
#[test]
fn an_unread_old_object_never_fails_an_update() {
    let app = registry_webhook::app();
    let root = fixtures_root();
    let odd_old_objects = [
        serde_json::json!({"spec": {"backends": [null], "metrics": "x"}}),
        serde_json::json!({"metadata": [], "spec": 7}),
        serde_json::json!("a string"),
    ];
    let updates = std::cell::Cell::new(0);
    let n = run_all(&root, "registry", |c| {
        let mut review = c.review.clone();
        let Some(request) = review.get_mut("request") else {
            return Ok(());
        };
        if request["operation"] != "CREATE" {
            return Ok(());
        }
        request["operation"] = "UPDATE".into();
        request["oldObject"] = request["object"].clone();
        let answer = |r: &serde_json::Value| {
            admission_testing::fixtures::answer_in_process(&app, &c.path, r, &c.state)
        };
        let expected = answer(&review);
        updates.set(updates.get() + 1);
        for old in &odd_old_objects {
            review["request"]["oldObject"] = old.clone();
            let got = answer(&review);
            if got != expected {
                return Err(format!(
                    "{}: old object {old}: {got:?}, not {expected:?}",
                    c.name
                ));
            }
        }
        Ok(())
    });
    match n {
        Ok(n) => assert!(n >= 85, "only {n} cases found"),
        Err(e) => panic!("{e}"),
    }
    assert!(
        updates.get() >= 60,
        "only {} cases sent as UPDATEs",
        updates.get()
    );
}
