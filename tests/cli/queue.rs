//! `weir stats`, `weir dlq list|requeue|purge`, `weir pause|resume`, `weir queue create|show`.

use crate::common::*;
use crate::{cli, no_panic, text};
use weir::queue::scripts::{self, Settle};

#[tokio::test]
async fn stats_json_parses() {
    let ctx = Ctx::new("cli-stats").await;
    ctx.producer()
        .enqueue_bulk((0..3).map(|i| weir::NewJob::new("k", &i).unwrap()))
        .await
        .unwrap();
    let o = cli(&ctx, &["stats", "--json", "-q", &ctx.queue], "");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stats --json is JSON");
    assert_eq!(v["queue"], ctx.queue.as_str());
    assert_eq!(v["stats"]["ready"], serde_json::json!([0, 3, 0]));
    assert_eq!(v["stats"]["in_flight"], 0);
    assert_eq!(v["stats"]["paused"], false);
    assert_eq!(v["stats"]["counters"]["enqueued"], 3);
    let o = cli(&ctx, &["stats", "-q", &ctx.queue], "");
    assert!(
        text(&o.stdout).contains("ready      3 (high 0, normal 3, low 0)"),
        "{}",
        text(&o.stdout)
    );
}

pub(crate) async fn bury(ctx: &Ctx, ids: &[&str]) {
    let jobs = ids
        .iter()
        .map(|id| weir::NewJob::new("k", &1).unwrap().id(*id).max_attempts(2));
    ctx.producer().enqueue_bulk(jobs).await.unwrap();
    let f = scripts::fetch(&mut ctx.c(), &ctx.keys, 100, 60_000)
        .await
        .unwrap();
    let (mine, others): (Vec<_>, Vec<_>) = f.jobs.iter().partition(|j| ids.contains(&j.name.as_str()));
    let items: Vec<Settle> = mine
        .iter()
        .map(|j| Settle::Dead {
            id: j.name.clone(),
            token: f.deadline_ms,
            reason: format!("broke {}", j.name),
        })
        .collect();
    scripts::settle(&mut ctx.c(), &ctx.keys, &items).await.unwrap();
    let back: Vec<(&str, u64, weir::Priority)> = others
        .iter()
        .map(|j| (j.name.as_str(), f.deadline_ms, weir::Priority::Normal))
        .collect();
    scripts::release(&mut ctx.c(), &ctx.keys, &back).await.unwrap();
}

#[tokio::test]
async fn dlq_list_requeue_purge() {
    let ctx = Ctx::new("cli-dlq").await;
    bury(&ctx, &["a", "b", "c"]).await;
    let q = ctx.queue.as_str();
    let o = cli(&ctx, &["dlq", "list", "-q", q], "");
    let out = text(&o.stdout);
    assert_eq!(out.lines().count(), 4, "a header and three jobs: {out}");
    assert!(out.starts_with("ID "), "{out}");
    // A date and an age, not epoch milliseconds.
    assert!(
        out.lines().any(|l| l.starts_with("a ")
            && l.contains("Z (")
            && l.contains(" ago)")
            && l.ends_with("broke a")),
        "{out}"
    );
    let o = cli(&ctx, &["dlq", "list", "--json", "--limit", "2", "-q", q], "");
    let rows: Vec<serde_json::Value> = text(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2);
    assert!(
        rows.iter()
            .all(|r| r["reason"].as_str().unwrap().starts_with("broke"))
    );
    for r in &rows {
        // The time as RFC 3339 with its age; the envelope as JSON, not a string of it.
        assert!(r["dead_at"].as_str().unwrap().ends_with('Z'), "{r}");
        assert!(r["age_ms"].is_u64(), "{r}");
        assert_eq!(r["envelope"]["id"], r["id"], "{r}");
        assert!(r["envelope_text"].is_null(), "{r}");
    }

    let o = cli(&ctx, &["dlq", "requeue", "a", "zz", "-q", q], "");
    assert_eq!(o.status.code(), Some(3), "done in part");
    assert!(text(&o.stdout).contains("requeued 1 job\n"));
    assert!(text(&o.stderr).contains("not in the dead-letter queue: zz"));
    let s = ctx.snapshot().await;
    assert_eq!(s.ready[1], ["a"]);
    assert!(s.jobs["a"].starts_with(r#"{"attempt":0,"#));

    let o = cli(&ctx, &["dlq", "requeue", "-q", q], "");
    assert_eq!(o.status.code(), Some(2), "requeue needs ids or --all");
    no_panic(&o);
    let o = cli(&ctx, &["dlq", "requeue", "--all", "-q", q], "");
    assert!(text(&o.stdout).contains("requeued 2 jobs"), "{}", text(&o.stdout));
    assert_eq!(ctx.stats().await.ready[1], 3);

    bury(&ctx, &["d", "e"]).await;
    let o = cli(&ctx, &["dlq", "purge", "-q", q], "");
    assert_eq!(o.status.code(), Some(2), "purge asks, and there is no terminal");
    assert!(text(&o.stderr).contains("pass --yes"), "{}", text(&o.stderr));
    assert_eq!(ctx.stats().await.dead, 2);
    let o = cli(&ctx, &["dlq", "purge", "--yes", "-q", q], "");
    assert!(text(&o.stdout).contains("purged 2 jobs"), "{}", text(&o.stdout));
    let s = ctx.stats().await;
    assert_eq!((s.dead, s.ready[1]), (0, 3));
}

#[tokio::test]
async fn pause_and_resume() {
    let ctx = Ctx::new("cli-pause").await;
    let q = ctx.queue.as_str();
    let first = cli(&ctx, &["pause", "-q", q, "--create"], "");
    assert!(text(&first.stdout).contains(&format!("queue {q} paused")));
    assert!(ctx.stats().await.paused);
    assert!(text(&cli(&ctx, &["pause", "-q", q], "").stdout).contains("already paused"));
    assert!(text(&cli(&ctx, &["resume", "-q", q], "").stdout).contains(&format!("queue {q} resumed")));
    assert!(!ctx.stats().await.paused);
}

/// `weir queue create --partitions`: made once, the same count again is a no-op, another
/// count is a usage error that changes nothing; `queue show` lists the partitions; a
/// consumer running the queue unpartitioned is reported, to be restarted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_create_is_idempotent_and_names_the_consumers_to_restart() {
    let ctx = Ctx::new("cli-partitions").await;
    let q = ctx.queue.clone();
    let registry = weir::Registry::new().on("k", weir::handler_fn(|_job: weir::Job| async { Ok(()) }));
    let mut config = weir::ConsumerConfig::new(&q);
    config.metrics = false;
    let consumer = weir::Consumer::new(config, ctx.redis.clone(), registry).unwrap();
    let stop = weir::CancellationToken::new();
    let running = tokio::spawn(consumer.run(stop.clone()));
    wait_until(
        "the consumer to register",
        std::time::Duration::from_secs(30),
        || async { ctx.admin().workers().await.unwrap().workers.len() == 1 },
    )
    .await;

    let o = cli(&ctx, &["queue", "create", "-q", &q, "--partitions", "4"], "");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains(&format!("queue {q}: 4 partitions")), "{out}");
    assert!(out.contains("1 consumer running: restart it"), "{out}");
    let o = cli(&ctx, &["queue", "create", "-q", &q, "--partitions", "4"], "");
    assert_eq!(o.status.code(), Some(0));
    assert!(
        text(&o.stdout).contains("has 4 partitions already"),
        "{}",
        text(&o.stdout)
    );
    let o = cli(&ctx, &["queue", "create", "-q", &q, "--partitions", "5"], "");
    assert_eq!(o.status.code(), Some(2), "another count is a usage error");
    assert!(
        text(&o.stderr).contains("already has 4 partitions"),
        "{}",
        text(&o.stderr)
    );
    let o = cli(&ctx, &["queue", "show", "-q", &q, "--json"], "");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let tags: Vec<String> = (0..4).map(|i| format!("{q}~{i}")).collect();
    assert_eq!(v["partitions"], serde_json::json!(tags));
    stop.cancel();
    running.await.unwrap().unwrap();
}
