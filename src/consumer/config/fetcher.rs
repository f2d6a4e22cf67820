//! [`FetcherConfig`]: the fetcher's settings and their ranges.

use super::check;
use crate::error::Result;
use crate::queue::envelope;

/// Fetcher settings. (The lease length is the consumer's: [`crate::ConsumerConfig::lease`].)
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct FetcherConfig {
    /// Most jobs per fetch call, 1..=10000 (default 500).
    pub batch: usize,
    /// Fetch calls in flight at once, 1..=16 (default 2).
    pub pipeline: usize,
    /// Jobs held fetched but un-started beyond the free slots, at least (default 0). The
    /// fetcher holds what the pool runs through during a fetch's round trip at the rate
    /// jobs go (measured under a backlog: for jobs longer than a round trip, none), so a
    /// job waits in this consumer's buffer only when it would start no sooner elsewhere.
    /// A floor here holds more whatever the jobs' length, as a prefetch count does in
    /// other queues: jobs then wait behind running ones while other consumers may idle.
    pub prefetch: usize,
    /// Most envelope bytes held ahead of the free slots (default 64 MiB): the jobs fetched
    /// for a round trip's work are fewer when they are large (their size averaged over
    /// fetches). With the free slots' jobs (each at most `max_envelope_bytes`), what a
    /// consumer holds is bounded in bytes. `prefetch` is a floor over it.
    pub ahead_bytes: usize,
    /// Envelopes over this size are not run here, at least 64 bytes (default 1 MiB): they
    /// are deferred, uncharged, for a consumer with a larger limit, and dead-lettered once
    /// the pool's `unknown_kind_grace` has passed.
    pub max_envelope_bytes: usize,
    /// Lease each fetch's jobs as one batch where the queue allows it (default on; see
    /// docs/batch-leases.md): one lease entry per fetch and one per ack of the whole
    /// batch in Redis, not one per job.
    pub batch_leases: bool,
}

impl FetcherConfig {
    /// Default of [`FetcherConfig::batch`].
    pub const DEFAULT_BATCH: usize = 500;
    /// Default of [`FetcherConfig::pipeline`].
    pub const DEFAULT_PIPELINE: usize = 2;
    /// Default of [`FetcherConfig::prefetch`].
    pub const DEFAULT_PREFETCH: usize = 0;
    /// Default of [`FetcherConfig::ahead_bytes`].
    pub const DEFAULT_AHEAD_BYTES: usize = 64 << 20;
    /// Default of [`FetcherConfig::max_envelope_bytes`].
    pub const DEFAULT_MAX_ENVELOPE_BYTES: usize = envelope::DEFAULT_MAX_ENVELOPE_BYTES;

    /// Checks every value against its range, with a message that names it.
    pub fn validate(&self) -> Result<()> {
        check(
            (1..=10_000).contains(&self.batch),
            "batch",
            "must be between 1 and 10000",
        )?;
        check(
            (1..=16).contains(&self.pipeline),
            "fetch pipeline",
            "must be between 1 and 16",
        )?;
        check(
            self.prefetch <= 1_000_000,
            "prefetch",
            "must be between 0 and 1000000",
        )?;
        check(
            self.max_envelope_bytes >= 64,
            "envelope size limit",
            "must be at least 64 bytes",
        )
    }
}

impl Default for FetcherConfig {
    fn default() -> Self {
        Self {
            batch: Self::DEFAULT_BATCH,
            pipeline: Self::DEFAULT_PIPELINE,
            prefetch: Self::DEFAULT_PREFETCH,
            ahead_bytes: Self::DEFAULT_AHEAD_BYTES,
            max_envelope_bytes: Self::DEFAULT_MAX_ENVELOPE_BYTES,
            batch_leases: true,
        }
    }
}
