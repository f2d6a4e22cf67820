//! The answers about queues: ready counts, rates, one queue's summary and the list.

use super::*;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

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
