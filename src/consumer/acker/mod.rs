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
//!
//! This file is the task: its loop, the flushes and the final release. What it is told is
//! `consumer/outcomes.rs`, its settings `consumer/config/acker.rs`, its totals
//! `consumer/counters.rs`; `batch.rs` builds, writes and counts one settle call.

mod batch;
mod whole;

use crate::consumer::config::AckerConfig;
use crate::consumer::counters::Tally;

use crate::consumer::counters::InMemory;
use crate::consumer::leases::{Lease, Leases};
use crate::consumer::outcomes::{AckerMsg, Done};
use crate::consumer::signals::Signals;
use crate::metrics::QueueMetrics;
use crate::queue::envelope::Priority;
use crate::queue::keys::QueueKeys;
use crate::queue::scripts;
use crate::redis::conn::HealingConnection;
use crate::redis::retry::{Backoff, GiveUp, retrying};
use batch::write;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep_until};
use tokio_util::sync::CancellationToken;

/// Most ids per `release` call.
const LEASE_CHUNK: usize = 2000;

/// What the acker writes to: the queue, and the consumer's settings it applies.
pub(crate) struct AckerDeps {
    pub conn: HealingConnection,
    pub keys: QueueKeys,
    /// This consumer run's tag, in its start marks.
    pub tag: String,
    pub leases: Arc<Leases>,
    pub tally: Arc<Tally>,
    pub in_memory: Arc<InMemory>,
    pub metrics: QueueMetrics,
    /// Read: `queue_backlog` (how long outcomes linger), `concurrency_set` (whether
    /// acks go through the settle script); told: `drain_check`, after each flush.
    pub signals: Signals,
    /// The lease length this consumer fetches with, ms: the start of a run in its job's
    /// history is its lease's token less this.
    pub lease_ms: u64,
    /// This acker's settle calls, numbered so that a retried one is applied once.
    pub calls: Calls,
}

/// Numbers an acker's settle calls ([`scripts::CallRecord`](crate::queue::scripts::CallRecord)),
/// under a name of its own: the consumer's tag (lanes share it) and a random part.
pub(crate) struct Calls {
    name: String,
    next: std::sync::atomic::AtomicU64,
}

impl Calls {
    pub(crate) fn new(tag: &str) -> Self {
        Calls {
            name: format!("{tag}.{:08x}", rand::random::<u32>()),
            next: std::sync::atomic::AtomicU64::new(0),
        }
    }
}

/// The acker task.
pub(crate) struct Acker {
    config: AckerConfig,
    deps: AckerDeps,
    /// Outcomes received, not yet written.
    pending: Vec<Done>,
    /// Jobs reported started whose start mark is not written yet.
    unmarked: Vec<u64>,
    /// Acks of jobs in batch leases, waiting for the rest of their batch (`whole.rs`).
    held: std::collections::HashMap<Arc<str>, whole::Held>,
}

impl Acker {
    pub(crate) fn new(config: AckerConfig, deps: AckerDeps) -> Self {
        Self {
            config,
            deps,
            pending: Vec::new(),
            unmarked: Vec::new(),
            held: Default::default(),
        }
    }

    /// Runs until every sender is gone (the fetcher and the pool have ended), then writes
    /// what is left and releases the leases of jobs that never ran.
    ///
    /// Once `finish` is cancelled (the running jobs are done, or abandoned), it starts no
    /// write until the end: a write that keeps failing then gives way to the final flush,
    /// which gives up at its deadline, so a shutdown never hangs on Redis.
    pub(crate) async fn run(mut self, mut rx: mpsc::Receiver<AckerMsg>, finish: CancellationToken) {
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
                        self.deps.in_memory.set_outcomes(self.pending.len() + rx.len());
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
                (false, None) => Some(Instant::now() + self.linger()),
                (false, at) => at,
            };
            // acks waiting for the rest of their batch: looked at again when the oldest
            // has waited long enough (or sooner, with the next outcome)
            if flush_at.is_none() && !finishing {
                flush_at = self.hold_until();
            }
        }
        let deadline = Instant::now() + self.config.final_flush_timeout;
        self.flush_final(deadline).await;
        self.release_all(deadline).await;
    }

    /// How long outcomes wait for more before they are written.
    fn linger(&self) -> std::time::Duration {
        if self.deps.signals.queue_backlog.load(Ordering::Relaxed) {
            self.config.linger
        } else {
            std::time::Duration::ZERO
        }
    }

    fn take(&mut self, msg: AckerMsg) {
        match msg {
            AckerMsg::Started(ids) => self.unmarked.extend(ids),
            AckerMsg::StartedLater(later) => {
                let mut later = later.lock().unwrap_or_else(|e| e.into_inner());
                self.unmarked.append(&mut later);
            }
            AckerMsg::Done(d) => self.pending.push(d),
            // The first wave after a flush is taken whole, not copied.
            AckerMsg::Dones(ds) if self.pending.is_empty() => self.pending = ds,
            AckerMsg::Dones(ds) => self.pending.extend(ds),
        }
    }

    /// Writes the pending outcomes and marks, in calls of at most `flush_max` outcomes
    /// (a wave of outcomes from the pool can take the pending ones past it), retrying
    /// failed calls until they succeed. Once `finish` is cancelled the retries go on
    /// until the final flush's timeout, no longer; a write that gives up leaves its
    /// outcomes, and those after it, to the final flush. (A call in flight is never
    /// dropped while it can still succeed: it may have been applied, and sent again it
    /// would be reported as not recorded.)
    async fn flush(&mut self, finish: &CancellationToken) {
        let pending = std::mem::take(&mut self.pending);
        let mut unmarked = std::mem::take(&mut self.unmarked);
        let (mut pending, mut wholes) = self.sort(pending, &unmarked, false, GiveUp::NEVER, finish).await;
        loop {
            let rest = pending.split_off(pending.len().min(self.config.flush_max.max(1)));
            if !self
                .flush_one(
                    pending,
                    std::mem::take(&mut unmarked),
                    std::mem::take(&mut wholes),
                    finish,
                )
                .await
            {
                self.pending.extend(rest);
                break;
            }
            pending = rest;
            if pending.is_empty() {
                break;
            }
        }
        self.deps.in_memory.set_outcomes(self.pending.len());
        self.deps.signals.drain_check.notify_one();
    }

    /// One settle call of `pending`, `unmarked` and the batches acked whole; false (all
    /// back in `self`) if it gave up.
    async fn flush_one(
        &mut self,
        pending: Vec<Done>,
        unmarked: Vec<u64>,
        wholes: Vec<whole::Whole>,
        finish: &CancellationToken,
    ) -> bool {
        let mut batch = self.batch(&pending, &unmarked);
        batch.wholes = wholes.iter().map(|w| w.ack.clone()).collect();
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
            Some(mut settled) => {
                let missed = std::mem::take(&mut settled.missed_batches);
                self.record(&pending, &batch, settled);
                self.record_wholes(wholes, &missed);
                true
            }
            None => {
                self.pending = pending;
                self.unmarked = unmarked;
                self.hold_again(wholes);
                false
            }
        }
    }

    /// The last writes, in calls of at most `flush_max` outcomes, until `deadline`.
    async fn flush_final(&mut self, deadline: Instant) {
        let pending = std::mem::take(&mut self.pending);
        let mut unmarked = std::mem::take(&mut self.unmarked);
        let never = CancellationToken::new();
        let (sorted, mut wholes) = self
            .sort(pending, &unmarked, true, GiveUp::at(deadline), &never)
            .await;
        let mut sorted = Some(sorted);
        // (a batch acked whole whose ack missed comes back to `pending` once, for its jobs
        // to be settled one by one: hence the second round)
        for round in 0..2 {
            let pending = match round {
                0 => sorted.take().unwrap_or_default(),
                _ => std::mem::take(&mut self.pending),
            };
            if pending.is_empty() && wholes.is_empty() {
                continue;
            }
            let mut chunks: Vec<&[Done]> = pending.chunks(self.config.flush_max.max(1)).collect();
            if chunks.is_empty() {
                chunks.push(&[]);
            }
            for chunk in chunks {
                let mut batch = self.batch(chunk, &std::mem::take(&mut unmarked));
                let these = std::mem::take(&mut wholes);
                batch.wholes = these.iter().map(|w| w.ack.clone()).collect();
                match write(&self.deps, &batch, GiveUp::at(deadline)).await {
                    Some(mut settled) => {
                        let missed = std::mem::take(&mut settled.missed_batches);
                        self.record(chunk, &batch, settled);
                        self.record_wholes(these, &missed);
                    }
                    None => tracing::error!(
                        outcomes = batch.items.len() + these.iter().map(|w| w.dones.len()).sum::<usize>(),
                        "gave up recording outcomes at shutdown; their jobs come back when the leases expire"
                    ),
                }
            }
        }
        self.deps.in_memory.set_outcomes(0);
    }

    /// Hands the leases of jobs that never ran back to ready, at the front, in fetch
    /// order. A job whose outcome is known is never among them, written or not: if its
    /// outcome could not be written, its lease expires and reclaim brings it back.
    async fn release_all(&mut self, deadline: Instant) {
        // batches are split first (a release is by job); the jobs of one whose split did
        // not get through are left leased, and come back when it expires
        let batches: Vec<Arc<str>> = self.deps.leases.with(|t| t.batches.keys().cloned().collect());
        if !batches.is_empty() {
            let d = &self.deps;
            crate::consumer::leases::split(&d.conn, &d.keys, &d.leases, &batches, GiveUp::at(deadline)).await;
        }
        let mut held: Vec<(u64, Lease)> = self.deps.leases.with(|t| {
            let seqs: Vec<u64> = t
                .leases
                .iter()
                .filter(|(_, l)| !l.outcome && l.batch.is_none())
                .map(|(seq, _)| seq)
                .collect();
            seqs.into_iter()
                .filter_map(|seq| Some((seq, t.leases.remove(seq)?)))
                .collect()
        });
        // release.lua puts each call's jobs at the front of ready in the order given, so
        // sort by fetch order and send the last chunk first: the first-fetched job ends
        // up at the very front.
        held.sort_unstable_by_key(|&(seq, _)| seq);
        for chunk in held.chunks(LEASE_CHUNK).rev() {
            let triples: Vec<(&str, u64, Priority)> = chunk
                .iter()
                .map(|(_, l)| (l.name(), l.token, l.priority))
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
