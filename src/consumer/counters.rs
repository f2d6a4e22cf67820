//! The consumer's live counters, shared by its tasks and read through its [`Handle`]:
//! the totals of what the acker recorded ([`Tally`]) and what the consumer holds in
//! memory ([`InMemory`]).
//!
//! [`Handle`]: crate::Handle

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Totals of what the acker recorded, shared with the consumer's report.
#[derive(Debug, Default)]
pub struct Tally {
    /// Jobs acked.
    pub acked: AtomicU64,
    /// Jobs sent to retry.
    pub retried: AtomicU64,
    /// Jobs put back without charging an attempt (backpressure, a kind or size this
    /// consumer cannot take).
    pub deferred: AtomicU64,
    /// Jobs dead-lettered by this consumer.
    pub dead: AtomicU64,
    /// Outcomes refused because the lease was lost.
    pub lost_leases: AtomicU64,
    /// Un-started jobs handed back at shutdown.
    pub released: AtomicU64,
}

/// What a consumer holds in memory, now and at its peak: the leases it holds (jobs fetched
/// and not yet settled) and the outcomes waiting to be written. Both stay bounded whatever
/// the backlog in Redis: the outcome channel has a fixed capacity (twice the acker's
/// flush size), and the fetcher takes no new leases past a cap (a full buffer, the running
/// jobs and two flushes of outcomes), so when Redis is slow to settle, fetching slows.
#[derive(Debug, Default)]
pub struct InMemory {
    held: AtomicUsize,
    held_peak: AtomicUsize,
    outcomes: AtomicUsize,
    outcomes_peak: AtomicUsize,
}

impl InMemory {
    /// Leases held now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// The most leases held at once so far.
    pub fn held_peak(&self) -> usize {
        self.held_peak.load(Ordering::Relaxed)
    }

    /// Outcomes (and start reports) waiting for the acker: queued in its channel or
    /// gathered for its next write.
    pub fn outcomes(&self) -> usize {
        self.outcomes.load(Ordering::Relaxed)
    }

    /// The most outcomes waiting at once so far.
    pub fn outcomes_peak(&self) -> usize {
        self.outcomes_peak.load(Ordering::Relaxed)
    }

    pub(crate) fn set_held(&self, n: usize) {
        self.held.store(n, Ordering::Relaxed);
        self.held_peak.fetch_max(n, Ordering::Relaxed);
    }

    pub(crate) fn set_outcomes(&self, n: usize) {
        self.outcomes.store(n, Ordering::Relaxed);
        self.outcomes_peak.fetch_max(n, Ordering::Relaxed);
    }
}
