//! `node-config-webhook`: `serve`, `review`, `endpoints`; the endpoint table is
//! [`node_config_webhook::app`].

fn main() -> std::process::ExitCode {
    admission_kit::cli::main_with(|o| Ok(node_config_webhook::app_with(o)))
}
