//! Limit flags shared by `weir work` (adaptive concurrency, rate cap) and `weir limits`
//! (runtime tuning of a live fleet through the queue's settings hash).

use crate::Common;
use clap::{Args, Subcommand};
use std::process::ExitCode;
use weir::limiter::{AimdConfig, LimiterConfig, Rate, Target};
use weir::settings::{RateSetting, Settings};

/// `weir work`'s limit flags.
#[derive(Args, Debug, Clone)]
pub struct LimiterArgs {
    /// Adapt the concurrency limit to the downstream (AIMD); --concurrency is where it starts.
    #[arg(long)]
    pub adaptive: bool,
    /// Lowest limit the adaptive limiter may set.
    #[arg(long, default_value_t = 1, requires = "adaptive")]
    pub min_concurrency: usize,
    /// Highest limit the adaptive limiter may set.
    #[arg(long, default_value_t = 1000, requires = "adaptive")]
    pub max_concurrency: usize,
    /// p95 latency to hold: a duration (200ms) or a multiple of the no-load p95 (1.5x).
    #[arg(long, default_value = "1.5x", requires = "adaptive")]
    pub target_p95: Target,
    /// Error rate (retryable errors, timeouts, 429/503) above which the limit backs off.
    #[arg(long, default_value_t = 0.05, requires = "adaptive")]
    pub error_threshold: f64,
    /// Cap on jobs started per second by this consumer: 500/s, 30/m, 10/h.
    #[arg(long)]
    pub rate: Option<Rate>,
    /// Jobs that may start back to back under --rate (default: the rate's count).
    #[arg(long, requires = "rate")]
    pub burst: Option<u32>,
}

/// A fixed limit and no rate cap (what the flags give when none is passed).
impl Default for LimiterArgs {
    fn default() -> Self {
        Self {
            adaptive: false,
            min_concurrency: 1,
            max_concurrency: 1000,
            target_p95: Target::Relative(1.5),
            error_threshold: 0.05,
            rate: None,
            burst: None,
        }
    }
}

impl LimiterArgs {
    /// The adaptive limiter's settings, if enabled.
    pub fn limiter(&self) -> Option<LimiterConfig> {
        self.adaptive.then(|| LimiterConfig {
            aimd: AimdConfig {
                min: self.min_concurrency,
                max: self.max_concurrency,
                target: self.target_p95,
                error_threshold: self.error_threshold,
                ..AimdConfig::default()
            },
            ..LimiterConfig::default()
        })
    }

    /// The rate cap, if any.
    pub fn rate(&self) -> Option<Rate> {
        self.rate.map(|r| self.burst.map_or(r, |b| r.with_burst(b)))
    }
}

fn parse_rate_setting(s: &str) -> Result<RateSetting, weir::limiter::LimiterError> {
    if s.trim() == "off" {
        Ok(RateSetting::Off)
    } else {
        s.parse().map(RateSetting::Limit)
    }
}

/// `weir limits`.
#[derive(Args, Debug)]
pub struct LimitsArgs {
    #[command(flatten)]
    pub common: Common,
    #[command(subcommand)]
    pub command: LimitsCommand,
}

#[derive(Subcommand, Debug)]
pub enum LimitsCommand {
    /// Show the runtime settings stored for the queue.
    Get,
    /// Store runtime settings; running consumers apply them within about a second.
    Set(SetArgs),
    /// Remove every runtime setting: consumers go back to their own flags.
    Clear,
}

#[derive(Args, Debug)]
pub struct SetArgs {
    /// Lowest concurrency limit (adaptive consumers).
    #[arg(long)]
    pub min_concurrency: Option<usize>,
    /// Highest concurrency limit (adaptive consumers).
    #[arg(long)]
    pub max_concurrency: Option<usize>,
    /// p95 target: 200ms, or 1.5x the no-load p95 (adaptive consumers).
    #[arg(long)]
    pub target_p95: Option<Target>,
    /// Error-rate threshold, 0 to 1 (adaptive consumers).
    #[arg(long)]
    pub error_threshold: Option<f64>,
    /// Jobs/s cap per consumer (500/s, 30/m), or `off` to lift the consumers' own cap.
    #[arg(long, value_parser = parse_rate_setting)]
    pub rate: Option<RateSetting>,
    /// Burst for --rate.
    #[arg(long, requires = "rate")]
    pub burst: Option<u32>,
}

pub async fn run(a: LimitsArgs) -> weir::Result<ExitCode> {
    let mut conn = weir::Redis::open(&a.common.redis_url)?.connect().await?;
    let queue = &a.common.queue;
    match a.command {
        LimitsCommand::Get => {}
        LimitsCommand::Clear => Settings::clear(&mut conn, queue).await?,
        LimitsCommand::Set(s) => {
            let rate = match (s.rate, s.burst) {
                (Some(RateSetting::Limit(r)), Some(b)) => Some(RateSetting::Limit(r.with_burst(b))),
                (r, _) => r,
            };
            let update = Settings {
                min: s.min_concurrency,
                max: s.max_concurrency,
                target_p95: s.target_p95,
                error_threshold: s.error_threshold,
                rate,
            };
            let merged = Settings::load(&mut conn, queue).await?.merge(&update);
            merged.validate()?;
            update.store(&mut conn, queue).await?;
        }
    }
    let now = Settings::load(&mut conn, queue).await?;
    if now == Settings::default() {
        println!("queue {queue}: no runtime settings (consumers use their own flags)");
    } else {
        println!("queue {queue}: {now}");
    }
    Ok(ExitCode::SUCCESS)
}
