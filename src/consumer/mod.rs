//! The consumer: wires fetcher → buffer → pool → acker, plus housekeeping, and runs them
//! until shutdown (or, in drain mode, until the queue is empty).
//!
//! Shutdown order, the one place it is written down:
//! 1. stop fetching (calls in flight finish; their leases are registered with the acker);
//! 2. the pool stops starting jobs; jobs still buffered stay leased, un-started;
//! 3. running jobs finish, up to `shutdown_timeout`;
//! 4. the acker flushes every outcome, then releases every lease still held (un-started
//!    or abandoned jobs) back to the front of ready;
//! 5. housekeeping (the reclaimer, the runtime settings watch, ...) stops.
//!
//! A task that panics starts the same order at step 1 (see `tasks.rs`), so the others
//! still settle what they hold; the consumer then returns the failure.

pub mod acker;
pub(crate) mod buffer;
mod config;
pub(crate) mod fetcher;
mod handle;
pub mod housekeeping;
pub mod pool;
pub mod settings;
mod tasks;

pub use config::ConsumerConfig;
pub use handle::{Handle, Report};

use crate::consumer::acker::{Acker, AckerDeps, Tally};
use crate::consumer::buffer::Buffer;
use crate::consumer::fetcher::Fetcher;
use crate::consumer::housekeeping::{DrainWatch, Reclaimer, Sampler, SettingsWatch};
use crate::consumer::pool::Pool;
use crate::consumer::tasks::{Task, Tasks};
use crate::error::{Error, Result};
use crate::handler::Registry;
use crate::limiter::limit::Limit;
use crate::limiter::{Limiter, RateGate};
use crate::metrics::{LimiterMetrics, QueueMetrics};
use crate::queue::keys::QueueKeys;
use crate::redis::conn::{HealingConnection, Redis};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

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

    /// Runs until `shutdown` is cancelled (or the queue is empty, in drain mode). If a
    /// background task panics, the consumer stops as if shut down and returns
    /// [`Error::TaskFailed`].
    pub async fn run(self, shutdown: CancellationToken) -> Result<Report> {
        let c = &self.config;
        let keys = QueueKeys::new(&c.queue)?;
        let conn = self.redis.connect_healing().await?;
        crate::redis::eviction::check(&mut conn.clone(), c.allow_eviction).await?;
        // Logged once connected, so an unreachable Redis gives only the one error line.
        tracing::info!(queue = %c.queue, concurrency = c.concurrency, "working");
        let steps = Steps {
            stop_fetching: shutdown.child_token(),
            finish_acks: CancellationToken::new(),
            stop_housekeeping: CancellationToken::new(),
        };
        let mut tasks = Tasks::new(steps.stop_fetching.clone());
        let started = self.start(&mut tasks, &steps, conn, keys);

        steps.stop_fetching.cancelled().await;
        tracing::info!("stopping: no more fetches; finishing running jobs");
        tasks.join(started.fetcher).await;
        tasks.join(started.pool).await;
        if tokio::time::timeout(c.shutdown_timeout, self.limit.wait_idle())
            .await
            .is_err()
        {
            tracing::warn!(
                running = self.limit.in_flight(),
                "shutdown timeout: abandoning running jobs; their leases are released"
            );
        }
        steps.finish_acks.cancel();
        tasks.join(started.acker).await;
        steps.stop_housekeeping.cancel();
        tasks.join(started.reclaimer).await;
        // The other housekeeping tasks are aborted when `tasks` drops.
        match tasks.failure() {
            Some(e) => Err(e),
            None => Ok(Report::of(&self.tally)),
        }
    }

    /// Spawns the fetcher, the pool, the acker and housekeeping.
    fn start(&self, tasks: &mut Tasks, steps: &Steps, conn: HealingConnection, keys: QueueKeys) -> Started {
        let c = &self.config;
        let metrics = if c.metrics {
            QueueMetrics::new(&c.queue, crate::queue::scripts::SCRIPT_NAMES)
        } else {
            QueueMetrics::disabled(&c.queue)
        };
        if let (Some(l), true) = (&self.limiter, c.metrics) {
            l.attach_metrics(LimiterMetrics::new(&c.queue));
        }
        let (pool_tx, pool_rx) = mpsc::unbounded_channel();
        let (acker_tx, acker_rx) = mpsc::unbounded_channel();
        let buffer = Arc::new(Buffer::default());
        let acker = Acker::new(
            c.acker.clone(),
            AckerDeps {
                conn: conn.clone(),
                keys: keys.clone(),
                lease: c.lease,
                tally: self.tally.clone(),
                metrics: metrics.clone(),
            },
        );
        let acker = tasks.spawn("acker", acker.run(acker_rx, steps.finish_acks.clone()));
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
            lease: c.lease,
            unknown_kind_grace: c.pool.unknown_kind_grace,
        };
        let fetcher = tasks.spawn("fetcher", fetcher.run(steps.stop_fetching.clone()));
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
        let pool = tasks.spawn("pool", pool.run(pool_rx, steps.stop_fetching.clone()));
        let reclaimer = self.start_housekeeping(tasks, steps, conn, keys, metrics);
        Started {
            fetcher,
            pool,
            acker,
            reclaimer,
        }
    }

    /// Spawns the reclaimer (returned: the shutdown waits for it) and the other
    /// housekeeping tasks this configuration asks for.
    fn start_housekeeping(
        &self,
        tasks: &mut Tasks,
        steps: &Steps,
        conn: HealingConnection,
        keys: QueueKeys,
        metrics: QueueMetrics,
    ) -> Task {
        let c = &self.config;
        let stop = &steps.stop_housekeeping;
        let reclaimer = Reclaimer::new(c.reclaimer.clone(), conn.clone(), keys.clone(), metrics.clone());
        let reclaimer = tasks.spawn("reclaimer", reclaimer.run(stop.clone()));
        if let Some(every) = c.settings_poll {
            let limiter = self.limiter.clone().zip(c.limiter.clone());
            let rate = (self.rate.clone(), c.rate);
            let watch = SettingsWatch::new(every, conn.clone(), &keys, limiter, rate);
            tasks.spawn("settings watch", watch.run(stop.clone()));
        }
        if c.metrics {
            let sampler = Sampler::new(conn.clone(), keys.clone(), self.limit.clone(), metrics);
            tasks.spawn("sampler", sampler.run(stop.clone()));
        }
        if c.drain {
            let watch = DrainWatch::new(conn, keys, self.limit.clone());
            tasks.spawn("drain watch", watch.run(steps.stop_fetching.clone()));
        }
        reclaimer
    }
}

/// The tokens of the shutdown order's steps.
struct Steps {
    /// Steps 1 and 2: the fetcher and the pool stop. Cancelled by `shutdown`, by the drain
    /// watch, or by a task that failed.
    stop_fetching: CancellationToken,
    /// Step 4: the acker flushes, releases what is still held, and ends.
    finish_acks: CancellationToken,
    /// Step 5.
    stop_housekeeping: CancellationToken,
}

/// The tasks the shutdown waits for, in its order.
struct Started {
    fetcher: Task,
    pool: Task,
    acker: Task,
    reclaimer: Task,
}
