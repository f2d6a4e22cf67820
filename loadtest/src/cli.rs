//! The options of the scenarios (those they share, and each one's), as clap arguments:
//! a leaf that the scenarios, the fleet and the downstream read, and that imports none of
//! them (the command tree that names every scenario is `command.rs`).

use crate::limits::LimitOpts;
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;
use weir::limiter::Rate;
use weir::{ConsumerConfig, FetcherConfig};

mod downstream_args;
pub(crate) use downstream_args::{DownstreamArgs, DownstreamOpts};

pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("invalid duration {s:?}: {e}"))
}

/// Each consumer's concurrency limit unless `--concurrency` (or the scenario) says.
pub(crate) const DEFAULT_CONCURRENCY: usize = 256;

/// Options every scenario has.
#[derive(Args, Debug, Clone)]
pub(crate) struct Common {
    /// Use this Redis (only fresh queues named lt-<scenario>-<random>); default: a private
    /// redis-server from PATH on a free port, stopped at the end.
    #[arg(long)]
    pub redis_url: Option<String>,
    /// Start a private Redis Cluster of this many primaries (at least 3) instead of a
    /// private redis-server.
    #[arg(long, value_name = "PRIMARIES", conflicts_with = "redis_url")]
    pub cluster: Option<usize>,
    /// Make every fresh queue a partitioned queue of this many partitions (on a cluster,
    /// spread over the primaries).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub partitions: Option<u64>,
    /// Jobs to enqueue (the cap for time-based scenarios; default depends on the scenario).
    #[arg(long)]
    pub jobs: Option<u64>,
    /// Payload size in bytes.
    #[arg(long, default_value_t = 100)]
    pub payload_bytes: usize,
    /// Seed of payloads, kill moments and the downstream's draws.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Upper bound on the run (time-based scenarios: their length).
    #[arg(long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Consumer processes; 1 runs the consumer inside the harness [default: 1; chaos: 2].
    #[arg(long)]
    pub consumers: Option<usize>,
    /// Concurrency limit of each consumer (with the adaptive limiter: where it starts)
    /// [default: 256; keys: 32].
    #[arg(long)]
    pub concurrency: Option<usize>,
    #[command(flatten)]
    pub limits: LimitOpts,
    /// Jobs per fetch call.
    #[arg(long, default_value_t = FetcherConfig::DEFAULT_BATCH)]
    pub batch: usize,
    /// Fetch calls in flight per consumer.
    #[arg(long, default_value_t = FetcherConfig::DEFAULT_PIPELINE)]
    pub pipeline: usize,
    /// Lease length [default: 30s; chaos: 2s, so killed consumers' jobs come back soon].
    #[arg(long, value_parser = parse_duration)]
    pub visibility_timeout: Option<Duration>,
    /// Do not track job ids (no lost/duplicate figures): to measure the tracking's cost.
    #[arg(long)]
    pub no_track: bool,
    /// Write result.json, timeseries.csv and PNG charts into this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Worker threads of the harness process and of each consumer process [default: as
    /// `weir --threads`: one per core, less one when Redis runs on this machine, as the
    /// private ones do].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    pub worker_threads: Option<u16>,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct DrainArgs {
    #[command(flatten)]
    pub common: Common,
    /// Run untracked and tracked drains side by side (alternating order) and report the
    /// tracking's cost.
    #[arg(long, conflicts_with_all = ["compare_bare", "compare_backlog"])]
    pub compare_tracking: bool,
    /// Run weir's enqueue and drain side by side with raw RPUSH and a bare reliable drain
    /// (Lua LPOP + ZADD lease, Lua ZREM ack) against the same Redis, alternating, and
    /// report rates, Redis CPU per job and memory as ratios.
    #[arg(long, conflicts_with = "compare_backlog")]
    pub compare_bare: bool,
    /// Run the drain on a private single redis-server and on a private cluster of
    /// --cluster primaries (default 3) with a queue of --partitions (default twice the
    /// primaries), alternating, and report Redis CPU per job on each, how evenly the
    /// primaries share it, and the drain speedup it projects for N primaries on N cores.
    #[arg(long, conflicts_with_all = ["compare_bare", "compare_backlog", "compare_tracking", "redis_url"])]
    pub compare_single: bool,
    /// Run drains with fleet-wide limits set far above the drain rate (a global rate of
    /// 10,000,000/s, a global concurrency of 10,000,000) and without, alternating, and
    /// report what the limits cost: drain rate and Redis CPU per job.
    #[arg(long, conflicts_with_all = ["compare_bare", "compare_backlog", "compare_tracking", "compare_single"])]
    pub compare_global_limits: bool,
    /// Drain rate with --big-backlog jobs waiting against --small-backlog waiting (--jobs
    /// drained from each in rounds of --small-backlog; default 10 rounds).
    #[arg(long)]
    pub compare_backlog: bool,
    /// --compare-bare: raw RPUSH commands in flight (each of weir's bulk-enqueue chunk
    /// size); the default is as many as weir's bulk enqueue keeps, 1 waits for each.
    #[arg(long, default_value_t = crate::bare::IN_FLIGHT)]
    pub rpush_in_flight: usize,
    /// --compare-backlog: jobs waiting on the small side, and drained per round.
    #[arg(long, default_value_t = 10_000)]
    pub small_backlog: u64,
    /// --compare-backlog: jobs waiting on the big side.
    #[arg(long, default_value_t = 1_000_000)]
    pub big_backlog: u64,
    /// Pairs of runs of a comparison (figures reported: the medians).
    #[arg(long, visible_alias = "reps", default_value_t = 3)]
    pub rounds: usize,
    /// Keep up to N completed jobs, with their history, on every queue the run drains
    /// (`weir limits set --keep-completed-count N`): to price keeping them.
    #[arg(long, value_name = "N")]
    pub keep_completed_count: Option<u64>,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct SteadyArgs {
    #[command(flatten)]
    pub common: Common,
    /// Jobs enqueued per second [default: 5000], or a share of the drain rate as N%: a
    /// drain of 200,000 jobs with the same consumers runs first, against the same Redis,
    /// and sets the rate (`--enqueue-rate 50%`: half the drain rate of this machine now).
    /// `--rate` is each consumer's cap, as in `weir work`.
    #[arg(long, value_name = "N|N%", value_parser = parse_enqueue_rate)]
    pub enqueue_rate: Option<EnqueueRate>,
    /// First run the bare reliable queue (as `drain --compare-bare` has it: Lua LPOP +
    /// ZADD lease, Lua ZREM ack, raw RPUSH) fed at the same rate, the same way, for the
    /// same time, against the same Redis, and report its end-to-end latency beside
    /// weir's: the floor this machine sets at that rate. With `--enqueue-rate N%`, the
    /// bare drain's rate is measured too and the report says which share of it the rate
    /// is (`share_of_bare_drain`): near 1, the bare queue's latency is its backlog's.
    #[arg(long)]
    pub compare_bare: bool,
    /// With --compare-bare: rounds of the two runs at the same rate, the bare queue first
    /// in the first round, then the other way round; the ratios reported are the medians
    /// of the rounds' (one round's ratio moves by tens of percent on a shared machine).
    #[arg(long, visible_alias = "reps", default_value_t = 1)]
    pub rounds: usize,
}

/// `steady`'s enqueue rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum EnqueueRate {
    /// Jobs per second.
    PerSecond(u64),
    /// This share (0 to 1] of a drain measured first, in the same run.
    OfDrain(f64),
}

pub(crate) fn parse_enqueue_rate(s: &str) -> Result<EnqueueRate, String> {
    if let Some(pct) = s.strip_suffix('%') {
        match pct.trim().parse::<f64>() {
            Ok(p) if p > 0.0 && p <= 100.0 => Ok(EnqueueRate::OfDrain(p / 100.0)),
            _ => Err(format!(
                "{s:?}: a share of the drain rate is above 0% and at most 100%"
            )),
        }
    } else {
        match s.trim().parse::<u64>() {
            Ok(0) => Err("--enqueue-rate must be above 0".into()),
            Ok(n) => Ok(EnqueueRate::PerSecond(n)),
            Err(_) => Err(format!(
                "{s:?}: jobs per second (5000) or a share of the drain rate (50%)"
            )),
        }
    }
}

#[derive(Args, Debug, Clone)]
pub(crate) struct ChaosArgs {
    #[command(flatten)]
    pub common: Common,
    /// Consumer processes to kill (SIGKILL) and restart, at random moments.
    #[arg(long, default_value_t = 5)]
    pub kills: usize,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct KeysArgs {
    #[command(flatten)]
    pub common: Common,
    /// Keys the jobs are spread over evenly, 2 to 1000; tenant-0 is the slow or hot one.
    #[arg(long, default_value_t = 20)]
    pub keys: usize,
    /// Handler latency of the fast keys' jobs.
    #[arg(long, default_value = "5ms", value_parser = parse_duration)]
    pub fast_key_latency: Duration,
    /// Handler latency of the slow key's jobs [default: 200ms, unless --hot-key-share is
    /// given: then the hot key's jobs take --fast-key-latency].
    #[arg(long, value_parser = parse_duration)]
    pub slow_key_latency: Option<Duration>,
    /// Share of all jobs that carry the hot key, above 0 and below 1 (0.5: half of them).
    #[arg(long, value_name = "SHARE")]
    pub hot_key_share: Option<f64>,
    /// Stored as the queue setting key_concurrency before each side runs (removed after):
    /// jobs of each key leased at once, fleet-wide [default: none, the unlimited baseline].
    #[arg(long, value_name = "N")]
    pub per_key_concurrency: Option<u64>,
    /// Stored as the queue setting key_rate: jobs of each key started per second (5/s).
    #[arg(long, value_name = "N/s")]
    pub per_key_rate: Option<Rate>,
    /// Stored as key_burst with --per-key-rate [default: none stored, the scripts' own].
    #[arg(long, value_name = "B", requires = "per_key_rate")]
    pub per_key_burst: Option<u32>,
}

impl Common {
    /// Consumer processes, 1 (in-process) unless told.
    pub(crate) fn consumers(&self) -> usize {
        self.consumers.unwrap_or(1)
    }

    /// Concurrency limit of each consumer, [`DEFAULT_CONCURRENCY`] unless told.
    pub(crate) fn concurrency(&self) -> usize {
        self.concurrency.unwrap_or(DEFAULT_CONCURRENCY)
    }

    /// Lease length, the library's default unless told.
    pub(crate) fn visibility(&self) -> Duration {
        self.visibility_timeout.unwrap_or(ConsumerConfig::DEFAULT_LEASE)
    }

    /// Checks ranges once, with messages that name them.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.consumers.is_some_and(|k| !(1..=64).contains(&k)) {
            return Err("--consumers must be between 1 and 64".into());
        }
        if self.jobs == Some(0) || self.jobs.is_some_and(|j| j > 1_000_000_000) {
            return Err("--jobs must be between 1 and 1000000000".into());
        }
        if self
            .visibility_timeout
            .is_some_and(|v| v < Duration::from_millis(100))
        {
            return Err("--visibility-timeout must be at least 100ms".into());
        }
        if self.payload_bytes > 1_000_000 {
            return Err("--payload-bytes must be at most 1000000".into());
        }
        if self.concurrency == Some(0) {
            return Err("--concurrency must be at least 1".into());
        }
        self.limits.limiter().map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enqueue_rate_is_jobs_per_second_or_a_share_of_the_drain() {
        assert_eq!(parse_enqueue_rate("5000"), Ok(EnqueueRate::PerSecond(5000)));
        assert_eq!(parse_enqueue_rate("50%"), Ok(EnqueueRate::OfDrain(0.5)));
        assert_eq!(parse_enqueue_rate("100%"), Ok(EnqueueRate::OfDrain(1.0)));
        assert_eq!(parse_enqueue_rate("12.5%"), Ok(EnqueueRate::OfDrain(0.125)));
        for bad in ["0", "0%", "101%", "-5%", "fast", "", "%", "5000/s"] {
            assert!(parse_enqueue_rate(bad).is_err(), "{bad:?}");
        }
    }
}
