//! The exec handler: runs jobs in worker processes of any language, which weir starts
//! (`sh -c CMD`, a pool of N) and talks to over stdin/stdout in NDJSON frames (the
//! protocol is docs/protocol.md, "exec handler protocol, version 1").
//!
//! Each call sends one `batch` frame, tagged with a batch id, to a process with room
//! (at most [`ExecConfig::inflight`] jobs in flight per process, many batches at once);
//! the process answers one outcome per job. A process that exits, closes its stdout or
//! writes a line that is not a frame is killed and restarted with backoff; the jobs it
//! held without an answer fail as retryable (charged an attempt: weir cannot tell which
//! job killed the process, and charging ends a job that kills every process it runs
//! in at its `max_attempts`, in the dead-letter queue, instead of looping). Its stderr
//! goes to weir's log, line by line. [`ExecHandler::shutdown`] closes every process's
//! stdin, waits for the outcomes still owed up to a grace, then kills.

mod child;
mod frame;

use crate::handler::{BatchHandler, JobError, JobResult};
use crate::queue::envelope::Job;
use futures_util::future::BoxFuture;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::{Mutex, Semaphore, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// The protocol version weir speaks (the `protocol` of both hello frames).
pub const PROTOCOL_VERSION: u32 = 1;

/// Settings of the exec handler.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ExecConfig {
    /// The command, run as `sh -c <command>`.
    pub command: String,
    /// Processes in the pool (default 1).
    pub procs: usize,
    /// Most jobs per batch frame (default 100).
    pub max_batch: usize,
    /// Most jobs in flight in one process, over all its batches (default 1,000).
    pub inflight: usize,
    /// Longest wait before restarting a process that died (doubling from 100 ms; default 5 s).
    pub max_restart_delay: Duration,
    /// When set, each job frame carries `deadline_ms`: now plus this (the job timeout).
    pub job_timeout: Option<Duration>,
}

impl ExecConfig {
    /// Settings for `command` with the defaults.
    pub fn new(command: impl Into<String>) -> Self {
        Self {
            command: command.into(),
            procs: 1,
            max_batch: 100,
            inflight: 1000,
            max_restart_delay: Duration::from_secs(5),
            job_timeout: None,
        }
    }
}

/// A batch on its way to a process: the frame's jobs and where its outcomes go.
struct Request {
    jobs: Vec<Job>,
    reply: oneshot::Sender<Vec<JobResult>>,
}

struct Slot {
    tx: mpsc::UnboundedSender<Request>,
    room: Arc<Semaphore>,
}

/// Runs jobs in a pool of worker processes (see the module docs).
#[derive(Clone)]
pub struct ExecHandler {
    inner: Arc<Inner>,
}

struct Inner {
    slots: Vec<Slot>,
    next: AtomicUsize,
    config: ExecConfig,
    closing: CancellationToken,
    grace: Arc<std::sync::Mutex<Duration>>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for ExecHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecHandler")
            .field("config", &self.inner.config)
            .finish()
    }
}

impl ExecHandler {
    /// Starts the pool's processes (on the current tokio runtime).
    pub fn start(config: ExecConfig) -> crate::Result<Self> {
        if config.command.trim().is_empty() {
            return Err(crate::Error::config("exec handler command", "is empty"));
        }
        if config.procs == 0 || config.max_batch == 0 || config.inflight == 0 {
            return Err(crate::Error::config(
                "exec handler processes, batch size and in-flight jobs",
                "must be at least 1",
            ));
        }
        let closing = CancellationToken::new();
        let grace = Arc::new(std::sync::Mutex::new(Duration::from_secs(30)));
        let mut slots = Vec::new();
        let mut tasks = Vec::new();
        for n in 0..config.procs {
            let (tx, rx) = mpsc::unbounded_channel();
            let proc = child::Proc {
                n,
                command: config.command.clone(),
                max_restart_delay: config.max_restart_delay,
                job_timeout: config.job_timeout,
                closing: closing.clone(),
                grace: grace.clone(),
            };
            tasks.push(tokio::spawn(proc.run(rx)));
            slots.push(Slot {
                tx,
                room: Arc::new(Semaphore::new(config.inflight)),
            });
        }
        Ok(Self {
            inner: Arc::new(Inner {
                slots,
                next: AtomicUsize::new(0),
                config,
                closing,
                grace,
                tasks: Mutex::new(tasks),
            }),
        })
    }

    /// Graceful stop: closes every process's stdin, waits up to `grace` for the outcomes
    /// still owed (and for the processes to exit), then kills what is left.
    pub async fn shutdown(&self, grace: Duration) {
        *self.inner.grace.lock().unwrap_or_else(|e| e.into_inner()) = grace;
        self.inner.closing.cancel();
        let tasks = std::mem::take(&mut *self.inner.tasks.lock().await);
        for t in tasks {
            let _ = t.await;
        }
    }
}

impl BatchHandler for ExecHandler {
    fn call(&self, jobs: Vec<Job>) -> BoxFuture<'static, Vec<JobResult>> {
        let inner = self.inner.clone();
        Box::pin(async move {
            let n = jobs.len();
            let want = n.min(inner.config.inflight) as u32;
            // A process with room now, starting from the next in turn; else wait for that one.
            let first = inner.next.fetch_add(1, Ordering::Relaxed) % inner.slots.len();
            let mut chosen = None;
            for k in 0..inner.slots.len() {
                let i = (first + k) % inner.slots.len();
                if let Ok(p) = inner.slots[i].room.clone().try_acquire_many_owned(want) {
                    chosen = Some((i, p));
                    break;
                }
            }
            let (i, _permit) = match chosen {
                Some(c) => c,
                None => match inner.slots[first].room.clone().acquire_many_owned(want).await {
                    Ok(p) => (first, p),
                    Err(_) => return closed(n),
                },
            };
            let (reply, rx) = oneshot::channel();
            if inner.slots[i].tx.send(Request { jobs, reply }).is_err() {
                return closed(n);
            }
            rx.await.unwrap_or_else(|_| closed(n))
        })
    }

    fn max_batch(&self) -> usize {
        self.inner.config.max_batch.min(self.inner.config.inflight)
    }
}

fn closed(n: usize) -> Vec<JobResult> {
    vec![Err(JobError::retry("exec handler: the worker pool is shut down")); n]
}
