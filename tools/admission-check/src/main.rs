//! `admission-check`: the command line is [`admission_check::cli`].

/// See the `mimalloc` line of Cargo.toml: measured with `cargo xtask check-speed`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    admission_check::cli::main()
}
