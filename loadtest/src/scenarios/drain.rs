//! `drain`: enqueue N jobs in bulk, then drain them with no-op handlers. Measures the
//! queue itself: enqueue jobs/s and drain jobs/s, and what each phase cost Redis in CPU.
//! `--compare-tracking` runs untracked and tracked drains side by side (ABBA, to cancel
//! drift) to price the accounting; `--compare-bare` (`versus_bare`) and
//! `--compare-backlog` (`backlog`) are comparisons of their own.

use super::{account, base_report, kills, median, rate, spec, watch_done};
use crate::accounting::Tally;
use crate::cli::{Common, DrainArgs};
use crate::cpu::{ThreadTimes, peak_rss, redis_cpu, reset_peak_rss};
use crate::feed::{Feed, payload};
use crate::fleet::{Fleet, Totals};
use crate::observed::Observed;
use crate::report::{Report, round};
use crate::sampler::{Row, Sampler, SamplerConfig};
use crate::target::Target;
use std::sync::Arc;
use std::time::{Duration, Instant};
use weir::CancellationToken;

pub(crate) const DEFAULT_JOBS: u64 = 200_000;
const DEFAULT_CAP: Duration = Duration::from_secs(600);

/// One drain run.
pub(crate) struct Outcome {
    pub enqueue_rate: f64,
    pub drain_rate: f64,
    /// CPU time of this process per drained job, µs (meaningful with the in-process
    /// consumer only).
    pub cpu_us_per_job: Option<f64>,
    pub tally: Option<Tally>,
    pub totals: Totals,
    pub observed: Arc<Observed>,
    pub rows: Vec<Row>,
    pub elapsed: Duration,
    pub finished: bool,
    /// What the kills did (chaos only).
    pub chaos: Option<kills::Stats>,
    pub cost: Cost,
}

/// What a run's phases cost: Redis CPU seconds (`INFO cpu`) and this process's peak
/// resident memory while the consumers drained (in-process consumer: the consumer plus
/// the harness's accounting). `None` where it could not be read.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Cost {
    pub redis_enqueue_s: Option<f64>,
    /// This process's CPU seconds during the enqueue ([`ThreadTimes`]): the
    /// producer's side of the enqueue (no consumer runs yet).
    pub client_enqueue_s: Option<f64>,
    pub redis_drain_s: Option<f64>,
    pub drain_peak_rss: Option<u64>,
}

impl Cost {
    /// Redis CPU µs per job of each phase and both, as the report shows them.
    pub(crate) fn per_job(&self, jobs: u64) -> Option<serde_json::Value> {
        let us = |s: f64| round(s * 1e6 / jobs.max(1) as f64, 3);
        let (e, d) = (self.redis_enqueue_s?, self.redis_drain_s?);
        Some(serde_json::json!({ "enqueue": us(e), "drain": us(d), "total": us(e + d) }))
    }
}

/// Redis CPU between two readings.
pub(crate) fn spent(before: Option<f64>, after: Option<f64>) -> Option<f64> {
    Some(after? - before?)
}

pub(crate) fn report(c: &Common, jobs: u64, o: &Outcome) -> Report {
    let mut r = base_report("drain", c, jobs);
    r.enqueue_jobs_per_s = Some(o.enqueue_rate);
    r.drain_jobs_per_s = Some(o.drain_rate);
    r.elapsed_s = round(o.elapsed.as_secs_f64(), 3);
    r.set_latency("end_to_end", &o.observed.total.summary());
    r.set_limits(&o.rows);
    account(&mut r, o.tally, &o.totals);
    if c.consumers() == 1
        && let Some(cpu) = o.cpu_us_per_job
    {
        r.put("harness_cpu_us_per_job", cpu);
    }
    if let Some(cost) = o.cost.per_job(jobs) {
        r.put("redis_cpu_us_per_job", cost);
    }
    if let Some(s) = o.cost.client_enqueue_s {
        r.put(
            "enqueue_client_cpu_us_per_job",
            round(s * 1e6 / jobs.max(1) as f64, 3),
        );
    }
    if !o.finished {
        r.put("check_failed", "the drain did not finish within --duration");
    }
    r
}

/// Enqueues, then drains one fresh queue. `kills` (chaos) runs beside the drain with
/// the process fleet.
pub(crate) async fn once(
    target: &Target,
    c: &Common,
    track: bool,
    scenario: &str,
    kills: Option<usize>,
) -> anyhow::Result<Outcome> {
    let jobs = c.jobs.unwrap_or(DEFAULT_JOBS);
    let queue = target.queue(scenario).await?;
    let observed = Arc::new(Observed::new(jobs, track));
    // Killed consumers' jobs come back as failed attempts: never let them run out.
    let attempts = if kills.is_some() { 1000 } else { 5 };
    let (feed, enqueue_rate, (redis_enqueue_s, client_enqueue_s)) =
        enqueue(target, c, &queue, jobs, attempts).await?;
    let redis_before = redis_cpu(&target.conn).await;

    let cap = c.duration.unwrap_or(DEFAULT_CAP);
    reset_peak_rss();
    let cpu_before = crate::cpu::process_cpu();
    let started = Instant::now();
    let fleet = Fleet::start(
        spec(c, target, &queue, true)?,
        c.consumers(),
        kills.is_some(),
        observed.clone(),
    )?;
    let sampler = drain_sampler(target, c, &queue, &fleet, &observed, jobs);
    let stop_watch = CancellationToken::new();
    let done = watch_done(observed.clone(), jobs, stop_watch.clone());
    let plan = kills.map(|kills| kills::Plan {
        kills,
        seed: c.seed,
        jobs,
        cap,
    });
    let (totals, finished, chaos) = wait(fleet, plan, &observed, target, &queue, cap).await?;
    let ended = Instant::now();
    let cost = Cost {
        redis_enqueue_s,
        client_enqueue_s,
        redis_drain_s: spent(redis_before, redis_cpu(&target.conn).await),
        drain_peak_rss: peak_rss(),
    };
    stop_watch.cancel();
    let done_at = done.await.ok().flatten().unwrap_or(ended);
    let cpu_us_per_job = cpu_before
        .zip(crate::cpu::process_cpu())
        .map(|(a, b)| round((b - a).as_secs_f64() * 1e6 / jobs as f64, 3));
    let rows = sampler.finish().await;
    target.cleanup(&queue).await;
    Ok(Outcome {
        enqueue_rate,
        drain_rate: rate(jobs, done_at - started),
        cpu_us_per_job,
        tally: observed.tracker.as_ref().map(|t| t.tally(feed.enqueued())),
        totals,
        observed,
        rows,
        elapsed: ended - started,
        finished,
        chaos,
        cost,
    })
}

/// The time series of a drain: a progress bar of `jobs`, no ideal.
fn drain_sampler(
    target: &Target,
    c: &Common,
    queue: &str,
    fleet: &Fleet,
    observed: &Arc<Observed>,
    jobs: u64,
) -> Sampler {
    Sampler::start(SamplerConfig {
        observed: observed.clone(),
        gauges: fleet.gauges(),
        conn: target.conn.clone(),
        queue: queue.to_owned(),
        ideal: None,
        total: Some(jobs),
        quiet: c.quiet,
    })
}

/// Enqueues jobs `0..jobs` into `queue` in bulk; returns the feed, the enqueue rate, and
/// the CPU seconds it took Redis and this process.
async fn enqueue(
    target: &Target,
    c: &Common,
    queue: &str,
    jobs: u64,
    attempts: u32,
) -> anyhow::Result<(Feed, f64, (Option<f64>, Option<f64>))> {
    let payload = payload(c.payload_bytes, c.seed);
    let mut feed = Feed::new(target.conn.clone(), queue, payload, jobs, attempts).await?;
    let before = redis_cpu(&target.conn).await;
    let (t, client) = (Instant::now(), ThreadTimes::now());
    feed.push_all().await?;
    let (took, client) = (t.elapsed(), client_spent(client));
    Ok((
        feed,
        rate(jobs, took),
        (spent(before, redis_cpu(&target.conn).await), client),
    ))
}

/// This process's CPU seconds since `before`.
pub(crate) fn client_spent(before: Option<ThreadTimes>) -> Option<f64> {
    Some(before?.since()?.as_secs_f64())
}

/// Waits for the fleet to drain the queue, killing processes on the way if `plan` says.
async fn wait(
    fleet: Fleet,
    plan: Option<kills::Plan>,
    observed: &Arc<Observed>,
    target: &Target,
    queue: &str,
    cap: Duration,
) -> anyhow::Result<(Totals, bool, Option<kills::Stats>)> {
    match (plan, fleet) {
        (Some(plan), Fleet::Procs(p)) => {
            kills::kill_and_wait(*p, observed.clone(), target, queue, plan).await
        }
        (_, fleet) => {
            let (t, f) = fleet.wait(cap).await?;
            Ok((t, f, None))
        }
    }
}

/// Untracked and tracked drains, `rounds` pairs in ABBA order, on fresh queues.
pub(crate) async fn compare(target: &Target, a: &DrainArgs) -> anyhow::Result<(Report, Vec<Row>)> {
    let (mut with, mut without) = (Vec::new(), Vec::new());
    let (mut cpu_with, mut cpu_without) = (Vec::new(), Vec::new());
    let mut last = None;
    for round_no in 0..a.rounds.max(1) {
        let order = super::abba(round_no);
        for track in order {
            let o = once(target, &a.common, track, "drain", None).await?;
            eprintln!(
                "  {} drain: {:.0} jobs/s, {:.2} µs CPU per job",
                if track { "tracked  " } else { "untracked" },
                o.drain_rate,
                o.cpu_us_per_job.unwrap_or(0.0)
            );
            let cpu = o.cpu_us_per_job.unwrap_or(0.0);
            if track {
                cpu_with.push(cpu);
                with.push(o.drain_rate);
                last = Some(o);
            } else {
                cpu_without.push(cpu);
                without.push(o.drain_rate);
            }
        }
    }
    let o = last.ok_or_else(|| anyhow::anyhow!("no tracked run"))?;
    let jobs = a.common.jobs.unwrap_or(DEFAULT_JOBS);
    let mut r = report(&a.common, jobs, &o);
    put_comparison(&mut r, [&with, &without], [&cpu_with, &cpu_without], jobs);
    r.put("redis", target.describe());
    Ok((r, o.rows))
}

/// Drains with and without fleet-wide limits that never bind, `rounds` pairs in ABBA
/// order on fresh queues: what reading and keeping the limits costs.
pub(crate) async fn compare_global_limits(
    target: &Target,
    a: &DrainArgs,
) -> anyhow::Result<(Report, Vec<Row>)> {
    let limits = weir::queue::settings::Settings {
        global_rate: Some("10000000/s".parse().map_err(anyhow::Error::msg)?),
        global_concurrency: Some(10_000_000),
        ..Default::default()
    };
    let jobs = a.common.jobs.unwrap_or(DEFAULT_JOBS);
    let (mut rates, mut cpu) = ([Vec::new(), Vec::new()], [Vec::new(), Vec::new()]);
    let mut last = None;
    for round_no in 0..a.rounds.max(1) {
        let order = super::abba(round_no);
        for limited in order {
            target.set_queue_settings(limited.then(|| limits.clone()));
            let o = once(target, &a.common, !a.common.no_track, "drain", None).await?;
            let us = o.cost.redis_drain_s.map_or(0.0, |s| s * 1e6 / jobs as f64);
            eprintln!(
                "  {} drain: {:.0} jobs/s, Redis CPU {:.2} µs per job",
                if limited {
                    "with limits   "
                } else {
                    "without limits"
                },
                o.drain_rate,
                us
            );
            rates[usize::from(limited)].push(o.drain_rate);
            cpu[usize::from(limited)].push(us);
            if limited {
                last = Some(o);
            }
        }
    }
    target.set_queue_settings(None);
    let o = last.ok_or_else(|| anyhow::anyhow!("no run with limits"))?;
    let mut r = report(&a.common, jobs, &o);
    let (with, without) = (median(&rates[1]), median(&rates[0]));
    let (c_with, c_without) = (median(&cpu[1]), median(&cpu[0]));
    r.drain_jobs_per_s = Some(round(with, 1));
    let pct = |a: f64, b: f64| round((a - b) / b.max(1e-9) * 100.0, 2);
    let summary = serde_json::json!({
        "global_rate": "10000000/s", "global_concurrency": 10_000_000u64,
        "drain_jobs_per_s_with": round(with, 1), "drain_jobs_per_s_without": round(without, 1),
        "drain_change_pct": pct(with, without),
        "redis_drain_us_per_job_with": round(c_with, 3), "redis_drain_us_per_job_without": round(c_without, 3),
        "redis_cpu_more_pct": pct(c_with, c_without),
        "rounds_with": rates[1], "rounds_without": rates[0],
    });
    eprintln!(
        "medians: with limits {with:.0} jobs/s, without {without:.0} ({:+.1}%); Redis CPU per job {c_with:.2} vs {c_without:.2} µs ({:+.1}%)",
        (with - without) / without.max(1e-9) * 100.0,
        (c_with - c_without) / c_without.max(1e-9) * 100.0
    );
    r.put("compare_global_limits", summary);
    r.put("redis", target.describe());
    Ok((r, o.rows))
}

/// The comparison's figures: medians of the rates and of CPU per job, tracked first.
fn put_comparison(r: &mut Report, rates: [&[f64]; 2], cpu: [&[f64]; 2], jobs: u64) {
    // The median: on a shared machine one run in a few lands on a busy moment.
    let (m_with, m_without) = (median(rates[0]), median(rates[1]));
    r.drain_jobs_per_s = Some(round(m_with, 1));
    r.put("untracked_drain_jobs_per_s", round(m_without, 1));
    r.put("tracked_runs_jobs_per_s", rates[0]);
    r.put("untracked_runs_jobs_per_s", rates[1]);
    r.put(
        "tracking_overhead_pct",
        round((m_without - m_with) / m_without.max(1e-9) * 100.0, 2),
    );
    let (c_with, c_without) = (median(cpu[0]), median(cpu[1]));
    r.put("tracked_cpu_us_per_job", round(c_with, 3));
    r.put("untracked_cpu_us_per_job", round(c_without, 3));
    r.put(
        "tracking_cpu_overhead_pct",
        round((c_with - c_without) / c_without.max(1e-9) * 100.0, 2),
    );
    let ns = crate::accounting::cost_ns_per_job(jobs);
    r.put("tracking_ns_per_job", round(ns, 1));
    r.put(
        "tracking_ns_pct_of_cpu_per_job",
        round(ns / (c_without * 1000.0).max(1e-9) * 100.0, 2),
    );
}
