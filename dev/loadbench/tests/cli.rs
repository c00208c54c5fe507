//! `admission-load` as the soak and the benches run it, through its command line. Having an
//! integration test also makes `cargo test --workspace` build the binary itself, so the test
//! command's soak runs the build the tests made instead of compiling the services again.

use std::process::Command;

/// Load is only ever sent to this machine: a non-loopback `--addr` is refused before any
/// connection, naming the address.
#[test]
fn load_goes_to_loopback_addresses_only() {
    // Any readable file: both are read before the address is looked at, never parsed.
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_admission-load"))
        .args(["--addr", "192.0.2.1:443", "--ca", file, "--requests", "1"])
        .arg(format!("--case=/validate={file}"))
        .output()
        .expect("admission-load runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("refusing to send load to a non-loopback address 192.0.2.1:443"),
        "{stderr}"
    );
}
