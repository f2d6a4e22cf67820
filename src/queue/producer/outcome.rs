//! What one enqueue did: stored, or refused, and why ([`Producer::enqueue_outcome`]).

use super::Producer;
use crate::error::Result;
use crate::queue::envelope;
use crate::queue::producer::NewJob;
use crate::queue::scripts::EnqueueArg;
use redis::AsyncCommands;

/// What [`Producer::enqueue_outcome`] did with one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Enqueued {
    /// Stored under this id.
    Stored(String),
    /// Refused: a job with this (caller-chosen) id exists in the queue.
    DuplicateId(String),
    /// Refused: the job's unique key is held by a job enqueued within its window (the id
    /// is the refused job's).
    UniqueKeyHeld(String),
}

impl Enqueued {
    /// The job's id, whatever the outcome.
    pub fn id(&self) -> &str {
        match self {
            Enqueued::Stored(id) | Enqueued::DuplicateId(id) | Enqueued::UniqueKeyHeld(id) => id,
        }
    }

    /// Whether the job was stored.
    pub fn stored(&self) -> bool {
        matches!(self, Enqueued::Stored(_))
    }
}

impl Producer {
    /// Enqueues one job and says what happened: stored, refused because its id is taken,
    /// or refused because its unique key is held. [`Producer::enqueue`] turns both
    /// refusals into [`crate::Error::Duplicate`].
    ///
    /// The script checks a chosen id before the unique key. A job with a chosen id and a
    /// window that is refused is told apart by looking for its id after the call: if the
    /// job holding the id finished (was deleted) in between, the refusal reads as a held
    /// unique key, which is then true as well (a finished job keeps its key until the
    /// window ends).
    pub async fn enqueue_outcome(&self, job: NewJob) -> Result<Enqueued> {
        let partition = self.partition_for(&job, true);
        let arg = self.encode(job, envelope::unix_ms(), &mut Vec::new(), partition)?;
        let (_, dups) = self.enqueue_args(std::slice::from_ref(&arg)).await?;
        if dups.is_empty() {
            return Ok(Enqueued::Stored(arg.id));
        }
        self.refusal(arg).await
    }

    /// Why `arg` was refused.
    async fn refusal(&self, arg: EnqueueArg) -> Result<Enqueued> {
        let id_taken = match (arg.unique, arg.unique_for_ms > 0) {
            (true, false) => true,
            (false, _) => false,
            (true, true) => {
                let keys = self.by_lane(vec![arg.clone()]).remove(0).0;
                self.conn.clone().hexists(keys.jobs(), &arg.id).await?
            }
        };
        Ok(match id_taken {
            true => Enqueued::DuplicateId(arg.id),
            false => Enqueued::UniqueKeyHeld(arg.id),
        })
    }
}
