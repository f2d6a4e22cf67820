//! The p95 target the AIMD rule defends: absolute, or relative to the no-load latency.

use super::error::{LimiterError, check};
use std::time::Duration;

/// The p95 latency the rule defends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target {
    /// A fixed p95, e.g. 200 ms (CLI `--target-p95 200ms`).
    Absolute(Duration),
    /// A multiple of the no-load p95, estimated as the lowest window p95 of the last
    /// `baseline_windows` windows (CLI `--target-p95 1.5x`), for users who do not know
    /// their downstream. The default.
    ///
    /// Why p95 and not p50 as the baseline: a target of f × no-load p50 is under the
    /// downstream's own p95 whenever its spread p95/p50 exceeds f, and then the limit
    /// sinks to `min` (in the heavy-jitter simulation, p95/p50 ≈ 2.3, "2 × p50" held the
    /// limit at 1 and throughput at 0). Why 1.5: against a downstream past its knee
    /// (latency ∝ concurrency), 1.5 × p95 lets the limit overshoot the knee by about half,
    /// which kept every knee scenario at ≥ 99 % of the ideal throughput without errors;
    /// 2 × let it reach twice the knee, where the simulated downstream starts failing
    /// (17–19 % errors at knees 10 and 300).
    Relative(f64),
}

impl std::str::FromStr for Target {
    type Err = LimiterError;

    /// `200ms`, `1.5s` (absolute) or `1.5x` (relative).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let bad = || LimiterError::Parse {
            what: "p95 target",
            value: s.to_owned(),
            hint: "write a duration like 200ms, or a multiple of the no-load p95 like 1.5x",
        };
        if let Some(f) = s.strip_suffix(['x', 'X']) {
            return f.trim().parse::<f64>().map(Target::Relative).map_err(|_| bad());
        }
        humantime::parse_duration(s)
            .map(Target::Absolute)
            .map_err(|_| bad())
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Absolute(d) => write!(f, "{}", humantime::format_duration(*d)),
            Target::Relative(x) => write!(f, "{x}x"),
        }
    }
}

impl Target {
    /// Checks the range, with a message that names it.
    pub fn validate(&self) -> Result<(), LimiterError> {
        match *self {
            Target::Absolute(d) => check(
                d >= Duration::from_micros(1),
                "target p95",
                "at least 1us",
                humantime::format_duration(d),
            ),
            Target::Relative(x) => check(
                (1.0..=100.0).contains(&x),
                "relative target p95",
                "between 1x and 100x",
                x,
            ),
        }
    }
}
