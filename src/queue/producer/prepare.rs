//! Encoding jobs into enqueue arguments with a producer's limits ([`Producer::prepare`]
//! and its kin): the checks and the envelope, before anything is sent.

use super::job::{Encoding, encode_job, encode_parts};
use super::{DEFAULT_MAX_ATTEMPTS, JobParts, NewJob, Producer};
use crate::error::Result;
use crate::queue::envelope;
use crate::queue::scripts::EnqueueArg;

impl Producer {
    /// Checks and encodes one job with this producer's limits; `buf` is scratch space (a
    /// job encoded whole takes it as its envelope and leaves it empty, so no envelope is
    /// copied; one refused leaves its capacity for the next call). For a partitioned queue, a generated id
    /// names the partition the job goes to (`queue/spread.rs`: its unique key's, its
    /// key's, or the next in turn).
    pub fn prepare(&self, job: NewJob, now_ms: u64, buf: &mut Vec<u8>) -> Result<EnqueueArg> {
        let partition = self.partition_for(&job, false);
        self.encode(job, now_ms, buf, partition)
    }

    /// [`Producer::prepare`] of a job given as borrowed parts (ready now, a generated id),
    /// with no [`NewJob`] built: its kind and payload are copied once, into the envelope.
    /// It encodes what `prepare` does for a `NewJob` of the same kind, payload, priority,
    /// attempts and key. A bulk load from text (`weir enqueue`) takes it for every line
    /// that is such a job.
    pub fn prepare_parts(&self, job: JobParts<'_>, now_ms: u64, buf: &mut Vec<u8>) -> Result<EnqueueArg> {
        let partition = self.spread.as_ref().map(|s| s.route(job.key, false, &self.conn));
        encode_parts(job, now_ms, buf, self.encoding(), partition)
    }

    /// How this producer encodes jobs.
    pub(super) fn encoding(&self) -> Encoding {
        Encoding {
            max_envelope_bytes: self.max_envelope_bytes,
            default_max_attempts: self.default_max_attempts,
            compact: self.compact,
        }
    }

    /// On a partitioned queue, the partition a job with a generated id goes to
    /// ([`Spread::route`]); `None` for a job with an id of the caller's (it goes where the
    /// id hashes) or a queue without partitions.
    pub(super) fn partition_for(&self, job: &NewJob, alone: bool) -> Option<usize> {
        let s = self.spread.as_ref().filter(|_| job.id.is_none())?;
        let key = job.routing_unique_key().or(job.key.as_deref());
        Some(s.route(key, alone, &self.conn))
    }

    pub(super) fn encode(
        &self,
        job: NewJob,
        now_ms: u64,
        buf: &mut Vec<u8>,
        partition: Option<usize>,
    ) -> Result<EnqueueArg> {
        encode_job(job, now_ms, buf, self.encoding(), partition)
    }

    /// Checks and encodes one job with the default limits, without a producer (benchmarks,
    /// tools that prepare jobs ahead of a connection).
    pub fn prepare_offline(job: NewJob, now_ms: u64, buf: &mut Vec<u8>) -> Result<EnqueueArg> {
        encode_job(
            job,
            now_ms,
            buf,
            Encoding {
                max_envelope_bytes: envelope::DEFAULT_MAX_ENVELOPE_BYTES,
                default_max_attempts: DEFAULT_MAX_ATTEMPTS,
                compact: false,
            },
            None,
        )
    }
}
