//! `training-webhook`: `serve`, `review`, `crd`, `endpoints`; the endpoint table is
//! [`training_webhook::app`].

fn main() -> std::process::ExitCode {
    admission_kit::cli::main_with(|o| Ok(training_webhook::app_with(o)))
}
