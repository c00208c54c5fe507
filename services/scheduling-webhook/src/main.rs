//! `scheduling-webhook`: `serve`, `review`, `endpoints`; the endpoint table is
//! [`scheduling_webhook::app`].

fn main() -> std::process::ExitCode {
    admission_kit::cli::main_with(scheduling_webhook::app_with)
}
