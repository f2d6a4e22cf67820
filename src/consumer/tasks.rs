//! The consumer's background tasks, supervised: a task that panics is logged, starts the
//! shutdown (so the other tasks still flush outcomes and release leases), and makes
//! [`crate::Consumer::run`] return [`Error::TaskFailed`]. A dead acker or fetcher never
//! goes unnoticed behind a consumer that looks alive.
//!
//! Tasks still running are aborted if `run` is dropped before it returns (an aborted
//! task, a caller's timeout or `select!`): without that they would go on fetching and
//! extending leases with nobody to stop them, and jobs stuck in a dead consumer would
//! never come back. Aborting tasks that already finished is a no-op.

use crate::error::Error;
use futures_util::FutureExt;
use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use tokio::task::{AbortHandle, JoinHandle};
use tokio_util::sync::CancellationToken;

/// The text of a panic's payload (`panic!` gives a `&str` or a `String`).
pub(crate) fn panic_message(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic".into())
}

/// The consumer's tasks: spawns them, and remembers which failed.
pub(crate) struct Tasks {
    failures: Arc<Mutex<Vec<Error>>>,
    /// Cancelled when a task fails: the first step of the shutdown order.
    on_failure: CancellationToken,
    aborts: Vec<AbortHandle>,
}

/// One spawned task, to wait for during the shutdown.
pub(crate) struct Task {
    name: &'static str,
    handle: JoinHandle<()>,
}

impl Tasks {
    /// Tasks whose failure cancels `on_failure`.
    pub(super) fn new(on_failure: CancellationToken) -> Self {
        Self {
            failures: Arc::default(),
            on_failure,
            aborts: Vec::new(),
        }
    }

    /// Spawns `fut` as the task `name`; a panic in it is caught, logged and recorded.
    pub(super) fn spawn(
        &mut self,
        name: &'static str,
        fut: impl Future<Output = ()> + Send + 'static,
    ) -> Task {
        let failures = self.failures.clone();
        let on_failure = self.on_failure.clone();
        let handle = tokio::spawn(async move {
            if let Err(panic) = AssertUnwindSafe(fut).catch_unwind().await {
                fail(&failures, &on_failure, name, panic_message(&*panic));
            }
        });
        self.aborts.push(handle.abort_handle());
        Task { name, handle }
    }

    /// Waits for `task` to end. (It cannot fail here: its panic was caught inside, and
    /// tasks are aborted only once `run` is gone; a join error is recorded all the same.)
    pub(super) async fn join(&self, task: Task) {
        if let Err(e) = task.handle.await {
            fail(&self.failures, &self.on_failure, task.name, e.to_string());
        }
    }

    /// The first failure, if any task failed.
    pub(super) fn failure(&self) -> Option<Error> {
        lock(&self.failures).drain(..).next()
    }
}

impl Drop for Tasks {
    fn drop(&mut self) {
        for t in &self.aborts {
            t.abort();
        }
    }
}

fn fail(failures: &Mutex<Vec<Error>>, on_failure: &CancellationToken, task: &'static str, detail: String) {
    tracing::error!(task, error = %detail, "consumer task failed; stopping the consumer");
    lock(failures).push(Error::TaskFailed { task, detail });
    on_failure.cancel();
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
