//! Redis Cluster: telling a cluster from a single Redis, the cluster client, and the wake
//! subscription on sharded pub/sub.
//!
//! weir takes a cluster as one URL of any node (a node's `INFO cluster` says
//! `cluster_enabled:1`) or as several seed URLs (`--redis-url a,b,c`). Scripts route by
//! their first key; the wake channel of a queue carries the queue's hash tag, so on a
//! cluster it is a sharded channel (SSUBSCRIBE, and SPUBLISH in the scripts: see
//! `wake()` in `scripts/lib.lua`): an enqueue wakes the consumers of its own shard and is
//! not broadcast to every node.

use futures_util::Stream;
use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::{Msg, PushInfo, PushKind, RedisResult};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::mpsc;

/// Whether an `INFO cluster` reply is a cluster node's.
pub(crate) fn is_cluster_info(info: &str) -> bool {
    info.lines().any(|l| l.trim() == "cluster_enabled:1")
}

/// How a cluster client is built (the same for every connection of one [`crate::Redis`]).
#[derive(Clone)]
pub(crate) struct ClusterSpec {
    pub seeds: Vec<String>,
    #[cfg(feature = "tls")]
    pub certs: Option<redis::TlsCertificates>,
    pub response_timeout: Duration,
    pub connect_timeout: Duration,
}

impl ClusterSpec {
    fn builder(&self) -> ClusterClientBuilder {
        let b = ClusterClientBuilder::new(self.seeds.iter().map(String::as_str))
            .connection_timeout(self.connect_timeout)
            .response_timeout(self.response_timeout)
            // MOVED/ASK and reconnects during a failover: redis-rs retries these itself,
            // waiting up to a few seconds in all, then the caller's retry takes over.
            .retries(6)
            .min_retry_wait(50)
            .max_retry_wait(2000);
        #[cfg(feature = "tls")]
        let b = match &self.certs {
            Some(c) => b.certs(c.clone()),
            None => b,
        };
        b
    }

    /// The client every script call goes through.
    pub(crate) fn client(&self) -> RedisResult<ClusterClient> {
        self.builder().build()
    }

    /// A subscription to the sharded channel `channel`: a connection of its own, in
    /// RESP3 (pushes need it), whose messages come out of the returned stream.
    pub(crate) async fn subscribe(&self, channel: &str) -> RedisResult<Sharded> {
        let (tx, rx) = mpsc::unbounded_channel();
        let client = self
            .builder()
            .use_protocol(redis::ProtocolVersion::RESP3)
            .push_sender(tx)
            .build()?;
        let mut conn = client.get_async_connection().await?;
        conn.ssubscribe(channel).await?;
        Ok(Sharded { _conn: conn, rx })
    }
}

/// The messages of one sharded subscription. It ends when the server unsubscribes it (its
/// slot moved to another shard: the subscriber connects again, to the new owner).
pub(crate) struct Sharded {
    _conn: redis::cluster_async::ClusterConnection,
    rx: mpsc::UnboundedReceiver<PushInfo>,
}

impl Stream for Sharded {
    type Item = Msg;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Msg>> {
        loop {
            match self.rx.poll_recv(cx) {
                Poll::Ready(Some(push)) => match push.kind {
                    PushKind::SMessage => {
                        if let Some(m) = Msg::from_push_info(push) {
                            return Poll::Ready(Some(m));
                        }
                    }
                    PushKind::SUnsubscribe => return Poll::Ready(None),
                    // Confirmations, and the resubscriptions after a reconnect.
                    _ => {}
                },
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn tells_a_cluster_node_by_its_info() {
        assert!(super::is_cluster_info("# Cluster\r\ncluster_enabled:1\r\n"));
        assert!(!super::is_cluster_info("# Cluster\r\ncluster_enabled:0\r\n"));
        assert!(!super::is_cluster_info(""));
    }
}
