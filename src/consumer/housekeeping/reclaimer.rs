//! The reclaimer, which brings back the jobs of crashed or stalled consumers once their
//! leases expire: a job that never ran back to ready uncharged (a deferral, within the
//! deferral budget), a job that was running to the suspects list uncharged, and a suspect
//! that was running alone charged an attempt (see `reclaim.lua`). Every consumer runs
//! one; the script is atomic, so several reclaimers on one queue never reclaim a job twice.
//! Each call also trims the dead-letter queue a bounded step toward the queue's cap; the
//! trims it sees are logged once per streak ([`TrimLog`]).
//!
//! On a quiet queue (no work seen since the last call, nothing reclaimed or trimmed) it
//! waits until the earliest lease left expires, at most [`QUIET`], instead of every
//! interval: a lease that expires sooner can only be taken by a fetch, which work
//! announces (`quiet.rs`).

use crate::consumer::config::check;
use crate::consumer::housekeeping::quiet::Watcher;
use crate::consumer::housekeeping::trims::TrimLog;
use crate::error::Result;
use crate::metrics::{DeferReason, QueueMetrics};
use crate::queue::keys::QueueKeys;
use crate::queue::retry::DeferralBudget;
use crate::queue::scripts::{self, Reclaimed};
use crate::redis::conn::HealingConnection;
use crate::redis::retry::{Backoff, Streak};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Most leases per reclaim call.
const RECLAIM_BATCH: usize = 1000;

/// The longest wait between calls on a quiet queue (the interval, when that is longer).
pub(crate) const QUIET: Duration = Duration::from_secs(10);

/// Slept past a lease's expiry, so the call after the wait finds it expired on Redis's
/// clock.
const MARGIN: Duration = Duration::from_millis(5);

/// Reclaimer settings. (The dead-letter cap is the queue's setting, which the script
/// reads.)
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ReclaimerConfig {
    /// How often to look for expired leases while the consumer sees work, at least 10 ms
    /// (default 1 s). On a quiet queue it looks when the earliest lease expires, at least
    /// every 10 s (or every `interval`, when that is longer).
    pub interval: Duration,
}

impl ReclaimerConfig {
    /// Default of [`ReclaimerConfig::interval`].
    pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);

    /// Checks every value against its range, with a message that names it.
    pub fn validate(&self) -> Result<()> {
        check(
            self.interval >= Duration::from_millis(10),
            "reclaim interval",
            "must be at least 10ms",
        )
    }
}

impl Default for ReclaimerConfig {
    fn default() -> Self {
        Self {
            interval: Self::DEFAULT_INTERVAL,
        }
    }
}

/// The reclaimer task.
pub(crate) struct Reclaimer {
    config: ReclaimerConfig,
    /// The deferral budget of a job whose lease expired before its run started: it comes
    /// back uncharged, as a deferral, and is dead-lettered past the budget (the consumer's
    /// [`crate::pool::PoolConfig::deferral_budget`]). It bounds the loop of a job that
    /// kills its consumer before the start of its run is written (see
    /// docs/reliability.md).
    budget: DeferralBudget,
    conn: HealingConnection,
    keys: QueueKeys,
    metrics: QueueMetrics,
}

impl Reclaimer {
    pub(crate) fn new(
        config: ReclaimerConfig,
        budget: DeferralBudget,
        conn: HealingConnection,
        keys: QueueKeys,
        metrics: QueueMetrics,
    ) -> Self {
        Self {
            config,
            budget,
            conn,
            keys,
            metrics,
        }
    }

    /// Reclaims once per interval until `shutdown` (on a quiet queue, less often: see the
    /// module's comment). A failed call waits for the next tick, like a successful one:
    /// nothing is lost meanwhile (the leases stay expired).
    pub(crate) async fn run(self, mut work: Watcher, shutdown: CancellationToken) {
        let mut trims = TrimLog::default();
        let every = self.config.interval;
        let mut errors = Streak::new(
            "reclaim",
            Backoff {
                first: every,
                max: every,
            },
        );
        let mut wait = every;
        loop {
            let busy = tokio::select! {
                _ = shutdown.cancelled() => return,
                busy = work.sleep(every, wait) => busy,
            };
            wait = match self.sweep(&shutdown, &mut trims).await {
                Ok(last) => {
                    errors.succeeded();
                    let quiet = !busy && !work.saw_work() && last.total() == 0 && last.trimmed == 0;
                    let longest = QUIET.max(every);
                    match last.next_expiry {
                        _ if !quiet => every,
                        None => longest,
                        Some(expiry) => (expiry + MARGIN).clamp(every, longest),
                    }
                }
                Err(e) => errors.failed(&e),
            };
        }
    }

    /// Reclaims while calls come back full: a big crash is cleared in one tick. Returns
    /// the last call's reply.
    async fn sweep(&self, shutdown: &CancellationToken, trims: &mut TrimLog) -> Result<Reclaimed> {
        loop {
            let mut conn = self.conn.clone();
            let r = scripts::reclaim(&mut conn, &self.keys, RECLAIM_BATCH, self.budget).await?;
            trims.saw(r.trimmed, r.trimmed_total);
            self.metrics.reclaimed.increment(r.total());
            self.metrics.deferred[DeferReason::UnstartedReclaim as usize].increment(r.returned);
            if r.total() > 0 {
                tracing::info!(
                    never_ran = r.returned,
                    suspects = r.suspects,
                    dead = r.dead,
                    "reclaimed expired leases"
                );
            }
            if (r.total() as usize) < RECLAIM_BATCH || shutdown.is_cancelled() {
                return Ok(r);
            }
        }
    }
}
