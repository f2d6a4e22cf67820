//! The acker: collects outcomes and writes them to Redis in one `settle` call per flush
//! (by count, or after a short linger), together with the start marks of jobs that are
//! running. At shutdown it hands the leases of jobs that never ran back to ready.
//!
//! Start marks tell reclaim a crash during a run from a job that never ran (see
//! `reclaim.lua`). The pool reports starts in waves; a started job is marked in the next
//! flush unless its outcome is in that flush (a fast job costs no write for its mark), and
//! its mark is removed when its ack is written.
//!
//! Invariant: a lease is in the table (`leases.rs`) before any outcome of its job, because
//! the fetcher adds it before it hands the jobs to the pool. The heartbeat is a task of
//! its own (`heartbeat.rs`) sharing that table.

use crate::consumer::config::check;
use crate::consumer::handle::Backlog;
use crate::consumer::leases::{Lease, Leases};
use crate::error::Result;
use crate::metrics::{DEFER_REASONS, DeferReason, QueueMetrics};
use crate::queue::envelope::Priority;
use crate::queue::keys::QueueKeys;
use crate::queue::retry::DeferralBudget;
use crate::queue::scripts::{self, Settle, Settled, StartMarks};
use crate::redis::conn::HealingConnection;
use crate::redis::retry::{Backoff, GiveUp, retrying};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

/// Most ids per `release` call.
const LEASE_CHUNK: usize = 2000;

/// What the acker is told.
#[derive(Debug)]
pub(crate) enum AckerMsg {
    /// The pool started these jobs (one message per dispatch wave).
    Started(Vec<String>),
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

/// Acker settings. (The dead-letter cap is the queue's setting, which the scripts read.)
#[derive(Debug, Clone)]
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
    /// Capacity of the channel of outcomes: two flushes' worth, so one can gather while
    /// the other is written. When it is full, finished jobs wait (holding their slots).
    pub fn channel_capacity(&self) -> usize {
        2 * self.flush_max.max(1)
    }
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

/// What the acker writes to: the queue, and the consumer's settings it applies.
pub(crate) struct AckerDeps {
    pub conn: HealingConnection,
    pub keys: QueueKeys,
    /// This consumer run's tag, in its start marks.
    pub tag: String,
    pub leases: Arc<Leases>,
    pub tally: Arc<Tally>,
    pub backlog: Arc<Backlog>,
    pub metrics: QueueMetrics,
}

/// The acker task.
pub(crate) struct Acker {
    config: AckerConfig,
    deps: AckerDeps,
    /// Outcomes received, not yet written.
    pending: Vec<Done>,
    /// Jobs reported started whose start mark is not written yet.
    unmarked: Vec<String>,
}

/// One settle call's worth: outcomes, and start marks written or removed.
#[derive(Default)]
struct Batch {
    items: Vec<Settle>,
    /// Per item: how it counts if the settle applies it.
    counted: Vec<Counted>,
    marks: Vec<(String, u64)>,
    ended: Vec<String>,
}

impl Acker {
    pub fn new(config: AckerConfig, deps: AckerDeps) -> Self {
        Self {
            config,
            deps,
            pending: Vec::new(),
            unmarked: Vec::new(),
        }
    }

    /// Runs until every sender is gone (the fetcher and the pool have ended), then writes
    /// what is left and releases the leases of jobs that never ran.
    ///
    /// Once `finish` is cancelled (the running jobs are done, or abandoned), it starts no
    /// write until the end: a write that keeps failing then gives way to the final flush,
    /// which gives up at its deadline, so a shutdown never hangs on Redis.
    pub async fn run(mut self, mut rx: mpsc::Receiver<AckerMsg>, finish: CancellationToken) {
        let mut flush_at: Option<Instant> = None;
        let mut finishing = false;
        loop {
            tokio::select! {
                biased;
                msg = rx.recv() => match msg {
                    Some(m) => {
                        self.take(m);
                        while finishing || self.pending.len() < self.config.flush_max {
                            match rx.try_recv() { Ok(m) => self.take(m), Err(_) => break }
                        }
                        self.deps.backlog.set_outcomes(self.pending.len() + rx.len());
                    }
                    None => break,
                },
                _ = finish.cancelled(), if !finishing => finishing = true,
                _ = sleep_until(flush_at.unwrap_or_else(Instant::now)), if flush_at.is_some() => {
                    flush_at = None;
                    self.flush(&finish).await;
                }
            }
            finishing |= finish.is_cancelled();
            // By count, or by time: a steady stream of messages keeps the timer arm from
            // being picked, but not the linger from being kept.
            let due = flush_at.is_some_and(|at| Instant::now() >= at);
            if !finishing && (self.pending.len() >= self.config.flush_max || due) {
                flush_at = None;
                self.flush(&finish).await;
            }
            let idle = self.pending.is_empty() && self.unmarked.is_empty();
            flush_at = match (finishing || idle, flush_at) {
                (true, _) => None,
                (false, None) => Some(Instant::now() + self.config.linger),
                (false, at) => at,
            };
        }
        let deadline = Instant::now() + self.config.final_flush_timeout;
        self.flush_final(deadline).await;
        self.release_all(deadline).await;
    }

    fn take(&mut self, msg: AckerMsg) {
        match msg {
            AckerMsg::Started(ids) => self.unmarked.extend(ids),
            AckerMsg::Done(d) => self.pending.push(d),
        }
    }

    /// Writes the pending outcomes and marks, retrying failed calls until they succeed.
    /// Once `finish` is cancelled the retries go on until the final flush's timeout, no
    /// longer; a write that gives up leaves its outcomes to the final flush. (A call in
    /// flight is never dropped while it can still succeed: it may have been applied, and
    /// sent again it would be reported as not recorded.)
    async fn flush(&mut self, finish: &CancellationToken) {
        let pending = std::mem::take(&mut self.pending);
        let unmarked = std::mem::take(&mut self.unmarked);
        let batch = self.batch(&pending, &unmarked);
        let last_chance = self.config.final_flush_timeout;
        let written = {
            let write = write(&self.deps, &batch, GiveUp::NEVER);
            tokio::pin!(write);
            tokio::select! {
                biased;
                r = &mut write => r,
                _ = finish.cancelled() => {
                    let deadline = Instant::now() + last_chance;
                    tokio::time::timeout_at(deadline, write).await.ok().flatten()
                }
            }
        };
        match written {
            Some(missed) => self.record(&batch, missed),
            None => {
                self.pending = pending;
                self.unmarked = unmarked;
            }
        }
        self.deps.backlog.set_outcomes(self.pending.len());
    }

    /// The last writes, in calls of at most `flush_max` outcomes, until `deadline`.
    async fn flush_final(&mut self, deadline: Instant) {
        let pending = std::mem::take(&mut self.pending);
        let mut unmarked = std::mem::take(&mut self.unmarked);
        for chunk in pending.chunks(self.config.flush_max.max(1)) {
            let batch = self.batch(chunk, &std::mem::take(&mut unmarked));
            match write(&self.deps, &batch, GiveUp::at(deadline)).await {
                Some(missed) => self.record(&batch, missed),
                None => tracing::error!(
                    outcomes = batch.items.len(),
                    "gave up recording outcomes at shutdown; their jobs come back when the leases expire"
                ),
            }
        }
        self.deps.backlog.set_outcomes(0);
    }

    /// One settle call for `dones` and the start marks of `unmarked` (jobs whose outcome
    /// is in this call need none). Every lease named gets its outcome (or mark) recorded
    /// in the table now: from here on it is never released as un-started.
    fn batch(&self, dones: &[Done], unmarked: &[String]) -> Batch {
        let mut b = Batch::default();
        self.deps.leases.with(|t| {
            for d in dones {
                let Some(l) = t.leases.get_mut(&d.id) else {
                    tracing::warn!(id = %d.id, "outcome for a job this consumer does not hold; ignored");
                    continue;
                };
                l.outcome = true;
                if l.marked && d.outcome == Outcome::Ack {
                    b.ended.push(d.id.clone());
                }
                b.items.push(settle_item(d, l));
                b.counted.push(Counted::of(&d.outcome));
            }
            for id in unmarked {
                if let Some(l) = t.leases.get_mut(id)
                    && !l.outcome
                    && !l.marked
                {
                    // Marked now, written or not: a mark that may have landed is removed
                    // with the ack later (removing one that did not is harmless).
                    l.marked = true;
                    b.marks.push((id.clone(), l.token));
                }
            }
        });
        b
    }

    /// Forgets the settled leases; counts what was recorded.
    fn record(&mut self, batch: &Batch, settled: Settled) {
        let Settled { missed, spent } = settled;
        let items = &batch.items;
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
        self.deps.leases.with(|t| {
            for item in items {
                t.leases.remove(item.id());
            }
        });
        for (item, &counted) in items.iter().zip(&batch.counted) {
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
        if items.is_empty() {
            return;
        }
        let m = &self.deps.metrics;
        m.ack_batch.record(items.len() as f64);
        m.acked.increment(acked as u64);
        m.retried.increment(retried as u64);
        for (counter, n) in m.deferred.iter().zip(deferred) {
            counter.increment(n);
        }
        m.dead.increment(dead as u64);
        m.leases_lost.increment(missed.len() as u64);
        let t = &self.deps.tally;
        t.acked.fetch_add(acked as u64, Ordering::Relaxed);
        t.retried.fetch_add(retried as u64, Ordering::Relaxed);
        t.deferred.fetch_add(deferred.iter().sum(), Ordering::Relaxed);
        t.dead.fetch_add(dead as u64, Ordering::Relaxed);
        t.lost_leases.fetch_add(missed.len() as u64, Ordering::Relaxed);
    }

    /// Hands the leases of jobs that never ran back to ready, at the front, in fetch
    /// order. A job whose outcome is known is never among them, written or not: if its
    /// outcome could not be written, its lease expires and reclaim brings it back.
    async fn release_all(&mut self, deadline: Instant) {
        let mut held: Vec<(String, Lease)> = self.deps.leases.with(|t| {
            let ids: Vec<String> = t
                .leases
                .iter()
                .filter(|(_, l)| !l.outcome)
                .map(|(id, _)| id.clone())
                .collect();
            ids.into_iter()
                .filter_map(|id| t.leases.remove_entry(&id))
                .collect()
        });
        // release.lua puts each call's jobs at the front of ready in the order given, so
        // sort by fetch order and send the last chunk first: the first-fetched job ends
        // up at the very front.
        held.sort_unstable_by_key(|(_, l)| l.seq);
        for chunk in held.chunks(LEASE_CHUNK).rev() {
            let triples: Vec<(&str, u64, Priority)> = chunk
                .iter()
                .map(|(id, l)| (id.as_str(), l.token, l.priority))
                .collect();
            let released = retrying("release", Backoff::CALL, GiveUp::at(deadline), || {
                let mut conn = self.deps.conn.clone();
                let keys = &self.deps.keys;
                let triples = &triples;
                async move { scripts::release(&mut conn, keys, triples).await }
            })
            .await
            .ok();
            if let Some(missed) = released {
                self.deps
                    .tally
                    .released
                    .fetch_add((triples.len() - missed.len()) as u64, Ordering::Relaxed);
            }
        }
    }
}

/// One settle call for `batch` (retried as `give_up` says); what settle reported, or
/// None if it gave up.
async fn write(deps: &AckerDeps, batch: &Batch, give_up: GiveUp) -> Option<Settled> {
    if batch.items.is_empty() && batch.marks.is_empty() {
        return Some(Settled::default());
    }
    let marks = StartMarks {
        tag: &deps.tag,
        started: &batch.marks,
        ended: &batch.ended,
    };
    retrying("settle", Backoff::CALL, give_up, || {
        let mut conn = deps.conn.clone();
        let (keys, items) = (&deps.keys, &batch.items);
        async move { scripts::settle_marked(&mut conn, keys, items, marks).await }
    })
    .await
    .ok()
}

fn settle_item(d: &Done, l: &Lease) -> Settle {
    let id = d.id.clone();
    match &d.outcome {
        Outcome::Ack => Settle::Ack { id, token: l.token },
        Outcome::Retry { delay_ms, error, .. } => Settle::Retry {
            id,
            token: l.token,
            priority: l.priority,
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
            token: l.token,
            priority: l.priority,
            delay_ms: *delay_ms,
            reason: reason.clone(),
            budget: *budget,
        },
        Outcome::Dead { reason } => Settle::Dead {
            id,
            token: l.token,
            reason: reason.clone(),
        },
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
