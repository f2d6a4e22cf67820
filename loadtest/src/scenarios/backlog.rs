//! `drain --compare-backlog`: does the drain rate depend on how many jobs wait? Both sides
//! drain --jobs (default ten rounds) in rounds of `small` jobs (--small-backlog, 10,000),
//! each round a consumer started, run until it has processed `small` more jobs, and
//! stopped: the small side from a fresh queue of `small` jobs per round, the big side off
//! the top of one queue of `big` (--big-backlog, 1,000,000; --jobs is held to half of it,
//! so it never holds fewer than `big / 2`). The same rounds on both
//! sides, so starting and stopping consumers costs both alike; the sides alternate
//! (ABBA) over --rounds. Reports each side's rate, Redis CPU per job and this process's
//! peak memory, and big over small.

use super::drain::spent;
use super::{median, spec};
use crate::cli::{Common, DrainArgs};
use crate::cpu::{peak_rss, redis_cpu, reset_peak_rss};
use crate::feed::{Feed, payload};
use crate::fleet::Fleet;
use crate::observed::Observed;
use crate::report::{Report, round};
use crate::sampler::Row;
use crate::target::Target;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest wait for one round.
const ROUND_CAP: Duration = Duration::from_secs(120);

/// What one side measured.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub(crate) struct Side {
    pub drain_jobs_per_s: f64,
    pub redis_cpu_us_per_job: f64,
    pub drain_peak_rss_mb: f64,
}

/// Time, Redis CPU and peak memory summed over a side's rounds.
#[derive(Default)]
struct Sums {
    jobs: u64,
    time: Duration,
    redis_s: f64,
    peak_rss: u64,
}

impl Sums {
    fn side(&self) -> Side {
        Side {
            drain_jobs_per_s: round(self.jobs as f64 / self.time.as_secs_f64().max(1e-9), 1),
            redis_cpu_us_per_job: round(self.redis_s * 1e6 / self.jobs.max(1) as f64, 3),
            drain_peak_rss_mb: round(self.peak_rss as f64 / 1e6, 1),
        }
    }
}

/// Enqueues `n` jobs into a fresh queue; returns it and its accounting.
async fn fill(target: &Target, c: &Common, n: u64) -> anyhow::Result<(String, Arc<Observed>)> {
    let queue = target.queue("backlog").await?;
    let mut feed = Feed::new(
        target.conn.clone(),
        &queue,
        payload(c.payload_bytes, c.seed),
        n,
        5,
    )
    .await?;
    feed.push_all().await?;
    Ok((queue, Arc::new(Observed::new(n, false))))
}

/// The two backlogs.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    small: u64,
    big: u64,
}

/// One round: a consumer on `queue` until `observed` counts `n` more jobs; adds its time
/// (start to the last of them), Redis CPU and peak memory to `sums`.
async fn round_on(
    target: &Target,
    c: &Common,
    (queue, observed): (&str, &Arc<Observed>),
    n: u64,
    sums: &mut Sums,
) -> anyhow::Result<()> {
    let goal = observed.processed() + n;
    let redis_before = redis_cpu(&target.conn).await;
    reset_peak_rss();
    let started = Instant::now();
    let fleet = Fleet::start(spec(c, target, queue, false)?, 1, false, observed.clone())?;
    while observed.processed() < goal {
        if started.elapsed() > ROUND_CAP {
            fleet.stop().await?;
            anyhow::bail!("a round of {n} jobs took over {ROUND_CAP:?}");
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    sums.time += started.elapsed();
    fleet.stop().await?;
    sums.redis_s += spent(redis_before, redis_cpu(&target.conn).await).unwrap_or(0.0);
    sums.peak_rss = sums.peak_rss.max(peak_rss().unwrap_or(0));
    sums.jobs += n;
    Ok(())
}

/// `rounds` rounds, each from a fresh queue of `s.small` jobs.
async fn small(target: &Target, c: &Common, s: Sizes, rounds: u64) -> anyhow::Result<Side> {
    let mut sums = Sums::default();
    for _ in 0..rounds {
        let (queue, observed) = fill(target, c, s.small).await?;
        round_on(target, c, (&queue, &observed), s.small, &mut sums).await?;
        target.remove(&queue).await;
    }
    Ok(sums.side())
}

/// `rounds` rounds of `s.small` jobs off the top of one queue of `s.big` jobs.
async fn big(target: &Target, c: &Common, s: Sizes, rounds: u64) -> anyhow::Result<Side> {
    let mut sums = Sums::default();
    let (queue, observed) = fill(target, c, s.big).await?;
    for _ in 0..rounds {
        round_on(target, c, (&queue, &observed), s.small, &mut sums).await?;
    }
    target.remove(&queue).await;
    Ok(sums.side())
}

pub(crate) async fn run(target: &Target, a: &DrainArgs) -> anyhow::Result<(Report, Vec<Row>)> {
    let c = &a.common;
    let s = Sizes {
        small: a.small_backlog,
        big: a.big_backlog,
    };
    if s.small == 0 || s.big < 2 * s.small {
        anyhow::bail!("--big-backlog must be at least twice --small-backlog, which must be above 0");
    }
    let jobs = c.jobs.unwrap_or(10 * s.small).clamp(s.small, s.big / 2);
    let rounds = jobs / s.small;
    eprintln!("warm-up: one round of {} jobs, not counted", s.small);
    small(target, c, s, 1).await?;
    let (mut smalls, mut bigs, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..a.rounds.max(1) {
        let (sm, b) = if rep % 2 == 0 {
            let sm = small(target, c, s, rounds).await?;
            (sm, big(target, c, s, rounds).await?)
        } else {
            let b = big(target, c, s, rounds).await?;
            (small(target, c, s, rounds).await?, b)
        };
        let ratio = round(b.drain_jobs_per_s / sm.drain_jobs_per_s.max(1e-9), 3);
        eprintln!(
            "rep {}: {} waiting {:.0} jobs/s ({:.2} µs Redis CPU/job, {:.1} MB), {} waiting {:.0} jobs/s ({:.2} µs, {:.1} MB): {ratio:.3}x",
            rep + 1,
            s.small,
            sm.drain_jobs_per_s,
            sm.redis_cpu_us_per_job,
            sm.drain_peak_rss_mb,
            s.big,
            b.drain_jobs_per_s,
            b.redis_cpu_us_per_job,
            b.drain_peak_rss_mb,
        );
        smalls.push(sm);
        bigs.push(b);
        ratios.push(ratio);
    }
    let mut r = super::base_report("drain", c, rounds * s.small);
    put_comparison(&mut r, s, rounds, [&smalls, &bigs], &ratios);
    r.put("redis", target.describe());
    Ok((r, Vec::new()))
}

/// The medians of both sides and of the reps' ratios (printed and in the report).
fn put_comparison(r: &mut Report, s: Sizes, rounds: u64, [smalls, bigs]: [&[Side]; 2], ratios: &[f64]) {
    let med = |v: &[Side], f: fn(&Side) -> f64| round(median(&v.iter().map(f).collect::<Vec<_>>()), 3);
    let ratio = round(median(ratios), 3);
    eprintln!(
        "median of the reps' ratios, {} waiting over {} waiting: {ratio:.3}x",
        s.big, s.small
    );
    r.drain_jobs_per_s = Some(med(bigs, |x| x.drain_jobs_per_s));
    r.put(
        "compare_backlog",
        serde_json::json!({
            "small_waiting": s.small, "big_waiting": s.big,
            "jobs_per_side": rounds * s.small, "rounds_of": s.small, "reps": ratios.len(),
            "small_drain_jobs_per_s": med(smalls, |x| x.drain_jobs_per_s),
            "big_drain_jobs_per_s": med(bigs, |x| x.drain_jobs_per_s),
            "small_redis_cpu_us_per_job": med(smalls, |x| x.redis_cpu_us_per_job),
            "big_redis_cpu_us_per_job": med(bigs, |x| x.redis_cpu_us_per_job),
            "small_peak_rss_mb": med(smalls, |x| x.drain_peak_rss_mb),
            "big_peak_rss_mb": med(bigs, |x| x.drain_peak_rss_mb),
            "big_vs_small_drain": ratio,
            "big_vs_small_redis_cpu": round(
                med(bigs, |x| x.redis_cpu_us_per_job) / med(smalls, |x| x.redis_cpu_us_per_job).max(1e-9),
                3
            ),
            "small_reps": smalls, "big_reps": bigs, "big_vs_small_reps": ratios,
        }),
    );
}
