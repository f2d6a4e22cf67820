//! The reclaimer, which brings back the jobs of crashed or stalled consumers once their
//! leases expire: to ready, or to the dead-letter queue once their attempts are spent.
//! Every consumer runs one; the script is atomic, so several reclaimers on one queue never
//! reclaim a job twice. Each call also trims the dead-letter queue a bounded step toward
//! the queue's cap; the trims it sees are logged once per streak ([`TrimLog`]).

use crate::consumer::config::check;
use crate::consumer::housekeeping::trims::TrimLog;
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

/// Reclaimer settings. (The dead-letter cap is the queue's setting, which the script
/// reads.)
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ReclaimerConfig {
    /// How often to look for expired leases, at least 10 ms (default 1 s).
    pub interval: Duration,
}

impl ReclaimerConfig {
    /// Default of [`ReclaimerConfig::interval`].
    pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);

    /// Checks every value against its range, with a message that names it.
    pub fn validate(&self) -> Result<()> {
        check(
            self.interval >= Duration::from_millis(10),
            "reclaim interval must be at least 10ms",
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
    conn: HealingConnection,
    keys: QueueKeys,
    metrics: QueueMetrics,
}

impl Reclaimer {
    pub fn new(
        config: ReclaimerConfig,
        conn: HealingConnection,
        keys: QueueKeys,
        metrics: QueueMetrics,
    ) -> Self {
        Self {
            config,
            conn,
            keys,
            metrics,
        }
    }

    /// Reclaims once per interval until `shutdown`. A failed call waits for the next
    /// tick, like a successful one: nothing is lost meanwhile (the leases stay expired).
    pub async fn run(self, shutdown: CancellationToken) {
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
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
            }
            wait = match self.sweep(&shutdown, &mut trims).await {
                Ok(()) => {
                    errors.succeeded();
                    every
                }
                Err(e) => errors.failed(&e),
            };
        }
    }

    /// Reclaims while calls come back full: a big crash is cleared in one tick.
    async fn sweep(&self, shutdown: &CancellationToken, trims: &mut TrimLog) -> Result<()> {
        loop {
            let mut conn = self.conn.clone();
            let r = scripts::reclaim(&mut conn, &self.keys, RECLAIM_BATCH).await?;
            trims.saw(r.trimmed, r.trimmed_total);
            let (requeued, dead) = (r.requeued, r.dead);
            self.metrics.reclaimed.increment(requeued + dead);
            if requeued + dead > 0 {
                tracing::info!(requeued, dead, "reclaimed expired leases");
            }
            if ((requeued + dead) as usize) < RECLAIM_BATCH || shutdown.is_cancelled() {
                return Ok(());
            }
        }
    }
}
