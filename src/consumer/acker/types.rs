//! What the acker is told (a wave of starts from the pool, an outcome from the pool or
//! the fetcher), its settings, and its totals for the consumer's report.

use crate::consumer::config::check;
use crate::error::Result;
use crate::metrics::DeferReason;
use crate::queue::retry::DeferralBudget;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// What the acker is told.
#[derive(Debug)]
pub(crate) enum AckerMsg {
    /// The pool started these jobs (one message per dispatch wave).
    Started(Vec<u64>),
    /// A job is finished.
    Done(Done),
    /// Jobs are finished (the ones of a dispatch wave that finished in place).
    Dones(Vec<Done>),
}

/// A finished job.
#[derive(Debug)]
pub(crate) struct Done {
    pub id: String,
    /// Its lease in the lease table ([`Job::lease`](crate::Job)).
    pub lease: u64,
    pub outcome: Outcome,
}

/// How a job finished.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    Ack,
    /// `spent`: this was the job's last attempt, so the settle script dead-letters it
    /// (the same test the script makes); it is counted as dead, not retried.
    /// `max`: the runs a retry rule allows, in place of the envelope's count.
    Retry {
        delay_ms: u64,
        error: String,
        spent: bool,
        max: Option<u32>,
    },
    /// Put back after `delay_ms` without charging an attempt; dead (`reason` in the
    /// dead-letter reason) once the job's deferrals are over `budget`. `cause` labels the
    /// deferral metric.
    Defer {
        delay_ms: u64,
        reason: String,
        budget: DeferralBudget,
        cause: DeferReason,
    },
    Dead {
        reason: String,
    },
}

/// Acker settings. (The dead-letter cap is the queue's setting, which the scripts read.)
#[derive(Debug, Clone)]
pub struct AckerConfig {
    /// Flush once this many outcomes wait, 1..=10000 (default 1000).
    pub flush_max: usize,
    /// While the queue holds a backlog, flush at the latest this long after the first
    /// outcome waits, any duration (default 2 ms); near an empty queue outcomes are
    /// written at once (those that come while a flush is written make the next one).
    pub linger: Duration,
    /// How long the final flush may keep retrying at shutdown, any duration (default 10 s).
    pub final_flush_timeout: Duration,
}

impl AckerConfig {
    /// Capacity of the channel of outcomes: two flushes' worth, so one can gather while
    /// the other is written. When it is full, finished jobs wait (holding their slots).
    pub fn channel_capacity(&self) -> usize {
        2 * self.flush_max.max(1)
    }
}

impl AckerConfig {
    /// Default of [`AckerConfig::flush_max`].
    pub const DEFAULT_FLUSH_MAX: usize = 1000;
    /// Default of [`AckerConfig::linger`].
    pub const DEFAULT_LINGER: Duration = Duration::from_millis(2);
    /// Default of [`AckerConfig::final_flush_timeout`].
    pub const DEFAULT_FINAL_FLUSH_TIMEOUT: Duration = Duration::from_secs(10);

    /// Checks every value against its range, with a message that names it.
    pub fn validate(&self) -> Result<()> {
        check(
            (1..=10_000).contains(&self.flush_max),
            "ack flush size",
            "must be between 1 and 10000",
        )
    }
}

impl Default for AckerConfig {
    fn default() -> Self {
        Self {
            flush_max: Self::DEFAULT_FLUSH_MAX,
            linger: Self::DEFAULT_LINGER,
            final_flush_timeout: Self::DEFAULT_FINAL_FLUSH_TIMEOUT,
        }
    }
}

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
