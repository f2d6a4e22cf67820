//! The metric handles the stages record through, built once per queue (a record is then a
//! lock-free push), and the per-call recorders of the scripts and the producer.

use super::{
    ACK_BATCH, BATCHES_SPLIT, CHANNEL_RECEIVED, CHANNEL_SENT, DECISION_KINDS, DEFER_REASONS, FETCH_BATCH,
    GLOBAL_DENIED, GLOBAL_GRANTED, IN_FLIGHT, JOB_DURATION, JOB_LATENCY, JOBS_ACKED, JOBS_DEAD,
    JOBS_DEFERRED, JOBS_ENQUEUED, JOBS_FETCHED, JOBS_RECLAIMED, JOBS_RETRIED, LEASES_LOST, LIMIT,
    LIMITER_DECISIONS, LIMITER_ERRORS, LIMITER_FAILURES, LIMITER_MAX, LIMITER_MIN, LIMITER_P95,
    LIMITER_TARGET, REDIS_ERRORS, REDIS_RECONNECTS, SCRIPT_DURATION,
};
use crate::error::{Error, Result};
use metrics::{Counter, Gauge, Histogram, Label, counter};
use std::sync::Arc;

/// A consumer's metric handles for one queue, built once.
#[derive(Clone)]
pub(crate) struct QueueMetrics {
    pub queue: Arc<str>,
    pub fetched: Counter,
    /// Jobs the global limits granted; jobs they denied, by limit (rate, concurrency).
    pub global_granted: Counter,
    pub global_denied: [Counter; 2],
    pub acked: Counter,
    pub retried: Counter,
    /// By [`DeferReason`](super::DeferReason).
    pub deferred: [Counter; 4],
    pub dead: Counter,
    pub reclaimed: Counter,
    pub leases_lost: Counter,
    pub batches_split: Counter,
    pub job_duration: Histogram,
    pub job_latency: Histogram,
    pub fetch_batch: Histogram,
    pub ack_batch: Histogram,
    pub channel_sent: Counter,
    pub channel_received: Counter,
    pub limit: Gauge,
    pub in_flight: Gauge,
    /// Per-kind series, bounded ([`super::kinds`]).
    pub kinds: Arc<super::kinds::KindMetrics>,
}

impl QueueMetrics {
    /// Handles for `queue`; `scripts` are the script labels whose error counters start at
    /// zero (the queue's `SCRIPT_NAMES`: passed in, so this module needs nothing from the
    /// stages it serves).
    ///
    /// A partition's lane (`Q~i`) records as queue `Q` with a `partition` label `i`, so
    /// a dashboard's `sum by (queue)` adds a partitioned queue up and `by (partition)`
    /// shows its skew; the limit and in-flight gauges, which the lanes share, carry the
    /// queue alone.
    pub(crate) fn new(queue: &str, scripts: &[&'static str]) -> Self {
        Self::with_kinds(queue, scripts, true)
    }

    fn with_kinds(queue: &str, scripts: &[&'static str], kinds: bool) -> Self {
        let l = lane_labels(queue);
        let with = |k: &'static str, v: &'static str| {
            let mut l = l.clone();
            l.push(Label::new(k, v));
            l
        };
        // Error counters exist from the start (at zero), so dashboards and alerts see a
        // series before the first error.
        for script in scripts {
            counter!(REDIS_ERRORS, with("script", script)).absolute(0);
        }
        counter!(REDIS_RECONNECTS, l.clone()).absolute(0);
        let shared = vec![Label::new("queue", base_name(queue).to_owned())];
        Self {
            queue: queue.into(),
            fetched: counter!(JOBS_FETCHED, l.clone()),
            global_granted: counter!(GLOBAL_GRANTED, l.clone()),
            global_denied: ["rate", "concurrency"].map(|v| counter!(GLOBAL_DENIED, with("limit", v))),
            acked: counter!(JOBS_ACKED, l.clone()),
            retried: counter!(JOBS_RETRIED, l.clone()),
            deferred: DEFER_REASONS.map(|r| counter!(JOBS_DEFERRED, with("reason", r))),
            dead: counter!(JOBS_DEAD, l.clone()),
            reclaimed: counter!(JOBS_RECLAIMED, l.clone()),
            leases_lost: counter!(LEASES_LOST, l.clone()),
            batches_split: counter!(BATCHES_SPLIT, l.clone()),
            job_duration: metrics::histogram!(JOB_DURATION, l.clone()),
            job_latency: metrics::histogram!(JOB_LATENCY, l.clone()),
            fetch_batch: metrics::histogram!(FETCH_BATCH, l.clone()),
            ack_batch: metrics::histogram!(ACK_BATCH, l.clone()),
            channel_sent: counter!(CHANNEL_SENT, l.clone()),
            channel_received: counter!(CHANNEL_RECEIVED, l),
            limit: metrics::gauge!(LIMIT, shared.clone()),
            in_flight: metrics::gauge!(IN_FLIGHT, shared),
            kinds: Arc::new(super::kinds::KindMetrics::new(lane_labels(queue), kinds)),
        }
    }

    /// Handles that record nothing, for a consumer run with metrics off.
    pub(crate) fn disabled(queue: &str) -> Self {
        metrics::with_local_recorder(&metrics::NoopRecorder, || Self::with_kinds(queue, &[], false))
    }
}

/// The limiter's metric handles for one queue, built once (per window recording).
#[derive(Clone)]
pub struct LimiterMetrics {
    /// Last window's p95.
    pub p95: Gauge,
    /// Last window's overload ratio.
    pub error_ratio: Gauge,
    /// Last window's ratio of jobs that failed on their own.
    pub failure_ratio: Gauge,
    /// Target in force.
    pub target: Gauge,
    /// Floor.
    pub min: Gauge,
    /// Ceiling.
    pub max: Gauge,
    /// Decisions, in [`DECISION_KINDS`] order.
    pub decisions: [Counter; 8],
}

impl std::fmt::Debug for LimiterMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LimiterMetrics")
    }
}

impl LimiterMetrics {
    /// Handles for `queue` (no-ops unless a recorder is installed when called).
    pub fn new(queue: &str) -> Self {
        let q = queue.to_owned();
        Self {
            p95: metrics::gauge!(LIMITER_P95, "queue" => q.clone()),
            error_ratio: metrics::gauge!(LIMITER_ERRORS, "queue" => q.clone()),
            failure_ratio: metrics::gauge!(LIMITER_FAILURES, "queue" => q.clone()),
            target: metrics::gauge!(LIMITER_TARGET, "queue" => q.clone()),
            min: metrics::gauge!(LIMITER_MIN, "queue" => q.clone()),
            max: metrics::gauge!(LIMITER_MAX, "queue" => q.clone()),
            decisions: DECISION_KINDS
                .map(|kind| counter!(LIMITER_DECISIONS, "queue" => q.clone(), "decision" => kind)),
        }
    }
}

/// Records one script call: its round trip, and its error if it failed.
pub(crate) fn record_script<T>(
    queue: &str,
    script: &'static str,
    started: std::time::Instant,
    r: &Result<T>,
) {
    let l = lane_labels(queue);
    let mut with_script = l.clone();
    with_script.push(Label::new("script", script));
    metrics::histogram!(SCRIPT_DURATION, with_script.clone()).record(started.elapsed().as_secs_f64());
    if let Err(e) = r {
        counter!(REDIS_ERRORS, with_script).increment(1);
        if let Error::Redis(re) = e
            && (re.is_connection_dropped() || re.is_io_error() || re.is_connection_refusal())
        {
            counter!(REDIS_RECONNECTS, l).increment(1);
        }
    }
}

/// Counts jobs stored by an enqueue call.
pub(crate) fn record_enqueued(queue: &str, n: u64) {
    counter!(JOBS_ENQUEUED, "queue" => queue.to_owned()).increment(n);
}

/// The queue of a lane name: `Q` for `Q` and for its partitions `Q~i`.
fn base_name(lane: &str) -> &str {
    lane.split('~').next().unwrap_or(lane)
}

/// The labels of a lane's series: `queue`, and for a partition, `partition`.
pub(crate) fn lane_labels(lane: &str) -> Vec<Label> {
    let mut parts = lane.split('~');
    let queue = parts.next().unwrap_or(lane).to_owned();
    let mut l = vec![Label::new("queue", queue)];
    if let Some(i) = parts.next() {
        l.push(Label::new("partition", i.to_owned()));
    }
    l
}
