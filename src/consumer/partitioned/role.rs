//! A lane's role in a partitioned queue's consumer: whether its fetcher may fetch (the
//! lane is one of this consumer's home lanes, or one it steals from), and whether its last
//! fetch came back empty. The owner task (`owner.rs`) sets the first, the fetcher the
//! second.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::Notify;

/// One lane's role, shared by its fetcher and the owner task.
#[derive(Debug, Default)]
pub(crate) struct Role {
    active: AtomicBool,
    dry: AtomicBool,
    /// Told when `active` changes (the fetcher of an inactive lane waits for it).
    changed: Notify,
}

impl Role {
    pub(crate) fn new(active: bool) -> Arc<Self> {
        let r = Self::default();
        r.active.store(active, Ordering::Relaxed);
        Arc::new(r)
    }

    /// The lane's fetcher may fetch.
    pub(crate) fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Makes the lane active or not; a lane made active starts as not dry (it was chosen
    /// for the jobs it holds).
    pub(crate) fn set_active(&self, on: bool) {
        if self.active.swap(on, Ordering::AcqRel) != on {
            if on {
                self.dry.store(false, Ordering::Relaxed);
            }
            // A stored permit: a change made before the fetcher waits is not lost.
            self.changed.notify_one();
        }
    }

    /// Waits until `active` changes.
    pub(crate) async fn changed(&self) {
        self.changed.notified().await
    }

    /// The lane's last fetch brought jobs (or not).
    pub(crate) fn saw(&self, jobs: bool) {
        self.dry.store(!jobs, Ordering::Relaxed);
    }

    /// The lane's last fetch came back empty.
    pub(crate) fn dry(&self) -> bool {
        self.dry.load(Ordering::Relaxed)
    }
}
