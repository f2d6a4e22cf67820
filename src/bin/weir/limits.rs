//! `weir limits`: the queue's settings hash, which binds every consumer of the queue: the
//! runtime limits a live fleet applies within a second, the global limits the whole fleet
//! obeys together, and the dead-letter cap. (The limit flags of `weir work` are the
//! library's `weir::limiter::LimiterOptions`.) A partitioned queue's settings are its
//! base lane's; each partition holds its share of the fleet-wide ones (`Settings::share`).

use crate::Common;
use clap::{Args, Subcommand};
use std::collections::BTreeMap;
use std::process::ExitCode;
use weir::keys::QueueKeys;
use weir::limiter::{OverloadStatus, Rate, Target};
use weir::queue::partitions::Partitions;
use weir::settings::{Cleared, DEFAULT_DEAD_CAP, KeyLimits, RateSetting, Settings};

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
    fn groups(&self) -> Vec<Cleared> {
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
    fn key_overrides(&self) -> BTreeMap<String, KeyLimits> {
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

pub(crate) async fn run(a: LimitsArgs) -> crate::error::Result<ExitCode> {
    let access = match a.command {
        LimitsCommand::Get => crate::known::Access::Read,
        _ => crate::known::Access::Write,
    };
    let mut conn = a.common.checked_conn(access).await?;
    let queue = &a.common.queue;
    match a.command {
        LimitsCommand::Get => {}
        LimitsCommand::Clear(c) if !c.groups().is_empty() || !c.keys.is_empty() => {
            Settings::clear_some(&mut conn, queue, &c.groups()).await?;
            Settings::clear_keys(&mut conn, queue, &c.keys).await?;
        }
        LimitsCommand::Clear(_) => Settings::clear(&mut conn, queue).await?,
        LimitsCommand::Set(s) => {
            let update = Settings {
                min: s.min_concurrency,
                max: s.max_concurrency,
                target_p95: s.target_p95,
                error_threshold: s.error_threshold,
                overload_status: s.overload_status.clone(),
                rate: s.rate.map(|r| s.burst.map_or(r, |b| r.with_burst(b))),
                dead_cap: s.dead_cap,
                keep_completed: s.keep_completed,
                keep_completed_count: s.keep_completed_count,
                history_runs: s.history_runs,
                global_rate: s.global_rate.map(|r| {
                    let burst = s
                        .global_burst
                        .unwrap_or_else(|| Settings::default_global_burst(&r));
                    r.with_burst(burst)
                }),
                global_concurrency: s.global_concurrency,
                key_rate: s.per_key_rate.map(|r| {
                    let burst = s
                        .per_key_burst
                        .unwrap_or_else(|| Settings::default_global_burst(&r));
                    r.with_burst(burst)
                }),
                key_concurrency: s.per_key_concurrency,
                key_overrides: s.key_overrides(),
            };
            Settings::update(&mut conn, queue, &update).await?;
        }
    }
    show(&a.common, &mut conn).await?;
    Ok(ExitCode::SUCCESS)
}

/// What `weir limits` prints after any subcommand: the settings stored now, a partitioned
/// queue's shares, what the fleet holds, and the keys held back the most.
async fn show(common: &Common, conn: &mut weir::Conn) -> crate::error::Result<()> {
    let queue = &common.queue;
    let now = Settings::load(conn, queue).await?;
    let cap = match now.dead_cap {
        Some(_) => String::new(),
        None => format!(" (dead_cap={DEFAULT_DEAD_CAP}: the default)"),
    };
    if now == Settings::default() {
        println!("queue {queue}: no runtime settings (consumers use their own flags){cap}");
    } else {
        println!("queue {queue}: {now}{cap}");
    }
    let parts = Partitions::read(conn, queue).await?;
    if let Some(p) = &parts {
        print!("{}", shares(p.count(), &now));
    }
    print!("{}", fleet(common, &now).await?);
    if now.per_key() {
        let lanes: Vec<QueueKeys> = match &parts {
            Some(p) => p.lanes().cloned().collect(),
            None => vec![QueueKeys::new(queue)?],
        };
        print!("{}", throttled(conn, &lanes).await?);
    }
    Ok(())
}

/// What each of a partitioned queue's `parts` partitions holds of the queue's fleet-wide
/// limits: its share (the base lane holds the queue's own values, shown above).
fn shares(parts: usize, now: &Settings) -> String {
    let all: Vec<Settings> = (0..parts).map(|i| now.share(parts, i)).collect();
    let range = |f: fn(&Settings) -> Option<u64>| {
        let v: Vec<u64> = all.iter().filter_map(f).collect();
        let (lo, hi) = (v.iter().min()?, v.iter().max()?);
        Some(if lo == hi {
            lo.to_string()
        } else {
            format!("{lo} to {hi}")
        })
    };
    let mut held = Vec::new();
    if let (Some(r), Some(b)) = (
        all[0].global_rate,
        range(|s| s.global_rate.map(|r| u64::from(r.burst))),
    ) {
        held.push(format!("global rate {} (burst {b})", r.spec()));
    }
    if let Some(c) = range(|s| s.global_concurrency) {
        held.push(format!("global concurrency {c}"));
    }
    if let Some(c) = range(|s| s.dead_cap) {
        held.push(format!("dead-letter cap {c}"));
    }
    let each = match held.is_empty() {
        true => "no fleet-wide limit to share".to_owned(),
        false => held.join(", "),
    };
    format!(
        "partitions {parts}, each holding its share: {each}; per-key limits and runtime knobs as the queue's\n"
    )
}

/// How many keys `weir limits get` lists among the most held back.
const TOP_KEYS: isize = 10;

/// The keys whose limits held back the most jobs so far, over `lanes` (the queue, or a
/// partitioned queue's lanes: a key's jobs are mostly in one of them).
async fn throttled(conn: &mut weir::Conn, lanes: &[QueueKeys]) -> crate::error::Result<String> {
    // In the order the lanes list them (ties keep it), summed per key.
    let mut top: Vec<(String, f64)> = Vec::new();
    for lane in lanes {
        let got: Vec<(String, f64)> = redis::cmd("ZRANGE")
            .arg(lane.key_throttled())
            .arg(0)
            .arg(TOP_KEYS - 1)
            .arg("REV")
            .arg("WITHSCORES")
            .query_async(conn)
            .await?;
        for (k, n) in got {
            match top.iter_mut().find(|(t, _)| *t == k) {
                Some(t) => t.1 += n,
                None => top.push((k, n)),
            }
        }
    }
    top.sort_by(|a, b| b.1.total_cmp(&a.1));
    top.truncate(TOP_KEYS as usize);
    if top.is_empty() {
        return Ok("keys held back: none so far\n".into());
    }
    let mut out = String::from("keys held back the most (jobs so far):\n");
    for (k, n) in top {
        out += &format!("  {k}: {n}\n");
    }
    Ok(out)
}

/// What the fleet holds now: under a global limit the queue's leases against it; and
/// each live consumer's share, its limit and, for an adaptive one, the limiter's latest
/// decision with the figures that drove it (from the worker registry, as of its last
/// heartbeat).
async fn fleet(common: &Common, now: &Settings) -> crate::error::Result<String> {
    let q = common.queue_handle().await?;
    let workers = q.workers().await?;
    let mut out = if now.global_rate.is_some() || now.global_concurrency.is_some() {
        let stats = q.stats().await?;
        match now.global_concurrency {
            Some(c) => format!(
                "fleet: {} leased of a global concurrency of {c}\n",
                stats.in_flight
            ),
            None => format!("fleet: {} leased\n", stats.in_flight),
        }
    } else {
        "consumers:\n".to_owned()
    };
    for w in &workers.workers {
        out += &format!(
            "  consumer {} ({} pid {}): {} leased, {} running, limit {}\n",
            w.id, w.host, w.pid, w.leased, w.running, w.concurrency_limit
        );
        let decision = w
            .limiter
            .as_deref()
            .unwrap_or("no decision (a fixed limit, or no window closed yet)");
        out += &format!("    limiter: {decision}\n");
    }
    if workers.workers.is_empty() {
        out += "  no live consumers\n";
    }
    Ok(out)
}
