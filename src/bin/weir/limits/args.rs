//! The command line of `weir limits`: its subcommands and the flags of `set` and
//! `clear`, with the parsers of the per-key values (`KEY=VALUE`).

use crate::Common;
use clap::{Args, Subcommand};
use std::collections::BTreeMap;
use weir::limiter::{OverloadStatus, Rate, Target};
use weir::queue::settings::{Cleared, KeyLimits, RateSetting, Settings};

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
    /// Show the settings stored for the queue, each live consumer with its limit and its
    /// limiter's latest decision (reason and figures), under a global rate or
    /// concurrency what the fleet holds of it, and with per-key limits the keys held
    /// back the most. (Every subcommand ends by showing the same.)
    Get,
    /// Store settings; running consumers apply them within about a second.
    Set(Box<SetArgs>),
    /// Remove every setting (consumers go back to their own flags, the dead-letter cap to
    /// its default), or only the ones named by the flags.
    Clear(ClearArgs),
}

#[derive(Args, Debug)]
pub(crate) struct ClearArgs {
    /// Remove the lowest concurrency limit.
    #[arg(long)]
    pub min_concurrency: bool,
    /// Remove the highest concurrency limit.
    #[arg(long)]
    pub max_concurrency: bool,
    /// Remove the p95 target.
    #[arg(long)]
    pub target_p95: bool,
    /// Remove the overload-rate threshold.
    #[arg(long)]
    pub error_threshold: bool,
    /// Remove the HTTP statuses that mean overload.
    #[arg(long)]
    pub overload_status: bool,
    /// Remove the per-consumer rate (and its burst), `off` included.
    #[arg(long)]
    pub rate: bool,
    /// Remove the dead-letter cap (back to the default).
    #[arg(long)]
    pub dead_cap: bool,
    /// Keep no completed jobs (its age and count): those kept go, up to 1000 a second.
    #[arg(long)]
    pub keep_completed: bool,
    /// Remove the runs a job's history keeps (back to 5).
    #[arg(long)]
    pub history_runs: bool,
    /// Remove the global rate (and its burst).
    #[arg(long)]
    pub global_rate: bool,
    /// Remove the global concurrency.
    #[arg(long)]
    pub global_concurrency: bool,
    /// Remove every per-key limit: the defaults and every key's own.
    #[arg(long)]
    pub per_key: bool,
    /// Remove the per-key default rate (and its burst); the keys' own stay.
    #[arg(long)]
    pub per_key_rate: bool,
    /// Remove the per-key default concurrency; the keys' own stay.
    #[arg(long)]
    pub per_key_concurrency: bool,
    /// Remove the limits of this key's own (it goes back to the per-key defaults);
    /// repeatable.
    #[arg(long = "key", value_name = "KEY")]
    pub keys: Vec<String>,
}

impl ClearArgs {
    /// The groups the flags name (none: clear everything).
    pub(super) fn groups(&self) -> Vec<Cleared> {
        [
            (self.min_concurrency, Cleared::MinConcurrency),
            (self.max_concurrency, Cleared::MaxConcurrency),
            (self.target_p95, Cleared::TargetP95),
            (self.error_threshold, Cleared::ErrorThreshold),
            (self.overload_status, Cleared::OverloadStatus),
            (self.rate, Cleared::Rate),
            (self.dead_cap, Cleared::DeadCap),
            (self.keep_completed, Cleared::KeepCompleted),
            (self.history_runs, Cleared::HistoryRuns),
            (self.global_rate, Cleared::GlobalRate),
            (self.global_concurrency, Cleared::GlobalConcurrency),
            (self.per_key, Cleared::PerKey),
            (self.per_key_rate, Cleared::PerKeyRate),
            (self.per_key_concurrency, Cleared::PerKeyConcurrency),
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
    /// Overload-rate threshold, 0 to 1 (adaptive consumers).
    #[arg(long)]
    pub error_threshold: Option<f64>,
    /// HTTP statuses that mean overload, like 429,503,502,504 (adaptive consumers); any
    /// other failure is the job's own and does not shrink the limit.
    #[arg(long, value_name = "STATUSES")]
    pub overload_status: Option<OverloadStatus>,
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
    /// Keep completed jobs this long (1h, 7days), with their history, for `weir jobs
    /// --state done`, `weir job show` and the web UI; at most --keep-completed-count of
    /// them (default 10000). Off by default: a completed job is deleted.
    #[arg(long, value_name = "AGE", value_parser = humantime::parse_duration)]
    pub keep_completed: Option<std::time::Duration>,
    /// Keep at most this many completed jobs, the newest (at least 1); alone, it keeps
    /// them without an age limit.
    #[arg(long, value_name = "N")]
    pub keep_completed_count: Option<u64>,
    /// Runs each job's history keeps, 0 to 50 (default 5): start, end, worker, outcome
    /// and error of its last runs, shown by `weir job show`.
    #[arg(long, value_name = "N")]
    pub history_runs: Option<u32>,
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
    /// Jobs/s each job key (a job's `key`: tenant, customer, destination) starts across
    /// the fleet (5/s); a key at its rate holds back only its own jobs, uncharged.
    #[arg(long, value_parser = str::parse::<Rate>)]
    pub per_key_rate: Option<Rate>,
    /// Burst for --per-key-rate (default: a tenth of its count, at least 1).
    #[arg(long, requires = "per_key_rate", value_name = "N")]
    pub per_key_burst: Option<u32>,
    /// Jobs of each job key leased at once across the fleet, at least 1; a key at its
    /// limit holds back only its own jobs, uncharged.
    #[arg(long, value_name = "N")]
    pub per_key_concurrency: Option<u64>,
    /// A key's own rate, in place of --per-key-rate: acme=50/s (repeatable).
    #[arg(long = "key", value_name = "KEY=RATE", value_parser = parse_key_rate)]
    pub key_rates: Vec<(String, Rate)>,
    /// A key's own concurrency, in place of --per-key-concurrency: acme=10 (repeatable).
    #[arg(long = "key-concurrency", value_name = "KEY=N", value_parser = parse_key_concurrency)]
    pub key_concurrencies: Vec<(String, u64)>,
}

impl SetArgs {
    /// The keys' own limits the flags give.
    pub(super) fn key_overrides(&self) -> BTreeMap<String, KeyLimits> {
        let mut o: BTreeMap<String, KeyLimits> = BTreeMap::new();
        for (k, r) in &self.key_rates {
            o.entry(k.clone()).or_default().rate = Some(r.with_burst(Settings::default_global_burst(r)));
        }
        for (k, c) in &self.key_concurrencies {
            o.entry(k.clone()).or_default().concurrency = Some(*c);
        }
        o
    }
}

fn split_key(s: &str) -> Result<(&str, &str), String> {
    s.split_once('=')
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| format!("{s:?}: write it as KEY=VALUE, like acme=50/s"))
}

fn parse_key_rate(s: &str) -> Result<(String, Rate), String> {
    let (k, v) = split_key(s)?;
    let r: Rate = v.parse().map_err(|e| format!("key {k}: {e}"))?;
    Ok((k.to_owned(), r))
}

fn parse_key_concurrency(s: &str) -> Result<(String, u64), String> {
    let (k, v) = split_key(s)?;
    let c: u64 = v
        .parse()
        .map_err(|_| format!("key {k}: {v:?} is not a count of jobs"))?;
    Ok((k.to_owned(), c))
}
