//! The control plane's binaries (kube-apiserver, etcd, kustomize) and tilt, built with the machine's Go
//! from the Go module proxy and cached outside the repository, keyed by version.
//!
//! The wrapper modules in `dev/xtask/go/<tool>` pin every version (go.mod + go.sum); nothing
//! is downloaded as a prebuilt binary.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Kubernetes release of kube-apiserver (k8s-openapi's `v1_34` feature matches it).
pub const KUBERNETES_VERSION: &str = "v1.34.4";
/// etcd release Kubernetes v1.34 is built and tested with.
pub const ETCD_VERSION: &str = "v3.6.4";
/// kustomize release (the newest whose go.mod the machine's Go accepts).
pub const KUSTOMIZE_VERSION: &str = "v5.8.1";
/// tilt release (the newest the module proxy serves; evaluates the Tiltfile in the tests).
pub const TILT_VERSION: &str = "v0.33.21";
/// toxiproxy release (the newest the module proxy serves): adds round-trip time between a
/// fleet member's webhook and quota-state in `cargo xtask fleet-latency`.
pub const TOXIPROXY_VERSION: &str = "v2.5.0";
/// Jaeger release (the v2 binary, an OpenTelemetry collector with Jaeger's trace store): the
/// trace store of the local control plane and of the end-to-end trace test.
pub const JAEGER_VERSION: &str = "v1.76.0";

/// One tool: its name, pinned version and how to build it.
#[derive(Debug, Clone, Copy)]
pub struct Tool {
    /// Binary name.
    pub name: &'static str,
    /// Pinned version.
    pub version: &'static str,
    /// The wrapper module it is built in (`dev/xtask/go/<module>`): the Kubernetes commands
    /// share one, so that one go.sum pins them all.
    pub module: &'static str,
    /// Package to build inside the wrapper module.
    pub package: &'static str,
    /// Extra linker flags (version stamping).
    pub ldflags: &'static str,
    /// Module path prefixes whose checksums the checksum database does not serve here
    /// (`GONOSUMDB`); go.sum still pins their hashes.
    pub nosumdb: &'static str,
    /// Needs cgo (and so a C compiler): tilt's Starlark language server uses tree-sitter.
    pub cgo: bool,
    /// Seconds its first build took on the 2-core development machine, module downloads
    /// included (empty Go caches): the estimate printed before building.
    pub cold_secs: u64,
}

/// Version stamping of the Kubernetes commands (else they report v0.0.0-master).
const KUBERNETES_LDFLAGS: &str = "-X k8s.io/component-base/version.gitVersion=v1.34.4 \
     -X k8s.io/component-base/version.gitMajor=1 \
     -X k8s.io/component-base/version.gitMinor=34 \
     -X k8s.io/component-base/version.gitTreeState=clean";

/// kwok's pinned version (simulated nodes and kubelets).
pub const KWOK_VERSION: &str = "v0.8.0";

/// Every tool the test command runs.
pub const TOOLS: [Tool; 6] = [
    Tool {
        name: "etcd",
        module: "etcd",
        version: ETCD_VERSION,
        package: ".",
        ldflags: "",
        nosumdb: "",
        cgo: false,
        cold_secs: 49,
    },
    Tool {
        name: "kube-apiserver",
        module: "kube-apiserver",
        version: KUBERNETES_VERSION,
        package: "k8s.io/kubernetes/cmd/kube-apiserver",
        // Without these the server reports v0.0.0-master to clients.
        ldflags: KUBERNETES_LDFLAGS,
        nosumdb: "",
        cgo: false,
        cold_secs: 275,
    },
    Tool {
        name: "kustomize",
        module: "kustomize",
        version: KUSTOMIZE_VERSION,
        package: "sigs.k8s.io/kustomize/kustomize/v5",
        ldflags: "",
        nosumdb: "",
        cgo: false,
        cold_secs: 10,
    },
    Tool {
        name: "tilt",
        module: "tilt",
        version: TILT_VERSION,
        package: "github.com/tilt-dev/tilt/cmd/tilt",
        ldflags: "",
        nosumdb: "github.com/tilt-dev",
        cgo: true,
        cold_secs: 249,
    },
    Tool {
        name: "toxiproxy",
        module: "toxiproxy",
        version: TOXIPROXY_VERSION,
        package: "github.com/Shopify/toxiproxy/v2/cmd/server",
        ldflags: "",
        nosumdb: "",
        cgo: false,
        cold_secs: 10,
    },
    Tool {
        name: "jaeger",
        module: "jaeger",
        version: JAEGER_VERSION,
        package: "github.com/jaegertracing/jaeger/cmd/jaeger",
        ldflags: "",
        nosumdb: "",
        cgo: false,
        cold_secs: 298,
    },
];

/// The cluster around the API server ([`crate::cluster`]): controllers, a scheduler, kubectl
/// and simulated nodes, built by [`ensure_cluster`] (`cargo xtask tools`, and so the test
/// command). Build times: this 2-core machine, Go's module cache warm and its build cache
/// holding kube-apiserver's packages (they share most of them).
pub const CLUSTER_TOOLS: [Tool; 4] = [
    Tool {
        name: "kube-controller-manager",
        module: "kube-apiserver",
        version: KUBERNETES_VERSION,
        package: "k8s.io/kubernetes/cmd/kube-controller-manager",
        ldflags: KUBERNETES_LDFLAGS,
        nosumdb: "",
        cgo: false,
        cold_secs: 86,
    },
    Tool {
        name: "kube-scheduler",
        module: "kube-apiserver",
        version: KUBERNETES_VERSION,
        package: "k8s.io/kubernetes/cmd/kube-scheduler",
        ldflags: KUBERNETES_LDFLAGS,
        nosumdb: "",
        cgo: false,
        cold_secs: 7,
    },
    Tool {
        name: "kubectl",
        module: "kube-apiserver",
        version: KUBERNETES_VERSION,
        package: "k8s.io/kubernetes/cmd/kubectl",
        ldflags: KUBERNETES_LDFLAGS,
        nosumdb: "",
        cgo: false,
        cold_secs: 34,
    },
    Tool {
        name: "kwok",
        module: "kwok",
        version: KWOK_VERSION,
        package: "sigs.k8s.io/kwok/cmd/kwok",
        ldflags: "",
        nosumdb: "",
        cgo: false,
        cold_secs: 117,
    },
];

/// The Koordinator commit this repository's Koordinator rules follow (`docs/spec/`), whose
/// koord-manager is the peer of `cargo xtask cluster-bench --peer koordinator`.
pub const KOORDINATOR_PIN: &str = "a7a1b76bbf81abd26f9c377de1f31a60dd965f6e";

/// Koordinator's manager at [`KOORDINATOR_PIN`], built inside a checkout of that commit (the Go
/// module proxy does not serve it, so there is no wrapper module: upstream's own go.mod, with
/// its replacements, applies).
pub const KOORD_MANAGER: Tool = Tool {
    name: "koord-manager",
    version: "a7a1b76",
    module: "",
    package: "./cmd/koord-manager",
    ldflags: "",
    nosumdb: "",
    cgo: false,
    cold_secs: 420,
};

/// The command that builds the tools, named in every "missing" message.
pub const BUILD_COMMAND: &str = "cargo xtask tools";

/// Why the tools are not available.
#[derive(Debug, thiserror::Error)]
pub enum ToolsError {
    /// A binary is not in the cache.
    #[error(
        "{0} is not built (looked for {1}); run `{BUILD_COMMAND}` first (it builds kube-apiserver, etcd, kustomize and tilt with Go, once)"
    )]
    Missing(&'static str, PathBuf),
    /// Go is not installed.
    #[error(
        "building {0} needs Go (1.24 or newer) on PATH, and it was not found: install Go from your distribution or go.dev, then run `{BUILD_COMMAND}` again"
    )]
    NoGo(&'static str),
    /// The Go build failed.
    #[error("building {tool} {version} failed (exit {code:?}); see the output above")]
    Build {
        /// The tool.
        tool: &'static str,
        /// Its version.
        version: &'static str,
        /// Go's exit code.
        code: Option<i32>,
    },
    /// Filesystem trouble.
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    /// koord-manager is not cached and no checkout to build it from was given.
    #[error(
        "koord-manager is not built (looked for {0}); give a checkout of Koordinator at {KOORDINATOR_PIN} with --koordinator-src (docs/performance.md says how to get one)"
    )]
    NoKoordinatorCheckout(PathBuf),
    /// The checkout given is of another commit.
    #[error("{0} is a checkout of {1:?}, not of Koordinator's {KOORDINATOR_PIN}")]
    NotThePin(PathBuf, String),
    /// Prometheus is not installed.
    #[error(
        "prometheus and promtool are not installed; run `{BUILD_COMMAND}` (it installs Debian's `prometheus` package with apt-get), or install them yourself"
    )]
    NoPrometheus,
    /// Installing a Debian package failed.
    #[error("installing a Debian package failed: {0}")]
    PackageInstall(String),
    /// HAProxy is not installed.
    #[error(
        "haproxy is not installed; run `{BUILD_COMMAND}` (it installs Debian's `haproxy` package with apt-get), or install it yourself"
    )]
    NoHaproxy,
    /// valgrind is missing (the instruction-count guard runs under callgrind).
    #[error(
        "valgrind is not installed; run `{BUILD_COMMAND}` (it installs Debian's `valgrind` package with apt-get), or install it yourself"
    )]
    NoValgrind,
}

/// Prometheus's server and promtool, from Debian's `prometheus` package (on PATH).
#[derive(Debug, Clone)]
pub struct Prometheus {
    /// The server.
    pub server: PathBuf,
    /// promtool.
    pub promtool: PathBuf,
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// Prometheus and promtool on PATH; an error naming [`BUILD_COMMAND`] when missing.
pub fn prometheus() -> Result<Prometheus, ToolsError> {
    match (on_path("prometheus"), on_path("promtool")) {
        (Some(server), Some(promtool)) => Ok(Prometheus { server, promtool }),
        _ => Err(ToolsError::NoPrometheus),
    }
}

/// Installs Debian's `package` with apt-get (refreshing the package lists once if the first
/// attempt fails). Packaged services are not started (no init system runs them here): tests run
/// their own processes on loopback.
fn apt_install(package: &str) -> Result<(), ToolsError> {
    apt_install_all(&[package])
}

/// Installs Debian `packages` with one apt-get call (refreshing the lists once if it fails).
fn apt_install_all(packages: &[&str]) -> Result<(), ToolsError> {
    let package = packages.join(" ");
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "--no-install-recommends"])
            .args(packages)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .map(|s| s.success())
            .map_err(|e| ToolsError::PackageInstall(format!("apt-get: {e}")))
    };
    let noun = if packages.len() == 1 {
        "package"
    } else {
        "packages"
    };
    eprintln!("installing Debian's {package} {noun}, first time only");
    if !install()? {
        let _ = Command::new("apt-get").arg("update").status();
        if !install()? {
            return Err(ToolsError::PackageInstall(format!(
                "apt-get install -y {package} failed; see its output above"
            )));
        }
    }
    Ok(())
}

/// Installs Debian's `prometheus` package (server and promtool) when missing.
pub fn ensure_prometheus() -> Result<Prometheus, ToolsError> {
    if let Ok(p) = prometheus() {
        return Ok(p);
    }
    apt_install("prometheus")?;
    prometheus()
}

/// HAProxy, the load balancer the fault tests put in front of replicas as a Service would be
/// (TCP, health-checked on the readiness probe): on PATH or in `/usr/sbin`.
pub fn haproxy() -> Result<PathBuf, ToolsError> {
    on_path("haproxy")
        .or_else(|| Some(PathBuf::from("/usr/sbin/haproxy")).filter(|p| p.is_file()))
        .ok_or(ToolsError::NoHaproxy)
}

/// Installs Debian's `haproxy` package when missing.
pub fn ensure_haproxy() -> Result<PathBuf, ToolsError> {
    if let Ok(p) = haproxy() {
        return Ok(p);
    }
    apt_install("haproxy")?;
    haproxy()
}

/// The container tools of the images (`cargo xtask image`, the images' end-to-end test):
/// Debian's buildah, podman, skopeo and runc (crun refuses this VM's cgroup layout), installed
/// together when one is missing; returns the `containers.conf` podman is run with (in the
/// cache, written by `images::Tools::locate`).
pub fn ensure_image_tools() -> Result<PathBuf, ToolsError> {
    if ["buildah", "podman", "skopeo", "runc"]
        .iter()
        .any(|t| on_path(t).is_none() && !Path::new("/usr/sbin").join(t).is_file())
    {
        apt_install_all(&["buildah", "podman", "skopeo", "runc"])?;
    }
    Ok(containers_conf())
}

/// The `containers.conf` the project runs podman with (see `images::CONTAINERS_CONF`).
pub fn containers_conf() -> PathBuf {
    cache_dir().join("containers.conf")
}

/// valgrind (its callgrind tool counts instructions per review: `cargo xtask instructions`).
pub fn valgrind() -> Result<PathBuf, ToolsError> {
    on_path("valgrind").ok_or(ToolsError::NoValgrind)
}

/// Installs Debian's `valgrind` package when missing.
pub fn ensure_valgrind() -> Result<PathBuf, ToolsError> {
    if let Ok(p) = valgrind() {
        return Ok(p);
    }
    apt_install("valgrind")?;
    valgrind()
}

/// Microsoft's SARIF validator (`sarif-multitool`), from the npm registry: checks
/// `admission-check -o sarif` against SARIF 2.1.0.
pub const SARIF_MULTITOOL_VERSION: &str = "5.7.0";
/// junitparser, a JUnit XML reader from PyPI: reads `admission-check -o junit` as CI systems do.
pub const JUNITPARSER_VERSION: &str = "5.0.3";

/// The validators of admission-check's CI report formats.
#[derive(Debug, Clone)]
pub struct ReportValidators {
    /// The SARIF multitool's native executable (`validate FILE -o OUT`).
    pub sarif_multitool: PathBuf,
    /// A directory holding the `junitparser` package, for `PYTHONPATH`.
    pub junitparser_path: PathBuf,
}

fn validators_paths() -> ReportValidators {
    let dir = cache_dir();
    ReportValidators {
        sarif_multitool: dir
            .join(format!("sarif-multitool-{SARIF_MULTITOOL_VERSION}"))
            .join("node_modules/@microsoft/sarif-multitool-linux/Sarif.Multitool"),
        junitparser_path: dir.join(format!("junitparser-{JUNITPARSER_VERSION}")),
    }
}

/// The report validators, when installed.
pub fn report_validators() -> Result<ReportValidators, ToolsError> {
    let v = validators_paths();
    if !v.sarif_multitool.is_file() {
        return Err(ToolsError::Missing("sarif-multitool", v.sarif_multitool));
    }
    if !v.junitparser_path.join("junitparser").is_dir() {
        return Err(ToolsError::Missing("junitparser", v.junitparser_path));
    }
    Ok(v)
}

fn run_installer(what: &str, cmd: &mut Command) -> Result<(), ToolsError> {
    let ok = cmd
        .status()
        .map_err(|e| ToolsError::Io(format!("running {what}"), e))?
        .success();
    if ok {
        Ok(())
    } else {
        Err(ToolsError::Io(
            what.to_owned(),
            std::io::Error::other("the installer failed; see its output above"),
        ))
    }
}

/// Installs the report validators into the tool cache when missing: the SARIF multitool with
/// the machine's npm, junitparser with its pip (both pinned, a few seconds).
pub fn ensure_report_validators() -> Result<ReportValidators, ToolsError> {
    let v = validators_paths();
    if !v.sarif_multitool.is_file() {
        eprintln!(
            "installing @microsoft/sarif-multitool {SARIF_MULTITOOL_VERSION} from npm, first time only"
        );
        let prefix = v
            .sarif_multitool
            .ancestors()
            .nth(4)
            .map(Path::to_path_buf)
            .unwrap_or_else(cache_dir);
        std::fs::create_dir_all(&prefix)
            .map_err(|e| ToolsError::Io(prefix.display().to_string(), e))?;
        run_installer(
            "npm install @microsoft/sarif-multitool",
            Command::new("npm")
                .args([
                    "install",
                    "--no-audit",
                    "--no-fund",
                    "--no-save",
                    "--prefix",
                ])
                .arg(&prefix)
                .arg(format!(
                    "@microsoft/sarif-multitool@{SARIF_MULTITOOL_VERSION}"
                ))
                .arg(format!(
                    "@microsoft/sarif-multitool-linux@{SARIF_MULTITOOL_VERSION}"
                )),
        )?;
        // The package's postinstall sets the execute bit; npm may skip install scripts.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&v.sarif_multitool, std::fs::Permissions::from_mode(0o755))
                .map_err(|e| ToolsError::Io(v.sarif_multitool.display().to_string(), e))?;
        }
    }
    if !v.junitparser_path.join("junitparser").is_dir() {
        eprintln!("installing junitparser {JUNITPARSER_VERSION} from PyPI, first time only");
        run_installer(
            "pip install junitparser",
            Command::new("python3")
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    "--no-deps",
                    "--target",
                ])
                .arg(&v.junitparser_path)
                .arg(format!("junitparser=={JUNITPARSER_VERSION}")),
        )?;
    }
    report_validators()
}

/// The `pre-commit` release the hook definition (`.pre-commit-hooks.yaml`) is tested with.
pub const PRE_COMMIT_VERSION: &str = "4.7.0";

fn pre_commit_path() -> PathBuf {
    cache_dir()
        .join(format!("pre-commit-{PRE_COMMIT_VERSION}"))
        .join("bin/pre-commit")
}

/// The `pre-commit` executable, when installed.
pub fn pre_commit() -> Result<PathBuf, ToolsError> {
    let p = pre_commit_path();
    if p.is_file() {
        Ok(p)
    } else {
        Err(ToolsError::Missing("pre-commit", p))
    }
}

/// Installs `pre-commit` from PyPI into a virtual environment of the tool cache when missing
/// (pinned, with its dependencies; a few seconds).
pub fn ensure_pre_commit() -> Result<PathBuf, ToolsError> {
    let p = pre_commit_path();
    if p.is_file() {
        return Ok(p);
    }
    eprintln!("installing pre-commit {PRE_COMMIT_VERSION} from PyPI, first time only");
    let venv = p
        .ancestors()
        .nth(2)
        .map(Path::to_path_buf)
        .unwrap_or_else(cache_dir);
    run_installer(
        "python3 -m venv",
        Command::new("python3").args(["-m", "venv"]).arg(&venv),
    )?;
    run_installer(
        "pip install pre-commit",
        Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet", "--disable-pip-version-check"])
            .arg(format!("pre-commit=={PRE_COMMIT_VERSION}")),
    )?;
    pre_commit()
}

/// Paths of the three binaries.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// kube-apiserver.
    pub kube_apiserver: PathBuf,
    /// etcd.
    pub etcd: PathBuf,
    /// kustomize.
    pub kustomize: PathBuf,
    /// tilt (evaluates the Tiltfile).
    pub tilt: PathBuf,
}

/// Where built tools are cached: `$ADMISSION_TOOLS_DIR`, else `$XDG_CACHE_HOME/admission-webhooks/tools`,
/// else `~/.cache/admission-webhooks/tools`.
pub fn cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("ADMISSION_TOOLS_DIR") {
        return PathBuf::from(d);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("admission-webhooks").join("tools")
}

/// Where one tool's binary lives in the cache.
pub fn binary_path(tool: &Tool) -> PathBuf {
    cache_dir()
        .join(format!("{}-{}", tool.name, tool.version))
        .join(tool.name)
}

fn find(name: &str) -> Result<PathBuf, ToolsError> {
    let tool = TOOLS
        .iter()
        .chain(&CLUSTER_TOOLS)
        .find(|t| t.name == name)
        .ok_or_else(|| ToolsError::Io(name.to_owned(), std::io::ErrorKind::NotFound.into()))?;
    let p = binary_path(tool);
    if p.is_file() {
        Ok(p)
    } else {
        Err(ToolsError::Missing(tool.name, p))
    }
}

/// The cached binaries; an error naming [`BUILD_COMMAND`] when one is missing.
pub fn locate() -> Result<Binaries, ToolsError> {
    Ok(Binaries {
        kube_apiserver: find("kube-apiserver")?,
        etcd: find("etcd")?,
        kustomize: find("kustomize")?,
        tilt: find("tilt")?,
    })
}

/// The cached toxiproxy server (built by [`ensure`]).
pub fn toxiproxy() -> Result<PathBuf, ToolsError> {
    find("toxiproxy")
}

/// The cached Jaeger binary (built by [`ensure`]).
pub fn jaeger() -> Result<PathBuf, ToolsError> {
    find("jaeger")
}

/// The cached koord-manager ([`KOORD_MANAGER`]), built first from `checkout` when missing:
/// `checkout` must be a Git checkout of Koordinator at [`KOORDINATOR_PIN`].
pub fn koord_manager(checkout: Option<&Path>) -> Result<PathBuf, ToolsError> {
    let out = binary_path(&KOORD_MANAGER);
    if out.is_file() {
        return Ok(out);
    }
    let Some(src) = checkout else {
        return Err(ToolsError::NoKoordinatorCheckout(out));
    };
    let head = Command::new("git")
        .arg("-C")
        .arg(src)
        .args(["rev-parse", "HEAD"])
        .output()
        .map_err(|e| ToolsError::Io("git rev-parse".into(), e))?;
    let head = String::from_utf8_lossy(&head.stdout).trim().to_owned();
    if head != KOORDINATOR_PIN {
        return Err(ToolsError::NotThePin(src.to_path_buf(), head));
    }
    build(&KOORD_MANAGER, src, &out)?;
    Ok(out)
}

/// Builds every missing tool from the wrapper modules under `go_root`
/// (`dev/xtask/go`), then returns their paths.
pub fn ensure(go_root: &Path) -> Result<Binaries, ToolsError> {
    build_missing(&TOOLS, go_root)?;
    locate()
}

/// The cluster's binaries ([`CLUSTER_TOOLS`]).
#[derive(Debug, Clone)]
pub struct ClusterBinaries {
    /// kube-controller-manager.
    pub controller_manager: PathBuf,
    /// kube-scheduler.
    pub scheduler: PathBuf,
    /// kubectl.
    pub kubectl: PathBuf,
    /// kwok.
    pub kwok: PathBuf,
}

/// The cached cluster binaries; an error naming [`BUILD_COMMAND`] when one is missing.
pub fn locate_cluster() -> Result<ClusterBinaries, ToolsError> {
    Ok(ClusterBinaries {
        controller_manager: find("kube-controller-manager")?,
        scheduler: find("kube-scheduler")?,
        kubectl: find("kubectl")?,
        kwok: find("kwok")?,
    })
}

/// Builds every missing one of [`CLUSTER_TOOLS`] as [`ensure`] does, then returns their paths.
pub fn ensure_cluster(go_root: &Path) -> Result<ClusterBinaries, ToolsError> {
    build_missing(&CLUSTER_TOOLS, go_root)?;
    locate_cluster()
}

fn build_missing(tools: &[Tool], go_root: &Path) -> Result<(), ToolsError> {
    let missing: Vec<&Tool> = tools.iter().filter(|t| !binary_path(t).is_file()).collect();
    if !missing.is_empty() {
        let secs: u64 = missing.iter().map(|t| t.cold_secs).sum();
        eprintln!(
            "building {} with Go, once: about {} min on a 2-core machine with empty Go caches \
             (less with Go's module and build caches warm)",
            missing
                .iter()
                .map(|t| t.name)
                .collect::<Vec<_>>()
                .join(", "),
            secs.div_ceil(60)
        );
    }
    for tool in missing {
        build(tool, &go_root.join(tool.module), &binary_path(tool))?;
    }
    Ok(())
}

fn build(tool: &Tool, module: &Path, out: &Path) -> Result<(), ToolsError> {
    let go_ok = Command::new("go")
        .arg("version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !go_ok {
        return Err(ToolsError::NoGo(tool.name));
    }
    let dir = out.parent().unwrap_or(out);
    std::fs::create_dir_all(dir).map_err(|e| ToolsError::Io(dir.display().to_string(), e))?;
    // Build to a temporary name and rename: an interrupted build never counts as built.
    let tmp = dir.join(format!(".{}.partial", tool.name));
    eprintln!(
        "building {} {} with Go in {} (about {} s; cached in {})",
        tool.name,
        tool.version,
        module.display(),
        tool.cold_secs,
        dir.display()
    );
    let mut go = Command::new("go");
    // Go needs a home for its module and build caches; a bare CI environment may have none.
    if std::env::var_os("HOME").is_none() {
        let base = cache_dir();
        if std::env::var_os("GOPATH").is_none() {
            go.env("GOPATH", base.join("gopath"));
        }
        if std::env::var_os("GOCACHE").is_none() {
            go.env("GOCACHE", base.join("gocache"));
        }
    }
    let started = std::time::Instant::now();
    let status = go
        .current_dir(module)
        .args(["build", "-trimpath"])
        .arg(format!("-ldflags=-s -w {}", tool.ldflags))
        .arg("-o")
        .arg(&tmp)
        .arg(tool.package)
        .env("GOFLAGS", "-mod=mod")
        .env("GOTOOLCHAIN", "local")
        .env("CGO_ENABLED", if tool.cgo { "1" } else { "0" })
        .env("GONOSUMDB", tool.nosumdb)
        .status()
        .map_err(|e| ToolsError::Io("go build".into(), e))?;
    if !status.success() {
        let _ = std::fs::remove_file(&tmp);
        return Err(ToolsError::Build {
            tool: tool.name,
            version: tool.version,
            code: status.code(),
        });
    }
    std::fs::rename(&tmp, out).map_err(|e| ToolsError::Io(out.display().to_string(), e))?;
    eprintln!(
        "built {} in {:.0} s",
        tool.name,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
