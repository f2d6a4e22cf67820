//! [`Producer::load`]: a bulk load whose jobs the caller pushes one at a time as it reads
//! them (the lines of `weir enqueue`), each with a tag of the caller's (a line number),
//! sent as [`Producer::enqueue_tagged`] sends its chunks. The jobs of the load's shape
//! are written straight into the chunk's RPUSH commands, as a [`super::Bulk`] load's are:
//! no id or envelope allocated per job.

use super::bulk::writer::{Chunk, Lanes, Shape, Writer};
use super::{
    BULK_CHUNK, BULK_CHUNK_BYTES, BULK_PIPELINE, BulkReport, ChunkOutcome, JobParts, NewJob, Producer,
};
use crate::error::Result;
use crate::queue::envelope::{self, MAX_ID_LEN, Priority};
use crate::queue::keys::validate_token;
use crate::queue::scripts::EnqueueArg;
use futures_util::{Stream, StreamExt, stream};

/// The jobs of a [`Producer::load`], pushed by its `fill` one at a time. A chunk holds
/// jobs written in bulk (the load's shape: ready now, a generated id, the load's
/// priority, key and the producer's attempts) or jobs prepared one by one (any other, and
/// any job after one, until the chunk is full), so a chunk's jobs reach their lists in the
/// order pushed (chunks in flight side by side may land in any order).
pub struct Load<'p, T> {
    producer: &'p Producer,
    /// The chunk's jobs written in bulk, and their tags.
    writer: Writer<'p>,
    written: Vec<T>,
    /// The chunk's prepared jobs, their tags, their envelopes' bytes, and the chunk's
    /// enqueue time.
    prepared: Vec<EnqueueArg>,
    prepared_tags: Vec<T>,
    prepared_bytes: usize,
    prepared_at: u64,
    /// Scratch space for [`Producer::prepare`].
    buf: Vec<u8>,
}

impl<T> std::fmt::Debug for Load<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Load")
            .field("written", &self.written.len())
            .field("prepared", &self.prepared.len())
            .finish_non_exhaustive()
    }
}

/// A chunk of a [`Load`], ready to send: its tags, and its calls.
struct LoadChunk<T> {
    tags: Vec<T>,
    jobs: Jobs,
}

enum Jobs {
    Written(Chunk),
    Prepared(Vec<EnqueueArg>),
}

impl<T> Load<'_, T> {
    /// Adds a job given as its parts. An error says why it cannot be enqueued (a bad kind
    /// or key, an envelope over the limit); nothing of it is kept.
    pub fn push_parts(&mut self, tag: T, job: JobParts<'_>) -> Result<()> {
        if self.prepared.is_empty() && self.writes(&job) {
            self.writer.write_raw(job.kind, job.payload)?;
            self.written.push(tag);
            return Ok(());
        }
        let now = self.prepared_now();
        let arg = self.producer.prepare_parts(job, now, &mut self.buf)?;
        self.push_prepared(tag, arg);
        Ok(())
    }

    /// Adds a job. An error says why it cannot be enqueued; nothing of it is kept.
    pub fn push(&mut self, tag: T, job: NewJob) -> Result<()> {
        let now = self.prepared_now();
        let arg = self.producer.prepare(job, now, &mut self.buf)?;
        self.push_prepared(tag, arg);
        Ok(())
    }

    /// Whether the bulk writer takes `job`: it has the load's shape.
    fn writes(&self, job: &JobParts<'_>) -> bool {
        let shape = self.writer.shape();
        job.priority == shape.priority
            && job.max_attempts.is_none_or(|n| n.max(1) == shape.max_attempts)
            && job.key == shape.key.as_deref()
    }

    /// The enqueue time of the chunk's prepared jobs: read when its first one comes.
    fn prepared_now(&mut self) -> u64 {
        if self.prepared.is_empty() {
            self.prepared_at = envelope::unix_ms();
        }
        self.prepared_at
    }

    fn push_prepared(&mut self, tag: T, arg: EnqueueArg) {
        self.prepared_bytes += arg.envelope.len();
        self.prepared.push(arg);
        self.prepared_tags.push(tag);
    }

    /// Whether a chunk is ready: full, or jobs written in bulk followed by a prepared one
    /// (the written ones go first).
    fn full(&self) -> bool {
        (!self.written.is_empty() && !self.prepared.is_empty())
            || self.writer.full()
            || self.prepared.len() >= BULK_CHUNK
            || self.prepared_bytes >= BULK_CHUNK_BYTES
    }

    /// The next chunk: the jobs written in bulk, else the prepared ones; `None` when
    /// there is none.
    fn take(&mut self) -> Option<LoadChunk<T>> {
        if !self.writer.is_empty() {
            return Some(LoadChunk {
                tags: std::mem::take(&mut self.written),
                jobs: Jobs::Written(self.writer.take()),
            });
        }
        if self.prepared.is_empty() {
            return None;
        }
        self.prepared_bytes = 0;
        Some(LoadChunk {
            tags: std::mem::take(&mut self.prepared_tags),
            jobs: Jobs::Prepared(std::mem::take(&mut self.prepared)),
        })
    }
}

impl Producer {
    /// A bulk load whose jobs `fill` pushes into a [`Load`], a job or more per call,
    /// until it returns `false` (the input is done). `fill` is called as calls free up,
    /// so memory stays bounded by the chunks in flight whatever the input's size. The
    /// jobs go in chunks, sent and retried as [`Producer::enqueue_tagged`]'s, and each
    /// chunk's outcome comes with the tags of its jobs, in the order pushed. Jobs pushed
    /// as [`JobParts`] with `priority`, `key` (checked here) and the producer's attempts
    /// are written in bulk, with no allocation per job: the cheapest way to load jobs
    /// read from text.
    pub fn load<'p, T: 'p>(
        &'p self,
        priority: Priority,
        key: Option<&str>,
        mut fill: impl FnMut(&mut Load<'p, T>) -> bool + 'p,
    ) -> Result<impl Stream<Item = ChunkOutcome<T>> + 'p> {
        if let Some(k) = key {
            validate_token("job key", k, MAX_ID_LEN)?;
        }
        let writer = Writer::new(
            Lanes {
                keys: &self.keys,
                spread: self.spread.as_deref(),
            },
            Shape {
                priority,
                max_attempts: self.default_max_attempts.max(1),
                key: key.map(str::to_owned),
                now_ms: envelope::unix_ms(),
                limit: self.max_envelope_bytes,
                cluster: self.conn.is_cluster(),
                compact: self.compact,
            },
        );
        let mut load = Load {
            producer: self,
            writer,
            written: Vec::new(),
            prepared: Vec::new(),
            prepared_tags: Vec::new(),
            prepared_bytes: 0,
            prepared_at: 0,
            buf: Vec::new(),
        };
        let mut done = false;
        let chunks = std::iter::from_fn(move || {
            while !done && !load.full() {
                done = !fill(&mut load);
            }
            load.take()
        });
        Ok(stream::iter(chunks)
            .map(move |chunk| self.send_load_chunk(chunk))
            .buffered(BULK_PIPELINE))
    }

    async fn send_load_chunk<T>(&self, chunk: LoadChunk<T>) -> ChunkOutcome<T> {
        let result = match chunk.jobs {
            Jobs::Written(c) => self.send_chunk(c.calls).await.map(|enqueued| BulkReport {
                enqueued,
                duplicates: Vec::new(),
            }),
            Jobs::Prepared(args) => self.enqueue_chunk(args).await,
        };
        ChunkOutcome {
            tags: chunk.tags,
            result,
        }
    }
}
