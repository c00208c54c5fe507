//! `base-rootfs DIR [CACHE]`: writes the base image's files into DIR (the packages downloaded into
//! CACHE, default DIR.debs), as `cargo xtask image` commits them; for `deploy/Dockerfile`, whose
//! builds have no buildah. Prints the packages, one `name=version` per line.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1).map(PathBuf::from);
    let Some(dir) = args.next() else {
        eprintln!("usage: base-rootfs DIR [CACHE]");
        return ExitCode::from(2);
    };
    let cache = args.next().unwrap_or_else(|| dir.with_extension("debs"));
    let result =
        images::fetch_packages(&cache).and_then(|p| images::base_rootfs(&p, &dir).map(|()| p));
    match result {
        Ok(packages) => {
            for p in packages {
                println!("{}={}", p.name, p.version);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("base-rootfs: {e}");
            ExitCode::FAILURE
        }
    }
}
