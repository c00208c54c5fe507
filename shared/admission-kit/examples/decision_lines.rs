//! Writes N decision lines the way a served review writes its one (the review's span opened,
//! its uid and answer recorded, the decision event logged), to standard output: the logging
//! stage alone, for a profiler. Instructions per line under callgrind, start-up cancelled:
//!
//! ```sh
//! cargo build --release -p admission-kit --example decision_lines
//! for n in 1000 11000; do valgrind --tool=callgrind --callgrind-out-file=/tmp/lines.$n \
//!   target/release/examples/decision_lines $n > /dev/null; done
//! # (total of 11000 - total of 1000) / 10000
//! ```
//!
//! `--stock` writes the same lines with tracing-subscriber's own JSON format instead of the
//! kit's line writer (what the kit used before), for comparison.

use admission_kit::server::telemetry::{LogFormat, LogTarget, Telemetry, UnprintedSpanFields};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let lines: u64 = args.next().as_deref().unwrap_or("100000").parse()?;
    // Held to the end, as a service holds it.
    let _telemetry = if args.next().as_deref() == Some("--stock") {
        let writer = || -> Box<dyn std::io::Write> { Box::new(std::io::stdout()) };
        tracing_subscriber::registry()
            .with(tracing_subscriber::EnvFilter::new("info"))
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_current_span(false)
                    .with_span_list(false)
                    .fmt_fields(UnprintedSpanFields)
                    .with_writer(writer),
            )
            .try_init()?;
        None
    } else {
        Some(Telemetry::init(
            "decision-lines",
            LogFormat::Json,
            LogTarget::Stdout,
        )?)
    };
    run(lines)
}

/// The span and event of `server::Observe`, field for field.
fn run(lines: u64) -> Result<(), Box<dyn std::error::Error>> {
    let path = "/validate-registry-volcano-sh-v1alpha1-model";
    for latency_us in 0..lines {
        let span = tracing::info_span!(
            "admission.review",
            otel.name = %path,
            webhook = %path,
            uid = tracing::field::Empty,
            allowed = tracing::field::Empty,
        );
        let _entered = span.enter();
        span.record("uid", "705ab4f5-6393-11e8-b7cc-42010a800002");
        span.record("allowed", true);
        tracing::info!(
            target: "admission::decision",
            webhook = path,
            uid = %"705ab4f5-6393-11e8-b7cc-42010a800002",
            kind = %"Model",
            namespace = %"default",
            name = %"deepseek-r1",
            operation = "CREATE",
            allowed = true,
            patched = false,
            dry_run = false,
            rules = %"",
            applied = %"",
            latency_us,
            "decision"
        );
    }
    Ok(())
}
