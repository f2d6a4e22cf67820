//! The producer: puts jobs into a queue, one at a time or in bulk (one round trip per
//! chunk of up to [`BULK_CHUNK`] jobs or [`BULK_CHUNK_BYTES`], several chunks in flight,
//! each chunk retried).

use crate::error::{Error, Result};
use crate::queue::envelope;
use crate::queue::keys::QueueKeys;
use crate::queue::partitions::Partitions;
use crate::queue::scripts::{self, EnqueueArg};
use crate::queue::spread::{Chunks, Spread};
use crate::redis::conn::Conn;
use futures_util::{Stream, StreamExt, stream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

mod bulk;
mod chunk;
mod job;
mod load;
mod outcome;
mod prepare;

pub use bulk::{Bulk, bulk_pipelines};
pub use chunk::{CHUNK_TOKEN_MS, RETRY_SPAN};
pub use job::{JobParts, NewJob};
pub use load::Load;
pub use outcome::Enqueued;

/// Jobs per enqueue script call in the bulk paths.
pub const BULK_CHUNK: usize = 1000;
/// Envelope bytes per enqueue call in the bulk paths: a chunk closes at [`BULK_CHUNK`]
/// jobs or once its envelopes reach this size, whichever comes first. Jobs of 1 KiB or
/// less fill whole chunks by count; larger ones are capped by size, so the memory of a
/// bulk load (a few MiB per call in flight) and the time one call holds Redis stay the
/// same whatever the job size.
pub const BULK_CHUNK_BYTES: usize = 1 << 20;
/// Enqueue calls kept in flight by the bulk paths.
pub const BULK_PIPELINE: usize = 4;
/// Calls per chunk in the bulk paths before the chunk fails (backing off as
/// `Backoff::ENQUEUE` says, with jitter: up to about 16 s of waits, and never past
/// [`RETRY_SPAN`]).
pub const CHUNK_TRIES: u32 = 10;
/// Attempts a job gets unless told otherwise (the envelope's: a compact one implies it).
pub use crate::queue::envelope::DEFAULT_MAX_ATTEMPTS;

/// What a bulk enqueue did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BulkReport {
    /// Jobs stored.
    pub enqueued: u64,
    /// Ids refused because a job with that id exists, or its unique key is held.
    pub duplicates: Vec<String>,
}

/// One chunk's outcome in [`Producer::enqueue_tagged`].
#[derive(Debug)]
pub struct ChunkOutcome<T> {
    /// The tags of the chunk's jobs, in the order given.
    pub tags: Vec<T>,
    /// What the chunk's call did, or the error of its last try.
    pub result: Result<BulkReport>,
}

/// Enqueues jobs into one queue. Cheap to clone.
#[derive(Clone)]
pub struct Producer {
    conn: Conn,
    keys: QueueKeys,
    max_envelope_bytes: usize,
    default_max_attempts: u32,
    /// Writes compact envelopes ([`Producer::compact_envelopes`]).
    compact: bool,
    /// On a Redis Cluster: the queue is in the queue registry (added once, after the first
    /// enqueue; on a single Redis every enqueue call adds it).
    registered: Arc<AtomicBool>,
    /// A partitioned queue's partitions, and how jobs spread over them ([`Producer::open`]).
    spread: Option<Arc<Spread>>,
    /// Replicas that must confirm each call's jobs, and how long to wait for them
    /// ([`Producer::wait_replicas`]).
    durability: Option<(usize, Duration)>,
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("queue", &self.keys.name())
            .field("max_envelope_bytes", &self.max_envelope_bytes)
            .field("default_max_attempts", &self.default_max_attempts)
            .field("compact", &self.compact)
            .finish_non_exhaustive()
    }
}

impl Producer {
    /// A producer for `queue` over `conn`, writing the queue's own layout. For a queue
    /// that may be partitioned, [`Producer::open`] finds out and spreads the jobs over its
    /// partitions (a `new` producer's jobs still run: consumers serve the queue's own
    /// layout as a lane of its own).
    pub fn new(conn: Conn, queue: &str) -> Result<Self> {
        Ok(Self {
            conn,
            keys: QueueKeys::new(queue)?,
            max_envelope_bytes: envelope::DEFAULT_MAX_ENVELOPE_BYTES,
            default_max_attempts: DEFAULT_MAX_ATTEMPTS,
            compact: false,
            registered: Arc::default(),
            spread: None,
            durability: None,
        })
    }

    /// Makes every enqueue call wait until `replicas` replicas of the primary that took
    /// the jobs confirm them (`WAIT`), up to `timeout`; a call that gets fewer fails with
    /// [`Error::NotReplicated`] (its jobs are stored, and not sent again). A job whose
    /// enqueue succeeded then survives the failover of its primary to a replica that
    /// confirmed it. Without it, an enqueue is acknowledged once its primary has the jobs,
    /// and a failover within a few milliseconds of it may lose them (docs/scaling.md).
    pub fn wait_replicas(mut self, replicas: usize, timeout: Duration) -> Self {
        self.durability = (replicas > 0).then_some((replicas, timeout));
        self
    }

    /// A producer for `queue` over `conn` that reads the queue's partition map (one call)
    /// and, for a partitioned queue, spreads jobs over the partitions (see
    /// `queue/spread.rs`): a job with a key to its key's partition, bulk loads evenly, a
    /// job alone to the shallower of two.
    pub async fn open(conn: Conn, queue: &str) -> Result<Self> {
        let mut p = Self::new(conn, queue)?;
        p.spread = Partitions::read(&mut p.conn.clone(), queue)
            .await?
            .map(Spread::new);
        Ok(p)
    }

    /// The queue's partitions, for a producer that found some ([`Producer::open`]).
    pub fn partitions(&self) -> Option<&Partitions> {
        self.spread.as_deref().map(Spread::parts)
    }

    /// Sets the envelope size limit (default 1 MiB); larger jobs are refused.
    pub fn max_envelope_bytes(mut self, n: usize) -> Self {
        self.max_envelope_bytes = n;
        self
    }

    /// Sets the attempts of jobs that do not say (default 5).
    pub fn default_max_attempts(mut self, n: u32) -> Self {
        self.default_max_attempts = n.max(1);
        self
    }

    /// Writes compact envelopes (`queue/envelope.rs`) for the jobs they fit: a fresh job
    /// with a generated id, the default attempts (5) and normal priority, other fields as
    /// they are. 61 bytes fewer per job, and about a fifth less of Redis's CPU to store
    /// a small one. Off by default: consumers older than the compact form cannot read it (they
    /// dead-letter such jobs as undecodable), so turn it on once every consumer of the
    /// queue runs a version that reads it.
    pub fn compact_envelopes(mut self, on: bool) -> Self {
        self.compact = on;
        self
    }

    /// The queue's name.
    pub fn queue(&self) -> &str {
        self.keys.name()
    }

    /// Enqueues one job; returns its id. A taken id gives [`Error::Duplicate`].
    /// [`Producer::enqueue_outcome`] tells the two refusals apart.
    pub async fn enqueue(&self, job: NewJob) -> Result<String> {
        match self.enqueue_outcome(job).await? {
            Enqueued::Stored(id) => Ok(id),
            refused => Err(Error::Duplicate(refused.id().to_owned())),
        }
    }

    /// Enqueues one job to run after `delay`.
    pub async fn enqueue_in(&self, delay: Duration, job: NewJob) -> Result<String> {
        self.enqueue(job.delay(delay)).await
    }

    /// Enqueues one job to run at `at`.
    pub async fn enqueue_at(&self, at: SystemTime, job: NewJob) -> Result<String> {
        self.enqueue(job.run_at(at)).await
    }

    /// Enqueues many jobs: chunks of [`BULK_CHUNK`], [`BULK_PIPELINE`] calls in flight,
    /// each chunk retried as [`Producer::enqueue_tagged`] says.
    ///
    /// Every job is checked before anything is sent, so a bad job fails the call with
    /// nothing enqueued. A chunk that still fails after its retries fails the call and
    /// leaves the chunks sent before it enqueued.
    pub async fn enqueue_bulk(&self, jobs: impl IntoIterator<Item = NewJob>) -> Result<BulkReport> {
        let now = envelope::unix_ms();
        let mut buf = Vec::new();
        let args = jobs
            .into_iter()
            .map(|j| self.prepare(j, now, &mut buf).map(|arg| ((), arg)))
            .collect::<Result<Vec<_>>>()?;
        let mut chunks = std::pin::pin!(self.enqueue_tagged(args));
        let mut report = BulkReport::default();
        while let Some(chunk) = chunks.next().await {
            let r = chunk.result?;
            report.enqueued += r.enqueued;
            report.duplicates.extend(r.duplicates);
        }
        Ok(report)
    }

    /// Enqueues prepared jobs, each with a tag of the caller's (an input line number, say),
    /// in chunks of [`BULK_CHUNK`] jobs or [`BULK_CHUNK_BYTES`] with [`BULK_PIPELINE`] calls
    /// in flight; yields one outcome per chunk, in order. Jobs are taken from `jobs` only
    /// as calls free up, so input of any size streams through in bounded memory. For a
    /// partitioned queue every chunk holds one partition's jobs (gathered per partition,
    /// a few chunks' worth held back at most), so a chunk is one call.
    ///
    /// A chunk whose call fails is tried again, up to [`CHUNK_TRIES`] calls in all: a
    /// dropped connection or a restarting Redis costs a retry, not the chunk. A chunk whose
    /// call landed but whose reply was lost is not stored twice: a chunk of plain
    /// commands carries a token its retries look for, and a chunk that runs the enqueue
    /// script is retried with every id checked (`producer/chunk.rs`). Redis out of memory
    /// is not retried: the chunk fails at once with [`Error::OutOfMemory`].
    ///
    /// The stream owns its chunks and a clone of the producer, so given `Send + 'static`
    /// jobs it can be driven inside `tokio::spawn`.
    pub fn enqueue_tagged<T, I>(&self, jobs: I) -> impl Stream<Item = ChunkOutcome<T>> + use<T, I>
    where
        I: IntoIterator<Item = (T, EnqueueArg)>,
    {
        let chunks = Chunks::new(
            jobs.into_iter(),
            self.spread.clone(),
            BULK_CHUNK,
            BULK_CHUNK_BYTES,
        );
        let producer = self.clone();
        stream::iter(chunks)
            .map(move |(tags, args)| {
                let p = producer.clone();
                async move {
                    let result = p.enqueue_chunk(args).await;
                    ChunkOutcome { tags, result }
                }
            })
            .buffered(BULK_PIPELINE)
    }

    /// One chunk of a bulk load, retried as [`Producer::enqueue_tagged`] says; for a
    /// partitioned queue, split by partition, the partitions' calls side by side, each
    /// retried on its own (a retry never sends again what another partition stored).
    async fn enqueue_chunk(&self, args: Vec<EnqueueArg>) -> Result<BulkReport> {
        let by_lane = self.by_lane(args);
        let calls = by_lane.iter().map(|(keys, args)| async move {
            let done = self.enqueue_lane_once(keys, args).await?;
            // Outside the retries: what is stored is never sent again.
            self.confirm(keys, args.len()).await?;
            Ok::<_, Error>(done)
        });
        let mut report = BulkReport::default();
        for r in futures_util::future::join_all(calls).await {
            let (enqueued, duplicates) = r?;
            report.enqueued += enqueued;
            report.duplicates.extend(duplicates);
        }
        Ok(report)
    }

    /// The jobs grouped by the lane they go to: all to the queue itself, unless it is
    /// partitioned.
    fn by_lane(&self, args: Vec<EnqueueArg>) -> Vec<(QueueKeys, Vec<EnqueueArg>)> {
        let Some(s) = &self.spread else {
            return vec![(self.keys.clone(), args)];
        };
        let mut lanes: Vec<Vec<EnqueueArg>> = (0..s.parts().count()).map(|_| Vec::new()).collect();
        for a in args {
            lanes[s.lane_of(&a)].push(a);
        }
        lanes
            .into_iter()
            .enumerate()
            .filter(|(_, a)| !a.is_empty())
            .map(|(i, a)| (s.parts().partition(i).clone(), a))
            .collect()
    }

    /// Enqueues prepared jobs (for a partitioned queue: one call per partition they go
    /// to, side by side); returns (stored, duplicate ids).
    pub async fn enqueue_args(&self, args: &[EnqueueArg]) -> Result<(u64, Vec<String>)> {
        if self.spread.is_none() {
            let done = self.enqueue_lane(&self.keys, args).await?;
            self.confirm(&self.keys, args.len()).await?;
            return Ok(done);
        }
        let by_lane = self.by_lane(args.to_vec());
        let calls = by_lane.iter().map(|(keys, args)| async move {
            let done = self.enqueue_lane(keys, args).await?;
            self.confirm(keys, args.len()).await?;
            Ok::<_, Error>(done)
        });
        let (mut stored, mut dups) = (0, Vec::new());
        for r in futures_util::future::join_all(calls).await {
            let (s, d) = r?;
            stored += s;
            dups.extend(d);
        }
        Ok((stored, dups))
    }

    /// With [`Producer::wait_replicas`]: waits until enough replicas of the primary that
    /// serves `keys` confirm what this producer sent it.
    async fn confirm(&self, keys: &QueueKeys, jobs: usize) -> Result<()> {
        let Some((wanted, timeout)) = self.durability else {
            return Ok(());
        };
        let acked = self
            .conn
            .clone()
            .wait_replicas(keys.jobs(), wanted, timeout)
            .await?;
        if acked < wanted {
            return Err(Error::NotReplicated {
                jobs,
                acked,
                wanted,
                timeout_ms: timeout.as_millis() as u64,
            });
        }
        Ok(())
    }

    /// One enqueue call to one lane (`keys`): the queue, or one of its partitions.
    async fn enqueue_lane(&self, keys: &QueueKeys, args: &[EnqueueArg]) -> Result<(u64, Vec<String>)> {
        let dups = scripts::enqueue(&mut self.conn.clone(), keys, args)
            .await
            .map_err(Error::classify_memory)?;
        self.register_once().await;
        let stored = (args.len() - dups.len()) as u64;
        crate::metrics::record_enqueued(self.keys.name(), stored);
        Ok((stored, dups))
    }

    /// After a plain call ([`Bulk`]) stored `jobs` jobs in `keys`' lane: what
    /// [`Producer::enqueue_lane`] and its callers do after theirs (the queue registry on a
    /// cluster, the metric, the replicas' confirmation).
    async fn stored(&self, keys: &QueueKeys, jobs: usize) -> Result<()> {
        self.register_once().await;
        crate::metrics::record_enqueued(self.keys.name(), jobs as u64);
        self.confirm(keys, jobs).await
    }

    /// On a Redis Cluster, adds the queue to the queue registry, once per producer.
    async fn register_once(&self) {
        if !self.conn.is_cluster() || self.registered.load(Ordering::Relaxed) {
            return;
        }
        // The jobs are stored: a failure here must not send them again (a retry of
        // generated ids would store them twice). The next call tries again.
        match scripts::register(&mut self.conn.clone(), &self.keys).await {
            Ok(()) => self.registered.store(true, Ordering::Relaxed),
            Err(e) => {
                tracing::warn!(queue = self.keys.name(), error = %e, "cannot add the queue to the queue registry; trying again at the next enqueue")
            }
        }
    }
}
