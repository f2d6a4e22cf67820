//! The consumer's lease upkeep calls: reclaim, extend, release, start_suspect and the
//! per-key shares. Taking leases is `fetch.rs`; settling them (outcomes and start marks)
//! is `settle.rs`.
//!
//! A lease's token is the deadline its fetch returned; it never changes, however often the
//! lease is extended (see `extend.lua`), so every call that names a lease names it by that
//! token.

use super::{EXTEND, KEY_SHARES, RECLAIM, RELEASE, SPLIT, START_SUSPECT};
use super::{as_u64, call, into_strings, invocation, with_records};
use crate::error::Result;
use crate::queue::envelope::Priority;
use crate::queue::keys::QueueKeys;
use crate::queue::retry_policy::DeferralBudget;
use redis::Value;
use redis::aio::ConnectionLike;

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
    /// How long until the earliest lease left expires (zero if one is due already); none
    /// when the queue holds no lease.
    pub next_expiry: Option<std::time::Duration>,
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
    reclaim_recorded(conn, keys, n, budget, None).await
}

/// [`reclaim`], recording in its job's history each run whose consumer stopped during it
/// (an expired lease with a start mark), when `lease_ms` is given: outcome `expired` (or
/// `dead` if this reclaim dead-letters the job), the consumer that ran it, start = the
/// lease's token less `lease_ms` (when its fetch leased it, for a consumer that fetches
/// with this lease length), end = the lease's deadline. See `reclaim.lua`.
pub async fn reclaim_recorded<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    n: usize,
    budget: DeferralBudget,
    lease_ms: Option<u64>,
) -> Result<Reclaimed> {
    let mut inv = invocation(&RECLAIM, keys);
    with_records(&mut inv, keys)
        .arg(n)
        .arg(budget.max_deferrals)
        .arg(budget.max_age.as_millis() as u64);
    if let Some(ms) = lease_ms {
        inv.arg(ms);
    }
    let (returned, suspects, dead, trimmed, trimmed_total, next): (u64, u64, u64, u64, u64, i64) =
        call("reclaim", keys, &mut inv, conn).await?;
    Ok(Reclaimed {
        returned,
        suspects,
        dead,
        trimmed,
        trimmed_total,
        next_expiry: u64::try_from(next).ok().map(std::time::Duration::from_millis),
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

/// Splits the batch leases `(name, token)` this caller holds into leases of their jobs,
/// each at the batch's token (`split.lua`; docs/batch-leases.md), before anything that acts
/// on some of a batch's jobs: a start mark, an outcome other than the batch's ack, an
/// extend, a release. Returns the names it did not split because they were no longer
/// held at that token.
pub async fn split<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    batches: &[(&str, u64)],
) -> Result<Vec<String>> {
    if batches.is_empty() {
        return Ok(Vec::new());
    }
    let mut inv = invocation(&SPLIT, keys);
    for (name, token) in batches {
        inv.arg(*name).arg(*token);
    }
    let missed: Vec<Value> = call("split", keys, &mut inv, conn).await?;
    into_strings("split", missed)
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

/// Writes this consumer's (`tag`) shares of the adaptive per-key limits, each living
/// `ttl_ms` unless written again; a share of 0 withdraws it. Returns how many were written.
pub async fn key_shares<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    tag: &str,
    ttl_ms: u64,
    shares: &[(String, usize)],
) -> Result<u64> {
    let mut inv = invocation(&KEY_SHARES, keys);
    inv.key(keys.key_limits_prefix()).arg(tag).arg(ttl_ms);
    for (key, share) in shares {
        inv.arg(key).arg(*share);
    }
    call("key_shares", keys, &mut inv, conn).await
}
