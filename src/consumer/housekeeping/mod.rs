//! Housekeeping: the reclaimer, which brings back the jobs of crashed or stalled consumers
//! once their leases expire. Every consumer runs one; the script is atomic, so several
//! reclaimers on one queue never reclaim a job twice.

use crate::metrics::QueueMetrics;
use crate::queue::keys::QueueKeys;
use crate::queue::scripts;
use crate::redis::conn::HealingConnection;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Most leases per reclaim call.
const RECLAIM_BATCH: usize = 1000;

/// Reclaimer settings.
#[derive(Debug, Clone)]
pub struct ReclaimerConfig {
    /// How often to look for expired leases (default 1 s).
    pub interval: Duration,
    /// Dead-letter queue cap (default 10,000).
    pub dead_cap: u64,
}

impl Default for ReclaimerConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(1),
            dead_cap: 10_000,
        }
    }
}

/// The reclaimer task.
pub(crate) struct Reclaimer {
    pub config: ReclaimerConfig,
    pub conn: HealingConnection,
    pub keys: QueueKeys,
    pub metrics: QueueMetrics,
}

impl Reclaimer {
    pub async fn run(self, shutdown: CancellationToken) {
        let mut failing = false;
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(self.config.interval) => {}
            }
            // Keep going while calls come back full: a big crash is cleared in one tick.
            loop {
                let mut conn = self.conn.clone();
                match scripts::reclaim(&mut conn, &self.keys, RECLAIM_BATCH, self.config.dead_cap).await {
                    Ok((requeued, dead)) => {
                        failing = false;
                        self.metrics.reclaimed.increment(requeued + dead);
                        if requeued + dead > 0 {
                            tracing::info!(requeued, dead, "reclaimed expired leases");
                        }
                        if ((requeued + dead) as usize) < RECLAIM_BATCH || shutdown.is_cancelled() {
                            break;
                        }
                    }
                    Err(e) => {
                        if !failing {
                            tracing::warn!(error = %e, "reclaim failed; retrying next tick");
                        }
                        failing = true;
                        break;
                    }
                }
            }
        }
    }
}
