//! The concurrency limit the worker pool enforces: a semaphore whose size can change at
//! run time, shrinking without cancelling running jobs (a shrink is paid back as running
//! jobs finish). The fixed limit and the adaptive limiter both drive it through
//! [`Limit::set`].

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// A resizable concurrency limit. Share it with `Arc`.
#[derive(Debug)]
pub struct Limit {
    sem: Arc<Semaphore>,
    limit: AtomicUsize,
    /// Permits still to be retired after a shrink, taken from permits as they come back.
    debt: AtomicUsize,
    in_flight: AtomicUsize,
    peak: AtomicUsize,
    idle: Notify,
    /// Told each time a job gives its slot back (one stored wake-up for one waiter).
    freed: Notify,
    resize: std::sync::Mutex<()>,
}

impl Limit {
    /// A limit of `n` (at least 1).
    pub fn new(n: usize) -> Arc<Self> {
        let n = n.max(1);
        Arc::new(Self {
            sem: Arc::new(Semaphore::new(n)),
            limit: AtomicUsize::new(n),
            debt: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            idle: Notify::new(),
            freed: Notify::new(),
            resize: std::sync::Mutex::new(()),
        })
    }

    /// The current limit.
    pub fn get(&self) -> usize {
        self.limit.load(Ordering::Relaxed)
    }

    /// Jobs running now.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// The most jobs that ran at once since the last call (then resets to the current count).
    pub fn take_peak(&self) -> usize {
        self.peak.swap(self.in_flight(), Ordering::Relaxed)
    }

    /// Changes the limit to `n` (at least 1). Running jobs are never cancelled: a shrink
    /// takes effect as they finish.
    pub fn set(&self, n: usize) {
        let n = n.max(1);
        let _guard = self.resize.lock().unwrap_or_else(|e| e.into_inner());
        let old = self.limit.swap(n, Ordering::Relaxed);
        if n > old {
            let want = n - old;
            // Pay back outstanding debt first: those permits were never retired.
            let prev = self
                .debt
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |d| Some(d - d.min(want)))
                .unwrap_or(0);
            self.sem.add_permits(want - prev.min(want));
            // New slots are free slots: a fetcher that holds jobs only for free slots
            // waits for one (nothing may finish for a long while).
            self.freed.notify_one();
        } else if n < old {
            let shrink = old - n;
            let retired = self.sem.forget_permits(shrink);
            self.debt.fetch_add(shrink - retired, Ordering::AcqRel);
        }
    }

    /// Waits for a slot.
    pub async fn acquire(self: &Arc<Self>) -> Permit {
        let permit = self
            .sem
            .clone()
            .acquire_owned()
            .await
            .expect("limit semaphore never closes");
        self.counted(permit)
    }

    /// A slot, if one is free now.
    pub fn try_acquire(self: &Arc<Self>) -> Option<Permit> {
        let permit = self.sem.clone().try_acquire_owned().ok()?;
        Some(self.counted(permit))
    }

    fn counted(self: &Arc<Self>, permit: OwnedSemaphorePermit) -> Permit {
        let now = self.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak.fetch_max(now, Ordering::Relaxed);
        Permit {
            permit: Some(permit),
            limit: self.clone(),
            slot: None,
        }
    }

    /// Counts `slot` (a permit of another limit, shared with other queues) among this
    /// limit's jobs until it drops, without taking a slot of this one: one queue's share
    /// of a limit that several queues draw from (its running jobs, its idle wait).
    pub(crate) fn count(self: &Arc<Self>, slot: Permit) -> Permit {
        let now = self.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        self.peak.fetch_max(now, Ordering::Relaxed);
        Permit {
            permit: None,
            limit: self.clone(),
            slot: Some(Box::new(slot)),
        }
    }

    /// Resolves once a slot was given back, or the limit grew, since the last wait (or now):
    /// the fetcher of a consumer that holds jobs only for its free slots waits for one.
    pub(crate) async fn freed(&self) {
        self.freed.notified().await
    }

    /// Waits until no job runs.
    pub async fn wait_idle(&self) {
        loop {
            let notified = self.idle.notified();
            if self.in_flight() == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// A slot in the pool, given back (or retired, after a shrink) on drop.
#[derive(Debug)]
pub struct Permit {
    permit: Option<OwnedSemaphorePermit>,
    limit: Arc<Limit>,
    /// With [`Limit::count`]: the permit of the shared limit, given back after this one
    /// is counted out.
    slot: Option<Box<Permit>>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(p) = self.permit.take() {
            let paid = self
                .limit
                .debt
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |d| d.checked_sub(1))
                .is_ok();
            if paid {
                p.forget();
            }
        }
        if self.limit.in_flight.fetch_sub(1, Ordering::Relaxed) == 1 {
            self.limit.idle.notify_waiters();
        }
        self.limit.freed.notify_one();
        // Counted out of this limit first, then the shared slot goes back.
        drop(self.slot.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn shrink_waits_for_running_jobs_and_grow_pays_debt() {
        let l = Limit::new(4);
        let held: Vec<_> = futures_util::future::join_all((0..4).map(|_| l.acquire())).await;
        l.set(2);
        assert_eq!(l.get(), 2);
        drop(held);
        assert_eq!(l.sem.available_permits(), 2, "two of four permits retired");
        l.set(3);
        assert_eq!(l.sem.available_permits(), 3);
        let a = l.acquire().await;
        l.set(1);
        assert_eq!(l.sem.available_permits(), 0);
        drop(a);
        assert_eq!(l.sem.available_permits(), 1);
        assert_eq!(l.in_flight(), 0);
    }

    #[tokio::test]
    async fn peak_and_idle() {
        let l = Limit::new(8);
        let a = l.acquire().await;
        let b = l.acquire().await;
        assert_eq!(l.take_peak(), 2);
        drop(a);
        assert_eq!(l.take_peak(), 2);
        assert_eq!(l.take_peak(), 1);
        let waiter = tokio::spawn({
            let l = l.clone();
            async move { l.wait_idle().await }
        });
        drop(b);
        waiter.await.unwrap();
    }

    #[tokio::test]
    async fn a_counted_permit_holds_the_shared_slot_and_counts_in_its_own_limit() {
        let (shared, lane) = (Limit::new(2), Limit::new(1));
        let a = lane.count(shared.acquire().await);
        let b = lane.count(shared.acquire().await);
        assert_eq!(
            (shared.in_flight(), lane.in_flight(), lane.take_peak()),
            (2, 2, 2)
        );
        assert_eq!(shared.sem.available_permits(), 0);
        assert_eq!(
            lane.sem.available_permits(),
            1,
            "the lane's own semaphore untouched"
        );
        drop(a);
        assert_eq!((shared.in_flight(), lane.in_flight()), (1, 1));
        assert_eq!(shared.sem.available_permits(), 1);
        drop(b);
        assert_eq!((shared.in_flight(), lane.in_flight()), (0, 0));
        lane.wait_idle().await;
    }
}
