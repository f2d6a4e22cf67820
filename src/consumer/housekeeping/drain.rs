//! The drain watch (drain mode): stops the consumer once the queue has nothing ready,
//! delayed or leased. It looks (one cheap stats call) when this process holds nothing (no
//! job running, no lease unsettled): as soon as a flush or an empty fetch says so, and
//! every 50 ms besides (for what other consumers hold, and delayed jobs falling due).

use crate::consumer::leases::Leases;
use crate::limiter::limit::Limit;
use crate::queue::keys::QueueKeys;
use crate::queue::scripts;
use crate::redis::conn::HealingConnection;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// How often an idle consumer looks whether the queue is empty.
const CHECK_EVERY: Duration = Duration::from_millis(50);

/// The drain watch task.
pub(crate) struct DrainWatch {
    conn: HealingConnection,
    keys: QueueKeys,
    limit: Arc<Limit>,
    leases: Arc<Leases>,
    /// Told after each flush and each empty fetch.
    nudge: Arc<Notify>,
}

impl DrainWatch {
    pub(crate) fn new(
        conn: HealingConnection,
        keys: QueueKeys,
        limit: Arc<Limit>,
        leases: Arc<Leases>,
        nudge: Arc<Notify>,
    ) -> Self {
        Self {
            conn,
            keys,
            limit,
            leases,
            nudge,
        }
    }

    /// Cancels `stop` (the consumer's "stop fetching") once the queue is empty, or
    /// returns when something else cancelled it. A failed stats call is tried again at
    /// the next check.
    pub(crate) async fn run(mut self, stop: CancellationToken) {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(CHECK_EVERY) => {}
                _ = self.nudge.notified() => {}
            }
            if self.limit.in_flight() > 0 || self.leases.len() > 0 {
                continue;
            }
            if let Ok(s) = scripts::stats(&mut self.conn, &self.keys).await
                && s.pending() == 0
            {
                stop.cancel();
                return;
            }
        }
    }
}
