//! The settle script's wrappers: outcomes ([`Settle`]) and start marks applied in one call
//! (the acker makes one per flush), and the burial of leased ids that are not UTF-8.
//!
//! Every outcome names its lease by the token its fetch returned (see `lease.rs`).

use super::SETTLE;
use super::{call, into_strings, invocation, opt_string, reply_err};
use crate::error::Result;
use crate::queue::keys::QueueKeys;
use redis::Value;
use redis::aio::ConnectionLike;
use std::collections::HashSet;

mod inline;
mod outcome;
pub use inline::{ack_inline, ack_inline_call};
pub use outcome::{RESULT_MAX_BYTES, Settle, cut_text};

/// What [`settle`] reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settled {
    /// The ids whose lease this caller no longer held (acks first, then the others, each
    /// in the order given): their outcomes were not applied.
    pub missed: Vec<String>,
    /// The ids of [`Settle::Defer`] outcomes that were dead-lettered instead, their
    /// deferral budget spent.
    pub spent: Vec<String>,
    /// How many acks of inline jobs found no lease (counted, not named: see
    /// `settle.lua`); they are not among `missed`.
    pub missed_inline: u64,
    /// The names of the [`BatchAck`]s not applied: the batch was no longer held at its
    /// token (expired, split, acked), or the queue keeps completed jobs and the batch was
    /// split for its jobs to be acked one by one. Their jobs are settled one by one.
    pub missed_batches: Vec<String>,
}

/// Every job of one batch lease acked at once (`settle.lua`'s batch acks; docs/batch-leases.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchAck {
    /// The batch's name, as its fetch was given it.
    pub name: String,
    /// Its lease token: the deadline its fetch returned.
    pub token: u64,
    /// The ids among its items (jobs stored by id, whose records go with the ack).
    pub ids: Vec<String>,
}

/// Start marks that travel with a [`settle_marked`] call: which runs started at this
/// consumer, so that reclaim tells a crash during a run from a job that never ran.
#[derive(Debug, Default, Clone, Copy)]
pub struct StartMarks<'a> {
    /// The consumer's tag (random, one per consumer run).
    pub tag: &'a str,
    /// `(id, token)` of jobs whose run started and has no outcome in this call: marked,
    /// if still held.
    pub started: &'a [(String, u64)],
    /// Marked jobs acked in this call: their marks are removed (a retry, a deferral or a
    /// dead-letter removes its job's mark itself).
    pub ended: &'a [String],
}

/// Applies outcomes in one call. A call that buries jobs trims the dead-letter queue
/// toward the queue's cap (its `dead_cap` setting).
///
/// Acks travel grouped by lease token (jobs fetched together share one), one value per
/// job; see `settle.lua`.
pub async fn settle<C: ConnectionLike>(conn: &mut C, keys: &QueueKeys, items: &[Settle]) -> Result<Settled> {
    settle_marked(conn, keys, items, StartMarks::default()).await
}

/// [`settle`], with start marks written (and removed) in the same call.
pub async fn settle_marked<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    items: &[Settle],
    marks: StartMarks<'_>,
) -> Result<Settled> {
    settle_recorded(conn, keys, items, marks, None).await
}

/// Who ran the jobs of a [`settle_recorded`] call, for their run history.
#[derive(Debug, Clone, Copy)]
pub struct RunHistory<'a> {
    /// The worker's name (the consumer's tag, as `weir workers` lists it).
    pub worker: &'a str,
    /// The lease length the consumer fetches with, ms: a run's start is taken as its
    /// lease's token less this (when its fetch leased it, Redis clock).
    pub lease_ms: u64,
}

/// [`settle_marked`], recording the runs it settles in their jobs' history when
/// `history` is given: each retry, deferral and dead-letter, and each ack of a job the
/// queue keeps (`keep_completed_*` settings). An ack of a job not kept deletes its
/// history with it.
pub async fn settle_recorded<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    items: &[Settle],
    marks: StartMarks<'_>,
    history: Option<RunHistory<'_>>,
) -> Result<Settled> {
    settle_batches(conn, keys, &[], items, marks, history).await
}

/// [`settle_recorded`], with whole batches acked first ([`BatchAck`]).
pub async fn settle_batches<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    batches: &[BatchAck],
    items: &[Settle],
    marks: StartMarks<'_>,
    history: Option<RunHistory<'_>>,
) -> Result<Settled> {
    settle_call(conn, keys, batches, items, marks, history, None).await
}

/// A settle call's number, for a retry of it to be told from a new call (`settle.lua`'s
/// 'C'): a call whose reply was lost, sent again with the same record, changes nothing
/// and gets the first try's reply, so that its outcomes are counted once, as recorded.
#[derive(Debug, Clone, Copy)]
pub struct CallRecord<'a> {
    /// The consumer's tag: one record per consumer (and queue), holding its last call.
    pub tag: &'a str,
    /// The call's number: new for each call, the same for each try of it.
    pub call: u64,
    /// How long the record is kept, ms: past the longest a call is retried for.
    pub ttl_ms: u64,
}

/// [`settle_batches`], with the call's record: retried, it is applied once.
pub async fn settle_call<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    batches: &[BatchAck],
    items: &[Settle],
    marks: StartMarks<'_>,
    history: Option<RunHistory<'_>>,
    record: Option<CallRecord<'_>>,
) -> Result<Settled> {
    let mut inv = invocation(&SETTLE, keys);
    super::with_records(&mut inv, keys);
    add_acks(&mut inv, batches, items, marks.ended);
    for item in items {
        match item {
            Settle::Ack { .. } => continue,
            Settle::AckResult { id, result, .. } => inv.arg("V").arg(id).arg(result),
            Settle::Retry {
                id,
                token,
                priority,
                delay_ms,
                error,
            } => inv
                .arg("R")
                .arg(id)
                .arg(*token)
                .arg(*priority as u8)
                .arg(*delay_ms)
                .arg(error),
            Settle::RetryWithin {
                id,
                token,
                priority,
                delay_ms,
                error,
                max_attempts,
            } => inv
                .arg("r")
                .arg(id)
                .arg(*token)
                .arg(*priority as u8)
                .arg(*delay_ms)
                .arg(error)
                .arg(*max_attempts),
            Settle::Defer {
                id,
                token,
                priority,
                delay_ms,
                reason,
                budget,
                cause,
            } => inv
                .arg("F")
                .arg(id)
                .arg(*token)
                .arg(*priority as u8)
                .arg(*delay_ms)
                .arg(budget.max_deferrals)
                .arg(budget.max_age.as_millis() as u64)
                .arg(cause.label())
                .arg(reason),
            Settle::Dead { id, token, reason } => inv.arg("D").arg(id).arg(*token).arg(reason),
        };
    }
    add_marks(&mut inv, marks);
    if let Some(h) = history {
        inv.arg("H").arg(h.worker).arg(h.lease_ms);
    }
    if let Some(r) = record {
        inv.arg("C").arg(r.tag).arg(r.call).arg(r.ttl_ms.max(1));
    }
    let reply: Vec<Value> = call("settle", keys, &mut inv, conn).await?;
    let r = settle_reply(reply)?;
    Ok(Settled {
        missed: into_strings("settle", r.missed)?,
        spent: into_strings("settle", r.spent)?,
        missed_inline: r.missed_inline,
        missed_batches: into_strings("settle", r.missed_batches)?,
    })
}

/// Settle's reply, as the script gives it (see [`Settled`]).
struct Reply {
    missed: Vec<Value>,
    spent: Vec<Value>,
    missed_inline: u64,
    missed_batches: Vec<Value>,
}

/// Splits settle's `{ missed, spent, missed_inline, missed_batches }` reply.
fn settle_reply(reply: Vec<Value>) -> Result<Reply> {
    let list = |v: Option<Value>| match v {
        Some(Value::Array(a)) => Ok(a),
        other => Err(reply_err("settle", format!("expected a list, got {other:?}"))),
    };
    let mut it = reply.into_iter();
    let missed = list(it.next())?;
    let spent = list(it.next())?;
    let inline = match it.next() {
        Some(v) => super::as_u64("settle", &v)?,
        None => 0,
    };
    let missed_batches = match it.next() {
        Some(v) => list(Some(v))?,
        None => Vec::new(),
    };
    Ok(Reply {
        missed,
        spent,
        missed_inline: inline,
        missed_batches,
    })
}

/// Whether a lease's name is an inline job's envelope rather than a job id.
pub(crate) fn is_inline(name: &str) -> bool {
    name.as_bytes().first() == Some(&b'{')
}

/// The ack groups of `settle.lua`: one per lease token and flags (+1: the acked jobs have
/// a start mark to remove, as `ended` lists; +2: they are inline jobs), after one per
/// batch acked whole (flags 4: the batch's name, then the ids among its items).
fn add_acks(inv: &mut redis::ScriptInvocation<'_>, batches: &[BatchAck], items: &[Settle], ended: &[String]) {
    let ended: HashSet<&str> = ended.iter().map(String::as_str).collect();
    let mut groups: Vec<((u64, u8), Vec<&str>)> = Vec::new();
    for item in items {
        if let Settle::Ack { id, token } | Settle::AckResult { id, token, .. } = item {
            let flags = u8::from(ended.contains(id.as_str())) + 2 * u8::from(is_inline(id));
            let key = (*token, flags);
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, ids)) => ids.push(id),
                None => groups.push((key, vec![id])),
            }
        }
    }
    inv.arg(groups.len() + batches.len());
    for b in batches {
        inv.arg(b.token)
            .arg(4)
            .arg(1 + b.ids.len())
            .arg(&b.name)
            .arg(&b.ids);
    }
    for ((token, flags), ids) in &groups {
        inv.arg(*token).arg(*flags).arg(ids.len()).arg(ids);
    }
}

/// The 'S' groups of `settle.lua`, one per token.
fn add_marks(inv: &mut redis::ScriptInvocation<'_>, marks: StartMarks<'_>) {
    let mut groups: Vec<(u64, Vec<&str>)> = Vec::new();
    for (id, token) in marks.started {
        match groups.iter_mut().find(|(t, _)| t == token) {
            Some((_, ids)) => ids.push(id),
            None => groups.push((*token, vec![id])),
        }
    }
    for (token, ids) in groups {
        inv.arg("S").arg(marks.tag).arg(token).arg(ids.len()).arg(ids);
    }
}

/// Dead-letters leased jobs by raw id bytes, for ids that are not UTF-8 (see
/// [`Fetched::bad_ids`](super::Fetched::bad_ids)); returns the ids not acted on, lossily decoded.
pub async fn dead_letter_raw<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    token: u64,
    ids: &[Vec<u8>],
    reason: &str,
) -> Result<Vec<String>> {
    let mut inv = invocation(&SETTLE, keys);
    super::with_records(&mut inv, keys);
    inv.arg(0);
    for id in ids {
        inv.arg("D").arg(id).arg(token).arg(reason);
    }
    let reply: Vec<Value> = call("settle", keys, &mut inv, conn).await?;
    let missed = settle_reply(reply)?.missed;
    Ok(missed.into_iter().filter_map(opt_string).collect())
}
