//! What the parent sees of the consumers: every processed job (bitmap, counters,
//! latencies) and the consumers' gauges (limit, in-flight). In-process handlers write
//! here directly; child processes' reports are written here by their pipe readers.

use crate::accounting::Tracker;
use crate::histogram::Histogram;
use std::sync::atomic::{AtomicU64, Ordering};

/// Shared by every consumer of a run.
#[derive(Debug)]
pub(crate) struct Observed {
    /// `None` with `--no-track`.
    pub tracker: Option<Tracker>,
    /// Jobs processed successfully (including duplicate runs).
    pub processed: AtomicU64,
    /// Handler calls that failed (simulated downstream errors).
    pub errors: AtomicU64,
    /// Calls the simulated downstream shed (over its hard limit), in this process.
    pub shed: AtomicU64,
    /// End-to-end latency (enqueued → processed) of the whole run.
    pub total: Histogram,
    /// The same, for the current sampling window; the sampler empties it.
    pub window: Histogram,
}

impl Observed {
    /// Accounting for jobs `0..capacity` (no bitmaps when `track` is false).
    pub(crate) fn new(capacity: u64, track: bool) -> Self {
        Self {
            tracker: track.then(|| Tracker::new(capacity)),
            processed: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            shed: AtomicU64::new(0),
            total: Histogram::default(),
            window: Histogram::default(),
        }
    }

    /// One job processed `latency_us` after it was enqueued.
    pub(crate) fn record(&self, index: Option<u64>, latency_us: u64) {
        if let Some(t) = &self.tracker {
            t.mark(index);
        }
        self.processed.fetch_add(1, Ordering::Relaxed);
        self.window.record(latency_us);
    }

    /// One failed handler call.
    pub(crate) fn error(&self) {
        self.errors.fetch_add(1, Ordering::Relaxed);
    }

    /// Jobs processed so far.
    pub(crate) fn processed(&self) -> u64 {
        self.processed.load(Ordering::Relaxed)
    }
}

/// Live gauges of the consumers, summed over a fleet.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Gauges {
    /// Concurrency limit (sum over consumers).
    pub limit: u64,
    /// Jobs running, mean over the window since the last reading (sum over consumers; see
    /// `running`).
    pub in_flight: f64,
    /// The most jobs running at once in that window (sum of each consumer's peak).
    pub in_flight_max: u64,
}
