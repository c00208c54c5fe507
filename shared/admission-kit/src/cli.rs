//! The command line every webhook binary shares: `serve`, `review` and `crd`.

use std::io::Read as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::cluster::state::StaticState;
use crate::compat::go::GoDuration;
use crate::review::app::App;
use crate::review::handler::Context;
use crate::review::lookup::{ClusterState, EmptyState};

#[cfg(feature = "serve")]
mod serve;
#[cfg(feature = "serve")]
pub use serve::{CertArgs, TlsMode};

#[derive(Parser, Debug)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve the webhooks over HTTPS.
    #[cfg(feature = "serve")]
    Serve(Box<serve::ServeArgs>),
    /// Decide one AdmissionReview offline, exactly as the server would, and print the answer.
    Review(ReviewArgs),
    /// Print the CustomResourceDefinitions of the kinds this service serves, as YAML.
    Crd,
    /// Print the endpoint table (paths, kinds, failure policies, targets) as JSON, for tools that
    /// register the webhooks.
    Endpoints,
}

/// Parses a flag's Go duration (`10s`, `1h30m`), as every service's duration flags take them.
pub fn duration(s: &str) -> Result<Duration, String> {
    let d = GoDuration::parse(s).map_err(|e| e.to_string())?;
    u64::try_from(d.nanos())
        .map(Duration::from_nanos)
        .map_err(|_| "a duration must not be negative".to_owned())
}

/// The service account's namespace, as mounted in every Pod.
const SA_NAMESPACE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// The namespace of the service account the process runs as (mounted in every Pod): where a
/// service keeps what it owns when no flag or `POD_NAMESPACE` says.
pub fn service_account_namespace() -> Result<String, String> {
    std::fs::read_to_string(SA_NAMESPACE)
        .map(|s| s.trim().to_owned())
        .map_err(|e| format!("{SA_NAMESPACE}: {e}"))
}

/// Flags of `review`.
#[derive(Args, Debug)]
struct ReviewArgs {
    /// The endpoint path whose handler decides (as the API server would post to it).
    #[arg(long)]
    path: String,
    /// Cluster state the rules may read: JSON or YAML objects, multi-document YAML, or Lists
    /// (repeat the flag for several files).
    #[arg(long)]
    state: Vec<PathBuf>,
    /// Feature gates, e.g. `Name=false,Other=true`.
    #[arg(long, env = "WEBHOOK_FEATURE_GATES")]
    feature_gates: Option<String>,
    /// The AdmissionReview JSON (v1 or v1beta1); standard input when absent or `-`.
    file: Option<PathBuf>,
}

/// A service with no options of its own ([`main`]).
#[derive(Args, Debug, Clone, Copy, Default)]
pub struct NoOptions {}

/// Runs a service with no options of its own: parses the command line and dispatches. Returns
/// the process exit code.
pub fn main(app: App) -> ExitCode {
    main_with(move |_: NoOptions| Ok(app.clone()))
}

/// The service options `O` at their defaults, as `serve` with none of its flags gives them.
pub fn defaults<O: Args + FromArgMatches>() -> Result<O, String> {
    parse_options::<O, _, &str>([])
}

/// The service options `O` from `flags`, as `serve` reads the same flags (`--name value` or
/// `--name=value`): for tests and tools that build a service's endpoint table themselves.
pub fn parse_options<O, I, T>(flags: I) -> Result<O, String>
where
    O: Args + FromArgMatches,
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cmd = O::augment_args(clap::Command::new("options").no_binary_name(true));
    let matches = cmd.try_get_matches_from(flags).map_err(first_line)?;
    O::from_arg_matches(&matches).map_err(first_line)
}

/// clap's message without its usage lines and `error:` prefix.
fn first_line(e: clap::Error) -> String {
    let text = e.to_string();
    let line = text.lines().next().unwrap_or_default();
    line.strip_prefix("error: ").unwrap_or(line).to_owned()
}

/// A service's endpoint table under `flags` (its own flags only, `--name=value`), as `serve`
/// builds it: for tools that run a service under options (admission-check's examples). A flag
/// the service does not declare is an error.
pub fn build_with<'a, O: Args + FromArgMatches>(
    flags: impl IntoIterator<Item = &'a str>,
    build: impl Fn(O) -> Result<App, String>,
) -> Result<App, String> {
    parse_options::<O, _, _>(flags).and_then(build)
}

/// The long names of the flags `O` declares (without dashes): which of a Deployment's
/// arguments are the service's own rather than the kit's.
pub fn declared<O: Args>() -> Vec<String> {
    O::augment_args(clap::Command::new("options"))
        .get_arguments()
        .filter_map(|a| a.get_long().map(str::to_owned))
        .collect()
}

/// Runs a service whose endpoint table `build` makes from its typed options `O` (flags of
/// `serve` and `review`, parsed once): the handlers hold what they need of them. `build` refuses
/// options that cannot be used (a configuration file that does not parse, say), and the process
/// stops with its message before serving. `crd` and `endpoints` list the table at the defaults.
pub fn main_with<O: Args + FromArgMatches>(build: impl Fn(O) -> Result<App, String>) -> ExitCode {
    crate::server::trim::tune_malloc();
    let fail = |msg: String| {
        eprintln!("{msg}");
        ExitCode::from(2)
    };
    let app = match defaults::<O>().and_then(&build) {
        Ok(app) => app,
        Err(e) => return fail(format!("the service's default options: {e}")),
    };
    let paths: Vec<String> = app
        .endpoints
        .iter()
        .map(|e| match e.gate {
            Some(g) => format!("{} (gate {g})", e.path),
            None => e.path.to_owned(),
        })
        .collect();
    let mut help = format!("Endpoints:\n  {}", paths.join("\n  "));
    if !app.gates.is_empty() {
        let gates: Vec<String> = app.gates.iter().map(|(k, v)| format!("{k}={v}")).collect();
        help.push_str(&format!(
            "\n\nFeature gates (defaults):\n  {}",
            gates.join("\n  ")
        ));
    }
    let cmd = Cli::command()
        .name(app.name)
        .bin_name(app.name)
        .about(app.about)
        .after_help(help)
        .mut_subcommand("review", O::augment_args);
    #[cfg(feature = "serve")]
    let cmd = cmd.mut_subcommand("serve", O::augment_args);
    let matches = cmd.get_matches();
    // The table at the options given: what `serve` and `review` decide with.
    let app = match matches.subcommand() {
        Some(("serve" | "review", sub)) => {
            match O::from_arg_matches(sub)
                .map_err(|e| e.to_string())
                .and_then(&build)
            {
                Ok(app) => app,
                Err(e) => return fail(format!("{}: {e}", app.name)),
            }
        }
        _ => app,
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    match cli.command {
        Command::Review(a) => review(&app, a),
        Command::Crd => crd(&app),
        Command::Endpoints => {
            match serde_json::to_string_pretty(&crate::review::app::EndpointInfo::of(&app)) {
                Ok(s) => emit(&(s + "\n")),
                Err(e) => {
                    eprintln!("cannot encode the endpoints: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        #[cfg(feature = "serve")]
        Command::Serve(a) => serve::run(app, *a),
    }
}

fn crd(app: &App) -> ExitCode {
    if app.crds.is_empty() {
        eprintln!("{} serves no custom resources", app.name);
        return ExitCode::from(2);
    }
    let mut out = String::new();
    for c in &app.custom_resource_definitions() {
        match serde_yaml_ng::to_string(c) {
            Ok(y) => {
                out.push_str("---\n");
                out.push_str(&y);
            }
            Err(e) => {
                eprintln!("cannot render CRD: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    emit(&out)
}

/// Writes `text` to stdout; a closed pipe (`| head`) is not an error worth reporting.
pub fn write_stdout(text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Writes to stdout (see [`write_stdout`]); exit 1 when that fails.
fn emit(text: &str) -> ExitCode {
    match write_stdout(text) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cannot write the output: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Decides one review offline. Exit 0 with the answer on stdout; exit 2 with a message on stderr
/// when the input cannot be decided.
fn review(app: &App, a: ReviewArgs) -> ExitCode {
    let fail = |msg: String| {
        eprintln!("{}: {msg}", app.name);
        ExitCode::from(2)
    };
    let prepared = match app.prepare(a.feature_gates.as_deref()) {
        Ok(p) => p,
        Err(e) => return fail(e.to_string()),
    };
    let Some(endpoint) = prepared.app.endpoint(&a.path) else {
        let known: Vec<&str> = app.endpoints.iter().map(|e| e.path).collect();
        return fail(format!(
            "no endpoint {:?}; known: {}",
            a.path,
            known.join(", ")
        ));
    };
    let mut body = Vec::new();
    let (source, read) = match &a.file {
        Some(p) if p.as_os_str() != "-" => {
            (p.display().to_string(), std::fs::read(p).map(|b| body = b))
        }
        _ => (
            "standard input".to_owned(),
            std::io::stdin().read_to_end(&mut body).map(|_| ()),
        ),
    };
    if let Err(e) = read {
        return fail(format!("cannot read the review from {source}: {e}"));
    }
    let review: crate::review::envelope::ReviewIn = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            let e = crate::review::handler::ReviewError::Body(e.to_string());
            return fail(if body.trim_ascii_start().first() == Some(&b'{') {
                format!("{source}: {e}")
            } else {
                format!(
                    "{source}: {e} (review takes one AdmissionReview in JSON, as the API server sends it)"
                )
            });
        }
    };
    if let Some(wrong) = review
        .request
        .as_ref()
        .and_then(|r| served_elsewhere(r, endpoint))
    {
        return fail(format!("{source}: {wrong}"));
    }
    let state: Arc<dyn ClusterState> = if a.state.is_empty() {
        Arc::new(EmptyState)
    } else {
        match StaticState::from_files(&a.state) {
            Ok(s) => Arc::new(s),
            Err(e) => return fail(e.to_string()),
        }
    };
    let ctx = Context::new(state).with_gates(prepared.gates.clone());
    let out = match endpoint.handler.review(review, &ctx) {
        Ok(answer) => answer.review,
        // What the server answers, where it answers with a review: the user sees upstream's
        // answer. Kthena answers plain text (HTTP 400): an error here.
        Err(e) if app.decode_errors == crate::review::app::DecodeErrors::Errored => e
            .errored_review(
                crate::review::envelope::claimed_api_version(&body),
                crate::review::envelope::claimed_uid(&body),
            ),
        Err(e) => return fail(format!("{source}: {}", e.plain_text())),
    };
    match serde_json::to_string_pretty(&out) {
        Ok(s) => emit(&(s + "\n")),
        Err(e) => fail(format!("cannot encode the answer: {e}")),
    }
}

/// Why a review cannot go to `endpoint`: its request names a group or resource the endpoint is
/// not registered for (a Model review on the AutoscalingPolicy path would otherwise be decided
/// by the wrong rules, usually admitted). A different subresource or version is left to the
/// handler, which answers it as upstream does; a review naming no resource is not judged here.
fn served_elsewhere(
    req: &crate::review::envelope::RawRequest,
    endpoint: &crate::review::app::Endpoint,
) -> Option<String> {
    let res = &req.resource;
    let t = &endpoint.target;
    let served = t.resource.split('/').next().unwrap_or_default();
    if res.resource.is_empty()
        || t.is_unregistered()
        || (res.group == t.group && res.resource == served)
    {
        return None;
    }
    let group = |g: &str| {
        if g.is_empty() {
            "core".to_owned()
        } else {
            g.to_owned()
        }
    };
    let kind = if req.kind.kind.is_empty() {
        String::new()
    } else {
        format!(" (kind {})", req.kind.kind)
    };
    Some(format!(
        "{} serves {} {served}; this review is for {} {}{kind}",
        endpoint.path,
        group(&t.group),
        group(&res.group),
        res.resource,
    ))
}
