//! [`HealingConnection`]: the consumer's connection, replaced when its calls keep timing
//! out.

use super::conn::Redis;
use super::link::Conn;
use redis::RedisFuture;
use redis::aio::ConnectionLike;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, RwLock};

/// Timeouts in a row after which a [`HealingConnection`] is replaced (behind Sentinel:
/// failures that say the primary is gone, as well).
const REPLACE_AFTER_TIMEOUTS: u32 = 3;

/// Behind Sentinel, an error that says this connection's server is no longer the primary:
/// it is down (refused, dropped), or it came back as a replica (READONLY).
fn lost_primary(e: &redis::RedisError) -> bool {
    e.is_connection_refusal() || e.is_connection_dropped() || e.is_io_error() || e.code() == Some("READONLY")
}

/// Behind Sentinel, a reply that says this connection's server is no longer the primary:
/// READONLY, for a write sent to a demoted primary. redis-rs hands error replies back as
/// values ([`redis::Value::ServerError`]) and turns them into errors only later, when the
/// caller converts the reply; in a pipeline's replies, any of them.
fn demoted(v: &redis::Value) -> bool {
    matches!(v, redis::Value::ServerError(e) if e.code() == "READONLY")
}

/// A [`Conn`] that is replaced when its calls keep timing out.
///
/// A [`Conn`] reconnects when its connection breaks (reset, end of stream), but a
/// connection that goes silent, such as a network path that died without a reset or a hung
/// proxy in front of Redis, only makes every call time out, for as long as TCP keeps it
/// open: hours. After `REPLACE_AFTER_TIMEOUTS` (3) timeouts in a row, one background task
/// opens a new connection and every clone moves onto it; until then calls fail and their
/// callers retry, as for any Redis error. Behind Sentinel the same happens when the
/// primary is gone or demoted (refused, dropped, READONLY), and at once when a `WAIT`
/// finds fewer replicas than asked for (a primary the sentinels replaced may be cut off
/// from them and still take writes): the new connection goes to the primary the sentinels
/// name.
#[derive(Clone)]
pub struct HealingConnection {
    shared: Arc<Shared>,
}

impl HealingConnection {
    pub(crate) fn new(redis: Redis, conn: Conn) -> Self {
        Self {
            shared: Arc::new(Shared {
                redis,
                current: RwLock::new(conn),
                timeouts: AtomicU32::new(0),
                replacing: AtomicBool::new(false),
            }),
        }
    }

    /// True on a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        self.current().is_cluster()
    }
}

struct Shared {
    redis: Redis,
    current: RwLock<Conn>,
    timeouts: AtomicU32,
    replacing: AtomicBool,
}

impl HealingConnection {
    fn current(&self) -> Conn {
        self.shared
            .current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Counts a call's outcome: `failed` when it timed out or, behind Sentinel, said the
    /// primary is gone (`demoted`: its reply said so).
    fn observe<T>(&self, result: &redis::RedisResult<T>, demoted: impl FnOnce(&T) -> bool) {
        let shared = &self.shared;
        let sentinel = shared.redis.follows_failover();
        let failed = match result {
            Ok(v) => sentinel && demoted(v),
            Err(e) => e.is_timeout() || (sentinel && lost_primary(e)),
        };
        if !failed {
            if result.is_ok() {
                shared.timeouts.store(0, Ordering::Relaxed);
            }
            return;
        }
        let n = shared.timeouts.fetch_add(1, Ordering::Relaxed) + 1;
        if n >= REPLACE_AFTER_TIMEOUTS {
            self.recheck_primary();
        }
    }

    /// Replaces the connection by a new one (behind Sentinel: to the primary the sentinels
    /// name now), in the background, unless a replacement is already under way.
    pub(crate) fn recheck_primary(&self) {
        if !self.shared.replacing.swap(true, Ordering::AcqRel) {
            tokio::spawn(replace(self.shared.clone()));
        }
    }
}

impl std::fmt::Debug for HealingConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HealingConnection")
            .field("url", &self.shared.redis.url())
            .field("timeouts", &self.shared.timeouts.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

async fn replace(shared: Arc<Shared>) {
    match shared.redis.connect_conn().await {
        Ok(conn) => {
            *shared.current.write().unwrap_or_else(|p| p.into_inner()) = conn;
            shared.timeouts.store(0, Ordering::Relaxed);
            tracing::warn!(
                "calls to Redis kept failing, or the primary was in doubt: replaced the connection"
            );
        }
        // Still unreachable: the next failures try again.
        Err(e) => tracing::debug!(error = %e, "replacing the connection failed"),
    }
    shared.replacing.store(false, Ordering::Release);
}

impl ConnectionLike for HealingConnection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a redis::Cmd) -> RedisFuture<'a, redis::Value> {
        let mut conn = self.current();
        Box::pin(async move {
            let r = conn.req_packed_command(cmd).await;
            self.observe(&r, demoted);
            r
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<redis::Value>> {
        let mut conn = self.current();
        Box::pin(async move {
            let r = conn.req_packed_commands(pipeline, offset, count).await;
            self.observe(&r, |vs| vs.iter().any(demoted));
            r
        })
    }

    fn get_db(&self) -> i64 {
        self.current().get_db()
    }
}
