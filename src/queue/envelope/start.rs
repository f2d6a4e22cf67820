//! A job's start, for a handler that holds jobs before it runs them: [`Start`].

use std::sync::{Arc, OnceLock};
use tokio::time::Instant;

/// The start of one job's run, for a [`Handler`](crate::Handler) that holds jobs before
/// it runs them ([`Handler::starts_later`](crate::Handler::starts_later)), as a pool of
/// its own fed ahead of its slots does. The consumer marks the job as started (from then
/// on, a consumer that dies makes it a suspect: it runs alone, and is charged if a
/// consumer dies during that run) and times it for the limiter from [`Start::now`], not
/// from the call. A job whose start never fired never ran: if its consumer dies it goes
/// back to ready, and a shutdown that lets it go releases it, as a job never started.
#[derive(Clone)]
pub struct Start(Arc<Inner>);

/// What tells the consumer's acker that the job holding a lease started: one for the
/// whole pool, shared by its jobs' starts.
pub(crate) type MarkStart = Arc<dyn Fn(u64) + Send + Sync>;

struct Inner {
    at: OnceLock<Instant>,
    lease: u64,
    mark: MarkStart,
}

impl std::fmt::Debug for Start {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Start").field("at", &self.0.at.get()).finish()
    }
}

impl Start {
    /// The start of the job holding `lease`, told through `mark` when it fires.
    pub(crate) fn new(lease: u64, mark: MarkStart) -> Self {
        Self(Arc::new(Inner {
            at: OnceLock::new(),
            lease,
            mark,
        }))
    }

    /// The job's run starts now. Once: later calls do nothing.
    pub fn now(&self) {
        if self.0.at.set(Instant::now()).is_ok() {
            (self.0.mark)(self.0.lease);
        }
    }

    /// When the run started, if it has.
    pub(crate) fn at(&self) -> Option<Instant> {
        self.0.at.get().copied()
    }
}
