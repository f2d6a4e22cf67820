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

// The modules are crate-private; what code that embeds weir names is re-exported below
// (and the configurations again at the crate root).
//
// The modules import one way: the leaf types (`config/`, `counters.rs`, `outcomes.rs`)
// -> the lease table (`leases/`) -> the tasks (the fetcher, the pool, the acker, the
// heartbeat, housekeeping; the signals between them are one struct, `signals.rs`) ->
// `start.rs`, which spawns them -> this file, which runs the shutdown order.
mod acker;
mod buffer;
mod config;
mod counters;
mod fetcher;
mod gate;
mod handle;
mod heartbeat;
mod housekeeping;
mod leases;
mod multi;
mod notices;
mod outcomes;
mod partitioned;
mod pool;
mod runs;
mod signals;
mod start;
mod tasks;
mod wake;

pub use config::{AckerConfig, ConsumerConfig, FetcherConfig, MIN_JOB_TIMEOUT, PoolConfig, ReclaimerConfig};
pub use counters::{InMemory, Tally};
pub use handle::{Handle, Report};
pub use multi::{MultiConsumer, WeightedQueue};

use crate::consumer::gate::Share;
use crate::consumer::outcomes::AckerMsg;
use crate::consumer::runs::Runs;
use crate::consumer::tasks::{Task, Tasks};
use crate::error::{Error, Result};
use crate::handler::Registry;
use crate::limiter::limit::Limit;
use crate::limiter::{KeyLimiters, Limiter, RateGate};
use crate::queue::keys::QueueKeys;
use crate::queue::partitions::Partitions;
use crate::redis::conn::{HealingConnection, Redis};
use crate::redis::retry::{Backoff, GiveUp, retrying_unless};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How long a consumer's start retries a Redis that fails it after connecting.
const START_SPAN: Duration = Duration::from_secs(30);

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
    in_memory: Arc<InMemory>,
    /// In a partitioned queue's consumer: this pipeline's lane.
    lane: Option<partitioned::Lane>,
    /// Set when its first fetch is answered ([`Handle::ready`]); lanes share their
    /// consumer's.
    ready: Arc<tokio::sync::watch::Sender<bool>>,
}

impl Consumer {
    /// A consumer with `config` on `redis`, running jobs with `registry`.
    pub fn new(config: ConsumerConfig, redis: Redis, registry: Registry) -> Result<Self> {
        config.validate()?;
        if registry.is_empty() {
            return Err(Error::config("handlers", "are missing: no handler registered"));
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
            in_memory: Arc::default(),
            lane: None,
            ready: Arc::default(),
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
            in_memory: Arc::default(),
            lane: None,
            ready: Arc::default(),
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
            in_memory: self.in_memory.clone(),
            ready: self.ready.subscribe(),
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
        // Once connected, a connection lost while starting (a dropped link, a server still
        // loading) is retried, as every later call is, for up to START_SPAN; an unreachable
        // Redis fails at the connect above, at once, and a refusal (an eviction policy, a
        // missing permission) at its first answer.
        let start = || async {
            crate::redis::eviction::check(&mut conn.clone(), c.allow_eviction).await?;
            crate::queue::functions::ensure(&mut conn.clone()).await?;
            // The heartbeat's own: no call queued on the other can delay it.
            let beat_conn = self.redis.connect_healing().await?;
            let parts = Partitions::read(&mut conn.clone(), &c.queue).await?;
            Ok::<_, Error>((beat_conn, parts))
        };
        let give_up = GiveUp::at(tokio::time::Instant::now() + START_SPAN);
        let (beat_conn, parts) = retrying_unless(
            "start",
            Backoff::CALL,
            give_up,
            |e: &Error| !e.is_transient(),
            start,
        )
        .await?;
        if let Some(parts) = parts {
            if self.share.is_some() {
                return Err(Error::config(
                    format!("queue {}", c.queue),
                    "is partitioned: consume it on its own, not among several queues",
                ));
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
        // The stored settings bind from the first job on: read before the first fetch.
        let mut watch = self.settings_watch(&conn, &keys);
        if let Some(w) = &mut watch {
            w.apply_stored(&steps.stop_fetching).await;
        }
        let started = self.start(&mut tasks, &steps, [conn, beat_conn], keys, watch);

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
