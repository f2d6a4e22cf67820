//! The no-load latency estimate behind a relative target (`--target-p95 1.5x`).
//!
//! Two readings, and the estimate is the larger:
//! - the lowest window p95 of the last `baseline_windows` windows: quick to catch a
//!   downstream that got faster, and it ages out, so it follows a slower one;
//! - a slow-moving average of the p95 of windows known to be uncongested by us: windows
//!   at the limit's floor (nothing lower to try). The lowest of hundreds of noisy window p95s sits well under the
//!   downstream's true p95 (with lognormal jitter σ = 0.5 and 50 samples a window, about
//!   0.65 × it), so the minimum alone can put the target under what the service shows
//!   at no load, and then every window is "over target" and the limit sinks to its
//!   floor and stays (issue 35: 20 ms measured, 56 ms shown at limit 1). The average
//!   keeps the target at or above what the service showed when we could not have been
//!   the cause.

use std::collections::VecDeque;
use std::time::Duration;

/// Weight of a new uncongested reading in the average: 1/4, so one lucky or unlucky
/// window moves it a quarter of the way and three windows at the floor most of the way
/// (a trapped limit is freed within a few windows).
const GAIN: f64 = 0.25;

/// The estimate's state.
#[derive(Debug, Clone, Default)]
pub(crate) struct Baseline {
    /// Recent windows' p95, newest last.
    recent: VecDeque<Duration>,
    /// Their p50, in the same order.
    recent_p50: VecDeque<Duration>,
    /// Moving average of uncongested windows' p95.
    uncongested: Option<Duration>,
}

impl Baseline {
    /// Adds one window's p50 and p95, remembering at most `windows` of them.
    pub(crate) fn push(&mut self, p50: Duration, p95: Duration, windows: usize) {
        while self.recent.len() >= windows.max(1) {
            self.recent.pop_front();
            self.recent_p50.pop_front();
        }
        self.recent.push_back(p95);
        self.recent_p50.push_back(p50);
    }

    /// The lowest recent window p50: the no-load median, against which a queue at the
    /// downstream shows (the median of a window varies far less than its p95).
    pub(crate) fn low_p50(&self) -> Option<Duration> {
        self.recent_p50.iter().min().copied()
    }

    /// Adds the p95 of a window the limiter could not have congested.
    pub(crate) fn uncongested(&mut self, p95: Duration) {
        self.uncongested = Some(match self.uncongested {
            None => p95,
            Some(u) => u.mul_f64(1.0 - GAIN) + p95.mul_f64(GAIN),
        });
    }

    /// The no-load p95 estimate (`None` before any reading).
    pub(crate) fn estimate(&self) -> Option<Duration> {
        let low = self.recent.iter().min().copied();
        low.max(self.uncongested)
    }
}
