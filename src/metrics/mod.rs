//! Every metric weir emits, named in this one place, with HELP text, and the Prometheus
//! exporter (`install`, with the `prometheus` feature). Names follow Prometheus
//! conventions: `weir_` prefix, base units, `_total` counters, a `queue` label; never a
//! job id.
//!
//! Recording is per batch or per window wherever a batch figure will do; the two per-job
//! histograms (handler duration, end-to-end latency) record through handles built once,
//! so a record is a lock-free push.
//!
//! Everything is recorded through the `metrics` facade, so an application that installs a
//! recorder of its own (instead of `install`) gets the same series.
//!
//! This file holds the names, their HELP text and labels, and the exporter; `handles.rs`
//! the handles the stages record through.

mod handles;
mod kinds;
#[cfg(feature = "prometheus")]
pub(crate) mod serve;

pub use handles::LimiterMetrics;
pub(crate) use handles::{QueueMetrics, lane_labels, record_enqueued, record_script};

#[cfg(feature = "prometheus")]
use crate::error::{Error, Result};
use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
#[cfg(feature = "prometheus")]
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
#[cfg(feature = "prometheus")]
use std::net::SocketAddr;

/// Default exporter address: loopback only.
pub const DEFAULT_ADDR: &str = "127.0.0.1:9464";

/// Jobs stored by enqueue calls.
pub const JOBS_ENQUEUED: &str = "weir_jobs_enqueued_total";
/// Jobs leased by fetch calls.
pub const JOBS_FETCHED: &str = "weir_jobs_fetched_total";
/// Jobs acked.
pub const JOBS_ACKED: &str = "weir_jobs_acked_total";
/// Jobs sent back for a retry.
pub const JOBS_RETRIED: &str = "weir_jobs_retried_total";
/// Jobs put back without charging an attempt, by reason (see [`DEFER_REASONS`]).
pub const JOBS_DEFERRED: &str = "weir_jobs_deferred_total";
/// Jobs dead-lettered by this consumer.
pub const JOBS_DEAD: &str = "weir_jobs_dead_lettered_total";
/// Jobs brought back from expired leases (by this consumer's reclaimer).
pub const JOBS_RECLAIMED: &str = "weir_jobs_reclaimed_total";
/// Outcomes refused because the lease had been lost.
pub const LEASES_LOST: &str = "weir_leases_lost_total";
/// Batch leases split before their jobs were settled one by one.
pub const BATCHES_SPLIT: &str = "weir_batches_split_total";
/// Handler run time.
pub const JOB_DURATION: &str = "weir_job_duration_seconds";
/// Enqueue to outcome.
pub const JOB_LATENCY: &str = "weir_job_end_to_end_seconds";
/// Jobs per non-empty fetch call.
pub const FETCH_BATCH: &str = "weir_fetch_batch_jobs";
/// Outcomes per settle call.
pub const ACK_BATCH: &str = "weir_ack_batch_jobs";
/// Round trip of one script call.
pub const SCRIPT_DURATION: &str = "weir_redis_script_duration_seconds";
/// Failed script calls.
pub const REDIS_ERRORS: &str = "weir_redis_errors_total";
/// Failed calls that lost the connection (the connection manager reconnects).
pub const REDIS_RECONNECTS: &str = "weir_redis_reconnects_total";
/// Jobs the fetcher put into the pool's channel.
pub const CHANNEL_SENT: &str = "weir_channel_sent_jobs_total";
/// Jobs the pool took out of the channel.
pub const CHANNEL_RECEIVED: &str = "weir_channel_received_jobs_total";
/// Ready jobs per priority (sampled).
pub const QUEUE_READY: &str = "weir_queue_ready_jobs";
/// Delayed jobs (sampled).
pub const QUEUE_DELAYED: &str = "weir_queue_delayed_jobs";
/// Leased jobs of the queue across every consumer, running or waiting to start (sampled
/// from Redis; compare [`IN_FLIGHT`], this consumer's running jobs).
pub const QUEUE_IN_FLIGHT: &str = "weir_queue_in_flight_jobs";
/// Dead-lettered jobs (sampled).
pub const QUEUE_DEAD: &str = "weir_queue_dead_jobs";
/// Jobs deferred at least once and not done yet (sampled).
pub const QUEUE_DEFERRED: &str = "weir_queue_deferred_jobs";
/// Age of the oldest ready job (sampled).
pub const QUEUE_OLDEST: &str = "weir_queue_oldest_ready_age_seconds";
/// The queue's own job counters, kept in Redis by every producer and consumer (any
/// language, the CLI) and sampled by each consumer once a second, by `event` (one of
/// [`QUEUE_JOB_EVENTS`]): the same figures from every consumer of the queue.
pub const QUEUE_JOBS: &str = "weir_queue_jobs_total";
/// The values of [`QUEUE_JOBS`]'s `event` label: fields of the queue's counters hash.
pub const QUEUE_JOB_EVENTS: &[&str] = &[
    "enqueued",
    "fetched",
    "acked",
    "retried",
    "deferred",
    "dead",
    "reclaimed",
];
/// Dead-letter entries trimmed by the cap (sampled from Redis).
pub const DEAD_TRIMMED: &str = "weir_dead_trimmed_total";
/// Jobs the queue's global limits granted to this consumer's fetches (counted while a
/// global rate or concurrency is set).
pub const GLOBAL_GRANTED: &str = "weir_global_permits_granted_total";
/// Jobs this consumer's fetches asked for and the queue's global limits did not grant, by
/// limit (`rate`, `concurrency`).
pub const GLOBAL_DENIED: &str = "weir_global_permits_denied_total";
/// Jobs held back by their key's limits so far, for the keys held back the most (sampled
/// from Redis: the top [`TOP_THROTTLED_KEYS`], so the label set stays bounded).
pub const KEY_THROTTLED: &str = "weir_key_throttled_jobs_total";
/// How many keys [`KEY_THROTTLED`] reports.
pub const TOP_THROTTLED_KEYS: usize = 10;
/// Handler run time per job, by `kind`: the first [`TOP_KINDS`] kinds a consumer runs,
/// later ones as `kind="other"`, so the label set stays bounded.
pub const KIND_JOB_DURATION: &str = "weir_kind_job_duration_seconds";
/// Handler runs per job, by `kind` (bounded as [`KIND_JOB_DURATION`]) and `outcome`
/// (`ok`: the handler succeeded; `failed`: it returned an error or panicked, whatever
/// became of the job).
pub const KIND_JOBS: &str = "weir_kind_jobs_total";
/// How many kinds get series of their own in [`KIND_JOB_DURATION`] and [`KIND_JOBS`].
pub const TOP_KINDS: usize = 20;
/// The consumer's concurrency limit.
pub const LIMIT: &str = "weir_concurrency_limit";
/// Jobs running in this consumer's handlers now (its own pool; compare
/// [`QUEUE_IN_FLIGHT`], the queue's leased jobs across every consumer).
pub const IN_FLIGHT: &str = "weir_jobs_in_flight";

/// The window p95 the limiter last judged.
pub const LIMITER_P95: &str = "weir_limiter_window_p95_seconds";
/// The window overload rate the limiter last judged (overload answers over samples).
pub const LIMITER_ERRORS: &str = "weir_limiter_window_error_ratio";
/// The window rate of jobs that failed on their own (not overload) the limiter last saw.
pub const LIMITER_FAILURES: &str = "weir_limiter_window_failure_ratio";
/// The p95 target in force.
pub const LIMITER_TARGET: &str = "weir_limiter_target_p95_seconds";
/// The limiter's floor.
pub const LIMITER_MIN: &str = "weir_limiter_min_concurrency";
/// The limiter's ceiling.
pub const LIMITER_MAX: &str = "weir_limiter_max_concurrency";
/// Limiter decisions, by reason (see [`DECISION_KINDS`]).
pub const LIMITER_DECISIONS: &str = "weir_limiter_decisions_total";

/// HELP text of every counter.
const COUNTERS: &[(&str, &str)] = &[
    (JOBS_ENQUEUED, "Jobs stored by enqueue calls."),
    (JOBS_FETCHED, "Jobs leased by fetch calls."),
    (
        GLOBAL_GRANTED,
        "Jobs the queue's global limits (weir limits set --global-rate/--global-concurrency) granted to this consumer's fetches.",
    ),
    (
        KEY_THROTTLED,
        "Jobs held back by their key's limits (weir limits set --per-key-*) so far, for the 10 keys held back the most; sampled from Redis, the same from every consumer.",
    ),
    (
        GLOBAL_DENIED,
        "Jobs this consumer's fetches asked for that the queue's global limits did not grant, by limit (rate, concurrency).",
    ),
    (JOBS_ACKED, "Jobs acked (done)."),
    (
        JOBS_RETRIED,
        "Jobs sent back for a retry after a retryable failure.",
    ),
    (
        JOBS_DEFERRED,
        "Jobs put back without charging an attempt, by reason: backpressure (429/503), unknown_kind, oversize (over this consumer's envelope limit), unstarted_reclaim (a lease expired before the job started).",
    ),
    (
        JOBS_DEAD,
        "Jobs dead-lettered by this consumer (failures, bad envelopes, spent deferral budgets).",
    ),
    (
        JOBS_RECLAIMED,
        "Jobs brought back from expired leases by this consumer's reclaimer.",
    ),
    (
        LEASES_LOST,
        "Outcomes refused because the job's lease had been lost.",
    ),
    (
        BATCHES_SPLIT,
        "Batch leases (a fetch's jobs leased as one entry) this consumer split into leases of their jobs before acking them all: a job with another outcome or a start mark, an extend, a release, or acks that waited too long for the rest of the batch.",
    ),
    (REDIS_ERRORS, "Script calls that failed."),
    (
        REDIS_RECONNECTS,
        "Script calls that failed with a lost connection.",
    ),
    (
        CHANNEL_SENT,
        "Jobs the fetcher put into the worker pool's channel.",
    ),
    (CHANNEL_RECEIVED, "Jobs the worker pool took out of its channel."),
    (
        QUEUE_JOBS,
        "The queue's job counters in Redis, by event (enqueued, fetched, acked, retried, deferred, dead, reclaimed): counted by every producer (any language, the CLI) and consumer, sampled once a second by each consumer, so every consumer reports the same figures.",
    ),
    (
        DEAD_TRIMMED,
        "Dead-letter entries trimmed by the queue's cap, by every consumer (from Redis).",
    ),
    (
        KIND_JOBS,
        "Handler runs by kind (the first 20 kinds this consumer ran; later ones as kind=\"other\") and outcome: ok, or failed (an error or a panic).",
    ),
    (
        LIMITER_DECISIONS,
        "Limiter decisions per window, by reason: latency, overload, slow_start, probe, recheck, not_binding, baseline, headroom.",
    ),
];

/// Unit and HELP text of every gauge.
const GAUGES: &[(&str, Unit, &str)] = &[
    (QUEUE_READY, Unit::Count, "Ready jobs, by priority (sampled)."),
    (
        QUEUE_DELAYED,
        Unit::Count,
        "Delayed jobs: retries and scheduled jobs (sampled).",
    ),
    (
        QUEUE_IN_FLIGHT,
        Unit::Count,
        "Leased jobs of the queue across every consumer, running or waiting to start (sampled from Redis, the same from every consumer; weir_jobs_in_flight is one consumer's running jobs).",
    ),
    (QUEUE_DEAD, Unit::Count, "Dead-lettered jobs (sampled)."),
    (
        QUEUE_DEFERRED,
        Unit::Count,
        "Jobs deferred at least once and not done yet (sampled).",
    ),
    (
        QUEUE_OLDEST,
        Unit::Seconds,
        "Age of the oldest ready job (sampled).",
    ),
    (LIMIT, Unit::Count, "The consumer's concurrency limit."),
    (
        IN_FLIGHT,
        Unit::Count,
        "Jobs running in this consumer's handlers now (weir_queue_in_flight_jobs is the queue's leased jobs across every consumer).",
    ),
    (
        LIMITER_P95,
        Unit::Seconds,
        "Handler p95 of the limiter's last window.",
    ),
    (
        LIMITER_ERRORS,
        Unit::Count,
        "Overload ratio (0 to 1) of the limiter's last window: 429/503 or another overload status, timeouts, refused or reset connections, backpressure.",
    ),
    (
        LIMITER_FAILURES,
        Unit::Count,
        "Ratio (0 to 1) of the limiter's last window's jobs that failed on their own (a plain 500, a 4xx, a handler error): not a reason to shrink the limit.",
    ),
    (
        LIMITER_TARGET,
        Unit::Seconds,
        "The limiter's p95 target in force.",
    ),
    (LIMITER_MIN, Unit::Count, "The limiter's lowest allowed limit."),
    (LIMITER_MAX, Unit::Count, "The limiter's highest allowed limit."),
];

/// Unit and HELP text of every histogram.
const HISTOGRAMS: &[(&str, Unit, &str)] = &[
    (JOB_DURATION, Unit::Seconds, "Handler run time per job."),
    (
        KIND_JOB_DURATION,
        Unit::Seconds,
        "Handler run time per job, by kind (the first 20 kinds this consumer ran; later ones as kind=\"other\").",
    ),
    (
        JOB_LATENCY,
        Unit::Seconds,
        "Time from enqueue to outcome per job.",
    ),
    (FETCH_BATCH, Unit::Count, "Jobs per non-empty fetch call."),
    (ACK_BATCH, Unit::Count, "Outcomes per settle call."),
    (
        SCRIPT_DURATION,
        Unit::Seconds,
        "Round trip of one script call, by script.",
    ),
];

/// Histogram buckets for durations: 0.5 ms to 20 min, so 1 ms jobs and 10-minute jobs
/// both resolve.
pub const DURATION_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
    300.0, 600.0, 1200.0,
];
/// Buckets for batch sizes.
pub const BATCH_BUCKETS: &[f64] = &[
    1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0,
];

static INSTALLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// True once `install` (the Prometheus exporter) has succeeded in this process.
pub fn is_installed() -> bool {
    INSTALLED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Installs the Prometheus exporter on `addr` as the global recorder and describes every
/// metric. Call before building producers and consumers: handles built earlier stay no-ops.
#[cfg(feature = "prometheus")]
pub fn install(addr: SocketAddr) -> Result<()> {
    let listener = serve::bind(addr)?;
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), DURATION_BUCKETS)
        .and_then(|b| b.set_buckets_for_metric(Matcher::Suffix("_jobs".into()), BATCH_BUCKETS))
        .and_then(|b| b.install_recorder())
        .map_err(|e| Error::Metrics {
            addr,
            message: e.to_string(),
        })?;
    serve::spawn(listener, handle)?;
    describe();
    INSTALLED.store(true, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}

/// HELP text and units for every metric.
pub fn describe() {
    for &(name, help) in COUNTERS {
        describe_counter!(name, help);
    }
    for &(name, unit, help) in GAUGES {
        describe_gauge!(name, unit, help);
    }
    for &(name, unit, help) in HISTOGRAMS {
        describe_histogram!(name, unit, help);
    }
}

/// The reasons of [`JOBS_DEFERRED`], in [`DeferReason`] order.
pub const DEFER_REASONS: [&str; 4] = ["backpressure", "unknown_kind", "oversize", "unstarted_reclaim"];

/// Why a job was deferred: the `reason` label of [`JOBS_DEFERRED`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeferReason {
    /// The downstream pushed back (HTTP 429/503, [`crate::JobError::backpressure`]).
    Backpressure = 0,
    /// No handler for the job's kind in this consumer.
    UnknownKind = 1,
    /// The envelope is over this consumer's size limit.
    Oversize = 2,
    /// The job's lease expired before its run started (its consumer died holding it).
    UnstartedReclaim = 3,
}

impl DeferReason {
    /// The label value.
    pub fn label(self) -> &'static str {
        DEFER_REASONS[self as usize]
    }
}

/// The decision reasons, in [`LimiterMetrics::decisions`] order: the `decision` label.
pub const DECISION_KINDS: [&str; 8] = [
    "latency",
    "overload",
    "slow_start",
    "probe",
    "recheck",
    "not_binding",
    "baseline",
    "headroom",
];
