//! Compiles proto/quota_state.proto with protox (pure Rust, no system protoc) and generates the
//! tonic service and prost messages.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/quota_state.proto");
    let fds = protox::compile(["quota_state.proto"], ["proto"])?;
    tonic_prost_build::configure().compile_fds(fds)?;
    Ok(())
}
