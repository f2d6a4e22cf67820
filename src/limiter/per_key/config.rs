//! [`KeyLimiterConfig`]: the per-key limiters' settings and their ranges.

use super::super::error::{LimiterError, check};
use super::super::{AimdConfig, WindowConfig};
use std::time::Duration;

/// Settings of the per-key limiters.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct KeyLimiterConfig {
    /// The rule, per key (its bounds are each key's share bounds).
    pub aimd: AimdConfig,
    /// The measuring window, per key (default: 20 samples, 250 ms to 5 s: a key runs fewer
    /// jobs than the whole consumer, so its windows ask for fewer samples, and a slow key
    /// is to back off within a couple of seconds, a step per window).
    pub window: WindowConfig,
    /// Where a new key's share starts, clamped into the rule's bounds (default 64).
    pub initial: usize,
    /// Keys kept at most, 1..=1000000 (default 4096); past it the least recently seen are
    /// forgotten.
    pub max_keys: usize,
    /// A key not seen for this long is forgotten (its rule's state with it), 1 s..=1 h
    /// (default 60 s).
    pub idle: Duration,
}

impl KeyLimiterConfig {
    /// Default of [`KeyLimiterConfig::max_keys`].
    pub const DEFAULT_MAX_KEYS: usize = 4096;
    /// Default of [`KeyLimiterConfig::idle`].
    pub const DEFAULT_IDLE: Duration = Duration::from_secs(60);

    /// The rule `aimd` per key, the other settings at their defaults.
    pub fn new(aimd: AimdConfig) -> Self {
        Self {
            aimd,
            ..Self::default()
        }
    }

    /// Checks every value against its range, with a message that names it.
    pub fn validate(&self) -> Result<(), LimiterError> {
        self.aimd.validate()?;
        self.window.validate()?;
        check(
            (1..=1_000_000).contains(&self.max_keys),
            "per-key limiter keys kept",
            "between 1 and 1000000",
            self.max_keys,
        )?;
        check(
            (Duration::from_secs(1)..=Duration::from_secs(3600)).contains(&self.idle),
            "per-key limiter idle time",
            "between 1s and 1h",
            humantime::format_duration(self.idle),
        )
    }
}

impl Default for KeyLimiterConfig {
    fn default() -> Self {
        Self {
            aimd: AimdConfig::default(),
            window: WindowConfig {
                min_samples: 20,
                min_duration: Duration::from_millis(250),
                max_duration: Duration::from_secs(5),
                ..WindowConfig::default()
            },
            initial: 64,
            max_keys: Self::DEFAULT_MAX_KEYS,
            idle: Self::DEFAULT_IDLE,
        }
    }
}
