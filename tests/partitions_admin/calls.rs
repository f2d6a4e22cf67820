//! `weir::Queue` on a partitioned queue: stats summed and lane by lane, the dead-letter
//! queue merged and acted on across lanes, pause and resume on every lane, pages that go
//! lane after lane, workers merged by id, and the registry listing the queue once.

use crate::*;
use weir::queue::json::JobState;
use weir::{Queue, Queues, Stats};

#[tokio::test]
async fn stats_add_up_the_lanes_and_say_each() {
    let (ctx, parts) = partitioned("pstats", 3).await;
    let c = ctx.c();
    enqueue(&c, parts.partition(0).name(), "k", &["a.p0", "b.p0"]).await;
    enqueue(&c, parts.partition(2).name(), "k", &["c.p2"]).await;
    // The base: what a producer that does not know the map wrote.
    seed_ready(&mut ctx.c(), parts.base(), &[("old-1", "k")]).await;
    bury(&c, parts.partition(1), &["d.p1"]).await;
    scripts::pause(&mut ctx.c(), parts.partition(1), true)
        .await
        .unwrap();

    let q = ctx.admin();
    let s = q.stats().await.unwrap();
    assert_eq!(s.ready, [0, 4, 0], "{s:?}");
    assert_eq!((s.dead, s.in_flight, s.delayed), (1, 0, 0), "{s:?}");
    assert!(s.paused, "one lane is paused");
    assert_eq!(s.counters.get("enqueued"), Some(&4), "{s:?}");
    assert_eq!(s.counters.get("dead"), Some(&1), "{s:?}");
    assert_eq!(
        s.dead_cap,
        4 * weir::queue::settings::DEFAULT_DEAD_CAP,
        "each lane's cap"
    );

    let by_lane = q.stats_by_lane().await.unwrap();
    let names: Vec<&str> = by_lane.iter().map(|(n, _)| n.as_str()).collect();
    let want: Vec<&str> = parts.lanes().map(|k| k.name()).collect();
    assert_eq!(names, want, "the partitions, then the base");
    assert_eq!(*names.last().unwrap(), ctx.queue);
    let ready: Vec<u64> = by_lane.iter().map(|(_, s)| s.ready_total()).collect();
    assert_eq!(ready, [2, 0, 1, 1]);
    // The same sum, but for the ages, which grow between the two reads.
    let again = Stats::sum(by_lane.iter().map(|(_, s)| s));
    assert!(again.oldest_ready_age_ms >= s.oldest_ready_age_ms);
    assert_eq!(
        Stats {
            oldest_ready_age_ms: s.oldest_ready_age_ms,
            ..again
        },
        s
    );

    // A handle on one lane sees that lane only.
    let lane = Queue::new(ctx.c(), parts.partition(0).name()).unwrap();
    assert!(lane.partitions().await.unwrap().is_none());
    assert_eq!(lane.stats().await.unwrap().ready_total(), 2);
}

#[tokio::test]
async fn the_dead_letter_queue_is_one_across_lanes() {
    let (ctx, parts) = partitioned("pdlq", 3).await;
    let mut c = ctx.c();
    seed_dead(
        &mut c,
        parts.partition(0),
        &[("d0.p0", "mail", 1000), ("e0.p0", "sms", 4000)],
    )
    .await;
    // x.p0 names partition 0 but lives in partition 2: found by the search after it.
    seed_dead(
        &mut c,
        parts.partition(2),
        &[("d2.p2", "mail", 3000), ("x.p0", "sms", 2000)],
    )
    .await;
    seed_dead(&mut c, parts.base(), &[("old", "sms", 5000)]).await;
    let q = ctx.admin();

    let all = q.dead_jobs(0, 10).await.unwrap();
    let got: Vec<(&str, &str)> = all
        .iter()
        .map(|d| (d.id.as_str(), d.lane.as_deref().unwrap()))
        .collect();
    let (p0, p2) = (parts.partition(0).name(), parts.partition(2).name());
    assert_eq!(
        got,
        [
            ("old", ctx.queue.as_str()),
            ("e0.p0", p0),
            ("d2.p2", p2),
            ("x.p0", p2),
            ("d0.p0", p0)
        ],
        "newest first over every lane"
    );
    let page: Vec<String> = q
        .dead_jobs(1, 2)
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.id)
        .collect();
    assert_eq!(page, ["e0.p0", "d2.p2"]);

    let ids = ["x.p0", "old", "nope"].map(String::from);
    assert_eq!(
        q.requeue_dead(&ids, 0).await.unwrap(),
        (2, vec!["nope".to_string()])
    );
    assert_eq!(
        lane_stats(&c, parts.partition(2)).await.ready[1],
        1,
        "x.p0 back where it was"
    );
    assert_eq!(lane_stats(&c, parts.base()).await.ready[1], 1);

    // The two oldest over every lane: d0.p0 (lane 0) and d2.p2 (lane 2).
    assert_eq!(q.requeue_dead(&[], 2).await.unwrap(), (2, Vec::new()));
    let left: Vec<String> = q
        .dead_jobs(0, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.id)
        .collect();
    assert_eq!(left, ["e0.p0"]);
    assert_eq!(lane_stats(&c, parts.partition(0)).await.ready[1], 1);

    seed_dead(&mut c, parts.partition(1), &[("m1.p1", "mail", 6000)]).await;
    seed_dead(&mut c, parts.base(), &[("m9", "mail", 7000)]).await;
    let r = q.dead_where(true, Some("mail"), None).await.unwrap();
    assert_eq!((r.count, r.queue.as_str()), (2, ctx.queue.as_str()));
    let r = q
        .dead_where(false, None, Some(Duration::from_secs(1)))
        .await
        .unwrap();
    assert_eq!(r.count, 1, "e0.p0 deleted");
    assert_eq!(q.stats().await.unwrap().dead, 0);

    // Everything back to the dead-letter queue, then purged on every lane.
    for (i, lane) in parts.lanes().enumerate() {
        let id = format!("z{i}");
        seed_dead(&mut c, lane, &[(&id, "k", 100 + i as u64)]).await;
    }
    assert_eq!(q.purge_dead().await.unwrap(), 4);
    assert_eq!(q.stats().await.unwrap().dead, 0);
}

#[tokio::test]
async fn pause_and_resume_every_lane() {
    let (ctx, parts) = partitioned("ppause", 2).await;
    let q = ctx.admin();
    let paused = |s: &Stats| s.paused;
    // One lane paused by hand: pausing the queue still changes the others.
    scripts::pause(&mut ctx.c(), parts.partition(1), true)
        .await
        .unwrap();
    assert!(q.pause().await.unwrap());
    for lane in parts.lanes() {
        assert!(
            paused(&lane_stats(&ctx.c(), lane).await),
            "{} paused",
            lane.name()
        );
    }
    assert!(!q.pause().await.unwrap(), "already paused everywhere");
    assert!(q.resume().await.unwrap());
    for lane in parts.lanes() {
        assert!(
            !paused(&lane_stats(&ctx.c(), lane).await),
            "{} resumed",
            lane.name()
        );
    }
    assert!(!q.resume().await.unwrap());
    assert!(!q.stats().await.unwrap().paused);
}

#[tokio::test]
async fn pages_go_lane_after_lane() {
    let (ctx, parts) = partitioned("ppages", 3).await;
    let mut c = ctx.c();
    seed_ready(&mut c, parts.partition(0), &[("a.p0", "mail"), ("b.p0", "sms")]).await;
    seed_ready(&mut c, parts.partition(2), &[("c.p2", "mail")]).await;
    seed_ready(&mut c, parts.base(), &[("d", "sms")]).await;
    let q = ctx.admin();
    let ids = |p: &weir::queue::json::JobPage| -> Vec<(String, String)> {
        p.jobs
            .iter()
            .map(|j| (j.id.clone(), j.lane.clone().unwrap()))
            .collect()
    };
    let first = q.jobs(JobState::Ready, None, 2, None).await.unwrap();
    let (p0, p2) = (
        parts.partition(0).name().to_owned(),
        parts.partition(2).name().to_owned(),
    );
    assert_eq!(
        ids(&first),
        [("a.p0".into(), p0.clone()), ("b.p0".into(), p0.clone())]
    );
    let cursor = first.next_cursor.clone().expect("more lanes to go");
    assert_eq!(cursor, "1:0", "the next page starts at lane 1");
    let second = q.jobs(JobState::Ready, None, 2, Some(&cursor)).await.unwrap();
    assert_eq!(
        ids(&second),
        [("c.p2".into(), p2.clone()), ("d".into(), ctx.queue.clone())]
    );
    assert_eq!(second.next_cursor, None, "the base was the last lane");
    assert_eq!(second.queue, ctx.queue);

    // A kind filter looks at every lane within one window.
    let mail = q.jobs(JobState::Ready, Some("mail"), 10, None).await.unwrap();
    assert_eq!(ids(&mail), [("a.p0".into(), p0), ("c.p2".into(), p2)]);
    assert_eq!(mail.next_cursor, None);

    // Delayed jobs page within a lane too; a cursor of another queue's form is refused.
    let due = |id: &str, at: u64| (id.to_string(), at);
    let mut s = State::default();
    for (id, at) in [
        ("e1", 5_000_000_000_000),
        ("e2", 5_000_000_000_001),
        ("e3", 5_000_000_000_002),
    ] {
        s = s.raw_job(id, &envelope(id, "k"));
        s.delayed[1].push(due(id, at));
    }
    seed(&mut c, parts.partition(1), &s).await;
    let d1 = q.jobs(JobState::Delayed, None, 2, None).await.unwrap();
    let c1 = d1.next_cursor.clone().unwrap();
    assert!(c1.starts_with("1:"), "{c1}");
    let d2 = q.jobs(JobState::Delayed, None, 2, Some(&c1)).await.unwrap();
    let seen: Vec<String> = d1.jobs.iter().chain(&d2.jobs).map(|j| j.id.clone()).collect();
    assert_eq!(seen, ["e1", "e2", "e3"]);
    let e = q.jobs(JobState::Ready, None, 2, Some("7")).await.unwrap_err();
    assert!(
        e.to_string().contains("page cursor \"7\" is not one a page gave"),
        "{e}"
    );
}

#[tokio::test]
async fn workers_of_every_lane_merge_by_id() {
    let (ctx, parts) = partitioned("pworkers", 2).await;
    let beat = |keys: &QueueKeys, id: &str, running: u64, leased: u64| {
        let (keys, id, mut c) = (keys.clone(), id.to_owned(), ctx.c());
        async move {
            let fields = [
                ("host", "h1".to_string()),
                ("pid", "42".into()),
                ("version", "0.1.0".into()),
                ("started_ms", "1000".into()),
                ("limit", "16".into()),
                ("running", running.to_string()),
                ("leased", leased.to_string()),
            ];
            scripts::worker_beat(&mut c, &keys, &id, 60_000, &fields)
                .await
                .unwrap();
        }
    };
    // One process serving both partitions under one id; another on the base.
    beat(parts.partition(0), "w1", 2, 3).await;
    beat(parts.partition(1), "w1", 1, 4).await;
    beat(parts.base(), "w2", 0, 0).await;
    let list = ctx.admin().workers().await.unwrap();
    assert_eq!(list.queue, ctx.queue);
    let mut got: Vec<(&str, u64, u64, u64)> = list
        .workers
        .iter()
        .map(|w| (w.id.as_str(), w.running, w.leased, w.concurrency_limit))
        .collect();
    got.sort();
    assert_eq!(got, [("w1", 3, 7, 16), ("w2", 0, 0, 16)]);
}

#[tokio::test]
async fn the_registry_lists_a_partitioned_queue_once() {
    let (ctx, parts) = partitioned("preg", 2).await;
    // Producers on the lanes (which register the lanes' tags) and on the base.
    enqueue(&ctx.c(), parts.partition(0).name(), "k", &["a.p0"]).await;
    enqueue(&ctx.c(), parts.partition(1).name(), "k", &["b.p1", "c.p1"]).await;
    seed_ready(&mut ctx.c(), parts.base(), &[("d", "k")]).await;
    let queues = Queues::new(ctx.c());
    let names = queues.names().await.unwrap();
    assert!(names.contains(&ctx.queue), "{names:?}");
    assert!(!names.iter().any(|n| n.contains('~')), "{names:?}");
    let list = queues.list(None).await.unwrap();
    let mine: Vec<_> = list.queues.iter().filter(|q| q.name == ctx.queue).collect();
    assert_eq!(mine.len(), 1);
    assert_eq!(
        (mine[0].ready.total, mine[0].partitions),
        (4, Some(2)),
        "{:?}",
        mine[0]
    );
    assert_eq!(mine[0].counters.get("enqueued"), Some(&3));
    let (other, _) = ctx.other_queue("plain");
    enqueue(&ctx.c(), &other, "k", &["e"]).await;
    let list = queues.list(None).await.unwrap();
    let plain = list.queues.iter().find(|q| q.name == other).unwrap();
    assert_eq!(plain.partitions, None);
}
