//! The job a Python handler gets, and the callback that settles it.

use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::oneshot;
use weir::{JobError, JobResult};

/// One job, as a handler sees it: `id`, `kind`, `payload` (the JSON decoded on first
/// use), `attempt` (failed runs so far: 0 on the first), `max_attempts`, `key`, and
/// `keeps_result` (its queue keeps completed jobs: the handler's return value is kept as
/// its result).
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
    #[pyo3(get)]
    keeps_result: bool,
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
            keeps_result: job.keeps_result(),
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

/// Settles one job: `done(None)` acks it, `done(text)` acks it with its result (the
/// handler's return value as JSON text), `done((code, message, after))` fails it (see
/// [`settled`]). Called once; later calls do nothing. `done.start()` marks the run's
/// start, for a job the loop held before it ran it.
#[pyclass(module = "weir", frozen)]
#[derive(Debug)]
pub struct Done {
    tx: Mutex<Option<(oneshot::Sender<JobResult>, Option<weir::Job>)>>,
    start: Option<weir::Start>,
}

impl Done {
    /// A callback that sends the outcome to `tx`, and a result to `job` while its queue
    /// keeps completed jobs (else the job is not held). The job's [`weir::Start`], if it
    /// has one, goes with it.
    pub fn new(tx: oneshot::Sender<JobResult>, mut job: weir::Job) -> Self {
        let start = job.take_start();
        let job = job.keeps_result().then_some(job);
        Self {
            tx: Mutex::new(Some((tx, job))),
            start,
        }
    }

    /// Whether the loop may hold the job before it runs it (it has a start to mark; a
    /// suspect has none and runs at once).
    pub fn holdable(&self) -> bool {
        self.start.is_some()
    }
}

#[pymethods]
impl Done {
    fn __call__(&self, outcome: &Bound<'_, PyAny>) -> PyResult<()> {
        if let Some((tx, job)) = self.tx.lock().map_err(|_| poisoned())?.take() {
            let _ = tx.send(settled(outcome, job.as_ref())?);
        }
        Ok(())
    }

    /// The job's run starts now: call just before its handler. False when it must not
    /// run: settled already, or let go by the engine while it was held (its run was
    /// given up at the end of a shutdown, and its lease released uncharged).
    fn start(&self) -> PyResult<bool> {
        let tx = self.tx.lock().map_err(|_| poisoned())?;
        match tx.as_ref() {
            Some((tx, _)) if !tx.is_closed() => {
                if let Some(s) = &self.start {
                    s.now();
                }
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

/// What a handler's call came to, as weir/__init__.py's `_call_sync` and `_finish` say:
/// `None` (done), a str (done, its result as JSON text: kept on `job` while its queue
/// keeps completed jobs) or an outcome tuple (failed).
pub(crate) fn settled(outcome: &Bound<'_, PyAny>, job: Option<&weir::Job>) -> PyResult<JobResult> {
    if outcome.is_none() {
        return Ok(Ok(()));
    }
    if let Ok(text) = outcome.extract::<String>() {
        if let Some(job) = job {
            job.set_result_text(text);
        }
        return Ok(Ok(()));
    }
    Ok(Err(failure(outcome.extract()?)))
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
