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
use super::error::LimiterError;
pub use super::target::Target;
use std::time::Duration;

mod config;
pub use config::AimdConfig;

/// A window p50 over this multiple of the lowest recent one shows a queue at the
/// downstream: slow start ends there. (The median of a window of 50 or more jobs varies
/// by a few percent between windows at one load, even with heavy jitter; past a knee it
/// rises with the limit.)
const QUEUE_SIGN: f64 = 1.1;

/// Headroom growth aims the next window's p95 at this share of the target, so that the
/// noise of one window does not carry the limit over it.
const HEADROOM: f64 = 0.95;

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
