//! `drain --compare-single --cluster N --partitions P`: the same drain on a private single
//! redis-server (an ordinary queue) and on a private Redis Cluster of N primaries (a queue
//! of P partitions), in alternating order (ABBA) after one warm-up round of each. On this
//! kind of machine the N primaries share its cores, so their drain rate says little; what
//! carries over to N primaries on N cores is what each job costs Redis and how evenly the
//! primaries share it. Per round and as medians: Redis CPU per job on each (summed over
//! the primaries, from `INFO cpu`), cluster over single, each primary's share of the
//! cluster's Redis CPU, and the projection docs/scaling.md derives from them.

use super::drain::{self, DEFAULT_JOBS};
use super::median;
use crate::cli::{Common, DrainArgs};
use crate::cpu::redis_cpu_by_node;
use crate::report::{Report, round};
use crate::sampler::Row;
use crate::target::Target;
use serde::Serialize;

/// Jobs of the warm-up round (or --jobs, if fewer).
const WARM_UP_JOBS: u64 = 20_000;

/// One side of a round.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Side {
    pub enqueue_jobs_per_s: f64,
    pub drain_jobs_per_s: f64,
    /// Redis CPU µs per job, all nodes: enqueue + drain.
    pub redis_total_us: f64,
    pub redis_drain_us: f64,
    /// Each node's share of the Redis CPU the round cost (one entry for a single server).
    pub shares: Vec<f64>,
}

async fn side(target: &Target, c: &Common) -> anyhow::Result<(Side, drain::Outcome)> {
    let jobs = c.jobs.unwrap_or(DEFAULT_JOBS);
    let before = redis_cpu_by_node(&target.conn).await;
    let o = drain::once(target, c, !c.no_track, "drain", None).await?;
    let after = redis_cpu_by_node(&target.conn).await;
    if !o.finished || o.tally.is_some_and(|t| t.lost > 0) {
        anyhow::bail!("a drain did not finish, or lost jobs: the comparison stops");
    }
    let missing = || anyhow::anyhow!("--compare-single needs Redis's INFO cpu, which the server refuses");
    let (before, after) = (before.ok_or_else(missing)?, after.ok_or_else(missing)?);
    let spent: Vec<f64> = after
        .iter()
        .zip(&before)
        .map(|((_, a), (_, b))| (a - b).max(0.0))
        .collect();
    let total: f64 = spent.iter().sum();
    let us = |s: f64| round(s * 1e6 / jobs.max(1) as f64, 3);
    let drain_s = o.cost.redis_drain_s.ok_or_else(missing)?;
    let side = Side {
        enqueue_jobs_per_s: o.enqueue_rate,
        drain_jobs_per_s: o.drain_rate,
        redis_total_us: us(total),
        redis_drain_us: us(drain_s),
        shares: spent.iter().map(|s| round(s / total.max(1e-9), 3)).collect(),
    };
    Ok((side, o))
}

/// What the rounds show, as docs/scaling.md reads it.
#[derive(Debug, Clone, Serialize)]
struct Summary {
    primaries: usize,
    partitions: usize,
    single_redis_us_per_job: f64,
    cluster_redis_us_per_job: f64,
    /// Cluster over single: at most 1.15 is the goal.
    redis_cpu_per_job_ratio: f64,
    /// The largest primary's share over the fair share 1/N (1.0: perfectly even).
    busiest_primary_vs_even: f64,
    /// Drain rate N primaries on N cores of their own would reach when Redis bounds it,
    /// over one primary's: N × (single cost / cluster cost) / busiest-vs-even.
    projected_speedup: f64,
}

pub(crate) async fn run(a: &DrainArgs) -> anyhow::Result<(Report, Vec<Row>)> {
    let primaries = a.common.cluster.unwrap_or(3);
    let partitions = a.common.partitions.map_or(2 * primaries, |p| p as usize);
    let jobs = a.common.jobs.unwrap_or(DEFAULT_JOBS);
    let single = Target::single(None).await?;
    let cluster = Target::cluster(primaries, Some(partitions)).await?;
    let warm = Common {
        jobs: Some(jobs.min(WARM_UP_JOBS)),
        quiet: true,
        ..a.common.clone()
    };
    eprintln!(
        "warm-up: one round on each of {} jobs, not counted",
        jobs.min(WARM_UP_JOBS)
    );
    side(&single, &warm).await?;
    side(&cluster, &warm).await?;
    let (mut singles, mut clusters) = (Vec::new(), Vec::new());
    let mut last = None;
    for round_no in 0..a.rounds.max(1) {
        let order = super::abba(round_no);
        for on_cluster in order {
            let (s, o) = side(if on_cluster { &cluster } else { &single }, &a.common).await?;
            eprintln!(
                "round {} {}: enqueue {:.0}/s, drain {:.0}/s, Redis CPU {:.2} µs/job (drain {:.2}), shares {:?}",
                round_no + 1,
                if on_cluster { "cluster" } else { "single " },
                s.enqueue_jobs_per_s,
                s.drain_jobs_per_s,
                s.redis_total_us,
                s.redis_drain_us,
                s.shares
            );
            if on_cluster {
                clusters.push(s);
                last = Some(o);
            } else {
                singles.push(s);
            }
        }
    }
    let summary = summarize(primaries, partitions, &singles, &clusters);
    eprintln!(
        "medians over {} rounds: Redis CPU per job {:.2} µs single, {:.2} µs on {} primaries ({:.3}x); \
         busiest primary {:.3}x its even share; projected drain speedup on {} cores: {:.2}x",
        singles.len(),
        summary.single_redis_us_per_job,
        summary.cluster_redis_us_per_job,
        primaries,
        summary.redis_cpu_per_job_ratio,
        summary.busiest_primary_vs_even,
        primaries,
        summary.projected_speedup
    );
    let o = last.ok_or_else(|| anyhow::anyhow!("no cluster round ran"))?;
    let mut r = drain::report(&a.common, jobs, &o);
    r.put("redis", cluster.describe());
    r.put(
        "compare_single",
        serde_json::json!({
            "summary": summary,
            "single_rounds": singles,
            "cluster_rounds": clusters,
        }),
    );
    Ok((r, o.rows))
}

fn summarize(primaries: usize, partitions: usize, singles: &[Side], clusters: &[Side]) -> Summary {
    let m = |sides: &[Side], f: fn(&Side) -> f64| median(&sides.iter().map(f).collect::<Vec<_>>());
    let single = m(singles, |s| s.redis_total_us);
    let cluster = m(clusters, |s| s.redis_total_us);
    let busiest = m(clusters, |s| s.shares.iter().copied().fold(0.0, f64::max)) * primaries as f64;
    let ratio = cluster / single.max(1e-9);
    Summary {
        primaries,
        partitions,
        single_redis_us_per_job: round(single, 3),
        cluster_redis_us_per_job: round(cluster, 3),
        redis_cpu_per_job_ratio: round(ratio, 3),
        busiest_primary_vs_even: round(busiest, 3),
        projected_speedup: round(primaries as f64 / ratio.max(1e-9) / busiest.max(1e-9), 2),
    }
}
