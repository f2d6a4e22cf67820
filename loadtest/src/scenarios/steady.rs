//! `steady`: a producer enqueues at `--enqueue-rate` for `--duration` while consumers
//! process.
//! Reports the achieved rate and end-to-end latency (pushed → handler, in µs: the feed
//! stamps each push into the payloads; both clocks are this machine's). With
//! `--enqueue-rate N%` a drain measured first sets the rate, so "at half the drain rate"
//! holds for the machine as it is during the run. With `--compare-bare`, the bare reliable
//! queue runs at the same rate beside weir; `--rounds N` runs both N times, in turn, and
//! reports the medians of the rounds' ratios.

use super::timed::{self, Pace, Timed};
use super::versus_bare;
use super::{SETTLE_TIMEOUT, abba, account, base_report, median};
use crate::accounting::Tally;
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
    let rounds = a.rounds.max(1);
    if rounds > 1 && !a.compare_bare {
        anyhow::bail!("steady: --rounds pairs weir's run with the bare queue's: give --compare-bare too");
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
    let spec = || Timed {
        scenario: "steady",
        length,
        jobs_cap: jobs,
        pace: Pace::Rate(rate),
        downstream: None,
        ideal: None,
        max_attempts: 5,
    };
    // Each round runs both queues at the rate, in turn: the bare one first in the first
    // round (so one round is the run it always was), then the other way round, so that a
    // machine slowing down or speeding up within the run favours neither side.
    let mut paired = Vec::new();
    let mut last = None;
    // What the earlier rounds' accounting found, added to the last round's: a job lost in
    // any round is reported.
    let (mut earlier, mut settled) = (None::<Tally>, true);
    for round_no in 0..rounds {
        let bare_first = !abba(round_no)[0];
        let mut bare = None;
        if a.compare_bare && bare_first {
            bare = Some(bare_steady(&target, c, rate, length, jobs).await?);
        }
        let mark = CpuMark::now(&target.conn).await;
        let o = timed::run(&target, c, spec()).await?;
        let cpu = mark.per_job(&target.conn, o.enqueued).await;
        settled &= o.settled;
        if round_no + 1 < rounds
            && let Some(t) = o.tally
        {
            earlier = Some(earlier.unwrap_or_default().plus(t));
        }
        if a.compare_bare && !bare_first {
            bare = Some(bare_steady(&target, c, rate, length, jobs).await?);
        }
        if let Some((b, bare_cpu)) = bare {
            let pair = Paired::of(round_no + 1, bare_first, b, bare_cpu, o.observed.total.summary());
            if !c.quiet {
                eprintln!("{}", pair.line(rate));
            }
            paired.push(pair);
        }
        last = Some((o, cpu));
    }
    let (o, cpu) = last.expect("at least one round");
    let mut r = base_report("steady", c, o.enqueued);
    r.enqueue_jobs_per_s = Some(o.enqueue_rate);
    r.achieved_jobs_per_s = Some(o.achieved_rate);
    r.elapsed_s = round(o.elapsed.as_secs_f64(), 3);
    r.set_latency("end_to_end", &o.observed.total.summary());
    r.set_limits(timed::window_rows(&o.rows, o.window));
    account(
        &mut r,
        o.tally.map(|t| earlier.map_or(t, |e| t.plus(e))),
        &o.totals,
    );
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
    r.put("cpu_per_job", cpu);
    if let Some(p) = paired.last() {
        let medians = Paired::median_ratios(&paired);
        if !c.quiet && paired.len() > 1 {
            eprintln!(
                "medians over {} rounds: weir/bare p50 {:.2}x, p99 {:.2}x",
                paired.len(),
                medians.p50,
                medians.p99
            );
        }
        r.put(
            "compare_bare",
            serde_json::json!({
                "bare": { "tasks": bare::TASKS, "batch": bare::BATCH, "run": "at the same rate and length, in turn with weir's (bare first in the first round)" },
                "rounds": paired.len(),
                // The last round's, the round the report's own figures come from.
                "bare_latency": p.bare,
                "bare_cpu_per_job": p.bare_cpu,
                // The medians of the rounds' ratios.
                "weir_vs_bare": medians,
                "rounds_latency": paired,
            }),
        );
    }
    if !settled {
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
    let q =
        Bare::new(redis.connect().await?, &Target::fresh_queue("bare")).sharded(redis.is_cluster().await?);
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

/// One round of `--compare-bare`: both queues' end-to-end latency at the same rate.
#[derive(Debug, serde::Serialize)]
struct Paired {
    round: usize,
    bare_first: bool,
    bare: Summary,
    #[serde(skip)]
    bare_cpu: PerJob,
    weir: Summary,
    weir_vs_bare: Ratios,
}

/// weir's percentiles over the bare queue's.
#[derive(Debug, Clone, Copy, serde::Serialize)]
struct Ratios {
    p50: f64,
    p99: f64,
}

impl Paired {
    fn of(round_no: usize, bare_first: bool, bare: Summary, bare_cpu: PerJob, weir: Summary) -> Self {
        let x = |w: f64, b: f64| round(w / b.max(1e-9), 3);
        let weir_vs_bare = Ratios {
            p50: x(weir.p50_ms, bare.p50_ms),
            p99: x(weir.p99_ms, bare.p99_ms),
        };
        Self {
            round: round_no,
            bare_first,
            bare,
            bare_cpu,
            weir,
            weir_vs_bare,
        }
    }

    /// The round as one line of the run's progress.
    fn line(&self, rate: u64) -> String {
        let (b, w, x) = (&self.bare, &self.weir, &self.weir_vs_bare);
        format!(
            "round {} ({} first) at {rate} jobs/s: bare p50 {:.2} ms, p99 {:.2} ms; weir p50 {:.2} ms, p99 {:.2} ms; weir/bare p50 {:.2}x, p99 {:.2}x",
            self.round,
            if self.bare_first { "bare" } else { "weir" },
            b.p50_ms,
            b.p99_ms,
            w.p50_ms,
            w.p99_ms,
            x.p50,
            x.p99
        )
    }

    /// The medians of the rounds' ratios.
    fn median_ratios(rounds: &[Paired]) -> Ratios {
        let of = |f: fn(&Ratios) -> f64| {
            round(
                median(&rounds.iter().map(|p| f(&p.weir_vs_bare)).collect::<Vec<_>>()),
                3,
            )
        };
        Ratios {
            p50: of(|r| r.p50),
            p99: of(|r| r.p99),
        }
    }
}
