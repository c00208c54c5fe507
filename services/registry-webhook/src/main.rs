//! `registry-webhook`: `serve`, `review` and `crd`; the endpoint table is [`registry_webhook::app`].

fn main() -> std::process::ExitCode {
    admission_kit::cli::main(registry_webhook::app())
}
