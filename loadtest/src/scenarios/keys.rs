//! `keys`: jobs spread over `--keys` keys, one of them (`tenant-0`) slow or hot, run
//! twice on fresh queues with the same consumer: (A) without that key's jobs, (B) with
//! them. The queue always has a backlog, so the consumer is saturated and the keys
//! compete for its slots. Reports per key, per side: jobs/s and p95 latency (handler;
//! enqueued → done), and the headline: the fast keys' throughput in B over A. Per-key
//! limits (`--per-key-concurrency`, `--per-key-rate`) are stored in each queue's settings
//! before its side runs, so the ratio shows whether the scripts keep one key from slowing
//! the others (the goal: at least 0.9).

use super::timed::{Pace, produce};
use super::{account, base_report, rate, spec};
use crate::cli::KeysArgs;
use crate::feed::{Feed, payload};
use crate::fleet::{Fleet, Totals};
use crate::key_limits::{self, KeyLimits};
use crate::keyed::{KeyFigures, Keyed, KeyedHandler, Mix, SPECIAL, key_name};
use crate::observed::Observed;
use crate::report::{Report, round};
use crate::sampler::{Row, Sampler, SamplerConfig};
use crate::target::Target;
use anyhow::Context;
use serde_json::json;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Length of each side.
const DEFAULT_LENGTH: Duration = Duration::from_secs(5);
/// Few slots, so the fast keys' ideal (32 / 5 ms = 6,400 jobs/s) is far below what Redis
/// and two cores can drain: the handler's latency, not the machine, sets the rate.
const DEFAULT_CONCURRENCY: usize = 32;
const DEFAULT_SLOW_LATENCY: Duration = Duration::from_millis(200);
/// The fast keys' throughput in B over A that per-key limits are to keep.
pub(crate) const GOAL: f64 = 0.9;

/// What the run does, checked once.
struct Plan {
    keys: usize,
    hot_share: Option<f64>,
    fast: Duration,
    special: Duration,
    limits: KeyLimits,
    length: Duration,
}

impl Plan {
    fn new(a: &KeysArgs) -> anyhow::Result<Plan> {
        if !(2..=1000).contains(&a.keys) {
            anyhow::bail!("--keys must be between 2 and 1000");
        }
        if a.hot_key_share.is_some_and(|h| !(h > 0.0 && h < 1.0)) {
            anyhow::bail!("--hot-key-share must be above 0 and below 1");
        }
        if a.per_key_concurrency == Some(0) {
            anyhow::bail!("--per-key-concurrency must be at least 1");
        }
        if a.fast_key_latency.is_zero() {
            anyhow::bail!("--fast-key-latency must be above 0");
        }
        if a.common.consumers() != 1 {
            anyhow::bail!(
                "keys runs one consumer in this process (its handler's latency depends on the job's key): drop --consumers"
            );
        }
        let special = match (a.slow_key_latency, a.hot_key_share) {
            (Some(d), _) => d,
            (None, Some(_)) => a.fast_key_latency,
            (None, None) => DEFAULT_SLOW_LATENCY,
        };
        Ok(Plan {
            keys: a.keys,
            hot_share: a.hot_key_share,
            fast: a.fast_key_latency,
            special,
            limits: KeyLimits {
                concurrency: a.per_key_concurrency,
                rate: a.per_key_rate.map(|r| (r, a.per_key_burst)),
            },
            length: a.common.duration.unwrap_or(DEFAULT_LENGTH),
        })
    }

    /// `slow`, `hot` or `slow+hot`: what makes tenant-0 special.
    fn role(&self) -> &'static str {
        match (self.special > self.fast, self.hot_share.is_some()) {
            (true, true) => "slow+hot",
            (false, true) => "hot",
            _ => "slow",
        }
    }

    fn latencies(&self) -> Vec<Duration> {
        (0..self.keys)
            .map(|k| if k == SPECIAL { self.special } else { self.fast })
            .collect()
    }

    fn mix(&self, with_special: bool) -> Mix {
        Mix {
            keys: self.keys,
            hot_share: self.hot_share,
            with_special,
        }
    }
}

/// One side of the run.
struct Side {
    figures: Vec<KeyFigures>,
    enqueued: Vec<u64>,
    window: Duration,
    capped: bool,
    totals: Totals,
    observed: Arc<Observed>,
    foreign: u64,
    rows: Vec<Row>,
}

impl Side {
    fn rate(&self, k: usize) -> f64 {
        rate(self.figures[k].done, self.window)
    }

    fn fast_rate(&self) -> f64 {
        round((1..self.figures.len()).map(|k| self.rate(k)).sum(), 1)
    }
}

pub(crate) async fn run(a: KeysArgs) -> anyhow::Result<(Report, Vec<Row>)> {
    let mut c = a.common.clone();
    c.concurrency.get_or_insert(DEFAULT_CONCURRENCY);
    let plan = Plan::new(&a)?;
    let target = Target::open(&c).await?;
    let without = side(&target, &c, &plan, false).await?;
    eprintln!(
        "A (without {}) done: fast keys {:.0} jobs/s; now B (with it)",
        key_name(SPECIAL),
        without.fast_rate()
    );
    let with = side(&target, &c, &plan, true).await?;
    let mut r = report(&c, &plan, &without, &with);
    r.put("redis", target.describe());
    if let Some(dir) = &c.out {
        write_keys_csv(&dir.join("keys.csv"), &plan, &without, &with)?;
        let mut a_report = base_report("keys", &c, without.enqueued.iter().sum());
        a_report.put("side", "without");
        a_report.set_latency("end_to_end", &without.observed.total.summary());
        a_report.write(&dir.join("without"), &without.rows)?;
    }
    Ok((r, with.rows))
}

/// One side on a fresh queue: settings stored, a backlog of `mix` jobs kept waiting for
/// the plan's length while the consumer works, then the consumer stopped (the jobs left
/// waiting are not run) and the settings removed.
async fn side(
    target: &Target,
    c: &crate::cli::Common,
    plan: &Plan,
    with_special: bool,
) -> anyhow::Result<Side> {
    let queue = target.queue("keys").await?;
    let concurrency = c.concurrency();
    // One second of the fast keys' ideal waiting, so the consumer never starves between
    // top-ups; the job cap is the ideal over the length with half again to spare.
    let ideal = concurrency as f64 / plan.fast.as_secs_f64();
    let backlog = (ideal as u64).max(2000);
    let cap = c
        .jobs
        .unwrap_or((ideal * plan.length.as_secs_f64() * 1.5) as u64 + 2 * backlog);
    let observed = Arc::new(Observed::new(cap, false));
    let keyed = Arc::new(Keyed::new(plan.latencies(), observed.clone()));
    let mix = plan.mix(with_special);
    let mut feed = Feed::new(
        target.conn.clone(),
        &queue,
        payload(c.payload_bytes, c.seed),
        cap,
        5,
    )
    .await?
    .with_keys(mix.keyer());
    key_limits::store(&target.conn, &queue, &plan.limits).await?;
    feed.push(backlog).await?;
    let fleet = Fleet::local(spec(c, target, &queue, false)?, KeyedHandler(keyed.clone()))?;
    let sampler = Sampler::start(SamplerConfig {
        observed: observed.clone(),
        gauges: fleet.gauges(),
        conn: target.conn.clone(),
        queue: queue.clone(),
        ideal: None,
        total: None,
        quiet: c.quiet,
    });
    let started = Instant::now();
    produce(
        &mut feed,
        target,
        &queue,
        Pace::Backlog(backlog),
        started + plan.length,
    )
    .await?;
    let window = started.elapsed();
    let figures = keyed.snapshot();
    let totals = fleet.stop().await?;
    let rows = sampler.finish().await;
    key_limits::clear(&target.conn, &queue, &plan.limits).await?;
    target.cleanup(&queue).await;
    Ok(Side {
        figures,
        enqueued: mix.counts(feed.enqueued()),
        capped: window + Duration::from_millis(100) < plan.length,
        window,
        totals,
        foreign: keyed.foreign(),
        observed,
        rows,
    })
}

/// The fast keys' throughput in B over A.
fn ratio(without: &Side, with: &Side) -> f64 {
    round(with.fast_rate() / without.fast_rate().max(1e-9), 3)
}

fn report(c: &crate::cli::Common, plan: &Plan, without: &Side, with: &Side) -> Report {
    let mut r = base_report("keys", c, with.enqueued.iter().sum());
    r.achieved_jobs_per_s = Some(rate(with.figures.iter().map(|f| f.done).sum(), with.window));
    r.elapsed_s = round((without.window + with.window).as_secs_f64(), 3);
    r.set_latency("end_to_end", &with.observed.total.summary());
    r.set_limits(&with.rows);
    account(&mut r, None, &with.totals);
    r.put(
        "keys",
        json!({
            "keys": plan.keys,
            "special_key": key_name(SPECIAL),
            "special": plan.role(),
            "special_latency_ms": plan.special.as_secs_f64() * 1000.0,
            "fast_latency_ms": plan.fast.as_secs_f64() * 1000.0,
            "hot_key_share": plan.hot_share,
            "side_length_s": plan.length.as_secs_f64(),
        }),
    );
    r.put("per_key_limits", plan.limits.describe());
    for (name, s) in [("without", without), ("with", with)] {
        r.put(
            name,
            json!({
                "window_s": round(s.window.as_secs_f64(), 3),
                "enqueued": s.enqueued.iter().sum::<u64>(),
                "processed": s.figures.iter().map(|f| f.done).sum::<u64>(),
                "fast_keys_jobs_per_s": s.fast_rate(),
                "consumer_totals": s.totals,
            }),
        );
        if s.capped {
            r.put("capped", format!("--jobs ran out in side {name}: it ran shorter"));
        }
        if s.foreign > 0 {
            r.put(
                "check_failed",
                "jobs with keys the harness did not give were processed",
            );
        }
    }
    r.put("per_key", per_key(plan, without, with));
    r.put("fast_keys_ratio", ratio(without, with));
    r.put("fast_keys_ratio_goal", GOAL);
    r.table = Some(("per_key", table(plan, without, with)));
    r
}

/// One object per key and side, as in `keys.csv`.
fn per_key(plan: &Plan, without: &Side, with: &Side) -> Vec<serde_json::Value> {
    let mut v = Vec::new();
    for (name, s) in [("without", without), ("with", with)] {
        for k in 0..plan.keys {
            if k == SPECIAL && name == "without" {
                continue;
            }
            let f = &s.figures[k];
            v.push(json!({
                "side": name,
                "key": key_name(k),
                "role": if k == SPECIAL { plan.role() } else { "fast" },
                "enqueued": s.enqueued[k],
                "jobs": f.done,
                "jobs_per_s": s.rate(k),
                "handler_p95_ms": round(f.handler.p95_ms, 3),
                "end_to_end_p95_ms": round(f.end_to_end.p95_ms, 3),
            }));
        }
    }
    v
}

/// The summary's table: a row per key, A and B side by side, then the fast keys' totals
/// and the ratio line.
fn table(plan: &Plan, without: &Side, with: &Side) -> String {
    let mut t = String::new();
    let limits = match plan.limits.describe() {
        serde_json::Value::Null => "none (the unlimited baseline)".to_owned(),
        l => l.to_string(),
    };
    let _ = writeln!(
        t,
        "per key: A without {0}, B with it ({1}); per-key limits: {limits}",
        key_name(SPECIAL),
        plan.role()
    );
    let _ = writeln!(
        t,
        "  {:<12} {:<8} {:>10} {:>11} {:>11} {:>10} {:>11} {:>11}",
        "key", "role", "A jobs/s", "A hdl p95", "A e2e p95", "B jobs/s", "B hdl p95", "B e2e p95"
    );
    let ms = |v: f64| format!("{v:.1} ms");
    for k in 0..plan.keys {
        let a = if k == SPECIAL {
            ["-".to_owned(), "-".to_owned(), "-".to_owned()]
        } else {
            let f = &without.figures[k];
            [
                format!("{:.1}", without.rate(k)),
                ms(f.handler.p95_ms),
                ms(f.end_to_end.p95_ms),
            ]
        };
        let f = &with.figures[k];
        let role = if k == SPECIAL { plan.role() } else { "fast" };
        let _ = writeln!(
            t,
            "  {:<12} {:<8} {:>10} {:>11} {:>11} {:>10.1} {:>11} {:>11}",
            key_name(k),
            role,
            a[0],
            a[1],
            a[2],
            with.rate(k),
            ms(f.handler.p95_ms),
            ms(f.end_to_end.p95_ms)
        );
    }
    let _ = writeln!(
        t,
        "  {:<21} {:>10.1} {:>35.1}",
        "fast keys, total",
        without.fast_rate(),
        with.fast_rate()
    );
    let _ = writeln!(
        t,
        "fast keys' throughput, B / A: {:.3} (goal >= {GOAL})",
        ratio(without, with)
    );
    t
}

/// `keys.csv`: a row per key and side.
fn write_keys_csv(path: &std::path::Path, plan: &Plan, without: &Side, with: &Side) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut s = String::from("side,key,role,enqueued,jobs,jobs_per_s,handler_p95_ms,end_to_end_p95_ms\n");
    for row in per_key(plan, without, with) {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{}",
            row["side"].as_str().unwrap_or_default(),
            row["key"].as_str().unwrap_or_default(),
            row["role"].as_str().unwrap_or_default(),
            row["enqueued"],
            row["jobs"],
            row["jobs_per_s"],
            row["handler_p95_ms"],
            row["end_to_end_p95_ms"]
        );
    }
    std::fs::write(path, s).with_context(|| format!("cannot write {}", path.display()))
}
