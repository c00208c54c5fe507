//! The base layer's files: Debian's packages as the machine's apt sources serve them, unpacked
//! and pruned to what a dynamically linked Rust binary needs, plus the few files distroless adds.
//!
//! Why glibc and not a static binary on `scratch`: a static glibc binary cannot load the NSS
//! modules that resolve names (scheduling-webhook reaches quota-state by name), and musl would
//! change the allocator the services are tuned and measured with (`admission_kit::server::trim`).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{ImageError, io, run, sha256_hex};

/// The Debian packages of the base, as distroless `cc` has them (less `libstdc++6` and
/// `libgomp1`, which no service links): the C library, GCC's unwinder, the CA certificates and
/// `/etc/services` and `/etc/protocols`.
pub const BASE_PACKAGES: [&str; 4] = ["libc6", "libgcc-s1", "ca-certificates", "netbase"];

/// A downloaded Debian package.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct Package {
    /// Package name.
    pub name: String,
    /// Version, as apt names it.
    pub version: String,
    /// The `.deb` in the cache.
    pub file: PathBuf,
    /// Its SHA-256, as the archive's signed index gives it.
    pub sha256: String,
}

/// Downloads [`BASE_PACKAGES`] at the versions apt offers into `cache` (kept: a file already
/// there with the expected SHA-256 is not fetched again). The versions are those of the
/// machine's apt sources, so a base is as current as `apt-get update` made them.
pub fn fetch_packages(cache: &Path) -> Result<Vec<Package>, ImageError> {
    std::fs::create_dir_all(cache).map_err(io(cache.display().to_string()))?;
    match fetch_listed(cache) {
        Ok(p) => Ok(p),
        Err(_) => {
            // Missing or stale package lists (the mirror no longer has the version they name):
            // refresh once.
            let mut update = Command::new("apt-get");
            update.arg("update");
            run(update, "apt-get update")?;
            fetch_listed(cache)
        }
    }
}

fn fetch_listed(cache: &Path) -> Result<Vec<Package>, ImageError> {
    let mut uris = Command::new("apt-get");
    uris.args(["download", "--print-uris"]).args(BASE_PACKAGES);
    let listing = run(uris, "apt-get download --print-uris")?;
    let mut out = Vec::new();
    for line in listing.lines().filter(|l| !l.trim().is_empty()) {
        // 'URL' FILE SIZE SHA256:HEX
        let mut parts = line.split_whitespace();
        let (Some(_url), Some(file), Some(_size), Some(hash)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(ImageError::Invalid(format!("apt-get --print-uris: {line}")));
        };
        let Some(sha256) = hash.strip_prefix("SHA256:") else {
            return Err(ImageError::Invalid(format!(
                "no SHA-256 for {file}: {line}"
            )));
        };
        let path = cache.join(file);
        if file_sha256(&path).as_deref() != Some(sha256) {
            let (name, version) = name_version(file)?;
            let mut dl = Command::new("apt-get");
            dl.current_dir(cache)
                .arg("download")
                .arg(format!("{name}={version}"));
            run(dl, &format!("apt-get download {name}={version}"))?;
            let got = file_sha256(&path);
            if got.as_deref() != Some(sha256) {
                return Err(ImageError::Invalid(format!(
                    "{file}: SHA-256 {} where apt's index says {sha256}",
                    got.unwrap_or_else(|| "missing".into())
                )));
            }
        }
        let field = |f: &str| -> Result<String, ImageError> {
            let mut c = Command::new("dpkg-deb");
            c.arg("-f").arg(&path).arg(f);
            Ok(run(c, &format!("dpkg-deb -f {file} {f}"))?
                .trim()
                .to_owned())
        };
        out.push(Package {
            name: field("Package")?,
            version: field("Version")?,
            file: path,
            sha256: sha256.to_owned(),
        });
    }
    if out.len() != BASE_PACKAGES.len() {
        return Err(ImageError::Invalid(format!(
            "apt offered {} of the {} base packages",
            out.len(),
            BASE_PACKAGES.len()
        )));
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

fn file_sha256(path: &Path) -> Option<String> {
    std::fs::read(path).ok().map(|b| sha256_hex(&b))
}

/// `name_version_arch.deb` (with `%3a` for an epoch's colon) → name and version.
fn name_version(file: &str) -> Result<(String, String), ImageError> {
    let stem = file.strip_suffix(".deb").unwrap_or(file);
    let mut parts = stem.splitn(3, '_');
    match (parts.next(), parts.next()) {
        (Some(n), Some(v)) => Ok((n.to_owned(), v.replace("%3a", ":"))),
        _ => Err(ImageError::Invalid(format!(
            "not a package file name: {file}"
        ))),
    }
}

/// What the packages ship that a service never uses: documentation (but the copyright files,
/// which the licences ask to keep), programs (no shell, no tools), iconv's converters and the
/// CA maintenance hooks.
const PRUNED: &[&str] = &[
    "bin",
    "sbin",
    "usr/bin",
    "usr/sbin",
    "usr/libexec",
    "usr/share/lintian",
    "usr/share/man",
    "usr/share/info",
    "usr/lib/x86_64-linux-gnu/gconv",
    "etc/ca-certificates",
];

/// Writes the base's files into `dir` (emptied first): the packages unpacked and pruned, the CA
/// bundle as `update-ca-certificates` writes it, users and groups, `nsswitch.conf`,
/// `os-release`, and each package's control paragraph in `/var/lib/dpkg/status.d` (where image
/// scanners read a distroless image's packages). Owners are set when the files enter the image.
pub fn base_rootfs(packages: &[Package], dir: &Path) -> Result<(), ImageError> {
    let fs_err = |p: &Path| io(p.display().to_string());
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(fs_err(dir))?;
    }
    std::fs::create_dir_all(dir).map_err(fs_err(dir))?;
    let status_d = dir.join("var/lib/dpkg/status.d");
    std::fs::create_dir_all(&status_d).map_err(fs_err(&status_d))?;
    for p in packages {
        let mut x = Command::new("dpkg-deb");
        x.arg("-x").arg(&p.file).arg(dir);
        run(x, &format!("dpkg-deb -x {}", p.file.display()))?;
        let mut f = Command::new("dpkg-deb");
        f.arg("-f").arg(&p.file);
        let control = run(f, &format!("dpkg-deb -f {}", p.file.display()))?;
        let path = status_d.join(&p.name);
        std::fs::write(&path, control).map_err(fs_err(&path))?;
    }
    for p in PRUNED {
        let path = dir.join(p);
        if path.exists() {
            std::fs::remove_dir_all(&path).map_err(fs_err(&path))?;
        }
    }
    prune_docs(&dir.join("usr/share/doc"))?;
    let files: [(&str, String, u32); 6] = [
        ("etc/ssl/certs/ca-certificates.crt", ca_bundle(dir)?, 0o644),
        (
            "etc/passwd",
            "root:x:0:0:root:/root:/sbin/nologin\n\
             nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n\
             nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
                .into(),
            0o644,
        ),
        (
            "etc/group",
            "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n".into(),
            0o644,
        ),
        // /etc/hosts first: podman's --add-host and a Pod's hostAliases land there.
        (
            "etc/nsswitch.conf",
            "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\n\
             protocols: files\nservices: files\n"
                .into(),
            0o644,
        ),
        ("etc/os-release", os_release(), 0o644),
        ("etc/debian_version", debian_version(), 0o644),
    ];
    for (rel, body, mode) in files {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(fs_err(parent))?;
        }
        std::fs::write(&path, body).map_err(fs_err(&path))?;
        set_mode(&path, mode)?;
    }
    for (rel, mode) in [("root", 0o700), ("tmp", 0o1777), ("home", 0o755)] {
        let path = dir.join(rel);
        std::fs::create_dir_all(&path).map_err(fs_err(&path))?;
        set_mode(&path, mode)?;
    }
    Ok(())
}

fn set_mode(path: &Path, mode: u32) -> Result<(), ImageError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(io(path.display().to_string()))
}

/// Keeps only `usr/share/doc/<package>/copyright`.
fn prune_docs(doc: &Path) -> Result<(), ImageError> {
    let Ok(entries) = std::fs::read_dir(doc) else {
        return Ok(());
    };
    for e in entries.flatten() {
        let pkg = e.path();
        let Ok(files) = std::fs::read_dir(&pkg) else {
            continue;
        };
        for f in files.flatten() {
            if f.file_name() != "copyright" {
                let p = f.path();
                let removed = if p.is_dir() && !p.is_symlink() {
                    std::fs::remove_dir_all(&p)
                } else {
                    std::fs::remove_file(&p)
                };
                removed.map_err(io(p.display().to_string()))?;
            }
        }
    }
    Ok(())
}

/// Every certificate under `usr/share/ca-certificates`, in the byte order of their relative
/// paths, each ending in a newline: the bundle `update-ca-certificates` writes when every
/// certificate is enabled (the package's default).
fn ca_bundle(dir: &Path) -> Result<String, ImageError> {
    let root = dir.join("usr/share/ca-certificates");
    let mut certs = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)
            .map_err(io(d.display().to_string()))?
            .flatten()
        {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "crt") {
                certs.push(p);
            }
        }
    }
    certs.sort();
    if certs.is_empty() {
        return Err(ImageError::Invalid(
            "ca-certificates shipped no certificate".into(),
        ));
    }
    let mut bundle = String::new();
    for c in certs {
        let text = std::fs::read_to_string(&c).map_err(io(c.display().to_string()))?;
        bundle.push_str(&text);
        if !text.ends_with('\n') {
            bundle.push('\n');
        }
    }
    Ok(bundle)
}

/// Debian's release of the packages: that of the machine whose apt sources served them.
fn debian_version() -> String {
    std::fs::read_to_string("/etc/debian_version").unwrap_or_else(|_| "unknown\n".into())
}

/// Names the base as what it is; `ID=debian` and the release let scanners match the packages.
fn os_release() -> String {
    let host = std::fs::read_to_string("/etc/os-release").unwrap_or_default();
    let field = |k: &str| {
        host.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .map(|v| v.trim_matches('"').to_owned())
            .unwrap_or_default()
    };
    format!(
        "PRETTY_NAME=\"admission-webhooks base (Debian GNU/Linux {} packages)\"\nNAME=\"Debian GNU/Linux\"\nID=debian\nVERSION_ID=\"{}\"\nVERSION_CODENAME={}\n",
        field("VERSION_ID"),
        field("VERSION_ID"),
        field("VERSION_CODENAME")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_file_names() {
        assert_eq!(
            name_version("libc6_2.36-9+deb12u14_amd64.deb").ok(),
            Some(("libc6".into(), "2.36-9+deb12u14".into()))
        );
        assert_eq!(
            name_version("passwd_1%3a4.13+dfsg1-1_amd64.deb").ok(),
            Some(("passwd".into(), "1:4.13+dfsg1-1".into()))
        );
        assert!(name_version("nonsense").is_err());
    }

    #[test]
    fn bundle_is_sorted_and_newline_terminated() {
        let dir = std::env::temp_dir().join(format!("images-ca-{}", std::process::id()));
        let certs = dir.join("usr/share/ca-certificates/mozilla");
        std::fs::create_dir_all(&certs).unwrap();
        std::fs::write(certs.join("b.crt"), "B").unwrap();
        std::fs::write(certs.join("a.crt"), "A\n").unwrap();
        std::fs::write(certs.join("notes.txt"), "ignored").unwrap();
        assert_eq!(ca_bundle(&dir).unwrap(), "A\nB\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
