//! `cargo xtask image`: every service's OCI image, built with buildah ([`images`]) into podman's
//! store and as an OCI archive, with an SBOM per image; `images.json` in the output directory
//! records what was built (the images' end-to-end test reads it).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context as _, Result, bail};
use images::{Built, Image};

/// cargo-cyclonedx release installed when none is in the tool cache.
const CARGO_CYCLONEDX_VERSION: &str = "0.5.9";

/// Options of `cargo xtask image`.
#[derive(Debug, Clone)]
pub struct Options {
    /// Services to build (all when empty).
    pub services: Vec<String>,
    /// Where archives, SBOMs and `images.json` go.
    pub out: PathBuf,
    /// Cargo profile of the binaries (`image`: release, stripped).
    pub profile: String,
    /// Extra names for each image (`{service}` replaced), e.g. Tilt's expected reference.
    pub extra_tags: Vec<String>,
    /// Copy each image to the registry its extra names name.
    pub push: bool,
}

/// The container tools, installed when missing.
pub fn tools() -> Result<images::Tools> {
    let conf = testenv::tools::ensure_image_tools()?;
    Ok(images::Tools::locate(&conf)?)
}

/// Builds the images of `o.services` from the binaries in `bin_dir`.
pub fn build(root: &Path, bin_dir: &Path, o: &Options) -> Result<Built> {
    let started = Instant::now();
    let tools = tools()?;
    let (revision, timestamp) = revision(root)?;
    std::fs::create_dir_all(&o.out).with_context(|| o.out.display().to_string())?;
    let out = o.out.canonicalize().context("output directory")?;
    let packages = images::fetch_packages(&testenv::tools::cache_dir().join("debs"))?;
    let base = images::build_base(
        &tools,
        &root.join("target/images"),
        packages,
        timestamp,
        None,
    )?;
    eprintln!(
        "base {} ({} packages) after {:.1?}",
        base.reference,
        base.packages.len(),
        started.elapsed()
    );
    let sbom_tool = cargo_cyclonedx()?;
    let source = source(root);
    let mut built = Vec::new();
    for svc in &o.services {
        let binary = bin_dir.join(svc);
        let bytes = std::fs::read(&binary)
            .with_context(|| format!("{}: build it first", binary.display()))?;
        let sbom = out.join(format!("{svc}.cdx.json"));
        write_sbom(root, &sbom_tool, svc, timestamp, &sbom)?;
        let labels = labels(svc, &revision, timestamp, &source);
        let tag = revision.chars().take(12).collect::<String>() + dirty_suffix(&revision);
        let reference = format!("localhost/{svc}:{tag}");
        images::commit_service(
            &tools,
            &images::ServiceImage {
                service: svc,
                base: &base.reference,
                binary: &binary,
                sbom: &sbom,
                labels: &labels,
                reference: &reference,
                timestamp,
            },
        )?;
        images::tag(&tools, &reference, &format!("localhost/{svc}:latest"))?;
        for extra in &o.extra_tags {
            let name = extra.replace("{service}", svc);
            images::tag(&tools, &reference, &name)?;
            if o.push && names_a_registry(&name) {
                images::push(&tools, &name)?;
            } else if o.push {
                eprintln!("{name} names no registry: not pushed (podman's store has it)");
            }
        }
        let archive = out.join(format!("{svc}.oci.tar"));
        images::save_archive(&tools, &reference, &archive)?;
        let diff_ids = images::ImageRef(&reference).diff_ids(&tools)?;
        let layers = images::archive_layers(&tools, &archive)?;
        eprintln!("{reference} after {:.1?}", started.elapsed());
        built.push(Image {
            service: svc.clone(),
            reference,
            archive,
            binary: binary.canonicalize().unwrap_or(binary),
            binary_sha256: images::sha256_hex(&bytes),
            sbom,
            labels,
            diff_ids,
            layers,
        });
    }
    let b = Built {
        revision,
        timestamp,
        profile: o.profile.clone(),
        base,
        images: built,
    };
    b.write(&out)?;
    print!("{}", size_table(&b));
    eprintln!(
        "{} images in {:.1?}; {}",
        b.images.len(),
        started.elapsed(),
        out.join(images::MANIFEST).display()
    );
    Ok(b)
}

fn dirty_suffix(revision: &str) -> &'static str {
    if revision.ends_with("-dirty") {
        "-dirty"
    } else {
        ""
    }
}

/// Whether an image name starts with a registry host (`host.domain/…`, `host:port/…`), as the
/// container tools read names: `localhost/…` is podman's own store, and a bare `name:tag` would
/// go to Docker Hub.
fn names_a_registry(name: &str) -> bool {
    name.split_once('/')
        .is_some_and(|(first, _)| first.contains('.') || first.contains(':'))
}

/// Per image: the compressed base and binary layers (as the archive holds them) and the binary.
fn size_table(b: &Built) -> String {
    let mib = |n: u64| format!("{:.2} MiB", n as f64 / (1024.0 * 1024.0));
    let mut t = String::from(
        "| image | base layer (compressed) | binary layer (compressed) | binary |\n| --- | --- | --- | --- |\n",
    );
    for i in &b.images {
        let size = |n: usize| i.layers.get(n).map(|l| mib(l.size)).unwrap_or_default();
        let binary = std::fs::metadata(&i.binary)
            .map(|m| mib(m.len()))
            .unwrap_or_default();
        t.push_str(&format!(
            "| {} | {} | {} | {binary} |\n",
            i.service,
            size(0),
            size(1)
        ));
    }
    t
}

/// HEAD's commit (`-dirty` when the tree has changes) and its commit time; `SOURCE_DATE_EPOCH`
/// overrides the time, as reproducible builds define it.
fn revision(root: &Path) -> Result<(String, u64)> {
    let git = |args: &[&str]| -> Result<String> {
        let out = Command::new("git")
            .current_dir(root)
            .args(args)
            .output()
            .context("git")?;
        if !out.status.success() {
            bail!(
                "git {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let commit = git(&["rev-parse", "HEAD"])?;
    let dirty = !git(&["status", "--porcelain", "--untracked-files=no"])?.is_empty();
    let time = match std::env::var("SOURCE_DATE_EPOCH") {
        Ok(s) => s.parse().context("SOURCE_DATE_EPOCH")?,
        Err(_) => git(&["log", "-1", "--format=%ct"])?
            .parse()
            .context("commit time")?,
    };
    Ok((
        if dirty {
            format!("{commit}-dirty")
        } else {
            commit
        },
        time,
    ))
}

/// The repository the images come from: `IMAGE_SOURCE`, else the `origin` remote's URL.
fn source(root: &Path) -> String {
    if let Ok(s) = std::env::var("IMAGE_SOURCE") {
        return s;
    }
    Command::new("git")
        .current_dir(root)
        .args(["config", "--get", "remote.origin.url"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// The OCI labels (annotation keys of the image spec) every image carries; `deploy/Dockerfile`
/// sets the same.
fn labels(svc: &str, revision: &str, timestamp: u64, source: &str) -> Vec<(String, String)> {
    let l = |k: &str, v: &str| (format!("org.opencontainers.image.{k}"), v.to_owned());
    vec![
        l("title", svc),
        l("source", source),
        l("revision", revision),
        l("version", env!("CARGO_PKG_VERSION")),
        l("licenses", "Apache-2.0"),
        l("created", &rfc3339(timestamp)),
        l("vendor", "admission-webhooks"),
    ]
}

/// Seconds since the epoch as RFC 3339 in UTC (the `created` label's form).
fn rfc3339(secs: u64) -> String {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// cargo-cyclonedx, installed into the tool cache when missing.
pub fn cargo_cyclonedx() -> Result<PathBuf> {
    crate::policy::cargo_tool(
        "cargo-cyclonedx",
        CARGO_CYCLONEDX_VERSION,
        "cargo-cyclonedx",
    )
}

/// Where the checkout's paths are mapped in what the images hold (binaries and SBOMs), so
/// that the same commit gives the same layers wherever it is checked out.
pub const WORKSPACE_PREFIX: &str = "/workspace";

/// The `RUSTFLAGS` of the image builds: the checkout and cargo's home mapped to fixed names in
/// the binaries (quota-state's generated gRPC code is included from `target/`, and panic
/// locations name the registry's sources). Appended to the caller's own `RUSTFLAGS`.
pub fn remap_rustflags(root: &Path) -> String {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let mut flags = std::env::var("RUSTFLAGS").unwrap_or_default();
    let mut add = |from: &Path, to: &str| {
        if !flags.is_empty() {
            flags.push(' ');
        }
        flags.push_str(&format!("--remap-path-prefix={}={to}", from.display()));
    };
    add(&root, WORKSPACE_PREFIX);
    if let Some(h) = cargo_home {
        add(&h, "/cargo");
    }
    flags
}

/// Writes the CycloneDX SBOM (JSON, spec 1.5) of `svc`'s binary to `out`: its crate and every
/// crate it links (build-only dependencies left out), dated `timestamp`, the checkout's path
/// written as [`WORKSPACE_PREFIX`].
///
/// cargo-cyclonedx rather than `cargo auditable`: it writes a standard SBOM document, which
/// travels in the image and beside the archive, from the lock file alone, without changing how
/// the binaries are built; auditable's list lives inside the binary and needs its own build
/// wrapper.
fn write_sbom(root: &Path, tool: &Path, svc: &str, timestamp: u64, out: &Path) -> Result<()> {
    let mut c = crate::plain(tool);
    c.current_dir(root)
        .env("SOURCE_DATE_EPOCH", timestamp.to_string())
        .arg("cyclonedx")
        .arg("--manifest-path")
        .arg(root.join("services").join(svc).join("Cargo.toml"))
        .args([
            "--format",
            "json",
            "--spec-version",
            "1.5",
            "--no-build-deps",
        ])
        .args(["--describe", "binaries", "-q"]);
    let status = c.status().context("cargo cyclonedx")?;
    // It writes `<binary>_bin.cdx.json` beside every workspace member's Cargo.toml.
    let generated = generated_sboms(root);
    let result = (|| {
        if !status.success() {
            bail!("cargo cyclonedx failed for {svc}");
        }
        let mine = root
            .join("services")
            .join(svc)
            .join(format!("{svc}_bin.cdx.json"));
        let text = std::fs::read_to_string(&mine).with_context(|| mine.display().to_string())?;
        let canonical = root.canonicalize().context("workspace root")?;
        let prefix = format!("file://{}", canonical.display());
        std::fs::write(
            out,
            text.replace(&prefix, &format!("file://{WORKSPACE_PREFIX}")),
        )
        .with_context(|| out.display().to_string())
    })();
    for f in generated.iter().chain(generated_sboms(root).iter()) {
        let _ = std::fs::remove_file(f);
    }
    result
}

/// The `*_bin.cdx.json` files beside the workspace members' manifests.
fn generated_sboms(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for group in ["services", "shared", "tools"] {
        let Ok(members) = std::fs::read_dir(root.join(group)) else {
            continue;
        };
        for m in members.flatten() {
            let Ok(files) = std::fs::read_dir(m.path()) else {
                continue;
            };
            out.extend(
                files
                    .flatten()
                    .map(|f| f.path())
                    .filter(|p| p.to_string_lossy().ends_with("_bin.cdx.json")),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `deploy/Dockerfile` makes the same layout for engines this machine lacks: the checks that
    /// can be made without running it.
    #[test]
    fn the_dockerfile_builds_the_same_layout() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let text = std::fs::read_to_string(root.join("deploy/Dockerfile")).unwrap();
        assert!(text.contains("cargo build --profile image --locked"));
        assert!(
            text.contains("--bin base-rootfs"),
            "the base from the same code"
        );
        assert!(text.contains(&format!("USER {}", images::USER)));
        assert!(text.contains(&format!("ENTRYPOINT [\"{}\"]", images::ENTRYPOINT)));
        assert!(text.contains(&format!(
            "/layer{}",
            images::ENTRYPOINT.trim_end_matches("/service")
        )));
        assert!(text.contains(&format!("/layer{}/${{SERVICE}}.cdx.json", images::SBOM_DIR)));
        assert!(text.contains(&format!("ARG CYCLONEDX={CARGO_CYCLONEDX_VERSION}")));
        assert!(text.contains(&format!("={WORKSPACE_PREFIX}")) && text.contains("=/cargo"));
        assert!(text.contains("SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"));
        for (key, _) in labels("svc", "rev", 0, "src") {
            assert!(text.contains(&format!("{key}=")), "label {key}");
        }
        assert_eq!(
            text.matches("org.opencontainers.image.").count(),
            labels("svc", "rev", 0, "src").len(),
            "no label the xtask does not set"
        );
    }

    #[test]
    fn pushes_only_to_a_named_registry() {
        assert!(names_a_registry(
            "registry.example/admission/quota-state:v1"
        ));
        assert!(names_a_registry("localhost:5000/quota-state:tilt-0123"));
        assert!(!names_a_registry("quota-state:tilt-0123"));
        assert!(!names_a_registry("team/quota-state:v1"));
        assert!(!names_a_registry("localhost/quota-state:latest"));
    }

    #[test]
    fn rfc3339_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_795_651_200), "2026-11-26T00:00:00Z");
        assert_eq!(rfc3339(1_795_656_061), "2026-11-26T01:21:01Z");
    }
}
