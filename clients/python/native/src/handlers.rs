//! weir handlers that call Python: async handlers through the [`Inbox`], plain functions
//! on tokio's blocking threads.

use crate::inbox::Inbox;
use crate::job::{PyJob, failure};
use futures_util::future::BoxFuture;
use pyo3::prelude::*;
use std::sync::Arc;
use tokio::sync::oneshot;
use weir::{Handler, Job, JobError, JobResult};

/// An async handler: the job goes to the asyncio loop, which calls the coroutine function
/// registered for its kind and answers through `Done`.
pub struct AsyncHandler(pub Arc<Inbox>);

impl Handler for AsyncHandler {
    fn call(&self, job: Job) -> BoxFuture<'static, JobResult> {
        let (tx, rx) = oneshot::channel();
        self.0.push((job, tx));
        Box::pin(async move {
            rx.await.unwrap_or_else(|_| {
                Err(JobError::retry(
                    "the asyncio loop stopped before the job finished",
                ))
            })
        })
    }
}

/// A plain function: `call(function, job)` (weir's `_call_sync`) runs it on a blocking
/// thread and returns `None` or an outcome tuple.
pub struct SyncHandler {
    /// The user's function.
    pub function: Arc<Py<PyAny>>,
    /// weir/__init__.py's `_call_sync`.
    pub call: Arc<Py<PyAny>>,
}

impl Handler for SyncHandler {
    fn call(&self, job: Job) -> BoxFuture<'static, JobResult> {
        let (function, call) = (self.function.clone(), self.call.clone());
        Box::pin(async move {
            let run = tokio::task::spawn_blocking(move || {
                Python::with_gil(|py| -> PyResult<JobResult> {
                    let job = Py::new(py, PyJob::new(&job))?;
                    let outcome = call.call1(py, (function.clone_ref(py), job))?;
                    let outcome: Option<(u8, String, Option<f64>)> = outcome.extract(py)?;
                    Ok(outcome.map_or(Ok(()), |o| Err(failure(o))))
                })
            });
            match run.await {
                Ok(Ok(result)) => result,
                Ok(Err(e)) => Err(JobError::retry(format!("calling the handler failed: {e}"))),
                Err(e) => Err(JobError::retry(format!("the handler's thread failed: {e}"))),
            }
        })
    }
}
