//! `lone-message`: the CPU a bare server spends on a message that arrives alone, on this machine
//! now. The server is what every service is at its core, tokio with one worker thread reading a
//! TCP socket on loopback, without TLS, HTTP or any work on the bytes; the client sends 1,200
//! bytes (about a small Pod's watch event) and then waits a millisecond, so the server's thread
//! goes idle before each message and is woken by it, as a service is between a cluster's Pod
//! events. Its CPU per message is the floor under each such event in `cargo xtask footprint`,
//! which runs it first: the machine's speed moves from day to day, and so does this floor.
//!
//! The server is this binary again (`--serve`), so that its CPU is read as the footprint reads a
//! service's (`/proc/<pid>/stat`). Prints the median of `--runs`: µs of server CPU and context
//! switches per message.

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
    /// Messages per run.
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
    let mut buf = vec![0u8; 64 * 1024];
    while socket.read(&mut buf).await? > 0 {}
    Ok(())
}

/// One run: the server's CPU (µs) and context switches per message.
fn run(args: &Args) -> Result<(f64, f64)> {
    let mut server = Command::new(std::env::current_exe()?)
        .arg("--serve")
        .stdout(Stdio::piped())
        .spawn()
        .context("starting the server")?;
    let pid = server.id();
    let mut port = String::new();
    BufReader::new(server.stdout.take().context("server stdout")?).read_line(&mut port)?;
    let port: u16 = port.trim().parse().context("the server's port")?;
    let (messages, gap) = (args.messages, Duration::from_micros(args.gap_us));
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let before = client.block_on(async {
        let mut socket = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        socket.set_nodelay(true)?;
        // The server is accepting; what it spent starting is not counted.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let before = reading(pid)?;
        let message = vec![7u8; MESSAGE];
        for _ in 0..messages {
            socket.write_all(&message).await?;
            tokio::time::sleep(gap).await;
        }
        let after = reading(pid)?;
        socket.shutdown().await?;
        anyhow::Ok((before, after))
    })?;
    let status = server.wait()?;
    if !status.success() {
        bail!("the server exited with {status}");
    }
    let ((cpu0, sw0), (cpu1, sw1)) = before;
    let n = messages.max(1) as f64;
    Ok(((cpu1 - cpu0) * 1e6 / n, (sw1 - sw0) / n))
}

/// CPU seconds (user and system, in clock ticks of 10 ms) and context switches of every thread
/// of `pid` so far.
fn reading(pid: u32) -> Result<(f64, f64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let cpu = (tick(11) + tick(12)) / clock_ticks();
    let mut switches = 0.0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let mut status = String::new();
        std::fs::File::open(task?.path().join("status"))?.read_to_string(&mut status)?;
        switches += status
            .lines()
            .filter_map(|l| {
                l.strip_prefix("voluntary_ctxt_switches:")
                    .or_else(|| l.strip_prefix("nonvoluntary_ctxt_switches:"))
            })
            .filter_map(|v| v.trim().parse::<f64>().ok())
            .sum::<f64>();
    }
    Ok((cpu, switches))
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf reads a configuration value and has no other effect.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}
