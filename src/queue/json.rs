//! The results of the admin calls ([`crate::Queue`], [`crate::Queues`]) and of the
//! queue's history (`samples.rs`): what `weir ... --json` prints and what the web UI's
//! `/api/` returns, one type per answer. Their JSON is a stable format, documented in
//! `docs/cli-json.md`: within one [`JSON_VERSION`], fields are only ever added (readers
//! ignore fields they do not know); a field removed or changed in meaning bumps it.
//!
//! Conventions: times are RFC 3339 strings in UTC with milliseconds
//! (`"2026-12-02T00:00:00.000Z"`, Redis's clock), durations are whole milliseconds in
//! fields ending `_ms`, rates are per second in fields ending `_per_s`, absent values are
//! `null`. The fields only a partitioned queue has (`lane`, `partitions`) are left out of
//! the answers about other queues, which stay as they were.

use serde::Serialize;

mod acted;
mod jobs;
mod queues;
mod timestamp;
mod workers;

pub use acted::{BulkActed, JobMoved, JobSkipped, JobsActed};
pub use jobs::{
    DeferralInfo, JobDetail, JobFilter, JobPage, JobSummary, LeaseInfo, PAYLOAD_PREVIEW, RunRecord,
};
pub use queues::{QueueList, QueueSummary, Rates, ReadyCounts};
pub use timestamp::Timestamp;
pub use workers::{Worker, WorkerList};

/// The version of the JSON format, in the `version` field of every top-level answer.
pub const JSON_VERSION: u32 = 1;

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Waiting in a ready list (or among the suspects, fetched first).
    Ready,
    /// Waiting for its due time: a scheduled job or a retry.
    Delayed,
    /// Leased by a consumer: fetched, running, or waiting in its buffer.
    InFlight,
    /// In the dead-letter queue.
    Dead,
    /// Completed, and kept because the queue keeps completed jobs (`weir limits set
    /// --keep-completed`).
    Done,
}

impl JobState {
    /// Every state, in the order a job usually goes through them.
    pub const ALL: [JobState; 5] = [
        JobState::Ready,
        JobState::Delayed,
        JobState::InFlight,
        JobState::Dead,
        JobState::Done,
    ];

    /// Its name in JSON and in the scripts: `ready`, `delayed`, `in_flight`, `dead`,
    /// `done`.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Ready => "ready",
            JobState::Delayed => "delayed",
            JobState::InFlight => "in_flight",
            JobState::Dead => "dead",
            JobState::Done => "done",
        }
    }

    /// From its name (`in-flight` is accepted for `in_flight`).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "ready" => Some(JobState::Ready),
            "delayed" => Some(JobState::Delayed),
            "in_flight" | "in-flight" => Some(JobState::InFlight),
            "dead" => Some(JobState::Dead),
            "done" => Some(JobState::Done),
            _ => None,
        }
    }
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
