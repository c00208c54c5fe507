//! `cargo xtask`: the project's set-up commands, the tool build and the footprint measurement.
//!
//! - `cargo xtask up`: a real control plane, every webhook service, their webhook
//!   configurations and the sample objects; runs until Ctrl-C.
//! - `cargo xtask test`: builds the control-plane binaries if needed, then fmt check, clippy and
//!   every test (unit, fixture, server, end-to-end through the real API server).
//! - `cargo xtask tools`: builds kube-apiserver, etcd and kustomize with Go (cached by version).
//! - `cargo xtask image`: every service's OCI image with buildah, into podman's store and as
//!   OCI archives with SBOMs.
//! - `cargo xtask footprint`: each service's memory and CPU on a real control plane under pods
//!   and nodes (the Deployments' requests and limits come from it).
//! - `cargo xtask cluster-bench`: the cluster in a box at scale (a thousand simulated nodes,
//!   thousands of Pods from Deployments and Jobs), with no webhooks and with ours, side by side.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

mod bench;
mod cache;
mod check_speed;
mod cluster_bench;
mod counts;
mod footprint;
mod fuzz;
mod given;
mod image;
mod policy;
mod runner;
mod soak;
mod stages;

use anyhow::{Context as _, Result, bail};
use clap::{Parser, Subcommand};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::GroupVersionKind;

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    about = "Project commands: up, test, tools, footprint, check-speed."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

/// `cargo xtask up` options.
#[derive(clap::Args, Debug, Default)]
struct UpArgs {
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
}

/// How `bench` and `stages` load a server.
#[derive(clap::Args)]
struct LoadArgs {
    /// Keep-alive connections.
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// The server's CPU (the client gets --client-cpu).
    #[arg(long, default_value_t = 0)]
    server_cpu: usize,
    /// The client's CPU.
    #[arg(long, default_value_t = 1)]
    client_cpu: usize,
    /// Only the rows whose name contains one of these (comma-separated; all when absent).
    #[arg(long, value_delimiter = ',')]
    rows: Vec<String>,
}

impl LoadArgs {
    fn options(&self, runs: usize, seconds: u64) -> bench::Options {
        bench::Options {
            runs,
            seconds,
            connections: self.connections,
            server_cpu: self.server_cpu,
            client_cpu: self.client_cpu,
            only: self.rows.clone(),
        }
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// Start etcd + kube-apiserver, every webhook service and its webhooks, apply the samples,
    /// and run until Ctrl-C.
    Up(UpArgs),
    /// Build the tools if needed, then run fmt check, clippy and every test.
    Test {
        /// Test binaries run at once (the end-to-end ones mostly wait on their own control
        /// plane, so a few side by side take the time of the longest).
        #[arg(long, default_value_t = 3)]
        jobs: usize,
        /// Run every step, replaying none of the passes recorded by an earlier run on the same
        /// tree (see `shared/xtask/src/cache.rs`).
        #[arg(long)]
        rerun: bool,
    },
    /// Build every tool (kube-apiserver, etcd, kustomize, tilt, toxiproxy, and the cluster's:
    /// kube-controller-manager, kube-scheduler, kubectl, kwok) with Go from the module proxy,
    /// and install the rest; each cached once built.
    Tools,
    /// List what differs between the given facts kept here (`fixtures/`, `docs/spec/`) and
    /// another copy of the project brief (`DIR/fixtures`, `DIR/spec`); exits 1 on a difference.
    GivenDiff {
        /// The brief's folder (for example `../shared`).
        dir: PathBuf,
    },
    /// Write the variant fuzzer's variants of a domain's cases as case files, for a differential
    /// run against upstream's own handlers (`tools/upstream-oracle/*`).
    Variants {
        /// `registry`, `scheduling`, `node-config`, `training` (the given cases), `kthena-v1` or
        /// `trainer-v2` (the cases of registry-webhook's and training-webhook's own `fixtures/`).
        domain: String,
        /// Folder the case files are written to (created if missing).
        out: PathBuf,
        /// Variants per case.
        #[arg(long, default_value_t = admission_testing::variants::DEFAULT_PER_CASE)]
        per_case: usize,
        /// Seed of the variants.
        #[arg(long, default_value_t = admission_testing::variants::DEFAULT_SEED)]
        seed: u64,
    },
    /// Build the libFuzzer targets (`fuzz/`, nightly, cargo-fuzz) and run each from its seeds.
    Fuzz {
        /// Executions per target (seeded: `-seed=1`).
        #[arg(long, default_value_t = 10_000_000)]
        runs: u64,
        /// Run each target this long instead of a number of executions.
        #[arg(long)]
        seconds: Option<u64>,
        /// Only these targets (comma-separated).
        #[arg(long, value_delimiter = ',')]
        targets: Vec<String>,
    },
    /// The load benchmark suite on release builds, server and client pinned to one CPU each:
    /// one markdown table of medians.
    Bench {
        /// Runs per row (interleaved; the median is printed).
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Measured seconds per run.
        #[arg(long, default_value_t = 5)]
        seconds: u64,
        #[command(flatten)]
        load: LoadArgs,
    },
    /// What a fleet member far from the hub sees: Pod validation through quota-state with 0, 1
    /// and 20 ms of round-trip time added by toxiproxy, at 4 and 64 connections.
    FleetLatency {
        /// Runs per row (the median is printed).
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Measured seconds per run.
        #[arg(long, default_value_t = 5)]
        seconds: u64,
        #[command(flatten)]
        load: LoadArgs,
    },
    /// Where each bench path's review time goes in the running server, by stage (TLS, HTTP,
    /// decode, rules, patch, encode, logging, metrics, kernel), from `perf record` with DWARF
    /// call stacks during its load: one markdown table.
    Stages {
        /// Seconds recorded per path.
        #[arg(long, default_value_t = 3)]
        seconds: u64,
        #[command(flatten)]
        load: LoadArgs,
    },
    /// Every service's OCI image, built with buildah from Debian's packages and the `image`
    /// build: into podman's store (`localhost/<service>:<commit>` and `:latest`) and as OCI
    /// archives with an SBOM each, listed in `<out>/images.json`.
    Image {
        /// Only these services (comma-separated; all by default).
        #[arg(long, value_delimiter = ',')]
        services: Vec<String>,
        /// Where the archives, SBOMs and images.json go.
        #[arg(long, default_value = "target/images")]
        out: PathBuf,
        /// Cargo profile of the binaries.
        #[arg(long, default_value = IMAGE_PROFILE)]
        profile: String,
        /// Also name each image so (`{service}` is replaced), e.g. the reference Tilt expects.
        #[arg(long)]
        tag: Vec<String>,
        /// Copy each image to the registry its --tag names (skopeo; Tilt's custom_build).
        #[arg(long)]
        push: bool,
    },
    /// Instructions per review of the in-process paths under callgrind (the `quick-release` build),
    /// compared with `shared/instructions/baseline.json`: more than 10 % above fails.
    Instructions {
        /// Write the counts as the new baseline instead of comparing.
        #[arg(long)]
        update: bool,
    },
    /// Time `admission-check` (release) over many manifests, 40 % of them ElasticQuotas, on one
    /// core, at that count and a tenth of it: fails when the cost per object grows more than
    /// 1.5× or the large run exceeds its budget.
    CheckSpeed {
        /// Manifest files to check.
        #[arg(long, default_value_t = 10_000)]
        manifests: usize,
        /// Seconds the large run may take (median).
        #[arg(long, default_value_t = 1.5)]
        budget_secs: f64,
        /// Runs; the median is printed.
        #[arg(long, default_value_t = 5)]
        runs: usize,
        /// The cores to pin the check to (`taskset -c`): both of this machine's by default.
        #[arg(long, default_value = "0,1")]
        cpus: String,
    },
    /// Measure each service's memory and CPU on a real control plane while pods and nodes go
    /// through the webhooks (the figures behind the Deployments' requests and limits).
    Footprint {
        /// Pods to create, spread over ten quota namespaces.
        #[arg(long, default_value_t = 5000)]
        pods: usize,
        /// Nodes to create and heartbeat once.
        #[arg(long, default_value_t = 200)]
        nodes: usize,
        /// Cargo profile of the measured binaries (`image` is what the images ship).
        #[arg(long, default_value = "image")]
        profile: String,
        /// Also profile scheduling-webhook and quota-state with `perf record` while the pods go
        /// through, and print where each one's CPU per pod goes (use `--profile release`, whose
        /// binaries keep their symbols' lines).
        #[arg(long)]
        stages: bool,
        /// One more argument for one service's `serve`, as SERVICE=ARG (repeatable):
        /// `--arg scheduling-webhook=--feature-gates=BindingAdmissionWebhook=true` measures
        /// another configuration than the deployed one.
        #[arg(long = "arg")]
        args: Vec<String>,
    },
    /// The cluster in a box at scale, once with no webhooks and once with every service as `up`
    /// starts them: Pods created per second, Pod start latency, what each webhook adds (the API
    /// server's metrics) and each process's CPU and memory per Pod, step by step.
    ClusterBench {
        /// Simulated nodes, heartbeating every 10-22 s.
        #[arg(long, default_value_t = 1000)]
        nodes: usize,
        /// Pods in all, from Deployments (two thirds) and Jobs (one third).
        #[arg(long, default_value_t = 30_000)]
        pods: usize,
        /// Namespaces, each with its own ElasticQuota.
        #[arg(long, default_value_t = 100)]
        namespaces: usize,
        /// Equal steps the Pods come in (a table row each).
        #[arg(long, default_value_t = 3)]
        steps: usize,
        /// Minutes one step may take before the run reports what it reached.
        #[arg(long, default_value_t = 20)]
        step_timeout_mins: u64,
        /// Requests per second kube-controller-manager and kube-scheduler may send.
        #[arg(long, default_value_t = 500)]
        client_qps: u32,
        /// Cargo profile of the services (`image` is what the images ship).
        #[arg(long, default_value = "image")]
        profile: String,
    },
    /// Every service under steady load at once (half of each one's measured maximum): a row of
    /// p99 and RSS per service every 30 s, a summary at the end; fails if any review failed.
    Soak {
        /// Minutes of steady load (after the calibration).
        #[arg(long, default_value_t = 10)]
        minutes: u64,
        /// Seconds of closed-loop load, all services at once, that measure each maximum.
        #[arg(long, default_value_t = 10)]
        calibrate_secs: u64,
        /// Fraction of each maximum sent.
        #[arg(long, default_value_t = 0.5)]
        fraction: f64,
        /// Seconds between rows.
        #[arg(long, default_value_t = 30)]
        report_every_secs: u64,
        /// Cargo profile of the binaries (`release` for figures; the test command soaks the
        /// `dev` build it has for one minute).
        #[arg(long, default_value = "release")]
        profile: String,
    },
}

/// The given fixtures (the workspace's `fixtures/`, or `$ADMISSION_FIXTURES_DIR`).
fn fixtures() -> PathBuf {
    admission_testing::fixtures::fixtures_root()
}

/// [`Cmd::Variants`]: the cases of `domain` from wherever they live.
fn variants(domain: &str, out: &Path, per_case: usize, seed: u64) -> Result<()> {
    let cases = match domain {
        "kthena-v1" => root().join("services/registry-webhook/fixtures"),
        "trainer-v2" => root().join("services/training-webhook/fixtures"),
        "registry" | "scheduling" | "node-config" | "training" => fixtures(),
        other => bail!("no domain {other}"),
    };
    let n = admission_testing::variants::write_for_comparison(&cases, domain, out, per_case, seed)
        .with_context(|| out.display().to_string())?;
    if n == 0 {
        bail!("no case of {domain} under {}", cases.display());
    }
    println!("{n} variants written to {}", out.display());
    Ok(())
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Cargo, in the environment the user's own `cargo` commands see. `cargo run` hands xtask the
/// variables of xtask's package (CARGO_MANIFEST_DIR, CARGO_PKG_NAME, …); ring's build script
/// tracks some of them, so passing them on made every switch between `cargo xtask …` and plain
/// `cargo test` rebuild ring and the 21 crates above it.
fn cargo() -> Command {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.current_dir(root());
    for (key, _) in std::env::vars_os() {
        if key.to_str().is_some_and(is_package_variable) {
            c.env_remove(key);
        }
    }
    c
}

/// The variables `cargo run` sets for the package it runs (not cargo's own configuration).
fn is_package_variable(key: &str) -> bool {
    key.starts_with("CARGO_PKG_")
        || matches!(
            key,
            "CARGO_MANIFEST_DIR"
                | "CARGO_MANIFEST_PATH"
                | "CARGO_MANIFEST_LINKS"
                | "CARGO_CRATE_NAME"
                | "CARGO_BIN_NAME"
                | "CARGO_PRIMARY_PACKAGE"
        )
}

fn tools() -> Result<testenv::Binaries> {
    let bins = testenv::tools::ensure(&root().join("shared/xtask/go"))?;
    testenv::tools::ensure_cluster(&root().join("shared/xtask/go"))?;
    testenv::tools::ensure_prometheus()?;
    testenv::tools::ensure_haproxy()?;
    image::tools()?;
    image::cargo_cyclonedx()?;
    testenv::tools::ensure_valgrind()?;
    testenv::tools::ensure_report_validators()?;
    testenv::tools::ensure_pre_commit()?;
    Ok(bins)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let res = match cli.cmd {
        Cmd::Tools => tools()
            .and_then(|b| Ok((b, testenv::tools::locate_cluster()?)))
            .map(|(b, c)| {
                println!("kube-apiserver: {}", b.kube_apiserver.display());
                println!(
                    "kube-controller-manager: {}",
                    c.controller_manager.display()
                );
                println!("kube-scheduler: {}", c.scheduler.display());
                println!("kubectl:        {}", c.kubectl.display());
                println!("kwok:           {}", c.kwok.display());
                println!("etcd:           {}", b.etcd.display());
                println!("kustomize:      {}", b.kustomize.display());
                println!("tilt:           {}", b.tilt.display());
                if let Ok(p) = testenv::tools::prometheus() {
                    println!("prometheus:     {}", p.server.display());
                    println!("promtool:       {}", p.promtool.display());
                }
                if let Ok(h) = testenv::tools::haproxy() {
                    println!("haproxy:        {}", h.display());
                }
                if let Ok(t) = image::tools() {
                    println!("buildah:        {}", t.buildah.display());
                    println!("podman:         {}", t.podman.display());
                    println!("skopeo:         {}", t.skopeo.display());
                    println!("containers.conf: {}", t.containers_conf.display());
                }
                if let Ok(v) = testenv::tools::valgrind() {
                    println!("valgrind:       {}", v.display());
                }
                if let Ok(v) = testenv::tools::report_validators() {
                    println!("sarif-multitool: {}", v.sarif_multitool.display());
                    println!("junitparser:    {}", v.junitparser_path.display());
                }
                if let Ok(p) = testenv::tools::pre_commit() {
                    println!("pre-commit:     {}", p.display());
                }
            }),
        Cmd::Test { jobs, rerun } => test(jobs, rerun),
        Cmd::Fuzz {
            runs,
            seconds,
            targets,
        } => fuzz::run(&root(), &targets, runs, seconds).and_then(|ran| {
            let failed: Vec<&str> = ran.iter().filter(|r| !r.ok).map(|r| r.target).collect();
            if failed.is_empty() {
                Ok(())
            } else {
                bail!("fuzz targets crashed: {}", failed.join(", "))
            }
        }),
        Cmd::GivenDiff { dir } => match given::run(&root(), &dir) {
            Ok(true) => return ExitCode::from(1),
            other => other.map(|_| ()),
        },
        Cmd::Variants {
            domain,
            out,
            per_case,
            seed,
        } => variants(&domain, &out, per_case, seed),
        Cmd::Instructions { update } => instruction_counts(update),
        Cmd::Image {
            services,
            out,
            profile,
            tag,
            push,
        } => images(services, out, profile, tag, push).map(drop),
        Cmd::Stages { seconds, load } => build_profile("release", SERVED_UNDER_LOAD)
            .and_then(|bin_dir| stages::run(&root(), &bin_dir, &load.options(1, seconds))),
        Cmd::Bench {
            runs,
            seconds,
            load,
        } => build_profile("release", SERVED_UNDER_LOAD).and_then(|bin_dir| {
            let o = load.options(runs, seconds);
            bench::run(&root(), &bin_dir, &o)?;
            let mut build = cargo();
            build.args(["build", "--release", "-p", "quota-state", "--examples"]);
            run(build, "cargo build --release -p quota-state --examples")?;
            bench::quota_state(&bin_dir, &o)
        }),
        Cmd::FleetLatency {
            runs,
            seconds,
            load,
        } => build_profile("release", SERVED_UNDER_LOAD).and_then(|bin_dir| {
            testenv::tools::ensure(&root().join("shared/xtask/go"))?;
            bench::fleet_latency(&root(), &bin_dir, &load.options(runs, seconds))
        }),
        Cmd::CheckSpeed {
            manifests,
            budget_secs,
            runs,
            cpus,
        } => check_speed::run(&root(), cargo(), manifests, runs, &cpus, budget_secs),
        Cmd::Footprint {
            pods,
            nodes,
            profile,
            stages,
            args,
        } => footprint(pods, nodes, &profile, stages, &args),
        Cmd::ClusterBench {
            nodes,
            pods,
            namespaces,
            steps,
            step_timeout_mins,
            client_qps,
            profile,
        } => cluster_bench(
            &profile,
            &cluster_bench::Options {
                nodes,
                pods,
                namespaces,
                steps,
                step_timeout: Duration::from_secs(step_timeout_mins * 60),
                client_qps,
            },
        ),
        Cmd::Soak {
            minutes,
            calibrate_secs,
            fraction,
            report_every_secs,
            profile,
        } => soak(
            &profile,
            &soak::Options {
                minutes,
                calibrate_secs,
                fraction,
                report_every_secs,
            },
        ),
        Cmd::Up(args) => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("runtime")
            .and_then(|rt| rt.block_on(up(args))),
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(mut c: Command, what: &str) -> Result<()> {
    eprintln!("==> {what}");
    let status = c.status().with_context(|| what.to_owned())?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

/// Executions per fuzz target in the test command (seconds each).
const FUZZ_RUNS_IN_TEST: u64 = 100_000;

/// The README's test command.
/// Free space a clean clone's test command fills (target/ about 5 GiB, the fuzz build 2.5 GiB,
/// with room for test data): below it, rustc fails late with an LLVM I/O error.
const DISK_NEEDED_GIB: u64 = 10;

/// Warns (does not fail: a warm tree needs far less) when the target directory's file system
/// has less than [`DISK_NEEDED_GIB`] free. Reads `df`, to need no file-system crate for one
/// number.
fn warn_if_disk_is_short() {
    let out = Command::new("df")
        .args(["-Pk"])
        .arg(root())
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let free_kib = out
        .lines()
        .nth(1)
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(kib) = free_kib
        && kib < DISK_NEEDED_GIB * 1024 * 1024
    {
        eprintln!(
            "warning: {:.1} GiB free where the build goes; a clean build of everything the tests \
             need takes about {DISK_NEEDED_GIB} GiB (remove old target directories first)",
            kib as f64 / (1024.0 * 1024.0)
        );
    }
}

fn test(jobs: usize, rerun: bool) -> Result<()> {
    let started = Instant::now();
    tools()?;
    eprintln!("tools ready after {:.0?}", started.elapsed());
    warn_if_disk_is_short();
    let mut fmt = cargo();
    fmt.args(["fmt", "--all", "--", "--check"]);
    run(fmt, "cargo fmt --all -- --check")?;
    let mut clippy = cargo();
    clippy.args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]);
    run(
        clippy,
        "cargo clippy --workspace --all-targets -- -D warnings",
    )?;
    eprintln!("==> cargo test --workspace --no-run (every test binary, built once)");
    let mut build = cargo();
    build.args(["test", "--workspace", "--no-run"]);
    let bins = runner::build(build)?;
    // The release build, once: every service for its image and review-loop for the instruction
    // counts, linked side by side. The images come before the test binaries, which include their
    // end-to-end test (it fails on a missing images.json, so none is left from an earlier run).
    let mut failed_early = Vec::new();
    let out = root().join("target/images");
    let _ = std::fs::remove_file(out.join(images::MANIFEST));
    let svcs = services()?;
    let mut release: Vec<&str> = svcs.iter().map(String::as_str).collect();
    release.push("instructions");
    let release_dir = build_profile(TEST_RELEASE_PROFILE, &release)?;
    let imaging = Instant::now();
    let imaged = image::build(
        &root(),
        &release_dir,
        &image::Options {
            services: svcs.clone(),
            out,
            profile: TEST_RELEASE_PROFILE.into(),
            extra_tags: Vec::new(),
            push: false,
        },
    );
    match imaged {
        Ok(b) => eprintln!(
            "{} images built in {:.0?} (release build done after {:.0?})",
            b.images.len(),
            imaging.elapsed(),
            started.elapsed()
        ),
        Err(e) => {
            eprintln!("cargo xtask image: {e:#}");
            failed_early.push("cargo xtask image".to_owned());
        }
    }
    // What passed on this very tree before is replayed, not run again (see cache.rs).
    let mut record =
        cache::Record::open(&root(), root().join("target/xtask-test-record.json"), rerun)?;
    let mut totals = runner::Totals::default();
    let mut to_run = Vec::new();
    let mut inputs_of = std::collections::HashMap::new();
    for b in bins {
        let inputs = cache::files_stamp(std::slice::from_ref(&b.executable));
        match record.replay(&b.name, &inputs) {
            Some(passed) => {
                println!("     Running {} (cached: {passed} passed)", b.name);
                totals.passed += passed;
            }
            None => {
                inputs_of.insert(b.name.clone(), inputs);
                to_run.push(b);
            }
        }
    }
    eprintln!(
        "==> {} test binaries, {jobs} at a time ({} replayed; tests built after {:.0?})",
        to_run.len(),
        totals.passed,
        started.elapsed()
    );
    // The fuzz targets build beside the test binaries, at the lowest priority (unless their
    // pass is replayed): most of the end-to-end binaries' time is waiting.
    let fuzz_build = (!record.holds("fuzz targets", ""))
        .then(|| std::thread::spawn(|| fuzz::build(&root(), fuzz::Priority::Background)));
    let ran = runner::run(to_run, jobs, &root().join("target/xtask-test-times.json"));
    for (name, passed) in &ran.succeeded {
        record.passed(name, &inputs_of[name], *passed);
    }
    totals.passed += ran.passed;
    totals.failed += ran.failed + failed_early.len() as u64;
    totals.failed_binaries.extend(ran.failed_binaries);
    totals.failed_binaries.extend(failed_early);
    step(&mut record, &mut totals, "doc tests", "", || {
        eprintln!("==> cargo test --workspace --doc");
        let mut doc = cargo();
        doc.args(["test", "--workspace", "--doc"]);
        let out = doc.output().context("cargo test --doc")?;
        let text = String::from_utf8_lossy(&out.stdout);
        print!("{text}");
        let mut own = runner::Totals::default();
        runner::count(&text, &mut own);
        if !out.status.success() || own.failed > 0 {
            bail!("{} doc tests failed", own.failed.max(1));
        }
        Ok(own.passed)
    });
    // The habits: the dependency policy and the declared minimum Rust version.
    step(&mut record, &mut totals, "dependency policy", "", || {
        policy::dependency_policy(&root())
    });
    step(&mut record, &mut totals, "minimum Rust version", "", || {
        policy::minimum_rust_version(&root())
    });
    // Every fuzz target, bounded and seeded: a crash fails the run.
    step(&mut record, &mut totals, "fuzz targets", "", || {
        match fuzz_build.map(std::thread::JoinHandle::join) {
            Some(Ok(built)) => built?,
            Some(Err(_)) => bail!("the fuzz build's thread panicked"),
            None => fuzz::build(&root(), fuzz::Priority::Normal)?,
        }
        let ran = fuzz::run_built(&root(), &[], FUZZ_RUNS_IN_TEST, None)?;
        let crashed: Vec<&str> = ran.iter().filter(|r| !r.ok).map(|r| r.target).collect();
        if !crashed.is_empty() {
            bail!("fuzz targets crashed: {}", crashed.join(", "));
        }
        Ok(ran.len() as u64)
    });
    // Instructions per review of the in-process paths against the committed baseline
    // (callgrind counts, stable on a busy machine; never wall-clock time).
    let loop_bin = cache::files_stamp(&[release_dir.join("review-loop")]);
    step(
        &mut record,
        &mut totals,
        "instruction counts",
        &loop_bin,
        || instruction_counts_in(&release_dir, false).map(|()| 1),
    );
    // Every service under steady load at once for a minute (the dev build, so the figures are
    // not the README's): no review may fail, no service may exit. The binaries are the ones
    // `cargo test --workspace` built above (a `cargo build -p …` of them would unify features
    // differently and compile them again).
    let soaked: Vec<PathBuf> = svcs
        .iter()
        .map(|s| root().join("target/debug").join(s))
        .collect();
    step(
        &mut record,
        &mut totals,
        "soak",
        &cache::files_stamp(&soaked),
        || {
            eprintln!(
                "==> cargo xtask soak --profile dev --minutes 1 (bounded soak, the tests' build)"
            );
            soak::run(
                &root(),
                &root().join("target/debug"),
                &soak::Options {
                    minutes: 1,
                    calibrate_secs: 5,
                    fraction: 0.5,
                    report_every_secs: 15,
                },
            )
            .map(|()| 1)
        },
    );
    // Nothing compiled twice: the same builds again must find every crate fresh (a crate built
    // again means a feature set or environment differs between two steps of this run).
    eprintln!("==> the test and release builds again: nothing may compile");
    match compiled_again(&release) {
        Ok(again) if again.is_empty() => {
            eprintln!("nothing compiled: every crate of this run's builds was reused");
            totals.passed += 1;
        }
        Ok(again) => {
            eprintln!("compiled a second time in one run:\n{}", again.join("\n"));
            totals.failed += 1;
            totals.failed_binaries.push("nothing compiled twice".into());
        }
        Err(e) => {
            eprintln!("nothing compiled twice: {e:#}");
            totals.failed += 1;
            totals.failed_binaries.push("nothing compiled twice".into());
        }
    }
    record.save();
    eprintln!("all checks took {:.0?}", started.elapsed());
    // One closing line over every test binary.
    println!("{} passed, {} failed", totals.passed, totals.failed);
    if !totals.failed_binaries.is_empty() {
        bail!("failed: {}", totals.failed_binaries.join(", "));
    }
    Ok(())
}

/// Runs one step of the test command (`run` returns the tests it passed), or replays its pass
/// recorded on the same tree with the same `inputs`; counts it in `totals` either way.
fn step(
    record: &mut cache::Record,
    totals: &mut runner::Totals,
    name: &str,
    inputs: &str,
    run: impl FnOnce() -> Result<u64>,
) {
    if let Some(passed) = record.replay(name, inputs) {
        eprintln!("==> {name} (cached: {passed} passed)");
        totals.passed += passed;
        return;
    }
    match run() {
        Ok(passed) => {
            record.passed(name, inputs, passed);
            totals.passed += passed;
        }
        Err(e) => {
            eprintln!("{name}: {e:#}");
            totals.failed += 1;
            totals.failed_binaries.push(name.to_owned());
        }
    }
}

fn services() -> Result<Vec<String>> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(root().join("services"))? {
        let e = e?;
        if e.path().join("Cargo.toml").is_file() {
            v.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    v.sort();
    Ok(v)
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

/// Builds `packages` with cargo profile `profile`; returns the directory of the binaries.
fn build_profile(profile: &str, packages: &[&str]) -> Result<PathBuf> {
    let build = profile_build(profile, packages);
    run(
        build,
        &format!(
            "cargo build --profile {profile} -p {}",
            packages.join(" -p ")
        ),
    )?;
    // Cargo's directory for a profile: `dev` builds into debug.
    let dir = if profile == "dev" { "debug" } else { profile };
    Ok(root().join("target").join(dir))
}

/// Runs the test command's two builds again (`cargo test --workspace --no-run`, and the
/// `quick-release` build of `release`) and returns the `Compiling …` lines cargo printed: none
/// when everything the run built is reused.
fn compiled_again(release: &[&str]) -> Result<Vec<String>> {
    let mut tests = cargo();
    tests.args(["test", "--workspace", "--no-run"]);
    let quick = profile_build(TEST_RELEASE_PROFILE, release);
    let mut again = Vec::new();
    for (mut cmd, what) in [
        (tests, "cargo test --workspace --no-run"),
        (quick, "cargo build --profile quick-release"),
    ] {
        let out = cmd.output().with_context(|| what.to_owned())?;
        if !out.status.success() {
            bail!(
                "{what} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        again.extend(
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .map(str::trim)
                .filter(|l| l.starts_with("Compiling "))
                .map(|l| format!("{what}: {l}")),
        );
    }
    Ok(again)
}

/// `cargo build --profile <profile> -p …`, with the path remapping the image profiles are built
/// with (their binaries are reproducible across checkouts).
fn profile_build(profile: &str, packages: &[&str]) -> Command {
    let mut build = cargo();
    build.args(["build", "--profile", profile]);
    if profile == IMAGE_PROFILE || profile == TEST_RELEASE_PROFILE {
        build.env("RUSTFLAGS", image::remap_rustflags(&root()));
    }
    for p in packages {
        build.args(["-p", p]);
    }
    build
}

/// The profile images ship (release code, fat LTO, no debug info, stripped).
const IMAGE_PROFILE: &str = "image";

/// The test command's release build (the same code without fat LTO, in 16 codegen units): its
/// images and the instruction counts, whose baseline is taken on this profile, in one build.
const TEST_RELEASE_PROFILE: &str = "quick-release";

/// `cargo xtask image`: builds the binaries of `services` (all when empty) with `profile`, then
/// their images.
fn images(
    only: Vec<String>,
    out: PathBuf,
    profile: String,
    extra_tags: Vec<String>,
    push: bool,
) -> Result<images::Built> {
    let all = services()?;
    if let Some(unknown) = only.iter().find(|s| !all.contains(s)) {
        bail!(
            "no service named {unknown}; the services are {}",
            all.join(", ")
        );
    }
    let services = if only.is_empty() { all } else { only };
    let names: Vec<&str> = services.iter().map(String::as_str).collect();
    let bin_dir = build_profile(&profile, &names)?;
    let out = if out.is_absolute() {
        out
    } else {
        root().join(out)
    };
    image::build(
        &root(),
        &bin_dir,
        &image::Options {
            services,
            out,
            profile,
            extra_tags,
            push,
        },
    )
}

/// `cargo xtask instructions [--update]`.
fn instruction_counts(update: bool) -> Result<()> {
    let bin_dir = build_profile(TEST_RELEASE_PROFILE, &["instructions"])?;
    instruction_counts_in(&bin_dir, update)
}

/// Counts with the `review-loop` of `bin_dir`, against the baseline (or writing it).
fn instruction_counts_in(bin_dir: &Path, update: bool) -> Result<()> {
    eprintln!("==> instructions per review under callgrind");
    let rows = counts::measure(&root(), bin_dir)?;
    let (table, failed) = counts::report(&rows);
    print!("{table}");
    if update {
        counts::write_baseline(&root(), &rows)?;
        eprintln!("baseline written: shared/instructions/baseline.json");
        return Ok(());
    }
    if !failed.is_empty() {
        bail!("instruction counts grew:\n{}", failed.join("\n"));
    }
    Ok(())
}

/// What the soak and the bench build: the load client, quota-state and every webhook service.
const SERVED_UNDER_LOAD: &[&str] = &[
    "loadbench",
    "quota-state",
    "registry-webhook",
    "node-config-webhook",
    "training-webhook",
    "scheduling-webhook",
];

fn soak(profile: &str, o: &soak::Options) -> Result<()> {
    let bin_dir = build_profile(profile, SERVED_UNDER_LOAD)?;
    soak::run(&root(), &bin_dir, o)
}

fn footprint(
    pods: usize,
    nodes: usize,
    profile: &str,
    stages: bool,
    args: &[String],
) -> Result<()> {
    let mut args_of: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for a in args {
        let Some((svc, arg)) = a.split_once('=') else {
            bail!("--arg {a:?}: give SERVICE=ARG");
        };
        args_of
            .entry(svc.to_owned())
            .or_default()
            .push(arg.to_owned());
    }
    let bins = tools()?;
    let svcs = services()?;
    let names: Vec<&str> = svcs.iter().map(String::as_str).collect();
    let bin_dir = build_profile(profile, &names)?;
    // `lone-message`, the machine's floor printed under the table; built on its own, since with
    // the services its features would change theirs (and so what is measured).
    build_profile(profile, &["loadbench"])?;
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("runtime")?
        .block_on(footprint::run(
            &bins,
            bin_dir,
            svcs,
            footprint::Load {
                pods,
                nodes,
                stages,
                args_of,
            },
        ))
}

fn cluster_bench(profile: &str, o: &cluster_bench::Options) -> Result<()> {
    let bins = tools()?;
    let cluster_bins = testenv::tools::locate_cluster()?;
    let svcs = services()?;
    let names: Vec<&str> = svcs.iter().map(String::as_str).collect();
    let bin_dir = build_profile(profile, &names)?;
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("runtime")?
        .block_on(cluster_bench::run(&bins, &cluster_bins, bin_dir, svcs, o))
}

async fn up(args: UpArgs) -> Result<()> {
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
    let mut cp = testenv::ControlPlane::start(&bins).await?;
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
