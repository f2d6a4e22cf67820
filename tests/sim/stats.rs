//! Figures from a trace: throughput, p95, error rate, limit level and spread over an
//! interval; time for the limit to reach a band.

use super::run::Trace;
use std::time::Duration;
use weir::limiter::Signal;

#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Stats {
    /// Successful jobs per second.
    pub throughput: f64,
    /// Finished calls (any outcome) per second.
    pub calls: f64,
    /// p95 latency of successes.
    pub p95: Duration,
    /// Errors over counted jobs.
    pub error_rate: f64,
    pub mean_limit: f64,
    pub min_limit: usize,
    pub max_limit: usize,
    /// Standard deviation of the limit over its mean: the oscillation.
    pub limit_cv: f64,
    pub mean_in_flight: f64,
}

/// Figures over `[from, to)` seconds.
pub(crate) fn stats(t: &Trace, from: f64, to: f64) -> Stats {
    let inside = |d: Duration| (from..to).contains(&d.as_secs_f64());
    let mut lat: Vec<Duration> = Vec::new();
    let (mut ok, mut err) = (0usize, 0usize);
    for r in t.records.iter().filter(|r| inside(r.end)) {
        match r.signal {
            Signal::Success => {
                ok += 1;
                lat.push(r.latency);
            }
            Signal::Overload => err += 1,
            Signal::Failure | Signal::Status(_) => {}
            Signal::Ignored => {}
        }
    }
    lat.sort_unstable();
    let p95 = if lat.is_empty() {
        Duration::ZERO
    } else {
        lat[((lat.len() as f64 * 0.95).ceil() as usize).clamp(1, lat.len()) - 1]
    };
    let limits: Vec<(usize, usize)> = t
        .limits
        .iter()
        .filter(|l| inside(l.0))
        .map(|l| (l.1, l.2))
        .collect();
    let n = limits.len().max(1) as f64;
    let mean = limits.iter().map(|l| l.0 as f64).sum::<f64>() / n;
    let var = limits.iter().map(|l| (l.0 as f64 - mean).powi(2)).sum::<f64>() / n;
    Stats {
        throughput: ok as f64 / (to - from),
        calls: t.records.iter().filter(|r| inside(r.end)).count() as f64 / (to - from),
        p95,
        error_rate: if ok + err == 0 {
            0.0
        } else {
            err as f64 / (ok + err) as f64
        },
        mean_limit: mean,
        min_limit: limits.iter().map(|l| l.0).min().unwrap_or(0),
        max_limit: limits.iter().map(|l| l.0).max().unwrap_or(0),
        limit_cv: if mean > 0.0 { var.sqrt() / mean } else { 0.0 },
        mean_in_flight: limits.iter().map(|l| l.1 as f64).sum::<f64>() / n,
    }
}

/// Seconds after `after` until the limit is first within `tol` (a fraction) of `want`.
pub(crate) fn time_to_band(t: &Trace, after: f64, want: usize, tol: f64) -> Option<f64> {
    let (lo, hi) = (want as f64 * (1.0 - tol), want as f64 * (1.0 + tol));
    t.limits
        .iter()
        .find(|l| l.0.as_secs_f64() >= after && (lo..=hi).contains(&(l.1 as f64)))
        .map(|l| l.0.as_secs_f64() - after)
}

/// Seconds after `after` until the limit is first at or under `at_most`.
pub(crate) fn time_to_at_most(t: &Trace, after: f64, at_most: usize) -> Option<f64> {
    t.limits
        .iter()
        .find(|l| l.0.as_secs_f64() >= after && l.1 <= at_most)
        .map(|l| l.0.as_secs_f64() - after)
}

/// The limit at `at` seconds (last sample at or before it).
pub(crate) fn limit_at(t: &Trace, at: f64) -> usize {
    t.limits
        .iter()
        .rev()
        .find(|l| l.0.as_secs_f64() <= at)
        .map(|l| l.1)
        .unwrap_or(0)
}
