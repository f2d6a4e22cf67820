//! The time series: every 100 ms, one row of throughput, in-flight, limit, latency
//! percentiles of the window and queue depth; it also drives the progress bar. The queue
//! depth comes from a separate poller, so a slow Redis never delays a row.

use crate::fleet::GaugeReader;
use crate::histogram::summarize;
use crate::observed::Observed;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;
use weir::CancellationToken;
use weir::Conn;

/// Sampling period of the time series.
pub(crate) const PERIOD: Duration = Duration::from_millis(100);

/// One row of `timeseries.csv`.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub(crate) struct Row {
    /// Seconds since the sampler started.
    pub t_s: f64,
    /// Jobs processed per second in this window.
    pub throughput: f64,
    /// Jobs running: the mean over the window of readings taken every millisecond.
    pub in_flight: f64,
    /// The most jobs running at once in the window (of those readings).
    pub in_flight_max: u64,
    pub limit: u64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    /// Ready + delayed jobs.
    pub queue_depth: u64,
    /// The most jobs/s the downstream can take now (downstream scenario), else 0.
    pub ideal: f64,
    /// The downstream's capacity (concurrent calls) now (downstream scenario), else 0.
    pub capacity: u64,
    /// Failed handler calls per second.
    pub errors_per_s: f64,
    /// Of those, calls the simulated downstream shed, per second (in-process consumers).
    pub shed_per_s: f64,
}

/// The ideal throughput (jobs/s) and the downstream's capacity at a time since start,
/// for scenarios that know them.
pub(crate) type Ideal = Arc<dyn Fn(Duration) -> (f64, u64) + Send + Sync>;

pub(crate) struct Sampler {
    stop: CancellationToken,
    task: JoinHandle<Vec<Row>>,
}

pub(crate) struct SamplerConfig {
    pub observed: Arc<Observed>,
    pub gauges: GaugeReader,
    pub conn: Conn,
    pub queue: String,
    pub ideal: Option<Ideal>,
    /// Progress bar length (jobs), if known.
    pub total: Option<u64>,
    pub quiet: bool,
}

impl Sampler {
    pub(crate) fn start(c: SamplerConfig) -> Self {
        let stop = CancellationToken::new();
        let depth = Arc::new(AtomicU64::new(0));
        tokio::spawn(poll_depth(
            c.conn.clone(),
            c.queue.clone(),
            depth.clone(),
            stop.clone(),
        ));
        let task = tokio::spawn(sample(c, depth, stop.clone()));
        Self { stop, task }
    }

    /// Stops sampling (after one last row) and returns the series.
    pub(crate) async fn finish(self) -> Vec<Row> {
        self.stop.cancel();
        self.task.await.unwrap_or_default()
    }
}

fn progress_bar(total: Option<u64>, quiet: bool) -> ProgressBar {
    let bar = match total {
        Some(n) => ProgressBar::new(n),
        None => ProgressBar::no_length(),
    };
    bar.set_draw_target(if quiet {
        ProgressDrawTarget::hidden()
    } else {
        ProgressDrawTarget::stderr_with_hz(10)
    });
    let template = match total {
        Some(_) => "{elapsed_precise} [{bar:25}] {human_pos}/{human_len} {wide_msg}",
        None => "{elapsed_precise} {human_pos} jobs {wide_msg}",
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

async fn sample(c: SamplerConfig, depth: Arc<AtomicU64>, stop: CancellationToken) -> Vec<Row> {
    let bar = progress_bar(c.total, c.quiet);
    let started = Instant::now();
    let mut tick = tokio::time::interval(PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Counted from here: what was done before (a backlog drained while the consumers
    // came up) is not the first row's.
    let (mut last_t, mut last_done, mut last_err, mut last_shed) = (
        0.0,
        c.observed.processed(),
        c.observed.errors.load(Ordering::Relaxed),
        c.observed.shed.load(Ordering::Relaxed),
    );
    let mut rows = Vec::new();
    loop {
        let stopping = tokio::select! {
            _ = tick.tick() => false,
            _ = stop.cancelled() => true,
        };
        let t = started.elapsed().as_secs_f64();
        let (counts, max) = c.observed.window.take();
        c.observed.total.merge_counts(&counts, max);
        let s = summarize(&counts, max);
        let done = c.observed.processed();
        let errors = c.observed.errors.load(Ordering::Relaxed);
        let shed = c.observed.shed.load(Ordering::Relaxed);
        let g = (c.gauges)();
        let dt = (t - last_t).max(1e-3);
        let (ideal, capacity) = c.ideal.as_ref().map_or((0.0, 0), |f| f(started.elapsed()));
        let row = Row {
            t_s: t,
            throughput: (done - last_done) as f64 / dt,
            in_flight: g.in_flight,
            in_flight_max: g.in_flight_max,
            limit: g.limit,
            p50_ms: s.p50_ms,
            p95_ms: s.p95_ms,
            p99_ms: s.p99_ms,
            queue_depth: depth.load(Ordering::Relaxed),
            ideal,
            capacity,
            errors_per_s: (errors - last_err) as f64 / dt,
            shed_per_s: (shed - last_shed) as f64 / dt,
        };
        (last_t, last_done, last_err, last_shed) = (t, done, errors, shed);
        bar.set_position(done);
        bar.set_message(format!(
            "{:.0}/s · limit {} · in flight {:.0} · queue {}",
            row.throughput, row.limit, row.in_flight, row.queue_depth
        ));
        // A last partial window shorter than 20 ms would only add noise to the series.
        if !stopping || dt >= 0.02 {
            rows.push(row);
        }
        if stopping {
            bar.finish_and_clear();
            return rows;
        }
    }
}

async fn poll_depth(conn: Conn, queue: String, depth: Arc<AtomicU64>, stop: CancellationToken) {
    let Ok(q) = weir::Queue::new(conn, &queue) else {
        return;
    };
    while !stop.is_cancelled() {
        if let Ok(Ok(s)) = tokio::time::timeout(Duration::from_secs(1), q.stats()).await {
            depth.store(s.ready_total() + s.delayed, Ordering::Relaxed);
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(PERIOD) => {}
        }
    }
}
