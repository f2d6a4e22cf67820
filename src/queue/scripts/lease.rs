//! The consumer's scripts: fetch (lease), settle (outcomes and start marks), and the lease
//! upkeep calls (reclaim, extend, release, start_suspect).
//!
//! A lease's token is the deadline its fetch returned; it never changes, however often the
//! lease is extended (see `extend.lua`), so every call that names a lease names it by that
//! token.

use super::{EXTEND, FETCH, RECLAIM, RELEASE, SETTLE, START_SUSPECT};
use super::{as_u64, call, into_string, into_strings, invocation, opt_string, reply_err};
use crate::error::Result;
use crate::queue::envelope::Priority;
use crate::queue::keys::QueueKeys;
use crate::queue::retry::DeferralBudget;
use redis::Value;
use redis::aio::ConnectionLike;

/// What [`fetch`] returns.
#[derive(Debug, Default)]
pub struct Fetched {
    /// Lease deadline (ms, Redis clock) of every job returned: the lease token to settle,
    /// extend and release them with, for the lease's whole life.
    pub deadline_ms: u64,
    /// With no jobs: ms until the next delayed job is due (0 = none delayed).
    pub next_due_ms: u64,
    /// The queue is paused.
    pub paused: bool,
    /// How many of `jobs`, at the front, are suspects (0 or 1): jobs that were running
    /// when their consumer died. Run each alone, marked with [`start_suspect`].
    pub suspects: usize,
    /// (id, envelope) pairs.
    pub jobs: Vec<(String, Vec<u8>)>,
    /// Leased ids that are not UTF-8 (pushed by hand: weir never writes one). They cannot
    /// be jobs; [`dead_letter_raw`] buries them.
    pub bad_ids: Vec<Vec<u8>>,
}

/// Promotes due delayed jobs, then pops and leases up to `n` ready jobs.
pub async fn fetch<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    n: usize,
    visibility_ms: u64,
) -> Result<Fetched> {
    let reply: Vec<Value> = call(
        "fetch",
        keys,
        invocation(&FETCH, keys).arg(n).arg(visibility_ms),
        conn,
    )
    .await?;
    if reply.len() < 4 || !reply.len().is_multiple_of(2) {
        return Err(reply_err("fetch", format!("{} values", reply.len())));
    }
    let mut it = reply.into_iter();
    let mut head = || it.next().unwrap_or(Value::Nil);
    let (d, nd, p, s) = (head(), head(), head(), head());
    let mut out = Fetched {
        deadline_ms: as_u64("fetch", &d)?,
        next_due_ms: as_u64("fetch", &nd)?,
        paused: as_u64("fetch", &p)? == 1,
        suspects: as_u64("fetch", &s)? as usize,
        jobs: Vec::with_capacity(it.len() / 2),
        bad_ids: Vec::new(),
    };
    let suspects = std::mem::take(&mut out.suspects);
    let mut i = 0;
    while let (Some(id), Some(env)) = (it.next(), it.next()) {
        let env = match env {
            Value::BulkString(b) => b,
            other => return Err(reply_err("fetch", format!("envelope is {other:?}"))),
        };
        match id {
            Value::BulkString(b) => match String::from_utf8(b) {
                Ok(id) => out.jobs.push((id, env)),
                Err(e) => out.bad_ids.push(e.into_bytes()),
            },
            other => out.jobs.push((into_string("fetch", other)?, env)),
        }
        // A suspect whose id is not UTF-8 is not among `jobs`.
        if i < suspects {
            out.suspects = out.jobs.len();
        }
        i += 1;
    }
    Ok(out)
}

/// One outcome for [`settle`].
#[derive(Debug, Clone, PartialEq)]
pub enum Settle {
    /// Delete the job: it is done.
    Ack {
        /// Job id.
        id: String,
        /// Lease deadline token.
        token: u64,
    },
    /// Back to delayed after `delay_ms` with attempt + 1, or dead once attempts are spent.
    Retry {
        /// Job id.
        id: String,
        /// Lease deadline token.
        token: u64,
        /// Priority to return at.
        priority: Priority,
        /// Backoff, ms.
        delay_ms: u64,
        /// The error, kept as the job's last error.
        error: String,
    },
    /// Back to delayed after `delay_ms` without charging an attempt (the downstream pushed
    /// back, or this consumer cannot take the job); dead once the job's deferrals are
    /// over `budget`.
    Defer {
        /// Job id.
        id: String,
        /// Lease deadline token.
        token: u64,
        /// Priority to return at.
        priority: Priority,
        /// How long to wait, ms.
        delay_ms: u64,
        /// Why, kept as the job's last error (and in the dead-letter reason if the
        /// budget is spent).
        reason: String,
        /// How many deferrals, or how long since the first, before the job is dead.
        budget: DeferralBudget,
    },
    /// To the dead-letter queue now.
    Dead {
        /// Job id.
        id: String,
        /// Lease deadline token.
        token: u64,
        /// Why.
        reason: String,
    },
}

impl Settle {
    /// The job id.
    pub fn id(&self) -> &str {
        match self {
            Settle::Ack { id, .. }
            | Settle::Retry { id, .. }
            | Settle::Defer { id, .. }
            | Settle::Dead { id, .. } => id,
        }
    }

    /// The lease token.
    pub fn token(&self) -> u64 {
        match self {
            Settle::Ack { token, .. }
            | Settle::Retry { token, .. }
            | Settle::Defer { token, .. }
            | Settle::Dead { token, .. } => *token,
        }
    }
}

/// What [`settle`] reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settled {
    /// The ids whose lease this caller no longer held (acks first, then the others, each
    /// in the order given): their outcomes were not applied.
    pub missed: Vec<String>,
    /// The ids of [`Settle::Defer`] outcomes that were dead-lettered instead, their
    /// deferral budget spent.
    pub spent: Vec<String>,
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
    let mut groups: Vec<(u64, Vec<&str>)> = Vec::new();
    for item in items {
        if let Settle::Ack { id, token } = item {
            match groups.iter_mut().find(|(t, _)| t == token) {
                Some((_, ids)) => ids.push(id),
                None => groups.push((*token, vec![id])),
            }
        }
    }
    let mut inv = invocation(&SETTLE, keys);
    inv.arg(groups.len());
    for (token, ids) in &groups {
        inv.arg(*token).arg(ids.len());
        for id in ids {
            inv.arg(*id);
        }
    }
    for item in items {
        match item {
            Settle::Ack { .. } => continue,
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
            Settle::Defer {
                id,
                token,
                priority,
                delay_ms,
                reason,
                budget,
            } => inv
                .arg("F")
                .arg(id)
                .arg(*token)
                .arg(*priority as u8)
                .arg(*delay_ms)
                .arg(budget.max_deferrals)
                .arg(budget.max_age.as_millis() as u64)
                .arg(reason),
            Settle::Dead { id, token, reason } => inv.arg("D").arg(id).arg(*token).arg(reason),
        };
    }
    add_marks(&mut inv, marks);
    let reply: Vec<Value> = call("settle", keys, &mut inv, conn).await?;
    let (missed, spent) = settle_reply(reply)?;
    Ok(Settled {
        missed: into_strings("settle", missed)?,
        spent: into_strings("settle", spent)?,
    })
}

/// Splits settle's `{ missed, spent }` reply.
fn settle_reply(reply: Vec<Value>) -> Result<(Vec<Value>, Vec<Value>)> {
    let list = |v: Option<Value>| match v {
        Some(Value::Array(a)) => Ok(a),
        other => Err(reply_err("settle", format!("expected a list, got {other:?}"))),
    };
    let mut it = reply.into_iter();
    let missed = list(it.next())?;
    Ok((missed, list(it.next())?))
}

/// The 'S' groups (one per token) and the 'U' group of `settle.lua`.
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
    if !marks.ended.is_empty() {
        inv.arg("U").arg(marks.ended.len()).arg(marks.ended);
    }
}

/// Dead-letters leased jobs by raw id bytes, for ids that are not UTF-8 (see
/// [`Fetched::bad_ids`]); returns the ids not acted on, lossily decoded.
pub async fn dead_letter_raw<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    token: u64,
    ids: &[Vec<u8>],
    reason: &str,
) -> Result<Vec<String>> {
    let mut inv = invocation(&SETTLE, keys);
    inv.arg(0);
    for id in ids {
        inv.arg("D").arg(id).arg(token).arg(reason);
    }
    let reply: Vec<Value> = call("settle", keys, &mut inv, conn).await?;
    let (missed, _) = settle_reply(reply)?;
    Ok(missed.into_iter().filter_map(opt_string).collect())
}

/// What [`reclaim`] did with the expired leases it took (see `reclaim.lua`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Reclaimed {
    /// Jobs that never ran: back to the front of ready uncharged (counted as deferrals).
    pub returned: u64,
    /// Jobs that were running when their consumer died: to the suspects list, uncharged
    /// (a suspect that died running alone is charged and, with attempts left, goes back
    /// there too).
    pub suspects: u64,
    /// Suspects whose attempts are spent, and jobs whose deferral budget is: dead-lettered.
    pub dead: u64,
    /// Dead-letter entries this call trimmed (each reclaim call trims a bounded step
    /// toward the queue's cap).
    pub trimmed: u64,
    /// The queue's `trimmed` counter after the call: entries trimmed so far by every
    /// consumer.
    pub trimmed_total: u64,
}

impl Reclaimed {
    /// Leases reclaimed in all.
    pub fn total(&self) -> u64 {
        self.returned + self.suspects + self.dead
    }
}

/// Reclaims up to `n` expired leases, and trims the dead-letter queue a bounded step
/// toward the queue's cap. `budget` is the deferral budget of a job that comes back
/// without having run.
pub async fn reclaim<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    n: usize,
    budget: DeferralBudget,
) -> Result<Reclaimed> {
    let (returned, suspects, dead, trimmed, trimmed_total): (u64, u64, u64, u64, u64) = call(
        "reclaim",
        keys,
        invocation(&RECLAIM, keys)
            .arg(n)
            .arg(budget.max_deferrals)
            .arg(budget.max_age.as_millis() as u64),
        conn,
    )
    .await?;
    Ok(Reclaimed {
        returned,
        suspects,
        dead,
        trimmed,
        trimmed_total,
    })
}

/// Marks the run of suspect `id` (leased with `token`) as started by the consumer `tag`,
/// just before it starts; false if the lease is no longer held (then it must not run).
pub async fn start_suspect<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    id: &str,
    token: u64,
    tag: &str,
) -> Result<bool> {
    let marked: u64 = call(
        "start_suspect",
        keys,
        invocation(&START_SUSPECT, keys).arg(id).arg(token).arg(tag),
        conn,
    )
    .await?;
    Ok(marked == 1)
}

/// Extends the leases of `(id, token)` pairs; returns the new deadline and the lost ids.
/// Tokens do not change: a lease is extended (and settled) with its fetch token, so a
/// lost reply changes nothing for the caller.
pub async fn extend<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    visibility_ms: u64,
    held: &[(&str, u64)],
) -> Result<(u64, Vec<String>)> {
    let mut inv = invocation(&EXTEND, keys);
    inv.arg(visibility_ms);
    for (id, token) in held {
        inv.arg(*id).arg(*token);
    }
    let reply: Vec<Value> = call("extend", keys, &mut inv, conn).await?;
    let mut it = reply.into_iter();
    let deadline = as_u64("extend", &it.next().unwrap_or(Value::Nil))?;
    Ok((deadline, into_strings("extend", it.collect())?))
}

/// Returns leased, un-started jobs `(id, token, priority)` to the front of ready; returns
/// the ids not released.
pub async fn release<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    held: &[(&str, u64, Priority)],
) -> Result<Vec<String>> {
    if held.is_empty() {
        return Ok(Vec::new());
    }
    let mut inv = invocation(&RELEASE, keys);
    for (id, token, priority) in held {
        inv.arg(*id).arg(*token).arg(*priority as u8);
    }
    let missed: Vec<Value> = call("release", keys, &mut inv, conn).await?;
    into_strings("release", missed)
}
