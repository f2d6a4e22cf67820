//! The values of settings that are more than a number: [`RateSetting`], a stored rate or
//! `off`, and [`Cleared`], the groups of fields `weir limits clear` removes.

use crate::limiter::Rate;

/// A stored rate: a cap, or `off` to lift the consumers' own cap.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RateSetting {
    /// No cap, whatever the consumer was started with.
    Off,
    /// This cap.
    Limit(Rate),
}

impl RateSetting {
    /// This setting with `burst` (a cap gets it; `off` stays off).
    pub fn with_burst(self, burst: u32) -> Self {
        match self {
            RateSetting::Off => RateSetting::Off,
            RateSetting::Limit(r) => RateSetting::Limit(r.with_burst(burst)),
        }
    }
}

impl std::str::FromStr for RateSetting {
    type Err = crate::limiter::LimiterError;

    /// `off`, or a rate as [`Rate`] parses it (`500/s`, `30/m`).
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        if s.trim() == "off" {
            Ok(RateSetting::Off)
        } else {
            s.parse().map(RateSetting::Limit)
        }
    }
}

/// A group of settings `weir limits clear` can remove alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cleared {
    /// The lowest concurrency limit of adaptive consumers.
    MinConcurrency,
    /// The highest concurrency limit of adaptive consumers.
    MaxConcurrency,
    /// The p95 target of adaptive consumers.
    TargetP95,
    /// The overload-rate threshold of adaptive consumers.
    ErrorThreshold,
    /// The HTTP statuses that mean overload.
    OverloadStatus,
    /// The per-consumer rate (or `off`) and its burst.
    Rate,
    /// The dead-letter cap (back to [`DEFAULT_DEAD_CAP`](super::DEFAULT_DEAD_CAP)).
    DeadCap,
    /// The global rate and its burst.
    GlobalRate,
    /// The global concurrency.
    GlobalConcurrency,
    /// Every per-key limit: the defaults and every key's own.
    PerKey,
    /// The per-key default rate and its burst (the keys' own limits stay).
    PerKeyRate,
    /// The per-key default concurrency (the keys' own limits stay).
    PerKeyConcurrency,
    /// Keeping completed jobs (its age and count): the jobs kept go, a bounded step each
    /// second.
    KeepCompleted,
    /// The runs a job's history keeps (back to the default).
    HistoryRuns,
}

impl Cleared {
    /// The hash fields of the group (for [`Cleared::PerKey`], the defaults: the keys' own
    /// are found in the hash).
    pub fn fields(self) -> &'static [&'static str] {
        match self {
            Cleared::MinConcurrency => &["min_concurrency"],
            Cleared::MaxConcurrency => &["max_concurrency"],
            Cleared::TargetP95 => &["target_p95"],
            Cleared::ErrorThreshold => &["error_threshold"],
            Cleared::OverloadStatus => &["overload_status"],
            Cleared::Rate => &["rate", "burst"],
            Cleared::DeadCap => &["dead_cap"],
            Cleared::GlobalRate => &["global_rate", "global_burst"],
            Cleared::GlobalConcurrency => &["global_concurrency"],
            Cleared::PerKey => &["key_rate", "key_burst", "key_concurrency", "key_overrides"],
            Cleared::PerKeyRate => &["key_rate", "key_burst"],
            Cleared::PerKeyConcurrency => &["key_concurrency"],
            Cleared::KeepCompleted => &["keep_completed_ms", "keep_completed_count"],
            Cleared::HistoryRuns => &["history_runs"],
        }
    }
}
