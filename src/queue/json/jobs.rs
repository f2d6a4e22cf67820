//! The answers about jobs: a page of them, one job in detail, its runs.

use super::*;
use serde::Serialize;

/// Which jobs a listing keeps: of one kind, of one job key (the envelope's `key`), or
/// both; `Default` keeps every job.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobFilter<'a> {
    /// Only jobs of this kind.
    pub kind: Option<&'a str>,
    /// Only jobs with this key.
    pub key: Option<&'a str>,
}

impl JobFilter<'_> {
    /// True when it keeps every job.
    pub fn is_empty(&self) -> bool {
        self.kind.is_none() && self.key.is_none()
    }
}

/// One job in a listing or a job page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobSummary {
    /// Job id.
    pub id: String,
    /// Where it is.
    pub state: JobState,
    /// Its kind; `null` for an envelope weir did not write.
    pub kind: Option<String>,
    /// `high`, `normal` or `low`; `null` when unknown.
    pub priority: Option<&'static str>,
    /// Failed attempts charged so far.
    pub attempt: Option<u32>,
    /// Attempts allowed in all.
    pub max_attempts: Option<u32>,
    /// When the producer enqueued it (the producer's clock).
    pub enqueued_at: Option<Timestamp>,
    /// Time since `enqueued_at`, ms.
    pub age_ms: Option<u64>,
    /// Delayed: when it falls due; `null` for a parked job.
    pub due_at: Option<Timestamp>,
    /// In flight: when its lease expires unless its consumer extends it.
    pub lease_deadline: Option<Timestamp>,
    /// Dead: when it was dead-lettered.
    pub dead_at: Option<Timestamp>,
    /// Done (kept): when it completed.
    pub done_at: Option<Timestamp>,
    /// The last error (a retry or deferral), or why it was dead-lettered.
    pub last_error: Option<String>,
    /// In flight: the id of the consumer running it (`weir workers`); `null` when it is
    /// leased but its run has not been reported as started.
    pub worker: Option<String>,
    /// A suspect: it was running when a consumer died, and will run alone.
    pub suspect: bool,
    /// Delayed, parked: held back by its key's concurrency limit, it comes back when a
    /// slot of its key frees (or the limit is removed), not at a due time.
    pub parked: bool,
    /// The lane of a partitioned queue it is in (a partition's tag, or the queue's name for
    /// its base); left out for a queue that is not partitioned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lane: Option<String>,
    /// Its job key (the envelope's `key`: per-key limits); left out when it has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The start of its payload's JSON, at most [`PAYLOAD_PREVIEW`] characters (`…`
    /// ends a cut one); left out for an envelope weir did not write.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_preview: Option<String>,
    /// Done (kept): its handler's result, as text (JSON from Rust, Python and exec
    /// workers; the start of the answer's body from the HTTP handler), at most 4096 bytes;
    /// left out when it has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
}

/// The most characters of a payload a listing shows ([`JobSummary::payload_preview`]).
pub const PAYLOAD_PREVIEW: usize = 120;

/// A page of `weir jobs`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobPage {
    /// [`JSON_VERSION`].
    pub version: u32,
    /// Queue name.
    pub queue: String,
    /// The state listed.
    pub state: JobState,
    /// The kind filter, if any.
    pub kind: Option<String>,
    /// The job key filter, if any (absent when none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Redis time of the read.
    pub now: Timestamp,
    /// The jobs, in queue order: ready in fetch order, delayed by due time, in flight by
    /// lease deadline, dead newest first.
    pub jobs: Vec<JobSummary>,
    /// Pass it as `--cursor` for the next page; `null` on the last page. Opaque.
    pub next_cursor: Option<String>,
}

/// The lease of a job in flight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LeaseInfo {
    /// When it expires unless extended.
    pub deadline: Timestamp,
    /// Its token (the first deadline its fetch set; it never changes while extended).
    pub token: String,
    /// The id of the consumer running the job; `null` until its start is reported.
    pub worker: Option<String>,
    /// Whether its run has started (a start mark is set).
    pub running: bool,
}

/// Deferrals of a job: returns that charged no attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeferralInfo {
    /// How many.
    pub count: u64,
    /// When the first was.
    pub first_at: Timestamp,
}

/// The answer of `weir job show`.
#[derive(Debug, Clone, Serialize)]
pub struct JobDetail {
    /// [`JSON_VERSION`].
    pub version: u32,
    /// Queue name.
    pub queue: String,
    /// Redis time of the read.
    pub now: Timestamp,
    /// What a listing shows of it.
    pub job: JobSummary,
    /// The envelope as JSON, when it parses.
    pub envelope: Option<Box<serde_json::value::RawValue>>,
    /// The envelope as stored, when it does not parse as JSON (that can be why it was
    /// dead-lettered).
    pub envelope_text: Option<String>,
    /// In flight: its lease.
    pub lease: Option<LeaseInfo>,
    /// Its deferrals, if any.
    pub deferrals: Option<DeferralInfo>,
    /// Its last runs, oldest first (the queue's `history_runs`, 5 by default): kept while
    /// the job is, dropped with it.
    pub history: Vec<RunRecord>,
}

/// One run of a job, as its history keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunRecord {
    /// When the run's lease began (its fetch), Redis clock.
    pub start: Timestamp,
    /// When its outcome was written, Redis clock.
    pub end: Timestamp,
    /// The consumer that ran it (its id in `weir workers`).
    pub worker: String,
    /// `retry`, `dead`, `defer`, `done`, or `expired`: its consumer stopped during the run
    /// (its lease expired; `end` is the lease's deadline).
    pub outcome: String,
    /// The error or reason, cut to 512 bytes (empty for `done`).
    pub message: String,
}
