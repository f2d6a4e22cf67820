//! The worker pool: takes decoded jobs from the fetcher's channel, routes each by kind,
//! and runs it under the concurrency [`Limit`] (after a token from the optional rate
//! limit), catching panics and timeouts. Outcomes go to the acker; with an adaptive
//! limiter, each job's latency and outcome class also go to the [`Limiter`].
//!
//! The acker is told which jobs started, one message per dispatch wave (the jobs started
//! while slots were free), so their start marks travel with its writes. A suspect (a job
//! that was running when a consumer died) runs alone: one at a time (its own gate, besides
//! a concurrency slot), its start marked in Redis before it runs (`suspect.rs`). Every run
//! is registered (`runs.rs`), so the shutdown can abort the ones that outlive it.

use crate::consumer::acker::{AckerMsg, Done, Outcome};
use crate::consumer::buffer::Buffer;
use crate::consumer::config::check;
use crate::consumer::runs::{Head, Runs};
use crate::consumer::suspect::Suspects;
use crate::consumer::tasks::panic_message;
use crate::error::Result;
use crate::handler::{BatchHandler, Handler, JobError, JobResult, Registry, Route};
use crate::limiter::limit::{Limit, Permit};
use crate::limiter::{Limiter, RateGate, Signal};
use crate::metrics::{DeferReason, QueueMetrics};
use crate::queue::envelope::Job;
use crate::queue::retry::{DeferralBudget, RetryPolicy};
use futures_util::FutureExt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The shortest `job_timeout` accepted. Under it the timer measures the scheduler rather
/// than the handler: a job may be abandoned before its handler was even polled (0 s
/// abandons every job, and they end dead-lettered without having run). Tokio's timer
/// ticks in milliseconds, and a busy runtime delays a task's first poll by a few; 10 ms
/// leaves room for both while staying below any timeout a real handler would want.
pub const MIN_JOB_TIMEOUT: Duration = Duration::from_millis(10);

/// Pool settings. (How many jobs run at once is the consumer's `concurrency` and
/// `limiter`: the limit is shared with the fetcher's prefetch.)
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct PoolConfig {
    /// A job running longer is abandoned and retried (default none; at least
    /// [`MIN_JOB_TIMEOUT`], 10 ms).
    pub job_timeout: Option<Duration>,
    /// Backoff of retryable failures, any values (the jitter is clamped into 0..=1 where
    /// it is used; default [`RetryPolicy::default`]). A deferral without a `Retry-After`
    /// waits the backoff of a first failure.
    pub retry: RetryPolicy,
    /// How often, or for how long, a job may be deferred before it is dead-lettered:
    /// for backpressure (HTTP 429/503, [`JobError::backpressure`]), or because its lease
    /// expired before its run started (a killed consumer's buffer, a lost fetch reply;
    /// counted by the reclaimer). Deferrals charge no attempt (default 1,000 deferrals or
    /// 24 h, whichever comes first).
    pub deferral_budget: DeferralBudget,
    /// Longest wait of one deferral: a `Retry-After` beyond it is cut to it, any duration
    /// (default 5 min).
    pub max_defer_delay: Duration,
    /// How long a job this consumer cannot take (a kind it has no handler for, an envelope
    /// over its size limit) is deferred, uncharged, for a consumer that can (a rolling
    /// deploy), before it is dead-lettered with the reason; at least 1 ms (default 1 h).
    /// It comes back every tenth of this, at most every 10 s.
    pub unknown_kind_grace: Duration,
}

impl PoolConfig {
    /// Default of [`PoolConfig::max_defer_delay`].
    pub const DEFAULT_MAX_DEFER_DELAY: Duration = Duration::from_secs(300);
    /// Default of [`PoolConfig::unknown_kind_grace`].
    pub const DEFAULT_UNKNOWN_KIND_GRACE: Duration = Duration::from_secs(3600);

    /// Checks every value against its range, with a message that names it.
    pub fn validate(&self) -> Result<()> {
        check(
            self.job_timeout.is_none_or(|t| t >= MIN_JOB_TIMEOUT),
            "job timeout must be at least 10ms",
        )?;
        check(
            self.unknown_kind_grace >= Duration::from_millis(1),
            "unknown-kind grace must be at least 1ms",
        )
    }
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self {
            job_timeout: None,
            retry: RetryPolicy::default(),
            deferral_budget: DeferralBudget::default(),
            max_defer_delay: Self::DEFAULT_MAX_DEFER_DELAY,
            unknown_kind_grace: Self::DEFAULT_UNKNOWN_KIND_GRACE,
        }
    }
}

/// Longest wait between two deferrals of a job no handler here can take.
const CANNOT_TAKE_MAX_DELAY: Duration = Duration::from_secs(10);

/// The outcome of a job this consumer cannot take (`why` says which: an unknown kind, an
/// envelope over the size limit): deferred every tenth of `grace` (at most every 10 s)
/// until `grace` has passed since the first deferral, then dead with `why`.
pub(crate) fn cannot_take(grace: Duration, cause: DeferReason, why: String) -> Outcome {
    Outcome::Defer {
        delay_ms: (grace / 10).min(CANNOT_TAKE_MAX_DELAY).as_millis() as u64,
        reason: why,
        budget: DeferralBudget::for_time(grace),
        cause,
    }
}

/// The worker pool task.
pub(crate) struct Pool {
    pub config: PoolConfig,
    pub registry: Arc<Registry>,
    pub limit: Arc<Limit>,
    /// Told of every finished job when the limit is adaptive.
    pub limiter: Option<Arc<Limiter>>,
    /// Jobs/s cap, taken before a concurrency slot.
    pub rate: Arc<RateGate>,
    pub buffer: Arc<Buffer>,
    pub acker: mpsc::Sender<AckerMsg>,
    pub metrics: QueueMetrics,
    /// The runs going on, for the shutdown to abort.
    pub runs: Arc<Runs>,
    /// How suspects start.
    pub suspects: Suspects,
}

impl Pool {
    /// Runs jobs until `shutdown`; un-started jobs are left to the acker to release.
    pub async fn run(self, mut jobs: mpsc::UnboundedReceiver<Vec<Job>>, shutdown: CancellationToken) {
        let this = Arc::new(self);
        loop {
            let batch = tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                b = jobs.recv() => match b { Some(b) => b, None => break },
            };
            if !this.dispatch(batch, &shutdown).await {
                break;
            }
        }
    }

    /// Starts every job of a fetched batch; false if shutdown came first.
    async fn dispatch(self: &Arc<Self>, batch: Vec<Job>, shutdown: &CancellationToken) -> bool {
        self.metrics.channel_received.increment(batch.len() as u64);
        let mut groups: Vec<(Arc<dyn BatchHandler>, Vec<Job>)> = Vec::new();
        // Jobs started and not yet reported to the acker.
        let mut wave: Vec<String> = Vec::new();
        for job in batch {
            if job.is_suspect() && self.registry.route(&job.kind).is_some() {
                tokio::spawn(self.clone().run_suspect(job, shutdown.clone()));
                continue;
            }
            match self.registry.route(&job.kind) {
                None => {
                    self.buffer.take(1);
                    let why = format!("unknown job kind {:?}: no handler for it", job.kind);
                    let grace = self.config.unknown_kind_grace;
                    let done = AckerMsg::Done(Done {
                        id: job.id,
                        outcome: cannot_take(grace, DeferReason::UnknownKind, why),
                    });
                    if !self.tell(done, shutdown).await {
                        return false;
                    }
                }
                Some(Route::One(h)) => {
                    let Some(permit) = self.permit_reporting(&mut wave, shutdown).await else {
                        return false;
                    };
                    self.buffer.take(1);
                    wave.push(job.id.clone());
                    self.spawn_one(h.clone(), job, permit);
                }
                Some(Route::Batch(h)) => {
                    let max = h.max_batch().max(1);
                    let i = match groups.iter().position(|(g, _)| Arc::ptr_eq(g, h)) {
                        Some(i) => i,
                        None => {
                            groups.push((h.clone(), Vec::with_capacity(max)));
                            groups.len() - 1
                        }
                    };
                    groups[i].1.push(job);
                    if groups[i].1.len() >= max {
                        let (h, jobs) = groups.swap_remove(i);
                        if !self.start_batch(h, jobs, &mut wave, shutdown).await {
                            return false;
                        }
                    }
                }
            }
        }
        for (h, jobs) in groups {
            if !self.start_batch(h, jobs, &mut wave, shutdown).await {
                return false;
            }
        }
        self.report_started(&mut wave, shutdown).await
    }

    /// Sends `msg` to the acker; false if shutdown came first (the acker's channel is
    /// bounded: a full one waits for its writes).
    async fn tell(&self, msg: AckerMsg, shutdown: &CancellationToken) -> bool {
        tokio::select! {
            biased;
            r = self.acker.send(msg) => r.is_ok(),
            _ = shutdown.cancelled() => false,
        }
    }

    /// Tells the acker which jobs of `wave` started (and empties it).
    async fn report_started(&self, wave: &mut Vec<String>, shutdown: &CancellationToken) -> bool {
        if wave.is_empty() {
            return true;
        }
        self.tell(AckerMsg::Started(std::mem::take(wave)), shutdown).await
    }

    /// [`Self::permit`]; if none is free at once, the jobs started so far are reported
    /// before waiting for one: a wave of starts is one message, not one per job.
    async fn permit_reporting(&self, wave: &mut Vec<String>, shutdown: &CancellationToken) -> Option<Permit> {
        let permit = self.permit(shutdown);
        tokio::pin!(permit);
        if let Poll::Ready(p) = futures_util::poll!(&mut permit) {
            return p;
        }
        if !self.report_started(wave, shutdown).await {
            return None;
        }
        permit.await
    }

    /// A rate token, then a slot. In that order: a job waiting on the rate must not hold
    /// a slot, or the concurrency limit would look binding and grow for nothing.
    pub(crate) async fn permit(&self, shutdown: &CancellationToken) -> Option<Permit> {
        tokio::select! {
            biased;
            _ = shutdown.cancelled() => None,
            p = async {
                self.rate.until_ready().await;
                self.limit.acquire().await
            } => Some(p),
        }
    }

    /// When the job starts, if a limiter wants its latency (one clock read per job).
    /// Tells the limiter (when the limit is adaptive) how the jobs of one call went.
    fn record(&self, started: Instant, signals: impl Iterator<Item = Signal>) {
        if let Some(l) = &self.limiter {
            l.record_batch(started, started.elapsed(), signals);
        }
    }

    async fn start_batch(
        self: &Arc<Self>,
        h: Arc<dyn BatchHandler>,
        jobs: Vec<Job>,
        wave: &mut Vec<String>,
        shutdown: &CancellationToken,
    ) -> bool {
        let Some(permit) = self.permit_reporting(wave, shutdown).await else {
            return false;
        };
        self.buffer.take(jobs.len());
        wave.extend(jobs.iter().map(|j| j.id.clone()));
        self.spawn_batch(h, jobs, permit);
        true
    }

    /// Spawns the run of one job, registered in [`Runs`]; returns its task.
    pub(crate) fn spawn_one(self: &Arc<Self>, h: Arc<dyn Handler>, job: Job, permit: Permit) -> JoinHandle {
        let key = self.runs.start(vec![head(&job)]);
        let task = tokio::spawn(self.clone().run_one(h, job, permit, key));
        self.runs.set_abort(key, task.abort_handle());
        task
    }

    /// Spawns the run of a batch handler call, registered in [`Runs`]; returns its task.
    pub(crate) fn spawn_batch(
        self: &Arc<Self>,
        h: Arc<dyn BatchHandler>,
        jobs: Vec<Job>,
        permit: Permit,
    ) -> JoinHandle {
        let key = self.runs.start(jobs.iter().map(head).collect());
        let task = tokio::spawn(self.clone().run_batch(h, jobs, permit, key));
        self.runs.set_abort(key, task.abort_handle());
        task
    }

    async fn run_one(self: Arc<Self>, h: Arc<dyn Handler>, job: Job, permit: Permit, key: u64) {
        let (id, attempt) = (job.id.clone(), (job.attempt, job.max_attempts));
        let enqueued_at = job.enqueued_at_ms;
        let started = Instant::now();
        let (result, signal) = match self.guarded(h.call(job)).await {
            Ok(r) => {
                let s = Signal::of(&r);
                (r, s)
            }
            Err((e, s)) => (Err(e), s),
        };
        self.record(started, std::iter::once(signal));
        self.metrics.job_duration.record(started.elapsed().as_secs_f64());
        self.record_latency(enqueued_at, 1);
        if !self.runs.end(key) {
            return; // abandoned at shutdown: its outcome is sent already
        }
        // Outcome first, permit after: shutdown waits for the limit to go idle before it
        // lets the acker finish, so the outcome is on its way by then.
        self.finish(id, attempt, result).await;
        drop(permit);
    }

    async fn run_batch(self: Arc<Self>, h: Arc<dyn BatchHandler>, jobs: Vec<Job>, permit: Permit, key: u64) {
        let heads: Vec<(String, (u32, u32))> = jobs
            .iter()
            .map(|j| (j.id.clone(), (j.attempt, j.max_attempts)))
            .collect();
        let oldest = jobs.iter().map(|j| j.enqueued_at_ms).min().unwrap_or(0);
        let n = heads.len();
        let started = Instant::now();
        let (results, failed) = match self.guarded(h.call(jobs)).await {
            Ok(mut rs) => {
                if rs.len() != n {
                    let msg = format!("batch handler returned {} results for {n} jobs", rs.len());
                    rs.resize(n, Err(JobError::retry(msg)));
                }
                (rs, None)
            }
            Err((e, s)) => (vec![Err(e); n], Some(s)),
        };
        self.metrics
            .job_duration
            .record_many(started.elapsed().as_secs_f64(), n);
        self.record_latency(oldest, n);
        // One sample per job, all with the call's latency: windows count jobs.
        self.record(
            started,
            results.iter().map(|r| failed.unwrap_or_else(|| Signal::of(r))),
        );
        if !self.runs.end(key) {
            return; // abandoned at shutdown: see run_one
        }
        for ((id, attempt), result) in heads.into_iter().zip(results) {
            self.finish(id, attempt, result).await;
        }
        drop(permit); // after the outcomes: see run_one
    }

    /// Runs a handler future, turning a panic or a timeout into a retryable error. For the
    /// limiter a timeout is an error (the downstream is too slow) and a panic is ignored
    /// (a bug in the handler says nothing about the downstream).
    async fn guarded<T>(
        &self,
        fut: futures_util::future::BoxFuture<'static, T>,
    ) -> Result<T, (JobError, Signal)> {
        let fut = AssertUnwindSafe(fut).catch_unwind();
        let caught = match self.config.job_timeout {
            Some(t) => match tokio::time::timeout(t, fut).await {
                Ok(r) => r,
                Err(_) => {
                    let msg = format!("timed out after {}", humantime::format_duration(t));
                    return Err((JobError::retry(msg), Signal::Error));
                }
            },
            None => fut.await,
        };
        caught.map_err(|panic| {
            let msg = panic_message(&*panic);
            (
                JobError::retry(format!("handler panicked: {msg}")),
                Signal::Ignored,
            )
        })
    }

    /// End-to-end latency, enqueue (producer's clock) to outcome; a clock behind the
    /// producer's reads as zero.
    fn record_latency(&self, enqueued_at_ms: u64, n: usize) {
        let now = crate::queue::envelope::unix_ms();
        let secs = now.saturating_sub(enqueued_at_ms) as f64 / 1000.0;
        self.metrics.job_latency.record_many(secs, n);
    }

    /// Sends the outcome of a job that ran at `(attempt, max_attempts)`. Backpressure is
    /// not a failure of the job: it is deferred, uncharged, within the deferral budget.
    async fn finish(&self, id: String, (attempt, max_attempts): (u32, u32), result: JobResult) {
        let outcome = match result {
            Ok(()) => Outcome::Ack,
            Err(e) if e.backpressure => {
                let c = &self.config;
                let delay = e.retry_after.unwrap_or_else(|| c.retry.delay(0));
                Outcome::Defer {
                    delay_ms: delay.min(c.max_defer_delay).as_millis() as u64,
                    reason: e.message,
                    budget: c.deferral_budget,
                    cause: DeferReason::Backpressure,
                }
            }
            Err(e) if e.retryable => {
                let delay = e.retry_after.unwrap_or_else(|| self.config.retry.delay(attempt));
                Outcome::Retry {
                    delay_ms: delay.as_millis() as u64,
                    error: e.message,
                    spent: attempt.saturating_add(1) >= max_attempts,
                }
            }
            Err(e) => Outcome::Dead { reason: e.message },
        };
        // The acker outlives every worker; a closed channel means the process is exiting
        // and the lease brings the job back.
        let _ = self.acker.send(AckerMsg::Done(Done { id, outcome })).await;
    }
}

/// A spawned run's task.
pub(crate) type JoinHandle = tokio::task::JoinHandle<()>;

fn head(job: &Job) -> Head {
    (job.id.clone(), (job.attempt, job.max_attempts))
}
