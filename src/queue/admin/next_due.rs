//! When a queue's next delayed job (a retry's next attempt, or a job enqueued for later)
//! falls due: `weir stats` and the web UI show it.

use super::Queue;
use crate::error::Result;
use crate::queue::keys::QueueKeys;
use crate::queue::scripts::PARKED_AT_MS;
use redis::aio::ConnectionLike;

/// The due time of the earliest delayed job of one lane that has one (see
/// [`Queue::next_due`]).
pub(crate) async fn next_due_of<C: ConnectionLike>(conn: &mut C, keys: &QueueKeys) -> Result<Option<u64>> {
    let mut next: Option<u64> = None;
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
            .query_async(conn)
            .await?;
        if let Some((_, at)) = first.first() {
            let at = *at as u64;
            next = Some(next.map_or(at, |n| n.min(at)));
        }
    }
    Ok(next)
}

/// Up to `n` jobs in flight (the leases that expire first) with the tag of the consumer
/// whose run of each started, if one did.
pub(crate) async fn in_flight_sample<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    n: isize,
) -> Result<Vec<(String, Option<String>)>> {
    let ids: Vec<String> = redis::cmd("ZRANGE")
        .arg(keys.lease())
        .arg(0)
        .arg(n - 1)
        .query_async(conn)
        .await?;
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let by: Vec<Option<String>> = redis::cmd("HMGET")
        .arg(keys.started())
        .arg(&ids)
        .query_async(conn)
        .await?;
    Ok(ids.into_iter().zip(by).collect())
}

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
            if let Some(at) = next_due_of(&mut self.conn.clone(), keys).await? {
                next = Some(next.map_or(at, |n| n.min(at)));
            }
        }
        Ok(next)
    }
}
