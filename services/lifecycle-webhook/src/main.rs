//! `lifecycle-webhook`: `serve`, `review`, `endpoints`; the endpoint table is
//! [`lifecycle_webhook::app`].

fn main() -> std::process::ExitCode {
    admission_kit::cli::main_with(lifecycle_webhook::app_from)
}
