//! Under a steady stream of outcomes that keeps the acker busy, the heartbeat (a task of its
//! own) must keep its schedule.

use crate::common::*;
use crate::support::*;
use std::time::Duration;
use weir::{NewJob, Priority, handler_fn};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeat_keeps_a_slow_job_leased_while_fast_jobs_stream_through() {
    let ctx = Ctx::new("beatload").await;
    let p = ctx.producer();
    let slow = NewJob::new("slow", &1)
        .unwrap()
        .id("slow")
        .priority(Priority::High);
    p.enqueue(slow).await.unwrap();
    p.enqueue_bulk((0..60_000).map(|i| NewJob::new("fast", &i).unwrap()))
        .await
        .unwrap();
    let seen = Seen::default();
    let registry = seen
        .recording("slow", |_| async {
            tokio::time::sleep(Duration::from_millis(2_500)).await;
            Ok(())
        })
        .on("fast", handler_fn(|_| async { Ok(()) }));
    let mut cfg = config(&ctx);
    cfg.concurrency = 64;
    cfg.fetcher.batch = 200;
    cfg.lease = Duration::from_millis(600);
    let c = start(&ctx, cfg, registry);
    let jobs = ctx.keys.jobs().to_owned();
    wait_until("the slow job done", Duration::from_secs(60), || async {
        !ctx.cmd::<bool>(&["HEXISTS", &jobs, "slow"]).await
    })
    .await;
    let fast_done = ctx.stats().await.counters.get("acked").copied().unwrap_or(0);
    let report = c.stop().await;
    assert!(
        fast_done > 1_000,
        "fast jobs kept the acker busy meanwhile: {fast_done}"
    );
    assert_eq!(
        seen.attempts("slow"),
        [0],
        "the slow job's lease was kept alive: ran once"
    );
    assert_eq!(ctx.stats().await.counters.get("reclaimed"), None, "{report:?}");
}

/// Outcomes flood the acker faster than it writes them (small settle calls): the
/// heartbeat still runs on its schedule (it has its own task and connection), so a long
/// job among the flood keeps its 1 s lease and runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_heartbeat_keeps_its_schedule_while_outcomes_flood_the_acker() {
    let ctx = Ctx::new("beatflood").await;
    let p = ctx.producer();
    let long = NewJob::new("long", &1)
        .unwrap()
        .id("long")
        .priority(Priority::High);
    p.enqueue(long).await.unwrap();
    p.enqueue_bulk((0..30_000).map(|i| NewJob::new("fast", &i).unwrap()))
        .await
        .unwrap();
    let seen = Seen::default();
    let registry = seen
        .recording("long", |_| async {
            tokio::time::sleep(Duration::from_millis(3_000)).await;
            Ok(())
        })
        .on("fast", handler_fn(|_| async { Ok(()) }));
    let mut cfg = config(&ctx);
    cfg.concurrency = 64;
    cfg.fetcher.batch = 200;
    cfg.lease = Duration::from_secs(1);
    // Ten outcomes per settle call: the acker is always behind, outcomes always waiting.
    cfg.acker.flush_max = 10;
    let c = start(&ctx, cfg, registry);
    let jobs = ctx.keys.jobs().to_owned();
    wait_until("the long job done", Duration::from_secs(60), || async {
        !ctx.cmd::<bool>(&["HEXISTS", &jobs, "long"]).await
    })
    .await;
    let fast_done = ctx.stats().await.counters.get("acked").copied().unwrap_or(0);
    let report = c.stop().await;
    assert!(fast_done > 1_000, "fast jobs flowed meanwhile: {fast_done}");
    assert_eq!(
        seen.attempts("long"),
        [0],
        "the long job's lease was extended on schedule: it ran once"
    );
    assert_eq!(ctx.stats().await.counters.get("reclaimed"), None, "{report:?}");
}
