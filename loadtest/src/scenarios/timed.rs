//! The shape `steady` and `downstream` share: consumers run while a producer feeds the
//! queue for a fixed length (at a rate, or keeping a backlog), then the producer stops,
//! the backlog is worked off (bounded), and the consumers are stopped.

use super::{SETTLE_TIMEOUT, rate, settle, spec};
use crate::accounting::Tally;
use crate::cli::{Common, DownstreamOpts};
use crate::downstream::unix_ms;
use crate::feed::{Feed, payload};
use crate::fleet::{Fleet, Totals};
use crate::observed::Observed;
use crate::sampler::{Ideal, Row, Sampler, SamplerConfig};
use crate::target::Target;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the producer looks at the clock (rate) or the queue (backlog). Short, so a
/// steady rate arrives as a stream of small bulk calls (at 100,000 jobs/s, 200 jobs
/// every 2 ms), not as bursts whose wait in line would be counted as the consumer's
/// latency (10 ms ticks added 2-9 ms to the p99 at 30,000-100,000 jobs/s).
const FEED_TICK: Duration = Duration::from_millis(2);

/// Longest wait for the consumers to come up before the producer starts.
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// How the producer feeds the queue.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Pace {
    /// This many jobs per second.
    Rate(u64),
    /// Keep about this many jobs ready, so the consumers never starve.
    Backlog(u64),
}

pub(crate) struct Timed {
    pub scenario: &'static str,
    pub length: Duration,
    pub jobs_cap: u64,
    pub pace: Pace,
    /// The simulated downstream's options and seed (the script starts with the run).
    pub downstream: Option<(DownstreamOpts, u64)>,
    pub ideal: Option<Ideal>,
    /// Attempts per job: high where the downstream makes jobs fail.
    pub max_attempts: u32,
}

pub(crate) struct Outcome {
    pub observed: Arc<Observed>,
    pub enqueued: u64,
    pub enqueue_rate: f64,
    /// Jobs processed during the fed window, per second.
    pub achieved_rate: f64,
    pub window: Duration,
    pub rows: Vec<Row>,
    pub totals: Totals,
    pub tally: Option<Tally>,
    pub settled: bool,
    pub elapsed: Duration,
    /// The adaptive limiter's p95 target at the end of the fed window, if known.
    pub target_p95: Option<Duration>,
    /// How far the downstream's script had run when the clock started: the rows' time 0.
    pub script_offset: Duration,
}

pub(crate) async fn run(target: &Target, c: &Common, t: Timed) -> anyhow::Result<Outcome> {
    let queue = target.queue(t.scenario).await?;
    let observed = Arc::new(Observed::new(t.jobs_cap, !c.no_track));
    let mut feed = Feed::new(
        target.conn.clone(),
        &queue,
        payload(c.payload_bytes, c.seed),
        t.jobs_cap,
        t.max_attempts,
    )
    .await?;
    if let Pace::Backlog(n) = t.pace {
        feed.push(n).await?; // start with work waiting, so the first second is not a ramp
    }
    let mut spec = spec(c, target, &queue, false)?;
    // Each process simulates its own downstream: give each an equal share of capacity. The
    // script's clock starts now, before the consumers are up (processes take a while).
    let epoch = unix_ms();
    spec.downstream = t
        .downstream
        .map(|(opts, seed)| (opts.shared(c.consumers() as u64), seed, epoch));
    let mut fleet = Fleet::start(spec, c.consumers(), false, observed.clone())?;
    // The clock starts with the consumers up: their start-up (connections, scripts, the
    // first fetch) is not the latency of the jobs fed meanwhile (it put 18-32 ms on the
    // first 100 ms of `steady` at 180,000 jobs/s, a good part of its p99).
    fleet.ready(READY_TIMEOUT).await?;
    let started = Instant::now();
    // How far the downstream's script ran before the clock started, and the jobs done in it
    // (a backlog waits): neither is the window's.
    let script_offset = Duration::from_millis(unix_ms().saturating_sub(epoch));
    let done_before = observed.processed();
    let ideal = t
        .ideal
        .map(|f| -> Ideal { Arc::new(move |e: Duration| f(e + script_offset)) });
    let sampler = Sampler::start(SamplerConfig {
        observed: observed.clone(),
        gauges: fleet.gauges(),
        conn: target.conn.clone(),
        queue: queue.clone(),
        ideal,
        total: None,
        quiet: c.quiet,
    });
    if std::env::var_os("LT_WAIT").is_some() {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    produce(&mut feed, target, &queue, t.pace, started + t.length).await?;
    let window = started.elapsed();
    let processed = observed.processed() - done_before;
    let target_p95 = fleet.target_p95();
    let settled = settle(target, &queue, SETTLE_TIMEOUT).await?;
    let totals = fleet.stop().await?;
    let elapsed = started.elapsed();
    let rows = sampler.finish().await;
    target.cleanup(&queue).await;
    Ok(Outcome {
        enqueued: feed.enqueued(),
        enqueue_rate: rate(feed.enqueued(), window),
        achieved_rate: rate(processed, window),
        window,
        rows,
        totals,
        tally: observed.tracker.as_ref().map(|tr| tr.tally(feed.enqueued())),
        settled,
        elapsed,
        target_p95,
        script_offset,
        observed,
    })
}

/// Feeds the queue until `until` (or the job cap).
pub(crate) async fn produce(
    feed: &mut Feed,
    target: &Target,
    queue: &str,
    pace: Pace,
    until: Instant,
) -> anyhow::Result<()> {
    let q = weir::Queue::new(target.conn.clone(), queue)?;
    let start = Instant::now();
    let mut tick = feed_ticks();
    while Instant::now() < until && feed.remaining() > 0 {
        tick.tick().await;
        let n = match pace {
            Pace::Rate(r) => due(start, r, feed.enqueued()),
            Pace::Backlog(target_depth) => {
                let s = q.stats().await?;
                target_depth.saturating_sub(s.ready_total() + s.delayed)
            }
        };
        feed.push(n).await?;
    }
    Ok(())
}

/// The producer's clock: a tick every [`FEED_TICK`], late ticks not made up in a burst.
pub(crate) fn feed_ticks() -> tokio::time::Interval {
    let mut tick = tokio::time::interval(FEED_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick
}

/// Jobs due at `rate` per second since `start`, less the `sent` ones.
pub(crate) fn due(start: Instant, rate: u64, sent: u64) -> u64 {
    let due = (start.elapsed().as_secs_f64() * rate as f64) as u64;
    due.saturating_sub(sent)
}

/// Rows of the fed window only (the settle tail is left out of limit figures).
pub(crate) fn window_rows(rows: &[Row], window: Duration) -> &[Row] {
    let end = rows.partition_point(|r| r.t_s <= window.as_secs_f64() + 1e-6);
    &rows[..end]
}
