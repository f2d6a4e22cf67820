//! [`AckerConfig`]: the acker's settings and their ranges.

use super::check;
use crate::error::Result;
use std::time::Duration;

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
