//! A job's result: what its handler leaves for the ack to keep with the completed job,
//! while the queue keeps completed jobs ([`Job::set_result`]).

use super::Job;

/// A job's result, shared by the job (its handler sets it) and its lease (the acker sends
/// it with the ack).
#[derive(Debug, Clone, Default)]
pub(crate) struct ResultSlot(std::sync::Arc<std::sync::Mutex<Option<String>>>);

impl ResultSlot {
    pub(crate) fn set(&self, text: String) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(text);
    }

    /// The result set, taken.
    pub(crate) fn take(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

impl Job {
    /// Keeps `value`, as JSON, as the job's result if this run succeeds and its queue
    /// keeps completed jobs (`weir limits set --keep-completed`): `weir job show`, `weir
    /// jobs --state done`, the web UI and `/api/job` show it with the kept job, and it
    /// goes with the job. At most [`RESULT_MAX_BYTES`](crate::queue::scripts::RESULT_MAX_BYTES)
    /// are kept (a longer one is cut). While the queue keeps no completed jobs this does
    /// nothing (`value` is not even serialized): see [`Job::keeps_result`]. A later call
    /// replaces the result; a run that fails keeps none.
    ///
    /// ```no_run
    /// # use weir::{handler_fn, JobError};
    /// let h = handler_fn(|job| async move {
    ///     let n: u64 = job.payload().map_err(|e| JobError::fatal(e.to_string()))?;
    ///     job.set_result(&serde_json::json!({ "squared": n * n }))
    ///         .map_err(|e| JobError::fatal(e.to_string()))?;
    ///     Ok(())
    /// });
    /// ```
    pub fn set_result<T: serde::Serialize + ?Sized>(&self, value: &T) -> Result<(), serde_json::Error> {
        if let Some(slot) = &self.result {
            slot.set(serde_json::to_string(value)?);
        }
        Ok(())
    }

    /// [`Job::set_result`] with text as it is (JSON already, or a snippet of an answer).
    pub fn set_result_text(&self, text: impl Into<String>) {
        if let Some(slot) = &self.result {
            slot.set(text.into());
        }
    }

    /// Whether a result set now is kept: the queue kept completed jobs when this job was
    /// fetched. A handler may skip building a costly result otherwise.
    pub fn keeps_result(&self) -> bool {
        self.result.is_some()
    }
}
