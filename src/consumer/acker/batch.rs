//! One flush's settle call: built from the pending outcomes and start marks (recording
//! each in the table of leases), written with retries, and counted once settle reports
//! what it applied.

use super::{Acker, AckerDeps};
use crate::consumer::leases::Lease;
use crate::consumer::outcomes::{Done, Outcome};
use crate::metrics::{DEFER_REASONS, DeferReason};
use crate::queue::scripts::{self, Settle, Settled, StartMarks};
use crate::redis::retry::{Backoff, GiveUp, retrying};
use std::collections::HashMap;
use std::sync::atomic::Ordering;

/// One settle call's worth: outcomes, and start marks written or removed.
#[derive(Default)]
pub(super) struct Batch {
    /// Outcomes, each naming its lease as Redis does (see `Lease::name`).
    pub(super) items: Vec<Settle>,
    /// Per item: how it counts if the settle applies it.
    counted: Vec<Counted>,
    marks: Vec<(String, u64)>,
    ended: Vec<String>,
    /// Acked inline leases an extend was sent for (they may have a token record).
    extended: Vec<String>,
    /// Batch leases acked whole (`whole.rs`), sent before the outcomes.
    pub(super) wholes: Vec<scripts::BatchAck>,
}

impl Acker {
    /// One settle call for `dones` and the start marks of `unmarked` (jobs whose outcome
    /// is in this call need none). Every lease named gets its outcome (or mark) recorded
    /// in the table now: from here on it is never released as un-started.
    pub(super) fn batch(&self, dones: &[Done], unmarked: &[u64]) -> Batch {
        let mut b = Batch {
            items: Vec::with_capacity(dones.len()),
            counted: Vec::with_capacity(dones.len()),
            ..Batch::default()
        };
        self.deps.leases.with(|t| {
            for d in dones {
                let Some(l) = t.leases.get_mut(d.lease) else {
                    tracing::warn!(id = %d.id, "outcome for a job this consumer does not hold; ignored");
                    continue;
                };
                l.outcome = true;
                if l.marked && d.outcome == Outcome::Ack {
                    b.ended.push(l.name().to_string());
                }
                if l.extend_sent && l.item.is_some() && d.outcome == Outcome::Ack {
                    b.extended.push(l.name().to_string());
                }
                b.items.push(settle_item(d, l));
                b.counted.push(Counted::of(&d.outcome));
            }
            for seq in unmarked {
                if let Some(l) = t.leases.get_mut(*seq)
                    && !l.outcome
                    && !l.marked
                {
                    // Marked now, written or not: a mark that may have landed is removed
                    // with the ack later (removing one that did not is harmless).
                    l.marked = true;
                    b.marks.push((l.name().to_string(), l.token));
                }
            }
        });
        b
    }

    /// Forgets the settled leases (those of `dones`, the outcomes `batch` was made of);
    /// counts what was recorded.
    pub(super) fn record(&mut self, dones: &[Done], batch: &Batch, settled: Settled) {
        let Settled {
            missed,
            spent,
            missed_inline,
            ..
        } = settled;
        let items = &batch.items;
        let lost = missed.len() + missed_inline as usize;
        if lost > 0 {
            tracing::warn!(
                count = lost,
                "outcomes not recorded: their leases expired (the jobs run again), or a call given up at shutdown recorded them"
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
        // Inline acks that found no lease are counted, not named (see settle.lua).
        let (mut acked, mut retried, mut dead) = (0usize, 0, 0);
        let mut inline_left = missed_inline as usize;
        let mut deferred = [0u64; DEFER_REASONS.len()];
        self.deps.leases.with(|t| {
            for d in dones {
                t.leases.remove(d.lease);
            }
        });
        for (item, &counted) in items.iter().zip(&batch.counted) {
            if let Some(left) = missed_left.get_mut(item.id()).filter(|n| **n > 0) {
                *left -= 1;
                continue;
            }
            match counted {
                Counted::Acked if inline_left > 0 && item.is_inline() => inline_left -= 1,
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
        m.leases_lost.increment(lost as u64);
        let t = &self.deps.tally;
        t.acked.fetch_add(acked as u64, Ordering::Relaxed);
        t.retried.fetch_add(retried as u64, Ordering::Relaxed);
        t.deferred.fetch_add(deferred.iter().sum(), Ordering::Relaxed);
        t.dead.fetch_add(dead as u64, Ordering::Relaxed);
        t.lost_leases.fetch_add(lost as u64, Ordering::Relaxed);
    }
}

/// One settle call for `batch` (retried as `give_up` says); what settle reported, or
/// None if it gave up.
pub(super) async fn write(deps: &AckerDeps, batch: &Batch, give_up: GiveUp) -> Option<Settled> {
    if batch.items.is_empty() && batch.marks.is_empty() && batch.wholes.is_empty() {
        return Some(Settled::default());
    }
    let marks = StartMarks {
        tag: &deps.tag,
        started: &batch.marks,
        ended: &batch.ended,
    };
    // Acks of inline jobs alone, where no freed lease needs to wake anyone: plain
    // commands (scripts::ack_inline), no envelope copied into Lua.
    let plain = batch.marks.is_empty()
        && batch.wholes.is_empty()
        && !deps.signals.concurrency_set.load(Ordering::Relaxed)
        && batch
            .items
            .iter()
            .all(|i| matches!(i, Settle::Ack { .. }) && i.is_inline());
    // Each try of this call carries its number: one whose reply was lost (applied or not)
    // is applied once, and its outcomes counted as that try recorded them. The record
    // outlives the retries that matter: past twice the lease, the leases are gone anyway.
    let record = scripts::CallRecord {
        tag: &deps.calls.name,
        call: deps.calls.next.fetch_add(1, Ordering::Relaxed),
        ttl_ms: (2 * deps.lease_ms).max(60_000),
    };
    let tries = std::sync::atomic::AtomicU32::new(0);
    retrying("settle", Backoff::CALL, give_up, || {
        let mut conn = deps.conn.clone();
        let (keys, items) = (&deps.keys, &batch.items);
        let (ended, extended, wholes) = (&batch.ended, &batch.extended, &batch.wholes);
        // (a retry goes through the script, which reads the record first)
        let first = tries.fetch_add(1, Ordering::Relaxed) == 0;
        async move {
            if plain && first {
                scripts::ack_inline_call(&mut conn, keys, items, ended, extended, Some(record)).await
            } else {
                let history = scripts::RunHistory {
                    worker: &deps.tag,
                    lease_ms: deps.lease_ms,
                };
                scripts::settle_call(&mut conn, keys, wholes, items, marks, Some(history), Some(record)).await
            }
        }
    })
    .await
    .ok()
}

fn settle_item(d: &Done, l: &Lease) -> Settle {
    let id = l.name().to_string();
    match &d.outcome {
        Outcome::Ack => match l.result.as_ref().and_then(|r| r.take()) {
            // (a slot exists only while the queue keeps completed jobs)
            Some(result) => Settle::AckResult {
                id,
                token: l.token,
                result: scripts::cut_text(result, scripts::RESULT_MAX_BYTES),
            },
            None => Settle::Ack { id, token: l.token },
        },
        Outcome::Retry {
            delay_ms,
            error,
            max: Some(max),
            ..
        } => Settle::RetryWithin {
            id,
            token: l.token,
            priority: l.priority,
            delay_ms: *delay_ms,
            error: error.clone(),
            max_attempts: *max,
        },
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
            cause,
        } => Settle::Defer {
            id,
            token: l.token,
            priority: l.priority,
            delay_ms: *delay_ms,
            reason: reason.clone(),
            budget: *budget,
            cause: *cause,
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
