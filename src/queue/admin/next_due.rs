//! When a queue's next delayed job (a retry's next attempt, or a job enqueued for later)
//! falls due: `weir stats` and the web UI show it.

use super::Queue;
use crate::error::Result;
use crate::queue::keys::QueueKeys;
use crate::queue::scripts::PARKED_AT_MS;

impl Queue {
    /// The due time (ms since the Unix epoch, Redis clock) of the earliest delayed job
    /// that has one (parked jobs wait for a slot of their key, not a time), over every
    /// lane of a partitioned queue; `None` when no job is delayed. Three `ZRANGEBYSCORE
    /// .. LIMIT 0 1` per lane: O(log n).
    pub async fn next_due(&self) -> Result<Option<u64>> {
        let lanes: Vec<QueueKeys> = match self.partitions().await? {
            Some(p) => p.lanes().cloned().collect(),
            None => vec![self.keys.clone()],
        };
        let mut next: Option<u64> = None;
        for keys in &lanes {
            // keys.all()[3..6]: the delayed sets, high, normal, low.
            for key in &keys.all()[3..6] {
                let first: Vec<(String, f64)> = redis::cmd("ZRANGEBYSCORE")
                    .arg(key)
                    .arg("-inf")
                    .arg(format!("({PARKED_AT_MS}"))
                    .arg("WITHSCORES")
                    .arg("LIMIT")
                    .arg(0)
                    .arg(1)
                    .query_async(&mut self.conn.clone())
                    .await?;
                if let Some((_, at)) = first.first() {
                    let at = *at as u64;
                    next = Some(next.map_or(at, |n| n.min(at)));
                }
            }
        }
        Ok(next)
    }
}
