//! `steady`: a producer enqueues at `--enqueue-rate` for `--duration` while consumers
//! process.
//! Reports the achieved rate and end-to-end latency (pushed → handler, in µs: the feed
//! stamps each push into the payloads; both clocks are this machine's). With
//! `--enqueue-rate N%` a drain measured first sets the rate, so "at half the drain rate"
//! holds for the machine as it is during the run.

use super::timed::{self, Pace, Timed};
use super::versus_bare;
use super::{SETTLE_TIMEOUT, account, base_report};
use crate::bare::{self, Bare};
use crate::cli::{Common, EnqueueRate, SteadyArgs};
use crate::cpu::{CpuMark, PerJob};
use crate::feed::{payload, stamped, unix_us};
use crate::histogram::{Histogram, Summary};
use crate::report::{Report, round};
use crate::sampler::Row;
use crate::target::Target;
use std::sync::Arc;
use std::time::{Duration, Instant};
use weir::CancellationToken;

const DEFAULT_LENGTH: Duration = Duration::from_secs(10);
const DEFAULT_RATE: u64 = 5000;

pub(crate) async fn run(a: SteadyArgs) -> anyhow::Result<(Report, Vec<Row>)> {
    // `steady --rate N` once meant the enqueue rate: refused rather than silently read as
    // the consumers' cap.
    if a.common.limits.rate_limit.is_some() && a.enqueue_rate.is_none() {
        anyhow::bail!(
            "steady: --rate caps each consumer's jobs/s, as in weir work; the enqueue rate is --enqueue-rate: give it too"
        );
    }
    let c = &a.common;
    let target = Target::open(c).await?;
    let (rate, drain) = match a.enqueue_rate.unwrap_or(EnqueueRate::PerSecond(DEFAULT_RATE)) {
        EnqueueRate::PerSecond(r) => (r, None),
        EnqueueRate::OfDrain(share) => {
            let drained = drain_rate(&target, c).await?;
            let rate = (drained * share).round().max(1.0) as u64;
            // Beside the bare queue: which share of *its* drain this rate is. Near or past
            // it, the bare queue's latency is its backlog's, not the floor's.
            let bare_drained = if a.compare_bare {
                Some(versus_bare::bare_drain_rate(&target, c, DRAIN_JOBS).await?)
            } else {
                None
            };
            if !c.quiet {
                eprintln!(
                    "drain: {drained:.0} jobs/s; steady at {:.0}% of it: {rate} jobs/s",
                    share * 100.0
                );
                if let Some(b) = bare_drained {
                    eprintln!(
                        "bare drain: {b:.0} jobs/s; the rate is {:.0}% of it",
                        rate as f64 / b.max(1.0) * 100.0
                    );
                }
            }
            (rate, Some((drained, share, bare_drained)))
        }
    };
    let length = c.duration.unwrap_or(DEFAULT_LENGTH);
    let jobs = c
        .jobs
        .unwrap_or_else(|| (rate as f64 * length.as_secs_f64()).ceil() as u64);
    let floor = if a.compare_bare {
        let (b, cpu) = bare_steady(&target, c, rate, length, jobs).await?;
        if !c.quiet {
            eprintln!(
                "bare at {rate} jobs/s: p50 {:.2} ms, p95 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
                b.p50_ms, b.p95_ms, b.p99_ms, b.max_ms
            );
        }
        Some((b, cpu))
    } else {
        None
    };
    let mark = CpuMark::now(&target.conn).await;
    let o = timed::run(
        &target,
        c,
        Timed {
            scenario: "steady",
            length,
            jobs_cap: jobs,
            pace: Pace::Rate(rate),
            downstream: None,
            ideal: None,
            max_attempts: 5,
        },
    )
    .await?;
    let mut r = base_report("steady", c, o.enqueued);
    r.enqueue_jobs_per_s = Some(o.enqueue_rate);
    r.achieved_jobs_per_s = Some(o.achieved_rate);
    r.elapsed_s = round(o.elapsed.as_secs_f64(), 3);
    r.set_latency("end_to_end", &o.observed.total.summary());
    r.set_limits(timed::window_rows(&o.rows, o.window));
    account(&mut r, o.tally, &o.totals);
    r.put("target_rate", rate);
    if let Some((drained, share, bare_drained)) = drain {
        r.put("drain_jobs_per_s", round(drained, 1));
        r.put("share_of_drain", share);
        if let Some(b) = bare_drained {
            r.put("bare_drain_jobs_per_s", round(b, 1));
            r.put("share_of_bare_drain", round(rate as f64 / b.max(1.0), 3));
        }
    }
    r.put("window_s", round(o.window.as_secs_f64(), 3));
    let cpu = mark.per_job(&target.conn, o.enqueued).await;
    r.put("cpu_per_job", cpu);
    if let Some((b, bare_cpu)) = floor {
        let weir = o.observed.total.summary();
        let x = |w: f64, b: f64| round(w / b.max(1e-9), 3);
        r.put(
            "compare_bare",
            serde_json::json!({
                "bare": { "tasks": bare::TASKS, "batch": bare::BATCH, "run": "first, at the same rate and length" },
                "bare_latency": b,
                "bare_cpu_per_job": bare_cpu,
                "weir_vs_bare": { "p50": x(weir.p50_ms, b.p50_ms), "p99": x(weir.p99_ms, b.p99_ms) },
            }),
        );
    }
    if !o.settled {
        r.put(
            "check_failed",
            "the queue did not empty within 60s after the producer stopped",
        );
    }
    r.put("redis", target.describe());
    Ok((r, o.rows))
}

/// Jobs drained per second from a backlog of [`DRAIN_JOBS`], with `c`'s consumers and
/// limits, against `target`: what `drain` measures.
async fn drain_rate(target: &Target, c: &Common) -> anyhow::Result<f64> {
    let c = Common {
        jobs: Some(DRAIN_JOBS),
        duration: None,
        quiet: true,
        ..c.clone()
    };
    let o = super::drain::once(target, &c, !c.no_track, "steady-drain", None).await?;
    if !o.finished {
        anyhow::bail!("steady: the drain that sets --enqueue-rate did not finish");
    }
    Ok(o.drain_rate)
}

/// Jobs in the drain that sets `--enqueue-rate N%`.
const DRAIN_JOBS: u64 = 200_000;

/// End-to-end latency of the bare reliable queue (`crate::bare`) fed at `rate` for
/// `length` (at most `cap` jobs) on fresh keys, the way `timed::produce` feeds weir:
/// every feed tick, the jobs due, stamped with the push time, in one transaction with its
/// wake message.
async fn bare_steady(
    target: &Target,
    c: &Common,
    rate: u64,
    length: Duration,
    cap: u64,
) -> anyhow::Result<(Summary, PerJob)> {
    let mark = CpuMark::now(&target.conn).await;
    let redis = weir::Redis::open(&target.url)?;
    let q = Bare::new(redis.connect().await?, &Target::fresh_queue("bare"));
    let latency = Arc::new(Histogram::default());
    let stop = CancellationToken::new();
    let (up_tx, up) = tokio::sync::oneshot::channel();
    let consumer = tokio::spawn({
        let (q, stop, latency) = (q.clone(), stop.clone(), latency.clone());
        async move {
            let seen = move |item: &[u8]| {
                if let Some(at) = bare::item_stamp(item) {
                    latency.record(unix_us().saturating_sub(at));
                }
            };
            q.consume(&redis, stop, up_tx, seen).await
        }
    });
    // Fed once its loops are up, as weir's consumer is (`timed::run`).
    if up.await.is_err() {
        return Err(consumer
            .await?
            .err()
            .unwrap_or_else(|| anyhow::anyhow!("the bare queue stopped before it was up")));
    }
    let fed = async {
        let body = payload(c.payload_bytes, c.seed);
        let (start, mut sent) = (Instant::now(), 0u64);
        let mut tick = timed::feed_ticks();
        while start.elapsed() < length && sent < cap {
            tick.tick().await;
            let n = timed::due(start, rate, sent).min(cap - sent);
            if n == 0 {
                continue;
            }
            let body = stamped(&body, unix_us());
            let items: Vec<Vec<u8>> = (sent..sent + n).map(|i| bare::item(i, body.get())).collect();
            q.push_and_wake(&items).await?;
            sent += n;
        }
        anyhow::Ok(sent)
    }
    .await;
    stop.cancel();
    let acked = match tokio::time::timeout(SETTLE_TIMEOUT, consumer).await {
        Ok(joined) => joined??,
        Err(_) => {
            anyhow::bail!("steady --compare-bare: the bare queue did not empty within {SETTLE_TIMEOUT:?}")
        }
    };
    let sent = fed?;
    q.clear().await?;
    if acked != sent {
        anyhow::bail!("steady --compare-bare: the bare queue acked {acked} of {sent} items");
    }
    Ok((latency.summary(), mark.per_job(&target.conn, sent).await))
}
