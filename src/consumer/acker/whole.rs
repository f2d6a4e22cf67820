//! Whole batches (docs/batch-leases.md): the acks of a batch lease's jobs wait here until
//! every job of the batch is acked, then go as one batch ack (one entry removed in Redis,
//! not one per job). A batch that cannot wait for that is split first (in Redis and in the
//! lease table) and its jobs settled one by one: one of them has another outcome or a start
//! mark to write, its acks have waited [`HOLD`], or the acker is finishing.

use super::Acker;
use crate::consumer::leases;
use crate::consumer::outcomes::{Done, Outcome};
use crate::queue::scripts::BatchAck;
use crate::redis::retry::GiveUp;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Longest the acks of a batch wait for the rest of it (the batch is split then): its
/// other jobs may still be buffered or running.
const HOLD: Duration = Duration::from_millis(100);

/// The acks of one batch, waiting for the rest of it.
pub(super) struct Held {
    dones: Vec<Done>,
    since: Instant,
}

/// A batch every job of which is acked: its ack, and the outcomes it stands for.
pub(super) struct Whole {
    pub(super) ack: BatchAck,
    pub(super) dones: Vec<Done>,
}

impl Acker {
    /// Sorts `pending` for one flush. The plain acks of jobs in a whole batch wait in
    /// `held`; the batches they complete come back, to be acked whole; the batches that
    /// must be split (see the module docs; `unmarked`: jobs whose start mark is due) are
    /// split, retrying as `give_up` says, and their waiting acks join the outcomes that
    /// come back to be settled one by one.
    /// Once `finish` is cancelled, a split retries until the final flush's timeout.
    pub(super) async fn sort(
        &mut self,
        pending: Vec<Done>,
        unmarked: &[u64],
        finishing: bool,
        give_up: GiveUp,
        finish: &CancellationToken,
    ) -> (Vec<Done>, Vec<Whole>) {
        if self.held.is_empty() && self.deps.leases.with(|t| t.batches.is_empty()) {
            return (pending, Vec::new());
        }
        let mut rest = Vec::with_capacity(pending.len());
        let mut split: HashSet<Arc<str>> = HashSet::new();
        let mut wholes = Vec::new();
        let now = Instant::now();
        let held = &mut self.held;
        self.deps.leases.with(|t| {
            for d in pending {
                let Some(l) = t.leases.get_mut(d.lease) else {
                    rest.push(d);
                    continue;
                };
                match l.batch.clone() {
                    Some(name) if d.outcome == Outcome::Ack && l.result.is_none() => {
                        // known now: never released as un-started
                        l.outcome = true;
                        let h = held.entry(name).or_insert_with(|| Held {
                            dones: Vec::new(),
                            since: now,
                        });
                        h.dones.push(d);
                    }
                    Some(name) => {
                        split.insert(name);
                        rest.push(d);
                    }
                    None => rest.push(d),
                }
            }
            for seq in unmarked {
                if let Some(l) = t.leases.get(*seq)
                    && !l.outcome
                    && let Some(name) = &l.batch
                {
                    split.insert(name.clone());
                }
            }
            let names: Vec<Arc<str>> = held.keys().cloned().collect();
            for name in names {
                let waited = now.duration_since(held[&name].since);
                match t.batches.get(&name) {
                    // split meanwhile (an extend, a release): settled one by one
                    None => rest.extend(held.remove(&name).map(|h| h.dones).unwrap_or_default()),
                    Some(b) if held[&name].dones.len() >= b.seqs.len() => {
                        let ack = BatchAck {
                            name: name.to_string(),
                            token: b.token,
                            ids: b.ids.clone(),
                        };
                        let dones = held.remove(&name).map(|h| h.dones).unwrap_or_default();
                        wholes.push(Whole { ack, dones });
                    }
                    Some(_) if finishing || waited >= HOLD => {
                        split.insert(name);
                    }
                    Some(_) => {}
                }
            }
        });
        if !split.is_empty() {
            let names: Vec<Arc<str>> = split.into_iter().collect();
            let d = &self.deps;
            // (given up at shutdown: the batches stay whole, their acks wait, and their
            // leases expire: the jobs run again, as with any outcome not written)
            let split = leases::split(&d.conn, &d.keys, &d.leases, &names, give_up);
            let last = Instant::now() + self.config.final_flush_timeout;
            let done = tokio::select! {
                biased;
                done = split => done,
                _ = finish.cancelled() => leases::split(&d.conn, &d.keys, &d.leases, &names, GiveUp::at(last)).await,
            };
            if done {
                self.deps.metrics.batches_split.increment(names.len() as u64);
                for name in &names {
                    if let Some(h) = self.held.remove(name) {
                        rest.extend(h.dones);
                    }
                }
            }
        }
        (rest, wholes)
    }

    /// After a settle call that carried `wholes`: each batch not `missed` is acked, its
    /// leases forgotten and counted; a missed one was split meanwhile (an expiry, a delete,
    /// per-key limits) and its jobs go back to be settled one by one.
    pub(super) fn record_wholes(&mut self, wholes: Vec<Whole>, missed: &[String]) {
        let mut acked = 0;
        for w in wholes {
            let name = w.ack.name.as_str();
            if missed.iter().any(|m| m == name) {
                self.deps.leases.with(|t| t.unbatch(name));
                self.pending.extend(w.dones);
                continue;
            }
            self.deps.leases.with(|t| {
                t.batches.remove(name);
                for d in &w.dones {
                    t.leases.remove(d.lease);
                }
            });
            acked += w.dones.len() as u64;
        }
        self.deps.metrics.acked.increment(acked);
        self.deps.tally.acked.fetch_add(acked, Ordering::Relaxed);
    }

    /// When the acks that have waited longest for the rest of their batch have waited
    /// [`HOLD`] (none waiting: None).
    pub(super) fn hold_until(&self) -> Option<Instant> {
        self.held.values().map(|h| h.since + HOLD).min()
    }

    /// Puts the acks of `wholes` back to wait (a settle call that gave up).
    pub(super) fn hold_again(&mut self, wholes: Vec<Whole>) {
        let now = Instant::now();
        for w in wholes {
            let h = self
                .held
                .entry(Arc::from(w.ack.name.as_str()))
                .or_insert_with(|| Held {
                    dones: Vec::new(),
                    since: now,
                });
            h.dones.extend(w.dones);
        }
    }
}
