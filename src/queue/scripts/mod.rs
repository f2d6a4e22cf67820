//! Typed wrappers around the Lua scripts in this folder, one per script.
//!
//! Each script is `lib.lua` (the shared prelude naming the queue's keys) followed by the
//! script's own file. Scripts run through `redis::Script` (EVALSHA, reloaded on NOSCRIPT)
//! and are built once per process. Nothing else runs Redis commands on the hot path.
//!
//! The wrappers are grouped by who calls them: [`enqueue`](enqueue()) (the producer), the
//! lease calls a consumer makes (`lease.rs`: fetch, reclaim, extend, release,
//! start_suspect; `settle.rs`: outcomes and start marks) and the operator calls
//! (`admin.rs`, `inspect.rs`). This file holds what they share:
//! the script list, the call that records each round trip, and reply decoding.

use crate::error::{Error, Result};
use crate::queue::keys::QueueKeys;
use redis::Value;
use redis::aio::ConnectionLike;
use std::sync::LazyLock;

mod admin;
mod cron;
mod enqueue;
mod fetch;
mod inline_find;
mod inspect;
mod lease;
mod samples;
mod settle;
pub(crate) use admin::notify;
pub use admin::{DeadJob, Notice, Stats, dlq_list, dlq_purge, dlq_requeue, notice, partitions, pause, stats};
pub use cron::{cron_fire, cron_set};
pub use enqueue::{EnqueueArg, INLINE_MAX_BYTES, enqueue, plain_pipeline, register};
pub(crate) use enqueue::{pushes_pipeline, send_plain, takes_plain_path};
pub use fetch::{
    Fetched, FetchedBatch, FetchedJob, GlobalLimits, PARKED_AT_MS, fetch, fetch_batch, fetch_keyed,
};
pub use inline_find::{InlinePage, inline_find};
pub use inspect::{
    BulkStep, Page, PageEntry, Shown, dlq_bulk, job_run_now, job_show, jobs_delete, jobs_page, worker_beat,
};
pub use lease::{Reclaimed, extend, key_shares, reclaim, reclaim_recorded, release, split, start_suspect};
pub use samples::samples_record;
pub use settle::{
    BatchAck, CallRecord, RESULT_MAX_BYTES, RunHistory, Settle, Settled, StartMarks, ack_inline,
    ack_inline_call, cut_text, dead_letter_raw, settle, settle_batches, settle_call, settle_marked,
    settle_recorded,
};

/// The shared prelude every script opens with.
pub const LIB: &str = include_str!("lib.lua");

/// One script's own source (without [`LIB`]), as the Functions library registers it
/// (`queue::functions`).
#[derive(Debug)]
pub struct Source {
    /// The file name without `.lua`; the library's function is `weir_<name>`.
    pub name: &'static str,
    /// The script's own file.
    pub body: &'static str,
    /// The script writes nothing (marked `(read_only)` in the list): its function gets
    /// the `no-writes` flag, so it may run on replicas and with `FCALL_RO`.
    pub read_only: bool,
    /// The script runs while Redis is over `maxmemory` (marked `(allow_oom)`): the calls
    /// a consumer's drain makes, which free memory overall, so a full Redis can be
    /// drained. Its script opens with [`ALLOW_OOM`]; its function gets the `allow-oom`
    /// flag.
    pub allow_oom: bool,
}

/// The shebang of the scripts that may run over `maxmemory`. It must be the first line of
/// the script's text, so it comes before [`LIB`]. A script with a shebang may touch only
/// keys of its declared keys' slot (ours are all under the queue's hash tag) and is not
/// taken as read-only by Redis.
pub const ALLOW_OOM: &str = "#!lua flags=allow-oom\n";

/// Declares every script once: a `static` per script (`lib.lua` + `<file>.lua`, built on
/// first use), [`SCRIPT_NAMES`], the file names in the same order, and [`SOURCES`], the
/// same sources for the Functions library, so the scripts and the library cannot differ.
macro_rules! scripts {
    (@read_only read_only) => { true };
    (@read_only $other:ident) => { false };
    (@read_only) => { false };
    (@allow_oom allow_oom) => { true };
    (@allow_oom $other:ident) => { false };
    (@allow_oom) => { false };
    ($($name:ident = $file:literal $(($flag:ident))?,)+) => {
        $(
            static $name: LazyLock<redis::Script> = LazyLock::new(|| {
                let shebang = if scripts!(@allow_oom $($flag)?) { ALLOW_OOM } else { "" };
                redis::Script::new(&[shebang, LIB, include_str!(concat!($file, ".lua"))].concat())
            });
        )+

        /// Every script's name, as used in metric labels.
        pub const SCRIPT_NAMES: &[&str] = &[$($file),+];

        /// Every script's own source, in the same order.
        pub const SOURCES: &[Source] = &[$(Source {
            name: $file,
            body: include_str!(concat!($file, ".lua")),
            read_only: scripts!(@read_only $($flag)?),
            allow_oom: scripts!(@allow_oom $($flag)?),
        }),+];
    };
}

scripts! {
    ENQUEUE = "enqueue",
    FETCH = "fetch" (allow_oom),
    SETTLE = "settle" (allow_oom),
    RECLAIM = "reclaim" (allow_oom),
    EXTEND = "extend" (allow_oom),
    RELEASE = "release" (allow_oom),
    START_SUSPECT = "start_suspect" (allow_oom),
    SPLIT = "split" (allow_oom),
    DLQ_LIST = "dlq_list" (read_only),
    DLQ_REQUEUE = "dlq_requeue",
    DLQ_PURGE = "dlq_purge",
    PAUSE = "pause",
    STATS = "stats" (read_only),
    JOBS_PAGE = "jobs_page",
    JOB_SHOW = "job_show",
    JOBS_DELETE = "jobs_delete",
    JOB_RUN_NOW = "job_run_now",
    INLINE_FIND = "inline_find" (read_only),
    DLQ_BULK = "dlq_bulk",
    WORKER_BEAT = "worker_beat",
    CRON_SET = "cron_set",
    CRON_FIRE = "cron_fire",
    KEY_SHARES = "key_shares",
    PARTITIONS = "partitions",
    SAMPLES = "samples",
    NOTICE = "notice",
}

fn invocation<'a>(script: &'a redis::Script, keys: &QueueKeys) -> redis::ScriptInvocation<'a> {
    let mut inv = script.prepare_invoke();
    for k in keys.all() {
        inv.key(k);
    }
    inv
}

/// Adds the job records (history, done, results) as the last keys of `inv`, where the scripts that
/// write, read or delete jobs look for them (lib.lua's records).
fn with_records<'a, 'b>(
    inv: &'b mut redis::ScriptInvocation<'a>,
    keys: &QueueKeys,
) -> &'b mut redis::ScriptInvocation<'a> {
    inv.key(keys.history()).key(keys.done()).key(keys.results())
}

/// Runs one script call, recording its round trip and any error.
async fn call<T: redis::FromRedisValue, C: ConnectionLike>(
    name: &'static str,
    keys: &QueueKeys,
    inv: &mut redis::ScriptInvocation<'_>,
    conn: &mut C,
) -> Result<T> {
    let started = std::time::Instant::now();
    let r = inv.invoke_async(conn).await.map_err(Error::from);
    crate::metrics::record_script(keys.name(), name, started, &r);
    r
}

fn opt_string(v: Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(&b).into_owned()),
        _ => None,
    }
}

fn reply_err(script: &'static str, detail: impl Into<String>) -> Error {
    Error::Reply {
        script,
        detail: detail.into(),
    }
}

fn as_u64(script: &'static str, v: &Value) -> Result<u64> {
    match v {
        Value::Int(i) => Ok((*i).max(0) as u64),
        Value::BulkString(b) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| reply_err(script, "expected an integer")),
        other => Err(reply_err(script, format!("expected an integer, got {other:?}"))),
    }
}

fn into_string(script: &'static str, v: Value) -> Result<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b).map_err(|_| reply_err(script, "non-UTF-8 id")),
        Value::SimpleString(s) => Ok(s),
        other => Err(reply_err(script, format!("expected a string, got {other:?}"))),
    }
}

fn into_strings(script: &'static str, v: Vec<Value>) -> Result<Vec<String>> {
    v.into_iter().map(|x| into_string(script, x)).collect()
}
