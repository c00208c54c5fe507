//! Gives memory back to the system after a burst. glibc's malloc keeps what a burst freed in its
//! arenas: after 100 reviews of 7 MiB, or 2,000 connections opened and closed, a webhook's RSS
//! stayed at 58 to 64 MiB where it idles at 27 (debug build; `services/registry-webhook/tests/
//! hostile.rs`), and the next burst started from there towards the Deployment's limit.
//! `malloc_trim(0)` returns the free pages. Every five seconds, when no review is in flight and
//! the resident size grew by 4 MiB or more since the last trim, it is called: a steady server
//! never pays for it. Memory freed after a trim (connections closing later, the end of a burst
//! that was trimmed in a pause) does not raise the resident size, so it would never count as
//! growth: while the resident size stays 4 MiB or more above the lowest it has been, an idle
//! server also trims again every [`RETRY`] (a CI run kept 25 MiB above idle for 20 s after the
//! hostile-client bursts that way).
//!
//! A setting would not do: `M_TRIM_THRESHOLD` only trims the top of the heap, and freed chunks
//! below it stay resident.
//!
//! The same module sizes glibc's per-thread cache ([`tune_malloc`]), the cheapest cut of a
//! review's cost.

use std::sync::Arc;
use std::time::Duration;

/// The glibc tunables every service runs with: a per-thread cache of 100 freed chunks per size
/// class (glibc's default is 7) for chunks of at most 128 bytes (default 1 KiB). A review builds
/// and drops trees of thousands of small values (decoded objects, `serde_json::Value`s for the
/// typed diff); with 7 cached chunks most frees and mallocs fall through to the arena's bins and
/// `malloc_consolidate`. Under callgrind (`cargo xtask instructions`, same LTO build): the Model
/// validation 259,507 -> 240,684 instructions, its mutation 1,195,806 -> 1,152,862. Larger caches
/// cut more (500 chunks up to 1 KiB: 229,698 and 966,936) but pin what they hold, and the pages
/// under it, away from the trimming above: after the hostile test's 2,000 connections the server
/// stayed at 53.7 MiB instead of going back to 31 MiB and failed its memory bound. This setting
/// left the hostile test's figures as without it (31.6 MiB).
///
/// And a fixed mmap threshold of 1 MiB: glibc raises its threshold each time a mapped chunk is
/// freed (up to 32 MiB), so after the first 7 MiB body the next ones came from the arenas, and
/// what they left behind there was returned by the trims only in part: at the end of the hostile
/// test the server sat at 32.8 to 54.0 MiB (idle 28; 54.0 failed its bound of idle + 24 MiB in a
/// clean-clone run). Fixed, every body of a megabyte or more is mapped and unmapped whole: 32.1
/// to 33.0 MiB in three runs. Reviews of normal size (kilobytes) never reach it.
///
/// And one arena: tokio's workers are not the main thread, so glibc gave each its own
/// arena, whose heaps it shrinks and grows again as the requests come and go, and a watch's
/// buffers and the cache they fill landed in different ones. With one, in `cargo xtask
/// footprint` (5,000 Pods, two runs each side by side): scheduling-webhook 220 and 226 µs of CPU
/// per Pod instead of 236 and 264, quota-state 194 and 194 instead of 204 and 224,
/// scheduling-webhook's peak RSS 22 instead of 27 to 29 MiB, and with PB on its RSS per cached
/// Pod 1.5 KiB instead of 2.5. A service is one worker by default; given more, they share the
/// arena's lock (an operator's own `glibc.malloc.arena_max` wins).
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
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; it takes the arena locks
    // itself and has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The process's resident size in bytes (Linux), `None` elsewhere.
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
