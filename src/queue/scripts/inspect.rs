//! Wrappers of the inspection and action scripts behind `weir jobs`, `weir job`, the
//! filtered dead-letter calls and the worker registry. Not on the hot path; one typed
//! wrapper per script, as elsewhere. `queue::admin` builds the public types from these
//! replies.

use super::inline_find::{Seen, find_waiting, seen_if_missing, with_hint};
use super::{
    DLQ_BULK, JOB_RUN_NOW, JOB_SHOW, JOBS_DELETE, JOBS_PAGE, WORKER_BEAT, as_u64, call, into_string,
    invocation, opt_string, reply_err,
};
use crate::error::Result;
use crate::queue::keys::QueueKeys;
use redis::Value;
use redis::aio::ConnectionLike;
use std::collections::HashMap;

/// One entry of a [`jobs_page`] reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageEntry {
    /// Job id.
    pub id: String,
    /// Its envelope (none if it went meanwhile).
    pub envelope: Option<String>,
    /// Due time (delayed), lease deadline (in flight) or dead-lettered-at (dead), ms.
    pub score: Option<u64>,
    /// Last error or dead-letter reason; on a page of completed jobs kept (where none has
    /// one), the job's result.
    pub error: Option<String>,
    /// Start mark: the tag of the consumer running it.
    pub mark: Option<String>,
    /// 0: a suspect (ready) or not by priority (in flight, dead); 1..=3: the priority
    /// (high, normal, low) of the list or set it is in.
    pub segment: u8,
}

/// A [`jobs_page`] reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// Redis time of the call, ms.
    pub now_ms: u64,
    /// Entries remain past `offsets`.
    pub more: bool,
    /// Where the next page starts (see `jobs_page.lua`).
    pub offsets: [u64; 3],
    /// The jobs, in page order.
    pub entries: Vec<PageEntry>,
}

/// One page of the jobs in `state` (`ready`, `delayed`, `in_flight` or `dead`) from
/// `offsets`: at most `limit` jobs of `kind` (empty: any), looking at most at `window`
/// entries.
#[allow(clippy::too_many_arguments)]
pub async fn jobs_page<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    state: &str,
    offsets: [u64; 3],
    limit: usize,
    window: usize,
    kind: &str,
    key: &str,
) -> Result<Page> {
    let mut inv = invocation(&JOBS_PAGE, keys);
    super::with_records(&mut inv, keys);
    inv.arg(state)
        .arg(&offsets[..])
        .arg(limit)
        .arg(window.max(limit))
        .arg(kind)
        .arg(key);
    let reply: Vec<Value> = call("jobs_page", keys, &mut inv, conn).await?;
    if reply.len() < 5 || !(reply.len() - 5).is_multiple_of(6) {
        return Err(reply_err("jobs_page", format!("{} values", reply.len())));
    }
    let n = |i: usize| as_u64("jobs_page", &reply[i]);
    let (now_ms, more, offsets) = (n(0)?, n(1)? == 1, [n(2)?, n(3)?, n(4)?]);
    let mut entries = Vec::with_capacity((reply.len() - 5) / 6);
    let mut it = reply.into_iter().skip(5);
    while let (Some(id), Some(env), Some(score), Some(err), Some(mark), Some(seg)) =
        (it.next(), it.next(), it.next(), it.next(), it.next(), it.next())
    {
        entries.push(PageEntry {
            id: opt_string(id).unwrap_or_default(),
            envelope: opt_string(env),
            score: opt_u64("jobs_page", &score)?,
            error: opt_string(err),
            mark: opt_string(mark),
            segment: as_u64("jobs_page", &seg)? as u8,
        });
    }
    Ok(Page {
        now_ms,
        more,
        offsets,
        entries,
    })
}

/// A [`job_show`] reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    /// Redis time of the call, ms.
    pub now_ms: u64,
    /// `ready`, `delayed`, `in_flight`, `dead` or `missing`.
    pub state: String,
    /// The envelope as stored.
    pub envelope: Option<String>,
    /// Lease deadline, due time or dead-lettered-at, ms.
    pub score: Option<u64>,
    /// Last error or dead-letter reason.
    pub error: Option<String>,
    /// Start mark: the tag of the consumer running it (`tag:s` for a suspect).
    pub mark: Option<String>,
    /// The fetch token of an extended lease.
    pub token: Option<String>,
    /// The deferral record: `count first_ms`, then per-cause `cause=count:first_ms` parts.
    pub deferral: Option<String>,
    /// The run history: a JSON array of `{"start","end","worker","outcome","message"}`,
    /// newest last (see `lib.lua`'s run_history).
    pub history: Option<String>,
    /// A completed job kept: its handler's result, as text (at most
    /// [`RESULT_MAX_BYTES`](super::RESULT_MAX_BYTES)).
    pub result: Option<String>,
}

/// One job, wherever it is. An id in no set and not in the jobs hash may be an inline job
/// waiting in a list: it is searched for a page at a time
/// ([`inline_find()`](super::inline_find())), then shown by a second call as the search
/// saw it (or in flight, if it was fetched since).
pub async fn job_show<C: ConnectionLike>(conn: &mut C, keys: &QueueKeys, id: &str) -> Result<Shown> {
    let shown = job_show_once(conn, keys, id, &Seen::new()).await?;
    match seen_if_missing(conn, keys, id, &shown.state).await? {
        Some(seen) => job_show_once(conn, keys, id, &seen).await,
        None => Ok(shown),
    }
}

/// One `job_show` call, with `id`'s hint from `seen` if there is one.
async fn job_show_once<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    id: &str,
    seen: &Seen,
) -> Result<Shown> {
    let mut inv = invocation(&JOB_SHOW, keys);
    super::with_records(&mut inv, keys);
    inv.arg(id);
    with_hint(&mut inv, seen, id);
    let reply: Vec<Value> = call("job_show", keys, &mut inv, conn).await?;
    let [
        now,
        state,
        env,
        score,
        err,
        mark,
        token,
        deferral,
        history,
        result,
    ]: [Value; 10] = reply
        .try_into()
        .map_err(|r: Vec<Value>| reply_err("job_show", format!("{} values", r.len())))?;
    Ok(Shown {
        now_ms: as_u64("job_show", &now)?,
        state: into_string("job_show", state)?,
        envelope: opt_string(env),
        score: opt_u64("job_show", &score)?,
        error: opt_string(err),
        mark: opt_string(mark),
        token: opt_string(token),
        deferral: opt_string(deferral),
        history: opt_string(history),
        result: opt_string(result),
    })
}

/// Deletes jobs by id (`only_dead`: only dead-lettered ones); returns each id with the
/// state it was deleted from, or `missing`. The ids the first call finds nowhere may be
/// inline jobs waiting in a list: they are searched for a page at a time
/// ([`inline_find()`](super::inline_find())), and those seen are deleted by a second call
/// from where the search saw them (or from the lease, if they were fetched since).
pub async fn jobs_delete<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    only_dead: bool,
    ids: &[String],
) -> Result<Vec<(String, String)>> {
    let mut out = jobs_delete_once(conn, keys, only_dead, ids, &Seen::new()).await?;
    let missing: Vec<&str> = out
        .iter()
        .filter(|(_, state)| state == "missing")
        .map(|(id, _)| id.as_str())
        .collect();
    if only_dead || missing.is_empty() {
        return Ok(out);
    }
    let seen = find_waiting(conn, keys, &missing).await?;
    if seen.is_empty() {
        return Ok(out);
    }
    let again: Vec<String> = seen.keys().cloned().collect();
    let mut states: HashMap<String, String> = jobs_delete_once(conn, keys, false, &again, &seen)
        .await?
        .into_iter()
        .collect();
    // The first report of each id (a repeated id is reported missing after its first).
    for (id, state) in &mut out {
        if state == "missing"
            && let Some(s) = states.remove(id)
        {
            *state = s;
        }
    }
    Ok(out)
}

/// One `jobs_delete` call, with the hints in `seen`.
async fn jobs_delete_once<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    only_dead: bool,
    ids: &[String],
    seen: &Seen,
) -> Result<Vec<(String, String)>> {
    let mut inv = invocation(&JOBS_DELETE, keys);
    super::with_records(&mut inv, keys);
    inv.arg(if only_dead { "dead" } else { "any" }).arg(ids.len());
    for id in ids {
        inv.arg(id);
    }
    for id in ids {
        if seen.contains_key(id) {
            inv.arg(id);
            with_hint(&mut inv, seen, id);
        }
    }
    let reply: Vec<Value> = call("jobs_delete", keys, &mut inv, conn).await?;
    let mut out = Vec::with_capacity(reply.len() / 2);
    let mut it = reply.into_iter();
    while let (Some(id), Some(state)) = (it.next(), it.next()) {
        out.push((
            into_string("jobs_delete", id)?,
            into_string("jobs_delete", state)?,
        ));
    }
    Ok(out)
}

/// Moves a delayed or dead job to the front of ready; returns the state it was in. An
/// id found nowhere by the first call is searched for as [`job_show`] does.
pub async fn job_run_now<C: ConnectionLike>(conn: &mut C, keys: &QueueKeys, id: &str) -> Result<String> {
    let state = job_run_now_once(conn, keys, id, &Seen::new()).await?;
    match seen_if_missing(conn, keys, id, &state).await? {
        Some(seen) => job_run_now_once(conn, keys, id, &seen).await,
        None => Ok(state),
    }
}

/// One `job_run_now` call, with `id`'s hint from `seen` if there is one.
async fn job_run_now_once<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    id: &str,
    seen: &Seen,
) -> Result<String> {
    let mut inv = invocation(&JOB_RUN_NOW, keys);
    super::with_records(&mut inv, keys);
    inv.arg(id);
    with_hint(&mut inv, seen, id);
    call("job_run_now", keys, &mut inv, conn).await
}

/// A [`dlq_bulk`] reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BulkStep {
    /// Jobs requeued or deleted by this call.
    pub acted: u64,
    /// The rank the next call starts at.
    pub next: u64,
    /// No entry past this call's window can match.
    pub done: bool,
}

/// Requeues (`requeue`) or deletes the dead-lettered jobs in one window from `rank`
/// (oldest first) that are at least `min_age_ms` old (0: any) and of `kind` (empty: any).
pub async fn dlq_bulk<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    requeue: bool,
    rank: u64,
    window: usize,
    min_age_ms: u64,
    kind: &str,
) -> Result<BulkStep> {
    let mut inv = invocation(&DLQ_BULK, keys);
    super::with_records(&mut inv, keys);
    inv.arg(if requeue { "requeue" } else { "delete" })
        .arg(rank)
        .arg(window.max(1))
        .arg(min_age_ms)
        .arg(kind);
    let r: Vec<u64> = call("dlq_bulk", keys, &mut inv, conn).await?;
    match r[..] {
        [acted, next, done] => Ok(BulkStep {
            acted,
            next,
            done: done == 1,
        }),
        _ => Err(reply_err("dlq_bulk", format!("{} values", r.len()))),
    }
}

/// Registers or refreshes worker `id` for `ttl_ms` with the record `fields`, or with a
/// `ttl_ms` of 0 removes it; returns how many expired entries were dropped.
pub async fn worker_beat<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    id: &str,
    ttl_ms: u64,
    fields: &[(&str, String)],
) -> Result<u64> {
    let mut inv = invocation(&WORKER_BEAT, keys);
    inv.key(keys.workers()).key(keys.worker(id)).arg(id).arg(ttl_ms);
    for (k, v) in fields {
        inv.arg(*k).arg(v);
    }
    call("worker_beat", keys, &mut inv, conn).await
}

fn opt_u64(script: &'static str, v: &Value) -> Result<Option<u64>> {
    match v {
        Value::Nil | Value::Boolean(false) => Ok(None),
        other => as_u64(script, other).map(Some),
    }
}
