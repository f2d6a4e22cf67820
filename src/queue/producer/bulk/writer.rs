//! The writer of a [`super::Bulk`] load: envelopes into RPUSH commands, chunk by chunk,
//! and the transactions that carry them.

use crate::error::{Error, Result};
use crate::queue::envelope::{self, EnvelopeOut, MAX_ID_LEN, Priority};
use crate::queue::keys::{QueueKeys, validate_token};
use crate::queue::partitions;
use crate::queue::producer::{BULK_CHUNK, BULK_CHUNK_BYTES, DEFAULT_MAX_ATTEMPTS};
use crate::queue::scripts;
use crate::queue::spread::Spread;
use serde::Serialize;
use serde_json::value::RawValue;

/// Where a bulk load's jobs go: the queue's keys, or its partitions'.
#[derive(Clone, Copy)]
pub(crate) struct Lanes<'a> {
    pub keys: &'a QueueKeys,
    pub spread: Option<&'a Spread>,
}

impl<'a> Lanes<'a> {
    fn count(&self) -> usize {
        self.spread.map_or(1, |s| s.parts().count())
    }

    fn keys(&self, lane: usize) -> &'a QueueKeys {
        match self.spread {
            Some(s) => s.parts().partition(lane),
            None => self.keys,
        }
    }
}

/// What every job of a bulk load shares (its kind is given job by job).
pub(crate) struct Shape {
    pub priority: Priority,
    pub max_attempts: u32,
    /// The job key of every job (checked by the caller), for per-key limits; on a
    /// partitioned queue their generated ids go to its partition.
    pub key: Option<String>,
    /// The enqueue time of the chunk being written (each chunk reads the clock anew, so a
    /// long load's jobs carry the time they were sent, for the wait-time metric).
    pub now_ms: u64,
    /// The envelope size limit.
    pub limit: usize,
    pub cluster: bool,
    /// Compact envelopes, where they fit ([`Producer::compact_envelopes`](crate::Producer::compact_envelopes)).
    pub compact: bool,
}

/// A chunk ready to send: its calls (one per partition it holds: the partition's keys,
/// the transaction, its jobs), and the input position of its first job.
pub(crate) struct Chunk {
    pub first: u64,
    pub calls: Vec<(QueueKeys, redis::Pipeline, usize)>,
}

/// Writes a bulk load's envelopes into RPUSH commands, a chunk at a time.
pub(crate) struct Writer<'a> {
    lanes: Lanes<'a>,
    shape: Shape,
    /// Per lane: the chunk's RPUSH so far, its jobs and their bytes.
    pushes: Vec<Option<(redis::Cmd, usize, usize)>>,
    /// Per lane: the chunk's HSET of the envelopes over [`scripts::INLINE_MAX_BYTES`] with
    /// generated ids, stored by id (their ids go in the RPUSH), as `enqueue` stores them.
    stored: Vec<Option<redis::Cmd>>,
    /// Per lane: the arguments and bytes of its last RPUSH, to size the next one.
    sizes: Vec<(usize, usize)>,
    /// The lane of this chunk's jobs with generated ids.
    lane: usize,
    /// The chunk's jobs and bytes, and whether one of its calls is full.
    jobs: usize,
    bytes: usize,
    lane_full: bool,
    /// Input position of the next job, and of the chunk's first.
    next: u64,
    first: u64,
    /// The id and the envelope being written (reused: no allocation per job).
    id: String,
    envelope: Vec<u8>,
}

impl<'a> Writer<'a> {
    pub(crate) fn new(lanes: Lanes<'a>, shape: Shape) -> Self {
        let n = lanes.count();
        Self {
            pushes: (0..n).map(|_| None).collect(),
            stored: (0..n).map(|_| None).collect(),
            sizes: vec![(BULK_CHUNK + 2, 64 * 1024); n],
            lane: generated_lane(lanes, &shape),
            lanes,
            shape,
            jobs: 0,
            bytes: 0,
            lane_full: false,
            next: 0,
            first: 0,
            id: String::new(),
            envelope: Vec::new(),
        }
    }

    /// Writes jobs of `kind` (checked by the caller) from `jobs` until a chunk is full or
    /// the input ends; `None` when there is nothing left. A job that cannot be written
    /// gives its input position and why.
    pub(crate) fn next_chunk<S, P>(
        &mut self,
        kind: &str,
        jobs: &mut impl Iterator<Item = (Option<S>, P)>,
    ) -> std::result::Result<Option<Chunk>, (u64, Error)>
    where
        S: AsRef<str>,
        P: Serialize,
    {
        while !self.full() {
            let Some((id, payload)) = jobs.next() else {
                break;
            };
            let payload = |buf: &mut Vec<u8>| serde_json::to_writer(buf, &payload).map_err(Error::from);
            self.write(id.as_ref().map(AsRef::as_ref), kind, payload)
                .map_err(|e| (self.next, e))?;
            self.next += 1;
        }
        Ok((!self.is_empty()).then(|| self.take()))
    }

    /// Writes a job with a generated id, of `kind` (checked here), whose payload is
    /// `payload`'s JSON text, as is. Nothing is written when it cannot be (its envelope
    /// over the limit, a bad kind).
    pub(crate) fn write_raw(&mut self, kind: &str, payload: &RawValue) -> Result<()> {
        validate_token("job kind", kind, MAX_ID_LEN)?;
        self.write(None, kind, |buf| {
            buf.extend_from_slice(payload.get().as_bytes());
            Ok(())
        })
    }

    /// Whether the chunk holds no job yet.
    pub(crate) fn is_empty(&self) -> bool {
        self.jobs == 0
    }

    /// The shape of the jobs written.
    pub(crate) fn shape(&self) -> &Shape {
        &self.shape
    }

    /// Whether the chunk is done: a call of it holds [`BULK_CHUNK`] jobs or
    /// [`BULK_CHUNK_BYTES`]. On a partitioned queue, jobs with ids of the caller's spread
    /// over the partitions by id, so a chunk holds up to four calls' worth in all, and its
    /// calls, one per partition, go side by side.
    pub(crate) fn full(&self) -> bool {
        let calls = self.lanes.count().min(4);
        self.lane_full || self.jobs >= BULK_CHUNK * calls || self.bytes >= BULK_CHUNK_BYTES * calls
    }

    /// Writes one job's envelope, its payload written by `payload`, as the next item of
    /// its lane's RPUSH.
    fn write(
        &mut self,
        id: Option<&str>,
        kind: &str,
        payload: impl FnOnce(&mut Vec<u8>) -> Result<()>,
    ) -> Result<()> {
        self.id.clear();
        // A generated id holds the enqueue time when compact envelopes are written.
        let mut compact = false;
        let lane = match id {
            Some(id) => {
                validate_token("job id", id, MAX_ID_LEN)?;
                self.id.push_str(id);
                self.lanes.spread.map_or(0, |s| s.parts().of_id(id))
            }
            None => {
                match self.shape.compact {
                    true => compact = envelope::push_time_id(&mut self.id, self.shape.now_ms),
                    false => envelope::push_new_id(&mut self.id),
                }
                if self.lanes.spread.is_some() {
                    partitions::push_partition(&mut self.id, self.lane);
                }
                self.lane
            }
        };
        let shape = &self.shape;
        let env = EnvelopeOut {
            attempt: 0,
            max_attempts: shape.max_attempts,
            priority: shape.priority as u8,
            enqueued_at: shape.now_ms,
            id: &self.id,
            kind,
            trace_id: None,
            unique_key: None,
            key: shape.key.as_deref(),
            retry: None,
            // `head` does not read it: the payload is serialized in place below.
            payload: RawValue::NULL,
            compact,
        };
        // Written whole into a buffer of the load's, then copied into the command once:
        // the command's own writer is a call per piece that the compiler cannot inline.
        let envelope = &mut self.envelope;
        envelope.clear();
        envelope::head(&env, envelope);
        payload(envelope)?;
        envelope.push(b'}');
        let len = envelope.len();
        if len > shape.limit {
            return Err(Error::TooLarge {
                id: self.id.clone(),
                size: len,
                limit: shape.limit,
            });
        }
        // Made for the lane's first job that is written: a chunk sends no empty RPUSH.
        let (push, jobs, bytes) = self.pushes[lane].get_or_insert_with(|| {
            let (args, bytes) = self.sizes[lane];
            let ready = self.lanes.keys(lane).ready(shape.priority);
            let mut push = redis::Cmd::with_capacity(args, bytes);
            push.arg("RPUSH").arg(ready);
            (push, 0, 0)
        });
        if id.is_none() && len > scripts::INLINE_MAX_BYTES {
            let keys = self.lanes.keys(lane);
            let hset = self.stored[lane].get_or_insert_with(|| {
                let mut hset = redis::cmd("HSET");
                hset.arg(keys.jobs());
                hset
            });
            hset.arg(&self.id).arg(&envelope[..]);
            push.arg(&self.id);
        } else {
            push.arg(&envelope[..]);
        }
        *jobs += 1;
        *bytes += len;
        self.lane_full |= *jobs >= BULK_CHUNK || *bytes >= BULK_CHUNK_BYTES;
        self.jobs += 1;
        self.bytes += len;
        Ok(())
    }

    /// The chunk written so far, as its calls; the next chunk starts empty (and, on a
    /// partitioned queue, its generated ids go to the next partition in turn).
    pub(crate) fn take(&mut self) -> Chunk {
        let mut calls = Vec::new();
        for (lane, push) in self.pushes.iter_mut().enumerate() {
            let Some((push, n, bytes)) = push.take() else {
                continue;
            };
            // Sized as this one ended (items and their length headers): a bulk load's
            // chunks are alike, and a command regrown from empty copies itself each time.
            self.sizes[lane] = (n + 2, bytes + 256);
            let keys = self.lanes.keys(lane);
            let stored = self.stored[lane].take();
            let pipeline =
                scripts::pushes_pipeline(keys, stored.into_iter().chain([push]), n, self.shape.cluster);
            calls.push((keys.clone(), pipeline, n));
        }
        self.lane = generated_lane(self.lanes, &self.shape);
        self.shape.now_ms = envelope::unix_ms();
        let chunk = Chunk {
            first: self.first,
            calls,
        };
        self.first = self.next;
        self.jobs = 0;
        self.bytes = 0;
        self.lane_full = false;
        chunk
    }
}

/// The lane of a chunk's jobs with generated ids: the job key's partition, else the next
/// partition in turn.
fn generated_lane(lanes: Lanes<'_>, shape: &Shape) -> usize {
    match (lanes.spread, &shape.key) {
        (None, _) => 0,
        (Some(s), Some(key)) => s.parts().of_key(key),
        (Some(s), None) => s.next(),
    }
}

/// The transactions a [`Bulk`](super::Bulk) load of `payloads` of `kind` sends to `keys`
/// (a queue that is not partitioned, on a single Redis), built but not sent, with the
/// default limits; `now_ms` is the first chunk's enqueue time. Public for
/// benches/producer.rs, which measures the client's work per job without a Redis.
pub fn bulk_pipelines<P: Serialize>(
    keys: &QueueKeys,
    kind: &str,
    payloads: impl IntoIterator<Item = P>,
    now_ms: u64,
) -> Result<Vec<redis::Pipeline>> {
    validate_token("job kind", kind, MAX_ID_LEN)?;
    let mut writer = Writer::new(
        Lanes { keys, spread: None },
        Shape {
            priority: Priority::Normal,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            key: None,
            now_ms,
            limit: envelope::DEFAULT_MAX_ENVELOPE_BYTES,
            cluster: false,
            compact: false,
        },
    );
    let mut jobs = payloads.into_iter().map(|p| (None::<&'static str>, p));
    let mut out = Vec::new();
    loop {
        match writer.next_chunk(kind, &mut jobs) {
            Ok(Some(chunk)) => out.extend(chunk.calls.into_iter().map(|(_, p, _)| p)),
            Ok(None) => return Ok(out),
            Err((_, e)) => return Err(e),
        }
    }
}
