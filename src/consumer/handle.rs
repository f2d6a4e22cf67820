//! What code that embeds weir gets from a consumer: a [`Handle`] to watch and steer it
//! while it runs, and a [`Report`] when it stops.

use crate::consumer::counters::{InMemory, Tally};
use crate::limiter::limit::Limit;
use crate::limiter::{Limiter, RateGate};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::sync::watch;

/// What a consumer did, returned when it stops.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Report {
    /// Jobs acked.
    pub acked: u64,
    /// Jobs sent back for retry.
    pub retried: u64,
    /// Jobs put back without charging an attempt (backpressure, a kind or size this
    /// consumer cannot take).
    pub deferred: u64,
    /// Jobs dead-lettered.
    pub dead: u64,
    /// Outcomes refused because the lease had been lost.
    pub lost_leases: u64,
    /// Un-started jobs handed back at shutdown.
    pub released: u64,
}

/// A running consumer's handles, for code that embeds weir.
#[derive(Clone, Debug)]
pub struct Handle {
    /// The concurrency limit; [`Limit::set`] changes it live (with an adaptive limiter,
    /// change its bounds through [`Limiter::reconfigure`] instead).
    pub limit: Arc<Limit>,
    /// The adaptive limiter, if configured.
    pub limiter: Option<Arc<Limiter>>,
    /// The jobs/s cap; [`RateGate::set`] changes it live.
    pub rate: Arc<RateGate>,
    /// Live totals.
    pub tally: Arc<Tally>,
    /// What the consumer holds in memory, live.
    pub in_memory: Arc<InMemory>,
    /// Set by the first fetch answered: see [`Handle::ready`].
    pub(crate) ready: watch::Receiver<bool>,
}

impl Handle {
    /// Resolves once the consumer is up: connected, subscribed to its queue's wake
    /// messages and its first fetch answered, so a job enqueued from then on is fetched
    /// as it comes, not after the consumer's start-up (a readiness probe, or a load test
    /// that should not count the start-up against the jobs it times). At once if it is
    /// up already. A consumer that stops before it gets there never resolves it: race it
    /// against the run's future. (On a partitioned queue: once a lane it holds has
    /// fetched.)
    pub async fn ready(&self) {
        let mut rx = self.ready.clone();
        if rx.wait_for(|up| *up).await.is_err() {
            // The consumer is gone without having been up.
            std::future::pending::<()>().await;
        }
    }

    /// Whether the consumer is up now (see [`Handle::ready`]).
    pub fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }
}

impl Report {
    /// The totals `tally` holds now.
    pub(crate) fn of(tally: &Tally) -> Self {
        Report {
            acked: tally.acked.load(Ordering::Relaxed),
            retried: tally.retried.load(Ordering::Relaxed),
            deferred: tally.deferred.load(Ordering::Relaxed),
            dead: tally.dead.load(Ordering::Relaxed),
            lost_leases: tally.lost_leases.load(Ordering::Relaxed),
            released: tally.released.load(Ordering::Relaxed),
        }
    }
}
