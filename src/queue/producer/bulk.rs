//! [`Bulk`]: a bulk load of jobs of one kind, written into the enqueue calls with no job
//! built or owned on the way: a payload is serialized once, into a reused buffer, and its
//! envelope copied once, into the RPUSH command that carries it.

use super::{BULK_PIPELINE, BulkReport, Producer};
use crate::error::{Error, Result};
use crate::queue::envelope::{self, MAX_ID_LEN, Priority};
use crate::queue::keys::{QueueKeys, validate_token};
use futures_util::{StreamExt, stream};
use serde::Serialize;

pub(super) mod writer;

pub use writer::bulk_pipelines;
use writer::{Lanes, Shape, Writer};

/// A bulk load of jobs of one kind that share their options: [`Producer::bulk`].
///
/// Its jobs take the bulk path of [`Producer::enqueue_bulk`] (ready now, stored as list
/// items, in chunks of [`BULK_CHUNK`](super::BULK_CHUNK) jobs or
/// [`BULK_CHUNK_BYTES`](super::BULK_CHUNK_BYTES) with [`BULK_PIPELINE`]
/// calls in flight, each call retried up to [`CHUNK_TRIES`](super::CHUNK_TRIES) times), but each payload is
/// serialized once, into a buffer the load reuses, and copied into the call that carries
/// it: no [`crate::NewJob`], no allocation per job. It is the cheapest way to load many
/// jobs.
///
/// The input streams: it is read as calls free up, so a load of any size takes bounded
/// memory. A job that cannot be written (an id outside the alphabet, a payload that does
/// not serialize, an envelope over [`Producer::max_envelope_bytes`]) stops the load with
/// [`Error::BulkStopped`], which says how many jobs, from the start of the input, are
/// enqueued; its chunk and everything after it are not sent.
///
/// ```no_run
/// # async fn load(producer: weir::Producer) -> weir::Result<()> {
/// #[derive(serde::Serialize)]
/// struct Mail {
///     to: String,
/// }
/// let mails: Vec<Mail> = (0..100_000).map(|i| Mail { to: format!("user{i}@example.com") }).collect();
/// let report = producer.bulk("mail").max_attempts(3).enqueue(&mails).await?;
/// assert_eq!(report.enqueued, 100_000);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a Bulk does nothing until enqueue or enqueue_with_ids"]
pub struct Bulk<'p> {
    producer: &'p Producer,
    kind: String,
    priority: Priority,
    max_attempts: Option<u32>,
}

impl Producer {
    /// A bulk load of jobs of `kind` (see [`Bulk`]):
    /// `producer.bulk("email").enqueue(&payloads).await?`.
    pub fn bulk(&self, kind: impl Into<String>) -> Bulk<'_> {
        Bulk {
            producer: self,
            kind: kind.into(),
            priority: Priority::Normal,
            max_attempts: None,
        }
    }
}

impl Bulk<'_> {
    /// The jobs' priority (default normal).
    pub fn priority(mut self, p: Priority) -> Self {
        self.priority = p;
        self
    }

    /// Runs each job is allowed (default: the producer's, at least 1).
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = Some(n);
        self
    }

    /// Enqueues one job per payload, with generated ids. On a partitioned queue each
    /// chunk goes to the next partition in turn.
    pub async fn enqueue<P: Serialize>(&self, payloads: impl IntoIterator<Item = P>) -> Result<BulkReport> {
        self.run(payloads.into_iter().map(|p| (None::<&'static str>, p)))
            .await
    }

    /// Enqueues `(id, payload)` pairs. The ids are the caller's, and taken as new: they
    /// are stored as generated ids are, without the existence check
    /// [`crate::NewJob::id`] makes, so an id that is already queued is queued twice
    /// (use [`Producer::enqueue_bulk`] for ids that may repeat). On a partitioned queue
    /// each job goes to the partition its id hashes to.
    pub async fn enqueue_with_ids<S, P>(&self, jobs: impl IntoIterator<Item = (S, P)>) -> Result<BulkReport>
    where
        S: AsRef<str>,
        P: Serialize,
    {
        self.run(jobs.into_iter().map(|(id, p)| (Some(id), p))).await
    }

    async fn run<S, P>(&self, mut jobs: impl Iterator<Item = (Option<S>, P)>) -> Result<BulkReport>
    where
        S: AsRef<str>,
        P: Serialize,
    {
        validate_token("job kind", &self.kind, MAX_ID_LEN)?;
        let p = self.producer;
        let mut writer = Writer::new(
            Lanes {
                keys: &p.keys,
                spread: p.spread.as_deref(),
            },
            Shape {
                priority: self.priority,
                max_attempts: self.max_attempts.unwrap_or(p.default_max_attempts).max(1),
                key: None,
                now_ms: envelope::unix_ms(),
                limit: p.max_envelope_bytes,
                cluster: p.conn.is_cluster(),
                compact: p.compact,
            },
        );
        let mut stopped = None;
        let mut enqueued = 0;
        {
            let chunks = std::iter::from_fn(|| match writer.next_chunk(&self.kind, &mut jobs) {
                Ok(chunk) => chunk,
                Err(e) => {
                    stopped = Some(e);
                    None
                }
            });
            let mut calls = std::pin::pin!(
                stream::iter(chunks)
                    .map(|chunk| async move { (chunk.first, p.send_chunk(chunk.calls).await) })
                    .buffered(BULK_PIPELINE)
            );
            while let Some((first, r)) = calls.next().await {
                match r {
                    Ok(n) => enqueued += n,
                    Err(e) => return Err(stop(enqueued, first, e)),
                }
            }
        }
        match stopped {
            Some((at, e)) => Err(stop(enqueued, at, e)),
            None => Ok(BulkReport {
                enqueued,
                duplicates: Vec::new(),
            }),
        }
    }
}

fn stop(enqueued: u64, at: u64, source: Error) -> Error {
    Error::BulkStopped {
        enqueued,
        at,
        source: Box::new(source),
    }
}

impl Producer {
    /// A chunk's calls, side by side (one per partition it holds), each retried as
    /// [`Producer::enqueue_tagged`]'s are (stored once, not retried when Redis is out of
    /// memory); returns the jobs stored.
    pub(super) async fn send_chunk(&self, calls: Vec<(QueueKeys, redis::Pipeline, usize)>) -> Result<u64> {
        let sends = calls.into_iter().map(|(keys, pipeline, n)| async move {
            self.send_plain_once(&keys, pipeline).await?;
            self.stored(&keys, n).await?;
            Ok::<_, Error>(n as u64)
        });
        let mut stored = 0;
        for r in futures_util::future::join_all(sends).await {
            stored += r?;
        }
        Ok(stored)
    }
}
