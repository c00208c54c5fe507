//! One quota across clusters (docs/fleet-quota.md) on three real control planes: the hub (the
//! shared one, holding the ElasticQuotas, quota-state and the member Secrets) and two members,
//! east and west, each running scheduling-webhook with the client certificate quota-state
//! issued for it, copied into the member as a user does.

use std::path::{Path, PathBuf};
use std::time::Duration;

use e2e::quota::{create_retrying, pod};
use e2e::{Env, eventually, metric};
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, PostParams};
use quota_protocol::proto::quota_state_client::QuotaStateClient;
use quota_protocol::proto::{AdmitPodRequest, Amount, ReleaseRequest};
use serde_json::json;
use testenv::system::{Options, System, quota_state_client_files_of, quota_state_client_secret};

/// Where the member's scheduling-webhook reads its client certificate.
const MEMBER_CLIENT_SECRET: &str = "quota-state-client-scheduling-webhook";

/// A member cluster: its control plane and its scheduling-webhook.
struct Member {
    name: &'static str,
    cp: testenv::ControlPlane,
    client: kube::Client,
    system: Option<System>,
}

impl Member {
    async fn start(name: &'static str, ns: &str) -> Self {
        let (cp, client) = e2e::own_control_plane(ns).await;
        Self {
            name,
            cp,
            client,
            system: None,
        }
    }

    fn pods(&self, ns: &str) -> Api<Pod> {
        Api::namespaced(self.client.clone(), ns)
    }
}

fn options(bin_dir: &Path, dir: PathBuf, kubeconfig: PathBuf, ns: &str) -> Options {
    Options {
        bin_dir: bin_dir.to_path_buf(),
        services: vec!["scheduling-webhook".into()],
        kubeconfig,
        dir,
        namespace_selector: admission_kit::cluster::registration::only_namespace(ns),
        name_suffix: format!("-{ns}"),
        namespace: ns.to_owned(),
        port_base: None,
        client_ca: None,
        webhook_args: Vec::new(),
        args_of: Default::default(),
        env: Vec::new(),
    }
}

/// Declares `m` to the hub: a Secret holding its kubeconfig.
async fn declare(hub: &kube::Client, ns: &str, m: &Member) {
    let kubeconfig = std::fs::read_to_string(&m.cp.kubeconfig).unwrap();
    let s: Secret = serde_json::from_value(json!({
        "metadata": {"name": m.name, "labels": {"fleet.admission-webhooks.io/member": "true"}},
        "stringData": {"kubeconfig": kubeconfig}
    }))
    .unwrap();
    Api::<Secret>::namespaced(hub.clone(), ns)
        .create(&PostParams::default(), &s)
        .await
        .unwrap();
}

/// Waits for the client Secret quota-state issued for `m` in the hub to be copied into `m`
/// (`--member-client-secret`: quota-state keeps the copy renewed), and starts `m`'s
/// scheduling-webhook against quota-state at `url` with it.
async fn join(hub: &kube::Client, ns: &str, m: &mut Member, url: &str, bin_dir: &Path) {
    let issued = format!("quota-state-client-member-{}", m.name);
    let data = quota_state_client_secret(hub, ns, &issued)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    eventually(Duration::from_secs(30), || async {
        let copied = quota_state_client_secret(&m.client, ns, MEMBER_CLIENT_SECRET)
            .await
            .map_err(|e| e.to_string())?;
        if copied == data {
            Ok(())
        } else {
            Err(format!(
                "{}: the copy differs from the issued Secret",
                m.name
            ))
        }
    })
    .await;
    let dir = m.cp.dir().join("fleet");
    std::fs::create_dir_all(&dir).unwrap();
    let mut o = options(bin_dir, dir, m.cp.kubeconfig.clone(), ns);
    o.webhook_args = [
        "--quota-state-url",
        url,
        "--quota-state-client-secret",
        &format!("{ns}/{MEMBER_CLIENT_SECRET}"),
        "--quota-state-server-name",
        "quota-state",
        "--quota-state-cluster",
        m.name,
        // As kustomize/multi-cluster/member runs it.
        "--quota-state-calls-in-flight",
        "4",
    ]
    .map(str::to_owned)
    .to_vec();
    m.system = Some(
        testenv::system::start(&m.client, &o)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", m.name)),
    );
}

/// The refusal of a dry run of a `cpu`-CPU pod charged to `quota` in `m` ("" when admitted).
async fn dry_run(m: &Member, ns: &str, quota: &str, cpu: u32) -> String {
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    match m.pods(ns).create(&dry, &pod("probe", quota, cpu)).await {
        Ok(_) => String::new(),
        Err(e) => e.to_string(),
    }
}

/// Waits until `m`'s webhook reaches quota-state (it is ready before its client certificate is
/// loaded from the Secret, answering per `--quota-unavailable` until then).
async fn enforced(m: &Member, ns: &str) {
    eventually(Duration::from_secs(60), || async {
        let r = dry_run(m, ns, "team-a", 11).await;
        if r.contains("exceeded quota") {
            Ok(())
        } else {
            Err(format!("{}: not enforced yet: {r}", m.name))
        }
    })
    .await;
}

async fn count(m: &Member, ns: &str, quota: &str) -> usize {
    let lp = ListParams::default().labels(&format!("quota.scheduling.koordinator.sh/name={quota}"));
    m.pods(ns)
        .list(&lp)
        .await
        .map(|l| l.items.len())
        .unwrap_or(usize::MAX)
}

fn quota(name: &str, cpu: u32) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
        "metadata": {"name": name}, "spec": {"max": {"cpu": cpu.to_string()}}
    }))
    .unwrap()
}

/// The usage quota-state wrote back to `name`'s `child-request` annotation, and each member's
/// share of it.
async fn shown(env: &Env, name: &str) -> (String, String) {
    let a = e2e::quota::quotas(env)
        .get(name)
        .await
        .ok()
        .and_then(|q| q.metadata.annotations)
        .unwrap_or_default();
    let get = |k: &str| a.get(k).cloned().unwrap_or_default();
    (
        get("quota.scheduling.koordinator.sh/child-request"),
        get(quota_state::ledger::BY_MEMBER),
    )
}

fn grpc(
    url: &str,
    files: &admission_kit::server::mtls::MtlsFiles,
) -> QuotaStateClient<tonic::transport::Channel> {
    let cfg = admission_kit::server::mtls::client(files.clone(), Duration::from_secs(1)).unwrap();
    let endpoint = tonic::transport::Endpoint::from_shared(url.to_owned()).unwrap();
    QuotaStateClient::new(
        quota_protocol::channel::mtls_channel(endpoint, cfg.source(), "quota-state").unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_quota_holds_across_two_member_clusters() {
    let env = Env::new("fleet").await;
    let shared = testenv::shared().unwrap();
    let bin_dir = testenv::system::bin_dir_of_current_exe().unwrap();
    testenv::system::check_binaries(
        &bin_dir,
        &["quota-state".into(), "scheduling-webhook".into()],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    env.install_crds(&scheduling_webhook::app()).await;
    let ns = env.ns.clone();
    let (mut east, mut west) = tokio::join!(Member::start("east", &ns), Member::start("west", &ns));

    // The hub: quotas and quota-state (fleet mode, managed certificates).
    let quotas = e2e::quota::quotas(&env);
    for (name, cpu) in [
        ("team-a", 10),
        ("team-b", 30),
        ("team-c", 30),
        ("team-d", 1),
        ("team-e", 5),
    ] {
        let mut q = quota(name, cpu);
        if name == "team-e" {
            // Spans east only.
            q.metadata.annotations =
                Some([(quota_state::ledger::SPANS.to_owned(), "east".to_owned())].into());
        }
        quotas.create(&PostParams::default(), &q).await.unwrap();
    }
    let dir = shared.kubeconfig.with_file_name(&ns);
    std::fs::create_dir_all(&dir).unwrap();
    let hub_opts = Options {
        services: vec!["quota-state".into()],
        ..options(&bin_dir, dir, shared.kubeconfig.clone(), &ns)
    };
    let port = testenv::free_port().unwrap();
    let url = format!("https://127.0.0.1:{port}");
    let qs = testenv::system::spawn_quota_state_with(
        &hub_opts,
        port,
        &[
            "--fleet",
            "--member-removal-grace",
            "30s",
            "--member-client-secret",
            &format!("{ns}/{MEMBER_CLIENT_SECRET}"),
        ],
    )
    .unwrap();
    let probes = qs.metrics.clone().unwrap();

    // East joins; 6 one-CPU pods are admitted.
    declare(&env.client, &ns, &east).await;
    join(&env.client, &ns, &mut east, &url, &bin_dir).await;
    enforced(&east, &ns).await;
    for i in 0..6 {
        create_retrying(&east.pods(&ns), &pod(&format!("a-east-{i}"), "team-a", 1))
            .await
            .unwrap();
    }

    // West has two pods before it joins; its Secret, added at run time, makes them count.
    for i in 0..2 {
        west.pods(&ns)
            .create(
                &PostParams::default(),
                &pod(&format!("a-west-{i}"), "team-a", 1),
            )
            .await
            .unwrap();
    }
    assert_eq!(
        dry_run(&east, &ns, "team-a", 3).await,
        "",
        "west is not a member yet"
    );
    declare(&env.client, &ns, &west).await;
    eventually(Duration::from_secs(60), || async {
        let r = dry_run(&east, &ns, "team-a", 3).await;
        if r.contains("used: cpu=8 (east 6, west 2)") {
            Ok(())
        } else {
            Err(format!("west not counted yet: {r:?}"))
        }
    })
    .await;
    join(&env.client, &ns, &mut west, &url, &bin_dir).await;
    enforced(&west, &ns).await;
    for i in 2..4 {
        create_retrying(&west.pods(&ns), &pod(&format!("a-west-{i}"), "team-a", 1))
            .await
            .unwrap();
    }
    // The 11th is refused in either cluster, naming the split.
    for m in [&east, &west] {
        let r = create_retrying(
            &m.pods(&ns),
            &pod(&format!("a-{}-11th", m.name), "team-a", 1),
        )
        .await;
        let text = r.expect_err("the 11th CPU is over the fleet's quota");
        assert!(
            text.contains("exceeded quota: ")
                && text.contains(
                    "team-a, requested: cpu=1, used: cpu=10 (east 6, west 4), limited: cpu=10"
                ),
            "{}: {text}",
            m.name
        );
    }
    // A quota that spans east only takes no pod of west.
    create_retrying(&east.pods(&ns), &pod("e-east", "team-e", 1))
        .await
        .unwrap();
    let r = create_retrying(&west.pods(&ns), &pod("e-west", "team-e", 1)).await;
    let want = format!(
        "quota {ns}/team-e spans member clusters east only: pod west/{ns}/e-west cannot be charged to it"
    );
    assert!(r.as_ref().is_err_and(|t| t.contains(&want)), "{r:?}");
    // A deletion in west lets east admit one more.
    west.pods(&ns)
        .delete("a-west-0", &DeleteParams::default())
        .await
        .unwrap();
    eventually(Duration::from_secs(30), || async {
        create_retrying(&east.pods(&ns), &pod("a-east-6", "team-a", 1)).await
    })
    .await;
    assert!(
        create_retrying(&east.pods(&ns), &pod("a-east-7", "team-a", 1))
            .await
            .is_err()
    );
    eventually(Duration::from_secs(30), || async {
        let s = shown(&env, "team-a").await;
        let want = (
            r#"{"cpu":"10"}"#,
            r#"{"east":{"cpu":"7"},"west":{"cpu":"3"}}"#,
        );
        if (s.0.as_str(), s.1.as_str()) == want {
            Ok(())
        } else {
            Err(format!("usage shown: {s:?}"))
        }
    })
    .await;

    // 100 pods at once across both members: exactly the free amount (30) admitted.
    let burst = |m: &'static str| (0..50).map(move |i| (m, format!("b-{m}-{i}")));
    let all: Vec<(&str, String)> = burst("east").chain(burst("west")).collect();
    let results = futures::future::join_all(all.iter().map(|(m, name)| {
        let pods = if *m == "east" {
            east.pods(&ns)
        } else {
            west.pods(&ns)
        };
        async move { create_retrying(&pods, &pod(name, "team-b", 1)).await }
    }))
    .await;
    let admitted = results.iter().filter(|r| r.is_ok()).count();
    let refusals: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(
        admitted,
        30,
        "refusals: {:?}",
        &refusals[..refusals.len().min(3)]
    );
    assert!(
        refusals.iter().all(|t| t.contains("exceeded quota")),
        "{refusals:?}"
    );
    assert_eq!(
        count(&east, &ns, "team-b").await + count(&west, &ns, "team-b").await,
        30
    );

    // West's API server restarted during a burst: nothing over-admitted, usage right after.
    let stream = |pods: Api<Pod>, member: &'static str| async move {
        for i in 0..40 {
            let _ = create_retrying(&pods, &pod(&format!("c-{member}-{i}"), "team-c", 1)).await;
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
    };
    let (east_pods, west_pods) = (east.pods(&ns), west.pods(&ns));
    let ((), (), restart) = tokio::join!(
        stream(east_pods, "east"),
        stream(west_pods, "west"),
        async {
            tokio::time::sleep(Duration::from_millis(500)).await;
            west.cp.restart_apiserver(Duration::from_secs(5)).await
        }
    );
    let restart = restart.unwrap_or_else(|e| panic!("restart west: {e}"));
    let (east_c, west_c) = (
        count(&east, &ns, "team-c").await,
        count(&west, &ns, "team-c").await,
    );
    assert!(
        east_c + west_c <= 30,
        "over-admitted: east {east_c} + west {west_c} > 30"
    );
    eventually(Duration::from_secs(60), || async {
        let s = shown(&env, "team-c").await.0;
        let want = format!(r#"{{"cpu":"{}"}}"#, east_c + west_c);
        if s == want {
            Ok(())
        } else {
            Err(format!("usage shown {s}, pods {want}"))
        }
    })
    .await;
    eventually(Duration::from_secs(30), || async {
        let up = metric(&probes, "quota_state_member_watch_up{cluster=\"west\"}").await;
        if up == 1.0 {
            Ok(())
        } else {
            Err("west's watch not back".to_owned())
        }
    })
    .await;

    // East's certificate cannot release west's reservation.
    let east_files =
        quota_state_client_files_of(&env.client, &hub_opts, "quota-state-client-member-east")
            .await
            .unwrap();
    let west_files =
        quota_state_client_files_of(&env.client, &hub_opts, "quota-state-client-member-west")
            .await
            .unwrap();
    let (mut as_east, mut as_west) = (grpc(&url, &east_files), grpc(&url, &west_files));
    let admit = |dry_run: bool| AdmitPodRequest {
        namespace: ns.clone(),
        name: "held".into(),
        quota_label: "team-d".into(),
        check_admission: true,
        dry_run,
        review_uid: "review-west".into(),
        requests: [(
            "cpu".to_owned(),
            Amount {
                milli: 1000,
                ..Amount::default()
            },
        )]
        .into(),
        ..AdmitPodRequest::default()
    };
    assert!(
        as_west
            .admit_pod(admit(false))
            .await
            .unwrap()
            .into_inner()
            .allowed
    );
    let release = |cluster: &str| ReleaseRequest {
        namespace: ns.clone(),
        name: "held".into(),
        review_uid: "review-west".into(),
        cluster: cluster.into(),
    };
    let refused = as_east.release(release("west")).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    assert_eq!(
        metric(
            &probes,
            "quota_state_refused_calls_total{method=\"Release\",reason=\"other_cluster\"}"
        )
        .await,
        1.0
    );
    as_east.release(release("")).await.unwrap();
    let after = as_east.admit_pod(admit(true)).await.unwrap().into_inner();
    assert!(
        !after.allowed && after.message.contains("(west 1)"),
        "{after:?}"
    );
    as_west.release(release("west")).await.unwrap();
    assert!(
        as_east
            .admit_pod(admit(true))
            .await
            .unwrap()
            .into_inner()
            .allowed
    );

    // East's Secret deleted: its calls are refused at once; its usage leaves after the grace.
    Api::<Secret>::namespaced(env.client.clone(), &ns)
        .delete("east", &DeleteParams::default())
        .await
        .unwrap();
    eventually(Duration::from_secs(30), || async {
        match as_east.clone().admit_pod(admit(true)).await {
            Err(s) if s.code() == tonic::Code::PermissionDenied => Ok(()),
            other => Err(format!("east still answered: {other:?}")),
        }
    })
    .await;
    let r = dry_run(&west, &ns, "team-a", 10).await;
    assert!(
        r.contains("(east 7, west 3)"),
        "east's usage stays during the grace: {r}"
    );
    eventually(Duration::from_secs(90), || async {
        let r = dry_run(&west, &ns, "team-a", 10).await;
        if r.contains("used: cpu=3 (west 3)") {
            Ok(())
        } else {
            Err(format!("east still counted: {r}"))
        }
    })
    .await;
    println!(
        "fleet: 100 at once -> {admitted} admitted; restart of west (stopped {:?}, ready {:?}) during a burst -> east {east_c} + west {west_c} <= 30",
        restart.stopped, restart.ready
    );
    drop(qs);
}
