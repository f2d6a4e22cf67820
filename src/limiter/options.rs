//! The limit knobs as an operator gives them (flags of `weir work`, the load-test
//! harness's options, the runtime settings hash), and the one place that turns them into
//! a [`LimiterConfig`] and a [`Rate`]. Every value means the same wherever it comes from.

use super::error::LimiterError;
use super::{KeyLimiterConfig, LimiterConfig, OverloadStatus, Rate, Target};

/// The knobs of a consumer's limits: a fixed or adaptive concurrency limit, and an
/// optional jobs/s cap. An unset knob (`None`) leaves the library's default
/// ([`super::AimdConfig::default`]), or the base given to [`LimiterOptions::apply`].
///
/// With the `cli` feature it is a set of clap flags (`--adaptive`, `--min-concurrency`,
/// `--max-concurrency`, `--target-p95`, `--error-threshold`, `--overload-status`,
/// `--rate`, `--burst`) to
/// flatten into a command; there the adaptive knobs need `--adaptive` and show the
/// library's defaults in `--help`.
#[derive(Debug, Clone, PartialEq, Default)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
#[non_exhaustive]
pub struct LimiterOptions {
    /// Adapt the concurrency limit to the downstream (AIMD); --concurrency is where it starts.
    #[cfg_attr(feature = "cli", arg(long))]
    pub adaptive: bool,
    /// With --adaptive, also adapt one limit per job key, from that key's own p95 and
    /// errors, held across every consumer of the queue: a slow key backs off alone (the
    /// consumer's own limit then learns from jobs without a key only).
    #[cfg_attr(feature = "cli", arg(long, requires = "adaptive"))]
    pub adaptive_per_key: bool,
    /// Lowest limit the adaptive limiter may set.
    #[cfg_attr(feature = "cli", arg(long, requires = "adaptive", default_value = shown(|a| a.min)))]
    pub min_concurrency: Option<usize>,
    /// Highest limit the adaptive limiter may set.
    #[cfg_attr(feature = "cli", arg(long, requires = "adaptive", default_value = shown(|a| a.max)))]
    pub max_concurrency: Option<usize>,
    /// p95 latency to hold: a duration (200ms) or a multiple of the no-load p95 (1.5x).
    #[cfg_attr(
        feature = "cli",
        arg(long, requires = "adaptive", default_value = shown(|a| a.target))
    )]
    pub target_p95: Option<Target>,
    /// Overload rate (overload answers, timeouts, refused or reset connections) above
    /// which the limit backs off.
    #[cfg_attr(
        feature = "cli",
        arg(long, requires = "adaptive", default_value = shown(|a| a.error_threshold))
    )]
    pub error_threshold: Option<f64>,
    /// HTTP statuses that mean the downstream is overloaded (add 502,504 when a gateway
    /// answers them under load); any other failure is the job's own and does not shrink
    /// the limit.
    #[cfg_attr(
        feature = "cli",
        arg(long, requires = "adaptive", default_value = shown(|a| OverloadStatus(a.overload_status.clone())))
    )]
    pub overload_status: Option<OverloadStatus>,
    /// Cap on jobs started per second by this consumer: 500/s, 30/m, 10/h.
    #[cfg_attr(feature = "cli", arg(long))]
    pub rate: Option<Rate>,
    /// Jobs that may start back to back under --rate (default: the rate's count).
    #[cfg_attr(feature = "cli", arg(long, requires = "rate"))]
    pub burst: Option<u32>,
}

/// A default of the AIMD rule as `--help` shows it (and clap parses it back).
#[cfg(feature = "cli")]
fn shown<T: std::fmt::Display>(field: impl Fn(&super::AimdConfig) -> T) -> String {
    field(&super::AimdConfig::default()).to_string()
}

impl LimiterOptions {
    /// `base` with the knobs that are set on top (the adaptive flag and the rate are not
    /// read); not checked.
    pub fn apply(&self, base: &LimiterConfig) -> LimiterConfig {
        let mut c = base.clone();
        let a = &mut c.aimd;
        a.min = self.min_concurrency.unwrap_or(a.min);
        a.max = self.max_concurrency.unwrap_or(a.max);
        a.target = self.target_p95.unwrap_or(a.target);
        a.error_threshold = self.error_threshold.unwrap_or(a.error_threshold);
        if let Some(s) = &self.overload_status {
            a.overload_status = s.0.clone();
        }
        c
    }

    /// The adaptive limiter's settings (`None`: a fixed limit), checked against their
    /// ranges. Without `adaptive` the other knobs are not read (the CLI refuses them).
    pub fn limiter(&self) -> Result<Option<LimiterConfig>, LimiterError> {
        if !self.adaptive {
            return Ok(None);
        }
        let config = self.apply(&LimiterConfig::default());
        config.validate()?;
        Ok(Some(config))
    }

    /// The per-key limiters' settings (`None` without `adaptive_per_key`): the same rule
    /// as [`LimiterOptions::limiter`], per key, starting at `initial`.
    pub fn key_limiter(&self, initial: usize) -> Result<Option<KeyLimiterConfig>, LimiterError> {
        if !(self.adaptive && self.adaptive_per_key) {
            return Ok(None);
        }
        let config = KeyLimiterConfig {
            aimd: self.apply(&LimiterConfig::default()).aimd,
            initial,
            ..KeyLimiterConfig::default()
        };
        config.validate()?;
        Ok(Some(config))
    }

    /// The jobs/s cap, if any, with its burst.
    pub fn rate(&self) -> Option<Rate> {
        self.rate.map(|r| self.burst.map_or(r, |b| r.with_burst(b)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiter::AimdConfig;
    use std::time::Duration;

    #[test]
    fn knobs_apply_over_the_defaults_and_are_checked() {
        let none = LimiterOptions::default();
        assert_eq!(none.limiter(), Ok(None));
        let o = LimiterOptions {
            adaptive: true,
            max_concurrency: Some(30),
            target_p95: Some(Target::Absolute(Duration::from_millis(40))),
            overload_status: Some("429,503,502,504".parse().unwrap()),
            ..LimiterOptions::default()
        };
        let c = o.limiter().unwrap().unwrap();
        let d = AimdConfig::default();
        assert_eq!(c.aimd.overload_status, [429, 503, 502, 504]);
        assert_eq!(d.overload_status, [429, 503], "the statuses defined for overload");
        assert_eq!((c.aimd.min, c.aimd.max), (d.min, 30));
        assert_eq!(c.aimd.target, Target::Absolute(Duration::from_millis(40)));
        assert_eq!(c.aimd.error_threshold, d.error_threshold);
        let bad = LimiterOptions {
            min_concurrency: Some(50),
            ..o
        };
        assert!(bad.limiter().unwrap_err().to_string().contains("max concurrency"));
    }

    #[test]
    fn the_burst_rides_on_the_rate() {
        let r: Rate = "30/m".parse().unwrap();
        let o = LimiterOptions {
            rate: Some(r),
            burst: Some(3),
            ..LimiterOptions::default()
        };
        assert_eq!(o.rate(), Some(r.with_burst(3)));
        assert_eq!(LimiterOptions::default().rate(), None);
    }
}
