//! What users write: per-job and batch handlers, their errors, and the registry that picks
//! a handler by job kind.

#[cfg(feature = "exec")]
pub mod exec;
#[cfg(feature = "http")]
pub mod http;

pub use crate::queue::envelope::Start;

use crate::limiter::Signal;
use crate::queue::envelope::Job;
use futures_util::future::BoxFuture;
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// What a handler's failure means for its job and for the concurrency limiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum JobErrorKind {
    /// A failure worth retrying: the job runs again after a backoff, charged an attempt,
    /// and is dead-lettered once its attempts are spent. The job's own failure: the
    /// limiter does not shrink for it (unless its HTTP status says overload).
    Retry,
    /// A failure no retry will cure: the job goes straight to the dead-letter queue.
    Fatal,
    /// The downstream could not take the call at all (it timed out, refused or reset the
    /// connection): retried like [`JobErrorKind::Retry`], and the limiter counts it as
    /// congestion.
    Overloaded,
    /// The downstream asked us to slow down (HTTP 429/503 and the like). Not a failure of
    /// the job: it is deferred, put back without charging an attempt, within the pool's
    /// deferral budget ([`crate::PoolConfig::deferral_budget`]); and the limiter
    /// counts it as congestion.
    Backpressure,
}

/// How a job failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobError {
    /// The error text, kept as the job's last error.
    pub message: String,
    /// What the failure means: retry, dead-letter, overload or backpressure.
    pub kind: JobErrorKind,
    /// Run again no sooner than this (for example from `Retry-After`; a deferral's delay is
    /// capped by [`crate::PoolConfig::max_defer_delay`]).
    pub retry_after: Option<Duration>,
    /// The HTTP status the downstream answered, if any: the limiter decides by its
    /// `overload_status` setting (429 and 503 by default) whether it means overload.
    pub status: Option<u16>,
}

impl JobError {
    /// An error of `kind`, with no delay and no HTTP status.
    pub fn new(kind: JobErrorKind, message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            kind,
            retry_after: None,
            status: None,
        }
    }

    /// A failure worth retrying with backoff.
    pub fn retry(message: impl Into<String>) -> Self {
        Self::new(JobErrorKind::Retry, message)
    }

    /// The downstream could not take the call (a timeout, a refused or reset
    /// connection): retried with backoff, and the limiter slows down.
    pub fn overloaded(message: impl Into<String>) -> Self {
        Self::new(JobErrorKind::Overloaded, message)
    }

    /// The same error, recording the HTTP status the downstream answered (which the
    /// limiter classifies: see [`JobError::status`]).
    pub fn with_status(self, status: u16) -> Self {
        Self {
            status: Some(status),
            ..self
        }
    }

    /// The same error, to run again no sooner than `after` (see [`JobError::retry_after`]).
    pub fn with_retry_after(self, after: Option<Duration>) -> Self {
        Self {
            retry_after: after,
            ..self
        }
    }

    /// A failure no retry will cure: the job goes straight to the dead-letter queue.
    pub fn fatal(message: impl Into<String>) -> Self {
        Self::new(JobErrorKind::Fatal, message)
    }

    /// The downstream is overloaded: put the job back without charging an attempt, to run
    /// again after `retry_after` (or the backoff), and slow down.
    pub fn backpressure(message: impl Into<String>, retry_after: Option<Duration>) -> Self {
        Self::new(JobErrorKind::Backpressure, message).with_retry_after(retry_after)
    }

    /// True when the job may run again (every kind but [`JobErrorKind::Fatal`]).
    pub fn is_retryable(&self) -> bool {
        self.kind != JobErrorKind::Fatal
    }
}

impl std::fmt::Display for JobError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for JobError {}

/// The result of one job.
pub type JobResult = Result<(), JobError>;

/// Handles one job at a time; the pool runs as many at once as the limit allows.
pub trait Handler: Send + Sync + 'static {
    /// Runs the job. A panic counts as a retryable failure.
    fn call(&self, job: Job) -> BoxFuture<'static, JobResult>;

    /// Whether this handler may hold a job before it runs it (slots of its own, fed
    /// ahead of them). If so, each job it is called with carries a [`Start`]
    /// ([`Job::take_start`]) that it fires when the job's run really starts: the
    /// consumer marks the job as started then, not at the call, so a job held when its
    /// consumer dies comes back as one that never ran (not as a suspect). A suspect
    /// ([`Job::is_suspect`]) carries none and must start at once. The call still holds a
    /// slot of the consumer's limit from the call on, and a job timeout counts from it.
    fn starts_later(&self) -> bool {
        false
    }
}

/// Handles up to [`BatchHandler::max_batch`] jobs of one kind at once.
pub trait BatchHandler: Send + Sync + 'static {
    /// Runs the jobs; returns one result per job, in order. Missing results count as
    /// retryable failures; a panic fails the whole batch as retryable.
    fn call(&self, jobs: Vec<Job>) -> BoxFuture<'static, Vec<JobResult>>;

    /// The most jobs per call.
    fn max_batch(&self) -> usize {
        100
    }
}

/// A [`Handler`] from an async closure: `handler_fn(|job| async move { Ok(()) })`.
pub fn handler_fn<F, Fut>(f: F) -> HandlerFn<F>
where
    F: Fn(Job) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = JobResult> + Send + 'static,
{
    HandlerFn(f)
}

/// See [`handler_fn`].
pub struct HandlerFn<F>(F);

impl<F> std::fmt::Debug for HandlerFn<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HandlerFn")
    }
}

impl<F, Fut> Handler for HandlerFn<F>
where
    F: Fn(Job) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = JobResult> + Send + 'static,
{
    fn call(&self, job: Job) -> BoxFuture<'static, JobResult> {
        Box::pin((self.0)(job))
    }
}

/// Where the registry sends a kind.
#[derive(Clone)]
pub enum Route {
    /// A per-job handler.
    One(Arc<dyn Handler>),
    /// A batch handler.
    Batch(Arc<dyn BatchHandler>),
}

impl std::fmt::Debug for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Handlers are user types with no Debug bound: show the shape only.
        f.write_str(match self {
            Route::One(_) => "One",
            Route::Batch(_) => "Batch",
        })
    }
}

/// Dispatches jobs to handlers by kind. A kind with no handler (and no fallback) is
/// deferred, since a consumer started later may know it (a rolling deploy), and
/// dead-lettered with the reason once [`crate::PoolConfig::unknown_kind_grace`]
/// has passed.
#[derive(Clone, Default, Debug)]
pub struct Registry {
    routes: HashMap<String, Route>,
    fallback: Option<Route>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Handles jobs of `kind` with `h`.
    pub fn on(mut self, kind: impl Into<String>, h: impl Handler) -> Self {
        self.routes.insert(kind.into(), Route::One(Arc::new(h)));
        self
    }

    /// Handles jobs of `kind` in batches with `h`.
    pub fn on_batch(mut self, kind: impl Into<String>, h: impl BatchHandler) -> Self {
        self.routes.insert(kind.into(), Route::Batch(Arc::new(h)));
        self
    }

    /// Handles every kind without its own handler with `h`.
    pub fn fallback(mut self, h: impl Handler) -> Self {
        self.fallback = Some(Route::One(Arc::new(h)));
        self
    }

    /// Handles every kind without its own handler in batches with `h`.
    pub fn fallback_batch(mut self, h: impl BatchHandler) -> Self {
        self.fallback = Some(Route::Batch(Arc::new(h)));
        self
    }

    /// The route for `kind`, if any.
    pub fn route(&self, kind: &str) -> Option<&Route> {
        self.routes.get(kind).or(self.fallback.as_ref())
    }

    /// True when no kind is handled.
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty() && self.fallback.is_none()
    }
}

// The limiter's reading of a handler's result lives with the handler's types, so the
// limiter depends on nothing of the handler.
impl Signal {
    /// How a handler's result counts: success is a latency sample; an answered HTTP
    /// status is classified by the rule's `overload_status` (429/503 by default);
    /// backpressure and overload errors (timeouts, refused or reset connections) are
    /// overload; any other failure is the job's own.
    pub fn of(result: &JobResult) -> Self {
        match result {
            Ok(()) => Signal::Success,
            Err(e) => match e.status {
                Some(status) => Signal::Status(status),
                None if matches!(e.kind, JobErrorKind::Backpressure | JobErrorKind::Overloaded) => {
                    Signal::Overload
                }
                None => Signal::Failure,
            },
        }
    }
}
