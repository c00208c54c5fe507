//! The tokio runtime a service serves on, and how many threads it has.

/// Help of the services' `--worker-threads` option, the same in each.
pub const WORKER_THREADS_HELP: &str = "Threads that serve requests (tokio's workers). One by default: \
a replica is sized in tenths of a core and scaled out by its HPA, and one thread spends about a \
fifth less CPU per review than one per core, which wake each other for every request \
(`cargo xtask footprint`; README, Sizing). More for a replica given whole cores; 0 for one per \
available core.";

/// The multi-threaded runtime a service serves on, with `worker_threads` workers (0: one per
/// available core). Multi-threaded even with one worker: a rule that waits lends its thread
/// (`block_in_place`), which a current-thread runtime cannot do.
pub fn build(worker_threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    if worker_threads > 0 {
        b.worker_threads(worker_threads);
    }
    b.enable_all().build()
}
