//! `lone-message`: the CPU a bare server spends on a message that arrives alone, on this machine
//! now. The server is what every service is at its core, tokio with one worker thread reading a
//! TCP socket on loopback, without TLS, HTTP or any work on the bytes; the client sends 1,200
//! bytes (about a small Pod's watch event) and then waits a millisecond, so the server's thread
//! goes idle before each message and is woken by it, as a service is between a cluster's Pod
//! events. Its CPU per message is the floor under each such event in `cargo xtask footprint`,
//! which runs it first: the machine's speed moves from day to day, and so does this floor.
//!
//! The server is this binary again (`--serve`), a process of its own as each service is, and
//! measures itself (`getrusage`) from the connection to its end. Prints the median of `--runs`:
//! µs of server CPU and context switches per message.

use std::io::{BufRead as _, BufReader, Read as _};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use clap::Parser;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// Bytes of one message.
const MESSAGE: usize = 1200;

#[derive(Parser, Debug)]
#[command(
    name = "lone-message",
    about = "CPU of a bare one-worker tokio server per message that arrives alone (loopback)."
)]
struct Args {
    /// Messages per run (at least one).
    #[arg(long, default_value_t = 3000)]
    messages: usize,
    /// Microseconds the client waits after each message.
    #[arg(long, default_value_t = 1000)]
    gap_us: u64,
    /// Runs; the median is printed.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Be the server: listen on a loopback port, print it, count messages until the client
    /// closes.
    #[arg(long, hide = true)]
    serve: bool,
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.serve {
        return tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?
            // On the worker, as a service's connections are (`block_on` would run it on this
            // thread, which the worker would then have to wake).
            .block_on(async { tokio::spawn(serve()).await? });
    }
    let mut cpu = Vec::new();
    let mut switches = Vec::new();
    for _ in 0..args.runs.max(1) {
        let (c, s) = run(&args)?;
        cpu.push(c);
        switches.push(s);
    }
    println!(
        "lone message ({MESSAGE} bytes to a bare one-worker tokio server, {} µs apart, median of {}): {:.1} µs of server CPU and {:.1} context switches per message",
        args.gap_us,
        cpu.len(),
        median(&mut cpu),
        median(&mut switches)
    );
    Ok(())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

async fn serve() -> Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("{}", listener.local_addr()?.port());
    let (mut socket, _) = listener.accept().await?;
    // From the accepted connection on: what it spent starting is not counted.
    let before = usage()?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut bytes = 0usize;
    loop {
        let n = socket.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        bytes += n;
    }
    let after = usage()?;
    println!(
        "{} {} {}",
        bytes / MESSAGE,
        after.0 - before.0,
        after.1 - before.1
    );
    Ok(())
}

/// This process's CPU (µs, user and system) and context switches so far, its ended threads
/// included (which `/proc/<pid>/task` would miss).
#[allow(unsafe_code)] // libc calls (process and resource controls) with no safe wrapper.
fn usage() -> Result<(f64, f64)> {
    // SAFETY: getrusage writes the zeroed struct it is given and reads nothing else.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        bail!("getrusage: {}", std::io::Error::last_os_error());
    }
    let us = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
    Ok((
        us(u.ru_utime) + us(u.ru_stime),
        (u.ru_nvcsw + u.ru_nivcsw) as f64,
    ))
}

/// One run: the server's CPU (µs) and context switches per message.
fn run(args: &Args) -> Result<(f64, f64)> {
    let mut server = Command::new(std::env::current_exe()?)
        .arg("--serve")
        .stdout(Stdio::piped())
        .spawn()
        .context("starting the server")?;
    let figures = send(args, &mut server);
    if figures.is_err() {
        // A server whose client failed would wait for it forever.
        let _ = server.kill();
    }
    let status = server.wait()?;
    let figures = figures?;
    if !status.success() {
        bail!("the server exited with {status}");
    }
    let f: Vec<f64> = figures
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let [received, cpu_us, switches] = f[..] else {
        bail!("the server's figures: {figures:?}");
    };
    let messages = args.messages.max(1) as f64;
    if received < messages {
        bail!("the server received {received} of {messages} messages");
    }
    Ok((cpu_us / received, switches / received))
}

/// Sends the messages to `server` and returns what it printed after the last.
fn send(args: &Args, server: &mut std::process::Child) -> Result<String> {
    let mut out = BufReader::new(server.stdout.take().context("server stdout")?);
    let mut port = String::new();
    out.read_line(&mut port)?;
    let port: u16 = port.trim().parse().context("the server's port")?;
    let (messages, gap) = (args.messages.max(1), Duration::from_micros(args.gap_us));
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(async {
            let mut socket = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
            socket.set_nodelay(true)?;
            let message = vec![7u8; MESSAGE];
            for _ in 0..messages {
                socket.write_all(&message).await?;
                tokio::time::sleep(gap).await;
            }
            socket.shutdown().await?;
            anyhow::Ok(())
        })?;
    let mut figures = String::new();
    out.read_to_string(&mut figures)?;
    Ok(figures)
}
