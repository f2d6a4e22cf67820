//! [`Lease`]: one lease held, as the table keeps it.

use crate::queue::envelope::{Priority, ResultSlot};
use tokio::time::Instant;

/// One lease held.
#[derive(Debug, Clone)]
pub(crate) struct Lease {
    /// The job's id.
    pub id: String,
    /// The lease token: the deadline the fetch returned, the same for the lease's life.
    pub token: u64,
    pub priority: Priority,
    /// When the current deadline was asked for (the fetch or extend call was sent), by
    /// this process's clock: the deadline is at least this plus the lease length.
    pub renewed: Instant,
    /// Its start mark was sent to Redis (by the acker, or by the pool for a suspect).
    pub marked: bool,
    /// Its outcome is known (the acker is writing it): it must never be released as if
    /// it had not run.
    pub outcome: bool,
    /// An inline job's envelope, which is its lease's name in Redis (`lib.lua`'s items);
    /// none for a job named by its id.
    pub item: Option<String>,
    /// An extend was sent for it (landed or not): Redis may keep a token record for it.
    pub extend_sent: bool,
    /// Where its job's handler leaves a result: only while the queue keeps completed jobs
    /// (the acker sends it with the ack).
    pub result: Option<ResultSlot>,
    /// The batch lease it was fetched in (docs/batch-leases.md), while the batch is whole:
    /// the table's [`BatchLease`](super::BatchLease) of that name. None once split.
    pub batch: Option<std::sync::Arc<str>>,
}

impl Lease {
    /// What names the lease in Redis: its envelope for an inline job, else its id.
    pub(crate) fn name(&self) -> &str {
        self.item.as_deref().unwrap_or(&self.id)
    }
}
