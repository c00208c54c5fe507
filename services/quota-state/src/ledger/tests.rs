use super::*;
use admission_kit::compat::go::QuantityFormat;
use std::sync::Arc;

fn cpu(n: i64) -> Amounts {
    Amounts::from([(
        "cpu".to_owned(),
        Amount {
            nano: i128::from(n) * NANO_PER_UNIT,
            format: QuantityFormat::DecimalSI,
        },
    )])
}

fn quota(name: &str, parent: Option<&str>, max_cpu: i64) -> QuotaSpec {
    QuotaSpec::simple(name, "ns", parent, cpu(max_cpu))
}

#[test]
fn stats_show_usage_limits_expiries_and_rebuilds() {
    let l = Ledger::new(Duration::from_millis(10));
    l.upsert_quota(quota("q", None, 4));
    let now = Instant::now();
    assert_eq!(
        l.admit("ns", "a", "q", &cpu(3), false, now),
        Admission::Allowed
    );
    let s = l.stats();
    assert_eq!((s.quotas, s.pods, s.reservations), (1, 0, 1));
    assert!(s.rebuilds >= 1);
    assert_eq!(
        s.usage,
        vec![QuotaUsage {
            quota: "q".into(),
            resource: "cpu".into(),
            used: 3.0,
            limit: Some(4.0)
        }]
    );
    // The pod never appears: its reservation expires at the next decision after the TTL.
    let later = now + Duration::from_millis(50);
    assert_eq!(
        l.admit("ns", "b", "q", &cpu(1), false, later),
        Admission::Allowed
    );
    let s = l.stats();
    assert_eq!((s.expired, s.reservations), (1, 1));
    assert_eq!(s.usage[0].used, 1.0);
}

fn keys(w: &[UsageWrite]) -> Vec<(&str, &str)> {
    w.iter()
        .map(|w| (w.name.as_str(), w.value.as_str()))
        .collect()
}

#[test]
fn usage_writes_show_each_changed_subtree_once_in_turn() {
    let l = Ledger::new(Duration::from_millis(10));
    l.upsert_quota(quota("p", None, 8));
    l.upsert_quota(quota("c", Some("p"), 4));
    let now = Instant::now();
    assert!(
        l.usage_writes(now, None, 10).is_empty(),
        "no usage, no annotation"
    );
    assert_eq!(
        l.admit("ns", "a", "c", &cpu(3), false, now),
        Admission::Allowed
    );
    assert!(
        l.usage_writes(now, None, 10).is_empty(),
        "a reservation no pod backs yet is never written as usage"
    );
    l.observe_pod("ns", "a", "c", cpu(3));
    let due = l.usage_writes(now, None, 10);
    assert_eq!(
        keys(&due),
        [("c", r#"{"cpu":"3"}"#), ("p", r#"{"cpu":"3"}"#)],
        "the pod counts, up the chain"
    );
    // Two changed, one write per round: the next round starts after the last one written.
    assert_eq!(
        keys(&l.usage_writes(now, None, 1)),
        [("c", r#"{"cpu":"3"}"#)]
    );
    let after = ("ns".to_owned(), "c".to_owned());
    assert_eq!(
        keys(&l.usage_writes(now, Some(&after), 1)),
        [("p", r#"{"cpu":"3"}"#)]
    );
    let after = ("ns".to_owned(), "p".to_owned());
    assert_eq!(
        keys(&l.usage_writes(now, Some(&after), 1)),
        [("c", r#"{"cpu":"3"}"#)],
        "wraps round"
    );
    for w in &due {
        l.observe_shown(&w.namespace, &w.name, &w.value);
    }
    assert!(l.usage_writes(now, None, 10).is_empty(), "shown already");
    // Another pod is admitted and never appears: nothing changes; once the first is gone,
    // the usage shown goes back to none.
    assert_eq!(
        l.admit("ns", "b", "c", &cpu(1), false, now),
        Admission::Allowed
    );
    assert!(l.usage_writes(now, None, 10).is_empty());
    l.delete_pod("ns", "a");
    let later = now + Duration::from_millis(20);
    assert_eq!(
        keys(&l.usage_writes(later, None, 10)),
        [("c", "{}"), ("p", "{}")]
    );
    l.observe_shown("ns", "c", "");
    l.observe_shown("ns", "p", "");
    assert!(l.usage_writes(later, None, 10).is_empty());
}

#[test]
fn usage_writes_leave_out_unknown_usage_duplicates_and_unchecked_quotas() {
    let l = Ledger::new(Duration::from_secs(30));
    l.upsert_quota(quota("q", None, 4));
    l.upsert_quota(QuotaSpec::simple("dup", "a", None, cpu(4)));
    l.upsert_quota(QuotaSpec::simple("dup", "b", None, cpu(4)));
    l.upsert_quota(quota(tree::keys::DEFAULT, None, 4));
    l.observe_pod("ns", "x", "q", cpu(1));
    l.observe_pod("a", "y", "dup", cpu(1));
    l.observe_pod("ns", "z", tree::keys::DEFAULT, cpu(1));
    assert_eq!(
        keys(&l.usage_writes(Instant::now(), None, 10)),
        [("q", r#"{"cpu":"1"}"#)]
    );
    l.observe_pod_usage("ns", "w", "q", Err("cpu: too large".into()));
    assert!(l.usage_writes(Instant::now(), None, 10).is_empty());
}

#[test]
fn an_unchanged_quota_keeps_the_tree() {
    let l = Ledger::new(Duration::from_secs(30));
    l.upsert_quota(quota("q", None, 4));
    let built = l.stats().rebuilds;
    l.upsert_quota(quota("q", None, 4));
    assert_eq!(l.stats().rebuilds, built);
    l.upsert_quota(quota("q", None, 5));
    assert_eq!(l.stats().rebuilds, built + 1);
}

#[test]
fn pv_4_reserve_then_observe_then_exceed() {
    let l = Ledger::new(Duration::from_secs(30));
    l.upsert_quota(quota("q", None, 4));
    let now = Instant::now();
    assert_eq!(
        l.admit("ns", "a", "q", &cpu(3), false, now),
        Admission::Allowed
    );
    l.observe_pod("ns", "a", "q", cpu(3));
    assert_eq!(
        l.used("q")["cpu"].milli(),
        3000,
        "reservation became usage, not counted twice"
    );
    assert_eq!(
        l.admit("ns", "b", "q", &cpu(2), false, now),
        Admission::Denied(
            "exceeded quota: ns/q, requested: cpu=2, used: cpu=3, limited: cpu=4".into()
        )
    );
    l.delete_pod("ns", "a");
    assert_eq!(
        l.admit("ns", "b", "q", &cpu(2), false, now),
        Admission::Allowed
    );
}

/// WQ-2 against an ancestor, WQ-3 against usage and reservations, and nothing reserved.
#[test]
fn wq_workload_checks_read_the_chain_and_reserve_nothing() {
    use quota_protocol::workload::Fit;
    let l = Ledger::new(Duration::from_secs(30));
    let mut org = quota("org", None, 8);
    org.info.is_parent = true;
    l.upsert_quota(org);
    l.upsert_quota(quota("team", Some("org"), 16));
    let now = Instant::now();
    let ask = |peak: i64| {
        l.check_workload(
            &WorkloadCheck {
                namespace: "ns",
                label: "team",
                pod: "job",
                peak: &cpu(peak),
                total: &cpu(peak),
                disable_default_quota: false,
                check_parent: true,
            },
            now,
        )
    };
    assert_eq!(
        ask(10),
        WorkloadOutcome::Checked {
            quota: "team".into(),
            fit: Fit::Never {
                quota: "org".into(),
                allowed: cpu(8)
            }
        }
    );
    l.observe_pod("ns", "running", "team", cpu(3));
    assert_eq!(
        l.admit("ns", "pending", "team", &cpu(2), false, now),
        Admission::Allowed
    );
    assert_eq!(
        ask(4),
        WorkloadOutcome::Checked {
            quota: "team".into(),
            fit: Fit::NotNow {
                quota: "org".into(),
                free: cpu(3)
            }
        }
    );
    assert_eq!(
        ask(3),
        WorkloadOutcome::Checked {
            quota: "team".into(),
            fit: Fit::Fits
        }
    );
    assert_eq!(l.reservations(), 1, "a workload check reserves nothing");
    let parent = l.check_workload(
        &WorkloadCheck {
            label: "org",
            ..WorkloadCheck {
                namespace: "ns",
                label: "",
                pod: "job",
                peak: &cpu(1),
                total: &cpu(1),
                disable_default_quota: false,
                check_parent: true,
            }
        },
        now,
    );
    assert!(
        matches!(parent, WorkloadOutcome::Refused { rule: "PV-3", .. }),
        "{parent:?}"
    );
    let missing = l.check_workload(
        &WorkloadCheck {
            namespace: "ns",
            label: "nope",
            pod: "job",
            peak: &cpu(1),
            total: &cpu(1),
            disable_default_quota: false,
            check_parent: true,
        },
        now,
    );
    assert_eq!(
        missing,
        WorkloadOutcome::Refused {
            quota: "nope".into(),
            rule: "PV-4",
            message: "elastic quota nope not found".into()
        }
    );
}

#[test]
fn a_pod_seen_before_its_namespace_quota_is_charged_once_the_quota_arrives() {
    let l = Ledger::new(Duration::from_secs(30));
    l.observe_pod("apps", "early", "", cpu(2));
    let mut q = quota("q", None, 3);
    q.namespaces = vec!["apps".into()];
    l.upsert_quota(q);
    assert_eq!(
        l.used("q")["cpu"].milli(),
        2000,
        "QN-4 resolved at the rebuild"
    );
    let check = PodCheck {
        cluster: "",
        namespace: "apps",
        name: "late",
        label: "",
        old_label: None,
        requests: &cpu(2),
        dry_run: false,
        disable_default_quota: false,
        check_parent: true,
        check_admission: true,
        caller: "webhook",
        review: "",
        peer: "",
        pod_uid: "",
    };
    assert_eq!(
        l.check_pod(&check, Instant::now()),
        PodOutcome::Denied {
            rule: "PV-4",
            message: "exceeded quota: ns/q, requested: cpu=2, used: cpu=2, limited: cpu=3".into()
        }
    );
    assert_eq!(
        l.check_pod(
            &PodCheck {
                cluster: "",
                old_label: Some("q"),
                label: "q",
                ..check
            },
            Instant::now()
        ),
        PodOutcome::Allowed { quota: "q".into() },
        "UPDATE that keeps the quota: PV-4.1 skips"
    );
}

#[test]
fn dry_run_reserves_nothing_and_retries_replace() {
    let l = Ledger::new(Duration::from_secs(30));
    l.upsert_quota(quota("q", None, 2));
    let now = Instant::now();
    assert_eq!(
        l.admit("ns", "a", "q", &cpu(2), true, now),
        Admission::Allowed
    );
    assert_eq!(l.used("q").get("cpu").map(|a| a.nano).unwrap_or(0), 0);
    assert_eq!(
        l.admit("ns", "a", "q", &cpu(2), false, now),
        Admission::Allowed
    );
    assert_eq!(
        l.admit("ns", "a", "q", &cpu(2), false, now),
        Admission::Allowed,
        "same pod again"
    );
    assert_eq!(l.used("q")["cpu"].milli(), 2000);
}

/// Sub-milli requests are counted exactly (upstream's `Quantity.Add`): four pods of
/// `500u` fill a `2m` quota, the fifth is refused with the exact amounts.
#[test]
fn sub_milli_requests_count_exactly() {
    let l = Ledger::new(Duration::from_secs(30));
    let two_milli = Amount::from_milli(2, QuantityFormat::DecimalSI);
    l.upsert_quota(QuotaSpec::simple(
        "q",
        "ns",
        None,
        Amounts::from([("cpu".to_owned(), two_milli)]),
    ));
    let half = Amounts::from([(
        "cpu".to_owned(),
        Amount {
            nano: 500_000,
            format: QuantityFormat::DecimalSI,
        },
    )]);
    let now = Instant::now();
    for p in ["a", "b", "c", "d"] {
        assert_eq!(l.admit("ns", p, "q", &half, false, now), Admission::Allowed);
    }
    assert_eq!(l.used("q")["cpu"].nano, 2_000_000);
    assert_eq!(
        l.admit("ns", "e", "q", &half, false, now),
        Admission::Denied(
            "exceeded quota: ns/q, requested: cpu=500u, used: cpu=2m, limited: cpu=2m".into()
        )
    );
}

/// Every outstanding reservation has exactly one deadline: a replaced, refused-and-restored
/// or released one leaves none behind, and the one kept still expires on time.
#[test]
fn each_reservation_has_one_deadline() {
    let l = Ledger::new(Duration::from_secs(5));
    l.upsert_quota(quota("q", None, 2));
    let t0 = Instant::now();
    let counts = |l: &Ledger| {
        let s = l.lock();
        (s.reservations.len(), s.deadlines.len())
    };
    assert_eq!(
        l.admit("ns", "a", "q", &cpu(1), false, t0),
        Admission::Allowed
    );
    // The same review asking again replaces it, keeping its deadline.
    let t1 = t0 + Duration::from_secs(2);
    assert_eq!(
        l.admit("ns", "a", "q", &cpu(1), false, t1),
        Admission::Allowed
    );
    assert_eq!(counts(&l), (1, 1));
    // Refused: the earlier reservation is put back, deadline and all.
    assert!(matches!(
        l.admit("ns", "a", "q", &cpu(3), false, t1),
        Admission::Denied(_)
    ));
    assert_eq!(counts(&l), (1, 1));
    assert_eq!(
        l.admit("ns", "b", "q", &cpu(1), false, t1),
        Admission::Allowed
    );
    assert!(l.release("ns", "b", "", ""));
    assert_eq!(counts(&l), (1, 1));
    // a's deadline is still t0 + 5 s: asking again never extends a reservation.
    l.lock().expire(t0 + Duration::from_secs(4));
    assert_eq!(counts(&l), (1, 1));
    l.lock().expire(t0 + Duration::from_secs(5));
    assert_eq!(counts(&l), (0, 0));
    assert_eq!(l.stats().expired, 1);
}

/// One pod's PV-4 question from review `review` of the caller `webhook`.
fn asked<'a>(
    namespace: &'a str,
    name: &'a str,
    label: &'a str,
    requests: &'a Amounts,
    review: &'a str,
) -> PodCheck<'a> {
    PodCheck {
        cluster: "",
        namespace,
        name,
        label,
        old_label: None,
        requests,
        dry_run: false,
        disable_default_quota: false,
        check_parent: false,
        check_admission: true,
        caller: "webhook",
        review,
        peer: "",
        pod_uid: "",
    }
}

fn allowed(o: PodOutcome) -> bool {
    matches!(o, PodOutcome::Allowed { .. })
}

fn denial(o: PodOutcome) -> String {
    match o {
        PodOutcome::Denied { message, .. } => message,
        other => panic!("admitted: {other:?}"),
    }
}

/// `asked` from member cluster `cluster`'s webhook.
fn asked_in<'a>(
    cluster: &'a str,
    namespace: &'a str,
    name: &'a str,
    requests: &'a Amounts,
    review: &'a str,
) -> PodCheck<'a> {
    PodCheck {
        cluster,
        caller: cluster,
        ..asked(namespace, name, "q", requests, review)
    }
}

#[test]
fn a_fleet_counts_every_member_and_names_the_split() {
    let l = Ledger::new(Duration::from_secs(30));
    l.upsert_quota(quota("q", None, 10));
    let now = Instant::now();
    let one = cpu(1);
    // The same namespace and pod name in two members are two pods.
    for i in 0..6 {
        l.observe_pod_usage_in("east", "ns", &format!("p{i}"), "q", Ok(one.clone()));
    }
    for i in 0..3 {
        l.observe_pod_usage_in("west", "ns", &format!("p{i}"), "q", Ok(one.clone()));
    }
    assert!(allowed(
        l.check_pod(&asked_in("west", "ns", "p3", &one, "r1"), now)
    ));
    assert_eq!(l.used("q")["cpu"].milli(), 10_000);
    for c in ["east", "west"] {
        assert_eq!(
            denial(l.check_pod(&asked_in(c, "ns", "p9", &one, "r2"), now)),
            "exceeded quota: ns/q, requested: cpu=1, used: cpu=10 (east 6, west 4), limited: cpu=10"
        );
    }
    let by = l.used_by_member("q");
    assert_eq!(by["east"]["cpu"].milli(), 6000);
    assert_eq!(
        by["west"]["cpu"].milli(),
        4000,
        "the reservation counts for west"
    );
    // West's pod event backs its reservation; a deletion in west frees room for east.
    l.observe_pod_usage_in("west", "ns", "p3", "q", Ok(one.clone()));
    assert_eq!(l.used("q")["cpu"].milli(), 10_000);
    l.delete_pod_in("west", "ns", "p0");
    assert!(allowed(
        l.check_pod(&asked_in("east", "ns", "p6", &one, "r3"), now)
    ));
    // East cannot release west's reservation: its release addresses its own pods.
    l.delete_pod_in("east", "ns", "p0");
    assert!(allowed(
        l.check_pod(&asked_in("west", "ns", "p7", &one, "r4"), now)
    ));
    assert!(!l.release_in("east", "ns", "p7", "r4", "east"));
    assert!(
        !l.release_in("west", "ns", "p7", "r4", "east"),
        "not its caller"
    );
    assert_eq!(l.reservations(), 2);
    assert!(l.release_in("west", "ns", "p7", "r4", "west"));
    // Several resources: each member's list.
    let mut text = String::new();
    split_text(&l.lock().split, "q", &cpu(9)).clone_into(&mut text);
    assert_eq!(text, " (east 6, west 3)");
    let two = Amounts::from([
        ("cpu".to_owned(), cpu(9)["cpu"]),
        ("memory".to_owned(), cpu(1)["cpu"]),
    ]);
    assert_eq!(
        split_text(&l.lock().split, "q", &two),
        " (east: cpu=6; west: cpu=3)"
    );
    assert_eq!(split_text(&HashMap::new(), "q", &two), "");
    // The write-back shows the pods' usage and each member's share, reservations left out.
    assert!(allowed(
        l.check_pod(&asked_in("east", "ns", "p8", &one, "r5"), now)
    ));
    let w = l.usage_writes(now, None, 10);
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].value, r#"{"cpu":"8"}"#);
    assert_eq!(w[0].by_member, r#"{"east":{"cpu":"5"},"west":{"cpu":"3"}}"#);
    l.observe_shown("ns", "q", &w[0].value);
    l.observe_shown_split("ns", "q", &w[0].by_member);
    assert!(l.usage_writes(now, None, 10).is_empty());
    l.delete_pod_in("west", "ns", "p1");
    l.observe_pod_usage_in("east", "ns", "p9", "q", Ok(one.clone()));
    let w = l.usage_writes(now, None, 10);
    assert_eq!(
        (w[0].value.as_str(), w[0].by_member.as_str()),
        (
            r#"{"cpu":"8"}"#,
            r#"{"east":{"cpu":"6"},"west":{"cpu":"2"}}"#
        ),
        "the same total, another split: written"
    );
}

#[test]
fn a_quota_naming_its_members_refuses_pods_of_the_others() {
    let l = Ledger::new(Duration::from_secs(30));
    let mut parent = quota("p", None, 10);
    parent.members = quota_protocol::spec::spans_of(" east , ,east");
    assert_eq!(parent.members.as_deref(), Some(&["east".to_owned()][..]));
    assert_eq!(quota_protocol::spec::spans_of(" , "), None);
    l.upsert_quota(parent);
    l.upsert_quota(quota("q", Some("p"), 10));
    let one = cpu(1);
    let now = Instant::now();
    assert!(allowed(
        l.check_pod(&asked_in("east", "ns", "a", &one, "r1"), now)
    ));
    assert_eq!(
        denial(l.check_pod(&asked_in("west", "ns", "b", &one, "r2"), now)),
        "quota ns/p spans member clusters east only: pod west/ns/b cannot be charged to it"
    );
    // One cluster: no members to tell apart.
    assert!(allowed(
        l.check_pod(&asked("ns", "c", "q", &one, "r3"), now)
    ));
}

#[test]
fn a_stalled_member_keeps_its_reservations_until_it_lists_again() {
    let ttl = Duration::from_secs(30);
    let l = Ledger::new(ttl);
    l.upsert_quota(quota("q", None, 10));
    let now = Instant::now();
    let four = cpu(4);
    assert!(allowed(
        l.check_pod(&asked_in("west", "ns", "a", &four, "r1"), now)
    ));
    assert!(allowed(
        l.check_pod(&asked_in("east", "ns", "b", &four, "r2"), now)
    ));
    l.member_watch("west", false);
    // Past the window: east's reservation expires, west's is held (its pod may exist).
    let later = now + ttl + Duration::from_secs(1);
    assert_eq!(
        denial(l.check_pod(&asked_in("east", "ns", "c", &cpu(7), "r3"), later)),
        "exceeded quota: ns/q, requested: cpu=7, used: cpu=4 (west 4), limited: cpu=10"
    );
    assert_eq!(l.reservations(), 1);
    // Its relist shows the pod: the reservation becomes usage.
    l.observe_pod_usage_in("west", "ns", "a", "q", Ok(four.clone()));
    l.member_watch("west", true);
    assert_eq!(l.reservations(), 0);
    assert_eq!(l.used("q")["cpu"].milli(), 4000);
    // A held reservation whose pod the relist does not show gets a new window.
    assert!(allowed(
        l.check_pod(&asked_in("west", "ns", "d", &four, "r4"), later)
    ));
    l.member_watch("west", false);
    let much_later = later + ttl + Duration::from_secs(1);
    assert!(!allowed(l.check_pod(
        &asked_in("east", "ns", "e", &cpu(3), "r5"),
        much_later
    )));
    l.member_watch("west", true);
    assert_eq!(l.reservations(), 1);
    let after = Instant::now() + ttl + Duration::from_secs(1);
    assert!(allowed(
        l.check_pod(&asked_in("east", "ns", "e", &cpu(3), "r5"), after)
    ));
    assert_eq!(l.used("q")["cpu"].milli(), 7000);
}

#[test]
fn a_removed_member_leaves_nothing_behind() {
    let l = Ledger::new(Duration::from_secs(30));
    l.upsert_quota(quota("q", None, 10));
    l.set_namespaces_in("east", ["ns"]);
    l.set_namespaces_in("west", ["ns"]);
    l.observe_pod_usage_in("east", "ns", "a", "q", Ok(cpu(2)));
    l.observe_pod_usage_in("west", "ns", "a", "q", Ok(cpu(3)));
    assert!(allowed(l.check_pod(
        &asked_in("west", "ns", "b", &cpu(1), "r1"),
        Instant::now()
    )));
    assert_eq!(l.pods_in("west"), [("ns".to_owned(), "a".to_owned())]);
    l.drop_member("west");
    assert_eq!(l.used("q")["cpu"].milli(), 2000);
    assert_eq!(l.reservations(), 0);
    assert!(l.pods_in("west").is_empty());
    assert_eq!(
        l.known().1,
        Vec::<PodKey>::new(),
        "fleet pods are not the one cluster's"
    );
    assert!(l.used_by_member("q").contains_key("east"));
    assert!(!l.used_by_member("q").contains_key("west"));
    // West's namespaces are gone with it: a pod there reserves nothing now.
    assert!(allowed(l.check_pod(
        &asked_in("west", "ns", "c", &cpu(1), "r2"),
        Instant::now()
    )));
    assert_eq!(l.reservations(), 0);
    // East's stay.
    assert!(allowed(l.check_pod(
        &asked_in("east", "ns", "c", &cpu(1), "r3"),
        Instant::now()
    )));
    assert_eq!(l.reservations(), 1);
}

#[test]
fn a_review_replaces_or_releases_only_its_own_reservation() {
    let l = Ledger::new(Duration::from_secs(30));
    l.upsert_quota(quota("q", None, 10));
    let now = Instant::now();
    let (five, one) = (cpu(5), cpu(1));
    assert!(allowed(
        l.check_pod(&asked("ns", "p", "q", &five, "real"), now)
    ));
    // A forged review names the pending pod with a tiny request: it gets a reservation of
    // its own, and the real one stays.
    assert!(allowed(
        l.check_pod(&asked("ns", "p", "q", &one, "forged"), now)
    ));
    assert_eq!(l.used("q")["cpu"].milli(), 6000);
    // A later rule refuses the forged review: its release drops its own reservation only.
    assert!(l.release("ns", "p", "forged", "webhook"));
    assert!(!l.release("ns", "p", "forged", "webhook"));
    assert_eq!(l.used("q")["cpu"].milli(), 5000);
    assert!(
        !l.release("ns", "p", "real", "someone-else"),
        "not the owner"
    );
    assert_eq!(l.used("q")["cpu"].milli(), 5000);
    // The pod appears: its own requests count, and every reservation of its name ends.
    assert!(allowed(
        l.check_pod(&asked("ns", "p", "q", &one, "forged-2"), now)
    ));
    l.observe_pod("ns", "p", "q", cpu(5));
    assert_eq!((l.used("q")["cpu"].milli(), l.reservations()), (5000, 0));
    assert_eq!(l.stats().backed.count, 1);
}

#[test]
fn outstanding_reservations_hold_at_most_their_share() {
    let limits = ReservationLimits {
        quota_share_permille: 500,
        namespace_share_permille: 1000,
        ..ReservationLimits::default()
    };
    let l = Ledger::new(Duration::from_secs(30)).with_limits(limits);
    l.upsert_quota(quota("parent", None, 20));
    l.upsert_quota(quota("q", Some("parent"), 10));
    let now = Instant::now();
    let (three, two, one) = (cpu(3), cpu(2), cpu(1));
    assert!(allowed(
        l.check_pod(&asked("ns", "a", "q", &three, "1"), now)
    ));
    assert!(allowed(l.check_pod(&asked("ns", "b", "q", &two, "2"), now)));
    let text = denial(l.check_pod(&asked("ns", "c", "q", &one, "3"), now));
    assert_eq!(
        text,
        "pod ns/c: quota ns/q: cpu=5 is held already by pods admitted but not yet created, \
         and cpu=1 more would pass 500‰ of its limit cpu=10; retry in a few seconds"
    );
    // Once a pod is seen, its share is free again.
    l.observe_pod("ns", "a", "q", cpu(3));
    assert!(allowed(l.check_pod(&asked("ns", "c", "q", &one, "3"), now)));
    // The ancestors' shares count too: 3 of parent's 10 are outstanding.
    l.upsert_quota(quota("q2", Some("parent"), 20));
    let eight = cpu(8);
    let text = denial(l.check_pod(&asked("ns", "d", "q2", &eight, "4"), now));
    assert!(
        text.contains("quota ns/parent: cpu=3 is held already"),
        "{text}"
    );
}

/// `asked` from webhook peer `peer`, for the pod of uid `uid`.
fn asked_from<'a>(
    peer: &'a str,
    uid: &'a str,
    name: &'a str,
    requests: &'a Amounts,
    review: &'a str,
) -> PodCheck<'a> {
    PodCheck {
        peer,
        pod_uid: uid,
        ..asked("ns", name, "q", requests, review)
    }
}

#[test]
fn an_untrusted_peer_holds_a_tenth_and_gives_way_to_a_trusted_one() {
    let l = Ledger::new(Duration::from_secs(30));
    l.upsert_quota(quota("q", None, 20));
    let now = Instant::now();
    let (ten, one) = (cpu(10), cpu(1));
    // Alone, one forged pod of the whole quota passes (nothing else is outstanding) ...
    assert!(allowed(l.check_pod(
        &asked_from("10.0.0.9", "", "ghost-0", &ten, "f0"),
        now
    )));
    // ... and the next one finds the untrusted share taken.
    let text = denial(l.check_pod(&asked_from("10.0.0.9", "", "ghost-1", &one, "f1"), now));
    assert_eq!(
        text,
        "pod ns/ghost-1: quota ns/q: from addresses that no created pod has vouched for \
         (10.0.0.9), cpu=10 is held already by pods admitted but not yet created, and cpu=1 \
         more would pass 100‰ of its limit cpu=20; retry in a few seconds"
    );
    // A pod from a trusted caller (none named) is not refused for it: the forged
    // reservation gives way.
    let eleven = cpu(11);
    assert!(allowed(
        l.check_pod(&asked("ns", "real", "q", &eleven, "r1"), now)
    ));
    let st = l.stats();
    assert_eq!((st.preempted, st.untrusted_reservations), (1, 0));
    assert_eq!(st.untrusted_refused, 1);
}

#[test]
fn the_pod_a_review_named_vouches_for_its_peer() {
    let l = Ledger::new(Duration::from_secs(30));
    l.upsert_quota(quota("q", None, 10));
    let now = Instant::now();
    let one = cpu(1);
    // The API server's first review, from an address nobody vouched for yet, then its pod.
    assert!(allowed(l.check_pod(
        &asked_from("10.0.0.1", "uid-a", "a", &one, "r1"),
        now
    )));
    assert_eq!(l.stats().untrusted_reservations, 1);
    // A pod event with another uid (a pod of the same name created otherwise) vouches for
    // nobody.
    l.observe_pod_event("", "ns", "a", "uid-other", "q", Ok(one.clone()));
    assert_eq!(l.stats().trusted_peers, 0);
    l.delete_pod("ns", "a");
    assert!(allowed(l.check_pod(
        &asked_from("10.0.0.1", "uid-b", "b", &one, "r2"),
        now
    )));
    l.observe_pod_event("", "ns", "b", "uid-b", "q", Ok(one.clone()));
    let st = l.stats();
    assert_eq!((st.trusted_peers, st.untrusted_reservations), (1, 0));
    // From now on its pods take what a forger holds.
    let nine = cpu(9);
    assert!(allowed(l.check_pod(
        &asked_from("10.0.0.9", "", "ghost", &nine, "f1"),
        now
    )));
    let eight = cpu(8);
    assert!(allowed(l.check_pod(
        &asked_from("10.0.0.1", "uid-c", "c", &eight, "r3"),
        now
    )));
    assert_eq!(l.stats().preempted, 1);
    // A pending trusted pod is never dropped for anyone.
    let two = cpu(2);
    let text = denial(l.check_pod(&asked_from("10.0.0.1", "uid-d", "d", &two, "r4"), now));
    assert!(text.starts_with("exceeded quota: ns/q"), "{text}");
}

#[test]
fn two_peers_claiming_one_pod_earn_no_trust() {
    let l = Ledger::new(Duration::from_secs(30));
    l.upsert_quota(quota("q", None, 100));
    let now = Instant::now();
    let one = cpu(1);
    // A forger that read the uid from a watch and raced quota-state's own.
    assert!(allowed(l.check_pod(
        &asked_from("10.0.0.1", "uid-a", "a", &one, "r1"),
        now
    )));
    assert!(allowed(l.check_pod(
        &asked_from("10.0.0.9", "uid-a", "a", &one, "f1"),
        now
    )));
    l.observe_pod_event("", "ns", "a", "uid-a", "q", Ok(one.clone()));
    assert_eq!(l.stats().trusted_peers, 0);
    // The same address twice (the API server's retry) is one peer.
    for r in ["r2", "r3"] {
        assert!(allowed(
            l.check_pod(&asked_from("10.0.0.1", "uid-b", "b", &one, r), now)
        ));
    }
    l.observe_pod_event("", "ns", "b", "uid-b", "q", Ok(one.clone()));
    assert_eq!(l.stats().trusted_peers, 1);
}

#[test]
fn untrusted_peers_hold_few_reservations() {
    let limits = ReservationLimits {
        untrusted_per_peer: 2,
        untrusted_total: 3,
        ..ReservationLimits::default()
    };
    let l = Ledger::new(Duration::from_secs(30)).with_limits(limits);
    l.upsert_quota(quota("q", None, 1000));
    let now = Instant::now();
    let small = Amounts::from([(
        "cpu".to_owned(),
        Amount {
            nano: NANO_PER_UNIT / 100,
            format: admission_kit::compat::go::QuantityFormat::DecimalSI,
        },
    )]);
    let ask = |peer, name, review| l.check_pod(&asked_from(peer, "", name, &small, review), now);
    assert!(allowed(ask("10.0.0.8", "a", "1")));
    assert!(allowed(ask("10.0.0.8", "b", "2")));
    let text = denial(ask("10.0.0.8", "c", "3"));
    assert!(
        text.contains("2 pods admitted from 10.0.0.8 and 2 from all addresses"),
        "{text}"
    );
    assert!(allowed(ask("10.0.0.9", "d", "4")));
    assert!(denial(ask("10.0.0.7", "e", "5")).contains("(limits 2 and 3)"));
    // A trusted caller's pod in the same namespace is not held back by their count.
    let limits = ReservationLimits {
        per_namespace: 3,
        ..limits
    };
    let l2 = Ledger::new(Duration::from_secs(30)).with_limits(limits);
    l2.upsert_quota(quota("q", None, 1000));
    for (peer, name) in [("10.0.0.8", "a"), ("10.0.0.8", "b"), ("10.0.0.9", "c")] {
        assert!(allowed(
            l2.check_pod(&asked_from(peer, "", name, &small, name), now)
        ));
    }
    assert!(allowed(
        l2.check_pod(&asked("ns", "real", "q", &small, "r"), now)
    ));
    assert_eq!(l2.stats().preempted, 3);
}

#[test]
fn one_pod_above_the_share_passes_while_nothing_else_is_outstanding() {
    let limits = ReservationLimits {
        quota_share_permille: 500,
        namespace_share_permille: 500,
        ..ReservationLimits::default()
    };
    let l = Ledger::new(Duration::from_secs(30)).with_limits(limits);
    l.upsert_quota(quota("q", None, 10));
    let now = Instant::now();
    let (eight, one) = (cpu(8), cpu(1));
    assert!(allowed(
        l.check_pod(&asked("ns", "big", "q", &eight, "1"), now)
    ));
    let text = denial(l.check_pod(&asked("ns", "small", "q", &one, "2"), now));
    assert!(text.contains("retry in a few seconds"), "{text}");
}

#[test]
fn one_namespace_holds_at_most_its_share_of_a_quota() {
    let limits = ReservationLimits {
        quota_share_permille: 1000,
        namespace_share_permille: 300,
        ..ReservationLimits::default()
    };
    let l = Ledger::new(Duration::from_secs(30)).with_limits(limits);
    l.upsert_quota(quota("shared", None, 10));
    let now = Instant::now();
    let (three, one) = (cpu(3), cpu(1));
    assert!(allowed(
        l.check_pod(&asked("a", "x", "shared", &three, "1"), now)
    ));
    let text = denial(l.check_pod(&asked("a", "y", "shared", &one, "2"), now));
    assert!(
        text.starts_with("pod a/y: namespace a on quota ns/shared: cpu=3 is held already"),
        "{text}"
    );
    assert!(allowed(
        l.check_pod(&asked("b", "y", "shared", &three, "3"), now)
    ));
}

#[test]
fn pods_of_namespaces_that_do_not_exist_reserve_nothing() {
    let l = Ledger::new(Duration::from_secs(30));
    l.upsert_quota(quota("q", None, 10));
    l.set_namespaces(["ns", "team-b"]);
    let now = Instant::now();
    let nine = cpu(9);
    assert!(allowed(
        l.check_pod(&asked("ghost", "p", "q", &nine, "1"), now)
    ));
    assert_eq!(l.reservations(), 0);
    assert!(l.used("q").values().all(Amount::is_zero));
    // Once the namespace exists, its pods reserve as any other.
    l.observe_namespace("ghost", true);
    assert!(allowed(
        l.check_pod(&asked("ghost", "p", "q", &nine, "1"), now)
    ));
    assert_eq!(l.reservations(), 1);
    l.observe_namespace("ghost", false);
    let one = cpu(1);
    assert!(allowed(
        l.check_pod(&asked("ghost", "r", "q", &one, "2"), now)
    ));
    assert_eq!(l.reservations(), 1);
}

#[test]
fn reservations_expire() {
    let l = Ledger::new(Duration::from_secs(5));
    l.upsert_quota(quota("q", None, 1));
    let t0 = Instant::now();
    assert_eq!(
        l.admit("ns", "a", "q", &cpu(1), false, t0),
        Admission::Allowed
    );
    assert!(matches!(
        l.admit("ns", "b", "q", &cpu(1), false, t0),
        Admission::Denied(_)
    ));
    assert_eq!(
        l.admit("ns", "b", "q", &cpu(1), false, t0 + Duration::from_secs(6)),
        Admission::Allowed
    );
}

#[test]
fn ancestors_are_checked_too() {
    let l = Ledger::new(Duration::from_secs(30));
    l.upsert_quota(quota("parent", None, 3));
    l.upsert_quota(quota("a", Some("parent"), 2));
    l.upsert_quota(quota("b", Some("parent"), 2));
    let now = Instant::now();
    assert_eq!(
        l.admit("ns", "p1", "a", &cpu(2), false, now),
        Admission::Allowed
    );
    assert_eq!(
        l.admit("ns", "p2", "b", &cpu(2), false, now),
        Admission::Denied(
            "exceeded quota: ns/parent, requested: cpu=2, used: cpu=2, limited: cpu=3".into()
        )
    );
}

#[test]
fn unknown_duplicate_and_unchecked_quotas() {
    let l = Ledger::new(Duration::from_secs(30));
    let now = Instant::now();
    assert_eq!(
        l.admit("ns", "a", "nope", &cpu(1), false, now),
        Admission::Denied("elastic quota nope not found".into())
    );
    assert_eq!(
        l.admit("ns", "a", "koordinator-default-quota", &cpu(1), false, now),
        Admission::Allowed
    );
    l.upsert_quota(quota("dup", None, 1));
    l.upsert_quota(QuotaSpec::simple("dup", "other", None, cpu(1)));
    assert_eq!(
        l.admit("ns", "a", "dup", &cpu(1), false, now),
        Admission::Denied("more than one elastic quota dup found".into())
    );
}

#[test]
fn concurrent_admissions_never_exceed_the_quota() {
    let l = Arc::new(Ledger::new(Duration::from_secs(60)));
    l.upsert_quota(quota("q", None, 100));
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let l = l.clone();
            std::thread::spawn(move || {
                (0..50)
                    .filter(|i| {
                        l.admit(
                            "ns",
                            &format!("p-{t}-{i}"),
                            "q",
                            &cpu(1),
                            false,
                            Instant::now(),
                        ) == Admission::Allowed
                    })
                    .count()
            })
        })
        .collect();
    let admitted: usize = handles.into_iter().map(|h| h.join().unwrap_or(0)).sum();
    assert_eq!(admitted, 100);
    assert_eq!(l.used("q")["cpu"].milli(), 100_000);
}

type Usage = std::collections::BTreeMap<String, std::collections::BTreeMap<String, i128>>;

fn nonzero<'a>(m: impl Iterator<Item = (&'a String, &'a Amounts)>) -> Usage {
    m.map(|(q, a)| {
        (
            q.clone(),
            a.iter()
                .filter(|(_, v)| v.nano != 0)
                .map(|(k, v)| (k.clone(), v.nano))
                .collect::<std::collections::BTreeMap<_, _>>(),
        )
    })
    .filter(|(_, a)| !a.is_empty())
    .collect()
}

/// Usage counted from scratch in the installed tree: each pod and reservation along its
/// chain, and each group's quota checked against QN.
fn recount(s: &State) -> (Usage, std::collections::BTreeMap<String, u32>) {
    let view = s.view.clone().unwrap_or_default();
    let mut used: HashMap<String, Amounts> = HashMap::new();
    let mut bad: HashMap<String, u32> = HashMap::new();
    for e in s.pods.values() {
        let q = tree::quota_name(
            &*view.topology,
            Some(&e.group.label),
            &e.group.namespace,
            false,
        );
        assert_eq!(*s.groups[&e.group].quota, *q, "group {:?}", e.group);
        let chain = view.chain(&q);
        if e.uncountable {
            count_along(&mut bad, &chain, 1, true);
        } else {
            add_along(&mut used, &chain, requests_iter(&e.requests), 1);
        }
    }
    for r in s.reservations.values() {
        add_along(
            &mut used,
            &view.chain(&r.quota),
            requests_iter(&r.amounts),
            1,
        );
    }
    (nonzero(used.iter()), bad.into_iter().collect())
}

/// Pod events, admissions and releases on one thread while quotas move between parents,
/// bind namespaces and disappear on another, the tree rebuilt in the background: once it
/// settles, every quota's usage is what counting from scratch gives.
#[test]
fn background_rebuilds_keep_usage_exact_while_pods_and_quotas_change() {
    let l = Arc::new(Ledger::new(Duration::from_secs(600)));
    l.spawn_rebuilder().unwrap();
    let leaf = |j: usize, parent: usize, binds: bool| {
        let mut q = quota(&format!("c{}", j % 4), Some(&format!("p{parent}")), 1_000);
        if binds {
            q.namespaces = vec![format!("n{}", j % 5)];
        }
        q
    };
    for p in 0..2 {
        let mut q = quota(&format!("p{p}"), None, 1_000_000);
        q.info.is_parent = true;
        l.upsert_quota(q);
    }
    for j in 0..4 {
        l.upsert_quota(leaf(j, j % 2, true));
    }
    let done = Arc::new(AtomicBool::new(false));
    let changes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let pods = {
        let (l, done, changes) = (l.clone(), done.clone(), changes.clone());
        std::thread::spawn(move || {
            let mut r: u64 = 7;
            let mut n = 0;
            // At least 20,000 events, and on until 100 quota changes happened meanwhile.
            while n < 20_000 || changes.load(Ordering::Relaxed) < 100 {
                n += 1;
                r = r.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                let x = (r >> 33) as usize;
                let ns = format!("n{}", x % 5);
                let name = format!("pod{}", (x / 5) % 40);
                let label = ["", "c0", "c1", "c2", "c3", "p0"][(x / 200) % 6];
                match (x / 1_200) % 10 {
                    0..=4 => l.observe_pod(&ns, &name, label, cpu((x % 4) as i64)),
                    5 => l.observe_pod_usage(&ns, &name, label, Err("too big".into())),
                    6 | 7 => l.delete_pod(&ns, &name),
                    _ => {
                        let requests = cpu(1);
                        // Half for pods that come, half for names no pod ever takes (their
                        // reservations stay outstanding through the quota changes).
                        let name = if x.is_multiple_of(2) {
                            name.clone()
                        } else {
                            format!("r{}", (x / 5) % 40)
                        };
                        l.check_pod(
                            &PodCheck {
                                cluster: "",
                                namespace: &ns,
                                name: &name,
                                label,
                                old_label: None,
                                requests: &requests,
                                dry_run: false,
                                disable_default_quota: false,
                                check_parent: false,
                                check_admission: true,
                                caller: "t",
                                review: "",
                                peer: "",
                                pod_uid: "",
                            },
                            Instant::now(),
                        );
                    }
                }
            }
            done.store(true, Ordering::Relaxed);
        })
    };
    let mut j = 0;
    while !done.load(Ordering::Relaxed) {
        match j % 7 {
            6 => l.delete_quota(&format!("c{}", j % 4), "ns"),
            _ => l.upsert_quota(leaf(j, (j / 4) % 2, j % 3 != 0)),
        }
        j += 1;
        changes.store(j, Ordering::Relaxed);
        std::thread::sleep(Duration::from_micros(200));
    }
    pods.join().unwrap();
    for _ in 0..100_000 {
        let s = l.lock();
        if s.fresh() && !s.building {
            let (used, bad) = recount(&s);
            assert_eq!(nonzero(s.subtree.iter()), used);
            // The reservations' own sums (the shares' basis) moved with the tree as well.
            let mut unbacked: HashMap<String, Amounts> = HashMap::new();
            for r in s.reservations.values() {
                let chain = s.view.as_ref().unwrap().chain(&r.quota);
                add_along(&mut unbacked, &chain, requests_iter(&r.amounts), 1);
            }
            assert!(!unbacked.is_empty(), "some reservations are outstanding");
            assert_eq!(nonzero(s.unbacked.iter()), nonzero(unbacked.iter()));
            let uncountable: std::collections::BTreeMap<_, _> =
                s.uncountable.clone().into_iter().collect();
            assert_eq!(uncountable, bad);
            assert!(!used.is_empty() && !bad.is_empty(), "{used:?} {bad:?}");
            assert!(s.rebuilds >= 2, "{} rebuilds", s.rebuilds);
            return;
        }
        drop(s);
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("the tree never settled");
}
