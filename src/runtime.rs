//! The tokio runtime the `weir` binary and the load-test harness run on, and how many
//! worker threads it gets by default.
//!
//! A consumer's work per job is short (decode, hand-off, outcome) and passes from task to
//! task: fetcher, pool, acker, the connections' drivers. With a worker thread per core,
//! each hand-off between threads wakes a sleeping thread, and on a machine whose cores
//! also run Redis every such wake-up competes with Redis for a core. Leaving one core to
//! a Redis on the same machine measured, on 2 cores (`weir-loadtest steady --compare-bare`
//! at 170,000 jobs/s, four alternating runs): client CPU per job 3.1 µs against 3.8 µs,
//! p99 end to end 4.2-6.9 ms against 4.4-12.7 ms; `weir work --drain` of 200,000 jobs
//! 300,000-309,000 jobs/s against 250,000-282,000.

use std::num::NonZeroUsize;

/// Worker threads by default: every core, less one when Redis runs on this machine
/// (`redis_local`, see [`Redis::on_this_machine`](crate::Redis::on_this_machine)) and
/// there is more than one core.
pub fn worker_threads(redis_local: bool) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
    if redis_local && cores > 1 {
        cores - 1
    } else {
        cores
    }
}

/// A multi-threaded runtime with `threads` worker threads (at least one), I/O and timers on.
pub fn build(threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .enable_all()
        .build()
}

/// A runtime that runs everything on the thread that calls `block_on`: for one stream of
/// work whose every step waits on the last, like `weir enqueue` of a file, where the
/// reading and encoding and the connection's sends and replies take turns on one core
/// and leave the other to Redis: no chunk crosses between threads, and no thread wakes
/// another. Measured on 2 cores with Redis on the same machine (`bash
/// scripts/enqueue-vs-rpush.sh 1000000 7`, two sittings, this runtime and one worker
/// thread in turn, compact envelopes): 1,289,000 and 1,313,000 jobs/s against 1,142,000
/// and 1,139,000, the client's CPU per job 0.73 µs against 0.80 and 0.85.
pub fn build_single() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_core_is_left_to_a_redis_on_this_machine() {
        let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
        assert_eq!(worker_threads(false), cores);
        assert_eq!(worker_threads(true), if cores > 1 { cores - 1 } else { 1 });
        let rt = build(0).unwrap();
        assert_eq!(rt.metrics().num_workers(), 1);
        assert_eq!(build(3).unwrap().metrics().num_workers(), 3);
        drop(rt);
    }
}
