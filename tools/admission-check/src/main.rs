//! `admission-check`: the command line is [`admission_check::cli`].

fn main() -> std::process::ExitCode {
    admission_check::cli::main()
}
