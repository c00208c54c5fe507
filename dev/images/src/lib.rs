//! The services' OCI images, built with buildah from what this machine has: no registry, no
//! Docker engine.
//!
//! Every image has two layers:
//! - the **base**: what distroless `cc` holds, made from Debian's own packages
//!   (`libc6`, `libgcc-s1`, `ca-certificates`, `netbase`), with an `/etc/passwd` naming user
//!   65532 `nonroot`, an `nsswitch.conf` (so glibc resolves names from `/etc/hosts` and DNS) and
//!   no shell; the same layer under every service;
//! - the **service**: its binary at `/usr/local/bin/service` and its SBOM under `/usr/share/sbom`.
//!
//! Both are committed with a fixed timestamp (the commit's time), so the same inputs give the
//! same layer digests ([`ImageRef::diff_ids`], [`archive_layers`]).
//!
//! The tools are driven as commands (buildah, skopeo, podman, dpkg-deb, apt-get): they are the
//! real implementations of the formats and stores involved, and the Go libraries behind them
//! have no Rust equivalent that writes podman's store.

mod base;
mod build;
mod inspect;
mod manifest;

use std::path::{Path, PathBuf};
use std::process::Command;

pub use base::{BASE_PACKAGES, Package, base_rootfs, fetch_packages};
pub use build::{
    BaseImage, ServiceImage, commit_base, commit_service, push, remove, save_archive, tag,
};
pub use inspect::{ImageConfig, ImageRef, Layer, archive_layers, exists};
pub use manifest::{Base, Built, Image, MANIFEST, build_base};

/// Where a service's binary sits in its image (the entrypoint), as in `deploy/Dockerfile`.
pub const ENTRYPOINT: &str = "/usr/local/bin/service";
/// The user every image runs as: distroless's `nonroot`.
pub const USER: &str = "65532:65532";
/// Where each image carries its SBOM: `<service>.cdx.json`.
pub const SBOM_DIR: &str = "/usr/share/sbom";

/// What podman needs on this machine, as `CONTAINERS_CONF` (it replaces the system file): runc,
/// since crun refuses this VM's cgroup layout, and limits under the hard limits that cannot be
/// raised here (podman's default `nofile=1048576` fails).
pub const CONTAINERS_CONF: &str = "\
# Written by the project's tools (images::CONTAINERS_CONF): podman on the test machine.
[containers]
default_ulimits = [\"nofile=20000:20000\", \"nproc=32768:32768\"]

[engine]
runtime = \"runc\"
";

/// Why an image could not be built or read.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// Files and processes.
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    /// A command failed; its standard error follows.
    #[error("{0} failed ({1}): {2}")]
    Command(String, String, String),
    /// A tool is not installed.
    #[error("{0} not found on PATH; `cargo xtask tools` installs it")]
    Missing(&'static str),
    /// A command's output or a file was not what was expected.
    #[error("{0}")]
    Invalid(String),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ImageError {
    let what = what.into();
    move |e| ImageError::Io(what, e)
}

/// The container tools, found on PATH, and the `containers.conf` podman reads.
#[derive(Debug, Clone)]
pub struct Tools {
    /// Builds and commits the images.
    pub buildah: PathBuf,
    /// Runs them.
    pub podman: PathBuf,
    /// Reads manifests and writes OCI archives.
    pub skopeo: PathBuf,
    /// Set as `CONTAINERS_CONF` for every command.
    pub containers_conf: PathBuf,
}

impl Tools {
    /// Finds buildah, podman and skopeo on PATH and writes [`CONTAINERS_CONF`] to
    /// `containers_conf` when it differs.
    pub fn locate(containers_conf: &Path) -> Result<Self, ImageError> {
        let find = |name: &'static str| on_path(name).ok_or(ImageError::Missing(name));
        let tools = Self {
            buildah: find("buildah")?,
            podman: find("podman")?,
            skopeo: find("skopeo")?,
            containers_conf: containers_conf.to_path_buf(),
        };
        if std::fs::read_to_string(containers_conf).ok().as_deref() != Some(CONTAINERS_CONF) {
            if let Some(dir) = containers_conf.parent() {
                std::fs::create_dir_all(dir).map_err(io(dir.display().to_string()))?;
            }
            std::fs::write(containers_conf, CONTAINERS_CONF)
                .map_err(io(containers_conf.display().to_string()))?;
        }
        Ok(tools)
    }

    /// A podman command with this machine's configuration.
    pub fn podman(&self) -> Command {
        self.command(&self.podman)
    }

    fn command(&self, program: &Path) -> Command {
        let mut c = Command::new(program);
        c.env("CONTAINERS_CONF", &self.containers_conf);
        c
    }
}

/// The first executable named `name` on PATH.
pub fn on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p)
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// Runs `cmd`; its standard output when it succeeds, else an error naming `what` with its
/// standard error.
pub fn run(mut cmd: Command, what: &str) -> Result<String, ImageError> {
    let out = cmd.output().map_err(io(what))?;
    if !out.status.success() {
        return Err(ImageError::Command(
            what.to_owned(),
            out.status.to_string(),
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Lower-case hexadecimal SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let d = ring::digest::digest(&ring::digest::SHA256, bytes);
    d.as_ref()
        .iter()
        .fold(String::with_capacity(64), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_of_known_input() {
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn containers_conf_sets_runc_and_the_limits() {
        assert!(CONTAINERS_CONF.contains("runtime = \"runc\""));
        assert!(CONTAINERS_CONF.contains("nofile=20000:20000"));
        assert!(CONTAINERS_CONF.contains("nproc=32768:32768"));
    }
}
