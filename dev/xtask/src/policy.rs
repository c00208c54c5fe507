//! The checks of the repository's habits that the test command runs beside the tests: the
//! dependency policy (`deny.toml`, with cargo-deny) and the declared minimum Rust version (the
//! workspace's `rust-version`, with that toolchain from rustup). Also installs the cargo tools
//! the xtask uses into the tool cache.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result, bail};

use crate::plain;

/// cargo-deny release installed when none is in the tool cache.
const CARGO_DENY_VERSION: &str = "0.20.2";

/// The binary `bin` of crates.io's `name` at `version`, installed into the tool cache with
/// `cargo install --locked` the first time.
pub fn cargo_tool(name: &str, version: &str, bin: &str) -> Result<PathBuf> {
    let root = testenv::tools::cache_dir().join(format!("{name}-{version}"));
    let path = root.join("bin").join(bin);
    if !path.is_file() {
        eprintln!("installing {name} {version} from crates.io, first time only");
        let ok = plain("cargo")
            .args(["install", "--locked", "--version", version, "--root"])
            .arg(&root)
            .arg(name)
            .status()
            .with_context(|| format!("cargo install {name}"))?
            .success();
        if !ok {
            bail!("cargo install {name} failed");
        }
    }
    Ok(path)
}

/// `cargo deny check licenses bans sources` on the workspace; the number of checks passed.
pub fn dependency_policy(root: &Path) -> Result<u64> {
    let deny = cargo_tool("cargo-deny", CARGO_DENY_VERSION, "cargo-deny")?;
    eprintln!("==> cargo deny check licenses bans sources (deny.toml)");
    let checks = ["licenses", "bans", "sources"];
    let ok = Command::new(deny)
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .args(["--log-level", "warn", "check"])
        .args(checks)
        .status()
        .context("cargo-deny")?
        .success();
    if !ok {
        bail!("the dependency policy (deny.toml) does not hold");
    }
    Ok(checks.len() as u64)
}

/// The workspace's `rust-version` (`[workspace.package]`).
pub fn declared_msrv(manifest: &str) -> Option<&str> {
    manifest
        .lines()
        .filter_map(|l| l.trim().strip_prefix("rust-version"))
        .filter_map(|rest| rest.trim_start().strip_prefix('='))
        .map(|v| v.trim().trim_matches('"'))
        .find(|v| !v.is_empty())
}

/// The libraries and binaries of the workspace checked with the declared minimum Rust version
/// (installed with rustup, minimal profile, when missing), in `target/msrv`.
pub fn minimum_rust_version(root: &Path) -> Result<u64> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).context("Cargo.toml")?;
    let Some(version) = declared_msrv(&manifest) else {
        bail!("Cargo.toml declares no rust-version");
    };
    let installed = Command::new("rustup")
        .args(["run", version, "rustc", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !installed {
        eprintln!("installing Rust {version} with rustup (minimal profile), first time only");
        let ok = Command::new("rustup")
            .args(["toolchain", "install", version, "--profile", "minimal"])
            .status()
            .context("rustup toolchain install")?
            .success();
        if !ok {
            bail!("rustup could not install Rust {version}");
        }
    }
    // The workspace, then admission-check alone: built alone (as its docs say to install it)
    // it has none of the kit's `serve` feature, a configuration no workspace build compiles.
    let runs: [&[&str]; 2] = [
        &["--workspace", "--lib", "--bins"],
        &["-p", "admission-check"],
    ];
    for what in runs {
        eprintln!(
            "==> cargo +{version} check {} (the declared rust-version)",
            what.join(" ")
        );
        // Through rustup itself: the `cargo` on the xtask's PATH may be the pinned toolchain's own.
        let ok = plain("rustup")
            .args(["run", version, "cargo", "check"])
            .args(what)
            .args(["--locked", "--quiet"])
            .env("CARGO_TARGET_DIR", root.join("target/msrv"))
            .current_dir(root)
            .status()
            .context("cargo check")?
            .success();
        if !ok {
            bail!(
                "`cargo check {}` fails with the declared rust-version {version}",
                what.join(" ")
            );
        }
    }
    Ok(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_declared_version_is_read() {
        let m = "[workspace.package]\nedition = \"2024\"\nrust-version = \"1.89\"\n";
        assert_eq!(declared_msrv(m), Some("1.89"));
        assert_eq!(declared_msrv("[package]\nname = \"x\"\n"), None);
    }
}
