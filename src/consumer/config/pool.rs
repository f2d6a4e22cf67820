//! [`PoolConfig`]: the pool's settings and their ranges.

use super::check;
use crate::error::Result;
use crate::queue::retry_policy::{DeferralBudget, RetryPolicy};
use std::time::Duration;

/// The shortest `job_timeout` accepted. Under it the timer measures the scheduler rather
/// than the handler: a job may be abandoned before its handler was even polled (0 s
/// abandons every job, and they end dead-lettered without having run). Tokio's timer
/// ticks in milliseconds, and a busy runtime delays a task's first poll by a few; 10 ms
/// leaves room for both while staying below any timeout a real handler would want.
pub const MIN_JOB_TIMEOUT: Duration = Duration::from_millis(10);

/// Pool settings. (How many jobs run at once is the consumer's `concurrency` and
/// `limiter`: the limit is shared with the fetcher's prefetch.)
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PoolConfig {
    /// A job running longer is abandoned and retried (default none; at least
    /// [`MIN_JOB_TIMEOUT`], 10 ms).
    pub job_timeout: Option<Duration>,
    /// Backoff of retryable failures, any values (the jitter is clamped into 0..=1 where
    /// it is used; default [`RetryPolicy::default`]). A deferral without a `Retry-After`
    /// waits the backoff of a first failure.
    pub retry: RetryPolicy,
    /// How often, or for how long, a job may be deferred before it is dead-lettered:
    /// for backpressure (HTTP 429/503, [`JobError::backpressure`]), or because its lease
    /// expired before its run started (a killed consumer's buffer, a lost fetch reply;
    /// counted by the reclaimer). Deferrals charge no attempt (default 1,000 deferrals or
    /// 24 h, whichever comes first).
    ///
    /// [`JobError::backpressure`]: crate::JobError::backpressure
    pub deferral_budget: DeferralBudget,
    /// Longest wait of one deferral: a `Retry-After` beyond it is cut to it, any duration
    /// (default 5 min).
    pub max_defer_delay: Duration,
    /// How long a job this consumer cannot take (a kind it has no handler for, an envelope
    /// over its size limit) is deferred, uncharged, for a consumer that can (a rolling
    /// deploy), before it is dead-lettered with the reason; at least 1 ms (default 1 h).
    /// It comes back every tenth of this, at most every 10 s.
    pub unknown_kind_grace: Duration,
}

impl PoolConfig {
    /// Default of [`PoolConfig::max_defer_delay`].
    pub const DEFAULT_MAX_DEFER_DELAY: Duration = Duration::from_secs(300);
    /// Default of [`PoolConfig::unknown_kind_grace`].
    pub const DEFAULT_UNKNOWN_KIND_GRACE: Duration = Duration::from_secs(3600);

    /// Checks every value against its range, with a message that names it.
    pub fn validate(&self) -> Result<()> {
        check(
            self.job_timeout.is_none_or(|t| t >= MIN_JOB_TIMEOUT),
            "job timeout",
            "must be at least 10ms",
        )?;
        check(
            self.unknown_kind_grace >= Duration::from_millis(1),
            "unknown-kind grace",
            "must be at least 1ms",
        )
    }
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self {
            job_timeout: None,
            retry: RetryPolicy::default(),
            deferral_budget: DeferralBudget::default(),
            max_defer_delay: Self::DEFAULT_MAX_DEFER_DELAY,
            unknown_kind_grace: Self::DEFAULT_UNKNOWN_KIND_GRACE,
        }
    }
}
