//! The reclaimer, which brings back the jobs of crashed or stalled consumers once their
//! leases expire: to ready, or to the dead-letter queue once their attempts are spent.
//! Every consumer runs one; the script is atomic, so several reclaimers on one queue never
//! reclaim a job twice.

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
            let (requeued, dead) =
                scripts::reclaim(&mut conn, &self.keys, RECLAIM_BATCH, self.dead_letter_cap).await?;
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
