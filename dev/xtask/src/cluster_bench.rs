//! `cargo xtask cluster-bench`: what the webhooks cost a cluster at scale. The cluster in a box
//! (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok) with `--nodes`
//! simulated nodes heartbeating through `nodes/status`, and Pods from Deployments and Jobs in
//! `--namespaces` namespaces, in `--steps` equal steps up to `--pods`. Run twice on fresh
//! control planes, one after the other in one command: once with no webhook at all, once with
//! every service and quota-state as `cargo xtask up` starts them, each namespace charged to its
//! own ElasticQuota. With `--peer koordinator`, Koordinator's koord-manager takes the place of
//! the no-webhook run and ours are the services that do its work, in `--rounds` interleaved
//! rounds; a side-by-side table and an SVG chart of the last step's percentiles follow.
//!
//! After each step, per side: Pods created per second and Pod start latency (created → Running,
//! from the bench's own watch), the API server's `POST pods` latency, and for each webhook the
//! API server's `apiserver_admission_webhook_admission_duration_seconds` (p50/p99 over the
//! step); per process (ours and the cluster's own) CPU per Pod, share of a core and RSS.
//!
//! Nothing here asserts a time: it prints tables for docs/performance.md.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;

use crate::footprint::{Sample, clock_ticks, sample};

/// What a run creates.
#[derive(Debug, Clone)]
pub struct Options {
    /// Simulated nodes.
    pub nodes: usize,
    /// Pods in all, over every step.
    pub pods: usize,
    /// Namespaces, each with its own quota.
    pub namespaces: usize,
    /// Steps the Pods come in (the growth the tables show).
    pub steps: usize,
    /// How long one step may take before the run reports what it reached and goes on.
    pub step_timeout: Duration,
    /// Requests per second kube-controller-manager and kube-scheduler may send.
    pub client_qps: u32,
    /// Koordinator's own webhook server, run beside ours instead of a side with no webhooks.
    pub peer: Option<Peer>,
    /// The quota feature on (each Pod's admission judged against its ElasticQuota, on both
    /// sides: our `EnableQuotaAdmission` gate, upstream's too) or off on both.
    pub quota: bool,
    /// How many times each side runs, the sides interleaved (ours first in odd rounds,
    /// Koordinator's in even ones).
    pub rounds: usize,
    /// Where the chart of the last step's latency percentiles is written (SVG).
    pub chart: PathBuf,
}

/// Koordinator's koord-manager, where it comes from.
#[derive(Debug, Clone)]
pub struct Peer {
    /// The built binary ([`testenv::tools::koord_manager`]).
    pub koord_manager: PathBuf,
    /// The checkout it was built from (its CRDs and webhook configurations are installed).
    pub checkout: PathBuf,
}

/// The label every Pod of the run carries (the watch's selector).
const BENCH_LABEL: &str = "bench";

/// The cluster's own processes, beside which ours are counted.
const CLUSTER: [&str; 5] = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
];

/// Which webhooks a side runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    None,
    Ours,
    /// koord-manager at the pin, in place of scheduling-webhook and node-config-webhook.
    Koordinator,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Self::None => "no webhooks",
            Self::Ours => "our webhooks",
            Self::Koordinator => "Koordinator's",
        }
    }
}

/// koord-manager's gates: our services' defaults (its own leave the Node, ConfigMap and
/// Reservation webhooks off), so that both sides judge the same objects; the quota feature as
/// asked.
fn peer_gates(quota: bool) -> Vec<(String, bool)> {
    scheduling_webhook::GATES
        .iter()
        .chain(&node_config_webhook::GATES)
        .map(|(g, on)| {
            let on = if *g == "EnableQuotaAdmission" {
                quota
            } else {
                *on
            };
            ((*g).to_owned(), on)
        })
        .collect()
}

/// The sides of a run, in order: with no peer, no webhooks then ours; with one, ours and the
/// peer's in each round, which goes first alternating.
fn sides(o: &Options) -> Vec<Side> {
    match o.peer {
        None => vec![Side::None, Side::Ours],
        Some(_) => (0..o.rounds.max(1))
            .flat_map(|r| {
                if r % 2 == 0 {
                    [Side::Ours, Side::Koordinator]
                } else {
                    [Side::Koordinator, Side::Ours]
                }
            })
            .collect(),
    }
}

/// One step's figures on one side.
#[derive(Debug, Default)]
struct Step {
    /// Pods the cluster holds at the end of the step.
    total: usize,
    /// Pods created in the step, and how many of them reached Running (or finished).
    created: usize,
    started: usize,
    /// Seconds from the step's first request to its last Pod created, and to its last started.
    create_secs: f64,
    wall_secs: f64,
    /// Created → Running, seconds, sorted.
    start_latency: Vec<f64>,
    /// `POST pods` in the API server: p50, p99 (seconds) and count.
    post_pods: Quantiles,
    /// Per webhook configuration's webhook (name, type, operation).
    webhooks: BTreeMap<(String, String, String), Quantiles>,
    /// Every Pod webhook's Pod CREATE calls, one histogram: (upper bound in seconds, count).
    pod_admission: Vec<(f64, f64)>,
    /// Per webhook path of our services (`<path>.<service>`, the start of the configuration's
    /// webhook name), the time inside the service (its `controller_runtime_webhook_latency_seconds`).
    inside: BTreeMap<String, Quantiles>,
    /// Inside the Pod webhooks, per upstream plugin (webhook type, plugin name): Pod CREATE
    /// times from `koord_manager_webhook_webhook_duration_milliseconds`, which both sides export
    /// under the same names, in milliseconds.
    plugins: BTreeMap<(String, String), Quantiles>,
    /// Per process: CPU seconds in the step, RSS at its end (KiB), RSS growth (KiB).
    procs: Vec<(String, f64, u64, i64)>,
}

impl Step {
    /// The webhook processes' (every process but the cluster's own) CPU seconds in the step and
    /// RSS at its end in MiB; `None` when the side ran none.
    fn webhook_processes(&self) -> Option<(f64, f64)> {
        let ours: Vec<_> = self
            .procs
            .iter()
            .filter(|p| !CLUSTER.contains(&p.0.as_str()))
            .collect();
        (!ours.is_empty()).then(|| {
            (
                ours.iter().map(|p| p.1).sum(),
                ours.iter().map(|p| p.2).sum::<u64>() as f64 / 1024.0,
            )
        })
    }
}

/// p50 and p99 of a histogram's increase, and how many observations it had.
#[derive(Debug, Default, Clone, Copy)]
struct Quantiles {
    p50: Option<f64>,
    p99: Option<f64>,
    count: f64,
}

/// Runs both sides and prints the tables.
pub async fn run(
    bins: &testenv::Binaries,
    cluster_bins: &testenv::tools::ClusterBinaries,
    bin_dir: PathBuf,
    services: Vec<String>,
    o: &Options,
) -> Result<()> {
    if o.steps == 0 || o.namespaces == 0 || o.pods < o.steps * o.namespaces * 2 {
        bail!("give at least two Pods per namespace per step");
    }
    let mut runs = Vec::new();
    for side in sides(o) {
        eprintln!("\n== {} ==", side.name());
        let steps = run_side(side, bins, cluster_bins, &bin_dir, &services, o).await?;
        runs.push((side, steps));
    }
    print(o, &runs);
    crate::chart::write(
        &o.chart,
        &format!(
            "{} simulated nodes, {} Pods held: the last step of each side ({} round(s))",
            o.nodes,
            runs.iter()
                .filter_map(|(_, s)| s.last().map(|st| st.total))
                .max()
                .unwrap_or(0),
            o.rounds.max(1)
        ),
        &chart_panels(&runs),
    )?;
    println!("\nChart: {}", o.chart.display());
    Ok(())
}

/// The chart's panels: the API server's Pod webhook calls and Pod start latency, each side's
/// last step, its rounds merged.
fn chart_panels(runs: &[(Side, Vec<Step>)]) -> Vec<crate::chart::Panel> {
    use crate::chart::{Curve, Panel};
    let mut order: Vec<Side> = Vec::new();
    for (side, _) in runs {
        if !order.contains(side) {
            order.push(*side);
        }
    }
    let percentiles = || (1..100).map(f64::from);
    let (mut admission, mut start) = (Vec::new(), Vec::new());
    for side in order {
        let last: Vec<&Step> = runs
            .iter()
            .filter(|(s, _)| *s == side)
            .filter_map(|(_, steps)| steps.last())
            .collect();
        let mut merged: BTreeMap<OrdF64, f64> = BTreeMap::new();
        for st in &last {
            for (le, c) in &st.pod_admission {
                *merged.entry(OrdF64(*le)).or_default() += c;
            }
        }
        let merged: Vec<(f64, f64)> = merged.into_iter().map(|(le, c)| (le.0, c)).collect();
        if !merged.is_empty() {
            admission.push(Curve {
                name: side.name().to_owned(),
                points: percentiles()
                    .filter_map(|p| Some((p, quantile(&merged, p / 100.0)? * 1e3)))
                    .collect(),
            });
        }
        let mut samples: Vec<f64> = last
            .iter()
            .flat_map(|st| st.start_latency.clone())
            .collect();
        samples.sort_by(f64::total_cmp);
        start.push(Curve {
            name: side.name().to_owned(),
            points: percentiles()
                .filter_map(|p| Some((p, pct(&samples, p / 100.0)? * 1e3)))
                .collect(),
        });
    }
    vec![
        Panel {
            title: "A Pod webhook call (CREATE), as the API server times it".into(),
            curves: admission,
        },
        Panel {
            title: "Pod start latency (created to Running)".into(),
            curves: start,
        },
    ]
}

/// Each step's Pods per namespace: a Deployment's replicas and a Job's completions (all at
/// once), about two thirds and one third.
fn shares(o: &Options) -> (usize, usize) {
    let per_ns = o.pods / o.steps / o.namespaces;
    let job = per_ns / 3;
    (per_ns - job, job.max(1))
}

async fn run_side(
    side: Side,
    bins: &testenv::Binaries,
    cluster_bins: &testenv::tools::ClusterBinaries,
    bin_dir: &std::path::Path,
    services: &[String],
    o: &Options,
) -> Result<Vec<Step>> {
    let mut cp = testenv::ControlPlane::start(bins).await?;
    let client = cp.client().await?;
    let started = Instant::now();
    let cluster = testenv::cluster::Cluster::start_with(
        &cp,
        cluster_bins,
        o.nodes,
        testenv::cluster::Settings {
            client_qps: Some(o.client_qps),
            ..Default::default()
        },
    )
    .await?;
    wait_nodes_ready(&client, o.nodes).await?;
    eprintln!("{} nodes Ready after {:.0?}", o.nodes, started.elapsed());
    let system = match side {
        Side::None | Side::Koordinator => None,
        Side::Ours => {
            let mut opts =
                testenv::system::Options::as_up(&cp, bin_dir.to_path_buf(), services.to_vec());
            if !o.quota {
                opts.args_of.insert(
                    "scheduling-webhook".into(),
                    vec!["--feature-gates=EnableQuotaAdmission=false".into()],
                );
            }
            Some(testenv::system::start(&client, &opts).await?)
        }
    };
    let koord = match (side, &o.peer) {
        (Side::Koordinator, Some(peer)) => Some(
            testenv::koordinator::KoordManager::start(
                &client,
                &cp.kubeconfig,
                &peer.koord_manager,
                &bins.kustomize,
                &peer.checkout,
                cp.dir(),
                &testenv::koordinator::Options {
                    gates: peer_gates(o.quota),
                },
            )
            .await?,
        ),
        _ => None,
    };
    if side != Side::None {
        // The API server picks up webhook configurations asynchronously.
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    // (process, address, path): koord-manager serves its own metrics (the plugins' times)
    // beside controller-runtime's only on `/all-metrics`.
    let mut metrics_addrs: Vec<(String, String, &str)> = system
        .iter()
        .flat_map(|s| &s.webhooks)
        .filter_map(|(r, _, _)| Some((r.name.clone(), r.metrics.clone()?, "/metrics")))
        .collect();
    let mut procs: Vec<(String, u32)> = Vec::new();
    if let Some(s) = &system {
        procs.extend(s.webhooks.iter().map(|(r, _, _)| (r.name.clone(), r.id())));
        if let Some((_, r)) = &s.quota_state {
            procs.push((r.name.clone(), r.id()));
        }
    }
    if let Some(k) = &koord {
        procs.push((k.running.name.clone(), k.running.id()));
        if let Some(m) = &k.running.metrics {
            metrics_addrs.push((k.running.name.clone(), m.clone(), "/all-metrics"));
        }
    }
    procs.sort();
    let cp_pids = cp.pids();
    for (name, pid) in CLUSTER.into_iter().zip(cp_pids) {
        procs.push((name.to_owned(), pid));
    }
    procs.extend(cluster.pids().into_iter().map(|(n, p)| (n.to_owned(), p)));

    let namespaces: Vec<String> = (0..o.namespaces).map(|i| format!("bench-{i:03}")).collect();
    let (dep, job) = shares(o);
    let per_step = (dep + job) * o.namespaces;
    create_namespaces(&client, &namespaces, side, per_step * o.steps).await?;

    let tracker = Arc::new(Mutex::new(Tracker::default()));
    let watch = tokio::spawn(track(client.clone(), tracker.clone()));
    let ticks = clock_ticks();
    let read = |procs: &[(String, u32)]| -> Vec<Option<Sample>> {
        procs
            .iter()
            .map(|(_, pid)| sample(*pid, ticks).ok())
            .collect()
    };
    let mut steps = Vec::new();
    for s in 0..o.steps {
        let before = read(&procs);
        let metrics_before = scrape(&client).await?;
        let ours_before = scrape_ours(&metrics_addrs).await;
        let t0 = Instant::now();
        if let Ok(mut t) = tracker.lock() {
            t.step = s;
        }
        let failed = submit(&client, &namespaces, s, dep, job).await;
        if failed > 0 {
            eprintln!("step {}: {failed} workloads refused or failed", s + 1);
        }
        let deadline = t0 + o.step_timeout;
        loop {
            let (created, started) = tracker.lock().map(|t| t.counts(s)).unwrap_or_default();
            if (created >= per_step && started >= created) || Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let after = read(&procs);
        let metrics_after = scrape(&client).await?;
        let ours_after = scrape_ours(&metrics_addrs).await;
        let mut step = tracker
            .lock()
            .map(|t| t.step_figures(s, t0))
            .unwrap_or_default();
        step.total = tracker.lock().map(|t| t.pods.len()).unwrap_or_default();
        step.post_pods = post_pods(&metrics_before, &metrics_after);
        step.webhooks = webhook_latency(&metrics_before, &metrics_after);
        step.pod_admission = pod_admission(&metrics_before, &metrics_after);
        step.inside = inside_latency(&ours_before, &ours_after);
        step.plugins = plugin_latency(&ours_before, &ours_after);
        step.procs = procs
            .iter()
            .zip(before.iter().zip(&after))
            .filter_map(|((name, _), (b, a))| {
                let (b, a) = (b.as_ref()?, a.as_ref()?);
                Some((
                    name.clone(),
                    a.cpu_secs - b.cpu_secs,
                    a.rss_kib,
                    a.rss_kib as i64 - b.rss_kib as i64,
                ))
            })
            .collect();
        eprintln!(
            "step {}: {} of {per_step} Pods created, {} started, {:.0} s; the cluster holds {}",
            s + 1,
            step.created,
            step.started,
            step.wall_secs,
            step.total
        );
        steps.push(step);
    }
    watch.abort();
    drop(koord);
    drop(system);
    drop(cluster);
    cp.stop();
    Ok(steps)
}

async fn wait_nodes_ready(client: &kube::Client, nodes: usize) -> Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let ready = api
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .filter(|n| {
                n.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count();
        if ready >= nodes {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{ready} of {nodes} nodes Ready after 300 s");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The namespaces, and with webhooks each one's ElasticQuota (room for every Pod the run
/// puts there, with a margin: the run measures cost, not refusals).
async fn create_namespaces(
    client: &kube::Client,
    namespaces: &[String],
    side: Side,
    pods: usize,
) -> Result<()> {
    let eq = ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk(
        "scheduling.sigs.k8s.io",
        "v1alpha1",
        "ElasticQuota",
    ));
    let per_ns = pods / namespaces.len().max(1);
    for ns in namespaces {
        let n: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}}))?;
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &n)
            .await
            .with_context(|| format!("namespace {ns}"))?;
        if side == Side::None {
            continue;
        }
        // 100m and 128Mi a Pod, half as much again as the run puts there.
        let q: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": quota_of(ns), "namespace": ns},
            "spec": {"max": {"cpu": format!("{}m", per_ns * 150),
                             "memory": format!("{}Mi", per_ns * 192)}}
        }))?;
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &eq);
        // quota-state answers QV once it leads (koord-manager once its caches are in sync):
        // retry for a while.
        let deadline = Instant::now() + Duration::from_secs(60);
        while let Err(e) = api.create(&PostParams::default(), &q).await {
            if Instant::now() > deadline {
                bail!("ElasticQuota in {ns}: {e}");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    Ok(())
}

fn quota_of(ns: &str) -> String {
    format!("q-{ns}")
}

/// The Pod template of step `s` in `ns`.
fn template(ns: &str, app: &str) -> serde_json::Value {
    json!({
        "metadata": {"labels": {"app": app, BENCH_LABEL: "cluster",
                                "quota.scheduling.koordinator.sh/name": quota_of(ns)}},
        "spec": {"containers": [{"name": "main", "image": "registry.example.com/ml/worker:1.0",
                                 "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                                               "limits": {"memory": "256Mi"}}}]}
    })
}

/// Step `s`'s workloads: in each namespace a Deployment of `dep` replicas and a Job of `job`
/// Pods, all at once. Returns how many were not created.
async fn submit(
    client: &kube::Client,
    namespaces: &[String],
    s: usize,
    dep: usize,
    job: usize,
) -> usize {
    let calls = namespaces.iter().flat_map(|ns| {
        let web = format!("web-{s}");
        let batch = format!("batch-{s}");
        let d: Result<Deployment, _> = serde_json::from_value(json!({
            "metadata": {"name": web},
            "spec": {"replicas": dep, "selector": {"matchLabels": {"app": web}},
                     "template": template(ns, &web)}
        }));
        let mut job_template = template(ns, &batch);
        job_template["spec"]["restartPolicy"] = json!("Never");
        let j: Result<Job, _> = serde_json::from_value(json!({
            "metadata": {"name": batch},
            "spec": {"completions": job, "parallelism": job, "template": job_template}
        }));
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), ns);
        let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
        [
            futures::future::Either::Left(async move {
                deployments
                    .create(&PostParams::default(), &d.map_err(|e| e.to_string())?)
                    .await
                    .map(|_| ())
                    .map_err(|e| format!("{ns}/{web}: {e}"))
            }),
            futures::future::Either::Right(async move {
                jobs.create(&PostParams::default(), &j.map_err(|e| e.to_string())?)
                    .await
                    .map(|_| ())
                    .map_err(|e| format!("{ns}/{batch}: {e}"))
            }),
        ]
    });
    futures::stream::iter(calls)
        .buffer_unordered(16)
        .filter_map(|r| async move { r.err().inspect(|e| eprintln!("  {e}")) })
        .count()
        .await
}

/// Every Pod of the run the watch has seen: when it appeared, in which step, and when it first
/// showed Running (or finished).
#[derive(Default)]
struct Tracker {
    step: usize,
    pods: HashMap<String, Seen>,
}

struct Seen {
    step: usize,
    created: Instant,
    started: Option<Instant>,
}

impl Tracker {
    fn observe(&mut self, pod: &Pod, now: Instant) {
        let Some(uid) = pod.metadata.uid.clone() else {
            return;
        };
        let step = self.step;
        let seen = self.pods.entry(uid).or_insert(Seen {
            step,
            created: now,
            started: None,
        });
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if seen.started.is_none() && matches!(phase, Some("Running" | "Succeeded" | "Failed")) {
            seen.started = Some(now);
        }
    }

    fn counts(&self, step: usize) -> (usize, usize) {
        let mine = self.pods.values().filter(|p| p.step == step);
        let (mut created, mut started) = (0, 0);
        for p in mine {
            created += 1;
            started += usize::from(p.started.is_some());
        }
        (created, started)
    }

    fn step_figures(&self, step: usize, t0: Instant) -> Step {
        let mine: Vec<&Seen> = self.pods.values().filter(|p| p.step == step).collect();
        let secs = |t: Instant| t.saturating_duration_since(t0).as_secs_f64();
        let mut start_latency: Vec<f64> = mine
            .iter()
            .filter_map(|p| {
                Some(
                    p.started?
                        .saturating_duration_since(p.created)
                        .as_secs_f64(),
                )
            })
            .collect();
        start_latency.sort_by(f64::total_cmp);
        Step {
            created: mine.len(),
            started: start_latency.len(),
            create_secs: mine.iter().map(|p| secs(p.created)).fold(0.0, f64::max),
            wall_secs: mine
                .iter()
                .filter_map(|p| p.started.map(secs))
                .fold(0.0, f64::max),
            start_latency,
            ..Step::default()
        }
    }
}

/// Follows the run's Pods into `tracker` until aborted.
async fn track(client: kube::Client, tracker: Arc<Mutex<Tracker>>) {
    use kube::runtime::WatchStreamExt as _;
    let api: Api<Pod> = Api::all(client);
    let cfg = watcher::Config::default().labels(&format!("{BENCH_LABEL}=cluster"));
    let mut events = watcher(api, cfg).default_backoff().boxed();
    while let Some(e) = events.next().await {
        let now = Instant::now();
        let pod = match e {
            Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => p,
            Ok(_) => continue,
            Err(e) => {
                eprintln!("pod watch: {e}");
                continue;
            }
        };
        if let Ok(mut t) = tracker.lock() {
            t.observe(&pod, now);
        }
    }
}

/// The API server's metrics text.
async fn scrape(client: &kube::Client) -> Result<String> {
    let req = http::Request::get("/metrics")
        .body(Vec::new())
        .context("metrics request")?;
    Ok(client.request_text(req).await?)
}

/// A histogram's cumulative buckets by upper bound, summed over every series `keep` accepts,
/// grouped by `key`.
fn buckets<K: Ord>(
    text: &str,
    metric: &str,
    keep: impl Fn(&BTreeMap<&str, &str>) -> bool,
    key: impl Fn(&BTreeMap<&str, &str>) -> K,
) -> BTreeMap<K, BTreeMap<OrdF64, f64>> {
    let prefix = format!("{metric}_bucket{{");
    let mut out: BTreeMap<K, BTreeMap<OrdF64, f64>> = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(&prefix) else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let labels: BTreeMap<&str, &str> = labels
            .split("\",")
            .filter_map(|kv| {
                let (k, v) = kv.split_once("=\"")?;
                Some((k, v.trim_end_matches('"')))
            })
            .collect();
        if !keep(&labels) {
            continue;
        }
        let le = match labels.get("le") {
            Some(&"+Inf") => f64::INFINITY,
            Some(v) => match v.parse() {
                Ok(v) => v,
                Err(_) => continue,
            },
            None => continue,
        };
        let Ok(value) = value.trim().parse::<f64>() else {
            continue;
        };
        *out.entry(key(&labels))
            .or_default()
            .entry(OrdF64(le))
            .or_default() += value;
    }
    out
}

/// An `f64` bucket bound, ordered.
#[derive(Debug, Clone, Copy, PartialEq)]
struct OrdF64(f64);
impl Eq for OrdF64 {}
impl PartialOrd for OrdF64 {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for OrdF64 {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// p50 and p99 of the increase between two readings of one histogram, interpolated within a
/// bucket as Prometheus's `histogram_quantile` does.
fn quantiles(before: Option<&BTreeMap<OrdF64, f64>>, after: &BTreeMap<OrdF64, f64>) -> Quantiles {
    let delta = increase(before, after);
    Quantiles {
        p50: quantile(&delta, 0.5),
        p99: quantile(&delta, 0.99),
        count: delta.last().map_or(0.0, |(_, c)| *c),
    }
}

/// A histogram's cumulative buckets (upper bound, count) gained between two readings.
fn increase(
    before: Option<&BTreeMap<OrdF64, f64>>,
    after: &BTreeMap<OrdF64, f64>,
) -> Vec<(f64, f64)> {
    after
        .iter()
        .map(|(le, v)| {
            let b = before.and_then(|b| b.get(le)).copied().unwrap_or(0.0);
            (le.0, v - b)
        })
        .collect()
}

/// Quantile `q` of cumulative buckets, interpolated within a bucket as Prometheus's
/// `histogram_quantile` does; `None` when they hold nothing.
fn quantile(delta: &[(f64, f64)], q: f64) -> Option<f64> {
    let count = delta.last().map_or(0.0, |(_, c)| *c);
    if count <= 0.0 {
        return None;
    }
    let rank = q * count;
    let mut lower = (0.0, 0.0);
    for &(le, c) in delta {
        if c >= rank {
            if le.is_infinite() {
                return Some(lower.0);
            }
            let width = c - lower.1;
            let within = if width > 0.0 {
                (rank - lower.1) / width
            } else {
                1.0
            };
            return Some(lower.0 + (le - lower.0) * within);
        }
        lower = (le, c);
    }
    Some(lower.0)
}

/// The Pod CREATE calls of every Pod webhook ([`is_pod_webhook`]), mutating and validating,
/// as one histogram's increase over a step.
fn pod_admission(before: &str, after: &str) -> Vec<(f64, f64)> {
    let metric = "apiserver_admission_webhook_admission_duration_seconds";
    let keep = |l: &BTreeMap<&str, &str>| {
        l.get("name").is_some_and(|n| is_pod_webhook(n)) && l.get("operation") == Some(&"CREATE")
    };
    let b = buckets(before, metric, keep, |_| ());
    buckets(after, metric, keep, |_| ())
        .get(&())
        .map(|a| increase(b.get(&()), a))
        .unwrap_or_default()
}

fn post_pods(before: &str, after: &str) -> Quantiles {
    let metric = "apiserver_request_duration_seconds";
    let keep = |l: &BTreeMap<&str, &str>| {
        l.get("verb") == Some(&"POST")
            && l.get("resource") == Some(&"pods")
            && l.get("subresource").is_none_or(|s| s.is_empty())
            && l.get("dry_run").is_none_or(|s| s.is_empty())
    };
    let b = buckets(before, metric, keep, |_| ());
    let a = buckets(after, metric, keep, |_| ());
    a.get(&())
        .map(|a| quantiles(b.get(&()), a))
        .unwrap_or_default()
}

/// Each webhook process's metrics text, by process name (empty when unreachable).
async fn scrape_ours(addrs: &[(String, String, &str)]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (name, addr, path) in addrs {
        let text = match testenv::system::http_get(addr, path).await {
            Ok((200, body)) => body,
            Ok((code, _)) => {
                eprintln!("{name} metrics: HTTP {code}");
                String::new()
            }
            Err(e) => {
                eprintln!("{name} metrics: {e}");
                String::new()
            }
        };
        out.push((name.clone(), text));
    }
    out
}

/// Time inside each of our webhooks over a step, keyed `<path>.<service>` as the start of the
/// API server's webhook names.
fn inside_latency(
    before: &[(String, String)],
    after: &[(String, String)],
) -> BTreeMap<String, Quantiles> {
    let metric = "controller_runtime_webhook_latency_seconds";
    let key = |l: &BTreeMap<&str, &str>| {
        l.get("webhook")
            .copied()
            .unwrap_or_default()
            .trim_start_matches('/')
            .to_owned()
    };
    let mut out = BTreeMap::new();
    for (service, text) in after {
        let earlier = before
            .iter()
            .find(|(s, _)| s == service)
            .map(|(_, t)| t.as_str())
            .unwrap_or_default();
        let b = buckets(earlier, metric, |_| true, key);
        for (path, a) in buckets(text, metric, |_| true, key) {
            let q = quantiles(b.get(&path), &a);
            if q.count > 0.0 {
                out.insert(format!("{path}.{service}"), q);
            }
        }
    }
    out
}

/// Time inside each of upstream's Pod CREATE plugins over a step, every service's series
/// together (only one side's services run at a time).
fn plugin_latency(
    before: &[(String, String)],
    after: &[(String, String)],
) -> BTreeMap<(String, String), Quantiles> {
    let metric = "koord_manager_webhook_webhook_duration_milliseconds";
    let keep = |l: &BTreeMap<&str, &str>| {
        l.get("object_type") == Some(&"pod") && l.get("operation") == Some(&"CREATE")
    };
    let key = |l: &BTreeMap<&str, &str>| {
        let get = |k: &str| l.get(k).copied().unwrap_or_default().to_owned();
        (get("webhook_type"), get("plugin_name"))
    };
    let sum = |texts: &[(String, String)]| {
        let mut all: BTreeMap<(String, String), BTreeMap<OrdF64, f64>> = BTreeMap::new();
        for (_, text) in texts {
            for (k, b) in buckets(text, metric, keep, key) {
                let into = all.entry(k).or_default();
                for (le, v) in b {
                    *into.entry(le).or_default() += v;
                }
            }
        }
        all
    };
    let b = sum(before);
    sum(after)
        .iter()
        .map(|(k, a)| (k.clone(), quantiles(b.get(k), a)))
        .filter(|(_, q)| q.count > 0.0)
        .collect()
}

fn webhook_latency(before: &str, after: &str) -> BTreeMap<(String, String, String), Quantiles> {
    let metric = "apiserver_admission_webhook_admission_duration_seconds";
    let key = |l: &BTreeMap<&str, &str>| {
        let get = |k: &str| l.get(k).copied().unwrap_or_default().to_owned();
        (get("name"), get("type"), get("operation"))
    };
    let b = buckets(before, metric, |_| true, key);
    let a = buckets(after, metric, |_| true, key);
    a.iter()
        .map(|(k, a)| (k.clone(), quantiles(b.get(k), a)))
        .filter(|(_, q)| q.count > 0.0)
        .collect()
}

/// A value to `places` decimal places, `-` when there is none.
fn fixed(v: Option<f64>, places: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.places$}"))
}

/// Seconds as milliseconds to one place.
fn ms(s: Option<f64>) -> String {
    fixed(s.map(|s| s * 1e3), 1)
}

/// Milliseconds to two places (times inside a service are well under one).
fn ms2(s: Option<f64>) -> String {
    fixed(s.map(|s| s * 1e3), 2)
}

fn pct(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted.get(i).copied()
}

fn print(o: &Options, sides: &[(Side, Vec<Step>)]) {
    println!(
        "\n{} simulated nodes, {} namespaces, {} Pods in {} steps (each: a Deployment of {} and a Job of {} Pods per namespace)\n",
        o.nodes,
        o.namespaces,
        o.pods,
        o.steps,
        shares(o).0,
        shares(o).1
    );
    if o.peer.is_some() {
        side_by_side(sides);
    }
    println!("### The cluster, each run\n");
    println!(
        "| Pods held | side | created | Pods created/s | start p50 / p99 (ms) | all started after (s) | POST pods p50 / p99 (ms) | kube-apiserver CPU per Pod | etcd CPU per Pod | our services CPU per Pod, RSS |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let steps = sides.iter().map(|(_, s)| s.len()).max().unwrap_or(0);
    for i in 0..steps {
        for (side, s) in sides {
            let Some(st) = s.get(i) else { continue };
            let cpu_of = |name: &str| {
                st.procs
                    .iter()
                    .find(|p| p.0 == name)
                    .map_or_else(|| "-".to_owned(), |p| per_pod(p.1, st.created))
            };
            let ours = st.webhook_processes().map_or_else(
                || "-".to_owned(),
                |(cpu, rss)| format!("{}, {:.0} MiB", per_pod(cpu, st.created), rss),
            );
            println!(
                "| {} | {} | {} of {} | {:.0} | {} / {} | {:.0} | {} / {} | {} | {} | {ours} |",
                st.total,
                side.name(),
                st.started,
                st.created,
                st.created as f64 / st.create_secs.max(1e-3),
                ms(pct(&st.start_latency, 0.5)),
                ms(pct(&st.start_latency, 0.99)),
                st.wall_secs,
                ms(st.post_pods.p50),
                ms(st.post_pods.p99),
                cpu_of("kube-apiserver"),
                cpu_of("etcd"),
            );
        }
    }
    for (side, s) in sides {
        println!("\n### Per process, {}\n", side.name());
        println!(
            "| process | Pods held | CPU per Pod created | share of a core | RSS | RSS growth per Pod |"
        );
        println!("| --- | --- | --- | --- | --- | --- |");
        let names: Vec<&String> = s
            .first()
            .map(|st| st.procs.iter().map(|p| &p.0).collect())
            .unwrap_or_default();
        for name in names {
            for st in s {
                let Some(p) = st.procs.iter().find(|p| &p.0 == name) else {
                    continue;
                };
                println!(
                    "| {name} | {} | {} | {:.0} % | {:.0} MiB | {:.2} KiB |",
                    st.total,
                    per_pod(p.1, st.created),
                    p.1 / st.wall_secs.max(1e-3) * 100.0,
                    p.2 as f64 / 1024.0,
                    p.3 as f64 / st.created.max(1) as f64,
                );
            }
        }
    }
    for (side, s) in sides.iter().filter(|(side, _)| *side != Side::None) {
        println!(
            "\n### What each webhook adds, {} (kube-apiserver's apiserver_admission_webhook_admission_duration_seconds over each step)\n",
            side.name()
        );
        println!(
            "| webhook | type | operation | Pods held | calls | p50 (ms) | p99 (ms) | inside the service, every operation: p50 / p99 (ms) |"
        );
        println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
        let keys: std::collections::BTreeSet<&(String, String, String)> =
            s.iter().flat_map(|st| st.webhooks.keys()).collect();
        for k in keys {
            for st in s {
                let Some(q) = st.webhooks.get(k) else {
                    continue;
                };
                let inside = st
                    .inside
                    .iter()
                    .find(|(path, _)| k.0.starts_with(&format!("{path}.")))
                    .map_or_else(
                        || "-".to_owned(),
                        |(_, i)| format!("{} / {}", ms2(i.p50), ms2(i.p99)),
                    );
                println!(
                    "| {} | {} | {} | {} | {:.0} | {} | {} | {inside} |",
                    k.0,
                    k.1,
                    k.2,
                    st.total,
                    q.count,
                    ms(q.p50),
                    ms(q.p99)
                );
            }
        }
    }
    let plugins = |side: Side| {
        sides
            .iter()
            .filter(move |(s, _)| *s == side)
            .flat_map(|(_, steps)| steps.iter())
    };
    if sides.iter().any(|(side, _)| *side == Side::Koordinator) {
        println!(
            "\n### Inside the Pod webhooks, by upstream's plugin (koord_manager_webhook_webhook_duration_milliseconds, Pod CREATE, each step of each run)\n"
        );
        println!(
            "| type | plugin | Pods held | ours: calls, p50 / p99 (ms) | Koordinator's: calls, p50 / p99 (ms) |"
        );
        println!("| --- | --- | --- | --- | --- |");
        let keys: std::collections::BTreeSet<&(String, String)> = sides
            .iter()
            .flat_map(|(_, s)| s.iter().flat_map(|st| st.plugins.keys()))
            .collect();
        // Already in milliseconds; a plugin's time is often under 0.01 ms.
        let cell = |st: &Step, k: &(String, String)| {
            st.plugins.get(k).map_or_else(
                || "-".to_owned(),
                |q| format!("{:.0}, {} / {}", q.count, fixed(q.p50, 3), fixed(q.p99, 3)),
            )
        };
        for k in keys {
            for (o, t) in plugins(Side::Ours).zip(plugins(Side::Koordinator)) {
                println!(
                    "| {} | {} | {} | {} | {} |",
                    k.0,
                    k.1,
                    o.total,
                    cell(o, k),
                    cell(t, k)
                );
            }
        }
    }
    println!(
        "\nStart latency: from the bench's watch seeing a Pod to it seeing the Pod Running (a Job's Pod: or finished). The API server's latency histograms have coarse buckets (webhooks: 5, 25, 100 ms…; POST: 5, 25, 50 ms…): a p50 inside the first bucket is interpolated, read it as \"under 5 ms\"."
    );
}

/// Whether an API server webhook name is a Pod webhook's, ours or Koordinator's.
fn is_pod_webhook(name: &str) -> bool {
    ["mutate-pod.", "validate-pod.", "mpod-create.", "vpod."]
        .iter()
        .any(|p| name.starts_with(p))
}

/// The median of some readings (of an even count, the mean of the two middle ones).
fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// One step of one run, as the side-by-side table compares it.
#[derive(Debug, Clone, Copy, Default)]
struct Compared {
    /// CPU of the webhook processes (quota-state counted on our side) per Pod created, µs.
    cpu_us: f64,
    /// Their RSS at the step's end, MiB.
    rss_mib: f64,
    /// Pod CREATE in the API server's webhook histogram: mutating and validating p50 / p99, ms.
    mutating: (f64, f64),
    validating: (f64, f64),
    /// `POST pods` p50 / p99, ms.
    post: (f64, f64),
    /// Pods created per second.
    rate: f64,
    /// Start latency p50 / p99, ms.
    start: (f64, f64),
    /// Seconds from the step's first request to its last Pod started.
    all_started: f64,
}

fn compared(st: &Step) -> Compared {
    let (cpu, rss) = st.webhook_processes().unwrap_or_default();
    let pod_webhook = |kind: &str| {
        let (p50, p99): (Vec<f64>, Vec<f64>) = st
            .webhooks
            .iter()
            .filter(|((name, t, op), _)| is_pod_webhook(name) && t == kind && op == "CREATE")
            .map(|(_, q)| (q.p50.unwrap_or(f64::NAN), q.p99.unwrap_or(f64::NAN)))
            .unzip();
        let worst = |v: Vec<f64>| v.into_iter().fold(f64::NAN, f64::max) * 1e3;
        (worst(p50), worst(p99))
    };
    let ms = |q: Option<f64>| q.map_or(f64::NAN, |v| v * 1e3);
    Compared {
        cpu_us: cpu / st.created.max(1) as f64 * 1e6,
        rss_mib: rss,
        mutating: pod_webhook("admit"),
        validating: pod_webhook("validating"),
        post: (ms(st.post_pods.p50), ms(st.post_pods.p99)),
        rate: st.created as f64 / st.create_secs.max(1e-3),
        start: (
            ms(pct(&st.start_latency, 0.5)),
            ms(pct(&st.start_latency, 0.99)),
        ),
        all_started: st.wall_secs,
    }
}

/// Ours and Koordinator's per step, each figure the median over the rounds.
fn side_by_side(runs: &[(Side, Vec<Step>)]) {
    println!("### Side by side: our webhooks and Koordinator's (medians over the rounds)\n");
    println!(
        "| Pods held | side | runs | webhooks' CPU per Pod | RSS | Pod CREATE mutating p50 / p99 (ms) | validating p50 / p99 (ms) | POST pods p50 / p99 (ms) | Pods created/s | start p50 / p99 (ms) | all started after (s) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let steps = runs.iter().map(|(_, s)| s.len()).max().unwrap_or(0);
    let f = |v: f64, digits: usize| {
        if v.is_finite() {
            format!("{v:.digits$}")
        } else {
            "-".to_owned()
        }
    };
    for i in 0..steps {
        let mut cpu = Vec::new();
        for side in [Side::Ours, Side::Koordinator] {
            let of: Vec<(usize, Compared)> = runs
                .iter()
                .filter(|(s, _)| *s == side)
                .filter_map(|(_, steps)| steps.get(i).map(|st| (st.total, compared(st))))
                .collect();
            if of.is_empty() {
                continue;
            }
            let m = |g: fn(&Compared) -> f64| median(of.iter().map(|(_, c)| g(c)).collect());
            let m = |g: fn(&Compared) -> f64| m(g).unwrap_or(f64::NAN);
            let held = of.iter().map(|(t, _)| *t).max().unwrap_or(0);
            cpu.push(m(|c| c.cpu_us));
            println!(
                "| {held} | {} | {} | {} µs | {} MiB | {} / {} | {} / {} | {} / {} | {} | {} / {} | {} |",
                side.name(),
                of.len(),
                f(m(|c| c.cpu_us), 0),
                f(m(|c| c.rss_mib), 0),
                f(m(|c| c.mutating.0), 1),
                f(m(|c| c.mutating.1), 1),
                f(m(|c| c.validating.0), 1),
                f(m(|c| c.validating.1), 1),
                f(m(|c| c.post.0), 1),
                f(m(|c| c.post.1), 1),
                f(m(|c| c.rate), 0),
                f(m(|c| c.start.0), 0),
                f(m(|c| c.start.1), 0),
                f(m(|c| c.all_started), 0),
            );
        }
        if let [ours, theirs] = cpu[..] {
            println!(
                "| | Koordinator's CPU per Pod / ours | | {}× | | | | | | | |",
                f(theirs / ours, 1)
            );
        }
    }
    println!();
}

fn per_pod(secs: f64, pods: usize) -> String {
    if pods == 0 {
        "-".to_owned()
    } else {
        format!("{:.0} µs", secs / pods as f64 * 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_within_the_bucket_and_subtract_the_earlier_reading() {
        let text = |a: u32, b: u32, c: u32| {
            format!(
                "m_bucket{{name=\"x\",le=\"0.005\"}} {a}\nm_bucket{{name=\"x\",le=\"0.025\"}} {b}\nm_bucket{{name=\"x\",le=\"+Inf\"}} {c}\nm_count{{name=\"x\"}} {c}\n"
            )
        };
        let key = |l: &BTreeMap<&str, &str>| l.get("name").copied().unwrap_or("").to_owned();
        let before = buckets(&text(10, 10, 10), "m", |_| true, key);
        let after = buckets(&text(60, 110, 110), "m", |_| true, key);
        let q = quantiles(before.get("x"), &after["x"]);
        assert_eq!(q.count, 100.0);
        // 50 of 100 new observations lie under 5 ms: the median is the first bucket's top.
        assert_eq!(q.p50, Some(0.005));
        // The 99th lies in (5, 25] ms at 49/50 of the way.
        let p99 = q.p99.unwrap_or_default();
        assert!((p99 - (0.005 + 0.020 * 49.0 / 50.0)).abs() < 1e-9, "{p99}");
    }

    #[test]
    fn an_unchanged_histogram_has_no_quantiles() {
        let text = "m_bucket{le=\"1\"} 5\nm_bucket{le=\"+Inf\"} 5\n";
        let b = buckets(text, "m", |_| true, |_| ());
        let q = quantiles(b.get(&()), &b[&()]);
        assert_eq!((q.p50, q.p99, q.count), (None, None, 0.0));
    }

    #[test]
    fn the_peer_runs_with_our_gates_and_the_quota_feature_as_asked() {
        for quota in [true, false] {
            let gates = peer_gates(quota);
            let on = |name: &str| gates.iter().find(|(g, _)| g == name).map(|(_, on)| *on);
            assert_eq!(on("EnableQuotaAdmission"), Some(quota));
            assert_eq!(on("NodeMutatingWebhook"), Some(true));
            assert_eq!(on("ReservationMutatingWebhook"), Some(true));
            assert_eq!(on("BindingAdmissionWebhook"), Some(false));
        }
    }

    #[test]
    fn medians_take_the_middle_and_skip_what_is_not_a_number() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, f64::NAN, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(vec![f64::NAN]), None);
    }

    #[test]
    fn shares_split_a_step_two_to_one() {
        let o = Options {
            nodes: 1,
            pods: 30_000,
            namespaces: 100,
            steps: 3,
            step_timeout: Duration::from_secs(1),
            client_qps: 1,
            peer: None,
            quota: true,
            rounds: 1,
            chart: PathBuf::new(),
        };
        assert_eq!(shares(&o), (67, 33));
    }
}
