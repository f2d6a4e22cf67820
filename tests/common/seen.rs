//! Handlers that record every job they are called with, for tests that run a consumer.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use weir::{Job, JobResult, Registry, handler_fn};

/// Every job each handler call saw: id -> attempts, in call order.
#[derive(Clone, Default)]
pub(crate) struct Seen(pub Arc<Mutex<HashMap<String, Vec<u32>>>>);

impl Seen {
    pub(crate) fn record(&self, job: &Job) {
        let mut m = self.0.lock().unwrap();
        m.entry(job.id.clone()).or_default().push(job.attempt);
    }
    pub(crate) fn attempts(&self, id: &str) -> Vec<u32> {
        self.0.lock().unwrap().get(id).cloned().unwrap_or_default()
    }
    pub(crate) fn ids(&self) -> usize {
        self.0.lock().unwrap().len()
    }
    pub(crate) fn calls(&self) -> usize {
        self.0.lock().unwrap().values().map(Vec::len).sum()
    }
    /// A copy of everything seen so far.
    pub(crate) fn all(&self) -> HashMap<String, Vec<u32>> {
        self.0.lock().unwrap().clone()
    }

    /// A registry whose handler for `kind` records each job here, then does `then(job)`.
    pub(crate) fn recording<F, Fut>(&self, kind: &str, then: F) -> Registry
    where
        F: Fn(Job) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = JobResult> + Send + 'static,
    {
        let s = self.clone();
        Registry::new().on(
            kind,
            handler_fn(move |job| {
                s.record(&job);
                then(job)
            }),
        )
    }

    /// A registry whose handler for `kind` records each job here and acks it.
    pub(crate) fn acking(&self, kind: &str) -> Registry {
        self.recording(kind, |_| async { Ok(()) })
    }

    /// A registry whose handler for `kind` records each job here, runs `first` on a job's
    /// first attempt (to fail it: an error, a panic, a hang) and acks every later attempt.
    pub(crate) fn failing_first<F, Fut>(&self, kind: &str, first: F) -> Registry
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = JobResult> + Send + 'static,
    {
        self.recording(kind, move |job| {
            let first = (job.attempt == 0).then(&first);
            async move {
                match first {
                    Some(fail) => fail.await,
                    None => Ok(()),
                }
            }
        })
    }
}
