//! A partitioned queue on a three-primary Redis Cluster: its partitions land on different
//! nodes, and the operator calls still see one queue (each script call goes to the node of
//! its lane).

use crate::*;
use weir::{EmbeddedCluster, Queue, Redis};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_and_dead_letter_requeue_across_nodes() {
    let cluster = EmbeddedCluster::start(3, 0).unwrap();
    let url = cluster.url();
    let conn = Redis::open(&url).unwrap().connect().await.unwrap();
    let queue = common::queue_name("pcluster");
    let made = Partitions::create(&mut conn.clone(), &queue, 3).await.unwrap();
    let nodes: std::collections::BTreeSet<&str> = made.placement.iter().map(|(_, a)| a.as_str()).collect();
    assert_eq!(nodes.len(), 3, "one partition per primary: {:?}", made.placement);
    let parts = made.partitions;

    for i in 0..3 {
        let (ready, dead) = (format!("r{i}.p{i}"), format!("d{i}.p{i}"));
        enqueue(&conn, parts.partition(i).name(), "k", &[&ready]).await;
        bury(&conn, parts.partition(i), &[&dead]).await;
    }
    seed_dead(&mut conn.clone(), parts.base(), &[("old", "k", 1000)]).await;

    let q = Queue::new(conn.clone(), &queue).unwrap();
    let s = q.stats().await.unwrap();
    assert_eq!((s.ready_total(), s.dead), (3, 4), "{s:?}");
    assert_eq!(s.counters.get("dead"), Some(&3), "{s:?}");
    let by_lane = q.stats_by_lane().await.unwrap();
    let dead: Vec<u64> = by_lane.iter().map(|(_, s)| s.dead).collect();
    assert_eq!(dead, [1, 1, 1, 1]);

    // By id, each where it is; then the oldest over every node.
    let ids = ["d1.p1", "old", "zz"].map(String::from);
    assert_eq!(
        q.requeue_dead(&ids, 0).await.unwrap(),
        (2, vec!["zz".to_string()])
    );
    assert_eq!(lane_stats(&conn, parts.partition(1)).await.ready_total(), 2);
    assert_eq!(q.requeue_dead(&[], 1).await.unwrap().0, 1);
    assert_eq!(q.stats().await.unwrap().dead, 1);

    // The command, across the nodes.
    let (code, out, err) = weir(&url, &["dlq", "requeue", "--all", "-q", &queue]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("requeued 1 job"), "{out}");
    let (code, out, err) = weir(&url, &["stats", "--partitions", "-q", &queue]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("ready      7 (high 0, normal 7, low 0)"), "{out}");
    for lane in parts.lanes() {
        assert!(
            out.lines().any(|l| l.starts_with(lane.name())),
            "{}: {out}",
            lane.name()
        );
    }
    assert!(q.pause().await.unwrap());
    assert!(q.stats_by_lane().await.unwrap().iter().all(|(_, s)| s.paused));
}
