//! The consumer's scripts: fetch (lease), settle (outcomes), and the lease upkeep calls
//! (reclaim, extend, release).

use super::{EXTEND, FETCH, RECLAIM, RELEASE, SETTLE, as_u64, call, into_string, into_strings, invocation};
use super::{opt_string, reply_err};
use crate::error::Result;
use crate::queue::envelope::Priority;
use crate::queue::keys::QueueKeys;
use crate::queue::retry::DeferralBudget;
use redis::Value;
use redis::aio::ConnectionLike;

/// What [`fetch`] returns.
#[derive(Debug, Default)]
pub struct Fetched {
    /// Lease deadline (ms, Redis clock) of every job returned: the token to settle them with.
    pub deadline_ms: u64,
    /// With no jobs: ms until the next delayed job is due (0 = none delayed).
    pub next_due_ms: u64,
    /// The queue is paused.
    pub paused: bool,
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
    if reply.len() < 3 || reply.len().is_multiple_of(2) {
        return Err(reply_err("fetch", format!("{} values", reply.len())));
    }
    let mut it = reply.into_iter();
    let mut head = || it.next().unwrap_or(Value::Nil);
    let (d, nd, p) = (head(), head(), head());
    let mut out = Fetched {
        deadline_ms: as_u64("fetch", &d)?,
        next_due_ms: as_u64("fetch", &nd)?,
        paused: as_u64("fetch", &p)? == 1,
        jobs: Vec::with_capacity(it.len() / 2),
        bad_ids: Vec::new(),
    };
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

/// Applies outcomes in one call. A call that buries jobs trims the dead-letter queue
/// toward the queue's cap (its `dead_cap` setting).
///
/// Acks travel grouped by lease token (jobs fetched together share one), one value per
/// job; see `settle.lua`.
pub async fn settle<C: ConnectionLike>(conn: &mut C, keys: &QueueKeys, items: &[Settle]) -> Result<Settled> {
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

/// What [`reclaim`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reclaimed {
    /// Jobs put back to ready.
    pub requeued: u64,
    /// Jobs dead-lettered.
    pub dead: u64,
    /// Dead-letter entries this call trimmed (each reclaim call trims a bounded step
    /// toward the queue's cap).
    pub trimmed: u64,
    /// The queue's `trimmed` counter after the call: entries trimmed so far by every
    /// consumer.
    pub trimmed_total: u64,
}

/// Reclaims up to `n` expired leases, and trims the dead-letter queue a bounded step
/// toward the queue's cap.
pub async fn reclaim<C: ConnectionLike>(conn: &mut C, keys: &QueueKeys, n: usize) -> Result<Reclaimed> {
    let (requeued, dead, trimmed, trimmed_total): (u64, u64, u64, u64) =
        call("reclaim", keys, invocation(&RECLAIM, keys).arg(n), conn).await?;
    Ok(Reclaimed {
        requeued,
        dead,
        trimmed,
        trimmed_total,
    })
}

/// Extends the leases of `(id, token)` pairs; returns the new deadline and the lost ids.
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
