//! The drain watch (drain mode): stops the consumer once the queue has nothing ready,
//! delayed or leased. One cheap stats call every 50 ms, only while this process runs
//! nothing.

use crate::limiter::limit::Limit;
use crate::queue::keys::QueueKeys;
use crate::queue::scripts;
use crate::redis::conn::HealingConnection;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often an idle consumer looks whether the queue is empty.
const CHECK_EVERY: Duration = Duration::from_millis(50);

/// The drain watch task.
pub(crate) struct DrainWatch {
    conn: HealingConnection,
    keys: QueueKeys,
    limit: Arc<Limit>,
}

impl DrainWatch {
    pub(crate) fn new(conn: HealingConnection, keys: QueueKeys, limit: Arc<Limit>) -> Self {
        Self { conn, keys, limit }
    }

    /// Cancels `stop` (the consumer's "stop fetching") once the queue is empty, or
    /// returns when something else cancelled it. A failed stats call is tried again at
    /// the next check.
    pub(crate) async fn run(mut self, stop: CancellationToken) {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(CHECK_EVERY) => {}
            }
            if self.limit.in_flight() > 0 {
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
