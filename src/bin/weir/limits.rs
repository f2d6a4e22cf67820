//! `weir limits`: the queue's settings hash, which binds every consumer of the queue: the
//! runtime limits a live fleet applies within a second, the global limits the whole fleet
//! obeys together, and the dead-letter cap. (The limit flags of `weir work` are the
//! library's `weir::limiter::LimiterOptions`.)

use crate::Common;
use clap::{Args, Subcommand};
use std::process::ExitCode;
use weir::limiter::{Rate, Target};
use weir::settings::{Cleared, DEFAULT_DEAD_CAP, RateSetting, Settings};

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
    /// Show the settings stored for the queue, and what each live consumer holds.
    Get,
    /// Store settings; running consumers apply them within about a second.
    Set(SetArgs),
    /// Remove every setting (consumers go back to their own flags, the dead-letter cap to
    /// its default), or only the ones named by the flags.
    Clear(ClearArgs),
}

#[derive(Args, Debug)]
pub(crate) struct ClearArgs {
    /// Remove the dead-letter cap (back to the default).
    #[arg(long)]
    pub dead_cap: bool,
    /// Remove the global rate (and its burst).
    #[arg(long)]
    pub global_rate: bool,
    /// Remove the global concurrency.
    #[arg(long)]
    pub global_concurrency: bool,
}

impl ClearArgs {
    /// The groups the flags name (none: clear everything).
    fn groups(&self) -> Vec<Cleared> {
        [
            (self.dead_cap, Cleared::DeadCap),
            (self.global_rate, Cleared::GlobalRate),
            (self.global_concurrency, Cleared::GlobalConcurrency),
        ]
        .into_iter()
        .filter_map(|(on, c)| on.then_some(c))
        .collect()
    }
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
    /// Jobs/s every consumer of the queue together starts (500/s, 30/m), on any host;
    /// on top of each consumer's own limits. Lift it with `weir limits clear --global-rate`.
    #[arg(long, value_parser = str::parse::<Rate>)]
    pub global_rate: Option<Rate>,
    /// Jobs the fleet may start back to back after a quiet spell (default: a tenth of
    /// --global-rate's count, at least 1).
    #[arg(long, requires = "global_rate", value_name = "N")]
    pub global_burst: Option<u32>,
    /// Jobs of the queue leased at once across the fleet (fetched and not yet settled:
    /// running, or waiting to start), at least 1. A killed consumer's share comes back
    /// when its leases expire.
    #[arg(long, value_name = "N")]
    pub global_concurrency: Option<u64>,
}

pub(crate) async fn run(a: LimitsArgs) -> weir::Result<ExitCode> {
    let mut conn = a.common.redis()?.connect().await?;
    let queue = &a.common.queue;
    match a.command {
        LimitsCommand::Get => {}
        LimitsCommand::Clear(c) if !c.groups().is_empty() => {
            Settings::clear_some(&mut conn, queue, &c.groups()).await?
        }
        LimitsCommand::Clear(_) => Settings::clear(&mut conn, queue).await?,
        LimitsCommand::Set(s) => {
            let update = Settings {
                min: s.min_concurrency,
                max: s.max_concurrency,
                target_p95: s.target_p95,
                error_threshold: s.error_threshold,
                rate: s.rate.map(|r| s.burst.map_or(r, |b| r.with_burst(b))),
                dead_cap: s.dead_cap,
                global_rate: s.global_rate.map(|r| {
                    let burst = s
                        .global_burst
                        .unwrap_or_else(|| Settings::default_global_burst(&r));
                    r.with_burst(burst)
                }),
                global_concurrency: s.global_concurrency,
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
    if now.global_rate.is_some() || now.global_concurrency.is_some() {
        print!("{}", fleet(&a.common, &now).await?);
    }
    Ok(ExitCode::SUCCESS)
}

/// What the fleet holds of the global limits now: the queue's leases against the global
/// concurrency, and each live consumer's share.
async fn fleet(common: &Common, now: &Settings) -> weir::Result<String> {
    let q = common.queue_handle().await?;
    let stats = q.stats().await?;
    let workers = q.workers().await?;
    let mut out = match now.global_concurrency {
        Some(c) => format!(
            "fleet: {} leased of a global concurrency of {c}\n",
            stats.in_flight
        ),
        None => format!("fleet: {} leased\n", stats.in_flight),
    };
    for w in &workers.workers {
        out += &format!(
            "  consumer {} ({} pid {}): {} leased, {} running, limit {}\n",
            w.id, w.host, w.pid, w.leased, w.running, w.concurrency_limit
        );
    }
    if workers.workers.is_empty() {
        out += "  no live consumers\n";
    }
    Ok(out)
}
