//! The producer's script: [`enqueue`], and its plain-command twin for the common bulk load.

use super::{ENQUEUE, call, into_strings, invocation};
use crate::error::{Error, Result};
use crate::queue::envelope::Priority;
use crate::queue::keys::{QUEUES, QueueKeys};
use crate::redis::conn::Conn;
use redis::Value;
use redis::aio::ConnectionLike;

/// One job for [`enqueue`]: an encoded envelope and where it goes.
#[derive(Debug, Clone)]
pub struct EnqueueArg {
    /// The job id.
    pub id: String,
    /// Its priority.
    pub priority: Priority,
    /// Delay before it is ready, ms (0 = ready now).
    pub delay_ms: u64,
    /// Absolute due time, epoch ms (0 = none; wins over `delay_ms`).
    pub run_at_ms: u64,
    /// The encoded envelope.
    pub envelope: Vec<u8>,
    /// The caller chose the id: refuse it if a job with that id exists. Ids weir
    /// generates are unique by construction and skip the check (stored in bulk).
    pub unique: bool,
    /// The window of the job's unique key, ms (0 = none). With a window, the envelope
    /// names the key (its `unique_key` field), and the job is refused while another job
    /// holds that key.
    pub unique_for_ms: u64,
}

/// Enqueues a batch in one call; returns the ids refused as duplicates (the id exists, or
/// the job's unique key is held).
///
/// Consecutive jobs that share their options travel as one section (see `enqueue.lua`),
/// so a bulk load sends two values per job. On a single Redis the same call adds the queue
/// to the queue registry ([`QUEUES`]); on a Redis Cluster the registry lives in a slot of
/// its own, so this call leaves it alone and [`register`] adds the name (the
/// [`crate::Producer`] does once).
pub async fn enqueue(conn: &mut Conn, keys: &QueueKeys, jobs: &[EnqueueArg]) -> Result<Vec<String>> {
    let cluster = conn.is_cluster();
    if takes_plain_path(jobs) {
        enqueue_plain(conn, keys, jobs, cluster).await?;
        return Ok(Vec::new());
    }
    let mut inv = invocation(&ENQUEUE, keys);
    if !cluster {
        inv.key(QUEUES);
    }
    let options = |j: &EnqueueArg| (j.priority, j.delay_ms, j.run_at_ms, j.unique, j.unique_for_ms);
    let same = |a: &EnqueueArg, b: &EnqueueArg| options(a) == options(b);
    for section in jobs.chunk_by(same) {
        let j = &section[0];
        inv.arg(j.priority as u8)
            .arg(j.delay_ms)
            .arg(j.run_at_ms)
            .arg(u8::from(j.unique))
            .arg(j.unique_for_ms)
            .arg(section.len());
        for j in section {
            inv.arg(&j.id).arg(&j.envelope);
        }
    }
    let dups: Vec<Value> = call("enqueue", keys, &mut inv, conn).await?;
    into_strings("enqueue", dups)
}

/// The largest envelope [`enqueue`] writes inline (its envelope the list item). An inline
/// job's envelope is also its lease's name: the fetch copies it into the lease set and the
/// ack sends it back whole for Redis to hash and compare, so for a large job the bytes
/// cross the wire three times and the lease set holds a copy while it runs. Stored by id
/// (the envelope in the jobs hash, the id in the list and the lease set), only the fetch
/// carries it. Below this size the inline path's fewer commands win.
pub const INLINE_MAX_BYTES: usize = 16 * 1024;

/// Whether [`enqueue`] stores `jobs` with plain commands ([`plain_pipeline`]): a batch of
/// generated ids, all ready now, without unique windows, none of them over
/// [`INLINE_MAX_BYTES`] (a batch that holds one goes through the script, whole).
pub(crate) fn takes_plain_path(jobs: &[EnqueueArg]) -> bool {
    !jobs.is_empty()
        && jobs.iter().all(|j| {
            !j.unique
                && j.delay_ms == 0
                && j.run_at_ms == 0
                && j.unique_for_ms == 0
                && j.envelope.len() <= INLINE_MAX_BYTES
        })
}

/// The bulk path of [`enqueue`] for jobs with generated ids that are ready now (the
/// common bulk load), as one MULTI/EXEC of plain commands: the jobs go to their ready
/// lists inline (`lib.lua`'s items: each envelope is its own list item, with no entry in
/// the jobs hash), so a job that runs once and succeeds costs Redis a push, a pop, a
/// lease add and a lease remove. Nothing needs checking or Redis's clock, and plain
/// commands skip the Lua argument conversion.
///
/// It leaves the state `enqueue.lua`'s bulk section (`unique` 0, no delay) would, but
/// for where the envelopes are; tests/scripts/enqueue.rs runs both (`routed()` and
/// `routed_inline()`).
async fn enqueue_plain(conn: &mut Conn, keys: &QueueKeys, jobs: &[EnqueueArg], cluster: bool) -> Result<()> {
    send_plain(conn, keys, &plain_pipeline(keys, jobs, cluster)).await
}

/// Sends a transaction built by [`plain_pipeline`] or [`pushes_pipeline`], timed as the
/// enqueue script's calls are.
pub(crate) async fn send_plain(conn: &mut Conn, keys: &QueueKeys, pipeline: &redis::Pipeline) -> Result<()> {
    let started = std::time::Instant::now();
    let r = pipeline.query_async::<()>(conn).await.map_err(Error::from);
    crate::metrics::record_script(keys.name(), "enqueue", started, &r);
    r
}

/// The transaction [`enqueue`] sends for jobs that take its bulk path (generated ids,
/// ready now), built but not sent: `cluster` picks sharded pub/sub and leaves the queue
/// registry to [`register`]. Public for benches/producer.rs, which measures the client's
/// work per job without a Redis.
pub fn plain_pipeline(keys: &QueueKeys, jobs: &[EnqueueArg], cluster: bool) -> redis::Pipeline {
    let pushes = jobs.chunk_by(|a, b| a.priority == b.priority).map(|section| {
        // Sized up front: the command's buffer is written once, not regrown per job.
        let bytes = section.iter().map(|j| j.envelope.len()).sum::<usize>();
        let ready = keys.ready(section[0].priority);
        let mut push = redis::Cmd::with_capacity(section.len() + 2, bytes + ready.len() + 5);
        push.arg("RPUSH").arg(ready);
        for j in section {
            push.arg(&j.envelope);
        }
        push
    });
    pushes_pipeline(keys, pushes, jobs.len(), cluster)
}

/// The bulk path's transaction around RPUSH commands of envelopes to `keys`' ready lists
/// (`jobs` items in all): the pushes, then the enqueued counter, the wake-up and the
/// queue registry, as [`plain_pipeline`] says.
pub(crate) fn pushes_pipeline(
    keys: &QueueKeys,
    pushes: impl IntoIterator<Item = redis::Cmd>,
    jobs: usize,
    cluster: bool,
) -> redis::Pipeline {
    let mut p = redis::pipe();
    p.atomic();
    for push in pushes {
        p.add_command(push);
    }
    p.cmd("HINCRBY").arg(keys.counters()).arg("enqueued").arg(jobs);
    // The script's wake(), without its question: consumers listen on sharded pub/sub on a
    // cluster and on plain pub/sub elsewhere.
    p.cmd(if cluster { "SPUBLISH" } else { "PUBLISH" })
        .arg(keys.wake_channel())
        .arg("enqueue");
    if !cluster {
        p.cmd("SADD").arg(QUEUES).arg(keys.base_name());
    }
    p
}

/// Adds `keys`' queue to the queue registry ([`QUEUES`]) with a call of its own: what
/// [`enqueue`] does within its call on a single Redis, for a Redis Cluster.
pub async fn register<C: ConnectionLike>(conn: &mut C, keys: &QueueKeys) -> Result<()> {
    redis::cmd("SADD")
        .arg(QUEUES)
        .arg(keys.base_name())
        .query_async::<()>(conn)
        .await
        .map_err(Error::from)
}
