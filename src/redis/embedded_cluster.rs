//! A private Redis Cluster on loopback: `primaries` redis-servers with `replicas` replicas
//! each (each an [`EmbeddedRedis`] with `--cluster-enabled yes`), joined by
//! `redis-cli --cluster create`, stopped on drop. For the tests, the load-test harness
//! (`--cluster N`) and trying weir on a cluster without one at hand.

use super::embedded::EmbeddedRedis;
use crate::error::{Error, Result, ServerError};
use std::process::Command;
use std::time::{Duration, Instant};

/// A running private Redis Cluster.
#[derive(Debug)]
pub struct EmbeddedCluster {
    nodes: Vec<EmbeddedRedis>,
}

/// How long a node may be unreachable before the cluster fails it over (ms): short, so
/// that a failover in a test takes seconds.
pub const NODE_TIMEOUT_MS: u64 = 2000;

impl EmbeddedCluster {
    /// Starts `primaries` primaries (at least 3, as `redis-cli --cluster create` asks)
    /// with `replicas` replicas each, no persistence, and waits until every node sees the
    /// cluster as ok.
    pub fn start(primaries: usize, replicas: usize) -> Result<Self> {
        if primaries < 3 {
            return Err(Error::config(
                "Redis Cluster primaries",
                format!("must be at least 3, not {primaries}"),
            ));
        }
        let timeout = NODE_TIMEOUT_MS.to_string();
        let args = [
            "--save",
            "",
            "--appendonly",
            "no",
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            &timeout,
            // A replica syncs at once (the default waits 5 s for others to join).
            "--repl-diskless-sync-delay",
            "0",
        ];
        let nodes = (0..primaries * (1 + replicas))
            .map(|_| EmbeddedRedis::start_with(&args))
            .collect::<Result<Vec<_>>>()?;
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for n in &nodes {
            create.arg(format!("127.0.0.1:{}", n.port()));
        }
        create.args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"]);
        let out = create.output().map_err(|source| ServerError::Missing {
            program: "redis-cli",
            package: "redis-tools",
            source,
        })?;
        if !out.status.success() {
            let output = String::from_utf8_lossy(&out.stdout)
                .lines()
                .chain(String::from_utf8_lossy(&out.stderr).lines())
                .filter(|l| l.contains("ERR") || l.contains("rror"))
                .collect::<Vec<_>>()
                .join("; ");
            return Err(ServerError::Command {
                command: "redis-cli --cluster create",
                output,
            }
            .into());
        }
        let cluster = Self { nodes };
        cluster.wait_ok(Duration::from_secs(30))?;
        Ok(cluster)
    }

    /// Waits until every running node reports `cluster_state:ok` and knows every node,
    /// and every replica's link to its primary is up.
    pub fn wait_ok(&self, within: Duration) -> Result<()> {
        let started = Instant::now();
        loop {
            let ok = |n: &EmbeddedRedis| node_ok(n.port(), self.nodes.len()) && replica_synced(n.port());
            if self.nodes.iter().all(ok) {
                return Ok(());
            }
            if started.elapsed() > within {
                return Err(ServerError::NotReady {
                    what: "the cluster was not ok",
                    within,
                }
                .into());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The URL of its first node (weir finds the rest by itself).
    pub fn url(&self) -> String {
        self.nodes[0].url()
    }

    /// Every node's URL, comma-separated: the seed form of `--redis-url`.
    pub fn urls(&self) -> String {
        self.nodes.iter().map(|n| n.url()).collect::<Vec<_>>().join(",")
    }

    /// Its nodes, primaries first (in the order `redis-cli --cluster create` made them).
    pub fn nodes(&mut self) -> &mut [EmbeddedRedis] {
        &mut self.nodes
    }

    /// The ports of the nodes that are primaries now (after a failover, a promoted replica
    /// is one), by asking a live node.
    pub fn primary_ports(&self) -> Result<Vec<u16>> {
        for n in &self.nodes {
            if let Ok(text) = cluster_nodes(n.port()) {
                let mut ports: Vec<u16> = text
                    .lines()
                    .filter(|l| l.contains("master") && !l.contains("fail"))
                    .filter_map(|l| l.split_whitespace().nth(1))
                    .filter_map(|addr| addr.split('@').next()?.rsplit(':').next()?.parse().ok())
                    .collect();
                ports.sort_unstable();
                return Ok(ports);
            }
        }
        Err(ServerError::NoNode.into())
    }
}

fn cluster_nodes(port: u16) -> redis::RedisResult<String> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}"))?;
    let mut c = client.get_connection_with_timeout(Duration::from_millis(500))?;
    redis::cmd("CLUSTER").arg("NODES").query(&mut c)
}

/// The node on `port` is a primary, or a replica whose link to its primary is up (or it
/// does not answer: a node stopped on purpose does not hold the others up).
fn replica_synced(port: u16) -> bool {
    let Ok(client) = redis::Client::open(format!("redis://127.0.0.1:{port}")) else {
        return false;
    };
    let Ok(mut c) = client.get_connection_with_timeout(Duration::from_millis(500)) else {
        return true;
    };
    let info: String = redis::cmd("INFO")
        .arg("replication")
        .query(&mut c)
        .unwrap_or_default();
    info.contains("role:master") || info.contains("master_link_status:up")
}

/// The node on `port` answers, sees the cluster as ok and knows `count` nodes.
fn node_ok(port: u16, count: usize) -> bool {
    let Ok(client) = redis::Client::open(format!("redis://127.0.0.1:{port}")) else {
        return false;
    };
    let Ok(mut c) = client.get_connection_with_timeout(Duration::from_millis(500)) else {
        // A node stopped on purpose (a failover test) does not hold the others up.
        return true;
    };
    let info: String = redis::cmd("CLUSTER")
        .arg("INFO")
        .query(&mut c)
        .unwrap_or_default();
    let known = info
        .lines()
        .find_map(|l| l.strip_prefix("cluster_known_nodes:"))
        .and_then(|n| n.trim().parse::<usize>().ok());
    info.contains("cluster_state:ok") && known == Some(count)
}
