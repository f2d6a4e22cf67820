//! Adaptive concurrency: finds how many jobs the downstream takes at once, the way TCP
//! finds a link's capacity.
//!
//! ```text
//! pool ── record(started, elapsed, signal) ──▶ Window ── Summary ──▶ Aimd (pure rule)
//!  ▲      (per finished job)                   (p50, p95, error rate,     │ decision
//!  │                                            peak in-flight)           ▼
//!  └──────── acquire ◀──────── Limit (resizable semaphore) ◀──────── Limit::set
//! ```
//!
//! The pool reports each finished job ([`Limiter::record`]); when the [`Window`] has
//! enough samples the [`Aimd`] rule decides and the decision goes to the [`Limit`] the
//! pool acquires from (and the fetcher's prefetch follows). There is no task: the
//! completion that closes a window applies the decision, so a quiet consumer costs
//! nothing. Per job that is one short mutex section: `benches/limiter.rs` measures about
//! 25 ns per `record` on one thread and 60 ns with two threads hammering it at once (the
//! pool adds two clock reads); closing a window of 16,384 latencies (the thinning cap)
//! costs about 60 µs, once a second or so.
//!
//! An optional jobs/s cap ([`rate::RateLimit`], GCRA via `governor`) composes with it.
//!
//! How it fares (`cargo run --example limiter_sim`: simulated downstreams whose latency
//! grows past a concurrency knee and which fail past twice the knee, paused tokio time;
//! defaults but for a 75 ms p95 target at 50 ms base latency):
//!
//! | scenario              | weir                         | fixed limit = knee | Netflix AIMD (min 20, +1, ×0.9) |
//! |-----------------------|------------------------------|--------------------|---------------------------------|
//! | knee 10 / 50 / 300    | 98–99 % of ideal, p95 0.97–1.00 × target | 98–99 %, 0.79–0.80 × | 15–64 %, 1.3–1.6 ×, 29–64 % errors |
//! | capacity halves       | new knee ±20 % in 1.1 s, old knee in 1.3 s | (never adapts)     | oscillates (cv 0.82), 29 % errors |
//! | error burst (33 % 429) | limit halved in 0.2 s, back to max by the end | unchanged | cut to its min of 20 |
//! | plain 500s (15 %)     | limit stays at max, 0.99 × the no-error call rate | the same | the same |
//! | errors stop (5 % 500 + 5 % 429) | 0.99 × ideal 10–15 s after they stop | unchanged | unchanged |
//! | cold start to knee 300 | knee ±20 % after 1.3 s (slow start, headroom) | — | knee 0.9 s, then 29 % errors |
//!
//! docs/limiter.md has the signals, the rule and these figures against main's rule.
//!
//! The asserting versions of these scenarios are in `tests/limiter_sim.rs`.

pub mod aimd;
mod baseline;
mod decision;
mod error;
pub mod limit;
mod options;
pub mod per_key;
pub mod rate;
mod signal;
mod status;
mod target;
pub mod window;

pub use aimd::{Aimd, AimdConfig, Decision, REASONS, Reason, Summary, Target};
pub use error::LimiterError;
pub use options::LimiterOptions;
pub use per_key::{KeyLimiterConfig, KeyLimiters};
pub use rate::{Rate, RateGate, RateLimit};
pub use signal::Signal;
pub use status::OverloadStatus;
pub use window::{Window, WindowConfig};

use crate::limiter::limit::Limit;
use crate::metrics::LimiterMetrics;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;
use tokio::time::Instant;

/// Limit changes are logged at info at most this often (each decision is at debug).
const INFO_EVERY: Duration = Duration::from_secs(10);

/// Longest [`Limiter::explain`] line: the worker registry keeps it with each beat.
pub const EXPLAIN_MAX: usize = 400;

/// A window after a fast climb lasts at least this many of the last window's p95 (and
/// [`QUICK_MIN`]), instead of the window's `min_duration`.
const QUICK_LATENCIES: u32 = 4;

/// The shortest quick window.
const QUICK_MIN: Duration = Duration::from_millis(20);

/// Settings of the adaptive limiter: the rule and its window.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct LimiterConfig {
    /// The AIMD rule.
    pub aimd: AimdConfig,
    /// The measuring window.
    pub window: WindowConfig,
}

impl LimiterConfig {
    /// Checks every value against its range, with a message that names it.
    pub fn validate(&self) -> Result<(), LimiterError> {
        self.aimd.validate()?;
        self.window.validate()
    }
}

/// The adaptive limiter of one consumer. Share it with `Arc`.
#[derive(Debug)]
pub struct Limiter {
    limit: Arc<Limit>,
    /// Set once the consumer runs (after any metrics recorder is installed).
    metrics: OnceLock<LimiterMetrics>,
    inner: Mutex<Inner>,
}

#[derive(Debug)]
struct Inner {
    window: Window,
    rule: Aimd,
    /// Last info log, and the limit it reported.
    logged: (Instant, usize),
    /// Decisions by reason ([`REASONS`] order) since the last info log.
    since_logged: [u32; REASONS.len()],
    /// The latest decision and the window that drove it.
    last: Option<(Decision, Summary)>,
    /// When it was taken.
    last_at: Instant,
}

impl Limiter {
    /// A limiter driving `limit`, starting from its current value clamped into
    /// `min..=max`.
    pub fn new(config: LimiterConfig, limit: Arc<Limit>) -> Result<Self, LimiterError> {
        let now = Instant::now();
        let rule = Aimd::new(config.aimd, limit.get())?;
        let mut window = Window::new(config.window, now)?;
        window.set_overload_close(Some(rule.config().error_threshold));
        limit.set(rule.limit());
        Ok(Self {
            inner: Mutex::new(Inner {
                logged: (now, rule.limit()),
                since_logged: [0; REASONS.len()],
                last: None,
                last_at: now,
                window,
                rule,
            }),
            limit,
            metrics: OnceLock::new(),
        })
    }

    /// Publishes this limiter's windows and decisions through `m` from now on.
    pub fn attach_metrics(&self, m: LimiterMetrics) {
        let inner = self.lock();
        let c = inner.rule.config();
        m.min.set(c.min as f64);
        m.max.set(c.max as f64);
        let _ = self.metrics.set(m);
    }

    /// The limit this limiter drives.
    pub fn limit(&self) -> &Arc<Limit> {
        &self.limit
    }

    /// Records a finished job that started at `started` and ran for `elapsed`. The
    /// completion that closes a window applies the rule; its decision is returned.
    #[inline]
    pub fn record(&self, started: Instant, elapsed: Duration, signal: Signal) -> Option<Decision> {
        self.record_batch(started, elapsed, std::iter::once(signal))
    }

    /// Records the jobs of one batch-handler call, all with the call's timing, under one
    /// lock.
    pub fn record_batch(
        &self,
        started: Instant,
        elapsed: Duration,
        signals: impl Iterator<Item = Signal>,
    ) -> Option<Decision> {
        let now = started + elapsed;
        let mut inner = self.lock();
        let inner = &mut *inner;
        for s in signals {
            let s = inner.rule.config().classify(s);
            inner.window.record(started, elapsed, s);
        }
        inner.window.ready(now).then(|| self.close(inner, now))
    }

    #[cold]
    fn close(&self, inner: &mut Inner, now: Instant) -> Decision {
        let summary = inner.window.close(now, self.limit.take_peak());
        let d = inner.rule.decide(&summary);
        if let Some(m) = self.metrics.get() {
            record(m, &summary, &d, inner.rule.target());
        }
        if d.to != d.from {
            inner.window.discard_before(now);
            self.limit.set(d.to);
        }
        // After a fast climb the next window may be short: a few of the service's
        // latencies show the effect of a doubling.
        inner.window.set_quick(
            matches!(d.reason, Reason::SlowStart | Reason::Headroom { .. })
                .then(|| (summary.p95 * QUICK_LATENCIES).max(QUICK_MIN)),
        );
        inner.last = Some((d, summary));
        inner.last_at = now;
        inner.since_logged[d.reason.index()] += 1;
        tracing::debug!(
            from = d.from,
            to = d.to,
            reason = d.reason.name(),
            why = %d.reason,
            samples = summary.samples(),
            p50_ms = summary.p50.as_secs_f64() * 1e3,
            p95_ms = summary.p95.as_secs_f64() * 1e3,
            overload_rate = summary.overload_rate(),
            failure_rate = summary.failure_rate(),
            peak_in_flight = summary.peak_in_flight,
            "limiter window"
        );
        let (at, reported) = inner.logged;
        if d.to != reported && now.saturating_duration_since(at) >= INFO_EVERY {
            log_change(inner, reported, &d, &summary);
            inner.logged = (now, d.to);
            inner.since_logged = [0; REASONS.len()];
        }
        d
    }

    /// The latest decision and the window that drove it (`None` before the first).
    pub fn last_decision(&self) -> Option<(Decision, Summary)> {
        self.lock().last
    }

    /// The latest decision in one line, as `weir limits get` and `weir workers` show it:
    /// the move and its reason, how long ago, and the figures of the window that drove
    /// it (`None` before the first decision). At most [`EXPLAIN_MAX`] bytes, e.g.
    /// `102 ← 137 latency: p95 31ms over the 30ms target, 0.4s ago; window of 5012 jobs:
    /// p50 21.0ms p95 31.2ms target 30ms, overload 0.0%, failures 0.0%, peak 137 in flight`.
    pub fn explain(&self) -> Option<String> {
        let inner = self.lock();
        let (d, s) = inner.last?;
        let ms = |d: Duration| format!("{:.1}ms", d.as_secs_f64() * 1e3);
        let target = inner.rule.target().map_or_else(|| "not measured yet".into(), ms);
        let mut line = format!(
            "{} ← {} {}, {:.1}s ago; window of {} jobs: p50 {} p95 {} target {target}, overload {:.1}%, failures {:.1}%, peak {} in flight",
            d.to,
            d.from,
            d.reason,
            inner.last_at.elapsed().as_secs_f64(),
            s.samples(),
            ms(s.p50),
            ms(s.p95),
            s.overload_rate() * 100.0,
            s.failure_rate() * 100.0,
            s.peak_in_flight,
        );
        if line.len() > EXPLAIN_MAX {
            let mut end = EXPLAIN_MAX;
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            line.truncate(end);
        }
        Some(line)
    }

    /// The p95 target in force (`None` for a relative target before the first latency).
    pub fn target(&self) -> Option<Duration> {
        self.lock().rule.target()
    }

    /// The settings in force.
    pub fn config(&self) -> LimiterConfig {
        let inner = self.lock();
        LimiterConfig {
            aimd: inner.rule.config().clone(),
            window: inner.window.config().clone(),
        }
    }

    /// Applies new settings to the running limiter (runtime tuning); the limit moves into
    /// the new bounds at once.
    pub fn reconfigure(&self, config: LimiterConfig) -> Result<(), LimiterError> {
        config.validate()?;
        let mut inner = self.lock();
        inner.rule.reconfigure(config.aimd)?;
        inner.window.reconfigure(config.window)?;
        let rate = inner.rule.config().error_threshold;
        inner.window.set_overload_close(Some(rate));
        self.limit.set(inner.rule.limit());
        if let Some(m) = self.metrics.get() {
            m.min.set(inner.rule.config().min as f64);
            m.max.set(inner.rule.config().max as f64);
        }
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves plain numbers behind: keep going.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The info line of a limit change: the limit now and the one last logged, the latest
/// decision with its own from, to, reason and figures (so a cut is never reported under
/// a later probe's name), and the decisions since the last line by reason.
fn log_change(inner: &Inner, reported: usize, d: &Decision, s: &Summary) {
    let target = inner.rule.target().map_or_else(
        || "not measured yet".into(),
        |t| humantime::format_duration(t).to_string(),
    );
    let counts: Vec<String> = REASONS
        .iter()
        .zip(inner.since_logged)
        .filter(|(_, n)| *n > 0)
        .map(|(r, n)| format!("{r}={n}"))
        .collect();
    tracing::info!(
        limit = d.to,
        previously_logged = reported,
        last_from = d.from,
        reason = d.reason.name(),
        why = %d.reason,
        p95_ms = s.p95.as_secs_f64() * 1e3,
        overload_rate = s.overload_rate(),
        failure_rate = s.failure_rate(),
        target_p95 = %target,
        decisions = %counts.join(" "),
        "concurrency limit changed"
    );
}

/// Publishes one window and its decision.
fn record(m: &LimiterMetrics, s: &Summary, d: &Decision, target: Option<Duration>) {
    m.p95.set(s.p95.as_secs_f64());
    m.error_ratio.set(s.overload_rate());
    m.failure_ratio.set(s.failure_rate());
    if let Some(t) = target {
        m.target.set(t.as_secs_f64());
    }
    m.decisions[d.reason.index()].increment(1);
}

#[cfg(test)]
mod tests;
