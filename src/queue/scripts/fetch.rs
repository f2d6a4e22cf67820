//! The consumer's fetch: [`fetch`] leases ready jobs, and [`Fetched`] is what it brings
//! (each job a [`FetchedJob`], named as its lease is in Redis), with the queue's global
//! limits as the call met them. A fetch that leased a batch is read in `fetch/batch.rs`, one
//! that leased jobs one by one in `fetch/jobs.rs`;
//! the lease upkeep calls are `lease.rs`.

mod batch;
mod jobs;

use super::FETCH;
use super::{as_u64, call, invocation, reply_err};
use crate::error::Result;
use crate::queue::envelope::{self, DecodeError, Job};
use crate::queue::keys::QueueKeys;
#[cfg(test)]
use jobs::fill_deferred;
use jobs::{pair, read_deferred};
use redis::Value;
use redis::aio::ConnectionLike;

/// Where parked jobs' scores start in the delayed sets (`fetch.lua`'s `PARKED_AT`, the same
/// number: 2^50 ms, in the year 37,648): a job held back by its key's concurrency waits
/// there at `PARKED_AT_MS` + the time it was parked (ms), never due, until a fetch brings
/// it back when a slot of its key frees.
pub const PARKED_AT_MS: u64 = 1 << 50;

/// What [`fetch`] returns.
#[derive(Debug, Default)]
pub struct Fetched {
    /// Lease deadline (ms, Redis clock) of every job returned: the lease token to settle,
    /// extend and release them with, for the lease's whole life.
    pub deadline_ms: u64,
    /// With no jobs, or with [`Fetched::emptied`]: ms until the next delayed job is due
    /// (0 = none delayed), or, when the global rate granted none
    /// ([`GlobalLimits::cut_by_rate`]), until it grants one.
    pub next_due_ms: u64,
    /// The queue is paused.
    pub paused: bool,
    /// This call took the last ready job: the ready lists and suspects were empty after
    /// it. Every write that readies a job publishes on the wake channel, so the caller
    /// can wait for that (or [`Fetched::next_due_ms`]) instead of asking again at once.
    pub emptied: bool,
    /// The queue's global limits, as this call met them.
    pub global: GlobalLimits,
    /// How many of `jobs`, at the front, are suspects (0 or 1): jobs that were running
    /// when their consumer died. Run each alone, marked with [`start_suspect`](super::start_suspect).
    pub suspects: usize,
    /// The jobs leased, in the order fetched.
    pub jobs: Vec<FetchedJob>,
    /// Leased ids that are not UTF-8 (pushed by hand: weir never writes one). They cannot
    /// be jobs; [`dead_letter_raw`](super::dead_letter_raw) buries them.
    pub bad_ids: Vec<Vec<u8>>,
    /// The jobs were leased as one batch ([`fetch_batch`]; docs/batch-leases.md): acked
    /// whole with a [`BatchAck`](super::BatchAck), or [`split`](super::split) first for
    /// anything else.
    pub batch: Option<FetchedBatch>,
}

/// A batch lease a fetch took.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FetchedBatch {
    /// Its name, as the fetch was given it.
    pub name: String,
    /// How many items it holds: its jobs, and the ids among them whose envelope was gone
    /// when read (dropped from [`Fetched::jobs`], acked with the batch).
    pub len: usize,
    /// The ids among its items, for its [`BatchAck`](super::BatchAck).
    pub ids: Vec<String>,
}

/// One job a fetch leased: the name its lease has in Redis, and its envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedJob {
    /// The job's id, or, for an inline job (one a bulk load of generated ids stored in
    /// the ready list itself: `lib.lua`'s items), its envelope: the name its lease has in
    /// Redis, which settle, extend and release take. [`FetchedJob::decode`] reads the id
    /// from the envelope then.
    pub name: String,
    /// The envelope, unless the name is the envelope (an inline job).
    stored: Option<Vec<u8>>,
}

impl FetchedJob {
    /// A job stored by id: its id and envelope.
    pub fn stored(id: String, envelope: Vec<u8>) -> Self {
        Self {
            name: id,
            stored: Some(envelope),
        }
    }

    /// An inline job: its envelope is its name.
    pub fn inline(envelope: String) -> Self {
        Self {
            name: envelope,
            stored: None,
        }
    }

    /// The job's envelope.
    pub fn envelope(&self) -> &[u8] {
        self.stored.as_deref().unwrap_or(self.name.as_bytes())
    }

    /// Whether the job is inline (its name is its envelope).
    pub fn is_inline(&self) -> bool {
        self.stored.is_none()
    }

    /// Decodes the envelope (see [`envelope::decode`](crate::queue::envelope::decode)),
    /// refusing it over `limit` bytes.
    pub fn decode(&self, limit: usize) -> std::result::Result<Job, DecodeError> {
        match &self.stored {
            Some(env) => envelope::decode(&self.name, env, limit),
            None => envelope::decode_inline(&self.name, limit),
        }
    }
}

/// The global limits of a queue (`weir limits set --global-rate/--global-concurrency`)
/// as one fetch met them: which are set, and which granted fewer jobs than were asked for.
/// The bits of the `state` that `fetch.lua` returns (its header says what each means; its
/// `STATE` table names the same values, and a test checks that the two agree).
pub(crate) mod state {
    /// The queue is paused: nothing was popped (the whole state, no other bit).
    pub(crate) const PAUSED: u64 = 1;
    /// A global rate is set.
    pub(crate) const GLOBAL_RATE: u64 = 2;
    /// A global concurrency is set.
    pub(crate) const GLOBAL_CONCURRENCY: u64 = 4;
    /// The global rate cut this call short.
    pub(crate) const CUT_BY_RATE: u64 = 8;
    /// The global concurrency cut this call short.
    pub(crate) const CUT_BY_CONCURRENCY: u64 = 16;
    /// Per-key limits held some popped jobs back.
    pub(crate) const HELD_BY_KEY: u64 = 32;
    /// Jobs are parked waiting for a slot of their key.
    pub(crate) const PARKED: u64 = 64;
    /// A global or per-key concurrency is set.
    pub(crate) const CONCURRENCY_SET: u64 = 128;
    /// This call took the last ready job.
    pub(crate) const EMPTIED: u64 = 256;
    /// Completed jobs are kept: every ack goes through the settle script.
    pub(crate) const KEEP_COMPLETED: u64 = 512;
    /// The jobs were leased as one batch (`fetch.lua`'s ARGV[4]).
    pub(crate) const BATCH: u64 = 1024;

    /// Every bit by the name `fetch.lua`'s `STATE` gives it (for the test that they agree).
    #[cfg(test)]
    pub(crate) const NAMED: [(&str, u64); 11] = [
        ("paused", PAUSED),
        ("global_rate", GLOBAL_RATE),
        ("global_concurrency", GLOBAL_CONCURRENCY),
        ("cut_by_rate", CUT_BY_RATE),
        ("cut_by_concurrency", CUT_BY_CONCURRENCY),
        ("held_by_key", HELD_BY_KEY),
        ("parked", PARKED),
        ("concurrency_set", CONCURRENCY_SET),
        ("emptied", EMPTIED),
        ("keep_completed", KEEP_COMPLETED),
        ("batch", BATCH),
    ];
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct GlobalLimits {
    /// A global rate is set.
    pub rate: bool,
    /// A global concurrency is set.
    pub concurrency: bool,
    /// The global rate granted fewer jobs than asked for.
    pub cut_by_rate: bool,
    /// The global concurrency granted fewer jobs than asked for.
    pub cut_by_concurrency: bool,
    /// Per-key limits held back some of the jobs popped (they wait, delayed): the queue
    /// may still hold ready jobs, even when none came back.
    pub held_by_key: bool,
    /// Jobs are parked for a slot of their key: they come back as the key's jobs finish
    /// (not when a delay falls due), so an idle fetcher should look again soon.
    pub parked: bool,
    /// A global or per-key concurrency is set: a settle that ends leases must wake the
    /// consumers waiting for a slot, which [`ack_inline`](super::ack_inline) does not.
    pub concurrency_set: bool,
    /// Completed jobs are kept (`keep_completed_ms` or `_count` is set): acks must go
    /// through [`settle`](fn@super::settle), which keeps them; [`ack_inline`](super::ack_inline)
    /// deletes.
    pub keep_completed: bool,
}

impl GlobalLimits {
    /// From the state bits `fetch.lua` returns (see [`state`]).
    fn from_bits(bits: u64) -> Self {
        Self {
            rate: bits & state::GLOBAL_RATE != 0,
            concurrency: bits & state::GLOBAL_CONCURRENCY != 0,
            cut_by_rate: bits & state::CUT_BY_RATE != 0,
            cut_by_concurrency: bits & state::CUT_BY_CONCURRENCY != 0,
            held_by_key: bits & state::HELD_BY_KEY != 0,
            parked: bits & state::PARKED != 0,
            concurrency_set: bits & state::CONCURRENCY_SET != 0,
            keep_completed: bits & state::KEEP_COMPLETED != 0,
        }
    }

    /// Either limit is set.
    pub fn any(&self) -> bool {
        self.rate || self.concurrency
    }

    /// Either limit granted fewer jobs than asked for.
    pub fn cut(&self) -> bool {
        self.cut_by_rate || self.cut_by_concurrency
    }
}

/// Promotes due delayed jobs, then pops and leases up to `n` ready jobs (fewer when the
/// queue's global limits grant fewer).
pub async fn fetch<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    n: usize,
    visibility_ms: u64,
) -> Result<Fetched> {
    fetch_keyed(conn, keys, n, visibility_ms, false).await
}

/// [`fetch`] for a consumer that adapts a limit per job key (`adaptive_per_key`): each
/// key's live shares ([`key_shares`](super::key_shares)) are one more concurrency limit of the key.
pub async fn fetch_keyed<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    n: usize,
    visibility_ms: u64,
    adaptive_per_key: bool,
) -> Result<Fetched> {
    fetch_batch(conn, keys, n, visibility_ms, adaptive_per_key, None).await
}

/// [`fetch_keyed`], leasing the jobs as one batch named `batch` where the queue allows it
/// (`fetch.lua`'s `ARGV[4]`: no per-key limit, global concurrency, kept completed jobs or
/// suspect in the way): [`Fetched::batch`] says whether it did. The name must be new (the
/// consumer's tag and a sequence number); one in use is leased per job instead.
pub async fn fetch_batch<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    n: usize,
    visibility_ms: u64,
    adaptive_per_key: bool,
    batch: Option<&str>,
) -> Result<Fetched> {
    let mut inv = invocation(&FETCH, keys);
    inv.key(keys.global_rate())
        .key(keys.key_limits_prefix())
        .key(keys.history())
        .key(keys.done())
        .key(keys.results())
        .arg(n)
        .arg(visibility_ms)
        .arg(if adaptive_per_key { "1" } else { "0" })
        .arg(batch.unwrap_or(""));
    let (reply, items): (Vec<Value>, _) = match batch {
        Some(name) => match batch::with_batch(conn, keys, &inv, name).await? {
            Some((reply, items)) => (reply, Some(items)),
            None => (call("fetch", keys, &mut inv, conn).await?, None),
        },
        None => (call("fetch", keys, &mut inv, conn).await?, None),
    };
    if let (Some(name), Some(bits)) = (batch, reply.get(2))
        && as_u64("fetch", bits)? & state::BATCH != 0
    {
        return batch::read_batch(conn, keys, name, reply, items).await;
    }
    if reply.len() < 4 || reply.len() == 5 {
        return Err(reply_err("fetch", format!("{} values", reply.len())));
    }
    let mut it = reply.into_iter();
    let mut head = || it.next().unwrap_or(Value::Nil);
    let (d, nd, p, s, ids) = (head(), head(), head(), head(), head());
    let bits = as_u64("fetch", &p)?;
    let mut out = Fetched {
        deadline_ms: as_u64("fetch", &d)?,
        next_due_ms: as_u64("fetch", &nd)?,
        paused: bits == state::PAUSED,
        emptied: bits & state::EMPTIED != 0,
        global: GlobalLimits::from_bits(bits),
        suspects: 0,
        jobs: Vec::with_capacity(it.len()),
        bad_ids: Vec::new(),
        batch: None,
    };
    let suspects = as_u64("fetch", &s)? as usize;
    // Nil: an envelope the script left for `read_deferred`.
    let envs = it
        .map(|env| match env {
            Value::BulkString(b) => Ok(Some(b)),
            Value::Nil => Ok(None),
            other => Err(reply_err("fetch", format!("envelope is {other:?}"))),
        })
        .collect::<Result<Vec<_>>>()?;
    let ids = match ids {
        Value::Nil => return Ok(out),
        Value::BulkString(b) => b,
        other => return Err(reply_err("fetch", format!("ids are {other:?}"))),
    };
    let deferred = pair(&mut out, &ids, envs, suspects)?;
    read_deferred(conn, keys, &mut out, &deferred).await?;
    Ok(out)
}

#[cfg(test)]
mod tests;
