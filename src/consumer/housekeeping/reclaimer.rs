//! The reclaimer, which brings back the jobs of crashed or stalled consumers once their
//! leases expire: a job that never ran back to ready uncharged (a deferral, within the
//! deferral budget), a job that was running to the suspects list uncharged, and a suspect
//! that was running alone charged an attempt (see `reclaim.lua`). Every consumer runs
//! one; the script is atomic, so several reclaimers on one queue never reclaim a job twice.

use crate::consumer::config::check;
use crate::error::Result;
use crate::metrics::QueueMetrics;
use crate::queue::keys::QueueKeys;
use crate::queue::scripts;
use crate::redis::conn::HealingConnection;
use crate::redis::retry::{Backoff, Streak};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Most leases per reclaim call.
const RECLAIM_BATCH: usize = 1000;

/// Reclaimer settings. (The dead-letter cap is the consumer's:
/// [`crate::ConsumerConfig::dead_letter_cap`].)
#[derive(Debug, Clone)]
pub struct ReclaimerConfig {
    /// How often to look for expired leases, at least 10 ms (default 1 s).
    pub interval: Duration,
    /// The deferral budget of a job whose lease expired before its run started (it comes
    /// back uncharged, as a deferral): the most deferrals, and the longest time since its
    /// first deferral; past either the job is dead-lettered with a reason that says so.
    /// At least 1 deferral and 1 s (default 1,000 deferrals or 24 h). It bounds the loop
    /// of a job that kills its consumer before the start of its run is written (see
    /// docs/reliability.md).
    pub deferral_budget: (u32, Duration),
}

impl ReclaimerConfig {
    /// Default of [`ReclaimerConfig::interval`].
    pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);
    /// Default of [`ReclaimerConfig::deferral_budget`].
    pub const DEFAULT_DEFERRAL_BUDGET: (u32, Duration) = (1_000, Duration::from_secs(24 * 3600));

    /// Checks every value against its range, with a message that names it.
    pub fn validate(&self) -> Result<()> {
        check(
            self.interval >= Duration::from_millis(10),
            "reclaim interval must be at least 10ms",
        )?;
        check(
            self.deferral_budget.0 >= 1 && self.deferral_budget.1 >= Duration::from_secs(1),
            "deferral budget must allow at least 1 deferral and 1s",
        )
    }
}

impl Default for ReclaimerConfig {
    fn default() -> Self {
        Self {
            interval: Self::DEFAULT_INTERVAL,
            deferral_budget: Self::DEFAULT_DEFERRAL_BUDGET,
        }
    }
}

/// The reclaimer task.
pub(crate) struct Reclaimer {
    config: ReclaimerConfig,
    dead_letter_cap: u64,
    conn: HealingConnection,
    keys: QueueKeys,
    metrics: QueueMetrics,
}

impl Reclaimer {
    pub fn new(
        config: ReclaimerConfig,
        dead_letter_cap: u64,
        conn: HealingConnection,
        keys: QueueKeys,
        metrics: QueueMetrics,
    ) -> Self {
        Self {
            config,
            dead_letter_cap,
            conn,
            keys,
            metrics,
        }
    }

    /// Reclaims once per interval until `shutdown`. A failed call waits for the next
    /// tick, like a successful one: nothing is lost meanwhile (the leases stay expired).
    pub async fn run(self, shutdown: CancellationToken) {
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
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
            }
            wait = match self.sweep(&shutdown).await {
                Ok(()) => {
                    errors.succeeded();
                    every
                }
                Err(e) => errors.failed(&e),
            };
        }
    }

    /// Reclaims while calls come back full: a big crash is cleared in one tick.
    async fn sweep(&self, shutdown: &CancellationToken) -> Result<()> {
        loop {
            let mut conn = self.conn.clone();
            let (cap, budget) = (self.dead_letter_cap, self.config.deferral_budget);
            let r = scripts::reclaim(&mut conn, &self.keys, RECLAIM_BATCH, cap, budget).await?;
            self.metrics.reclaimed.increment(r.total());
            if r.total() > 0 {
                tracing::info!(
                    never_ran = r.returned,
                    suspects = r.suspects,
                    dead = r.dead,
                    "reclaimed expired leases"
                );
            }
            if (r.total() as usize) < RECLAIM_BATCH || shutdown.is_cancelled() {
                return Ok(());
            }
        }
    }
}
