//! `images.json`: what `cargo xtask image` built, for the tests and for people.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{ImageError, Layer, Package, Tools};

/// What one `cargo xtask image` run built.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Built {
    /// `git rev-parse HEAD`, with `-dirty` when the tree had changes.
    pub revision: String,
    /// Every file's time and the images' creation time (the commit's time).
    pub timestamp: u64,
    /// The cargo profile of the binaries.
    pub profile: String,
    /// The base image.
    pub base: Base,
    /// One per service.
    pub images: Vec<Image>,
}

/// The base image as built.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Base {
    /// `localhost/admission-webhooks-base:<hash of its packages>`.
    pub reference: String,
    /// Its Debian packages.
    pub packages: Vec<Package>,
    /// What its history entry says.
    pub created_by: String,
}

/// One service's image as built.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Image {
    /// The service.
    pub service: String,
    /// `localhost/<service>:<revision>` (also tagged `latest`).
    pub reference: String,
    /// The OCI archive.
    pub archive: PathBuf,
    /// The binary in its layer.
    pub binary: PathBuf,
    /// SHA-256 of the binary.
    pub binary_sha256: String,
    /// The SBOM, in the image and beside the archive.
    pub sbom: PathBuf,
    /// Its OCI labels.
    pub labels: Vec<(String, String)>,
    /// Uncompressed layer digests, base first.
    pub diff_ids: Vec<String>,
    /// Compressed layers of the archive, base first.
    pub layers: Vec<Layer>,
}

/// The name of the record in an output directory.
pub const MANIFEST: &str = "images.json";

impl Built {
    /// Reads `dir/images.json`.
    pub fn read(dir: &Path) -> Result<Self, ImageError> {
        let path = dir.join(MANIFEST);
        let text = std::fs::read(&path).map_err(crate::io(path.display().to_string()))?;
        serde_json::from_slice(&text)
            .map_err(|e| ImageError::Invalid(format!("{}: {e}", path.display())))
    }

    /// Writes `dir/images.json`.
    pub fn write(&self, dir: &Path) -> Result<(), ImageError> {
        let path = dir.join(MANIFEST);
        let text = serde_json::to_vec_pretty(self)
            .map_err(|e| ImageError::Invalid(format!("images.json: {e}")))?;
        std::fs::write(&path, text).map_err(crate::io(path.display().to_string()))
    }
}

/// Assembles the base's files in `work/base-rootfs` and commits them as
/// `localhost/admission-webhooks-base:<hash of the packages>` (or `reference` when given).
pub fn build_base(
    tools: &Tools,
    work: &Path,
    packages: Vec<Package>,
    timestamp: u64,
    reference: Option<&str>,
) -> Result<Base, ImageError> {
    let rootfs = work.join("base-rootfs");
    crate::base_rootfs(&packages, &rootfs)?;
    let ids: String = packages.iter().map(|p| p.sha256.as_str()).collect();
    let reference = reference.map(str::to_owned).unwrap_or_else(|| {
        format!(
            "localhost/admission-webhooks-base:{}",
            &crate::sha256_hex(ids.as_bytes())[..12]
        )
    });
    let created_by = format!(
        "Debian packages {}",
        packages
            .iter()
            .map(|p| format!("{}={}", p.name, p.version))
            .collect::<Vec<_>>()
            .join(" ")
    );
    crate::commit_base(
        tools,
        &crate::BaseImage {
            rootfs: &rootfs,
            reference: &reference,
            created_by: &created_by,
            timestamp,
        },
    )?;
    Ok(Base {
        reference,
        packages,
        created_by,
    })
}
