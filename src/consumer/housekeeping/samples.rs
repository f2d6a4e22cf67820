//! The history sampler: asks `scripts/samples.lua` for a sample of the queue's counters
//! and sizes twice a period. The script writes only the first sample of a period, so a
//! fleet writes one per period whatever its size, and calling twice a period means no
//! period goes without one while a consumer runs (one call a period could straddle one
//! as the clocks drift). Unlike the metrics sampler, it runs without a metrics recorder:
//! the UI and `weir stats` read what it writes.

use crate::queue::keys::QueueKeys;
use crate::queue::samples::{self, SamplesConfig};
use crate::redis::conn::HealingConnection;
use tokio_util::sync::CancellationToken;

/// The history sampler task.
pub(crate) struct SamplesTask {
    config: SamplesConfig,
    conn: HealingConnection,
    keys: QueueKeys,
}

impl SamplesTask {
    pub(crate) fn new(config: SamplesConfig, conn: HealingConnection, keys: QueueKeys) -> Self {
        Self { config, conn, keys }
    }

    /// Samples until `shutdown`. A failed call skips one turn (the next comes half a
    /// period later).
    pub(crate) async fn run(mut self, shutdown: CancellationToken) {
        let every = self.config.period / 2;
        loop {
            if let Err(e) = samples::record(&mut self.conn, &self.keys, &self.config).await {
                tracing::debug!(queue = self.keys.name(), error = %e, "history sample failed");
            }
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
        }
    }
}
