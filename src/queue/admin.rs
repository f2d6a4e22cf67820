//! Operator calls: on one queue ([`Queue`]: stats, jobs by state, one job, deletes,
//! run-now, the dead-letter queue, pause and resume, its workers) and on the set of queues
//! ([`Queues`]: the registry and the overview).
//!
//! This is the layer the `weir` command line and the web UI share: each call returns one
//! of the serde types in [`json`](crate::queue::json), whose JSON is what `--json` prints
//! and the UI's `/api/` returns (the format is documented in `docs/cli-json.md`).
//!
//! A partitioned queue (`queue/partitions.rs`) is one queue to the operator: every call
//! reads its partition map first (one HMGET; these calls are not on the hot path) and, if
//! there is one, acts on all its lanes (`lanes.rs`, `lane_jobs.rs`). A queue that is not
//! partitioned costs that one read and nothing else.

mod jobs;
mod known;
mod lane_jobs;
mod lanes;
mod next_due;
pub(crate) use next_due::{in_flight_sample, next_due_of};
mod registry;
mod workers;

pub use jobs::{KIND_WINDOW, MAX_PAGE};
pub use known::{edit_distance, nearest_of};
pub use lane_jobs::LANES_PER_PAGE;
pub use registry::Queues;
pub use workers::MAX_WORKERS;
pub(crate) use workers::WorkerRecord;

use crate::error::Result;
use crate::queue::keys::QueueKeys;
use crate::queue::partitions::Partitions;
use crate::queue::samples::{self, Samples};
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

    /// The queue's partition map (one HMGET), or `None` for a queue that is not
    /// partitioned. A handle on one lane (`Queue::new(conn, "Q~3")`) acts on that lane
    /// alone and reads nothing.
    pub async fn partitions(&self) -> Result<Option<Partitions>> {
        if self.keys.is_partition() {
            return Ok(None);
        }
        Partitions::read(&mut self.conn.clone(), self.keys.name()).await
    }

    /// A snapshot of sizes and counters; a partitioned queue's is the sum over its lanes
    /// (see [`Stats::sum`]).
    pub async fn stats(&self) -> Result<Stats> {
        self.stats_of(self.partitions().await?.as_ref()).await
    }

    /// [`Queue::stats`] with the partition map read already.
    pub(super) async fn stats_of(&self, parts: Option<&Partitions>) -> Result<Stats> {
        match parts {
            None => scripts::stats(&mut self.conn.clone(), &self.keys).await,
            Some(p) => Ok(Stats::sum(self.lane_stats(p).await?.iter().map(|(_, s)| s))),
        }
    }

    /// The snapshot of each lane: of a partitioned queue, its partitions then its base, by
    /// lane name; of another queue, the queue itself.
    pub async fn stats_by_lane(&self) -> Result<Vec<(String, Stats)>> {
        match self.partitions().await? {
            None => Ok(vec![(
                self.keys.name().to_owned(),
                scripts::stats(&mut self.conn.clone(), &self.keys).await?,
            )]),
            Some(p) => self.lane_stats(&p).await,
        }
    }

    /// The queue's history (`queue/samples.rs`): its newest `max` samples, oldest first,
    /// and the rates over the two newest; a partitioned queue's summed over its lanes.
    pub async fn samples(&self, max: usize) -> Result<Samples> {
        let name = self.keys.name();
        match self.partitions().await? {
            None => {
                let (lane, now) = samples::read_lane(&mut self.conn.clone(), &self.keys, max).await?;
                Ok(Samples::of(name, now, vec![lane]))
            }
            Some(p) => {
                let reads = self.each_lane(
                    &p,
                    |mut c, k| async move { samples::read_lane(&mut c, k, max).await },
                );
                let reads = reads.await?;
                let now = reads.iter().map(|(_, t)| *t).max().unwrap_or_default();
                Ok(Samples::of(
                    name,
                    now,
                    reads.into_iter().map(|(l, _)| l).collect(),
                ))
            }
        }
    }

    /// Dead-lettered jobs, newest first (of a partitioned queue: merged over its lanes,
    /// each job saying its lane).
    pub async fn dead_jobs(&self, offset: usize, count: usize) -> Result<Vec<DeadJob>> {
        match self.partitions().await? {
            None => scripts::dlq_list(&mut self.conn.clone(), &self.keys, offset, count).await,
            Some(p) => self.lane_dead_jobs(&p, offset, count).await,
        }
    }

    /// Requeues the given dead jobs, or (with no ids) up to `limit` oldest ones; returns
    /// how many were requeued and the ids not found. A partitioned queue's ids are looked
    /// for in their likeliest lane first ([`Partitions::search_order`]); the oldest are
    /// the oldest over every lane.
    pub async fn requeue_dead(&self, ids: &[String], limit: usize) -> Result<(u64, Vec<String>)> {
        match self.partitions().await? {
            None => scripts::dlq_requeue(&mut self.conn.clone(), &self.keys, limit.max(1), ids).await,
            Some(p) if ids.is_empty() => self.lane_requeue_oldest(&p, limit.max(1)).await,
            Some(p) => self.lane_requeue(&p, ids).await,
        }
    }

    /// Deletes every dead-lettered job (in chunks; on every lane of a partitioned queue);
    /// returns how many.
    pub async fn purge_dead(&self) -> Result<u64> {
        match self.partitions().await? {
            None => purge(&self.conn, &self.keys).await,
            Some(p) => {
                let n = self.each_lane(&p, |c, k| async move { purge(&c, k).await });
                Ok(n.await?.into_iter().sum())
            }
        }
    }

    /// Pauses the queue (every lane): consumers stop fetching (running jobs finish). True
    /// if it changed (on any lane).
    pub async fn pause(&self) -> Result<bool> {
        self.set_paused(true).await
    }

    /// Resumes the queue (every lane) and wakes idle consumers. True if it changed (on any
    /// lane).
    pub async fn resume(&self) -> Result<bool> {
        self.set_paused(false).await
    }

    async fn set_paused(&self, paused: bool) -> Result<bool> {
        match self.partitions().await? {
            None => scripts::pause(&mut self.conn.clone(), &self.keys, paused).await,
            Some(p) => {
                let lanes = self.each_lane(&p, |mut c, k| async move {
                    let changed = scripts::pause(&mut c, k, paused).await?;
                    Ok(changed)
                });
                Ok(lanes.await?.into_iter().any(|c| c))
            }
        }
    }
}

/// Deletes every dead-lettered job of one lane, [`PURGE_CHUNK`] per call.
async fn purge(conn: &Conn, keys: &QueueKeys) -> Result<u64> {
    let mut total = 0;
    loop {
        let n = scripts::dlq_purge(&mut conn.clone(), keys, PURGE_CHUNK).await?;
        total += n;
        if (n as usize) < PURGE_CHUNK {
            return Ok(total);
        }
    }
}
