//! `lone-message` runs its server, sends, and prints one line that `cargo xtask footprint` shows.

#[test]
fn a_short_run_prints_cpu_and_switches_per_message() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lone-message"))
        .args(["--messages", "50", "--gap-us", "200", "--runs", "1"])
        .output()
        .expect("running lone-message");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout.trim();
    assert!(line.starts_with("lone message (1200 bytes"), "{line}");
    // Both figures are numbers (their values depend on the machine and are not checked).
    let figures: Vec<f64> = line
        .rsplit_once("): ")
        .map(|(_, f)| f)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(figures.len(), 2, "{line}");
    assert!(figures.iter().all(|f| *f >= 0.0), "{line}");
}
