//! The consumer: wires fetcher → pool → acker, plus the reclaimer, and runs them until
//! shutdown (or, in drain mode, until the queue is empty).
//!
//! Shutdown order, the one place it is written down:
//! 1. stop fetching (calls in flight finish; their leases are registered with the acker);
//! 2. the pool stops starting jobs; jobs still buffered stay leased, un-started;
//! 3. running jobs finish, up to `shutdown_timeout`;
//! 4. the acker flushes every outcome, then releases every lease still held (un-started
//!    or abandoned jobs) back to the front of ready;
//! 5. housekeeping (the reclaimer, the runtime settings watch) stops.

pub mod acker;
pub(crate) mod fetcher;
pub mod housekeeping;
pub mod pool;
pub mod settings;

use crate::consumer::acker::{Acker, AckerConfig, Tally};
use crate::consumer::fetcher::{Fetcher, FetcherConfig};
use crate::consumer::housekeeping::{Reclaimer, ReclaimerConfig};
use crate::consumer::pool::{Buffer, Pool, PoolConfig};
use crate::consumer::settings::SettingsWatch;
use crate::error::{Error, Result};
use crate::handler::Registry;
use crate::limiter::limit::Limit;
use crate::limiter::{Limiter, LimiterConfig, Rate, RateGate};
use crate::metrics::QueueMetrics;
use crate::queue::keys::QueueKeys;
use crate::queue::scripts;
use crate::redis::conn::Redis;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Everything a consumer needs to know; each part has documented defaults.
#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    /// Queue name (default `default`).
    pub queue: String,
    /// Concurrency limit: jobs (or batch-handler calls) running at once, 1 or more (default
    /// 64). With an adaptive limiter, the starting limit (clamped into its min..=max).
    pub concurrency: usize,
    /// Adaptive concurrency (AIMD); none keeps the limit fixed at `concurrency` (default none).
    /// Pair it with `pool.job_timeout` (or a handler with its own timeout, as the HTTP
    /// handler has): a job that never finishes gives the limiter no signal at all.
    pub limiter: Option<LimiterConfig>,
    /// Jobs/s cap with burst (GCRA), composed with the concurrency limit (default none).
    pub rate: Option<Rate>,
    /// How often to look for runtime settings (`weir limits set`); none: never
    /// (default 1 s).
    pub settings_poll: Option<Duration>,
    /// Fetching.
    pub fetcher: FetcherConfig,
    /// Running jobs.
    pub pool: PoolConfig,
    /// Recording outcomes.
    pub acker: AckerConfig,
    /// Reclaiming expired leases.
    pub reclaimer: ReclaimerConfig,
    /// How long running jobs may take to finish at shutdown (default 30 s).
    pub shutdown_timeout: Duration,
    /// Stop by itself once nothing is ready, delayed or in flight (default false).
    pub drain: bool,
    /// Record metrics (default true; they reach Prometheus once `metrics::install` ran).
    pub metrics: bool,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        Self {
            queue: "default".into(),
            concurrency: 64,
            limiter: None,
            rate: None,
            settings_poll: Some(Duration::from_secs(1)),
            fetcher: FetcherConfig::default(),
            pool: PoolConfig::default(),
            acker: AckerConfig::default(),
            reclaimer: ReclaimerConfig::default(),
            shutdown_timeout: Duration::from_secs(30),
            drain: false,
            metrics: true,
        }
    }
}

impl ConsumerConfig {
    /// Checks every value against its range, with a message that names it.
    pub fn validate(&self) -> Result<()> {
        QueueKeys::new(&self.queue)?;
        let check = |ok: bool, msg: &str| {
            if ok {
                Ok(())
            } else {
                Err(Error::Config(msg.to_owned()))
            }
        };
        check(
            (1..=100_000).contains(&self.concurrency),
            "concurrency must be between 1 and 100000",
        )?;
        check(
            (1..=10_000).contains(&self.fetcher.batch),
            "batch must be between 1 and 10000",
        )?;
        check(
            (1..=16).contains(&self.fetcher.pipeline),
            "fetch pipeline must be between 1 and 16",
        )?;
        check(
            self.fetcher.visibility >= Duration::from_millis(100),
            "visibility timeout must be at least 100ms",
        )?;
        check(
            (1..=10_000).contains(&self.acker.flush_max),
            "ack flush size must be between 1 and 10000",
        )?;
        check(
            self.acker.visibility >= Duration::from_millis(100),
            "acker visibility timeout (heartbeat) must be at least 100ms",
        )?;
        check(
            self.acker.dead_cap >= 1 && self.reclaimer.dead_cap >= 1,
            "dead-letter cap must be at least 1",
        )?;
        check(
            self.pool.job_timeout.is_none_or(|t| t >= pool::MIN_JOB_TIMEOUT),
            "job timeout must be at least 10ms",
        )?;
        check(
            self.reclaimer.interval >= Duration::from_millis(10),
            "reclaim interval must be at least 10ms",
        )?;
        if let Some(l) = &self.limiter {
            l.validate()?;
        }
        if let Some(r) = &self.rate {
            r.validate()?;
        }
        check(
            self.fetcher.max_envelope_bytes >= 64,
            "envelope size limit must be at least 64 bytes",
        )?;
        Ok(())
    }
}

/// How often queue depths are sampled for metrics.
const STATS_INTERVAL: Duration = Duration::from_secs(1);

/// What a consumer did, returned when it stops.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Report {
    /// Jobs acked.
    pub acked: u64,
    /// Jobs sent back for retry.
    pub retried: u64,
    /// Jobs dead-lettered.
    pub dead: u64,
    /// Outcomes refused because the lease had been lost.
    pub lost_leases: u64,
    /// Un-started jobs handed back at shutdown.
    pub released: u64,
}

/// A running consumer's handles, for code that embeds weir.
#[derive(Clone, Debug)]
pub struct Handle {
    /// The concurrency limit; [`Limit::set`] changes it live (with an adaptive limiter,
    /// change its bounds through [`Limiter::reconfigure`] instead).
    pub limit: Arc<Limit>,
    /// The adaptive limiter, if configured.
    pub limiter: Option<Arc<Limiter>>,
    /// The jobs/s cap; [`RateGate::set`] changes it live.
    pub rate: Arc<RateGate>,
    /// Live totals.
    pub tally: Arc<Tally>,
}

/// A consumer of one queue.
#[derive(Debug)]
pub struct Consumer {
    config: ConsumerConfig,
    redis: Redis,
    registry: Arc<Registry>,
    limit: Arc<Limit>,
    limiter: Option<Arc<Limiter>>,
    rate: Arc<RateGate>,
    tally: Arc<Tally>,
}

impl Consumer {
    /// A consumer with `config` on `redis`, running jobs with `registry`.
    pub fn new(config: ConsumerConfig, redis: Redis, registry: Registry) -> Result<Self> {
        config.validate()?;
        if registry.is_empty() {
            return Err(Error::Config("no handler registered".into()));
        }
        let limit = Limit::new(config.concurrency);
        let limiter = match &config.limiter {
            Some(c) => Some(Arc::new(Limiter::new(c.clone(), limit.clone())?)),
            None => None,
        };
        let rate = Arc::new(RateGate::new(config.rate)?);
        Ok(Self {
            limiter,
            rate,
            config,
            redis,
            registry: Arc::new(registry),
            limit,
            tally: Arc::default(),
        })
    }

    /// Handles to watch and steer the consumer while it runs.
    pub fn handle(&self) -> Handle {
        Handle {
            limit: self.limit.clone(),
            limiter: self.limiter.clone(),
            rate: self.rate.clone(),
            tally: self.tally.clone(),
        }
    }

    /// Runs until `shutdown` is cancelled (or the queue is empty, in drain mode).
    pub async fn run(self, shutdown: CancellationToken) -> Result<Report> {
        let c = &self.config;
        let keys = QueueKeys::new(&c.queue)?;
        let conn = self.redis.connect_healing().await?;
        // Logged once connected, so an unreachable Redis gives only the one error line.
        tracing::info!(queue = %c.queue, concurrency = c.concurrency, "working");
        let (pool_tx, pool_rx) = mpsc::unbounded_channel();
        let (acker_tx, acker_rx) = mpsc::unbounded_channel();
        let buffer = Arc::new(Buffer::default());
        let stop_fetching = shutdown.child_token();
        let finish_acks = CancellationToken::new();
        let stop_housekeeping = CancellationToken::new();

        if let (Some(l), true) = (&self.limiter, c.metrics) {
            l.attach_metrics(crate::metrics::LimiterMetrics::new(&c.queue));
        }
        let metrics = if c.metrics {
            QueueMetrics::new(&c.queue, scripts::SCRIPT_NAMES)
        } else {
            QueueMetrics::disabled(&c.queue)
        };
        // The heartbeat must beat within the lease the fetcher takes: a config that sets
        // only `fetcher.visibility` would otherwise beat every 10 s (a third of the
        // acker's 30 s default) on leases that expire sooner.
        let mut acker_config = c.acker.clone();
        acker_config.visibility = acker_config.visibility.min(c.fetcher.visibility);
        let acker = Acker::new(
            acker_config,
            conn.clone(),
            keys.clone(),
            self.tally.clone(),
            metrics.clone(),
        );
        let acker = tokio::spawn(acker.run(acker_rx, finish_acks.clone()));
        let reclaimer = Reclaimer {
            config: c.reclaimer.clone(),
            conn: conn.clone(),
            keys: keys.clone(),
            metrics: metrics.clone(),
        };
        let reclaimer = tokio::spawn(reclaimer.run(stop_housekeeping.clone()));
        let settings = self.watch_settings(&conn, &stop_housekeeping);
        let fetcher = Fetcher {
            config: c.fetcher.clone(),
            redis: self.redis.clone(),
            conn: conn.clone(),
            keys: keys.clone(),
            limit: self.limit.clone(),
            rate: self.rate.clone(),
            buffer: buffer.clone(),
            pool: pool_tx,
            acker: acker_tx.clone(),
            metrics: metrics.clone(),
            dead_cap: c.acker.dead_cap,
        };
        let fetcher = tokio::spawn(fetcher.run(stop_fetching.clone()));
        let pool = Pool {
            config: c.pool.clone(),
            registry: self.registry.clone(),
            limit: self.limit.clone(),
            limiter: self.limiter.clone(),
            rate: self.rate.clone(),
            buffer,
            acker: acker_tx,
            metrics: metrics.clone(),
        };
        let pool = tokio::spawn(pool.run(pool_rx, stop_fetching.clone()));
        let sampler = if c.metrics {
            Some(stop_housekeeping.clone())
        } else {
            None
        };
        let sampler = tokio::spawn(sample(
            conn.clone(),
            keys.clone(),
            self.limit.clone(),
            metrics,
            sampler,
        ));
        let mut tasks = AbortOnDrop(vec![
            acker.abort_handle(),
            reclaimer.abort_handle(),
            fetcher.abort_handle(),
            pool.abort_handle(),
            sampler.abort_handle(),
        ]);
        tasks.0.extend(settings.map(|t| t.abort_handle()));
        if c.drain {
            let watch = tokio::spawn(drain_watch(
                conn.clone(),
                keys.clone(),
                self.limit.clone(),
                stop_fetching.clone(),
            ));
            tasks.0.push(watch.abort_handle());
        }

        stop_fetching.cancelled().await;
        tracing::info!("stopping: no more fetches; finishing running jobs");
        let _ = fetcher.await;
        let _ = pool.await;
        if tokio::time::timeout(c.shutdown_timeout, self.limit.wait_idle())
            .await
            .is_err()
        {
            tracing::warn!(
                running = self.limit.in_flight(),
                "shutdown timeout: abandoning running jobs; their leases are released"
            );
        }
        finish_acks.cancel();
        let _ = acker.await;
        stop_housekeeping.cancel();
        let _ = reclaimer.await;
        let t = &self.tally;
        Ok(Report {
            acked: t.acked.load(Ordering::Relaxed),
            retried: t.retried.load(Ordering::Relaxed),
            dead: t.dead.load(Ordering::Relaxed),
            lost_leases: t.lost_leases.load(Ordering::Relaxed),
            released: t.released.load(Ordering::Relaxed),
        })
    }
}

/// Publishes queue depths (one stats call) and the local limit and in-flight count once a
/// second, while a metrics recorder is installed.
async fn sample(
    mut conn: crate::redis::conn::HealingConnection,
    keys: QueueKeys,
    limit: Arc<Limit>,
    metrics: QueueMetrics,
    stop: Option<CancellationToken>,
) {
    let Some(stop) = stop.filter(|_| crate::metrics::is_installed()) else {
        return;
    };
    loop {
        metrics.limit.set(limit.get() as f64);
        metrics.in_flight.set(limit.in_flight() as f64);
        if let Ok(s) = scripts::stats(&mut conn, &keys).await {
            s.record(&metrics);
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(STATS_INTERVAL) => {}
        }
    }
}

/// The consumer's background tasks, aborted if `run` is dropped before it returns (an
/// aborted task, a caller's timeout or `select!`): without this they would go on fetching
/// and extending leases with nobody to stop them, and jobs stuck in a dead consumer would
/// never come back. Aborting tasks that already finished is a no-op.
struct AbortOnDrop(Vec<tokio::task::AbortHandle>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

impl Consumer {
    /// Starts polling the queue's runtime settings (`weir limits set`), if configured.
    fn watch_settings(
        &self,
        conn: &crate::redis::conn::HealingConnection,
        stop: &CancellationToken,
    ) -> Option<tokio::task::JoinHandle<()>> {
        let c = &self.config;
        let every = c.settings_poll?;
        {
            let watch = SettingsWatch {
                every,
                conn: conn.clone(),
                queue: c.queue.clone(),
                limiter: self.limiter.clone().zip(c.limiter.clone()),
                rate: (self.rate.clone(), c.rate),
            };
            Some(tokio::spawn(watch.run(stop.clone())))
        }
    }
}

/// In drain mode: stops the consumer once the queue has nothing ready, delayed or leased.
/// One cheap stats call every 50 ms, only while this process runs nothing.
async fn drain_watch(
    mut conn: crate::redis::conn::HealingConnection,
    keys: QueueKeys,
    limit: Arc<Limit>,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
        if limit.in_flight() > 0 {
            continue;
        }
        if let Ok(s) = scripts::stats(&mut conn, &keys).await
            && s.pending() == 0
        {
            stop.cancel();
            return;
        }
    }
}
