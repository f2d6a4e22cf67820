//! The answers of the calls that act on jobs: moved, skipped, deleted in bulk.

use super::*;
use serde::Serialize;

/// The answer of an action on jobs by id (`weir job delete`, `weir dlq delete`,
/// `weir job run-now`, `weir dlq requeue ID...`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobsActed {
    /// [`JSON_VERSION`].
    pub version: u32,
    /// Queue name.
    pub queue: String,
    /// `delete`, `run_now` or `requeue`.
    pub action: &'static str,
    /// The jobs acted on, each with the state it was in.
    pub done: Vec<JobMoved>,
    /// Ids not acted on, each with why.
    pub skipped: Vec<JobSkipped>,
}

/// A job an action moved or deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobMoved {
    /// Job id.
    pub id: String,
    /// The state it was in.
    pub from: JobState,
    /// The lane it was in, as [`JobSummary::lane`] (left out likewise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
}

/// A job an action left alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobSkipped {
    /// Job id.
    pub id: String,
    /// The state it is in; `null` if there is no such job.
    pub state: Option<JobState>,
    /// Why, in a phrase.
    pub reason: String,
}

/// The answer of a filtered bulk action on the dead-letter queue (`weir dlq requeue
/// --kind/--older-than`, `weir dlq purge`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BulkActed {
    /// [`JSON_VERSION`].
    pub version: u32,
    /// Queue name.
    pub queue: String,
    /// `requeue` or `delete`.
    pub action: &'static str,
    /// The kind filter, if any.
    pub kind: Option<String>,
    /// The age filter, ms, if any.
    pub older_than_ms: Option<u64>,
    /// How many jobs.
    pub count: u64,
}
