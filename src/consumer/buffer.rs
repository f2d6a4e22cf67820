//! The bounded hand-off between the fetcher and the pool: a count of jobs fetched but not
//! yet started. The fetcher fetches only while it stays under its room: at least
//! [`Buffer::capacity`], which follows the concurrency limit, and under a backlog of fast
//! jobs about 10 ms of work at the rate they go (the fetcher's `Pace`): that is the
//! backpressure. The jobs themselves travel on
//! an unbounded channel; this count is what bounds it.

use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::Notify;

/// Jobs fetched but not yet started.
#[derive(Debug, Default)]
pub(crate) struct Buffer {
    len: AtomicUsize,
    room: Notify,
}

impl Buffer {
    /// Jobs held un-started.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// The least prefetch allowed at a concurrency `limit`: two jobs per slot, so a slot
    /// that frees up finds its next job waiting while the next fetch is in flight.
    pub(crate) fn capacity(limit: usize) -> usize {
        (limit * 2).max(2)
    }

    /// The fetcher handed `n` jobs to the pool.
    pub(crate) fn add(&self, n: usize) {
        self.len.fetch_add(n, Ordering::AcqRel);
    }

    /// The pool started (or dropped) `n` jobs.
    pub(crate) fn take(&self, n: usize) {
        self.len.fetch_sub(n, Ordering::AcqRel);
        self.room.notify_one();
    }

    /// Resolves after jobs leave the buffer.
    pub(crate) async fn room(&self) {
        self.room.notified().await
    }
}
