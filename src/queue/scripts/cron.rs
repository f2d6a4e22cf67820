//! Wrappers of the periodic-job scripts: [`cron_set`] (operators) and [`cron_fire`]
//! (consumers' housekeeping, once per due tick).

use super::{CRON_FIRE, CRON_SET, EnqueueArg, call, invocation};
use crate::error::Result;
use crate::queue::keys::QueueKeys;
use redis::aio::ConnectionLike;

/// Adds, replaces (`spec` a schedule's JSON) or removes (`spec` empty) the schedule
/// `name`. Adding: 2 new, 1 changed, 0 unchanged; removing: 1 removed, 0 none.
pub async fn cron_set<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    name: &str,
    spec: &str,
) -> Result<i64> {
    let mut inv = invocation(&CRON_SET, keys);
    inv.key(keys.cron()).key(keys.cron_fired()).arg(name).arg(spec);
    call("cron_set", keys, &mut inv, conn).await
}

/// Fires `tick` (ms) of the schedule `name` stored as `spec`, enqueueing `job`: 1 fired,
/// 0 fired already, -1 the schedule changed or went (read it again).
pub async fn cron_fire<C: ConnectionLike>(
    conn: &mut C,
    keys: &QueueKeys,
    name: &str,
    spec: &str,
    tick: u64,
    job: &EnqueueArg,
) -> Result<i64> {
    let mut inv = invocation(&CRON_FIRE, keys);
    inv.key(keys.cron())
        .key(keys.cron_fired())
        .arg(name)
        .arg(spec)
        .arg(tick)
        .arg(&job.id)
        .arg(&job.envelope)
        .arg(job.priority as u8);
    call("cron_fire", keys, &mut inv, conn).await
}
