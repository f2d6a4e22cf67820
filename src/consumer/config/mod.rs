//! The consumer's configuration: one struct per component, each setting in one place.
//! A value two components need (the lease length: the fetcher takes leases, the heartbeat
//! extends them) lives here, at the top, and is passed down to them. What binds the whole
//! fleet of a queue (the dead-letter cap) is not here: it is the queue's setting in Redis
//! (`weir limits set --dead-cap`), read by the scripts.
//!
//! Every default is written once, as a constant next to its field; the CLI shows and uses
//! the same constants. Each component's settings have a file here (`acker.rs`,
//! `fetcher.rs`, `pool.rs`, `reclaimer.rs`), all checked with the one [`check`]: the
//! components import their settings from here, and this module imports none of them.

mod acker;
mod fetcher;
mod pool;
mod reclaimer;

pub use acker::AckerConfig;
pub use fetcher::FetcherConfig;
pub use pool::{MIN_JOB_TIMEOUT, PoolConfig};
pub use reclaimer::ReclaimerConfig;

use crate::error::{Error, Result};
use crate::limiter::{KeyLimiterConfig, LimiterConfig, Rate};
use crate::queue::keys::QueueKeys;
use crate::queue::samples::SamplesConfig;
use std::time::Duration;

/// Everything a consumer needs to know; each part has documented ranges and defaults,
/// checked by [`ConsumerConfig::validate`].
///
/// Start from [`ConsumerConfig::new`] (or `default()`) and assign the fields to change;
/// the struct is `#[non_exhaustive]`, so new settings can come with their defaults
/// without breaking that code. The component configs are built the same way.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ConsumerConfig {
    /// Queue name (default `default`).
    pub queue: String,
    /// Concurrency limit: jobs (or batch-handler calls) running at once, 1..=100000
    /// (default 64). With an adaptive limiter, the starting limit (clamped into its
    /// min..=max).
    pub concurrency: usize,
    /// Lease length (the visibility timeout): a job not settled by then is handed to
    /// another consumer. The heartbeat (a task of its own) extends the leases this consumer
    /// holds every third of it. At least 100 ms (default 30 s).
    pub lease: Duration,
    /// Adaptive concurrency (AIMD); none keeps the limit fixed at `concurrency` (default none).
    /// Pair it with `pool.job_timeout` (or a handler with its own timeout, as the HTTP
    /// handler has): a job that never finishes gives the limiter no signal at all.
    pub limiter: Option<LimiterConfig>,
    /// Adaptive concurrency per job key (`--adaptive-per-key`): the AIMD rule once per key,
    /// from that key's own latencies and errors, held fleet-wide by the fetch (see
    /// [`crate::limiter::per_key`]); `limiter` then learns from the jobs without a key
    /// only (default none).
    pub key_limiter: Option<KeyLimiterConfig>,
    /// Jobs/s cap with burst (GCRA), composed with the concurrency limit (default none).
    pub rate: Option<Rate>,
    /// Runtime settings (`weir limits set`, `weir retry set`): how often to read them again
    /// besides the change notices their writers publish, which running consumers apply at
    /// once; none: never watch them (default 30 s, a safety poll for a notice lost).
    pub settings_poll: Option<Duration>,
    /// Fetching.
    pub fetcher: FetcherConfig,
    /// Running jobs.
    pub pool: PoolConfig,
    /// Recording outcomes.
    pub acker: AckerConfig,
    /// Reclaiming expired leases.
    pub reclaimer: ReclaimerConfig,
    /// Sampling the queue's counters and sizes into its history in Redis (the UI's
    /// charts and every reader's rates; `queue/samples.rs`).
    pub samples: SamplesConfig,
    /// How long running jobs may take to finish at shutdown, any duration (default 30 s).
    pub shutdown_timeout: Duration,
    /// Stop by itself once nothing is ready, delayed or in flight (default false). While
    /// only delayed or in-flight jobs keep it going, it logs once what it waits for.
    pub drain: bool,
    /// With `drain`: stop once nothing is ready or in flight, leaving delayed jobs (retries
    /// not yet due, jobs enqueued for later) for a later run (default false).
    pub drain_ignore_delayed: bool,
    /// Record metrics (default true; they reach Prometheus once `metrics::install` ran).
    pub metrics: bool,
    /// Run even if Redis may evict keys (its `maxmemory-policy` is not `noeviction`),
    /// which can lose or strand jobs (default false: refuse to start).
    pub allow_eviction: bool,
}

impl ConsumerConfig {
    /// Default of [`ConsumerConfig::queue`].
    pub const DEFAULT_QUEUE: &'static str = "default";
    /// Default of [`ConsumerConfig::concurrency`].
    pub const DEFAULT_CONCURRENCY: usize = 64;
    /// Default of [`ConsumerConfig::lease`].
    pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);
    /// Default of [`ConsumerConfig::settings_poll`].
    pub const DEFAULT_SETTINGS_POLL: Duration = Duration::from_secs(30);
    /// Default of [`ConsumerConfig::shutdown_timeout`].
    pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

    /// The defaults, consuming `queue`.
    ///
    /// ```
    /// let mut config = weir::ConsumerConfig::new("emails");
    /// config.concurrency = 16;
    /// assert_eq!(config.queue, "emails");
    /// ```
    pub fn new(queue: impl Into<String>) -> Self {
        Self {
            queue: queue.into(),
            ..Self::default()
        }
    }
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        Self {
            queue: Self::DEFAULT_QUEUE.into(),
            concurrency: Self::DEFAULT_CONCURRENCY,
            lease: Self::DEFAULT_LEASE,
            limiter: None,
            key_limiter: None,
            rate: None,
            settings_poll: Some(Self::DEFAULT_SETTINGS_POLL),
            fetcher: FetcherConfig::default(),
            pool: PoolConfig::default(),
            acker: AckerConfig::default(),
            reclaimer: ReclaimerConfig::default(),
            samples: SamplesConfig::default(),
            shutdown_timeout: Self::DEFAULT_SHUTDOWN_TIMEOUT,
            drain: false,
            drain_ignore_delayed: false,
            metrics: true,
            allow_eviction: false,
        }
    }
}

impl ConsumerConfig {
    /// Checks every value against its range, with a message that names it; each
    /// component's settings are checked by their own `validate`.
    pub fn validate(&self) -> Result<()> {
        QueueKeys::new(&self.queue)?;
        check(
            (1..=100_000).contains(&self.concurrency),
            "concurrency",
            "must be between 1 and 100000",
        )?;
        check(
            self.lease >= Duration::from_millis(100),
            "visibility timeout",
            "must be at least 100ms",
        )?;
        self.fetcher.validate()?;
        self.pool.validate()?;
        self.acker.validate()?;
        self.reclaimer.validate()?;
        self.samples.validate()?;
        if let Some(l) = &self.limiter {
            l.validate()?;
        }
        if let Some(r) = &self.rate {
            r.validate()?;
        }
        if let Some(k) = &self.key_limiter {
            k.validate()?;
        }
        Ok(())
    }
}

/// `Ok` if `ok`, else a configuration error: `setting`, and `problem` (which names its
/// range).
pub(crate) fn check(ok: bool, setting: &str, problem: &str) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::config(setting, problem))
    }
}
