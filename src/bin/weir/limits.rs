//! `weir limits`: the queue's settings hash, which binds every consumer of the queue: the
//! runtime limits a live fleet applies within a second, and the dead-letter cap. (The
//! limit flags of `weir work` are the library's `weir::limiter::LimiterOptions`.)

use crate::Common;
use clap::{Args, Subcommand};
use std::process::ExitCode;
use weir::limiter::Target;
use weir::settings::{DEFAULT_DEAD_CAP, RateSetting, Settings};

/// `weir limits`.
#[derive(Args, Debug)]
pub(crate) struct LimitsArgs {
    #[command(flatten)]
    pub common: Common,
    #[command(subcommand)]
    pub command: LimitsCommand,
}

#[derive(Subcommand, Debug)]
pub(crate) enum LimitsCommand {
    /// Show the settings stored for the queue.
    Get,
    /// Store settings; running consumers apply them within about a second.
    Set(SetArgs),
    /// Remove every setting (consumers go back to their own flags, the dead-letter cap to
    /// its default), or with --dead-cap only the dead-letter cap.
    Clear(ClearArgs),
}

#[derive(Args, Debug)]
pub(crate) struct ClearArgs {
    /// Remove only the dead-letter cap (back to the default).
    #[arg(long)]
    pub dead_cap: bool,
}

#[derive(Args, Debug)]
pub(crate) struct SetArgs {
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
    #[arg(long, value_parser = str::parse::<RateSetting>)]
    pub rate: Option<RateSetting>,
    /// Burst for --rate.
    #[arg(long, requires = "rate")]
    pub burst: Option<u32>,
    /// Dead-letter queue cap, at least 1 (default 10000): the oldest entries beyond it
    /// are trimmed (at most 1000 per call, counted in `weir stats`).
    #[arg(long, value_name = "N")]
    pub dead_cap: Option<u64>,
}

pub(crate) async fn run(a: LimitsArgs) -> weir::Result<ExitCode> {
    let mut conn = a.common.redis()?.connect().await?;
    let queue = &a.common.queue;
    match a.command {
        LimitsCommand::Get => {}
        LimitsCommand::Clear(c) if c.dead_cap => Settings::clear_dead_cap(&mut conn, queue).await?,
        LimitsCommand::Clear(_) => Settings::clear(&mut conn, queue).await?,
        LimitsCommand::Set(s) => {
            let update = Settings {
                min: s.min_concurrency,
                max: s.max_concurrency,
                target_p95: s.target_p95,
                error_threshold: s.error_threshold,
                rate: s.rate.map(|r| s.burst.map_or(r, |b| r.with_burst(b))),
                dead_cap: s.dead_cap,
            };
            Settings::update(&mut conn, queue, &update).await?;
        }
    }
    let now = Settings::load(&mut conn, queue).await?;
    let cap = match now.dead_cap {
        Some(_) => String::new(),
        None => format!(" (dead_cap={DEFAULT_DEAD_CAP}: the default)"),
    };
    if now == Settings::default() {
        println!("queue {queue}: no runtime settings (consumers use their own flags){cap}");
    } else {
        println!("queue {queue}: {now}{cap}");
    }
    Ok(ExitCode::SUCCESS)
}
