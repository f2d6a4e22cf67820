//! Wrapper of the history script: one sample of the queue's counters and sizes per
//! period at most (consumers' housekeeping; `queue/samples.rs` reads the samples).

use super::{SAMPLES, call, invocation};
use crate::error::Result;
use crate::queue::keys::QueueKeys;
use redis::aio::ConnectionLike;

/// Writes a sample into the queue's history unless this period (`period_ms`, by Redis's
/// clock) has one; keeps the newest `kept`. True if it wrote.
pub async fn samples_record<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    period_ms: u64,
    kept: usize,
) -> Result<bool> {
    let mut inv = invocation(&SAMPLES, keys);
    inv.key(keys.samples()).arg(period_ms).arg(kept);
    let wrote: i64 = call("samples", keys, &mut inv, conn).await?;
    Ok(wrote == 1)
}
