//! Jobs for the async handlers, waiting for the asyncio loop to take them.
//!
//! The engine pushes without the GIL; the first push into an empty inbox writes one byte
//! to a pipe the loop watches (`loop.add_reader`), and the loop takes everything there is
//! at once. A push that lands after a take finds the inbox empty again and wakes the loop.

use std::fs::File;
use std::io::Write;
use std::mem::ManuallyDrop;
use std::os::fd::{FromRawFd, RawFd};
use std::sync::Mutex;
use tokio::sync::oneshot;
use weir::{Job, JobResult};

/// A job and where its outcome goes.
pub(crate) type Entry = (Job, oneshot::Sender<JobResult>);

/// See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Inbox {
    jobs: Mutex<Vec<Entry>>,
    /// The pipe's write end (non-blocking, owned by the Python side), once running.
    wake: Mutex<Option<RawFd>>,
}

impl Inbox {
    /// Wakes the loop through `fd` from now on.
    pub(crate) fn set_wake(&self, fd: Option<RawFd>) {
        *self.wake.lock().unwrap_or_else(|e| e.into_inner()) = fd;
    }

    /// Adds a job; wakes the loop if the inbox was empty.
    pub(crate) fn push(&self, entry: Entry) {
        let was_empty = {
            let mut jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
            jobs.push(entry);
            jobs.len() == 1
        };
        if was_empty {
            self.wake();
        }
    }

    fn wake(&self) {
        if let Some(fd) = *self.wake.lock().unwrap_or_else(|e| e.into_inner()) {
            // SAFETY: the Python side keeps the fd open while the engine runs, and
            // ManuallyDrop leaves it open here. A full pipe (EAGAIN) already wakes the loop.
            let mut pipe = ManuallyDrop::new(unsafe { File::from_raw_fd(fd) });
            let _ = pipe.write(b"w");
        }
    }

    /// Everything waiting, oldest first.
    pub(crate) fn take(&self) -> Vec<Entry> {
        std::mem::take(&mut *self.jobs.lock().unwrap_or_else(|e| e.into_inner()))
    }
}
