//! The pipe side of a consumer process's handlers: job reports batched for the writer
//! of `child.rs`, which puts them on stdout. A leaf: the handlers (`handler.rs`) record
//! into it and the child process drains it, so neither imports the other for it.
//!
//! Group commit: [`PipeSink::record`] returns only once its report is in the pipe, so a
//! job is reported before it is acked.

use crate::wire::{FOREIGN, Frame};
use std::sync::{Arc, Mutex};
use tokio::sync::{Notify, watch};

#[derive(Default)]
struct Batch {
    jobs: Vec<(u64, u64)>,
    errors: u64,
    /// Generation of the jobs now in `jobs`; the writer bumps it when it takes them.
    generation: u64,
}

/// The pipe side of a handler: batches job reports; see the module note of `child.rs`.
pub(crate) struct PipeSink {
    batch: Mutex<Batch>,
    pub(crate) wake: Notify,
    pub(crate) flushed: watch::Sender<u64>,
}

impl PipeSink {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            batch: Mutex::new(Batch {
                generation: 1,
                ..Batch::default()
            }),
            wake: Notify::new(),
            flushed: watch::Sender::new(0),
        })
    }

    /// Reports a job; returns once the report is in the pipe.
    pub(crate) async fn record(&self, index: Option<u64>, latency_us: u64) {
        let generation = {
            let mut b = self.batch.lock().unwrap_or_else(|e| e.into_inner());
            b.jobs.push((index.unwrap_or(FOREIGN), latency_us));
            b.generation
        };
        self.wake.notify_one();
        let mut rx = self.flushed.subscribe();
        // Err only if the writer is gone, i.e. the process is exiting anyway.
        let _ = rx.wait_for(|&f| f >= generation).await;
    }

    /// Counts a failed call (reported with the next batch; nothing waits for it).
    pub(crate) fn error(&self) {
        self.batch.lock().unwrap_or_else(|e| e.into_inner()).errors += 1;
    }

    /// Encodes what is waiting; returns its generation.
    pub(crate) fn take(&self, out: &mut Vec<u8>) -> u64 {
        let mut b = self.batch.lock().unwrap_or_else(|e| e.into_inner());
        let generation = b.generation;
        b.generation += 1;
        if !b.jobs.is_empty() {
            Frame::Jobs(std::mem::take(&mut b.jobs)).encode(out);
        }
        if b.errors > 0 {
            Frame::Errors(std::mem::take(&mut b.errors)).encode(out);
        }
        generation
    }
}
