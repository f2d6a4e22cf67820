//! A fetch that leased its jobs one by one: its ids paired with their envelopes
//! ([`pair`]), and the envelopes the script left out for their size read after
//! ([`read_deferred`]).

use super::{Fetched, FetchedJob};
use crate::error::Result;
use crate::queue::keys::QueueKeys;
use crate::queue::scripts::reply_err;
use redis::aio::ConnectionLike;

/// Reads the envelopes `fetch.lua` left out for their size (over its `DEFER_BYTES`, the
/// same as [`INLINE_MAX_BYTES`](crate::queue::scripts::INLINE_MAX_BYTES)): those of the
/// jobs at `deferred` in `out.jobs`, with one HMGET: such bytes cost Redis a twentieth
/// through a plain command of what they cost through the script. A job deleted since the fetch (deleting a running
/// job ends its lease too) is dropped, as `fetch.lua` drops an id without an envelope. If
/// the read fails, the jobs leased come back when their leases expire, as those of a fetch
/// whose reply was lost.
pub(super) async fn read_deferred<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    out: &mut Fetched,
    deferred: &[usize],
) -> Result<()> {
    if deferred.is_empty() {
        return Ok(());
    }
    let mut hmget = redis::cmd("HMGET");
    hmget.arg(keys.jobs());
    for &i in deferred {
        hmget.arg(&out.jobs[i].name);
    }
    let got: Vec<Option<Vec<u8>>> = hmget.query_async(conn).await?;
    if got.len() != deferred.len() {
        return Err(reply_err(
            "fetch",
            format!("{} envelopes for {} ids", got.len(), deferred.len()),
        ));
    }
    fill_deferred(out, deferred, got);
    Ok(())
}

/// Puts the envelopes read for the jobs at `deferred` in place; drops the jobs with none.
pub(super) fn fill_deferred(out: &mut Fetched, deferred: &[usize], got: Vec<Option<Vec<u8>>>) {
    let mut gone = Vec::new();
    for (&i, env) in deferred.iter().zip(got) {
        match env {
            Some(env) => out.jobs[i].stored = Some(env),
            None => gone.push(i),
        }
    }
    for &i in gone.iter().rev() {
        out.jobs.remove(i);
        if i < out.suspects {
            out.suspects -= 1;
        }
    }
}

/// Pairs the fetched envelopes with their lease items (`ids`: one line per envelope, in
/// the same order: the job's id, or empty for an inline job, whose envelope is its item)
/// into `out`; the first `suspects` jobs are suspects. `fetch.lua` dead-letters an id with
/// a newline instead of leasing it, so the lines and the envelopes always match in number:
/// a reply where they do not is refused rather than paired by guess (its jobs come back
/// when their leases expire, uncharged). An envelope `None` was left for [`read_deferred`]:
/// returns where those jobs are in `out.jobs`.
pub(super) fn pair(
    out: &mut Fetched,
    ids: &[u8],
    envs: Vec<Option<Vec<u8>>>,
    suspects: usize,
) -> Result<Vec<usize>> {
    let lines = ids.split(|&b| b == b'\n').count();
    if lines != envs.len() {
        return Err(reply_err(
            "fetch",
            format!("{lines} id lines for {} envelopes", envs.len()),
        ));
    }
    let mut deferred = Vec::new();
    for (i, (id, env)) in ids.split(|&b| b == b'\n').zip(envs).enumerate() {
        // An empty line: an inline job, named by its envelope.
        if id.is_empty() {
            let Some(env) = env else {
                return Err(reply_err("fetch", "an inline job without its envelope"));
            };
            match String::from_utf8(env) {
                Ok(env) => out.jobs.push(FetchedJob::inline(env)),
                Err(e) => out.bad_ids.push(e.into_bytes()),
            }
        } else {
            match std::str::from_utf8(id) {
                Ok(id) => {
                    if env.is_none() {
                        deferred.push(out.jobs.len());
                    }
                    out.jobs
                        .push(FetchedJob::stored(id.to_owned(), env.unwrap_or_default()));
                }
                Err(_) => out.bad_ids.push(id.to_vec()),
            }
        }
        // A suspect whose id is not UTF-8 is not among `jobs`.
        if i < suspects {
            out.suspects = out.jobs.len();
        }
    }
    Ok(deferred)
}
