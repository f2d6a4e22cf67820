//! A fetch that leased its jobs as one batch: the script call with the batch's LRANGE
//! behind it ([`with_batch`]), and the batch read into a [`Fetched`] ([`read_batch`]).

use super::{Fetched, FetchedBatch, FetchedJob, GlobalLimits, read_deferred, state};
use crate::error::Result;
use crate::queue::keys::QueueKeys;
use crate::queue::scripts::as_u64;
use redis::Value;
use redis::aio::ConnectionLike;

/// The fetch call `inv` with the LRANGE of batch `name` behind it, in one round trip: the
/// batch's items are there when the script leased one (a list nobody else writes, made by
/// this call), an empty list when it did not. None when Redis does not have the script
/// (NOSCRIPT: nothing ran); the caller's plain call loads it.
pub(super) async fn with_batch<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    inv: &redis::ScriptInvocation<'_>,
    name: &str,
) -> Result<Option<(Vec<Value>, Vec<Vec<u8>>)>> {
    let started = std::time::Instant::now();
    let mut pipe = redis::pipe();
    pipe.invoke_script(inv);
    pipe.cmd("LRANGE").arg(keys.batch(name)).arg(0).arg(-1);
    let r = pipe.query_async::<(Vec<Value>, Vec<Vec<u8>>)>(conn).await;
    if let Err(e) = &r
        && e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
    {
        return Ok(None);
    }
    let r = r.map_err(crate::error::Error::from);
    crate::metrics::record_script(keys.name(), "fetch", started, &r);
    Ok(Some(r?))
}

/// The jobs of batch `name`, which `fetch.lua` leased and replied to (`reply`: deadline,
/// next due, state, 0, how many): its list (`items`, as [`with_batch`] read it, or read
/// here with LRANGE), the envelopes of its ids with HMGET (an id whose envelope is gone is dropped, as a fetch drops it). An item that
/// cannot be a job (not UTF-8, or an id that is empty or holds a newline: pushed by hand)
/// splits the batch, so that such items can be dead-lettered one by one: the empty and
/// newline ones here, with the reason `fetch.lua` gives them, those not UTF-8 by the
/// caller ([`Fetched::bad_ids`]). The jobs are then leased one by one, and `batch` is `None`.
pub(super) async fn read_batch<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    name: &str,
    reply: Vec<Value>,
    items: Option<Vec<Vec<u8>>>,
) -> Result<Fetched> {
    let head = |i: usize| as_u64("fetch", reply.get(i).unwrap_or(&Value::Nil));
    let bits = head(2)?;
    let mut out = Fetched {
        deadline_ms: head(0)?,
        next_due_ms: head(1)?,
        paused: false,
        emptied: bits & state::EMPTIED != 0,
        global: GlobalLimits::from_bits(bits),
        ..Fetched::default()
    };
    let items: Vec<Vec<u8>> = match items {
        Some(items) => items,
        None => {
            redis::cmd("LRANGE")
                .arg(keys.batch(name))
                .arg(0)
                .arg(-1)
                .query_async(conn)
                .await?
        }
    };
    let mut batch = FetchedBatch {
        name: name.to_owned(),
        len: items.len(),
        ids: Vec::new(),
    };
    let mut deferred = Vec::new();
    // ids that cannot be jobs, by why (as fetch.lua's `bad_id` says it)
    let (mut empty, mut newline) = (Vec::new(), Vec::new());
    for item in items {
        match String::from_utf8(item) {
            Ok(env) if env.starts_with('{') => out.jobs.push(FetchedJob::inline(env)),
            Ok(id) if id.is_empty() => empty.push(id),
            Ok(id) if id.contains('\n') => newline.push(id),
            Ok(id) => {
                deferred.push(out.jobs.len());
                batch.ids.push(id.clone());
                out.jobs.push(FetchedJob::stored(id, Vec::new()));
            }
            Err(e) => out.bad_ids.push(e.into_bytes()),
        }
    }
    if out.bad_ids.is_empty() && empty.is_empty() && newline.is_empty() {
        out.batch = Some(batch);
    } else {
        crate::queue::scripts::split(conn, keys, &[(name, out.deadline_ms)]).await?;
        for (ids, reason) in [
            (empty, "invalid id: empty"),
            (newline, "invalid id: contains a newline"),
        ] {
            if !ids.is_empty() {
                let ids: Vec<Vec<u8>> = ids.into_iter().map(String::into_bytes).collect();
                crate::queue::scripts::dead_letter_raw(conn, keys, out.deadline_ms, &ids, reason).await?;
            }
        }
    }
    read_deferred(conn, keys, &mut out, &deferred).await?;
    Ok(out)
}
