//! weir handlers that call Python: async handlers through the [`Inbox`], plain functions
//! on the threads of a [`SyncPool`].

use crate::inbox::Inbox;
use crate::job::{PyJob, settled};
use futures_util::future::BoxFuture;
use pyo3::prelude::*;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use tokio::sync::oneshot;
use weir::{Handler, Job, JobError, JobResult};

/// An async handler: the job goes to the asyncio loop, which calls the coroutine function
/// registered for its kind and answers through `Done`.
pub(crate) struct AsyncHandler(pub Arc<Inbox>);

impl Handler for AsyncHandler {
    /// The loop may hold a job until a slot of its own frees (`weir/_loop.py`).
    fn starts_later(&self) -> bool {
        true
    }

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

/// A plain function: its jobs go to the [`SyncPool`]'s threads.
pub(crate) struct SyncHandler {
    /// The user's function.
    pub function: Arc<Py<PyAny>>,
    /// The threads that call it.
    pub pool: Arc<SyncPool>,
}

impl Handler for SyncHandler {
    fn call(&self, job: Job) -> BoxFuture<'static, JobResult> {
        let (tx, rx) = oneshot::channel();
        self.pool.push(SyncJob {
            function: self.function.clone(),
            job,
            tx,
        });
        Box::pin(async move {
            rx.await
                .unwrap_or_else(|_| Err(JobError::retry("the worker stopped before the handler returned")))
        })
    }
}

/// A plain function's job, waiting for a thread.
pub(crate) struct SyncJob {
    function: Arc<Py<PyAny>>,
    job: Job,
    tx: oneshot::Sender<JobResult>,
}

/// The threads that run plain functions, started as jobs need them (at most `max_threads`,
/// each kept for later jobs). A thread takes a job without the GIL, then holds the GIL
/// while jobs keep waiting, calling one after another: a thread handing the GIL to
/// another per job (tokio's blocking pool, a thread per call) cost more than the calls
/// themselves. A function that blocks (I/O, `time.sleep`) releases the GIL, and the jobs
/// behind it go to other threads: each job queued wakes an idle thread not woken yet, or
/// starts one.
pub(crate) struct SyncPool {
    state: Mutex<PoolState>,
    wake: Condvar,
    /// Signalled as each thread ends.
    ended: Condvar,
    /// weir/__init__.py's `_call_sync`: `call(function, job)` returns `None` or an
    /// outcome tuple.
    call: Py<PyAny>,
    max_threads: usize,
}

#[derive(Default)]
struct PoolState {
    jobs: VecDeque<SyncJob>,
    threads: usize,
    /// Threads waiting for a job.
    idle: usize,
    /// Of them, those woken and not yet running: a job pushed meanwhile needs another.
    woken: usize,
    /// Threads running jobs (the others wait for one, or are starting or ending).
    busy: usize,
    stopping: bool,
}

impl SyncPool {
    /// A pool of at most `max_threads` threads calling `call(function, job)`.
    pub(crate) fn new(call: Py<PyAny>, max_threads: usize) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(PoolState::default()),
            wake: Condvar::new(),
            ended: Condvar::new(),
            call,
            max_threads: max_threads.max(1),
        })
    }

    fn lock(&self) -> MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(self: &Arc<Self>, job: SyncJob) {
        let mut s = self.lock();
        if s.stopping {
            // Dropping the job's sender retries it (the engine is shutting down).
            return;
        }
        s.jobs.push_back(job);
        if s.idle > s.woken {
            s.woken += 1;
            drop(s);
            self.wake.notify_one();
        } else if s.threads < self.max_threads {
            s.threads += 1;
            drop(s);
            let pool = self.clone();
            let spawned = std::thread::Builder::new()
                .name("weir-sync".into())
                .spawn(move || pool.serve());
            if let Err(e) = spawned {
                // The jobs wait for the threads there are; with none, they fail (retried).
                let mut s = self.lock();
                s.threads -= 1;
                self.ended.notify_all();
                if s.threads == 0 {
                    for j in s.jobs.drain(..) {
                        let message = format!("cannot start a thread for plain functions: {e}");
                        let _ = j.tx.send(Err(JobError::retry(message)));
                    }
                }
            }
        }
    }

    /// Stops the threads once the jobs queued are done; later jobs are refused (retried).
    /// Returns once every thread not running a function has ended (they take the GIL to
    /// end: the caller must not hold it). A function still running keeps its thread.
    pub(crate) fn stop(&self) {
        let mut s = self.lock();
        s.stopping = true;
        self.wake.notify_all();
        while s.threads > s.busy {
            s = self.ended.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// A thread: waits for a job without the GIL, then runs jobs while there are any.
    /// It keeps its Python thread state for its life (a `with_gil` per wait would create
    /// and destroy one each time), releasing the GIL while it waits.
    fn serve(&self) {
        Python::with_gil(|py| {
            let mut last: Option<(oneshot::Sender<JobResult>, JobResult)> = None;
            let mut ran = false;
            while let Some(first) = py.allow_threads(|| {
                // The last outcome wakes the engine once the GIL is free for others.
                if let Some((tx, result)) = last.take() {
                    let _ = tx.send(result);
                }
                self.next(ran)
            }) {
                ran = true;
                let mut job = Some(first);
                while let Some(j) = job {
                    let (tx, result) = self.run(py, j);
                    job = self.lock().jobs.pop_front();
                    if job.is_some() {
                        let _ = tx.send(result);
                    } else {
                        last = Some((tx, result));
                    }
                }
            }
        });
        self.lock().threads -= 1;
        self.ended.notify_all();
    }

    /// The next job, waiting for one; `None` once stopping with nothing queued. `ran`: the
    /// thread comes from running jobs.
    fn next(&self, ran: bool) -> Option<SyncJob> {
        let mut s = self.lock();
        if ran {
            s.busy -= 1;
        }
        loop {
            if let Some(j) = s.jobs.pop_front() {
                s.busy += 1;
                return Some(j);
            }
            if s.stopping {
                return None;
            }
            s.idle += 1;
            s = self.wake.wait(s).unwrap_or_else(|e| e.into_inner());
            s.idle -= 1;
            s.woken = s.woken.saturating_sub(1);
        }
    }

    /// Calls a job's function: its outcome, and where it goes.
    fn run(
        &self,
        py: Python<'_>,
        SyncJob { function, job, tx }: SyncJob,
    ) -> (oneshot::Sender<JobResult>, JobResult) {
        let result = (|| -> PyResult<JobResult> {
            let view = Py::new(py, PyJob::new(&job))?;
            let outcome = self.call.call1(py, (function.clone_ref(py), view))?;
            settled(outcome.bind(py), Some(&job))
        })();
        let result =
            result.unwrap_or_else(|e| Err(JobError::retry(format!("calling the handler failed: {e}"))));
        (tx, result)
    }
}
