//! Consumers that die without settling, and consumers that shut down gracefully.

use crate::common::*;
use crate::support::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use weir::scripts;
use weir::{Consumer, JobError, Registry, handler_fn};

fn recording(seen: &Seen) -> Registry {
    let seen = seen.clone();
    Registry::new().on(
        "k",
        handler_fn(move |job| {
            seen.record(&job);
            async { Ok::<(), JobError>(()) }
        }),
    )
}

/// A "consumer" that fetched (leased) jobs and vanished: after the visibility timeout
/// the reclaimer of a live consumer brings them back and they are processed.
#[tokio::test]
async fn jobs_fetched_and_never_settled_come_back_after_the_visibility_timeout() {
    let ctx = Ctx::new("abandon").await;
    ctx.producer().enqueue_bulk(jobs("k", "j", 10)).await.unwrap();
    let gone = scripts::fetch(&mut ctx.c(), &ctx.keys, 6, 300).await.unwrap();
    assert_eq!(gone.jobs.len(), 6);
    let seen = Seen::default();
    let c = start(&ctx, config(&ctx), recording(&seen));
    wait_stats(&ctx, "all 10 acked", |s| s.counters.get("acked") == Some(&10)).await;
    let report = c.stop().await;
    assert_eq!(report.acked, 10);
    for (id, _) in &gone.jobs {
        assert_eq!(
            seen.attempts(id),
            [1],
            "{id}: the expired lease counted as an attempt"
        );
    }
    assert_eq!(seen.attempts("j9"), [0]);
    assert_eq!(ctx.stats().await.counters["reclaimed"], 6);
    assert_empty(&ctx, 0).await;
}

/// A consumer process that dies mid-job (its runtime torn down: no shutdown, no release,
/// no heartbeat): another consumer picks its jobs up once the leases expire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_of_a_crashed_consumer_are_processed_by_another() {
    let ctx = Ctx::new("crash").await;
    ctx.producer().enqueue_bulk(jobs("k", "j", 20)).await.unwrap();

    let started = Arc::new(AtomicUsize::new(0));
    let s = started.clone();
    let stuck = Registry::new().on(
        "k",
        handler_fn(move |_| {
            s.fetch_add(1, Ordering::SeqCst);
            std::future::pending::<weir::JobResult>()
        }),
    );
    let mut cfg = config(&ctx);
    cfg.concurrency = 4;
    cfg.lease = Duration::from_millis(500);
    let doomed = Consumer::new(cfg, ctx.redis.clone(), stuck).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    rt.spawn(doomed.run(weir::CancellationToken::new()));
    wait_until("the doomed consumer to start jobs", SOON, || async {
        started.load(Ordering::SeqCst) == 4
    })
    .await;
    let leased = ctx.stats().await.in_flight;
    assert!(leased >= 4, "running and buffered jobs are leased: {leased}");
    rt.shutdown_background();

    let seen = Seen::default();
    let c = start(&ctx, config(&ctx), recording(&seen));
    wait_stats(&ctx, "all 20 acked", |s| s.counters.get("acked") == Some(&20)).await;
    assert_eq!(c.stop().await.acked, 20);
    assert_eq!(seen.ids(), 20);
    // the crashed consumer may have fetched more after `leased` was read: count by Redis
    let reclaimed = (0..20).filter(|i| seen.attempts(&format!("j{i}")) == [1]).count() as u64;
    assert!(reclaimed >= leased, "{reclaimed} reclaimed, {leased} seen leased");
    assert_eq!(
        Some(&reclaimed),
        ctx.stats().await.counters.get("reclaimed"),
        "each job the crash held came back once, attempt + 1"
    );
    assert_empty(&ctx, 0).await;
}

/// Shutdown while slow jobs run and more are buffered: running jobs finish and are acked,
/// un-started ones go back to the front of ready at once; nothing stays leased.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_leaves_no_job_leased() {
    let ctx = Ctx::new("graceful").await;
    ctx.producer().enqueue_bulk(jobs("k", "j", 30)).await.unwrap();
    let started = Seen::default();
    let finished = Arc::new(AtomicUsize::new(0));
    let (s, f) = (started.clone(), finished.clone());
    let slow = Registry::new().on(
        "k",
        handler_fn(move |job| {
            s.record(&job);
            let f = f.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(700)).await;
                f.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        }),
    );
    let mut cfg = config(&ctx);
    cfg.concurrency = 3;
    cfg.fetcher.batch = 10;
    let c = start(&ctx, cfg, slow);
    wait_until("three jobs running", SOON, || async { started.ids() == 3 }).await;
    let buffered = ctx.stats().await.in_flight;
    assert!(
        buffered > 3,
        "jobs beyond the running ones are leased and buffered: {buffered}"
    );

    let report = c.stop().await;
    let ran = started.ids();
    assert_eq!(finished.load(Ordering::SeqCst), ran, "every started job finished");
    assert_eq!(report.acked, ran as u64, "and was acked");
    assert_eq!(report.lost_leases, 0);
    assert!(report.released >= 1, "{report:?}");
    let s = ctx.stats().await;
    assert_eq!(s.in_flight, 0, "no job left leased");
    assert_eq!(s.ready_total() + report.acked, 30, "none lost");

    // the released jobs are at the front, untouched, and a new consumer takes them first
    let snap = ctx.snapshot().await;
    assert!(snap.jobs.values().all(|e| e.starts_with(r#"{"attempt":0,"#)));
    let head: Vec<&String> = snap.ready[1].iter().take(report.released as usize).collect();
    let mut expected: Vec<String> = (0..30)
        .map(|i| format!("j{i}"))
        .filter(|id| started.attempts(id).is_empty())
        .collect();
    expected.truncate(report.released as usize);
    assert_eq!(
        head,
        expected.iter().collect::<Vec<_>>(),
        "released in fetch order, ahead of the backlog"
    );
}

/// Aborting the task that runs a consumer (or dropping its `run` future) stops it: its
/// leases are no longer extended, so its jobs come back and another consumer does them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_consumer_stops_and_its_jobs_come_back() {
    let ctx = Ctx::new("abort").await;
    ctx.producer().enqueue_bulk(jobs("k", "j", 10)).await.unwrap();
    let started = Arc::new(AtomicUsize::new(0));
    let s = started.clone();
    let stuck = Registry::new().on(
        "k",
        handler_fn(move |_| {
            s.fetch_add(1, Ordering::SeqCst);
            std::future::pending::<weir::JobResult>()
        }),
    );
    let mut cfg = config(&ctx);
    cfg.concurrency = 2;
    cfg.lease = Duration::from_millis(500);
    let doomed = start(&ctx, cfg, stuck);
    wait_until("the doomed consumer to start jobs", SOON, || async {
        started.load(Ordering::SeqCst) == 2
    })
    .await;
    doomed.task.abort();
    assert!(doomed.task.await.unwrap_err().is_cancelled());

    let seen = Seen::default();
    let c = start(&ctx, config(&ctx), recording(&seen));
    wait_stats(&ctx, "all 10 acked", |s| s.counters.get("acked") == Some(&10)).await;
    c.stop().await;
    assert_eq!(seen.ids(), 10);
    assert_eq!(
        started.load(Ordering::SeqCst),
        2,
        "the aborted consumer started nothing more"
    );
    assert_empty(&ctx, 0).await;
}
