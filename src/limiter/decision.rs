//! What the rule reads and what it answers: one window's [`Summary`] in, a [`Decision`]
//! with its [`Reason`] out. Kept apart from the arithmetic so log lines, metrics and
//! `weir limits get` all name a decision the same way.

use std::time::Duration;

/// What one window saw: the rule's only input.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Summary {
    /// Jobs that succeeded (their latencies give p50 and p95).
    pub successes: usize,
    /// Jobs whose failure says the downstream is overloaded (429/503 or another status
    /// the operator named, timeouts, refused or reset connections, backpressure).
    pub overloads: usize,
    /// Jobs that failed on their own (a plain 500, a 4xx, a handler error): counted, but
    /// not congestion.
    pub failures: usize,
    /// Median latency of successes (zero without successes).
    pub p50: Duration,
    /// 95th percentile latency of successes (zero without successes).
    pub p95: Duration,
    /// Most jobs running at once during the window.
    pub peak_in_flight: usize,
}

impl Summary {
    /// Samples the window counted.
    pub fn samples(&self) -> usize {
        self.successes + self.overloads + self.failures
    }

    /// Overload answers over samples (0 without samples).
    pub fn overload_rate(&self) -> f64 {
        self.rate(self.overloads)
    }

    /// Job failures over samples (0 without samples).
    pub fn failure_rate(&self) -> f64 {
        self.rate(self.failures)
    }

    fn rate(&self, n: usize) -> f64 {
        match self.samples() {
            0 => 0.0,
            all => n as f64 / all as f64,
        }
    }
}

/// Why the rule moved (or kept) the limit, with the figures that drove it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reason {
    /// p95 over the target: multiplicative decrease.
    Latency {
        /// The window's p95.
        p95: Duration,
        /// The target it exceeded.
        target: Duration,
    },
    /// Overload answers over the threshold: multiplicative decrease.
    Overload {
        /// The window's overload rate.
        rate: f64,
    },
    /// No sign of congestion yet (or far under the limit congestion was last seen at):
    /// multiplicative increase.
    SlowStart,
    /// Healthy and binding: additive increase.
    Probe,
    /// Healthy and binding with the p95 well under the target: multiplicative increase
    /// by the headroom (`0.95 × target / p95`, at most ×2), as latency past a knee grows
    /// in proportion to the load. How a limit finds capacity that came back.
    Headroom {
        /// The window's p95.
        p95: Duration,
        /// The target.
        target: Duration,
    },
    /// Over the latency target, but the limit has not risen for this many windows: one
    /// step up anyway, so no reading (a target set too low, a lucky baseline) can hold
    /// the limit down for good.
    Recheck {
        /// Windows since the last increase.
        windows: usize,
    },
    /// Healthy but the limit was not reached: no evidence more would help.
    NotBinding,
    /// Relative target only: one window at half the limit to re-measure the no-load
    /// latency; the next window restores the limit.
    Baseline,
}

/// The reason names, in [`Reason::index`] order: the `decision` label of the
/// limiter's decision counter and the `reason` of log lines and `weir limits get`.
pub const REASONS: [&str; 8] = crate::metrics::DECISION_KINDS;

impl Reason {
    /// Position in [`REASONS`].
    pub fn index(&self) -> usize {
        match self {
            Reason::Latency { .. } => 0,
            Reason::Overload { .. } => 1,
            Reason::SlowStart => 2,
            Reason::Probe => 3,
            Reason::Recheck { .. } => 4,
            Reason::NotBinding => 5,
            Reason::Baseline => 6,
            Reason::Headroom { .. } => 7,
        }
    }

    /// The short name (see [`REASONS`]).
    pub fn name(&self) -> &'static str {
        REASONS[self.index()]
    }
}

/// In log lines: `latency: p95 120ms over the 100ms target`, `overload: 12.0% of answers`,
/// `slow_start`, `probe`, `recheck: 30 windows without an increase`, `not_binding`,
/// `baseline`, `headroom: p95 21ms under the 30ms target`.
impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |d: &Duration| humantime::format_duration(Duration::from_millis(d.as_millis() as u64));
        f.write_str(self.name())?;
        match self {
            Reason::Latency { p95, target } => write!(f, ": p95 {} over the {} target", ms(p95), ms(target)),
            Reason::Overload { rate } => write!(f, ": {:.1}% of answers", rate * 100.0),
            Reason::Recheck { windows } => write!(f, ": {windows} windows without an increase"),
            Reason::Headroom { p95, target } => {
                write!(f, ": p95 {} under the {} target", ms(p95), ms(target))
            }
            _ => Ok(()),
        }
    }
}

/// One decision: `from == to` when the limit holds (or is at a bound).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    /// Limit before.
    pub from: usize,
    /// Limit after.
    pub to: usize,
    /// Why.
    pub reason: Reason,
}
