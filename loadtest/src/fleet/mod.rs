//! The consumers of a run: one in-process consumer, or a fleet of consumer processes
//! (the harness re-runs its own binary with the hidden `consumer` subcommand).

mod local;
mod procs;

use crate::cli::DownstreamOpts;
use crate::observed::{Gauges, Observed};
pub(crate) use procs::Procs;
use std::sync::Arc;
use std::time::Duration;
use weir::ConsumerConfig;
use weir::limiter::{KeyLimiterConfig, LimiterConfig, Rate};

/// What every consumer of a run is told.
#[derive(Debug, Clone)]
pub(crate) struct Spec {
    pub redis_url: String,
    pub queue: String,
    /// The fixed limit, or the adaptive limiter's starting limit.
    pub concurrency: usize,
    /// The adaptive limiter (`None`: the limit stays at `concurrency`).
    pub limiter: Option<LimiterConfig>,
    /// The adaptive limiters per job key (`None`: none).
    pub key_limiter: Option<KeyLimiterConfig>,
    /// Jobs/s cap of each consumer.
    pub rate: Option<Rate>,
    pub batch: usize,
    pub pipeline: usize,
    pub visibility: Duration,
    /// Stop once the queue is empty.
    pub drain: bool,
    /// Call the simulated downstream (its options, seed and script start, unix ms).
    pub downstream: Option<(DownstreamOpts, u64, u64)>,
    /// Worker threads of each consumer process (`None`: its default).
    pub worker_threads: Option<u16>,
}

impl Spec {
    /// The limit a consumer starts with (the adaptive limiter clamps it into its bounds).
    pub(crate) fn initial_limit(&self) -> usize {
        match &self.limiter {
            Some(l) => self.concurrency.clamp(l.aimd.min, l.aimd.max),
            None => self.concurrency,
        }
    }
}

/// Applies the harness's fetch and lease settings to a consumer config.
pub(crate) fn tune(c: &mut ConsumerConfig, batch: usize, pipeline: usize, visibility: Duration) {
    c.fetcher.batch = batch;
    c.fetcher.pipeline = pipeline;
    c.lease = visibility;
    // Reclaim soon after a short lease expires, so chaos runs do not wait long.
    c.reclaimer.interval = (visibility / 4).clamp(Duration::from_millis(100), Duration::from_secs(1));
}

/// What the consumers did, summed.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub(crate) struct Totals {
    pub acked: u64,
    pub retried: u64,
    pub dead: u64,
    pub lost_leases: u64,
    pub released: u64,
}

impl Totals {
    fn add(&mut self, r: [u64; 5]) {
        self.acked += r[0];
        self.retried += r[1];
        self.dead += r[2];
        self.lost_leases += r[3];
        self.released += r[4];
    }
}

/// A running set of consumers.
pub(crate) enum Fleet {
    Local(local::Local),
    Procs(Box<Procs>),
}

/// Reads the fleet's gauges (limit, in-flight) from any task.
pub(crate) type GaugeReader = Arc<dyn Fn() -> Gauges + Send + Sync>;

impl Fleet {
    /// Starts `consumers` consumers: in this process if 1 (unless `processes`), else as
    /// child processes.
    pub(crate) fn start(
        spec: Spec,
        consumers: usize,
        processes: bool,
        observed: Arc<Observed>,
    ) -> anyhow::Result<Fleet> {
        if consumers == 1 && !processes {
            Ok(Fleet::Local(local::Local::start(&spec, observed)?))
        } else {
            Ok(Fleet::Procs(Box::new(Procs::start(spec, consumers, observed)?)))
        }
    }

    /// One consumer in this process running `handler` (a scenario with its own
    /// accounting, such as `keys`).
    pub(crate) fn local(spec: Spec, handler: impl weir::Handler + 'static) -> anyhow::Result<Fleet> {
        Ok(Fleet::Local(local::Local::with_handler(&spec, handler)?))
    }

    pub(crate) fn gauges(&self) -> GaugeReader {
        match self {
            Fleet::Local(l) => l.gauges(),
            Fleet::Procs(p) => p.gauges(),
        }
    }

    /// Waits until every consumer has stopped by itself (drain mode), up to `timeout`;
    /// then asks the rest to stop. Returns the totals and whether all stopped in time.
    pub(crate) async fn wait(self, timeout: Duration) -> anyhow::Result<(Totals, bool)> {
        match self {
            Fleet::Local(l) => l.wait(timeout).await,
            Fleet::Procs(p) => p.wait(timeout).await,
        }
    }

    /// Waits until every consumer is up (connected, subscribed, its first fetch answered:
    /// `weir::Handle::ready`), so a scenario's clock and jobs start after the consumers'
    /// start-up rather than counting it, up to `timeout`.
    pub(crate) async fn ready(&mut self, timeout: Duration) -> anyhow::Result<()> {
        match self {
            Fleet::Local(l) => l.ready(timeout).await,
            Fleet::Procs(p) => p.ready(timeout).await,
        }
    }

    /// The p95 target the adaptive limiter holds now (in-process consumer only: a
    /// relative target resolves at run time; `None` for processes or a fixed limit).
    pub(crate) fn target_p95(&self) -> Option<Duration> {
        match self {
            Fleet::Local(l) => l.target_p95(),
            Fleet::Procs(_) => None,
        }
    }

    /// Asks every consumer to stop gracefully and waits for them.
    pub(crate) async fn stop(self) -> anyhow::Result<Totals> {
        match self {
            Fleet::Local(l) => l.stop().await,
            Fleet::Procs(p) => p.stop().await,
        }
    }
}
