//! Redis Cluster, against a local cluster each test starts (three primaries on free
//! ports, `redis-cli --cluster create`): a queue enqueued and drained through any node or
//! a list of seeds (also as a `Producer::bulk` load), the queue registry in a slot of its
//! own, and idle consumers woken on the sharded channel of their queue's shard rather
//! than by a broadcast to every node.

mod faults;

use faults::{Workers, run_weir};
use std::time::{Duration, Instant};
use weir::queue::partitions::Partitions;
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

/// `Producer::bulk` on a cluster: a plain queue's chunks reach its shard through another
/// node and register the queue; a partitioned queue's chunks go in turn to partitions on
/// different primaries (caller ids to the partition they hash to), in compact envelopes
/// too; a consumer drains every job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_load_on_a_cluster_reaches_every_shard_and_drains() {
    let cluster = EmbeddedCluster::start(3, 0).unwrap();
    let url = cluster.url();
    let redis = Redis::open(&url).unwrap();
    let conn = redis.connect().await.unwrap();
    let drain = |q: &str| {
        let args = [
            "work",
            "--redis-url",
            &url,
            "-q",
            q,
            "--handler",
            "noop",
            "--drain",
            "--no-metrics",
        ];
        let (code, out, err) = run_weir(&args, None, T);
        assert_eq!(code, 0, "{out}\n{err}");
    };

    let q = queue_elsewhere(&cluster, "bulk");
    let producer = weir::Producer::new(conn.clone(), &q).unwrap();
    let r = producer.bulk("k").enqueue(vec![1u8; 2_500]).await.unwrap();
    assert_eq!(r.enqueued, 2_500);
    let given = (0..500).map(|i| (format!("given-{i}"), i));
    assert_eq!(
        producer.bulk("k").enqueue_with_ids(given).await.unwrap().enqueued,
        500
    );
    let stats = admin(&url, &q).await.stats().await.unwrap();
    assert_eq!(stats.ready_total(), 3_000, "{stats:?}");
    assert_eq!(stats.counters.get("enqueued"), Some(&3_000), "{stats:?}");
    let listed = Queues::new(redis.connect().await.unwrap()).names().await.unwrap();
    assert!(listed.contains(&q), "{listed:?}");
    drain(&q);
    let stats = admin(&url, &q).await.stats().await.unwrap();
    assert_eq!(
        (stats.ready_total(), stats.counters.get("acked")),
        (0, Some(&3_000)),
        "{stats:?}"
    );

    let spread = "bulk-spread";
    let parts = Partitions::create(&mut conn.clone(), spread, 6)
        .await
        .unwrap()
        .partitions;
    // its generated ids in compact envelopes (the caller's below in full)
    let producer = weir::Producer::open(conn.clone(), spread)
        .await
        .unwrap()
        .compact_envelopes(true);
    let r = producer.bulk("k").enqueue(vec![1u8; 12_000]).await.unwrap();
    assert_eq!(r.enqueued, 12_000);
    let depths = partition_depths(&url, spread).await;
    assert!(
        depths.iter().all(|d| d.1 == 2_000),
        "a chunk of 1,000 to each in turn: {depths:?}"
    );
    let head: String = redis::cmd("LINDEX")
        .arg(parts.partition(0).ready(weir::Priority::Normal))
        .arg(0)
        .query_async(&mut conn.clone())
        .await
        .unwrap();
    assert!(head.starts_with(r#"{"id":""#), "compact: {head}");
    let given = (0..3_000).map(|i| (format!("m-{i}"), i));
    assert_eq!(
        producer.bulk("k").enqueue_with_ids(given).await.unwrap().enqueued,
        3_000
    );
    let depths = partition_depths(&url, spread).await;
    assert_eq!(depths.iter().map(|d| d.1).sum::<u64>(), 15_000, "{depths:?}");
    drain(spread);
    for keys in parts.lanes() {
        let s = admin(&url, keys.name()).await.stats().await.unwrap();
        assert_eq!((s.ready_total(), s.in_flight), (0, 0), "{}: {s:?}", keys.name());
    }
    // The queue's stats count all its lanes.
    let s = admin(&url, spread).await.stats().await.unwrap();
    assert_eq!(s.counters.get("acked"), Some(&15_000), "{s:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_consumers_are_woken_on_their_shard_only() {
    let cluster = EmbeddedCluster::start(3, 0).unwrap();
    let url = cluster.url();
    let q = queue_elsewhere(&cluster, "wake");
    let channel = format!("weir:{{{q}}}:wake");
    let owner = owner_port(&cluster, &channel);
    let mut workers = Workers::new();
    workers.start(&["--redis-url", &url, "-q", &q, "--handler", "noop", "--no-metrics"]);
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
        assert!(started.elapsed() < T, "no sharded subscriber: {}", workers.log(0));
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
        assert!(started.elapsed() < T, "not drained: {}", workers.log(0));
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

/// Ready jobs of each partition of `queue`, by the partition map.
async fn partition_depths(url: &str, queue: &str) -> Vec<(String, u64)> {
    let mut conn = Redis::open(url).unwrap().connect().await.unwrap();
    let parts = Partitions::read(&mut conn, queue)
        .await
        .unwrap()
        .expect("partitioned");
    let mut out = Vec::new();
    for i in 0..parts.count() {
        let keys = parts.partition(i);
        let mut n = 0;
        for p in [weir::Priority::High, weir::Priority::Normal, weir::Priority::Low] {
            let len: u64 = redis::cmd("LLEN")
                .arg(keys.ready(p))
                .query_async(&mut conn)
                .await
                .unwrap();
            n += len;
        }
        out.push((keys.name().to_owned(), n));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_queue_spreads_over_every_primary_and_two_consumers_drain_it_exactly_once() {
    let cluster = EmbeddedCluster::start(3, 0).unwrap();
    let url = cluster.url();
    let q = "spread";
    let (code, out, err) = run_weir(
        &[
            "queue",
            "create",
            "--redis-url",
            &url,
            "-q",
            q,
            "--partitions",
            "6",
        ],
        None,
        T,
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("spread over 3 primaries"), "{out}");
    let total = 100_000;
    // From a file: `weir enqueue` reads it on one thread, the cluster's connections and
    // the partitions' chunks on that thread too.
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), ndjson(total)).unwrap();
    let path = file.path().to_str().unwrap();
    let (code, out, err) = run_weir(&["enqueue", "--redis-url", &url, "-q", q, path], None, T);
    assert_eq!(code, 0, "{out}\n{err}");

    // Every primary holds jobs, and the partitions are within 20% of each other.
    for port in cluster.primary_ports().unwrap() {
        let keys: u64 = redis::cmd("DBSIZE").query(&mut node_conn(port)).unwrap();
        assert!(keys > 0, "primary {port} holds nothing");
    }
    let depths = partition_depths(&url, q).await;
    let (min, max) = (
        depths.iter().map(|d| d.1).min().unwrap(),
        depths.iter().map(|d| d.1).max().unwrap(),
    );
    assert_eq!(depths.iter().map(|d| d.1).sum::<u64>(), total as u64);
    assert!(max as f64 <= min as f64 * 1.2, "{depths:?}");

    let mut workers = Workers::new();
    let args = [
        "--redis-url",
        &url,
        "-q",
        q,
        "--handler",
        "print",
        "--drain",
        "--no-metrics",
    ];
    workers.start(&args);
    workers.start(&args);
    for (i, p) in workers.procs.iter_mut().enumerate() {
        let status = p.wait_timeout(T).expect("drained in time");
        assert!(status.success(), "{}", workers.log(i));
    }
    let seen = workers.printed();
    let each = workers.outs.iter().map(|o| faults::printed_ids(o).len());
    assert!(
        each.clone().all(|n| n > 0),
        "both consumers ran jobs: {:?}",
        each.collect::<Vec<_>>()
    );
    assert_eq!(seen.len(), total, "every job ran");
    assert!(seen.values().all(|&n| n == 1), "a job ran twice");
    let mut conn = Redis::open(&url).unwrap().connect().await.unwrap();
    let parts = Partitions::read(&mut conn, q).await.unwrap().unwrap();
    for keys in parts.lanes() {
        let s = admin(&url, keys.name()).await.stats().await.unwrap();
        assert_eq!((s.ready_total(), s.in_flight), (0, 0), "{}: {s:?}", keys.name());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_joining_and_leaving_leave_no_partition_unserved_for_longer_than_a_lease() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let cluster = EmbeddedCluster::start(3, 0).unwrap();
    let url = cluster.url();
    let q = "churn";
    let redis = Redis::open(&url).unwrap();
    let mut conn = redis.connect().await.unwrap();
    let parts = Partitions::create(&mut conn, q, 6).await.unwrap().partitions;
    let lease = Duration::from_secs(3);

    // A producer that never stops adding work to every partition, until told.
    let producing = Arc::new(AtomicBool::new(true));
    let enqueued = Arc::new(AtomicU64::new(0));
    let producer = weir::Producer::open(conn.clone(), q).await.unwrap();
    let feed = tokio::spawn({
        let (producing, enqueued) = (producing.clone(), enqueued.clone());
        async move {
            while producing.load(Ordering::Relaxed) {
                let jobs = (0..12).map(|i| weir::NewJob::new("k", &i).unwrap());
                let r = producer.enqueue_bulk(jobs).await.unwrap();
                enqueued.fetch_add(r.enqueued, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    });
    // Each lane's longest stretch without an ack while work waited in it.
    let watching = Arc::new(AtomicBool::new(true));
    let watch = tokio::spawn({
        let (parts, mut conn, watching) = (parts.clone(), conn.clone(), watching.clone());
        async move {
            let n = parts.count();
            let mut last = vec![(0u64, Instant::now()); n];
            let mut worst = vec![Duration::ZERO; n];
            while watching.load(Ordering::Relaxed) {
                for (i, (acked, at)) in last.iter_mut().enumerate() {
                    let keys = parts.partition(i);
                    let now: Option<u64> = redis::cmd("HGET")
                        .arg(keys.counters())
                        .arg("acked")
                        .query_async(&mut conn)
                        .await
                        .unwrap();
                    if now.unwrap_or(0) != *acked {
                        *acked = now.unwrap_or(0);
                        *at = Instant::now();
                    }
                    worst[i] = worst[i].max(at.elapsed());
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            worst
        }
    });
    let mut workers = Workers::new();
    let args = [
        "--redis-url",
        &url,
        "-q",
        q,
        "--handler",
        "noop",
        "--no-metrics",
        "--visibility-timeout",
        "3s",
    ];
    let (a, b) = (workers.start(&args), workers.start(&args));
    tokio::time::sleep(Duration::from_secs(3)).await;
    workers.procs[a].kill9();
    tokio::time::sleep(Duration::from_secs(3)).await;
    workers.start(&args);
    tokio::time::sleep(Duration::from_secs(3)).await;
    workers.procs[b].kill9();
    tokio::time::sleep(Duration::from_secs(6)).await;
    producing.store(false, Ordering::Relaxed);
    feed.await.unwrap();
    let total = enqueued.load(Ordering::Relaxed);
    // C alone finishes the work, the jobs A and B held among it.
    let started = Instant::now();
    loop {
        let mut left = 0;
        let mut acked = 0;
        for keys in parts.lanes() {
            let s = admin(&url, keys.name()).await.stats().await.unwrap();
            left += s.ready_total() + s.delayed + s.in_flight + s.dead;
            acked += s.counters.get("acked").copied().unwrap_or(0);
        }
        if left == 0 && acked >= total {
            break;
        }
        assert!(
            started.elapsed() < T,
            "{left} jobs left, {acked} of {total} acked"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    watching.store(false, Ordering::Relaxed);
    let worst = watch.await.unwrap();
    workers.stop(T);
    // A lane whose owner died waits at most for the owner's registry entry (one lease)
    // and its leases (one lease, side by side), plus a round or two: 2 s of slack here.
    eprintln!("longest stretches without an ack, per partition: {worst:?}");
    let bound = lease + Duration::from_secs(2);
    assert!(
        worst.iter().all(|w| *w <= bound),
        "longest stretches without an ack: {worst:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_killed_mid_run_loses_no_job_enqueued_with_wait_replicas() {
    let mut cluster = EmbeddedCluster::start(3, 1).unwrap();
    let url = cluster.urls();
    let q = "failover";
    let redis = Redis::open(&url).unwrap();
    let mut conn = redis.connect().await.unwrap();
    Partitions::create(&mut conn, q, 6).await.unwrap();
    let mut workers = Workers::running(&url, q, "print", 2);

    let producer = weir::Producer::open(conn.clone(), q)
        .await
        .unwrap()
        .wait_replicas(1, Duration::from_secs(2));
    let mut acknowledged = Vec::new();
    let mut refused = 0;
    let started = Instant::now();
    let mut killed = None;
    let mut before_kill = 0;
    let mut n = 0;
    while started.elapsed() < Duration::from_secs(14) {
        if killed.is_none() && started.elapsed() > Duration::from_secs(3) {
            // The first node is a primary: it serves a third of the slots, two partitions.
            let port = cluster.nodes()[0].port();
            cluster.nodes()[0].kill().unwrap();
            killed = Some(port);
            before_kill = acknowledged.len();
        }
        let ids: Vec<String> = (n..n + 60).map(|i| format!("f-{i}")).collect();
        n += 60;
        let jobs = ids
            .iter()
            .map(|id| weir::NewJob::new("k", &1).unwrap().id(id.clone()));
        match producer.enqueue_bulk(jobs).await {
            Ok(r) if r.duplicates.is_empty() => acknowledged.extend(ids),
            // Refused or unconfirmed during the failover: not acknowledged, so not promised.
            other => {
                if refused == 0 {
                    eprintln!("first refusal: {other:?}");
                }
                refused += 1
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(killed.is_some());
    // Jobs went in before the kill (a few hundred at least in 3 s, however loaded the
    // machine); after it, as soon as the cluster has failed over, which may take longer
    // than the run (the promise is about the jobs acknowledged, not how many there are).
    eprintln!(
        "{before_kill} acknowledged before the kill, {} in all, {refused} calls refused",
        acknowledged.len()
    );
    assert!(before_kill >= 300, "{before_kill} acknowledged before the kill");
    // Every acknowledged job runs, the killed primary's partitions' among them.
    workers.wait_printed(&acknowledged, T).await;
    eprintln!(
        "{} jobs acknowledged, {refused} calls refused during the failover",
        acknowledged.len()
    );
    workers.stop(T);
}

/// `CLUSTER MYID` of the node at `port`.
fn node_id(port: u16) -> String {
    redis::cmd("CLUSTER")
        .arg("MYID")
        .query(&mut node_conn(port))
        .unwrap()
}

/// Moves hash slot `slot` from the node at `from` to the node at `to` the way
/// `redis-cli --cluster reshard` does (IMPORTING/MIGRATING, MIGRATE in small batches,
/// SETSLOT NODE on every primary), slowly, so clients meet ASK and TRYAGAIN meanwhile.
async fn migrate_slot(primaries: &[u16], slot: u16, from: u16, to: u16) {
    let (from_id, to_id) = (node_id(from), node_id(to));
    let _: () = redis::cmd("CLUSTER")
        .arg("SETSLOT")
        .arg(slot)
        .arg("IMPORTING")
        .arg(&from_id)
        .query(&mut node_conn(to))
        .unwrap();
    let _: () = redis::cmd("CLUSTER")
        .arg("SETSLOT")
        .arg(slot)
        .arg("MIGRATING")
        .arg(&to_id)
        .query(&mut node_conn(from))
        .unwrap();
    loop {
        let keys: Vec<String> = redis::cmd("CLUSTER")
            .arg("GETKEYSINSLOT")
            .arg(slot)
            .arg(2)
            .query(&mut node_conn(from))
            .unwrap();
        if keys.is_empty() {
            break;
        }
        let _: () = redis::cmd("MIGRATE")
            .arg("127.0.0.1")
            .arg(to)
            .arg("")
            .arg(0)
            .arg(5000)
            .arg("REPLACE")
            .arg("KEYS")
            .arg(&keys)
            .query(&mut node_conn(from))
            .unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for p in primaries {
        let _: () = redis::cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg("NODE")
            .arg(&to_id)
            .query(&mut node_conn(*p))
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resharding_a_partition_mid_run_loses_nothing() {
    let cluster = EmbeddedCluster::start(3, 0).unwrap();
    let url = cluster.url();
    let q = "reshard";
    let redis = Redis::open(&url).unwrap();
    let mut conn = redis.connect().await.unwrap();
    let parts = Partitions::create(&mut conn, q, 3).await.unwrap().partitions;
    let mut workers = Workers::running(&url, q, "print:2ms", 2);
    // Partition 0's slot moves to the next primary while jobs flow into and out of it.
    let lane = parts.partition(0).clone();
    let from = owner_port(&cluster, lane.jobs());
    let primaries = cluster.primary_ports().unwrap();
    let to = *primaries.iter().find(|p| **p != from).unwrap();
    let slot: u16 = {
        let s: i64 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(lane.jobs())
            .query(&mut node_conn(from))
            .unwrap();
        s as u16
    };
    let producer = weir::Producer::open(conn.clone(), q).await.unwrap();
    let feed = tokio::spawn(async move {
        let mut ids = Vec::new();
        for round in 0..150 {
            let batch: Vec<String> = (0..20).map(|i| format!("r-{round}-{i}")).collect();
            let jobs = batch
                .iter()
                .map(|id| weir::NewJob::new("k", &1).unwrap().id(id.clone()));
            let r = producer
                .enqueue_bulk(jobs)
                .await
                .expect("enqueue rides out the move");
            assert!(r.duplicates.is_empty(), "{r:?}");
            ids.extend(batch);
            tokio::time::sleep(Duration::from_millis(40)).await;
        }
        ids
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    migrate_slot(&primaries, slot, from, to).await;
    let ids = feed.await.unwrap();
    assert_eq!(owner_port(&cluster, lane.jobs()), to, "the partition moved");
    workers.wait_printed(&ids, T).await;
    workers.stop(T);
    let left = admin(&url, lane.name()).await.stats().await.unwrap();
    assert_eq!(
        (left.ready_total(), left.in_flight, left.dead),
        (0, 0, 0),
        "{left:?}"
    );
}
