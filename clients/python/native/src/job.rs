//! The job a Python handler gets, and the callback that settles it.

use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::oneshot;
use weir::{JobError, JobResult};

/// One job, as a handler sees it: `id`, `kind`, `payload` (the JSON decoded on first
/// use), `attempt` (failed runs so far: 0 on the first), `max_attempts` and `key`.
#[pyclass(name = "Job", module = "weir", frozen)]
#[derive(Debug)]
pub struct PyJob {
    #[pyo3(get)]
    id: String,
    #[pyo3(get)]
    kind: String,
    #[pyo3(get)]
    attempt: u32,
    #[pyo3(get)]
    max_attempts: u32,
    #[pyo3(get)]
    key: Option<String>,
    /// The payload as JSON text.
    #[pyo3(get)]
    payload_json: String,
    payload: OnceLock<Py<PyAny>>,
}

impl PyJob {
    /// The handler's view of `job`.
    pub fn new(job: &weir::Job) -> Self {
        Self {
            id: job.id.clone(),
            kind: job.kind.clone(),
            attempt: job.attempt,
            max_attempts: job.max_attempts,
            key: job.key.clone(),
            payload_json: job.payload_json().to_owned(),
            payload: OnceLock::new(),
        }
    }
}

static LOADS: GILOnceCell<Py<PyAny>> = GILOnceCell::new();

#[pymethods]
impl PyJob {
    /// The payload, decoded by `json.loads` (once; later reads return the same object).
    #[getter]
    fn payload(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        if let Some(p) = self.payload.get() {
            return Ok(p.clone_ref(py));
        }
        let loads = LOADS.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
            Ok(py.import("json")?.getattr("loads")?.unbind())
        })?;
        let value = loads.call1(py, (self.payload_json.as_str(),))?;
        Ok(self.payload.get_or_init(|| value).clone_ref(py))
    }

    fn __repr__(&self) -> String {
        format!(
            "Job(id={:?}, kind={:?}, attempt={})",
            self.id, self.kind, self.attempt
        )
    }
}

/// Settles one job: `done(None)` acks it, `done((code, message, after))` fails it (see
/// [`outcome`]). Called once; later calls do nothing.
#[pyclass(module = "weir", frozen)]
#[derive(Debug)]
pub struct Done {
    tx: Mutex<Option<oneshot::Sender<JobResult>>>,
}

impl Done {
    /// A callback that sends the outcome to `tx`.
    pub fn new(tx: oneshot::Sender<JobResult>) -> Self {
        Self {
            tx: Mutex::new(Some(tx)),
        }
    }
}

#[pymethods]
impl Done {
    fn __call__(&self, outcome: Option<(u8, String, Option<f64>)>) -> PyResult<()> {
        let result = outcome.map_or(Ok(()), |o| Err(failure(o)));
        if let Some(tx) = self.tx.lock().map_err(|_| poisoned())?.take() {
            let _ = tx.send(result);
        }
        Ok(())
    }
}

fn poisoned() -> PyErr {
    pyo3::exceptions::PyRuntimeError::new_err("a lock was poisoned")
}

// Outcome codes, as weir/__init__.py's `_outcome` writes them: 0 (any other code too) an
// exception, retried with the queue's policy; then `weir.Retry`, `weir.Backpressure`,
// `weir.Fatal`.
/// `weir.Retry(after=...)`.
pub(crate) const RETRY_AFTER: u8 = 1;
/// `weir.Backpressure(after=...)`.
pub(crate) const BACKPRESSURE: u8 = 2;
/// `weir.Fatal(...)`.
pub(crate) const FATAL: u8 = 3;

/// The job error an outcome tuple stands for.
pub(crate) fn failure((code, message, after): (u8, String, Option<f64>)) -> JobError {
    let after = after
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64);
    match code {
        RETRY_AFTER => JobError::retry(message).with_retry_after(after),
        BACKPRESSURE => JobError::backpressure(message, after),
        FATAL => JobError::fatal(message),
        _ => JobError::retry(message),
    }
}
