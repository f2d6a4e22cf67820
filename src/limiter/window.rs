//! The measuring window: collects job completions and, once it has enough of them over
//! long enough, summarises them for the rule ([`super::aimd`]).
//!
//! A window closes after at least `min_samples` counted completions AND `min_duration`,
//! so p95 never comes from a handful of jobs; a trickle still gets a decision after
//! `max_duration` with whatever samples it has. Recording is per job, so it stays cheap:
//! two counters and at most one push onto a vector of microseconds. Past `max_kept`
//! latencies the window keeps every other one and then records one in two, four, …
//! (a uniform thinning over time, so percentiles stay unbiased; counts stay exact).
//! Percentiles come from `select_nth_unstable`, O(n) once per window.

use super::aimd::Summary;
use super::error::{LimiterError, check};
use super::signal::Signal;
use std::time::Duration;
use tokio::time::Instant;

/// Settings of the window. Ranges are checked by [`WindowConfig::validate`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct WindowConfig {
    /// Fewest counted completions per window, 1..=1000000 (default 50: p95 is then at
    /// least the third-largest sample).
    pub min_samples: usize,
    /// Shortest window, 1ms..=1h (default 1 s, as Netflix's windowed limit).
    pub min_duration: Duration,
    /// A window with fewer samples closes anyway after this, min_duration..=1h
    /// (default 10 s), so a slow trickle still gets decisions.
    pub max_duration: Duration,
    /// Most latencies kept per window before thinning, 100..=10000000 (default 16384).
    pub max_kept: usize,
}

impl Default for WindowConfig {
    fn default() -> Self {
        Self {
            min_samples: 50,
            min_duration: Duration::from_secs(1),
            max_duration: Duration::from_secs(10),
            max_kept: 16_384,
        }
    }
}

impl WindowConfig {
    /// Checks every value against its range, with a message that names it.
    pub fn validate(&self) -> Result<(), LimiterError> {
        let hour = Duration::from_secs(3600);
        let fmt = |d: Duration| humantime::format_duration(d).to_string();
        check(
            (1..=1_000_000).contains(&self.min_samples),
            "window min samples",
            "between 1 and 1000000",
            self.min_samples,
        )?;
        check(
            (Duration::from_millis(1)..=hour).contains(&self.min_duration),
            "window min duration",
            "between 1ms and 1h",
            fmt(self.min_duration),
        )?;
        check(
            (self.min_duration..=hour).contains(&self.max_duration),
            "window max duration",
            "between window min duration and 1h",
            fmt(self.max_duration),
        )?;
        check(
            (100..=10_000_000).contains(&self.max_kept),
            "window max kept latencies",
            "between 100 and 10000000",
            self.max_kept,
        )
    }
}

/// One window of completions.
#[derive(Debug)]
pub struct Window {
    config: WindowConfig,
    opened: Instant,
    /// Jobs started before this describe an older limit: not counted (see
    /// [`Window::discard_before`]).
    epoch: Instant,
    /// Latencies in microseconds (saturating), thinned past `max_kept`.
    latencies: Vec<u32>,
    /// Keep one latency in `stride`; `skip` counts down to the next kept one.
    stride: u32,
    skip: u32,
    successes: usize,
    overloads: usize,
    failures: usize,
    /// A shorter minimum duration for this window (see [`Window::set_quick`]).
    quick: Option<Duration>,
    /// Overload rate over which a window with `min_samples` overload answers closes at
    /// once (see [`Window::set_overload_close`]).
    overload_close: Option<f64>,
}

impl Window {
    /// An empty window opened at `now`.
    pub fn new(config: WindowConfig, now: Instant) -> Result<Self, LimiterError> {
        config.validate()?;
        Ok(Self {
            latencies: Vec::with_capacity(config.min_samples.min(config.max_kept)),
            config,
            opened: now,
            epoch: now,
            stride: 1,
            skip: 0,
            successes: 0,
            overloads: 0,
            failures: 0,
            quick: None,
            overload_close: None,
        })
    }

    /// Records a job that started at `started` and ran for `elapsed`.
    #[inline]
    pub fn record(&mut self, started: Instant, elapsed: Duration, signal: Signal) {
        if started < self.epoch {
            return;
        }
        match signal {
            Signal::Success => {
                self.successes += 1;
                if self.skip > 0 {
                    self.skip -= 1;
                    return;
                }
                self.skip = self.stride - 1;
                if self.latencies.len() >= self.config.max_kept {
                    self.thin();
                }
                self.latencies
                    .push(elapsed.as_micros().min(u32::MAX as u128) as u32);
            }
            Signal::Overload => self.overloads += 1,
            Signal::Failure | Signal::Status(_) => self.failures += 1,
            Signal::Ignored => {}
        }
    }

    /// Keeps every other latency and halves the recording rate from now on.
    #[cold]
    fn thin(&mut self) {
        let mut i = 0;
        self.latencies.retain(|_| {
            i += 1;
            i % 2 == 1
        });
        self.stride *= 2;
        self.skip = self.stride - 1;
    }

    /// Counted completions so far.
    pub fn samples(&self) -> usize {
        self.successes + self.overloads + self.failures
    }

    /// True once the window may close at `now`: `min_samples` over `min_duration` (or
    /// the quick duration), anything after `max_duration`, or at once with `min_samples`
    /// overload answers over the overload-close rate.
    #[inline]
    pub fn ready(&self, now: Instant) -> bool {
        let age = now.saturating_duration_since(self.opened);
        let n = self.samples();
        let min_age = self
            .quick
            .map_or(self.config.min_duration, |q| q.min(self.config.min_duration));
        (n >= self.config.min_samples && age >= min_age)
            || (n > 0 && age >= self.config.max_duration)
            || self.overload_close.is_some_and(|rate| {
                self.overloads >= self.config.min_samples && self.overloads as f64 > rate * n as f64
            })
    }

    /// Lets the open window close after `min_samples` over `quick` (at most
    /// `min_duration`), or restores the full duration (`None`). While the limit climbs
    /// fast (slow start, headroom) a decision per second would make the climb to a
    /// knee of hundreds take many seconds; a few latencies of the service are enough to
    /// see the effect of a doubling.
    pub fn set_quick(&mut self, quick: Option<Duration>) {
        self.quick = quick;
    }

    /// Closes the window as soon as it holds `min_samples` overload answers making more
    /// than `rate` of its samples (`None`: never early). A service shedding calls
    /// answers each in a fraction of its latency: a full second past its hard limit
    /// would send it tens of thousands of calls it refuses.
    pub fn set_overload_close(&mut self, rate: Option<f64>) {
        self.overload_close = rate;
    }

    /// Ignores, from now on, jobs that started before `now`: after the limit changes,
    /// jobs admitted under the old limit would report the old load and make the rule
    /// act twice on one overload.
    pub fn discard_before(&mut self, now: Instant) {
        self.epoch = now;
    }

    /// Summarises the window and opens the next one at `now`. `peak_in_flight` comes from
    /// the enforcing side ([`crate::limiter::limit::Limit::take_peak`]).
    pub fn close(&mut self, now: Instant, peak_in_flight: usize) -> Summary {
        let (p50, p95) = percentiles(&mut self.latencies);
        let summary = Summary {
            successes: self.successes,
            overloads: self.overloads,
            failures: self.failures,
            p50,
            p95,
            peak_in_flight,
        };
        self.latencies.clear();
        self.opened = now;
        self.stride = 1;
        self.skip = 0;
        self.successes = 0;
        self.overloads = 0;
        self.failures = 0;
        summary
    }

    /// The settings in force.
    pub fn config(&self) -> &WindowConfig {
        &self.config
    }

    /// Replaces the settings (runtime tuning); the open window keeps its samples.
    pub fn reconfigure(&mut self, config: WindowConfig) -> Result<(), LimiterError> {
        config.validate()?;
        self.config = config;
        Ok(())
    }
}

/// p50 and p95 by nearest rank (the ⌈p·n⌉-th smallest); zero for no samples. Reorders.
fn percentiles(v: &mut [u32]) -> (Duration, Duration) {
    if v.is_empty() {
        return (Duration::ZERO, Duration::ZERO);
    }
    let rank = |p: f64| ((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    let (i50, i95) = (rank(0.5), rank(0.95));
    let (_, p95, _) = v.select_nth_unstable(i95);
    let p95 = *p95;
    // Everything left of i95 is ≤ p95, so the median is found in that part.
    let p50 = if i50 < i95 {
        *v[..i95].select_nth_unstable(i50).1
    } else {
        p95
    };
    let us = |x: u32| Duration::from_micros(x as u64);
    (us(p50), us(p95))
}

#[cfg(test)]
mod tests;
