//! `drain --compare-bare`: weir against the bare reliable queue (`crate::bare`), in one
//! process against one Redis, on the same number of jobs with the same payload. Each
//! round runs weir (bulk enqueue, then the drain as `drain` runs it) and bare (raw RPUSH,
//! then the bare drain), in alternating order (ABBA) on fresh keys, after one warm-up
//! round of each that is not counted. Per round and as medians: enqueue rate against raw
//! RPUSH, drain rate against the bare drain, Redis CPU per job (enqueue + drain, from
//! `INFO cpu`) against bare's, and this process's peak memory while draining.

use super::drain::{self, Cost, DEFAULT_JOBS, client_spent, spent};
use super::median;
use crate::bare::{self, Bare};
use crate::cli::{Common, DrainArgs};
use crate::cpu::{ThreadTimes, peak_rss, redis_cpu, reset_peak_rss};
use crate::feed::payload;
use crate::report::{Report, round};
use crate::sampler::Row;
use crate::target::Target;
use serde::Serialize;

/// Jobs of the warm-up round (or --jobs, if fewer).
const WARM_UP_JOBS: u64 = 20_000;

/// One side of a round.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct Side {
    pub enqueue_jobs_per_s: f64,
    pub drain_jobs_per_s: f64,
    /// Redis CPU µs per job: enqueue, drain, both.
    pub redis_enqueue_us: f64,
    pub redis_drain_us: f64,
    pub redis_total_us: f64,
    /// This process's CPU µs per job during the enqueue: the producer's side of it. Where
    /// it is near the enqueue's wall time per job, the producer, not Redis, sets the rate.
    pub client_enqueue_us: f64,
    /// This process's peak resident memory while draining, MB.
    pub drain_peak_rss_mb: f64,
}

impl Side {
    fn of(enqueue: f64, drain: f64, cost: &Cost, jobs: u64) -> anyhow::Result<Self> {
        let missing = || anyhow::anyhow!("--compare-bare needs Redis's INFO cpu, which this server refuses");
        let us = |s: f64| s * 1e6 / jobs.max(1) as f64;
        let (e, d) = (
            cost.redis_enqueue_s.ok_or_else(missing)?,
            cost.redis_drain_s.ok_or_else(missing)?,
        );
        Ok(Self {
            enqueue_jobs_per_s: enqueue,
            drain_jobs_per_s: drain,
            redis_enqueue_us: us(e),
            redis_drain_us: us(d),
            redis_total_us: us(e + d),
            client_enqueue_us: cost.client_enqueue_s.map_or(0.0, us),
            drain_peak_rss_mb: cost.drain_peak_rss.map_or(0.0, |b| b as f64 / 1e6),
        })
    }

    fn line(&self, what: &str, enqueue: &str) -> String {
        format!(
            "{what}: enqueue {:.0}/s ({enqueue}, client CPU {:.2} µs/job), drain {:.0}/s, Redis CPU {:.2} + {:.2} = {:.2} µs/job, peak RSS {:.1} MB",
            self.enqueue_jobs_per_s,
            self.client_enqueue_us,
            self.drain_jobs_per_s,
            self.redis_enqueue_us,
            self.redis_drain_us,
            self.redis_total_us,
            self.drain_peak_rss_mb
        )
    }
}

/// Weir over bare, for one round.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Ratios {
    pub enqueue_vs_rpush: f64,
    pub drain_vs_bare: f64,
    pub redis_cpu_per_job_vs_bare: f64,
}

impl Ratios {
    fn of(weir: &Side, bare: &Side) -> Self {
        let r = |a: f64, b: f64| round(a / b.max(1e-9), 3);
        Self {
            enqueue_vs_rpush: r(weir.enqueue_jobs_per_s, bare.enqueue_jobs_per_s),
            drain_vs_bare: r(weir.drain_jobs_per_s, bare.drain_jobs_per_s),
            redis_cpu_per_job_vs_bare: r(weir.redis_total_us, bare.redis_total_us),
        }
    }
}

/// One weir round: `drain` as it runs by itself.
async fn weir_side(target: &Target, c: &Common) -> anyhow::Result<(Side, drain::Outcome)> {
    let jobs = c.jobs.unwrap_or(DEFAULT_JOBS);
    let o = drain::once(target, c, !c.no_track, "drain", None).await?;
    if !o.finished || o.tally.is_some_and(|t| t.lost > 0) {
        anyhow::bail!("weir's drain did not finish, or lost jobs: the comparison stops");
    }
    Ok((Side::of(o.enqueue_rate, o.drain_rate, &o.cost, jobs)?, o))
}

/// Jobs drained per second by the bare drain from a backlog of `jobs` items (raw RPUSH
/// first, with weir's bulk pipeline): what `steady --compare-bare` reports beside weir's
/// drain rate, so a share of weir's drain reads as a share of the bare one's too.
pub(crate) async fn bare_drain_rate(target: &Target, c: &Common, jobs: u64) -> anyhow::Result<f64> {
    Ok(bare_side(target, c, jobs, bare::IN_FLIGHT)
        .await?
        .drain_jobs_per_s)
}

/// One bare round on fresh keys: RPUSH of `jobs` items (id and the same payload), then
/// the bare drain.
async fn bare_side(target: &Target, c: &Common, jobs: u64, in_flight: usize) -> anyhow::Result<Side> {
    let conn = weir::Redis::open(&target.url)?.connect().await?;
    let q = Bare::new(conn, &Target::fresh_queue("bare"));
    let body = payload(c.payload_bytes, c.seed);
    let item = |i: u64| bare::item(i, body.get());
    let before = redis_cpu(&target.conn).await;
    let client = ThreadTimes::now();
    let pushed = q.enqueue(jobs, in_flight, item).await?;
    let client = client_spent(client);
    let enqueued = redis_cpu(&target.conn).await;
    reset_peak_rss();
    let (acked, drained) = q.drain().await?;
    let cost = Cost {
        redis_enqueue_s: spent(before, enqueued),
        client_enqueue_s: client,
        redis_drain_s: spent(enqueued, redis_cpu(&target.conn).await),
        drain_peak_rss: peak_rss(),
    };
    q.clear().await?;
    if acked != jobs {
        anyhow::bail!("the bare drain acked {acked} of {jobs} items");
    }
    let rate = |d: std::time::Duration| jobs as f64 / d.as_secs_f64().max(1e-9);
    Side::of(rate(pushed), rate(drained), &cost, jobs)
}

pub(crate) async fn run(target: &Target, a: &DrainArgs) -> anyhow::Result<(Report, Vec<Row>)> {
    let jobs = a.common.jobs.unwrap_or(DEFAULT_JOBS);
    let warm = Common {
        jobs: Some(jobs.min(WARM_UP_JOBS)),
        quiet: true,
        ..a.common.clone()
    };
    eprintln!(
        "warm-up: one weir and one bare round of {} jobs, not counted",
        jobs.min(WARM_UP_JOBS)
    );
    weir_side(target, &warm).await?;
    bare_side(target, &warm, jobs.min(WARM_UP_JOBS), a.rpush_in_flight).await?;
    let (mut weirs, mut bares, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let mut last = None;
    for round_no in 0..a.rounds.max(1) {
        let weir_first = round_no % 2 == 0;
        let mut pair = [None, None];
        for weir in [weir_first, !weir_first] {
            if weir {
                let (side, o) = weir_side(target, &a.common).await?;
                pair[0] = Some(side);
                last = Some(o);
            } else {
                pair[1] = Some(bare_side(target, &a.common, jobs, a.rpush_in_flight).await?);
            }
        }
        let (Some(w), Some(b)) = (pair[0], pair[1]) else {
            unreachable!("both sides ran");
        };
        let r = Ratios::of(&w, &b);
        eprintln!(
            "round {} ({} first)",
            round_no + 1,
            if weir_first { "weir" } else { "bare" }
        );
        eprintln!("  {}", w.line("weir", "bulk enqueue"));
        eprintln!("  {}", b.line("bare", "raw RPUSH"));
        eprintln!(
            "  weir/bare: enqueue {:.2}x RPUSH, drain {:.2}x, Redis CPU per job {:.2}x",
            r.enqueue_vs_rpush, r.drain_vs_bare, r.redis_cpu_per_job_vs_bare
        );
        weirs.push(w);
        bares.push(b);
        ratios.push(r);
    }
    let o = last.ok_or_else(|| anyhow::anyhow!("no weir round ran"))?;
    let mut r = drain::report(&a.common, jobs, &o);
    put_comparison(&mut r, &weirs, &bares, &ratios, a.rpush_in_flight);
    r.put("redis", target.describe());
    Ok((r, o.rows))
}

/// Medians of every figure over the rounds, per side, and of the rounds' ratios.
fn medians(sides: &[Side]) -> Side {
    let m = |f: fn(&Side) -> f64| round(median(&sides.iter().map(f).collect::<Vec<_>>()), 3);
    Side {
        enqueue_jobs_per_s: m(|s| s.enqueue_jobs_per_s),
        drain_jobs_per_s: m(|s| s.drain_jobs_per_s),
        redis_enqueue_us: m(|s| s.redis_enqueue_us),
        redis_drain_us: m(|s| s.redis_drain_us),
        redis_total_us: m(|s| s.redis_total_us),
        client_enqueue_us: m(|s| s.client_enqueue_us),
        drain_peak_rss_mb: m(|s| s.drain_peak_rss_mb),
    }
}

fn put_comparison(r: &mut Report, weirs: &[Side], bares: &[Side], ratios: &[Ratios], in_flight: usize) {
    let (w, b) = (medians(weirs), medians(bares));
    let m = |f: fn(&Ratios) -> f64| round(median(&ratios.iter().map(f).collect::<Vec<_>>()), 3);
    let ratio = Ratios {
        enqueue_vs_rpush: m(|x| x.enqueue_vs_rpush),
        drain_vs_bare: m(|x| x.drain_vs_bare),
        redis_cpu_per_job_vs_bare: m(|x| x.redis_cpu_per_job_vs_bare),
    };
    eprintln!("medians over {} rounds", ratios.len());
    eprintln!("  {}", w.line("weir", "bulk enqueue"));
    eprintln!("  {}", b.line("bare", "raw RPUSH"));
    eprintln!(
        "  weir/bare (median of the rounds' ratios): enqueue {:.2}x RPUSH, drain {:.2}x, Redis CPU per job {:.2}x",
        ratio.enqueue_vs_rpush, ratio.drain_vs_bare, ratio.redis_cpu_per_job_vs_bare
    );
    r.enqueue_jobs_per_s = Some(round(w.enqueue_jobs_per_s, 1));
    r.drain_jobs_per_s = Some(round(w.drain_jobs_per_s, 1));
    r.put(
        "compare_bare",
        serde_json::json!({
            "rounds": ratios.len(),
            "warm_up": "one round of each, not counted",
            "bare": {
                "tasks": bare::TASKS, "batch": bare::BATCH,
                "rpush_chunk": bare::CHUNK, "rpush_in_flight": in_flight,
            },
            "weir_median": w,
            "bare_median": b,
            "weir_vs_bare_median": ratio,
            "weir_rounds": weirs,
            "bare_rounds": bares,
            "weir_vs_bare_rounds": ratios,
        }),
    );
}
