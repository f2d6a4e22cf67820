//! A run: one handler call (a job, or a batch handler's jobs) under its permit, guarded
//! against panics and timeouts, registered in [`Runs`](super::Runs) once it runs in a task
//! of its own; its latency goes to the limiter and the metrics, its outcomes to the acker.

use super::{Pool, Wave};
use crate::consumer::outcomes::{AckerMsg, Done, Outcome, StartedLater};
use crate::consumer::runs::RunJob;
use crate::consumer::tasks::panic_message;
use crate::handler::{BatchHandler, Handler, JobError, JobErrorKind, JobResult, Start};
use crate::limiter::Signal;
use crate::limiter::limit::Permit;
use crate::metrics::DeferReason;
use crate::queue::envelope::{Job, MarkStart};
use futures_util::FutureExt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

impl Pool {
    /// Starts the run of one job. Its handler call is polled once right here: a call that
    /// finishes without waiting (a fast handler) costs no task, no registration and no start
    /// report; one that waits goes on in a task of its own, registered in
    /// [`Runs`](super::Runs) (see [`Inline`](super::inline::Inline) for calls that take
    /// long before they wait).
    /// The wave gets the job's outcome and permit if it finished, its id if it goes on.
    /// A handler that starts jobs later ([`Handler::starts_later`]) gets the job with its
    /// [`Start`], and the acker hears of the start from that, not from the wave.
    pub(crate) fn start_one(
        self: &Arc<Self>,
        h: Arc<dyn Handler>,
        mut job: Job,
        permit: Permit,
        wave: &mut Wave,
    ) {
        let run_job = RunJob::of(&job, self.rules.by_kind());
        let later = h.starts_later();
        if later {
            job.start = Some(Start::new(run_job.lease, self.mark_start.clone()));
        }
        let call = if self.inline.allowed() {
            // The call's start is the poll's, read once, and a call that finishes in the
            // poll gives its duration back: two clock reads fewer per job.
            let polled = Instant::now();
            let mut call = self.clone().call_one(h, job, Some(polled));
            let (result, took) = match call.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
                Poll::Ready((result, took)) => (Some(result), took),
                Poll::Pending => (None, polled.elapsed()),
            };
            self.inline.took(took);
            if let Some(result) = result {
                // Outcome first, permit after: the wave sends the one, then drops the other.
                wave.done.push(Done {
                    outcome: self.outcome(&run_job, result),
                    id: run_job.id,
                    lease: run_job.lease,
                });
                wave.permits.push(permit);
                return;
            }
            call
        } else {
            self.clone().call_one(h, job, None)
        };
        if !later {
            wave.started.push(run_job.lease);
        }
        self.spawn_call(run_job, call, permit);
    }

    /// Spawns the run of one job, registered in [`Runs`](super::Runs); returns its task.
    pub(crate) fn spawn_one(self: &Arc<Self>, h: Arc<dyn Handler>, job: Job, permit: Permit) -> JoinHandle {
        let run_job = RunJob::of(&job, self.rules.by_kind());
        let call = self.clone().call_one(h, job, None);
        self.spawn_call(run_job, call, permit)
    }

    /// Spawns the rest of a job's call, registered in [`Runs`](super::Runs); returns its task.
    fn spawn_call(self: &Arc<Self>, run_job: RunJob, call: Call, permit: Permit) -> JoinHandle {
        let key = self.runs.start(vec![run_job.clone()]);
        let this = self.clone();
        let task = tokio::spawn(async move {
            let (result, _) = call.await;
            if !this.runs.end(key) {
                return; // abandoned at shutdown: its outcome is sent already
            }
            // Outcome first, permit after: shutdown waits for the limit to go idle before
            // it lets the acker finish, so the outcome is on its way by then.
            this.finish(run_job, result).await;
            drop(permit);
        });
        self.runs.set_abort(key, task.abort_handle());
        task
    }

    /// Spawns the run of a batch handler call, registered in [`Runs`](super::Runs); returns its task.
    pub(crate) fn spawn_batch(
        self: &Arc<Self>,
        h: Arc<dyn BatchHandler>,
        jobs: Vec<Job>,
        permit: Permit,
    ) -> JoinHandle {
        let key = self
            .runs
            .start(jobs.iter().map(|j| RunJob::of(j, self.rules.by_kind())).collect());
        let task = tokio::spawn(self.clone().run_batch(h, jobs, permit, key));
        self.runs.set_abort(key, task.abort_handle());
        task
    }

    /// One job's handler call, guarded, its latency told to the limiter and the metrics;
    /// started at `started` (else when first polled). Its result comes with its duration.
    fn call_one(self: Arc<Self>, h: Arc<dyn Handler>, job: Job, started: Option<Instant>) -> Call {
        Box::pin(async move {
            let enqueued_at = job.enqueued_at_ms;
            let kind = self.metrics.kinds.of(&job.kind);
            let start = job.start.clone();
            let started = started.unwrap_or_else(Instant::now);
            let key = self.key_limiters.as_ref().and(job.key.clone());
            if let (Some(kl), Some(k)) = (&self.key_limiters, &key) {
                kl.started(k, started);
            }
            let (result, signal) = match self.guarded(|| h.call(job)).await {
                Ok(r) => {
                    let s = Signal::of(&r);
                    (r, s)
                }
                Err((e, s)) => (Err(e), s),
            };
            // A run that started later than its call is timed from its start.
            let started = start.and_then(|s| s.at()).unwrap_or(started);
            let elapsed = started.elapsed();
            match (&self.key_limiters, &key) {
                (Some(kl), Some(k)) => {
                    kl.finished(k, started, elapsed, signal);
                }
                _ => self.record(started, elapsed, std::iter::once(signal)),
            }
            self.metrics.job_duration.record(elapsed.as_secs_f64());
            kind.record(elapsed.as_secs_f64(), result.is_ok());
            self.record_latency(enqueued_at, 1);
            (result, elapsed)
        })
    }

    async fn run_batch(self: Arc<Self>, h: Arc<dyn BatchHandler>, jobs: Vec<Job>, permit: Permit, key: u64) {
        let run_jobs: Vec<RunJob> = jobs.iter().map(|j| RunJob::of(j, self.rules.by_kind())).collect();
        let oldest = jobs
            .iter()
            .map(|j| j.enqueued_at_ms)
            .filter(|&t| t > 0)
            .min()
            .unwrap_or(0);
        let kinds: Vec<_> = jobs.iter().map(|j| self.metrics.kinds.of(&j.kind)).collect();
        let n = run_jobs.len();
        let started = Instant::now();
        let keys: Vec<Option<String>> = match &self.key_limiters {
            Some(kl) => jobs
                .iter()
                .map(|j| {
                    if let Some(k) = &j.key {
                        kl.started(k, started);
                    }
                    j.key.clone()
                })
                .collect(),
            None => Vec::new(),
        };
        let (results, failed) = match self.guarded(|| h.call(jobs)).await {
            Ok(mut rs) => {
                if rs.len() != n {
                    let msg = format!("batch handler returned {} results for {n} jobs", rs.len());
                    rs.resize(n, Err(JobError::retry(msg)));
                }
                (rs, None)
            }
            Err((e, s)) => (vec![Err(e); n], Some(s)),
        };
        let elapsed = started.elapsed();
        self.metrics.job_duration.record_many(elapsed.as_secs_f64(), n);
        for (k, r) in kinds.iter().zip(&results) {
            k.record(elapsed.as_secs_f64(), r.is_ok());
        }
        self.record_latency(oldest, n);
        // One sample per job, all with the call's latency: windows count jobs.
        let signals = results.iter().map(|r| failed.unwrap_or_else(|| Signal::of(r)));
        match &self.key_limiters {
            Some(kl) => {
                let mut keyless = Vec::new();
                for (key, signal) in keys.iter().zip(signals) {
                    match key {
                        Some(k) => {
                            kl.finished(k, started, elapsed, signal);
                        }
                        None => keyless.push(signal),
                    }
                }
                self.record(started, elapsed, keyless.into_iter());
            }
            None => self.record(started, elapsed, signals),
        }
        if !self.runs.end(key) {
            return; // abandoned at shutdown: see spawn_call
        }
        for (run_job, result) in run_jobs.into_iter().zip(results) {
            self.finish(run_job, result).await;
        }
        drop(permit); // after the outcomes: see spawn_call
    }

    /// Calls a handler (`call` makes its future) and runs the future, turning a panic (in
    /// either) or a timeout into a retryable error. For the limiter a timeout is an error
    /// (the downstream is too slow) and a panic is ignored (a bug in the handler says
    /// nothing about the downstream).
    async fn guarded<T>(
        &self,
        call: impl FnOnce() -> futures_util::future::BoxFuture<'static, T>,
    ) -> Result<T, (JobError, Signal)> {
        let panicked = |panic: Box<dyn std::any::Any + Send>| {
            let msg = panic_message(&*panic);
            (
                JobError::retry(format!("handler panicked: {msg}")),
                Signal::Ignored,
            )
        };
        let fut = std::panic::catch_unwind(AssertUnwindSafe(call)).map_err(panicked)?;
        let fut = AssertUnwindSafe(fut).catch_unwind();
        let caught = match self.config.job_timeout {
            Some(t) => match tokio::time::timeout(t, fut).await {
                Ok(r) => r,
                Err(_) => {
                    let msg = format!("timed out after {}", humantime::format_duration(t));
                    return Err((JobError::overloaded(msg), Signal::Overload));
                }
            },
            None => fut.await,
        };
        caught.map_err(panicked)
    }

    /// Tells the limiter (when the limit is adaptive) how the jobs of one call, started at
    /// `started` and `elapsed` long, went.
    fn record(&self, started: Instant, elapsed: Duration, signals: impl Iterator<Item = Signal>) {
        if let Some(l) = &self.limiter {
            l.record_batch(started, elapsed, signals);
        }
    }

    /// End-to-end latency, enqueue (producer's clock) to outcome; a clock behind the
    /// producer's reads as zero, an unknown enqueue time (0: a compact envelope whose id
    /// holds none) is not recorded.
    fn record_latency(&self, enqueued_at_ms: u64, n: usize) {
        if enqueued_at_ms == 0 {
            return;
        }
        let now = crate::queue::envelope::unix_ms();
        let secs = now.saturating_sub(enqueued_at_ms) as f64 / 1000.0;
        self.metrics.job_latency.record_many(secs, n);
    }

    /// Sends the outcome of a job's run.
    async fn finish(&self, run_job: RunJob, result: JobResult) {
        let outcome = self.outcome(&run_job, result);
        let RunJob { id, lease, .. } = run_job;
        // The acker outlives every worker; a closed channel means the process is exiting
        // and the lease brings the job back.
        let _ = self.acker.send(AckerMsg::Done(Done { id, lease, outcome })).await;
    }

    /// The outcome of the run of `run_job` (its kind given when a kind has a retry
    /// rule) at its `attempt` of `max_attempts`. Backpressure is not a failure of the job: it is
    /// deferred, uncharged, within the deferral budget. A failure's delay and the runs
    /// allowed come from the job's own rule, else the retry rules in force now (kind,
    /// else queue), else this consumer's policy and the envelope's count.
    fn outcome(&self, run_job: &RunJob, result: JobResult) -> Outcome {
        let (attempt, max_attempts) = (run_job.attempt, run_job.max_attempts);
        match result {
            Ok(()) => Outcome::Ack,
            Err(e) if e.kind == JobErrorKind::Backpressure => {
                let c = &self.config;
                let delay = e.retry_after.unwrap_or_else(|| c.retry.delay(0));
                Outcome::Defer {
                    delay_ms: delay.min(c.max_defer_delay).as_millis() as u64,
                    reason: e.message,
                    budget: c.deferral_budget,
                    cause: DeferReason::Backpressure,
                }
            }
            Err(e) if e.is_retryable() => {
                let rules = self.rules.get();
                let own = run_job.rule.as_deref().and_then(own_rule);
                let rule = own.as_ref().or_else(|| rules.rule(run_job.kind.as_deref()));
                let delay = e.retry_after.unwrap_or_else(|| match rule {
                    Some(r) => r.delay(attempt),
                    None => self.config.retry.delay(attempt),
                });
                let max = rule.and_then(|r| r.attempts);
                Outcome::Retry {
                    delay_ms: delay.as_millis() as u64,
                    error: e.message,
                    spent: attempt.saturating_add(1) >= max.unwrap_or(max_attempts),
                    max,
                }
            }
            Err(e) => Outcome::Dead { reason: e.message },
        }
    }
}

/// A job's own rule from its envelope's spec; one that does not parse (written by hand
/// or by a client that checks less) is reported and the queue's rules apply.
fn own_rule(spec: &str) -> Option<crate::queue::retry_rules::RetryRule> {
    spec.parse()
        .map_err(|e| tracing::warn!(spec, error = %e, "a job's own retry rule does not parse: the kind's or queue's rule applies"))
        .ok()
}

/// A spawned run's task.
pub(crate) type JoinHandle = tokio::task::JoinHandle<()>;

/// A job's handler call, from its start to its result and how long it took.
type Call = futures_util::future::BoxFuture<'static, (JobResult, Duration)>;

/// What tells the acker of later starts ([`Handler::starts_later`]), made once per pool (in
/// the runtime): a start's lease joins a list, and the start that found the list empty
/// sends it to the acker, which takes it whole, so a wave of starts wakes the acker once.
/// (A full channel is waited for in a task of the runtime.) It holds the acker's channel
/// weakly: the acker ends once the pool and the runs are gone, whatever a handler still
/// holds past a shutdown's timeout.
pub(crate) fn start_marker(acker: &mpsc::Sender<AckerMsg>) -> MarkStart {
    let (acker, later) = (acker.downgrade(), StartedLater::default());
    let runtime = tokio::runtime::Handle::current();
    Arc::new(move |lease| {
        let first = {
            let mut l = later.lock().unwrap_or_else(|e| e.into_inner());
            l.push(lease);
            l.len() == 1
        };
        if !first {
            return;
        }
        let Some(acker) = acker.upgrade() else {
            return; // the consumer is gone
        };
        if let Err(mpsc::error::TrySendError::Full(msg)) =
            acker.try_send(AckerMsg::StartedLater(later.clone()))
        {
            runtime.spawn(async move {
                let _ = acker.send(msg).await;
            });
        }
    })
}
