//! The acker: collects outcomes and writes them to Redis in one `settle` call per flush
//! (by count, or after a short linger). It also owns the table of leases this process
//! holds, which makes it the natural home of the heartbeat (extending those leases) and of
//! the shutdown release (handing un-started jobs back).
//!
//! Invariant: a lease reaches the table before any outcome of its job, because the fetcher
//! sends `Leased` on this channel before it hands the jobs to the pool.

use crate::consumer::config::check;
use crate::error::Result;
use crate::metrics::{DEFER_REASONS, DeferReason, QueueMetrics};
use crate::queue::envelope::Priority;
use crate::queue::keys::QueueKeys;
use crate::queue::retry::DeferralBudget;
use crate::queue::scripts::{self, Settle, Settled};
use crate::redis::conn::HealingConnection;
use crate::redis::retry::{Backoff, GiveUp, Streak, retrying};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

/// Most ids per `extend` or `release` call.
const LEASE_CHUNK: usize = 2000;

/// What the acker is told.
#[derive(Debug)]
pub(crate) enum AckerMsg {
    /// The fetcher leased these jobs (id, priority) with this token.
    Leased {
        token: u64,
        jobs: Vec<(String, Priority)>,
    },
    /// A job is finished.
    Done(Done),
}

/// A finished job.
#[derive(Debug)]
pub(crate) struct Done {
    pub id: String,
    pub outcome: Outcome,
}

/// How a job finished.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    Ack,
    /// `spent`: this was the job's last attempt, so the settle script dead-letters it
    /// (the same test the script makes); it is counted as dead, not retried.
    Retry {
        delay_ms: u64,
        error: String,
        spent: bool,
    },
    /// Put back after `delay_ms` without charging an attempt; dead (`reason` in the
    /// dead-letter reason) once the job's deferrals are over `budget`. `cause` labels the
    /// deferral metric.
    Defer {
        delay_ms: u64,
        reason: String,
        budget: DeferralBudget,
        cause: DeferReason,
    },
    Dead {
        reason: String,
    },
}

/// Acker settings. (The lease length the heartbeat extends by is the consumer's:
/// [`crate::ConsumerConfig::lease`]. The dead-letter cap is the queue's setting, which
/// the scripts read.)
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AckerConfig {
    /// Flush once this many outcomes wait, 1..=10000 (default 1000).
    pub flush_max: usize,
    /// Flush at the latest this long after the first outcome waits, any duration
    /// (default 2 ms).
    pub linger: Duration,
    /// How long the final flush may keep retrying at shutdown, any duration (default 10 s).
    pub final_flush_timeout: Duration,
}

impl AckerConfig {
    /// Default of [`AckerConfig::flush_max`].
    pub const DEFAULT_FLUSH_MAX: usize = 1000;
    /// Default of [`AckerConfig::linger`].
    pub const DEFAULT_LINGER: Duration = Duration::from_millis(2);
    /// Default of [`AckerConfig::final_flush_timeout`].
    pub const DEFAULT_FINAL_FLUSH_TIMEOUT: Duration = Duration::from_secs(10);

    /// Checks every value against its range, with a message that names it.
    pub fn validate(&self) -> Result<()> {
        check(
            (1..=10_000).contains(&self.flush_max),
            "ack flush size must be between 1 and 10000",
        )
    }
}

impl Default for AckerConfig {
    fn default() -> Self {
        Self {
            flush_max: Self::DEFAULT_FLUSH_MAX,
            linger: Self::DEFAULT_LINGER,
            final_flush_timeout: Self::DEFAULT_FINAL_FLUSH_TIMEOUT,
        }
    }
}

/// Totals of what the acker recorded, shared with the consumer's report.
#[derive(Debug, Default)]
pub struct Tally {
    /// Jobs acked.
    pub acked: AtomicU64,
    /// Jobs sent to retry.
    pub retried: AtomicU64,
    /// Jobs put back without charging an attempt (backpressure, a kind or size this
    /// consumer cannot take).
    pub deferred: AtomicU64,
    /// Jobs dead-lettered by this consumer.
    pub dead: AtomicU64,
    /// Outcomes refused because the lease was lost.
    pub lost_leases: AtomicU64,
    /// Un-started jobs handed back at shutdown.
    pub released: AtomicU64,
}

#[derive(Debug, Clone, Copy)]
struct Held {
    token: u64,
    priority: Priority,
    /// Fetch order, so a release hands jobs back in the order they were fetched.
    seq: u64,
}

/// What the acker writes to: the queue, and the consumer's settings it applies.
pub(crate) struct AckerDeps {
    pub conn: HealingConnection,
    pub keys: QueueKeys,
    /// Lease length: held leases are extended by it, every third of it.
    pub lease: Duration,
    pub tally: Arc<Tally>,
    pub metrics: QueueMetrics,
}

/// The acker task.
pub(crate) struct Acker {
    config: AckerConfig,
    conn: HealingConnection,
    keys: QueueKeys,
    lease: Duration,
    tally: Arc<Tally>,
    /// Failed heartbeats: the first of a run is logged, and the recovery.
    beat_errors: Streak,
    held: HashMap<String, Held>,
    next_seq: u64,
    pending: Vec<Done>,
    metrics: QueueMetrics,
}

impl Acker {
    pub fn new(config: AckerConfig, deps: AckerDeps) -> Self {
        let AckerDeps {
            conn,
            keys,
            lease,
            tally,
            metrics,
        } = deps;
        Self {
            config,
            conn,
            keys,
            lease,
            tally,
            // The wait it computes is not used: the next try is the next beat.
            beat_errors: Streak::new("heartbeat", Backoff::CALL),
            held: HashMap::new(),
            next_seq: 0,
            pending: Vec::new(),
            metrics,
        }
    }

    /// Runs until `finish` is cancelled (after the pool stopped), then drains the channel,
    /// flushes, and releases every lease still held.
    pub async fn run(mut self, mut rx: mpsc::UnboundedReceiver<AckerMsg>, finish: CancellationToken) {
        let beat_every = (self.lease / 3).max(Duration::from_millis(10));
        let mut next_beat = Instant::now() + beat_every;
        let mut flush_at: Option<Instant> = None;
        loop {
            tokio::select! {
                biased;
                msg = rx.recv() => match msg {
                    Some(m) => {
                        self.take(m);
                        while self.pending.len() < self.config.flush_max {
                            match rx.try_recv() { Ok(m) => self.take(m), Err(_) => break }
                        }
                    }
                    None => break,
                },
                _ = finish.cancelled() => break,
                _ = sleep_until(flush_at.unwrap_or(next_beat)), if flush_at.is_some() => {
                    self.flush(None).await;
                }
                _ = sleep_until(next_beat) => {
                    self.heartbeat().await;
                    next_beat = Instant::now() + beat_every;
                }
            }
            if self.pending.len() >= self.config.flush_max {
                self.flush(None).await;
            }
            flush_at = match (self.pending.is_empty(), flush_at) {
                (true, _) => None,
                (false, None) => Some(Instant::now() + self.config.linger),
                (false, at) => at,
            };
        }
        while let Ok(m) = rx.try_recv() {
            self.take(m);
        }
        let deadline = Instant::now() + self.config.final_flush_timeout;
        self.flush(Some(deadline)).await;
        self.release_all(deadline).await;
    }

    fn take(&mut self, msg: AckerMsg) {
        match msg {
            AckerMsg::Leased { token, jobs } => {
                self.held.reserve(jobs.len());
                for (id, priority) in jobs {
                    let seq = self.next_seq;
                    self.next_seq += 1;
                    self.held.insert(id, Held { token, priority, seq });
                }
            }
            AckerMsg::Done(d) => self.pending.push(d),
        }
    }

    /// Writes every pending outcome, retrying failed calls (until `deadline`, if given).
    async fn flush(&mut self, deadline: Option<Instant>) {
        let pending = std::mem::take(&mut self.pending);
        for chunk in pending.chunks(self.config.flush_max.max(1)) {
            let (items, counted): (Vec<Settle>, Vec<Counted>) = chunk
                .iter()
                .filter_map(|d| Some((self.settle_item(d)?, Counted::of(&d.outcome))))
                .unzip();
            if items.is_empty() {
                continue;
            }
            let give_up = deadline.map_or(GiveUp::NEVER, GiveUp::at);
            let result = retrying("settle", Backoff::CALL, give_up, || {
                let mut conn = self.conn.clone();
                let keys = &self.keys;
                let items = &items;
                async move { scripts::settle(&mut conn, keys, items).await }
            })
            .await
            .ok();
            match result {
                Some(settled) => self.record(&items, &counted, settled),
                None => tracing::error!(
                    outcomes = items.len(),
                    "gave up recording outcomes at shutdown; their jobs come back when the leases expire"
                ),
            }
        }
    }

    fn settle_item(&self, d: &Done) -> Option<Settle> {
        let Some(h) = self.held.get(&d.id) else {
            tracing::warn!(id = %d.id, "outcome for a job this consumer does not hold; ignored");
            return None;
        };
        let id = d.id.clone();
        Some(match &d.outcome {
            Outcome::Ack => Settle::Ack { id, token: h.token },
            Outcome::Retry { delay_ms, error, .. } => Settle::Retry {
                id,
                token: h.token,
                priority: h.priority,
                delay_ms: *delay_ms,
                error: error.clone(),
            },
            Outcome::Defer {
                delay_ms,
                reason,
                budget,
                ..
            } => Settle::Defer {
                id,
                token: h.token,
                priority: h.priority,
                delay_ms: *delay_ms,
                reason: reason.clone(),
                budget: *budget,
            },
            Outcome::Dead { reason } => Settle::Dead {
                id,
                token: h.token,
                reason: reason.clone(),
            },
        })
    }

    fn record(&mut self, items: &[Settle], counted: &[Counted], settled: Settled) {
        let Settled { missed, spent } = settled;
        if !missed.is_empty() {
            tracing::warn!(
                count = missed.len(),
                "outcomes not recorded: their leases expired (the jobs run again) or an earlier, retried call recorded them"
            );
        }
        if !spent.is_empty() {
            tracing::warn!(
                count = spent.len(),
                "dead-lettered jobs whose deferral budget is spent (see their reasons in the dead-letter queue)"
            );
        }
        // Each missed id uncounts the first outcome that named it (settle.lua acts on the
        // first and reports a repeat as missed).
        let mut missed_left: HashMap<&str, usize> = HashMap::new();
        for id in &missed {
            *missed_left.entry(id.as_str()).or_default() += 1;
        }
        let (mut acked, mut retried, mut dead) = (0, 0, 0);
        let mut deferred = [0u64; DEFER_REASONS.len()];
        for (item, &counted) in items.iter().zip(counted) {
            self.held.remove(item.id());
            if let Some(left) = missed_left.get_mut(item.id()).filter(|n| **n > 0) {
                *left -= 1;
                continue;
            }
            match counted {
                Counted::Acked => acked += 1,
                Counted::Retried => retried += 1,
                Counted::Deferred(_) if spent.iter().any(|id| id == item.id()) => dead += 1,
                Counted::Deferred(cause) => deferred[cause as usize] += 1,
                Counted::Dead => dead += 1,
            }
        }
        let m = &self.metrics;
        m.ack_batch.record(items.len() as f64);
        m.acked.increment(acked as u64);
        m.retried.increment(retried as u64);
        for (counter, n) in m.deferred.iter().zip(deferred) {
            counter.increment(n);
        }
        m.dead.increment(dead as u64);
        m.leases_lost.increment(missed.len() as u64);
        let t = &self.tally;
        t.acked.fetch_add(acked as u64, Ordering::Relaxed);
        t.retried.fetch_add(retried as u64, Ordering::Relaxed);
        t.deferred.fetch_add(deferred.iter().sum(), Ordering::Relaxed);
        t.dead.fetch_add(dead as u64, Ordering::Relaxed);
        t.lost_leases.fetch_add(missed.len() as u64, Ordering::Relaxed);
    }

    /// Extends every lease held; forgets the ones lost.
    async fn heartbeat(&mut self) {
        if self.held.is_empty() {
            return;
        }
        let all: Vec<(String, u64)> = self.held.iter().map(|(id, h)| (id.clone(), h.token)).collect();
        let vt = self.lease.as_millis() as u64;
        for chunk in all.chunks(LEASE_CHUNK) {
            let pairs: Vec<(&str, u64)> = chunk.iter().map(|(id, t)| (id.as_str(), *t)).collect();
            let mut conn = self.conn.clone();
            match scripts::extend(&mut conn, &self.keys, vt, &pairs).await {
                Ok((deadline, lost)) => {
                    self.beat_errors.succeeded();
                    for (id, _) in chunk {
                        if let Some(h) = self.held.get_mut(id) {
                            h.token = deadline;
                        }
                    }
                    for id in lost {
                        self.held.remove(&id);
                    }
                }
                // A failed heartbeat is retried at the next beat; the lease has two more
                // beats of slack before it expires.
                Err(e) => {
                    self.beat_errors.failed(&e);
                }
            }
        }
    }

    /// Hands every lease still held back to ready (un-started jobs at shutdown).
    async fn release_all(&mut self, deadline: Instant) {
        let mut held: Vec<(String, Held)> = self.held.drain().collect();
        // release.lua puts each call's jobs at the front of ready in the order given, so
        // sort by fetch order and send the last chunk first: the first-fetched job ends
        // up at the very front.
        held.sort_unstable_by_key(|(_, h)| h.seq);
        for chunk in held.chunks(LEASE_CHUNK).rev() {
            let triples: Vec<(&str, u64, Priority)> = chunk
                .iter()
                .map(|(id, h)| (id.as_str(), h.token, h.priority))
                .collect();
            let released = retrying("release", Backoff::CALL, GiveUp::at(deadline), || {
                let mut conn = self.conn.clone();
                let keys = &self.keys;
                let triples = &triples;
                async move { scripts::release(&mut conn, keys, triples).await }
            })
            .await
            .ok();
            if let Some(missed) = released {
                self.tally
                    .released
                    .fetch_add((triples.len() - missed.len()) as u64, Ordering::Relaxed);
            }
        }
    }
}

/// How an outcome counts in the tally and the metrics, if the settle applies it.
#[derive(Debug, Clone, Copy)]
enum Counted {
    Acked,
    Retried,
    /// Unless settle reports its deferral budget spent: then dead.
    Deferred(DeferReason),
    Dead,
}

impl Counted {
    fn of(o: &Outcome) -> Self {
        match o {
            Outcome::Ack => Counted::Acked,
            // A retry of a job on its last attempt is dead-lettered by the script.
            Outcome::Retry { spent: false, .. } => Counted::Retried,
            Outcome::Defer { cause, .. } => Counted::Deferred(*cause),
            Outcome::Retry { spent: true, .. } | Outcome::Dead { .. } => Counted::Dead,
        }
    }
}
