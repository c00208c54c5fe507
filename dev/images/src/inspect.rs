//! Reading images back with skopeo: layer digests and sizes, labels.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::{ImageError, Tools, run};

/// A layer as a manifest lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
pub struct Layer {
    /// `sha256:…` of the blob as stored (compressed in an archive).
    pub digest: String,
    /// Its size in bytes.
    pub size: u64,
}

#[derive(Deserialize)]
struct Manifest {
    layers: Vec<Layer>,
}

#[derive(Deserialize)]
struct Config {
    rootfs: RootFs,
    #[serde(default)]
    config: ImageConfig,
}

#[derive(Deserialize)]
struct RootFs {
    diff_ids: Vec<String>,
}

/// The runtime part of an image's configuration.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
pub struct ImageConfig {
    /// `User`.
    #[serde(rename = "User", default)]
    pub user: String,
    /// `Entrypoint`.
    #[serde(rename = "Entrypoint", default)]
    pub entrypoint: Vec<String>,
    /// `Labels`.
    #[serde(rename = "Labels", default)]
    pub labels: BTreeMap<String, String>,
}

/// An image in podman's store, by reference.
#[derive(Debug, Clone, Copy)]
pub struct ImageRef<'a>(pub &'a str);

impl ImageRef<'_> {
    fn config(&self, tools: &Tools) -> Result<Config, ImageError> {
        let mut c = tools.command(&tools.skopeo);
        c.args(["inspect", "--config", "--raw"])
            .arg(format!("containers-storage:{}", self.0));
        let text = run(c, &format!("skopeo inspect --config {}", self.0))?;
        serde_json::from_str(&text)
            .map_err(|e| ImageError::Invalid(format!("config of {}: {e}", self.0)))
    }

    /// The digests of the uncompressed layers, base first (the image's identity of content).
    pub fn diff_ids(&self, tools: &Tools) -> Result<Vec<String>, ImageError> {
        Ok(self.config(tools)?.rootfs.diff_ids)
    }

    /// User, entrypoint and labels.
    pub fn image_config(&self, tools: &Tools) -> Result<ImageConfig, ImageError> {
        Ok(self.config(tools)?.config)
    }
}

/// Whether podman's store has `reference`.
pub fn exists(tools: &Tools, reference: &str) -> bool {
    let mut c = tools.podman();
    c.args(["image", "exists", reference]);
    c.status().is_ok_and(|s| s.success())
}

/// The layers of the OCI archive `archive`, base first: compressed digests and sizes.
pub fn archive_layers(tools: &Tools, archive: &Path) -> Result<Vec<Layer>, ImageError> {
    let mut c = tools.command(&tools.skopeo);
    c.args(["inspect", "--raw"])
        .arg(format!("oci-archive:{}", archive.display()));
    let text = run(c, &format!("skopeo inspect {}", archive.display()))?;
    let m: Manifest = serde_json::from_str(&text)
        .map_err(|e| ImageError::Invalid(format!("manifest of {}: {e}", archive.display())))?;
    Ok(m.layers)
}
