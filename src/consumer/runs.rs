//! The jobs the pool is running, each run with the handle that aborts its task. At the
//! shutdown timeout the consumer abandons the runs still going: their tasks are aborted
//! (a handler that never returns does not run on) and each job is charged an attempt, so
//! a job that always outlives the timeout ends dead-lettered instead of looping.
//!
//! Exactly one side reports a run's outcome: the run itself, if it takes its entry out of
//! the table first ([`Runs::end`]), or the abandon, which takes every entry left.

use crate::consumer::outcomes::{AckerMsg, Done, Outcome};
use crate::queue::retry_policy::RetryPolicy;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;

/// A job of a run: what the run's outcome needs of it, kept apart from the job the handler
/// takes.
#[derive(Debug, Clone)]
pub(crate) struct RunJob {
    pub id: String,
    /// Its lease ([`Job::lease`](crate::Job)).
    pub lease: u64,
    /// Failed attempts so far (0 on the first run), as [`Job::attempt`](crate::Job).
    pub attempt: u32,
    /// Its envelope's `max_attempts`.
    pub max_attempts: u32,
    /// Its kind, when a kind has a retry rule of its own.
    pub kind: Option<String>,
    /// Its own retry rule, when its envelope has one.
    pub rule: Option<String>,
}

impl RunJob {
    /// What a run of `job` keeps of it; its kind is kept only `by_kind` (no cost per job
    /// otherwise).
    pub(crate) fn of(job: &crate::Job, by_kind: bool) -> Self {
        Self {
            id: job.id.clone(),
            lease: job.lease,
            attempt: job.attempt,
            max_attempts: job.max_attempts,
            kind: by_kind.then(|| job.kind.clone()),
            rule: job.retry.clone(),
        }
    }
}

/// The runs going on, by key.
#[derive(Debug, Default)]
pub(crate) struct Runs {
    next: AtomicU64,
    running: Mutex<HashMap<u64, Run>>,
}

#[derive(Debug)]
struct Run {
    jobs: Vec<RunJob>,
    abort: Option<AbortHandle>,
}

impl Runs {
    /// Registers a run of `jobs` about to start; returns its key.
    pub(crate) fn start(&self, jobs: Vec<RunJob>) -> u64 {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(key, Run { jobs, abort: None });
        key
    }

    /// Gives run `key` the handle that aborts its task (once spawned).
    pub(crate) fn set_abort(&self, key: u64, abort: AbortHandle) {
        if let Some(r) = self.lock().get_mut(&key) {
            r.abort = Some(abort);
        }
    }

    /// Run `key` ended by itself: true if its outcome is still its own to report (false:
    /// it was abandoned, and the abandon reported it).
    pub(crate) fn end(&self, key: u64) -> bool {
        self.lock().remove(&key).is_some()
    }

    /// Aborts every run still going and returns their jobs.
    pub(crate) fn abandon(&self) -> Vec<RunJob> {
        let runs: Vec<Run> = self.lock().drain().map(|(_, r)| r).collect();
        let mut jobs = Vec::new();
        for r in runs {
            if let Some(a) = r.abort {
                a.abort();
            }
            jobs.extend(r.jobs);
        }
        jobs
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Run>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Abandons the runs still going after `timeout`: aborts them and sends each job's
/// outcome, a retryable failure (charged; dead-lettered once its attempts are spent).
pub(crate) async fn abandon(
    runs: &Runs,
    acker: &mpsc::Sender<AckerMsg>,
    retry: &RetryPolicy,
    timeout: Duration,
) {
    let jobs = runs.abandon();
    if jobs.is_empty() {
        return;
    }
    let error = format!(
        "abandoned at shutdown after {}",
        humantime::format_duration(timeout)
    );
    tracing::warn!(
        count = jobs.len(),
        "shutdown timeout: aborting running jobs; each is charged an attempt"
    );
    for RunJob {
        id,
        lease,
        attempt,
        max_attempts,
        ..
    } in jobs
    {
        let outcome = Outcome::Retry {
            delay_ms: retry.delay(attempt).as_millis() as u64,
            error: error.clone(),
            spent: attempt.saturating_add(1) >= max_attempts,
            max: None,
        };
        // The acker takes every message until the last sender is gone.
        let _ = acker.send(AckerMsg::Done(Done { id, lease, outcome })).await;
    }
}
