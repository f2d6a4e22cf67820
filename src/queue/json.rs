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
use std::collections::BTreeMap;
use std::time::Duration;

mod timestamp;

pub use timestamp::Timestamp;

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

/// Ready jobs per priority.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ReadyCounts {
    /// Priority high (suspects included: they are fetched first).
    pub high: u64,
    /// Priority normal.
    pub normal: u64,
    /// Priority low.
    pub low: u64,
    /// All three.
    pub total: u64,
}

/// Per-second rates from two reads of a queue's counters (two samples of its history,
/// or two reads a rate window apart).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Rates {
    /// Jobs enqueued per second.
    pub enqueued_per_s: f64,
    /// Jobs fetched (leased) per second.
    pub fetched_per_s: f64,
    /// Jobs acked (done) per second.
    pub acked_per_s: f64,
    /// Jobs sent back for retry per second.
    pub retried_per_s: f64,
    /// Jobs put back uncharged per second.
    pub deferred_per_s: f64,
    /// Jobs dead-lettered per second.
    pub dead_per_s: f64,
    /// The time between the two reads, ms.
    pub window_ms: u64,
}

impl Rates {
    /// The rates between counters `a` and, `window` later, `b`.
    pub fn between(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>, window: Duration) -> Self {
        let secs = window.as_secs_f64().max(1e-3);
        let per_s = |k: &str| {
            let d = b
                .get(k)
                .copied()
                .unwrap_or(0)
                .saturating_sub(a.get(k).copied().unwrap_or(0));
            d as f64 / secs
        };
        Rates {
            enqueued_per_s: per_s("enqueued"),
            fetched_per_s: per_s("fetched"),
            acked_per_s: per_s("acked"),
            retried_per_s: per_s("retried"),
            deferred_per_s: per_s("deferred"),
            dead_per_s: per_s("dead"),
            window_ms: window.as_millis() as u64,
        }
    }
}

/// One queue in the overview (`weir queues`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueueSummary {
    /// Queue name.
    pub name: String,
    /// Ready jobs per priority.
    pub ready: ReadyCounts,
    /// Delayed jobs (scheduled and retries).
    pub delayed: u64,
    /// Leased jobs (fetched, running or buffered).
    pub in_flight: u64,
    /// Dead-lettered jobs.
    pub dead: u64,
    /// Whether consumers are told to stop fetching.
    pub paused: bool,
    /// Age of the oldest ready job, ms (0 when none is ready).
    pub oldest_ready_age_ms: u64,
    /// Rates: from the queue's history (its two newest samples, written by its consumers
    /// on a fixed clock), or, with a rate window asked for, from two reads of the counters
    /// that far apart; `null` when no consumer sampled the queue lately.
    pub rates: Option<Rates>,
    /// Lifetime counters (enqueued, fetched, acked, retried, deferred, dead, reclaimed,
    /// trimmed, deleted), as stored.
    pub counters: BTreeMap<String, u64>,
    /// A partitioned queue's partition count (its figures are sums over its lanes); left
    /// out for a queue that is not partitioned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partitions: Option<usize>,
}

/// The answer of `weir queues`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueueList {
    /// [`JSON_VERSION`].
    pub version: u32,
    /// When the (second) read was made.
    pub now: Timestamp,
    /// Every registered queue, by name.
    pub queues: Vec<QueueSummary>,
    /// Registry entries that are not queue names, skipped (absent when there are none):
    /// `weir queues --forget NAME` removes one.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub invalid: Vec<String>,
}

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

/// One consumer in the worker registry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Worker {
    /// Its id (the tag in its jobs' start marks).
    pub id: String,
    /// Host name.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// weir's version.
    pub weir_version: String,
    /// When it started.
    pub started_at: Timestamp,
    /// Its concurrency limit at its last heartbeat.
    pub concurrency_limit: u64,
    /// Jobs it was running at its last heartbeat.
    pub running: u64,
    /// Jobs it held leased at its last heartbeat (fetched and not yet settled: running or
    /// waiting to start); what it holds of the queue's global concurrency.
    pub leased: u64,
    /// An adaptive consumer's latest limiter decision at its last heartbeat: the move,
    /// its reason and the window's figures (p95 against the target, overload and failure
    /// rates, peak in flight), at most [`crate::limiter::EXPLAIN_MAX`] bytes. `None`
    /// for a fixed limit, or before the first decision.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limiter: Option<String>,
    /// When it last refreshed its entry.
    pub last_beat: Timestamp,
    /// When its entry expires unless refreshed.
    pub expires_at: Timestamp,
}

/// The answer of `weir workers`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkerList {
    /// [`JSON_VERSION`].
    pub version: u32,
    /// Queue name.
    pub queue: String,
    /// Redis time of the read.
    pub now: Timestamp,
    /// The live consumers, oldest entry first.
    pub workers: Vec<Worker>,
}
