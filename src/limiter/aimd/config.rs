//! The AIMD rule's settings ([`AimdConfig`]): each with its range and default, checked
//! once by [`AimdConfig::validate`]; the rule itself is `aimd.rs`.

use super::Target;
use crate::limiter::error::{LimiterError, check};
use crate::limiter::signal::Signal;

/// Settings of the rule. Ranges are checked by [`AimdConfig::validate`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct AimdConfig {
    /// Lowest limit, 1..=100000 (default 1).
    pub min: usize,
    /// Highest limit, min..=100000 (default 1000).
    pub max: usize,
    /// Additive step per binding window, 1..=max (default 1, as in TCP and Vector).
    pub alpha: usize,
    /// Decrease factor on latency over target, 0.1..=0.99 (default 0.75). Chosen by
    /// simulation (`cargo run --example limiter_sim -- --beta B`; knees 10/50/300 at a
    /// 75 ms target, throughput as a share of the ideal over the converged half):
    ///
    /// | β    | throughput | p95 / target | limit cv | latency-only halving: to new knee ±20 % |
    /// |------|------------|--------------|----------|------------------------------------------|
    /// | 0.5  | 0.82–0.86  | 0.92–0.95    | 0.24     | 2.1 s |
    /// | 0.6  | 0.89–0.93  | 0.93–0.97    | 0.19     | 1.1 s |
    /// | 0.75 | 0.98–0.99  | 0.95–0.97    | 0.11–0.13| 3.1 s |
    /// | 0.9  | 0.99–1.00  | 0.96–0.99    | 0.04–0.07| 8.1 s |
    ///
    /// Deep cuts land the trough under the knee and lose throughput (0.5 and 0.6 miss the
    /// 90 % bar); 0.9 keeps p95 within a few percent of the target with the limit ~20 %
    /// over the knee (more work queued at the downstream) and needs 6–7 windows to absorb
    /// a halving of capacity. 0.75 is the fastest back-off that keeps ≥ 98 % throughput.
    pub beta: f64,
    /// Decrease factor on overload over threshold, 0.1..=0.99 (default 0.5). Overload
    /// answers, timeouts and refused connections are loss, not delay: the downstream is already refusing work,
    /// so halve at once as TCP does on loss. (With β = 0.75 for errors too, two windows
    /// would only reach 0.56 of the limit; the error-burst scenario asks for ≤ 0.5.)
    pub error_beta: f64,
    /// Largest additive step as a fraction of the limit, 0..=1 (default 0.125); the step
    /// doubles per consecutive increase up to it. 0 disables the acceleration (and slow
    /// start). In the simulations classic +1 reached only 108 of a 300 knee and 113 of a
    /// 1000 max in 60 s, and took 24 s (vs 5 s) to climb back after capacity recovered.
    pub growth_cap: f64,
    /// The p95 latency to hold (default 1.5×, i.e. 1.5 × the no-load p95; see [`Target`]).
    pub target: Target,
    /// Overload rate (overload answers over all samples) above which the limit
    /// decreases, 0..=1 (default 0.05).
    pub error_threshold: f64,
    /// HTTP statuses that mean "overloaded" (default 429 and 503, the statuses defined
    /// for it; add 502 and 504 when a gateway in front of the downstream answers them
    /// under load), each 100..=599. Any other status is the job's failure: retried or
    /// dead-lettered, counted, but it does not shrink the limit. A plain 500 is one
    /// broken request, not congestion: counting it as overload dropped the limit from
    /// 64 to 1 and the call rate to 0.05× against a service with 15 % 500s.
    pub overload_status: Vec<u16>,
    /// Windows in a row over the latency target after which the limit steps up by α
    /// anyway, 1..=100000 (default 30, about half a minute): a real overload cuts the
    /// limit back in the next window, while a target the downstream can never meet (set
    /// too low, or from a lucky reading) no longer holds the limit at its floor forever.
    pub recheck_windows: usize,
    /// The limit was binding if peak in-flight reached this fraction of it, 0.1..=1
    /// (default 0.9: a burst that nearly fills the pool counts, a pool half idle does not).
    pub binding: f64,
    /// How many windows the no-load latency estimate remembers, 1..=100000 (default 300,
    /// about five minutes of one-second windows): long enough to keep a no-load reading
    /// through sustained load, short enough to follow a downstream whose latency changes.
    pub baseline_windows: usize,
}

impl Default for AimdConfig {
    fn default() -> Self {
        Self {
            min: 1,
            max: 1000,
            alpha: 1,
            beta: 0.75,
            error_beta: 0.5,
            growth_cap: 0.125,
            target: Target::Relative(1.5),
            error_threshold: 0.05,
            binding: 0.9,
            baseline_windows: 300,
            overload_status: vec![429, 503],
            recheck_windows: 30,
        }
    }
}

impl AimdConfig {
    /// Checks every value against its range, with a message that names it.
    pub fn validate(&self) -> Result<(), LimiterError> {
        let counts = [
            (self.min, 1, 100_000, "min concurrency", "between 1 and 100000"),
            (
                self.max,
                self.min,
                100_000,
                "max concurrency",
                "between min concurrency and 100000",
            ),
            (self.alpha, 1, self.max, "alpha", "between 1 and max concurrency"),
            (
                self.baseline_windows,
                1,
                100_000,
                "baseline windows",
                "between 1 and 100000",
            ),
            (
                self.recheck_windows,
                1,
                100_000,
                "recheck windows",
                "between 1 and 100000",
            ),
        ];
        for (v, lo, hi, name, range) in counts {
            check((lo..=hi).contains(&v), name, range, v)?;
        }
        let fractions = [
            (self.beta, 0.1, 0.99, "beta", "between 0.1 and 0.99"),
            (self.error_beta, 0.1, 0.99, "error beta", "between 0.1 and 0.99"),
            (self.growth_cap, 0.0, 1.0, "growth cap", "between 0 and 1"),
            (
                self.error_threshold,
                0.0,
                1.0,
                "error threshold",
                "between 0 and 1",
            ),
            (self.binding, 0.1, 1.0, "binding fraction", "between 0.1 and 1"),
        ];
        for (v, lo, hi, name, range) in fractions {
            check((lo..=hi).contains(&v), name, range, v)?;
        }
        for &st in &self.overload_status {
            crate::limiter::status::check_status(st)?;
        }
        self.target.validate()
    }

    /// Resolves a [`Signal::Status`]: overload if the status is in `overload_status`,
    /// else the job's failure. Other signals pass through.
    pub fn classify(&self, signal: Signal) -> Signal {
        match signal {
            Signal::Status(st) if self.overload_status.contains(&st) => Signal::Overload,
            Signal::Status(_) => Signal::Failure,
            other => other,
        }
    }
}

#[cfg(test)]
mod tests;
