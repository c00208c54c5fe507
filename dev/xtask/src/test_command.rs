//! `cargo xtask test`: the one test command (see docs/testing.md for each step).

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context as _, Result, bail};

use crate::*;

/// Executions per fuzz target in the test command (seconds each).
pub const FUZZ_RUNS_IN_TEST: u64 = 100_000;

/// Free space a clean clone's test command fills (a clean clone measured 15 GiB after a run:
/// the debug build with every test binary, the fuzz build, test data): below it, rustc or the
/// linker fails late for want of space.
const DISK_NEEDED_GIB: u64 = 16;

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

/// The README's test command.
pub fn test(jobs: usize, rerun: bool) -> Result<()> {
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
