//! A bulk chunk's call to one lane, retried so that its jobs are stored once, and stopped
//! at once when Redis is out of memory.
//!
//! A call whose reply is lost (a dropped connection, a timeout) may have landed. A retry
//! must not store its jobs again:
//!
//! - A chunk of plain commands (the bulk path: ids weir generated, or a [`super::Bulk`]
//!   load's, ready now) carries a token: its transaction also writes
//!   [`QueueKeys::chunk`] (`SET .. 1 PX` [`CHUNK_TOKEN_MS`]), and every retry first asks
//!   whether that key exists. If it does, the chunk landed and is not sent again. The
//!   cost is one SET per chunk of up to 1,000 jobs (well under 1 µs of Redis CPU, against
//!   the ~150 µs the chunk's pushes cost), and a key (~120 bytes of Redis memory with its
//!   expiry) for a minute: at the fastest enqueue measured (1.7M jobs/s) about 100k
//!   keys, 12 MB, while the same minute's jobs take ~15 GB.
//! - A chunk that runs the enqueue script (delays, unique windows, ids of the caller's)
//!   is retried with every id checked (`unique` set): an id the lost call stored comes
//!   back as a duplicate; a generated one counts as stored (it was, by that call), an id
//!   of the caller's stays a duplicate, as the caller asked.
//!
//! The retries of a chunk stop [`RETRY_SPAN`] after its first call (or after
//! [`super::CHUNK_TRIES`] calls), well within the token's life.

use super::Producer;
use crate::error::{Error, Result};
use crate::queue::keys::QueueKeys;
use crate::queue::scripts::{self, EnqueueArg};
use crate::redis::retry::{Backoff, GiveUp, retrying_unless};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How long a chunk's token lives, ms: twice [`RETRY_SPAN`].
pub const CHUNK_TOKEN_MS: u64 = 60_000;

/// How long a chunk is retried after its first call.
pub const RETRY_SPAN: Duration = Duration::from_secs(30);

/// When a chunk's retries stop: after [`super::CHUNK_TRIES`] calls or [`RETRY_SPAN`].
fn give_up() -> GiveUp {
    GiveUp {
        deadline: Some(tokio::time::Instant::now() + RETRY_SPAN),
        tries: Some(super::CHUNK_TRIES),
    }
}

/// Errors no retry cures: Redis out of memory refuses every write until memory is freed.
fn is_final(e: &Error) -> bool {
    matches!(e, Error::OutOfMemory(_))
}

/// A fresh chunk token: 128 random bits in hex.
fn new_token() -> String {
    format!("{:032x}", rand::random::<u128>())
}

impl Producer {
    /// Sends a chunk's transaction (plain commands to `keys`' lane, built without a token)
    /// until it lands once, as the module says.
    pub(super) async fn send_plain_once(
        &self,
        keys: &QueueKeys,
        mut pipeline: redis::Pipeline,
    ) -> Result<()> {
        let mark = keys.chunk(&new_token());
        pipeline
            .cmd("SET")
            .arg(&mark)
            .arg(1)
            .arg("PX")
            .arg(CHUNK_TOKEN_MS);
        let sent = AtomicBool::new(false);
        let (pipeline, mark, sent) = (&pipeline, mark.as_str(), &sent);
        let call = || async move {
            let mut conn = self.conn.clone();
            if sent.swap(true, Ordering::Relaxed) && landed(&mut conn, mark).await? {
                return Ok(());
            }
            scripts::send_plain(&mut conn, keys, pipeline)
                .await
                .map_err(Error::classify_memory)
        };
        retrying_unless("enqueue", Backoff::ENQUEUE, give_up(), is_final, call).await
    }

    /// One chunk's jobs to one lane, retried until they are stored once; returns (stored,
    /// duplicate ids).
    pub(super) async fn enqueue_lane_once(
        &self,
        keys: &QueueKeys,
        args: &[EnqueueArg],
    ) -> Result<(u64, Vec<String>)> {
        if scripts::takes_plain_path(args) {
            let pipeline = scripts::plain_pipeline(keys, args, self.conn.is_cluster());
            self.send_plain_once(keys, pipeline).await?;
            self.register_once().await;
            crate::metrics::record_enqueued(self.keys.name(), args.len() as u64);
            return Ok((args.len() as u64, Vec::new()));
        }
        let checked: Vec<EnqueueArg> = args
            .iter()
            .map(|a| EnqueueArg {
                unique: true,
                ..a.clone()
            })
            .collect();
        let sent = AtomicBool::new(false);
        let (checked, sent) = (&checked, &sent);
        let call = || async move {
            if !sent.swap(true, Ordering::Relaxed) {
                return self.enqueue_lane(keys, args).await;
            }
            let (_, dups) = self.enqueue_lane(keys, checked).await?;
            // A generated id already there was stored by the call whose reply was lost.
            let generated: HashSet<&str> = args.iter().filter(|a| !a.unique).map(|a| a.id.as_str()).collect();
            let dups: Vec<String> = dups
                .into_iter()
                .filter(|id| !generated.contains(id.as_str()))
                .collect();
            Ok(((args.len() - dups.len()) as u64, dups))
        };
        retrying_unless("enqueue", Backoff::ENQUEUE, give_up(), is_final, call).await
    }
}

/// Whether a chunk's token `mark` is there: its transaction ran.
async fn landed(conn: &mut crate::redis::conn::Conn, mark: &str) -> Result<bool> {
    let n: u32 = redis::cmd("EXISTS").arg(mark).query_async(conn).await?;
    Ok(n == 1)
}
