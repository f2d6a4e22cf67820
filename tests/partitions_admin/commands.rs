//! The `weir` commands on a partitioned queue: what they print and do covers every lane.

use crate::*;
use serde_json::Value;

/// A queue of two partitions: ready jobs in partition 0 and the base, dead ones in
/// partition 1 (dead-lettered by a fetch and a fatal settle) and the base.
async fn world(label: &str) -> (Ctx, Partitions) {
    let (ctx, parts) = partitioned(label, 2).await;
    let c = ctx.c();
    enqueue(&c, parts.partition(0).name(), "k", &["a.p0", "b.p0"]).await;
    bury(&c, parts.partition(1), &["d.p1", "e.p1"]).await;
    seed_ready(&mut ctx.c(), parts.base(), &[("old", "k")]).await;
    seed_dead(&mut ctx.c(), parts.base(), &[("gone", "k", 1000)]).await;
    (ctx, parts)
}

fn ok(r: (i32, String, String)) -> String {
    assert_eq!(r.0, 0, "stdout: {}\nstderr: {}", r.1, r.2);
    r.1
}

#[tokio::test]
async fn stats_sum_the_lanes_and_show_each_when_asked() {
    let (ctx, parts) = world("pcli-stats").await;
    let q = ctx.queue.as_str();
    let out = ok(weir(&ctx.url, &["stats", "-q", q]));
    assert!(out.contains("ready      3 (high 0, normal 3, low 0)"), "{out}");
    assert!(out.contains("dead       3 (cap 30000;"), "{out}");
    assert!(out.contains("partitions 2 and the base"), "{out}");

    let out = ok(weir(&ctx.url, &["stats", "--partitions", "-q", q]));
    let row = |lane: &str| {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(lane))
            .unwrap_or_else(|| panic!("no row for {lane}: {out}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        row(parts.partition(0).name())[1..5],
        ["2", "0", "0", "0"],
        "{out}"
    );
    assert_eq!(
        row(parts.partition(1).name())[1..5],
        ["0", "0", "0", "2"],
        "{out}"
    );
    assert_eq!(row(q)[1..6], ["(base)", "1", "0", "0", "1"], "{out}");

    let v: Value = serde_json::from_str(&ok(weir(&ctx.url, &["stats", "--json", "-q", q]))).unwrap();
    assert_eq!(v["stats"]["ready"], serde_json::json!([0, 3, 0]));
    let lanes = v["partitions"]
        .as_array()
        .expect("a partitioned queue lists its lanes");
    let names: Vec<&str> = lanes.iter().map(|l| l["lane"].as_str().unwrap()).collect();
    assert_eq!(names, [parts.partition(0).name(), parts.partition(1).name(), q]);
    assert_eq!(lanes[1]["stats"]["dead"], 2);

    let (plain, _) = ctx.other_queue("plain");
    let v: Value = serde_json::from_str(&ok(weir(&ctx.url, &["stats", "--json", "-q", &plain]))).unwrap();
    assert!(v["partitions"].is_null(), "{v}");
}

#[tokio::test]
async fn dlq_pause_and_jobs_cover_every_lane() {
    let (ctx, parts) = world("pcli-dlq").await;
    let q = ctx.queue.as_str();
    let out = ok(weir(&ctx.url, &["dlq", "list", "-q", q]));
    assert_eq!(out.lines().count(), 4, "a header and three jobs: {out}");
    assert!(
        out.starts_with("ID ") && out.lines().next().unwrap().contains("LANE"),
        "{out}"
    );
    let line = out.lines().find(|l| l.starts_with("gone ")).unwrap();
    assert!(line.contains(&format!(" {q} ")), "{line}");
    let rows: Vec<Value> = ok(weir(&ctx.url, &["dlq", "list", "--json", "-q", q]))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        rows.iter().any(|r| r["lane"] == parts.partition(1).name()),
        "{rows:?}"
    );

    let r = weir(&ctx.url, &["dlq", "requeue", "d.p1", "gone", "zz", "-q", q]);
    assert_eq!(r.0, 3, "done in part: {r:?}");
    assert!(r.1.contains("requeued 2 jobs"), "{r:?}");
    assert!(r.2.contains("not in the dead-letter queue: zz"), "{r:?}");
    let out = ok(weir(&ctx.url, &["dlq", "requeue", "--all", "-q", q]));
    assert!(out.contains("requeued 1 job"), "{out}");
    bury(&ctx.c(), parts.partition(0), &["f.p0"]).await;
    let out = ok(weir(&ctx.url, &["dlq", "purge", "--yes", "-q", q]));
    assert!(out.contains("purged 1 job"), "{out}");
    assert_eq!(ctx.admin().stats().await.unwrap().dead, 0);

    assert!(ok(weir(&ctx.url, &["pause", "-q", q])).contains(&format!("queue {q} paused")));
    for lane in parts.lanes() {
        assert!(lane_stats(&ctx.c(), lane).await.paused, "{}", lane.name());
    }
    assert!(ok(weir(&ctx.url, &["resume", "-q", q])).contains("resumed"));
    assert!(!ctx.admin().stats().await.unwrap().paused);

    // Ready now: a.p0, b.p0 (partition 0), d.p1, e.p1 (partition 1), old, gone (base).
    let page: Value = serde_json::from_str(&ok(weir(
        &ctx.url,
        &["jobs", "--state", "ready", "--limit", "3", "--json", "-q", q],
    )))
    .unwrap();
    assert_eq!(page["jobs"].as_array().unwrap().len(), 3);
    assert_eq!(page["jobs"][0]["lane"], parts.partition(0).name());
    let cursor = page["next_cursor"].as_str().unwrap().to_owned();
    let out = ok(weir(
        &ctx.url,
        &[
            "jobs", "--state", "ready", "--limit", "10", "--cursor", &cursor, "-q", q,
        ],
    ));
    assert!(out.lines().next().unwrap().contains("LANE"), "{out}");
    assert_eq!(out.lines().count(), 4, "a header and the three after: {out}");
    assert!(!out.contains("more: --cursor"), "{out}");
}

#[tokio::test]
async fn job_commands_find_each_id_in_its_lane() {
    let (ctx, parts) = world("pcli-job").await;
    let q = ctx.queue.as_str();
    let out = ok(weir(&ctx.url, &["job", "show", "e.p1", "-q", q]));
    assert!(
        out.contains(&format!("lane        {}", parts.partition(1).name())),
        "{out}"
    );
    assert!(out.contains("state       dead"), "{out}");
    let v: Value =
        serde_json::from_str(&ok(weir(&ctx.url, &["job", "show", "old", "--json", "-q", q]))).unwrap();
    assert_eq!(
        (v["queue"].as_str(), v["job"]["lane"].as_str()),
        (Some(q), Some(q))
    );
    let r = weir(&ctx.url, &["job", "show", "nope", "-q", q]);
    assert_eq!(r.0, 1, "{r:?}");

    let out = ok(weir(&ctx.url, &["job", "run-now", "e.p1", "gone", "-q", q]));
    assert!(out.contains("2 jobs moved to the front of ready"), "{out}");
    assert!(
        out.contains(&format!("e.p1 (was dead in lane {})", parts.partition(1).name())),
        "{out}"
    );
    let v: Value = serde_json::from_str(&ok(weir(
        &ctx.url,
        &["job", "delete", "a.p0", "old", "--yes", "--json", "-q", q],
    )))
    .unwrap();
    let lanes: Vec<&str> = v["done"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["lane"].as_str().unwrap())
        .collect();
    assert_eq!(lanes, [parts.partition(0).name(), q]);
    let s = ctx.admin().stats().await.unwrap();
    assert_eq!(
        (s.ready_total(), s.dead),
        (3, 1),
        "b.p0, e.p1, gone ready; d.p1 dead"
    );
}

#[tokio::test]
async fn limits_set_binds_the_partitions_with_their_shares() {
    let (ctx, parts) = partitioned("pcli-limits", 3).await;
    let q = ctx.queue.as_str();
    let out = ok(weir(
        &ctx.url,
        &[
            "limits",
            "set",
            "--global-concurrency",
            "7",
            "--global-rate",
            "90/s",
            "-q",
            q,
        ],
    ));
    assert!(out.contains("global_concurrency=7"), "{out}");
    assert!(
        out.contains(
            "partitions 3, each holding its share: global rate 30/s (burst 3), global concurrency 2 to 3"
        ),
        "{out}"
    );
    let shares: Vec<u64> = {
        let mut v = Vec::new();
        for i in 0..3 {
            let s = weir::queue::settings::Settings::load(&mut ctx.c(), parts.partition(i).name())
                .await
                .unwrap();
            v.push(s.global_concurrency.unwrap());
        }
        v
    };
    assert_eq!(shares, [3, 2, 2]);
    let out = ok(weir(&ctx.url, &["limits", "get", "-q", q]));
    assert!(
        out.contains("global_concurrency=7") && out.contains("fleet: 0 leased"),
        "{out}"
    );
    ok(weir(&ctx.url, &["limits", "clear", "-q", q]));
    for lane in parts.lanes() {
        let s = weir::queue::settings::Settings::load(&mut ctx.c(), lane.name())
            .await
            .unwrap();
        assert_eq!(s, weir::queue::settings::Settings::default(), "{}", lane.name());
    }
}

#[tokio::test]
async fn queues_lists_the_partitioned_queue_once() {
    let (ctx, _parts) = world("pcli-queues").await;
    let v: Value =
        serde_json::from_str(&ok(weir(&ctx.url, &["queues", "--json", "--rate-window", "0s"]))).unwrap();
    let mine: Vec<&Value> = v["queues"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| {
            let name = v["name"].as_str().unwrap();
            name == ctx.queue || name.starts_with(&format!("{}~", ctx.queue))
        })
        .collect();
    assert_eq!(mine.len(), 1, "{mine:?}");
    assert_eq!(
        (mine[0]["ready"]["total"].as_u64(), mine[0]["partitions"].as_u64()),
        (Some(3), Some(2))
    );
    let out = ok(weir(&ctx.url, &["queues", "--rate-window", "0s"]));
    assert!(out.lines().next().unwrap().ends_with("PARTITIONS"), "{out}");
}
