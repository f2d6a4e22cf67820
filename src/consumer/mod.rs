//! The consumer: wires fetcher → buffer → pool → acker, plus housekeeping, and runs them
//! until shutdown (or, in drain mode, until the queue is empty).
//!
//! Shutdown order, the one place it is written down:
//! 1. stop fetching (calls in flight finish; their leases go into the table);
//! 2. the pool stops starting jobs; jobs still buffered stay leased, un-started;
//! 3. running jobs finish, up to `shutdown_timeout`; the acker goes on writing outcomes;
//! 4. the acker stops writing (a write that keeps failing no longer holds anything up);
//!    jobs still running are aborted and each is charged an attempt (`runs.rs`);
//! 5. once every outcome is in, the acker writes them (giving up at
//!    `acker.final_flush_timeout`), then releases the leases of jobs that never ran back
//!    to the front of ready (a job whose outcome is known is never released: if its
//!    outcome could not be written, its lease expires and reclaim brings it back);
//! 6. housekeeping (the heartbeat, the reclaimer, the runtime settings watch, the cron
//!    task, ...) stops.
//!
//! A task that panics starts the same order at step 1 (see `tasks.rs`), so the others
//! still settle what they hold; the consumer then returns the failure.

// The acker's and pool's own configs and the tally are public (re-exported at the crate
// root); the rest of these modules is crate-private.
pub mod acker;
pub(crate) mod buffer;
mod config;
pub(crate) mod fetcher;
mod gate;
mod handle;
mod heartbeat;
pub mod housekeeping;
mod leases;
mod multi;
mod partitioned;
pub mod pool;
mod runs;
pub mod settings;
mod suspect;
mod tasks;
mod wake;

pub use config::ConsumerConfig;
pub use handle::{Backlog, Handle, Report};
pub use multi::{MultiConsumer, WeightedQueue};

use crate::consumer::acker::{Acker, AckerDeps, AckerMsg, Tally};
use crate::consumer::fetcher::Fetcher;
use crate::consumer::gate::Share;
use crate::consumer::heartbeat::{Heartbeat, Registration};
use crate::consumer::housekeeping::{CronTask, DrainWatch, KeyShares, Reclaimer, Sampler, SettingsWatch};
use crate::consumer::leases::Leases;
use crate::consumer::pool::Pool;
use crate::consumer::runs::Runs;
use crate::consumer::suspect::Suspects;
use crate::consumer::tasks::{Task, Tasks};
use crate::error::{Error, Result};
use crate::handler::Registry;
use crate::limiter::limit::Limit;
use crate::limiter::{KeyLimiters, Limiter, RateGate};
use crate::metrics::{LimiterMetrics, QueueMetrics};
use crate::queue::admin::WorkerRecord;
use crate::queue::keys::QueueKeys;
use crate::queue::partitions::Partitions;
use crate::redis::conn::{HealingConnection, Redis};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

/// What [`budget`] builds.
pub(crate) type Budget = (Arc<Limit>, Option<Arc<Limiter>>, Arc<RateGate>);

/// The concurrency limit, the adaptive limiter (if configured) and the jobs/s gate that
/// `config` asks for: one queue's, or a [`MultiConsumer`]'s for all its queues.
pub(crate) fn budget(config: &ConsumerConfig) -> Result<Budget> {
    let limit = Limit::new(config.concurrency);
    let limiter = match &config.limiter {
        Some(c) => Some(Arc::new(Limiter::new(c.clone(), limit.clone())?)),
        None => None,
    };
    let rate = Arc::new(RateGate::new(config.rate)?);
    Ok((limit, limiter, rate))
}

/// The per-key limiters `config` asks for (each queue has its own).
fn key_limiters(config: &ConsumerConfig) -> Result<Option<Arc<KeyLimiters>>> {
    match &config.key_limiter {
        Some(c) => Ok(Some(Arc::new(KeyLimiters::new(c.clone())?))),
        None => Ok(None),
    }
}

/// A consumer of one queue. (Several queues with weights: [`MultiConsumer`].)
#[derive(Debug)]
pub struct Consumer {
    config: ConsumerConfig,
    redis: Redis,
    registry: Arc<Registry>,
    limit: Arc<Limit>,
    /// Counts this consumer's running jobs: `limit` itself, or, when the limit is shared
    /// with other queues, a count of this queue's own.
    running: Arc<Limit>,
    limiter: Option<Arc<Limiter>>,
    /// With adaptive per-key limits, this queue's per-key limiters.
    key_limiters: Option<Arc<KeyLimiters>>,
    /// The jobs/s cap: the consumer's, or (when the budget is shared) this queue's own, on
    /// top of the process-wide one the gate applies.
    rate: Arc<RateGate>,
    /// With a shared budget: the gate that grants its slots, and this queue's lane.
    share: Option<Share>,
    tally: Arc<Tally>,
    backlog: Arc<Backlog>,
    /// In a partitioned queue's consumer: this pipeline's lane.
    lane: Option<partitioned::Lane>,
}

impl Consumer {
    /// A consumer with `config` on `redis`, running jobs with `registry`.
    pub fn new(config: ConsumerConfig, redis: Redis, registry: Registry) -> Result<Self> {
        config.validate()?;
        if registry.is_empty() {
            return Err(Error::Config("no handler registered".into()));
        }
        let (limit, limiter, rate) = budget(&config)?;
        Ok(Self {
            key_limiters: key_limiters(&config)?,
            limiter,
            rate,
            config,
            redis,
            registry: Arc::new(registry),
            running: limit.clone(),
            limit,
            share: None,
            tally: Arc::default(),
            backlog: Arc::default(),
            lane: None,
        })
    }

    /// The consumer of one queue of a [`MultiConsumer`]: its slots come through `share`,
    /// from the process-wide `limit` (driven by `limiter`); `config` is checked already.
    pub(crate) fn sharing(
        config: ConsumerConfig,
        redis: Redis,
        registry: Arc<Registry>,
        (limit, limiter): (Arc<Limit>, Option<Arc<Limiter>>),
        share: Share,
    ) -> Result<Self> {
        Ok(Self {
            rate: Arc::new(RateGate::new(config.rate)?),
            key_limiters: key_limiters(&config)?,
            config,
            redis,
            registry,
            limit,
            running: share.running().clone(),
            limiter,
            share: Some(share),
            tally: Arc::default(),
            backlog: Arc::default(),
            lane: None,
        })
    }

    /// The queue it consumes.
    pub fn queue(&self) -> &str {
        &self.config.queue
    }

    /// Handles to watch and steer the consumer while it runs.
    pub fn handle(&self) -> Handle {
        Handle {
            limit: self.limit.clone(),
            limiter: self.limiter.clone(),
            rate: self.rate.clone(),
            tally: self.tally.clone(),
            backlog: self.backlog.clone(),
        }
    }

    /// Runs until `shutdown` is cancelled (or the queue is empty, in drain mode). If a
    /// background task panics, the consumer stops as if shut down and returns
    /// [`Error::TaskFailed`].
    ///
    /// A partitioned queue (`weir queue create --partitions`) is consumed lane by lane
    /// (`partitioned/`): one pipeline per partition and one for its base, sharing this
    /// consumer's budget.
    pub async fn run(self, shutdown: CancellationToken) -> Result<Report> {
        if let Some(lane) = &self.lane {
            let (conns, keys) = (lane.conns.clone(), lane.keys.clone());
            return self.run_on(conns, keys, shutdown).await;
        }
        let c = &self.config;
        let keys = QueueKeys::new(&c.queue)?;
        let conn = self.redis.connect_healing().await?;
        crate::redis::eviction::check(&mut conn.clone(), c.allow_eviction).await?;
        crate::queue::functions::ensure(&mut conn.clone()).await?;
        // The heartbeat's own: no call queued on the other can delay it.
        let beat_conn = self.redis.connect_healing().await?;
        if let Some(parts) = Partitions::read(&mut conn.clone(), &c.queue).await? {
            if self.share.is_some() {
                return Err(Error::Config(format!(
                    "queue {} is partitioned: consume it on its own, not among several queues",
                    c.queue
                )));
            }
            return partitioned::run(self, parts, [conn, beat_conn], shutdown).await;
        }
        self.run_on([conn, beat_conn], keys, shutdown).await
    }

    /// [`Consumer::run`] on connections made, for the queue (or lane) `keys`.
    async fn run_on(
        self,
        [conn, beat_conn]: [HealingConnection; 2],
        keys: QueueKeys,
        shutdown: CancellationToken,
    ) -> Result<Report> {
        let c = &self.config;
        // Logged once connected, so an unreachable Redis gives only the one error line.
        if self.lane.is_none() {
            tracing::info!(queue = %c.queue, concurrency = c.concurrency, "working");
        }
        let steps = Steps {
            stop_fetching: shutdown.child_token(),
            finish_acks: CancellationToken::new(),
            stop_housekeeping: CancellationToken::new(),
        };
        let mut tasks = Tasks::new(steps.stop_fetching.clone());
        let started = self.start(&mut tasks, &steps, [conn, beat_conn], keys);

        steps.stop_fetching.cancelled().await;
        if self.lane.is_none() {
            tracing::info!("stopping: no more fetches; finishing running jobs");
        }
        tasks.join(started.fetcher).await;
        tasks.join(started.pool).await;
        let idle = tokio::time::timeout(c.shutdown_timeout, self.running.wait_idle())
            .await
            .is_ok();
        steps.finish_acks.cancel();
        if !idle {
            runs::abandon(
                &started.runs,
                &started.acker_tx,
                &c.pool.retry,
                c.shutdown_timeout,
            )
            .await;
        }
        // The acker ends once every sender is gone: this one, the fetcher's and the pool's.
        drop(started.acker_tx);
        tasks.join(started.acker).await;
        steps.stop_housekeeping.cancel();
        tasks.join(started.heartbeat).await;
        tasks.join(started.reclaimer).await;
        if let Some(t) = started.key_shares {
            tasks.join(t).await;
        }
        // The other housekeeping tasks are aborted when `tasks` drops.
        match tasks.failure() {
            Some(e) => Err(e),
            None => Ok(Report::of(&self.tally)),
        }
    }

    /// Spawns the fetcher, the pool, the acker, the heartbeat and housekeeping, on `conn`
    /// and the heartbeat's `beat_conn`.
    fn start(
        &self,
        tasks: &mut Tasks,
        steps: &Steps,
        [conn, beat_conn]: [HealingConnection; 2],
        keys: QueueKeys,
    ) -> Started {
        let c = &self.config;
        // This run's tag, in the start marks of the jobs it runs: its worker id too (one
        // for every lane of a partitioned queue).
        let tag = match &self.lane {
            Some(lane) => lane.tag.clone(),
            None => format!("{:016x}", rand::random::<u64>()),
        };
        let metrics = if c.metrics {
            QueueMetrics::new(keys.name(), crate::queue::scripts::SCRIPT_NAMES)
        } else {
            QueueMetrics::disabled(keys.name())
        };
        // A limiter shared by several queues (or lanes) is labelled by their consumer.
        if let (Some(l), true, None, None) = (&self.limiter, c.metrics, &self.share, &self.lane) {
            l.attach_metrics(LimiterMetrics::new(&c.queue));
        }
        let (pool_tx, pool_rx) = mpsc::unbounded_channel();
        let (acker_tx, acker_rx) = mpsc::channel(c.acker.channel_capacity());
        // With a shared budget, the gate reads the queue's buffer: it is the share's.
        let buffer = self
            .share
            .as_ref()
            .map_or_else(Arc::default, |s| s.buffer().clone());
        let leases = Arc::new(Leases::new(self.backlog.clone()));
        let queue_backlog = Arc::new(AtomicBool::new(false));
        // Wakes the drain watch: a flush written, a fetch that came back empty.
        let nudge = Arc::new(Notify::new());
        let acker = Acker::new(
            c.acker.clone(),
            AckerDeps {
                conn: conn.clone(),
                keys: keys.clone(),
                tag: tag.clone(),
                leases: leases.clone(),
                tally: self.tally.clone(),
                backlog: self.backlog.clone(),
                metrics: metrics.clone(),
                queue_backlog: queue_backlog.clone(),
                flushed: nudge.clone(),
            },
        );
        let acker = tasks.spawn("acker", acker.run(acker_rx, steps.finish_acks.clone()));
        let registration = Registration {
            record: WorkerRecord::new(tag.clone()),
            limit: self.limit.clone(),
            running: self.running.clone(),
            reports_running: self.lane.as_ref().is_none_or(|l| !l.keys.is_partition()),
        };
        let heartbeat = Heartbeat::new(beat_conn, keys.clone(), c.lease, leases.clone(), registration);
        let heartbeat = tasks.spawn("heartbeat", heartbeat.run(steps.stop_housekeeping.clone()));
        let fetcher = Fetcher {
            config: c.fetcher.clone(),
            redis: self.redis.clone(),
            conn: conn.clone(),
            keys: keys.clone(),
            limit: self.limit.clone(),
            rate: self.rate.clone(),
            buffer: buffer.clone(),
            leases: leases.clone(),
            flush_max: c.acker.flush_max,
            backlog: queue_backlog,
            emptied: nudge.clone(),
            pool: pool_tx,
            acker: acker_tx.clone(),
            metrics: metrics.clone(),
            lease: c.lease,
            unknown_kind_grace: c.pool.unknown_kind_grace,
            adaptive_per_key: self.key_limiters.is_some(),
            role: self.lane.as_ref().map(|l| l.role.clone()),
        };
        let fetcher = tasks.spawn("fetcher", fetcher.run(steps.stop_fetching.clone()));
        let runs = Arc::new(Runs::default());
        let pool = Pool {
            config: c.pool.clone(),
            registry: self.registry.clone(),
            limit: self.limit.clone(),
            limiter: self.limiter.clone(),
            key_limiters: self.key_limiters.clone(),
            rate: self.rate.clone(),
            share: self.share.clone(),
            buffer,
            acker: acker_tx.clone(),
            metrics: metrics.clone(),
            runs: runs.clone(),
            suspects: Suspects::new(conn.clone(), keys.clone(), tag.clone(), leases.clone()),
            inline: Default::default(),
        };
        let pool = tasks.spawn("pool", pool.run(pool_rx, steps.stop_fetching.clone()));
        let drain = DrainWatch::new(conn.clone(), keys.clone(), self.running.clone(), leases, nudge);
        let mut key_shares = None;
        if let Some(limiters) = &self.key_limiters {
            let shares = KeyShares {
                conn: conn.clone(),
                keys: keys.clone(),
                tag,
                limiters: limiters.clone(),
            };
            key_shares = Some(tasks.spawn("key shares", shares.run(steps.stop_housekeeping.clone())));
        }
        let reclaimer = self.start_housekeeping(tasks, steps, conn, keys, metrics, drain);
        Started {
            fetcher,
            pool,
            acker,
            heartbeat,
            reclaimer,
            key_shares,
            runs,
            acker_tx,
        }
    }

    /// Spawns the reclaimer (returned: the shutdown waits for it) and the other
    /// housekeeping tasks this configuration asks for (`drain` in drain mode).
    fn start_housekeeping(
        &self,
        tasks: &mut Tasks,
        steps: &Steps,
        conn: HealingConnection,
        keys: QueueKeys,
        metrics: QueueMetrics,
        drain: DrainWatch,
    ) -> Task {
        let c = &self.config;
        let stop = &steps.stop_housekeeping;
        let budget = c.pool.deferral_budget;
        let reclaimer = Reclaimer::new(
            c.reclaimer.clone(),
            budget,
            conn.clone(),
            keys.clone(),
            metrics.clone(),
        );
        let reclaimer = tasks.spawn("reclaimer", reclaimer.run(stop.clone()));
        tasks.spawn(
            "cron",
            CronTask::new(conn.clone(), keys.clone()).run(stop.clone()),
        );
        // A partitioned queue's process-wide knobs are its base lane's to watch.
        let lane_of_many = self.lane.as_ref().is_some_and(|l| l.keys.is_partition());
        if let Some(every) = c.settings_poll.filter(|_| !lane_of_many) {
            // A limiter shared with other queues is no one queue's to tune.
            let limiter = self
                .limiter
                .clone()
                .zip(c.limiter.clone())
                .filter(|_| self.share.is_none());
            let rate = (self.rate.clone(), c.rate);
            let watch = SettingsWatch::new(every, conn.clone(), &keys, limiter, rate);
            tasks.spawn("settings watch", watch.run(stop.clone()));
        }
        if c.metrics {
            let limits = (self.limit.clone(), self.running.clone());
            let sampler = Sampler::new(conn.clone(), keys.clone(), limits, metrics);
            tasks.spawn("sampler", sampler.run(stop.clone()));
        }
        if c.drain {
            tasks.spawn("drain watch", drain.run(steps.stop_fetching.clone()));
        }
        reclaimer
    }
}

/// The tokens of the shutdown order's steps.
struct Steps {
    /// Steps 1 and 2: the fetcher and the pool stop. Cancelled by `shutdown`, by the drain
    /// watch, or by a task that failed.
    stop_fetching: CancellationToken,
    /// Step 4: the acker stops writing until it has every outcome; then step 5.
    finish_acks: CancellationToken,
    /// Step 6.
    stop_housekeeping: CancellationToken,
}

/// The tasks the shutdown waits for, in its order, and what it acts on.
struct Started {
    fetcher: Task,
    pool: Task,
    acker: Task,
    heartbeat: Task,
    reclaimer: Task,
    /// With adaptive per-key limits: withdraws this consumer's shares at the end.
    key_shares: Option<Task>,
    /// The pool's runs, to abort at the shutdown timeout.
    runs: Arc<Runs>,
    /// For the outcomes of aborted runs; dropped before the acker is awaited.
    acker_tx: mpsc::Sender<AckerMsg>,
}
