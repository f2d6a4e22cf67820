//! The scenarios, and what they share: the consumer spec from the common options, the
//! wait for a queue to settle, and the report's common figures.

pub(crate) mod backlog;
pub(crate) mod chaos;
pub(crate) mod downstream;
pub(crate) mod drain;
pub(crate) mod drain_modes;
pub(crate) mod keys;
pub(crate) mod kills;
pub(crate) mod steady;
pub(crate) mod suite;
pub(crate) mod timed;
pub(crate) mod versus_bare;
pub(crate) mod versus_single;

use crate::accounting::Tally;
use crate::cli::Common;
use crate::fleet::{Spec, Totals};
use crate::observed::Observed;
use crate::report::{Report, round};
use crate::target::Target;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;
use weir::CancellationToken;

/// Longest wait for the backlog to be worked off after a time-based scenario's producer
/// stops.
pub(crate) const SETTLE_TIMEOUT: Duration = Duration::from_secs(60);

pub(crate) fn spec(c: &Common, target: &Target, queue: &str, drain: bool) -> anyhow::Result<Spec> {
    Ok(Spec {
        redis_url: target.url.clone(),
        queue: queue.to_owned(),
        concurrency: c.concurrency(),
        limiter: c.limits.limiter().map_err(anyhow::Error::msg)?,
        key_limiter: c
            .limits
            .key_limiter(c.concurrency())
            .map_err(anyhow::Error::msg)?,
        rate: c.limits.rate(),
        batch: c.batch,
        pipeline: c.pipeline,
        visibility: c.visibility(),
        drain,
        downstream: None,
        worker_threads: c.worker_threads,
    })
}

/// The report's fields every scenario fills the same way.
pub(crate) fn base_report(scenario: &str, c: &Common, jobs: u64) -> Report {
    let mut r = Report {
        scenario: scenario.into(),
        jobs,
        consumers: c.consumers(),
        concurrency: c.concurrency(),
        ..Report::default()
    };
    // Checked by `Common::validate` before the run.
    let limiter = c.limits.limiter().ok().flatten();
    r.put(
        "limits",
        crate::limits::describe(limiter.as_ref(), c.limits.adaptive_per_key, c.limits.rate()),
    );
    // The harness's own (consumer processes take --worker-threads, or their default).
    let workers = tokio::runtime::Handle::current().metrics().num_workers();
    r.put("worker_threads", workers);
    r
}

/// Puts the accounting and the consumers' totals into the report.
pub(crate) fn account(r: &mut Report, tally: Option<Tally>, totals: &Totals) {
    if let Some(t) = tally {
        r.lost = Some(t.lost);
        r.duplicates = Some(t.duplicates);
        r.extra_runs = Some(t.extra_runs);
        if t.foreign > 0 {
            r.put("foreign_jobs", t.foreign);
            r.put("check_failed", "jobs the harness did not enqueue were processed");
        }
    }
    r.put("consumer_totals", totals);
}

/// The median (0 for none): on a shared machine one run in a few lands on a busy moment.
/// The sides of comparison round `round_no` in ABBA order (false first on even rounds),
/// so drift over a run falls on both sides alike.
pub(crate) fn abba(round_no: usize) -> [bool; 2] {
    if round_no.is_multiple_of(2) {
        [false, true]
    } else {
        [true, false]
    }
}

pub(crate) fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

pub(crate) fn rate(n: u64, d: Duration) -> f64 {
    round(n as f64 / d.as_secs_f64().max(1e-9), 1)
}

/// Resolves with the moment `observed` has counted `target` processed jobs (polled every
/// millisecond, so the drain rate is not rounded up to a poll period), or `None` once
/// cancelled.
pub(crate) fn watch_done(
    observed: Arc<Observed>,
    target: u64,
    stop: CancellationToken,
) -> JoinHandle<Option<Instant>> {
    tokio::spawn(async move {
        while !stop.is_cancelled() {
            if observed.processed() >= target {
                return Some(Instant::now());
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        None
    })
}

/// Waits until the queue has nothing ready, delayed or leased (bounded by `timeout`);
/// true if it settled.
pub(crate) async fn settle(target: &Target, queue: &str, timeout: Duration) -> anyhow::Result<bool> {
    let q = weir::Queue::new(target.conn.clone(), queue)?;
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if q.stats().await?.pending() == 0 {
            return Ok(true);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(false)
}

/// Counter `name` of the queue's lifetime counters (0 if absent).
pub(crate) async fn counter(target: &Target, queue: &str, name: &str) -> anyhow::Result<u64> {
    let s = weir::Queue::new(target.conn.clone(), queue)?.stats().await?;
    Ok(s.counters.get(name).copied().unwrap_or(0))
}
