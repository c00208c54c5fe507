//! Committing the images with buildah: the base from its files, each service on top of it.

use std::path::Path;

use crate::{ENTRYPOINT, ImageError, SBOM_DIR, Tools, USER, run};

/// A working container, removed when dropped unless committed (`buildah commit --rm`).
struct Working<'a> {
    tools: &'a Tools,
    id: String,
}

impl<'a> Working<'a> {
    /// `buildah from --pull=never FROM`.
    fn from(tools: &'a Tools, from: &str) -> Result<Self, ImageError> {
        let mut c = tools.command(&tools.buildah);
        c.args(["from", "--pull=never", "--quiet", from]);
        let id = run(c, &format!("buildah from {from}"))?.trim().to_owned();
        if id.is_empty() {
            return Err(ImageError::Invalid(format!(
                "buildah from {from} named no container"
            )));
        }
        Ok(Self { tools, id })
    }

    fn buildah(&self, args: &[&str], what: &str) -> Result<String, ImageError> {
        let mut c = self.tools.command(&self.tools.buildah);
        c.args(args);
        run(c, what)
    }

    /// `buildah copy` of `src` to `dest` with an owner and, for a file, a mode.
    fn copy(&self, src: &Path, dest: &str, mode: Option<&str>) -> Result<(), ImageError> {
        let src = src.display().to_string();
        let mut args = vec!["copy", "--quiet", "--chown", "0:0"];
        if let Some(m) = mode {
            args.extend(["--chmod", m]);
        }
        args.extend([self.id.as_str(), src.as_str(), dest]);
        self.buildah(&args, &format!("buildah copy {src} {dest}"))
            .map(drop)
    }

    fn config(&self, args: &[String]) -> Result<(), ImageError> {
        let mut all: Vec<&str> = vec!["config"];
        all.extend(args.iter().map(String::as_str));
        all.push(&self.id);
        self.buildah(&all, "buildah config").map(drop)
    }

    /// Commits as OCI with every file's time and the image's creation time at `timestamp`, and
    /// removes the working container.
    fn commit(mut self, reference: &str, timestamp: u64) -> Result<(), ImageError> {
        let ts = timestamp.to_string();
        let id = std::mem::take(&mut self.id);
        let r = self.buildah(
            &[
                "commit",
                "--quiet",
                "--format",
                "oci",
                "--timestamp",
                &ts,
                "--identity-label=false",
                "--rm",
                &id,
                reference,
            ],
            &format!("buildah commit {reference}"),
        );
        if r.is_err() {
            self.id = id;
        }
        r.map(drop)
    }
}

impl Drop for Working<'_> {
    fn drop(&mut self) {
        if !self.id.is_empty() {
            let mut c = self.tools.command(&self.tools.buildah);
            c.args(["rm", &self.id]);
            let _ = run(c, "buildah rm");
        }
    }
}

/// The base image to commit.
#[derive(Debug, Clone)]
pub struct BaseImage<'a> {
    /// Its files ([`crate::base_rootfs`]).
    pub rootfs: &'a Path,
    /// `localhost/NAME:TAG`.
    pub reference: &'a str,
    /// What the history says made it (the packages and their versions).
    pub created_by: &'a str,
    /// Seconds since the epoch for every file and the creation time.
    pub timestamp: u64,
}

/// Commits the base: `rootfs` owned by root, `/home/nonroot` owned by 65532, the user, the
/// working directory and distroless's environment.
pub fn commit_base(tools: &Tools, b: &BaseImage<'_>) -> Result<(), ImageError> {
    let w = Working::from(tools, "scratch")?;
    w.copy(b.rootfs, "/", None)?;
    // An empty directory owned by nonroot: copy one in with that owner.
    let home = b.rootfs.with_extension("home");
    if home.exists() {
        std::fs::remove_dir_all(&home).map_err(crate::io(home.display().to_string()))?;
    }
    std::fs::create_dir_all(home.join("nonroot")).map_err(crate::io(home.display().to_string()))?;
    w.buildah(
        &[
            "copy",
            "--quiet",
            "--chown",
            USER,
            "--chmod",
            "0700",
            &w.id,
            &home.display().to_string(),
            "/home",
        ],
        "buildah copy /home/nonroot",
    )?;
    let _ = std::fs::remove_dir_all(&home);
    w.config(&[
        "--user".into(),
        USER.into(),
        "--workingdir".into(),
        "/home/nonroot".into(),
        "--env".into(),
        "PATH=/usr/local/bin:/usr/bin:/bin".into(),
        "--env".into(),
        "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt".into(),
        "--os".into(),
        "linux".into(),
        "--arch".into(),
        "amd64".into(),
        "--created-by".into(),
        b.created_by.into(),
    ])?;
    w.commit(b.reference, b.timestamp)
}

/// One service's image to commit on the base.
#[derive(Debug, Clone)]
pub struct ServiceImage<'a> {
    /// The service (binary and package name).
    pub service: &'a str,
    /// The base image's reference.
    pub base: &'a str,
    /// The binary, placed at [`ENTRYPOINT`].
    pub binary: &'a Path,
    /// Its SBOM, placed at `SBOM_DIR/<service>.cdx.json`.
    pub sbom: &'a Path,
    /// OCI labels (`org.opencontainers.image.*`).
    pub labels: &'a [(String, String)],
    /// `localhost/NAME:TAG`.
    pub reference: &'a str,
    /// Seconds since the epoch for every file and the creation time.
    pub timestamp: u64,
}

/// Commits a service's image: one layer with its binary and SBOM over the base; the
/// entrypoint, user and labels as `deploy/Dockerfile` sets them.
pub fn commit_service(tools: &Tools, s: &ServiceImage<'_>) -> Result<(), ImageError> {
    let w = Working::from(tools, s.base)?;
    w.copy(s.binary, ENTRYPOINT, Some("0755"))?;
    w.copy(
        s.sbom,
        &format!("{SBOM_DIR}/{}.cdx.json", s.service),
        Some("0644"),
    )?;
    let mut args = vec![
        "--entrypoint".to_owned(),
        format!("[\"{ENTRYPOINT}\"]"),
        "--cmd".into(),
        String::new(),
        "--user".into(),
        USER.into(),
        "--created-by".into(),
        format!("COPY {} {ENTRYPOINT} (and its SBOM)", s.service),
    ];
    for (k, v) in s.labels {
        args.push("--label".into());
        args.push(format!("{k}={v}"));
    }
    w.config(&args)?;
    w.commit(s.reference, s.timestamp)
}

/// Adds the name `extra` to the image `reference`.
pub fn tag(tools: &Tools, reference: &str, extra: &str) -> Result<(), ImageError> {
    let mut c = tools.command(&tools.buildah);
    c.args(["tag", reference, extra]);
    run(c, &format!("buildah tag {reference} {extra}")).map(drop)
}

/// Removes the image name `reference` (its layers stay while another name uses them).
pub fn remove(tools: &Tools, reference: &str) -> Result<(), ImageError> {
    let mut c = tools.command(&tools.buildah);
    c.args(["rmi", reference]);
    run(c, &format!("buildah rmi {reference}")).map(drop)
}

/// Writes the image `reference` of the local store as an OCI archive (layers gzip-compressed,
/// as a registry would hold them), named `reference` inside.
pub fn save_archive(tools: &Tools, reference: &str, archive: &Path) -> Result<(), ImageError> {
    if archive.exists() {
        std::fs::remove_file(archive).map_err(crate::io(archive.display().to_string()))?;
    }
    let mut c = tools.command(&tools.skopeo);
    c.args(["copy", "--quiet", "--dest-compress-format", "gzip"])
        .arg(format!("containers-storage:{reference}"))
        .arg(format!("oci-archive:{}:{reference}", archive.display()));
    run(
        c,
        &format!("skopeo copy {reference} to {}", archive.display()),
    )
    .map(drop)
}

/// Copies the image `reference` of the local store to the registry it names (`docker://`),
/// with skopeo: what `--push` does for Tilt's expected reference.
pub fn push(tools: &Tools, reference: &str) -> Result<(), ImageError> {
    let mut c = tools.command(&tools.skopeo);
    c.args(["copy", "--quiet"])
        .arg(format!("containers-storage:{reference}"))
        .arg(format!("docker://{reference}"));
    run(c, &format!("skopeo copy {reference} to its registry")).map(drop)
}
