//! The answers about the consumers working a queue.

use super::*;
use serde::Serialize;

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
