//! The bounded hand-off between the fetcher and the pool: a count of jobs fetched but not
//! yet started. The fetcher fetches only while it stays under its room,
//! [`Buffer::capacity`]: a job for each free slot, and under a backlog what the pool runs
//! through in a fetch round trip at the rate jobs go (the fetcher's `Pace`): that is the
//! backpressure. The jobs themselves travel on an unbounded channel; this count is what
//! bounds it.

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

    /// The un-started jobs to hold at a concurrency `limit` with `running` jobs running:
    /// one per free slot, plus `ahead` (what keeps the pool busy through a fetch's round
    /// trip). Not a multiple of the limit: long jobs held two per slot waited in one
    /// consumer's buffer while another consumer's slots stood idle (40 jobs of 6 s, two
    /// consumers of 20 slots: one took all 40, and the run took 13.3 s instead of 6 s).
    pub(crate) fn capacity(limit: usize, running: usize, ahead: usize) -> usize {
        limit.saturating_sub(running) + ahead
    }

    /// The un-started jobs a queue of a [`crate::MultiConsumer`] holds, whose slots come
    /// from a budget shared with other queues: two per slot (at least `ahead`), since its
    /// buffer is what asks the shared budget's gate for slots.
    pub(crate) fn shared_capacity(limit: usize, ahead: usize) -> usize {
        (limit * 2).max(2).max(ahead)
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
