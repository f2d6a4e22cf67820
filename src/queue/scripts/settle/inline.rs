//! The acks of inline jobs alone as plain commands in one MULTI/EXEC, beside the settle
//! script: no envelope copied into Lua and back out.

use super::{CallRecord, Settle, Settled, StartMarks, settle_call};
use crate::error::Result;
use crate::queue::keys::QueueKeys;
use redis::aio::ConnectionLike;

/// The acks of inline jobs alone (`items` all [`Settle::Ack`] of inline jobs), as
/// settle.lua applies them but in one MULTI/EXEC of plain commands: ZREM of the leases
/// (which says how many it found), HDEL of the start marks of `ended` and of the token
/// records of `extended` (the leases an extend was sent for: only they can have one),
/// and the `acked` counter. Without the script, Redis does not copy every envelope into
/// Lua and back out. It wakes no one: use [`settle`](super::settle) where a global or
/// per-key concurrency is set
/// ([`GlobalLimits::concurrency_set`](crate::queue::scripts::GlobalLimits)), whose waiting
/// consumers a freed lease must wake.
///
/// The counter is raised by every ack sent, and lowered after the call by those that
/// found no lease ([`Settled::missed_inline`]), so a call retried after a lost reply
/// counts its acks once.
pub async fn ack_inline<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    items: &[Settle],
    ended: &[String],
    extended: &[String],
) -> Result<Settled> {
    ack_inline_call(conn, keys, items, ended, extended, None).await
}

/// [`ack_inline`], writing the call's record (its number alone: a MULTI cannot record
/// the ZREM's count) in the same transaction. Retry such a call with [`settle_call`] and
/// the same record: applied already, it reports nothing missed (the acks that had found
/// no lease, if any, stay counted as acked, in Redis's counter as in the caller's).
pub async fn ack_inline_call<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    items: &[Settle],
    ended: &[String],
    extended: &[String],
    record: Option<CallRecord<'_>>,
) -> Result<Settled> {
    let started = std::time::Instant::now();
    let mut p = redis::pipe();
    p.atomic();
    // Sized up front: the names are envelopes, and a regrown buffer copies them again.
    let bytes = items.iter().map(|i| i.id().len()).sum::<usize>();
    let mut zrem = redis::Cmd::with_capacity(items.len() + 2, bytes + keys.lease().len() + 4);
    zrem.arg("ZREM").arg(keys.lease());
    for item in items {
        zrem.arg(item.id());
    }
    p.add_command(zrem);
    if !ended.is_empty() {
        p.cmd("HDEL").arg(keys.started()).arg(ended).ignore();
    }
    if !extended.is_empty() {
        p.cmd("HDEL").arg(keys.lease_tokens()).arg(extended).ignore();
    }
    p.cmd("HINCRBY")
        .arg(keys.counters())
        .arg("acked")
        .arg(items.len())
        .ignore();
    if let Some(r) = record {
        p.cmd("SET")
            .arg(keys.settle_record(r.tag))
            .arg(r.call)
            .arg("PX")
            .arg(r.ttl_ms.max(1))
            .ignore();
    }
    let r = p.query_async::<(u64,)>(conn).await;
    if let Err(e) = &r
        && e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ExecAbort)
    {
        // Redis refused the transaction as a whole, so it applied nothing: a Redis over
        // maxmemory refuses the counter's HINCRBY. The settle script runs there
        // (allow-oom), so the acks of a full Redis still free its memory.
        let marks = StartMarks {
            tag: "",
            started: &[],
            ended,
        };
        return settle_call(conn, keys, &[], items, marks, None, record).await;
    }
    let r = r.map_err(crate::error::Error::from);
    crate::metrics::record_script(keys.name(), "settle", started, &r);
    let missed = (items.len() as u64).saturating_sub(r?.0);
    if missed > 0 {
        redis::cmd("HINCRBY")
            .arg(keys.counters())
            .arg("acked")
            .arg(-(missed as i64))
            .query_async::<()>(conn)
            .await?;
    }
    Ok(Settled {
        missed_inline: missed,
        ..Settled::default()
    })
}
