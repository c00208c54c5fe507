//! `node-config-webhook`: `serve`, `review`, `endpoints`; the endpoint table is
//! [`node_config_webhook::app`].

fn main() -> std::process::ExitCode {
    admission_kit::cli::main(node_config_webhook::app())
}
