//! `cargo xtask up`: a real control plane with kube-controller-manager, kube-scheduler and kwok's
//! nodes, every webhook service registering its own webhooks, and the sample objects; runs until
//! Ctrl-C.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::GroupVersionKind;

use crate::{cargo, root, run, services, tools};

/// `cargo xtask up` options.
#[derive(clap::Args, Debug, Default)]
pub struct UpArgs {
    /// Only these services (comma-separated; all by default). scheduling-webhook without
    /// quota-state evaluates quotas in-process from its own watches.
    #[arg(long, value_delimiter = ',')]
    services: Vec<String>,
    /// Fixed ports from this one on: quota-state's gRPC and metrics ports, then each webhook's
    /// webhook and metrics ports, in name order (free ports when not given).
    #[arg(long)]
    port_base: Option<u16>,
    /// Do not create the services' sample objects.
    #[arg(long)]
    no_samples: bool,
    /// Simulated nodes (kwok) beside kube-controller-manager and kube-scheduler, so that
    /// Deployments and Jobs get Pods that are scheduled and run; 0 starts none of the three.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Start no trace store: without it Jaeger receives the API server's and every service's
    /// spans (every request sampled) and shows them in its UI.
    #[arg(long)]
    no_traces: bool,
}

fn samples(svc: &str) -> Result<Vec<(String, DynamicObject)>> {
    use serde::Deserialize;
    let dir = root().join("services").join(svc).join("examples/samples");
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(rd) => rd
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .collect(),
        Err(_) => return Ok(Vec::new()),
    };
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f)?;
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            let obj = DynamicObject::deserialize(doc).with_context(|| f.display().to_string())?;
            out.push((
                f.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned(),
                obj,
            ));
        }
    }
    Ok(out)
}

/// Creates one sample; `Err(reason)` when the API server refuses it.
async fn create(
    client: &kube::Client,
    obj: &DynamicObject,
) -> Result<std::result::Result<(), String>> {
    let tm = obj
        .types
        .clone()
        .context("sample without apiVersion/kind")?;
    let (group, version) = tm
        .api_version
        .rsplit_once('/')
        .unwrap_or(("", tm.api_version.as_str()));
    let gvk = GroupVersionKind::gvk(group, version, &tm.kind);
    let (ar, caps) = kube::discovery::pinned_kind(client, &gvk).await?;
    let api: Api<DynamicObject> = match caps.scope {
        kube::discovery::Scope::Cluster => Api::all_with(client.clone(), &ar),
        kube::discovery::Scope::Namespaced => {
            let ns = obj
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into());
            Api::namespaced_with(client.clone(), &ns, &ar)
        }
    };
    match api.create(&PostParams::default(), obj).await {
        Ok(_) => Ok(Ok(())),
        Err(kube::Error::Api(e)) => Ok(Err(e.message)),
        Err(e) => Err(e.into()),
    }
}

pub async fn up(args: UpArgs) -> Result<()> {
    let started = Instant::now();
    let bins = tools()?;
    let all = services()?;
    let svcs = if args.services.is_empty() {
        all
    } else {
        if let Some(unknown) = args.services.iter().find(|s| !all.contains(s)) {
            bail!(
                "no service named {unknown}; the services are {}",
                all.join(", ")
            );
        }
        args.services.clone()
    };
    // The build `cargo xtask test` makes (`cargo test` unifies the dependencies' features over
    // every package and its tests): switching between the two then compiles nothing.
    let mut build = cargo();
    build.args(["test", "--workspace", "--no-run"]);
    run(
        build,
        "cargo test --workspace --no-run (the services, as the tests build them)",
    )?;
    eprintln!("built after {:.0?}", started.elapsed());
    // Started first: the API server's tracing configuration names it.
    let jaeger_dir =
        std::env::temp_dir().join(format!("admission-up-jaeger-{}", std::process::id()));
    let jaeger = if args.no_traces {
        None
    } else {
        std::fs::create_dir_all(&jaeger_dir)?;
        Some(testenv::jaeger::Jaeger::start(&testenv::tools::jaeger()?, &jaeger_dir).await?)
    };
    let start = testenv::StartOptions {
        tracing_endpoint: jaeger.as_ref().map(|j| j.otlp_address.clone()),
    };
    let mut cp = testenv::ControlPlane::start_with(&bins, &start).await?;
    let client = cp.client().await?;
    eprintln!(
        "control plane up at {} (etcd + kube-apiserver {})",
        cp.server,
        testenv::tools::KUBERNETES_VERSION
    );
    let cluster_bins = testenv::tools::locate_cluster()?;
    let cluster = if args.nodes > 0 {
        let c = testenv::cluster::Cluster::start(&cp, &cluster_bins, args.nodes).await?;
        eprintln!(
            "kube-controller-manager, kube-scheduler and kwok up with {} simulated nodes (logs in {})",
            args.nodes,
            c.dir.display()
        );
        Some(c)
    } else {
        None
    };
    let opts = testenv::system::Options {
        port_base: args.port_base,
        env: jaeger
            .as_ref()
            .map(testenv::jaeger::Jaeger::exporter_env)
            .unwrap_or_default(),
        ..testenv::system::Options::as_up(&cp, root().join("target/debug"), svcs.clone())
    };
    let system = testenv::system::start(&client, &opts).await?;
    let metrics = |r: &testenv::system::Running| {
        r.metrics
            .as_deref()
            .map(|m| format!("http://{m}/metrics"))
            .unwrap_or_default()
    };
    if let Some((url, r)) = &system.quota_state {
        println!(
            "quota-state          gRPC {url}  metrics {}  log {}",
            metrics(r),
            r.log.display()
        );
    }
    for (r, url, n) in &system.webhooks {
        println!(
            "{:<20} webhooks {url} ({n} registered)  metrics {}  log {}",
            r.name,
            metrics(r),
            r.log.display()
        );
    }
    if let Some(j) = &jaeger {
        println!(
            "{:<20} traces {}  OTLP {}  log {}",
            "jaeger",
            j.ui(),
            j.otlp_endpoint,
            j.running.log.display()
        );
    }
    for s in &system.skipped {
        eprintln!("{s}: not a webhook service (no endpoint table); not started");
    }
    if !args.no_samples {
        // The API server picks up new webhook configurations asynchronously.
        tokio::time::sleep(Duration::from_secs(2)).await;
        for svc in &svcs {
            apply_samples(&client, svc).await?;
        }
    }
    println!(
        "\nUsable after {:.0?}. The control plane runs until Ctrl-C. In another shell:\n\n  export KUBECONFIG={}\n  export PATH={}:$PATH   # kubectl {}\n  kubectl get nodes\n  kubectl get models,autoscalingpolicies,autoscalingpolicybindings -A\n",
        started.elapsed(),
        cp.kubeconfig.display(),
        cluster_bins
            .kubectl
            .parent()
            .map(|d| d.display().to_string())
            .unwrap_or_default(),
        testenv::tools::KUBERNETES_VERSION
    );
    shutdown_signal().await;
    eprintln!(
        "stopping {} services and the control plane",
        system.webhooks.len() + usize::from(system.quota_state.is_some())
    );
    drop(system);
    drop(cluster);
    cp.stop();
    drop(jaeger);
    let _ = std::fs::remove_dir_all(&jaeger_dir);
    Ok(())
}

/// Creates a service's sample objects, printing each one's outcome.
async fn apply_samples(client: &kube::Client, svc: &str) -> Result<()> {
    for (file, obj) in samples(svc)? {
        let name = format!(
            "{}/{}",
            obj.types.as_ref().map(|t| t.kind.as_str()).unwrap_or("?"),
            obj.metadata.name.as_deref().unwrap_or("?")
        );
        let expect_refusal = file.contains("refused");
        // A refusal that depends on the watch cache (a just-created object) may need a moment.
        let mut result = create(client, &obj).await?;
        let deadline = Instant::now() + Duration::from_secs(10);
        while result.is_err() && !expect_refusal && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(500)).await;
            result = create(client, &obj).await?;
        }
        match result {
            Ok(()) => println!("  admitted  {name}  ({file})"),
            Err(reason) => println!(
                "  refused   {name}  ({file})\n            {}",
                reason.replace('\n', "\n            ")
            ),
        }
    }
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {},
                _ = tokio::signal::ctrl_c() => {},
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
