//! Redis Cluster, against a local cluster each test starts (three primaries on free
//! ports, `redis-cli --cluster create`): a queue enqueued and drained through any node or
//! a list of seeds, the queue registry in a slot of its own, and idle consumers woken on
//! the sharded channel of their queue's shard rather than by a broadcast to every node.

mod faults;

use faults::{Proc, run_weir};
use std::time::{Duration, Instant};
use weir::{EmbeddedCluster, Queue, Queues, Redis};

const T: Duration = Duration::from_secs(120);

/// A queue name whose hash tag lands on a primary other than the first node's, so that
/// a client connected to the first node must follow the slot map to reach it.
fn queue_elsewhere(c: &EmbeddedCluster, label: &str) -> String {
    let first = c.url();
    let mut conn = redis::Client::open(first).unwrap().get_connection().unwrap();
    let mine: Vec<(i64, i64)> = slot_ranges_of(&mut conn);
    for i in 0.. {
        let q = format!("{label}-{i}");
        let slot: i64 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(&q)
            .query(&mut conn)
            .unwrap();
        if !mine.iter().any(|(a, b)| (*a..=*b).contains(&slot)) {
            return q;
        }
    }
    unreachable!()
}

/// The slot ranges the node behind `conn` serves.
fn slot_ranges_of(conn: &mut redis::Connection) -> Vec<(i64, i64)> {
    let me: String = redis::cmd("CLUSTER").arg("MYID").query(conn).unwrap();
    let nodes: String = redis::cmd("CLUSTER").arg("NODES").query(conn).unwrap();
    let line = nodes.lines().find(|l| l.starts_with(&me)).unwrap();
    line.split_whitespace()
        .skip(8)
        .filter_map(|r| {
            let (a, b) = r.split_once('-').unwrap_or((r, r));
            Some((a.parse().ok()?, b.parse().ok()?))
        })
        .collect()
}

/// The port of the primary serving `key`'s slot.
fn owner_port(c: &EmbeddedCluster, key: &str) -> u16 {
    let mut conn = redis::Client::open(c.url()).unwrap().get_connection().unwrap();
    let slot: i64 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(&mut conn)
        .unwrap();
    let shards: redis::Value = redis::cmd("CLUSTER").arg("SLOTS").query(&mut conn).unwrap();
    let redis::Value::Array(ranges) = shards else {
        panic!("{shards:?}")
    };
    for r in ranges {
        let redis::Value::Array(r) = r else { continue };
        let (redis::Value::Int(a), redis::Value::Int(b)) = (&r[0], &r[1]) else {
            continue;
        };
        if (*a..=*b).contains(&slot) {
            let redis::Value::Array(node) = &r[2] else {
                panic!()
            };
            let redis::Value::Int(port) = node[1] else {
                panic!()
            };
            return port as u16;
        }
    }
    panic!("no owner for slot {slot}")
}

fn node_conn(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}"))
        .unwrap()
        .get_connection()
        .unwrap()
}

/// `INFO commandstats` calls of `cmd` on the node at `port`.
fn calls(port: u16, cmd: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut node_conn(port))
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{cmd}:calls=")))
        .and_then(|rest| rest.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

fn ndjson(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| format!("{{\"kind\":\"k\",\"payload\":{{\"n\":{i}}}}}\n"))
        .collect::<String>()
        .into_bytes()
}

async fn admin(url: &str, queue: &str) -> Queue {
    Queue::new(Redis::open(url).unwrap().connect().await.unwrap(), queue).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_on_a_cluster_is_enqueued_and_drained_through_any_node_or_the_seeds() {
    let cluster = EmbeddedCluster::start(3, 0).unwrap();
    let redis = Redis::open(&cluster.url()).unwrap();
    assert!(
        redis.is_cluster().await.unwrap(),
        "one node's URL is enough to find the cluster"
    );
    let q = queue_elsewhere(&cluster, "drain");
    let url = cluster.url();
    let (code, out, err) = run_weir(
        &["enqueue", "--redis-url", &url, "-q", &q],
        Some(&ndjson(5000)),
        T,
    );
    assert_eq!(code, 0, "{out}\n{err}");
    // The same again through the seed list, with ids given (the script path).
    let given: String = (0..1000)
        .map(|i| format!("{{\"kind\":\"k\",\"id\":\"given-{i}\",\"payload\":{i}}}\n"))
        .collect();
    let seeds = cluster.urls();
    let (code, out, err) = run_weir(
        &["enqueue", "--redis-url", &seeds, "-q", &q],
        Some(given.as_bytes()),
        T,
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let stats = admin(&url, &q).await.stats().await.unwrap();
    assert_eq!(stats.ready_total(), 6000, "{stats:?}");

    let (code, out, err) = run_weir(
        &[
            "work",
            "--redis-url",
            &url,
            "-q",
            &q,
            "--handler",
            "noop",
            "--drain",
            "--no-metrics",
        ],
        None,
        T,
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let stats = admin(&url, &q).await.stats().await.unwrap();
    assert_eq!(
        (stats.ready_total(), stats.in_flight, stats.dead),
        (0, 0, 0),
        "{stats:?}"
    );
    assert_eq!(stats.counters.get("acked"), Some(&6000), "{stats:?}");

    // The registry lives in a slot of its own and still lists the queue.
    let listed = Queues::new(redis.connect().await.unwrap()).names().await.unwrap();
    assert!(listed.contains(&q), "{listed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_consumers_are_woken_on_their_shard_only() {
    let cluster = EmbeddedCluster::start(3, 0).unwrap();
    let url = cluster.url();
    let q = queue_elsewhere(&cluster, "wake");
    let channel = format!("weir:{{{q}}}:wake");
    let owner = owner_port(&cluster, &channel);
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let _worker = Proc::weir(
        &[
            "work",
            "--redis-url",
            &url,
            "-q",
            &q,
            "--handler",
            "noop",
            "--no-metrics",
        ],
        &out,
        &err,
    );
    // Idle, it listens on the queue's sharded channel, on the shard that owns it.
    let started = Instant::now();
    loop {
        let n: (String, u64) = redis::cmd("PUBSUB")
            .arg("SHARDNUMSUB")
            .arg(&channel)
            .query(&mut node_conn(owner))
            .unwrap();
        if n.1 >= 1 {
            break;
        }
        assert!(
            started.elapsed() < T,
            "no sharded subscriber: {}",
            std::fs::read_to_string(&err).unwrap()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ports = cluster.primary_ports().unwrap();
    for p in &ports {
        let _: () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query(&mut node_conn(*p))
            .unwrap();
    }
    let (code, out_, err_) = run_weir(&["enqueue", "--redis-url", &url, "-q", &q], Some(&ndjson(3)), T);
    assert_eq!(code, 0, "{out_}\n{err_}");
    let one: String = "{\"kind\":\"k\",\"id\":\"one\",\"payload\":1}\n".into();
    let (code, out_, err_) = run_weir(
        &["enqueue", "--redis-url", &url, "-q", &q],
        Some(one.as_bytes()),
        T,
    );
    assert_eq!(code, 0, "{out_}\n{err_}");
    let a = admin(&url, &q).await;
    let started = Instant::now();
    while a.stats().await.unwrap().counters.get("acked") != Some(&4) {
        assert!(
            started.elapsed() < T,
            "not drained: {}",
            std::fs::read_to_string(&err).unwrap()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Both enqueue paths (plain commands, the script) published on the shard; nothing
    // was broadcast.
    assert!(
        calls(owner, "spublish") >= 2,
        "the owner published {} times",
        calls(owner, "spublish")
    );
    for p in ports {
        assert_eq!(calls(p, "publish"), 0, "a plain PUBLISH reached node {p}");
    }
}
