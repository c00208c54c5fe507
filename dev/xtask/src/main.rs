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
use std::time::Duration;

mod bench;
mod cache;
mod chart;
mod check_speed;
mod cluster_bench;
mod counts;
mod differential;
mod footprint;
mod fuzz;
mod given;
mod image;
mod peers;
mod policy;
mod runner;
mod soak;
mod stages;
mod test_command;
mod up;

use anyhow::{Context as _, Result, bail};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    about = "Project commands: up, test, tools, footprint, check-speed."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
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
    Up(up::UpArgs),
    /// Build the tools if needed, then run fmt check, clippy and every test.
    Test {
        /// Test binaries run at once (the end-to-end ones mostly wait on their own control
        /// plane, so a few side by side take the time of the longest).
        #[arg(long, default_value_t = 3)]
        jobs: usize,
        /// Run every step, replaying none of the passes recorded by an earlier run on the same
        /// tree (see `dev/xtask/src/cache.rs`).
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
    /// Every upstream's own handlers (`tools/upstream-oracle/*`, built with Go and cached) and
    /// ours on the given cases and `--per-case` variants of each: per upstream, how many agree,
    /// differ only in words, differ by a FIX row, could not come from an API server, or differ;
    /// the smallest review of each real difference. Fails when one remains.
    Differential {
        /// Variants per case.
        #[arg(long, default_value_t = 20)]
        per_case: usize,
        /// Seed of the variants.
        #[arg(long, default_value_t = admission_testing::variants::DEFAULT_SEED)]
        seed: u64,
        /// Only these upstreams (`kthena`, `trainer`, `training`, `koordinator`; comma-separated).
        #[arg(long, value_delimiter = ',')]
        upstream: Vec<String>,
        /// A Koordinator checkout at a7a1b76 (its oracle is built inside it; without it the
        /// Koordinator row is skipped).
        #[arg(long)]
        koordinator_src: Option<PathBuf>,
        /// Where the case files are written (kept; a temporary folder when absent).
        #[arg(long)]
        work: Option<PathBuf>,
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
        /// Instead of the suite: each path with an upstream oracle beside upstream's own
        /// server built from it, at 4 and 16 connections, with the ratios.
        #[arg(long)]
        peers: bool,
        /// A Koordinator checkout at the pin, for the peers' Pod paths.
        #[arg(long)]
        koordinator_src: Option<PathBuf>,
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
    /// compared with `dev/instructions/baseline.json`: more than 10 % above fails.
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
    /// The cluster in a box at scale, once with no webhooks (or with Koordinator's own server:
    /// `--peer`) and once with every service as `up` starts them: Pods created per second, Pod
    /// start latency, what each webhook adds (the API server's metrics) and each process's CPU
    /// and memory per Pod, step by step.
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
        /// Run the same cluster with another webhook server in place of the no-webhook run:
        /// `koordinator` (koord-manager at the pinned commit, beside scheduling-webhook and
        /// node-config-webhook with quota-state).
        #[arg(long, value_parser = ["koordinator"])]
        peer: Option<String>,
        /// A checkout of Koordinator at the pinned commit, to build koord-manager from (once;
        /// cached like the other tools) and to take its CRDs and webhook configurations from.
        #[arg(long)]
        koordinator_src: Option<PathBuf>,
        /// The quota feature off on both sides (default: on, each Pod judged against its
        /// namespace's ElasticQuota).
        #[arg(long)]
        no_quota: bool,
        /// Runs of each side, interleaved (with --peer).
        #[arg(long, default_value_t = 1)]
        rounds: usize,
        /// Where the chart of each side's latency percentiles is written (SVG).
        #[arg(long, default_value = "target/cluster-bench.svg")]
        chart: PathBuf,
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
    let mut c = plain(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.current_dir(root());
    c
}

/// `program` without the package variables `cargo run` gave the xtask (see [`cargo`]).
fn plain(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new(program);
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
    let bins = testenv::tools::ensure(&root().join("dev/xtask/go"))?;
    testenv::tools::ensure_cluster(&root().join("dev/xtask/go"))?;
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
        Cmd::Test { jobs, rerun } => test_command::test(jobs, rerun),
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
        Cmd::Differential {
            per_case,
            seed,
            upstream,
            koordinator_src,
            work,
        } => differential::run(&differential::Options {
            per_case,
            seed,
            only: upstream,
            koordinator_src,
            work,
        }),
        Cmd::Instructions { update } => instruction_counts(update),
        Cmd::Image {
            services,
            out,
            profile,
            tag,
            push,
        } => images(services, out, profile, tag, push).map(drop),
        Cmd::Stages { seconds, load } => build_under_load("release")
            .and_then(|bin_dir| stages::run(&root(), &bin_dir, &load.options(1, seconds))),
        Cmd::Bench {
            runs,
            seconds,
            load,
            peers,
            koordinator_src,
        } => build_under_load("release").and_then(|bin_dir| {
            let o = load.options(runs, seconds);
            if peers {
                return peers::run(&root(), &bin_dir, &o, koordinator_src.as_deref());
            }
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
        } => build_under_load("release").and_then(|bin_dir| {
            testenv::tools::ensure(&root().join("dev/xtask/go"))?;
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
            peer,
            koordinator_src,
            no_quota,
            rounds,
            chart,
        } => cluster_bench(
            &profile,
            peer.is_some(),
            koordinator_src.as_deref(),
            cluster_bench::Options {
                nodes,
                pods,
                namespaces,
                steps,
                step_timeout: Duration::from_secs(step_timeout_mins * 60),
                client_qps,
                peer: None,
                quota: !no_quota,
                rounds,
                chart,
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
            .and_then(|rt| rt.block_on(up::up(args))),
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

/// Builds `packages` with cargo profile `profile`; returns the directory of the binaries.
fn build_profile(profile: &str, packages: &[&str]) -> Result<PathBuf> {
    build_profile_with(profile, packages, &[])
}

/// [`build_profile`] with cargo `features` (`package/feature`) on.
fn build_profile_with(profile: &str, packages: &[&str], features: &[&str]) -> Result<PathBuf> {
    let mut build = profile_build(profile, packages);
    if !features.is_empty() {
        build.args(["--features", &features.join(",")]);
    }
    run(
        build,
        &format!(
            "cargo build --profile {profile} -p {}{}",
            packages.join(" -p "),
            if features.is_empty() {
                String::new()
            } else {
                format!(" --features {}", features.join(","))
            }
        ),
    )?;
    // Cargo's directory for a profile: `dev` builds into debug.
    let dir = if profile == "dev" { "debug" } else { profile };
    Ok(root().join("target").join(dir))
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
        eprintln!("baseline written: dev/instructions/baseline.json");
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

/// quota-state's synthetic fill (`--synthetic-*`), which the load suite and the soak start it
/// with. Named as the package's own feature in a build of quota-state alone: with several
/// packages, `--features quota-state/testing` names the feature of quota-state *as a
/// dependency*, which for quota-state itself is only its dev-dependency on itself, so its
/// binary was built without the flags.
const UNDER_LOAD_FEATURES: &[&str] = &["testing"];

/// Builds [`SERVED_UNDER_LOAD`] with `profile`, quota-state on its own with
/// [`UNDER_LOAD_FEATURES`]; returns the directory of the binaries.
fn build_under_load(profile: &str) -> Result<PathBuf> {
    let others: Vec<&str> = SERVED_UNDER_LOAD
        .iter()
        .copied()
        .filter(|p| *p != "quota-state")
        .collect();
    build_profile(profile, &others)?;
    build_profile_with(profile, &["quota-state"], UNDER_LOAD_FEATURES)
}

fn soak(profile: &str, o: &soak::Options) -> Result<()> {
    let bin_dir = build_under_load(profile)?;
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

/// [`Cmd::ClusterBench`]; with `peer`, koord-manager (built from `koordinator_src` when not
/// cached) beside the two services that do its work.
fn cluster_bench(
    profile: &str,
    peer: bool,
    koordinator_src: Option<&Path>,
    mut o: cluster_bench::Options,
) -> Result<()> {
    let bins = tools()?;
    let cluster_bins = testenv::tools::locate_cluster()?;
    let svcs = if peer {
        let checkout = koordinator_src.context(
            "--peer koordinator needs --koordinator-src (its CRDs and webhook configurations)",
        )?;
        o.peer = Some(cluster_bench::Peer {
            koord_manager: testenv::tools::koord_manager(Some(checkout))?,
            checkout: checkout.to_path_buf(),
        });
        ["node-config-webhook", "quota-state", "scheduling-webhook"]
            .map(String::from)
            .to_vec()
    } else {
        services()?
    };
    let names: Vec<&str> = svcs.iter().map(String::as_str).collect();
    let bin_dir = build_profile(profile, &names)?;
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("runtime")?
        .block_on(cluster_bench::run(&bins, &cluster_bins, bin_dir, svcs, &o))
}
