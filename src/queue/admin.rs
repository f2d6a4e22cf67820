//! Operator calls: on one queue ([`Queue`]: stats, jobs by state, one job, deletes,
//! run-now, the dead-letter queue, pause and resume, its workers) and on the set of queues
//! ([`Queues`]: the registry and the overview).
//!
//! This is the layer the `weir` command line and the web UI share: each call returns one
//! of the serde types in [`types`], whose JSON is what `--json` prints and the UI's
//! `/api/` returns (the format is documented in `docs/cli-json.md`).

mod jobs;
mod registry;
pub mod types;
mod workers;

pub use jobs::{KIND_WINDOW, MAX_PAGE};
pub use registry::Queues;
pub use workers::MAX_WORKERS;
pub(crate) use workers::WorkerRecord;

use crate::error::Result;
use crate::queue::keys::QueueKeys;
use crate::queue::scripts::{self, DeadJob, Stats};
use crate::redis::conn::Conn;

/// Dead-lettered jobs deleted per purge call.
const PURGE_CHUNK: usize = 1000;

/// Admin handle on one queue.
#[derive(Clone)]
pub struct Queue {
    conn: Conn,
    keys: QueueKeys,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("queue", &self.keys.name())
            .finish_non_exhaustive()
    }
}

impl Queue {
    /// A handle on `queue` over `conn`.
    pub fn new(conn: Conn, queue: &str) -> Result<Self> {
        Ok(Self {
            conn,
            keys: QueueKeys::new(queue)?,
        })
    }

    /// The queue's keys.
    pub fn keys(&self) -> &QueueKeys {
        &self.keys
    }

    /// A snapshot of sizes and counters.
    pub async fn stats(&self) -> Result<Stats> {
        scripts::stats(&mut self.conn.clone(), &self.keys).await
    }

    /// Dead-lettered jobs, newest first.
    pub async fn dead_jobs(&self, offset: usize, count: usize) -> Result<Vec<DeadJob>> {
        scripts::dlq_list(&mut self.conn.clone(), &self.keys, offset, count).await
    }

    /// Requeues the given dead jobs, or (with no ids) up to `limit` oldest ones; returns
    /// how many were requeued and the ids not found.
    pub async fn requeue_dead(&self, ids: &[String], limit: usize) -> Result<(u64, Vec<String>)> {
        scripts::dlq_requeue(&mut self.conn.clone(), &self.keys, limit.max(1), ids).await
    }

    /// Deletes every dead-lettered job (in chunks); returns how many.
    pub async fn purge_dead(&self) -> Result<u64> {
        let mut total = 0;
        loop {
            let n = scripts::dlq_purge(&mut self.conn.clone(), &self.keys, PURGE_CHUNK).await?;
            total += n;
            if (n as usize) < PURGE_CHUNK {
                return Ok(total);
            }
        }
    }

    /// Pauses the queue: consumers stop fetching (running jobs finish). True if it changed.
    pub async fn pause(&self) -> Result<bool> {
        scripts::pause(&mut self.conn.clone(), &self.keys, true).await
    }

    /// Resumes the queue and wakes idle consumers. True if it changed.
    pub async fn resume(&self) -> Result<bool> {
        scripts::pause(&mut self.conn.clone(), &self.keys, false).await
    }
}
