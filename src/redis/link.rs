//! [`Conn`]: the one connection type weir runs on, to a single Redis or to a Redis Cluster.
//!
//! Both kinds are multiplexed, reconnect by themselves and are cheap to clone. A cluster
//! connection routes every script call by its first key, and every key of a queue (or of
//! one partition of a queue) carries the same hash tag, so each call lands on the one
//! primary that serves the queue's slot; MOVED and ASK during resharding or failover are
//! followed by redis-rs, which refreshes its slot map and sends the call again.

use super::healing::HealingConnection;
use redis::aio::{ConnectionLike, ConnectionManager};
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, Slot, SlotAddr};
use redis::{RedisFuture, RedisResult};
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
