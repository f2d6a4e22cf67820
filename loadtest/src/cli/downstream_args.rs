//! The `downstream` scenario's options: the simulated service (shared with the consumer
//! processes) and how the run is judged.

use super::{Common, parse_duration};
use crate::downstream;
use clap::Args;
use std::time::Duration;
use weir::limiter::Target;

/// The simulated downstream, as options (shared with the consumer processes).
#[derive(Args, Debug, Clone)]
pub(crate) struct DownstreamOpts {
    /// Capacity over time: CAPACITY@DURATION steps; the last step holds afterwards.
    #[arg(long, default_value = "200@20s,80@20s,200@20s")]
    pub capacity: String,
    /// Latency of a call below the capacity knee.
    #[arg(long, default_value = "20ms", value_parser = parse_duration)]
    pub base_latency: Duration,
    /// Relative latency jitter (0.1: ±10%).
    #[arg(long, default_value_t = 0.1)]
    pub jitter: f64,
    /// Probability that a call fails whatever the load.
    #[arg(long, default_value_t = 0.0)]
    pub error_rate: f64,
    /// The HTTP status of those failures: 500 (the job's own failure; the limiter does
    /// not slow down for it), 429 or 503 (overload answers, carrying --retry-after).
    #[arg(long, default_value_t = 500)]
    pub error_status: u16,
    /// Failures happen only from this far into the script (with --error-until).
    #[arg(long, value_parser = parse_duration)]
    pub error_from: Option<Duration>,
    /// Failures stop this far into the script.
    #[arg(long, value_parser = parse_duration)]
    pub error_until: Option<Duration>,
    /// The Retry-After a 429 or 503 failure carries.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub retry_after: Duration,
    /// Calls beyond capacity × this fail fast (load shedding).
    #[arg(long, default_value_t = 2.0)]
    pub hard_factor: f64,
}

impl DownstreamOpts {
    /// The same downstream with every capacity divided among `k` processes.
    pub(crate) fn shared(&self, k: u64) -> DownstreamOpts {
        let Ok(script) = downstream::parse_script(&self.capacity) else {
            return self.clone(); // reported by `config` where it is used
        };
        let capacity = script
            .iter()
            .map(|p| format!("{}@{}ms", (p.capacity / k.max(1)).max(1), p.length.as_millis()))
            .collect::<Vec<_>>()
            .join(",");
        DownstreamOpts {
            capacity,
            ..self.clone()
        }
    }

    pub(crate) fn config(&self, seed: u64) -> Result<downstream::Config, String> {
        if !(0.0..1.0).contains(&self.jitter) || !(0.0..=1.0).contains(&self.error_rate) {
            return Err("--jitter must be in [0, 1) and --error-rate in [0, 1]".into());
        }
        if self.hard_factor < 1.0 || self.base_latency.is_zero() {
            return Err("--hard-factor must be at least 1 and --base-latency above 0".into());
        }
        if !(400..600).contains(&self.error_status) {
            return Err(format!(
                "--error-status {} is not an HTTP error status (400-599)",
                self.error_status
            ));
        }
        Ok(downstream::Config {
            script: downstream::parse_script(&self.capacity)?,
            base_latency: self.base_latency,
            jitter: self.jitter,
            error_rate: self.error_rate,
            error_status: self.error_status,
            error_window: match (self.error_from, self.error_until) {
                (None, None) => None,
                (from, until) => Some((from.unwrap_or_default(), until.unwrap_or(Duration::MAX))),
            },
            retry_after: self.retry_after,
            hard_factor: self.hard_factor,
            seed,
        })
    }
}

#[derive(Args, Debug, Clone)]
pub(crate) struct DownstreamArgs {
    #[command(flatten)]
    pub common: Common,
    #[command(flatten)]
    pub downstream: DownstreamOpts,
    /// A fixed limit of --concurrency instead of the adaptive limiter (the default here).
    #[arg(long, conflicts_with = "adaptive")]
    pub fixed: bool,
    /// Run the script twice on fresh queues, adaptive then --fixed, and report both side
    /// by side (the fixed run's files go to DIR/fixed).
    #[arg(long, conflicts_with = "fixed")]
    pub compare_fixed: bool,
    /// The p95 target the run is judged against: `--target-p95`, else 1.5 ×
    /// `--base-latency` (set by [`DownstreamArgs::resolve`]).
    #[arg(skip)]
    pub target_p95: Option<Target>,
}

impl DownstreamArgs {
    /// Adaptive unless `--fixed`. The p95 target is `--target-p95`, else 1.5 ×
    /// `--base-latency`, as in the limiter's simulations (75 ms at 50 ms; see
    /// loadtest/README.md for why not the library's relative 1.5x); it is the limiter's
    /// when adaptive, and only what the report judges against when fixed.
    pub(crate) fn resolve(&mut self) {
        let limits = &mut self.common.limits;
        limits.adaptive = !self.fixed;
        let default = Target::Absolute(self.downstream.base_latency.mul_f64(1.5));
        let target = limits.target_p95.take().unwrap_or(default);
        self.target_p95 = Some(target);
        if limits.adaptive {
            limits.target_p95 = Some(target);
        }
    }

    /// The p95 target (after [`DownstreamArgs::resolve`]).
    pub(crate) fn target(&self) -> Target {
        self.target_p95
            .unwrap_or(Target::Absolute(self.downstream.base_latency.mul_f64(1.5)))
    }
}
