//! [`Signals`]: what the consumer's tasks tell each other while they run, besides the
//! outcomes (`outcomes.rs`) and the lease table (`leases/`). Made once per run
//! (`start.rs`); each task keeps a clone, and each signal has one writer.

use crate::consumer::housekeeping::Activity;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use tokio::sync::Notify;

/// The signals between the fetcher, the acker and housekeeping.
#[derive(Debug, Clone)]
pub(crate) struct Signals {
    /// Set by the fetcher while fetches come back full: the queue holds a backlog in
    /// Redis. The fetcher then holds jobs ahead of the free slots, and the acker lingers
    /// to make large flushes (fewer calls per job); otherwise each flush goes at once, and
    /// the outcomes that come while it is written make the next one.
    pub queue_backlog: Arc<AtomicBool>,
    /// Set by the fetcher from each fetch: the queue has a global or per-key concurrency,
    /// whose waiting consumers a settle must wake (`GlobalLimits::concurrency_set`), or it
    /// keeps completed jobs (`GlobalLimits::keep_completed`): every ack then goes through
    /// the settle script. Until a fetch says otherwise, it is taken to have one.
    pub concurrency_set: Arc<AtomicBool>,
    /// Wakes the drain watch to look whether the queue is empty: told by the acker after
    /// each flush, and by the fetcher when a fetch comes back empty.
    pub drain_check: Arc<Notify>,
    /// Work the fetcher sees (a wake message, a fetch that brought jobs): housekeeping
    /// keeps its pace while there is some.
    pub activity: Activity,
}

impl Signals {
    pub(crate) fn new() -> Self {
        Self {
            queue_backlog: Arc::new(AtomicBool::new(false)),
            concurrency_set: Arc::new(AtomicBool::new(true)),
            drain_check: Arc::new(Notify::new()),
            activity: Activity::default(),
        }
    }
}
