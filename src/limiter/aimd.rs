//! The AIMD rule: pure arithmetic from one window's [`Summary`] to the next limit. No
//! tokio, no locks, no clock: the [`super::Window`] measures, this decides, and
//! [`crate::limiter::limit::Limit`] enforces.
//!
//! Congestion is what an overloaded downstream says: overload answers (429/503 and any
//! status the operator adds in `overload_status`, timeouts, refused or reset
//! connections, [`crate::JobError::backpressure`]) and latency over the target. Other
//! failures (a plain 500, a 4xx, a handler error) are the job's own: counted in the
//! window's `failures`, never a reason to shrink the limit.
//!
//! Per closed window:
//! - overload rate over the threshold, or p95 over the target: multiplicative decrease,
//!   `limit ← max(min, ⌊limit·β⌋)` (`error_beta` for overload, β for latency);
//! - otherwise, if the limit was binding (peak in-flight ≥ `binding` × limit): increase
//!   (slow start or probe, below);
//! - otherwise hold: a limit nobody reached says nothing about the downstream.
//!
//! Slow start: until the first sign of congestion the limit doubles per binding window
//! (TCP's slow start), so an idle-to-busy start reaches a max of 1,000 from 64 in four
//! windows instead of twenty-odd. A queue at the downstream (the window's p50 over
//! 1.1 × the lowest recent p50, HyStart's delay rise) is such a sign: one more
//! doubling from past a knee would run into the service's hard limit. After that the
//! limit grows by the most of: slow start again below half the limit it was last cut
//! from (the `ceiling`, TCP's W_max); the headroom, `limit × min(2, 0.95 × target /
//! p95)` (past a knee latency grows in proportion to the load, so this aims the next
//! p95 just under the target, and finds capacity that came back in a window or two); a
//! probe of `step`, which starts at α and doubles per consecutive increase up to
//! `growth_cap` × limit. None of them goes past 7/8 of a limit that drew overload answers
//! at a congested latency in the last `recheck_windows` windows, except a probe.
//! `growth_cap = 0` gives classic AIMD (+α per window, no slow start, no headroom).
//!
//! No trap: a limit held down by latency for `recheck_windows` windows in a row takes one
//! step up anyway ([`Reason::Recheck`]); and a relative target never falls below what
//! the downstream showed when uncongested (`limiter/baseline.rs`).

use super::baseline::Baseline;
pub use super::decision::{Decision, REASONS, Reason, Summary};
use super::error::{LimiterError, check};
use super::signal::Signal;
pub use super::target::Target;
use std::time::Duration;

/// A window p50 over this multiple of the lowest recent one shows a queue at the
/// downstream: slow start ends there. (The median of a window of 50 or more jobs varies
/// by a few percent between windows at one load, even with heavy jitter; past a knee it
/// rises with the limit.)
const QUEUE_SIGN: f64 = 1.1;

/// Headroom growth aims the next window's p95 at this share of the target, so that the
/// noise of one window does not carry the limit over it.
const HEADROOM: f64 = 0.95;

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
            super::status::check_status(st)?;
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

/// The rule's state: the limit, the current additive step and the no-load estimate.
#[derive(Debug, Clone)]
pub struct Aimd {
    config: AimdConfig,
    limit: usize,
    step: usize,
    /// The limit before the latest run of decreases (0: none yet).
    ceiling: usize,
    /// The last window decreased.
    cutting: bool,
    /// Windows in a row over the latency target (for [`Reason::Recheck`]).
    over_target: usize,
    /// The no-load latency estimate, for the relative target.
    baseline: Baseline,
    /// Windows since the last baseline dip.
    since_dip: usize,
    /// The limit to go back to after a baseline dip.
    restore: Option<usize>,
    /// The latest limit that drew overload answers at a congested latency (a service
    /// shedding load), and the windows since.
    overloaded: Option<(usize, usize)>,
}

impl Aimd {
    /// A rule starting at `initial`, clamped into `min..=max`.
    pub fn new(config: AimdConfig, initial: usize) -> Result<Self, LimiterError> {
        config.validate()?;
        Ok(Self {
            limit: initial.clamp(config.min, config.max),
            step: config.alpha,
            ceiling: 0,
            cutting: false,
            over_target: 0,
            baseline: Baseline::default(),
            since_dip: usize::MAX / 2,
            restore: None,
            overloaded: None,
            config,
        })
    }

    /// The current limit.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The settings in force.
    pub fn config(&self) -> &AimdConfig {
        &self.config
    }

    /// Replaces the settings (runtime tuning), keeping the no-load estimate; the limit is
    /// clamped into the new bounds at once.
    pub fn reconfigure(&mut self, config: AimdConfig) -> Result<(), LimiterError> {
        config.validate()?;
        self.limit = self.limit.clamp(config.min, config.max);
        self.step = config.alpha;
        self.config = config;
        Ok(())
    }

    /// The p95 target in force now (`None` for a relative target before any latency).
    pub fn target(&self) -> Option<Duration> {
        match self.config.target {
            Target::Absolute(d) => Some(d),
            Target::Relative(x) => self.baseline.estimate().map(|b| b.mul_f64(x)),
        }
    }

    /// Applies one window.
    pub fn decide(&mut self, s: &Summary) -> Decision {
        let from = self.limit;
        if let Some((_, age)) = &mut self.overloaded {
            *age += 1;
        }
        if s.successes > 0 {
            self.baseline.push(s.p50, s.p95, self.config.baseline_windows);
            // A window at the floor is as little load as we can apply. (Not a dip window:
            // half a limit far past the knee is still congested, and a reading from it
            // kept the estimate, and the limit, high for good in the drift simulation.)
            if from == self.config.min {
                self.baseline.uncongested(s.p95);
            }
        }
        // After a dip, judge against the limit it interrupted: the dip window is then not
        // binding, so the limit is restored unless that window was unhealthy.
        if let Some(r) = self.restore.take() {
            self.limit = r;
        }
        let (mut to, mut reason) = self.rule(s);
        let min = self.config.min;
        let healthy = s.successes > 0
            && matches!(
                reason,
                Reason::Probe | Reason::SlowStart | Reason::Headroom { .. } | Reason::NotBinding
            );
        // Half the limit just measured, not of a slow-start doubling of it: the dip must
        // land under the load that was healthy.
        let dip = to.min(self.limit) / 2;
        if healthy && self.dip_due() && dip >= min {
            self.since_dip = 0;
            self.restore = Some(to);
            (to, reason) = (dip, Reason::Baseline);
        }
        self.since_dip = self.since_dip.saturating_add(1);
        self.limit = to;
        Decision { from, to, reason }
    }

    /// AIMD proper, against `self.limit`.
    fn rule(&mut self, s: &Summary) -> (usize, Reason) {
        let c = &self.config;
        let rate = s.overload_rate();
        let over = self.target().filter(|t| s.successes > 0 && s.p95 > *t);
        self.over_target = match over {
            Some(_) => self.over_target + 1,
            None => 0,
        };
        if s.samples() > 0 && rate > c.error_threshold {
            // Refusals at a healthy latency (a rate limit, a flaky gateway) are honoured,
            // but do not redefine the level congestion starts at: once they stop, the
            // limit returns to it in slow start instead of +1 a window from the floor.
            let refusals = over.is_none() && s.successes > 0;
            if !refusals {
                // The highest such limit while it is recent: a run of cuts down to the
                // floor must not make the floor the limit to stay under.
                let at = match self.overloaded {
                    Some((at, age)) if age < c.recheck_windows => at.max(self.limit),
                    _ => self.limit,
                };
                self.overloaded = Some((at, 0));
            }
            (self.decrease(c.error_beta, refusals), Reason::Overload { rate })
        } else if let Some(target) = over {
            if self.over_target > c.recheck_windows {
                let windows = std::mem::take(&mut self.over_target) - 1;
                self.step = c.alpha;
                ((self.limit + c.alpha).min(c.max), Reason::Recheck { windows })
            } else {
                (
                    self.decrease(c.beta, false),
                    Reason::Latency { p95: s.p95, target },
                )
            }
        } else if s.peak_in_flight as f64 >= c.binding * self.limit as f64 {
            self.cutting = false;
            self.increase(s)
        } else {
            self.cutting = false;
            self.step = self.config.alpha;
            (self.limit, Reason::NotBinding)
        }
    }

    /// A relative target needs a fresh no-load reading: at the first window, then every
    /// `baseline_windows / 2`, so one is always in memory. Without it the estimate would
    /// come from loaded windows once the last quiet one aged out, the target would rise
    /// with the load, and the limit with it, without bound (a 15-minute simulation showed
    /// exactly that). Cost: one window in 150 at half the limit, like BBR's ProbeRTT.
    fn dip_due(&self) -> bool {
        matches!(self.config.target, Target::Relative(_))
            && self.restore.is_none()
            && self.since_dip >= (self.config.baseline_windows / 2).max(1)
    }

    /// `limit · factor`, floored at `min`. The first cut of a run sets the ceiling to the
    /// limit it cut from, unless it is at the floor (it cut nothing and says nothing about
    /// where congestion starts) or `keep` asks to keep a higher ceiling.
    fn decrease(&mut self, factor: f64, keep: bool) -> usize {
        if !self.cutting {
            let keep_higher = keep && self.ceiling > self.limit;
            if self.limit > self.config.min && !keep_higher {
                self.ceiling = self.limit;
            }
            self.cutting = true;
        }
        self.step = self.config.alpha;
        ((self.limit as f64 * factor).floor() as usize).max(self.config.min)
    }

    fn increase(&mut self, s: &Summary) -> (usize, Reason) {
        let c = &self.config;
        if c.growth_cap == 0.0 {
            // Classic AIMD: +α a window, nothing else.
            return ((self.limit + c.alpha).min(c.max), Reason::Probe);
        }
        let queueing = self.queueing(s);
        if self.ceiling == 0 && queueing {
            // The first sign of a queue ends slow start (as HyStart does on a delay
            // rise): one more doubling from past the knee would run into the service's
            // hard limit; from here the headroom says how far to go.
            self.ceiling = self.limit;
        }
        let probe = (self.limit + self.step).min(c.max);
        let cap = ((probe as f64 * c.growth_cap) as usize).max(c.alpha);
        self.step = (self.step * 2).min(cap);
        let half = self.ceiling / 2;
        let faster = if self.ceiling == 0 {
            // Slow start proper: no congestion seen yet, double.
            Some((self.limit * 2, Reason::SlowStart))
        } else if self.limit < half {
            // Far under where congestion was last seen: slow start back to half of it.
            Some(((self.limit * 2).min(half), Reason::SlowStart))
        } else {
            // Past the knee latency grows in proportion to the load: aim the p95 at
            // HEADROOM × the target, at most a doubling. At the no-load latency this is
            // how a limit finds capacity that came back; near the target it is +0.
            self.target().filter(|_| s.successes > 0).map(|target| {
                let room = HEADROOM * target.as_secs_f64() / s.p95.as_secs_f64().max(1e-9);
                let to = (self.limit as f64 * room.min(2.0)).floor() as usize;
                (to, Reason::Headroom { p95: s.p95, target })
            })
        };
        match faster.map(|(to, r)| (self.below_overload(to.min(c.max)), r)) {
            Some((to, reason)) if to > probe => (to, reason),
            _ => (probe, Reason::Probe),
        }
    }

    /// Whether the window shows a queue at the downstream: its p50 clearly over the
    /// lowest recent one (Vegas's and HyStart's signal, before the target is reached).
    fn queueing(&self, s: &Summary) -> bool {
        match self.baseline.low_p50() {
            Some(b) if s.successes > 0 => s.p50.as_secs_f64() > QUEUE_SIGN * b.as_secs_f64(),
            _ => false,
        }
    }

    /// `to`, kept under 7/8 of a limit that drew overload answers at a congested latency
    /// in the last `recheck_windows` windows (a service shedding load): past it, the
    /// limit goes up by probes only.
    fn below_overload(&self, to: usize) -> usize {
        match self.overloaded {
            Some((at, age)) if age < self.config.recheck_windows => {
                let safe = at - at / 8;
                to.min(safe)
            }
            _ => to,
        }
    }
}

#[cfg(test)]
mod no_trap_tests;
#[cfg(test)]
mod tests;
