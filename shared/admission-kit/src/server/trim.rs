//! Gives memory back to the system after a burst. glibc's malloc keeps what a burst freed in its
//! arenas (after 100 reviews of 7 MiB, or 2,000 connections opened and closed, a webhook stayed
//! at twice its idle size), and the next burst starts from there towards the Deployment's limit.
//! `malloc_trim(0)` returns the free pages. Every five seconds, when no review is in flight and
//! the resident size grew by 4 MiB or more since the last trim, it is called: a steady server
//! never pays for it. Memory freed after a trim (connections closing later, the end of a burst
//! that was trimmed in a pause) does not raise the resident size, so it would never count as
//! growth: while the resident size stays 4 MiB or more above the lowest it has been, an idle
//! server also trims again every [`RETRY`].
//!
//! A setting would not do: `M_TRIM_THRESHOLD` only trims the top of the heap, and freed chunks
//! below it stay resident.
//!
//! The same module sizes glibc's per-thread cache ([`tune_malloc`]), the cheapest cut of a
//! review's cost. The figures behind each setting: docs/performance.md, "The allocator".

use std::sync::Arc;
use std::time::Duration;

/// The glibc tunables every service runs with (figures: docs/performance.md, "The allocator"):
/// - a per-thread cache of 100 freed chunks per size class (default 7) for chunks of at most 128
///   bytes (default 1 KiB): a review builds and drops trees of thousands of small values, and
///   with 7 most frees fall through to the arena's bins; larger caches pin what they hold away
///   from the trimming above;
/// - a fixed mmap threshold of 1 MiB: glibc raises its threshold each time a mapped chunk is
///   freed, after which large bodies come from the arenas and are trimmed back only in part;
///   fixed, every body of a megabyte or more is mapped and unmapped whole;
/// - one arena: tokio's workers are not the main thread, so glibc gives each its own, which it
///   shrinks and grows as requests come and go. A service given more workers shares the arena's
///   lock (an operator's own `glibc.malloc.arena_max` wins).
pub const MALLOC_TUNABLES: &str = "glibc.malloc.tcache_count=100:glibc.malloc.tcache_max=128:\
glibc.malloc.mmap_threshold=1048576:glibc.malloc.arena_max=1";

/// Makes the process run with [`MALLOC_TUNABLES`]. glibc reads `GLIBC_TUNABLES` only when a
/// process starts, and no call sets the cache size later (`mallopt` has no such parameter), so
/// when the variable does not name the cache size the binary executes itself again once, same
/// PID and arguments, with those of them the variable does not set added. Call first thing in
/// `main`, before any thread exists. An operator's own setting of any of them wins (of the cache
/// size: none is added); if the re-execution fails the process carries on with glibc's
/// defaults. Elsewhere than Linux with glibc, a no-op.
pub fn tune_malloc() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::os::unix::process::CommandExt;
        let current = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
        let set = |key: &str| current.split(':').any(|t| t.split('=').next() == Some(key));
        // Decided by the first only: glibc rewrites the variable as it parses it, and only its
        // first entry is sure to read back whole after the re-execution.
        fn key(t: &str) -> &str {
            t.split('=').next().unwrap_or_default()
        }
        if set(key(MALLOC_TUNABLES)) {
            return;
        }
        let missing = MALLOC_TUNABLES.split(':').filter(|t| !set(key(t)));
        let Ok(exe) = std::env::current_exe() else {
            return;
        };
        let tunables = std::iter::once(current.as_str())
            .filter(|c| !c.is_empty())
            .chain(missing)
            .collect::<Vec<_>>()
            .join(":");
        let mut args = std::env::args_os();
        let argv0 = args.next().unwrap_or_else(|| exe.clone().into_os_string());
        // Returns only when it failed; then we simply run untuned.
        let _ = std::process::Command::new(&exe)
            .arg0(argv0)
            .args(args)
            .env("GLIBC_TUNABLES", tunables)
            .exec();
    }
}

use crate::server::budget::Budget;

/// Growth of the resident size that makes an idle server trim.
const GROWTH: usize = 4 * 1024 * 1024;

/// How often an idle server above its lowest resident size (by [`GROWTH`]) trims again.
const RETRY: Duration = Duration::from_secs(15);

/// Returns free heap memory to the system (glibc); elsewhere a no-op.
#[allow(unsafe_code)] // malloc_trim: libc has no safe wrapper.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; it takes the arena locks
    // itself and has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The process's resident size in bytes (Linux), `None` elsewhere.
#[allow(unsafe_code)] // sysconf: libc has no safe wrapper.
pub fn resident_bytes() -> Option<usize> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: usize = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * usize::try_from(page).ok().filter(|p| *p > 0)?)
}

/// Runs until aborted.
pub async fn after_bursts(budget: Arc<Budget>) {
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut base = resident_bytes().unwrap_or(0);
    let mut floor = base;
    let mut last = tokio::time::Instant::now();
    loop {
        tick.tick().await;
        let Some(now) = resident_bytes() else {
            return;
        };
        base = base.min(now);
        floor = floor.min(now);
        let grew = now >= base + GROWTH;
        let stale = now >= floor + GROWTH && last.elapsed() >= RETRY;
        if budget.in_use() > 0 || !(grew || stale) {
            continue;
        }
        let _ = tokio::task::spawn_blocking(release_free_memory).await;
        let after = resident_bytes().unwrap_or(now);
        tracing::debug!(before = now, after, "free memory returned to the system");
        base = after;
        last = tokio::time::Instant::now();
    }
}
