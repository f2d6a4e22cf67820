//! [`Conn`]: the one connection type weir runs on, to a single Redis or to a Redis Cluster.
//!
//! Both kinds are multiplexed, reconnect by themselves and are cheap to clone. A cluster
//! connection routes every script call by its first key, and every key of a queue (or of
//! one partition of a queue) carries the same hash tag, so each call lands on the one
//! primary that serves the queue's slot; MOVED and ASK during resharding or failover are
//! followed by redis-rs, which refreshes its slot map and sends the call again.
//!
//! [`HealingConnection`]: the consumer's connection, a [`Conn`] replaced when its calls keep
//! timing out. The two types hold each other (behind Sentinel a [`Conn`] is a healing one),
//! so they share this module; the healing one reopens through an [`Endpoint`], which
//! [`crate::Redis`] gives it, so this module needs nothing of the endpoint's.

use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, Slot, SlotAddr};
use redis::{RedisFuture, RedisResult};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// A connection to a single Redis or to a Redis Cluster (see [`crate::Redis::connect`]).
#[derive(Clone)]
pub struct Conn(Inner);

#[derive(Clone)]
enum Inner {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
    /// Behind Sentinel: a single connection, replaced by one to the new primary when the
    /// old one is gone.
    Failover(HealingConnection),
}

impl Conn {
    pub(crate) fn single(c: ConnectionManager) -> Self {
        Self(Inner::Single(c))
    }

    pub(crate) fn cluster(c: ClusterConnection) -> Self {
        Self(Inner::Cluster(c))
    }

    pub(crate) fn failover(c: HealingConnection) -> Self {
        Self(Inner::Failover(c))
    }

    /// True on a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        matches!(self.0, Inner::Cluster(_))
    }

    /// `WAIT replicas timeout` on the primary that serves `key`'s slot, over the
    /// connection that carried this connection's writes to it: returns how many replicas
    /// acknowledged every write sent before. (A plain `WAIT` on a cluster connection would
    /// go to every primary.)
    pub async fn wait_replicas(
        &mut self,
        key: &str,
        replicas: usize,
        timeout: Duration,
    ) -> RedisResult<usize> {
        let mut cmd = redis::cmd("WAIT");
        cmd.arg(replicas).arg(timeout.as_millis() as u64);
        match &mut self.0 {
            Inner::Single(c) => cmd.query_async(c).await,
            Inner::Failover(c) => {
                let acked: usize = cmd.query_async(c).await?;
                // Fewer replicas than asked for: the primary may be one the sentinels
                // have replaced, cut off from the others and still taking writes. The
                // next calls go to the primary the sentinels name now.
                if acked < replicas {
                    c.recheck_primary();
                }
                Ok(acked)
            }
            Inner::Cluster(c) => {
                let route = Route::with_slot(Slot::for_key(key), SlotAddr::Master);
                let to = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route));
                let acked = c.route_command(cmd, to).await?;
                Ok(redis::from_redis_value(acked)?)
            }
        }
    }
}

impl From<ConnectionManager> for Conn {
    fn from(c: ConnectionManager) -> Self {
        Self::single(c)
    }
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.is_cluster() {
            "Conn(cluster)"
        } else {
            "Conn(single)"
        })
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a redis::Cmd) -> RedisFuture<'a, redis::Value> {
        match &mut self.0 {
            Inner::Single(c) => c.req_packed_command(cmd),
            Inner::Cluster(c) => c.req_packed_command(cmd),
            Inner::Failover(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<redis::Value>> {
        match &mut self.0 {
            Inner::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Inner::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
            Inner::Failover(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match &self.0 {
            Inner::Single(c) => c.get_db(),
            Inner::Cluster(c) => c.get_db(),
            Inner::Failover(c) => c.get_db(),
        }
    }
}

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

/// What a [`HealingConnection`] knows of the endpoint it was opened to: how to open a
/// new connection to it ([`crate::Redis`]'s own way), whether it follows a Sentinel
/// failover, and its URL (for `Debug`).
pub(crate) struct Endpoint {
    pub reconnect: Reconnect,
    pub follows_failover: bool,
    pub url: String,
}

/// Opens a new connection to the endpoint (behind Sentinel: to the primary the sentinels
/// name now).
pub(crate) type Reconnect = Box<dyn Fn() -> RedisFuture<'static, Conn> + Send + Sync>;

impl HealingConnection {
    pub(crate) fn new(endpoint: Endpoint, conn: Conn) -> Self {
        Self {
            shared: Arc::new(Shared {
                endpoint,
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
    endpoint: Endpoint,
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
        let sentinel = shared.endpoint.follows_failover;
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
            .field("url", &self.shared.endpoint.url)
            .field("timeouts", &self.shared.timeouts.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

async fn replace(shared: Arc<Shared>) {
    match (shared.endpoint.reconnect)().await {
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
