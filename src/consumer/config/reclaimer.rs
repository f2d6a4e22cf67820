//! [`ReclaimerConfig`]: the reclaimer's settings and their ranges.

use super::check;
use crate::error::Result;
use std::time::Duration;

/// Reclaimer settings. (The dead-letter cap is the queue's setting, which the script
/// reads.)
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ReclaimerConfig {
    /// How often to look for expired leases while the consumer sees work, at least 10 ms
    /// (default 1 s). On a quiet queue it looks when the earliest lease expires, at least
    /// every 10 s (or every `interval`, when that is longer).
    pub interval: Duration,
}

impl ReclaimerConfig {
    /// Default of [`ReclaimerConfig::interval`].
    pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);

    /// Checks every value against its range, with a message that names it.
    pub fn validate(&self) -> Result<()> {
        check(
            self.interval >= Duration::from_millis(10),
            "reclaim interval",
            "must be at least 10ms",
        )
    }
}

impl Default for ReclaimerConfig {
    fn default() -> Self {
        Self {
            interval: Self::DEFAULT_INTERVAL,
        }
    }
}
