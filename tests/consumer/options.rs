//! Job options and pool settings seen end to end: priorities, scheduled jobs, trace ids,
//! job timeouts, retry-after, the dead-letter cap.

use crate::common::*;
use crate::support::*;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use weir::{Job, JobError, NewJob, Priority, Registry, handler_fn};

fn order_of(seen: &Arc<Mutex<Vec<Job>>>) -> Vec<String> {
    seen.lock().unwrap().iter().map(|j| j.id.clone()).collect()
}

fn keeping(seen: &Arc<Mutex<Vec<Job>>>) -> Registry {
    let seen = seen.clone();
    Registry::new().on(
        "k",
        handler_fn(move |job| {
            seen.lock().unwrap().push(job);
            async { Ok(()) }
        }),
    )
}

#[tokio::test]
async fn high_before_normal_before_low() {
    let ctx = Ctx::new("prio").await;
    let p = ctx.producer();
    for (prefix, prio) in [
        ("low", Priority::Low),
        ("normal", Priority::Normal),
        ("high", Priority::High),
    ] {
        let jobs = (0..3).map(|i| {
            NewJob::new("k", &i)
                .unwrap()
                .id(format!("{prefix}{i}"))
                .priority(prio)
        });
        p.enqueue_bulk(jobs).await.unwrap();
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut cfg = config(&ctx);
    cfg.concurrency = 1;
    cfg.fetcher.pipeline = 1;
    let c = start(&ctx, cfg, keeping(&seen));
    wait_until("all nine", SOON, || async { seen.lock().unwrap().len() == 9 }).await;
    c.stop().await;
    let want = [
        "high0", "high1", "high2", "normal0", "normal1", "normal2", "low0", "low1", "low2",
    ];
    assert_eq!(order_of(&seen), want);
    assert!(
        seen.lock()
            .unwrap()
            .iter()
            .all(|j| j.id.starts_with("low") == (j.priority() == Priority::Low))
    );
}

#[tokio::test]
async fn scheduled_jobs_run_when_due_and_carry_their_trace_id() {
    let ctx = Ctx::new("sched").await;
    let p = ctx.producer();
    let at = SystemTime::now() + Duration::from_millis(400);
    p.enqueue_at(at, NewJob::new("k", &1).unwrap().id("at").trace_id("trace-1"))
        .await
        .unwrap();
    p.enqueue_in(Duration::from_millis(200), NewJob::new("k", &2).unwrap().id("in"))
        .await
        .unwrap();
    p.enqueue(NewJob::new("k", &3).unwrap().id("now")).await.unwrap();
    assert_eq!(
        (ctx.stats().await.delayed, ctx.stats().await.ready_total()),
        (2, 1)
    );
    let seen = Arc::new(Mutex::new(Vec::new()));
    let c = start(&ctx, config(&ctx), keeping(&seen));
    wait_until("all three", SOON, || async { seen.lock().unwrap().len() == 3 }).await;
    c.stop().await;
    assert_eq!(order_of(&seen), ["now", "in", "at"]);
    let jobs = seen.lock().unwrap();
    assert_eq!(jobs[2].trace_id.as_deref(), Some("trace-1"));
    assert_eq!(jobs[2].payload::<u32>().unwrap(), 1);
    assert_eq!(jobs[0].trace_id, None);
}

#[tokio::test]
async fn job_timeout_is_a_retryable_failure() {
    let ctx = Ctx::new("timeout").await;
    ctx.producer()
        .enqueue(NewJob::new("k", &1).unwrap().id("t"))
        .await
        .unwrap();
    let seen = Seen::default();
    let registry = seen.failing_first("k", || async {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok(())
    });
    let mut cfg = config(&ctx);
    cfg.pool.job_timeout = Some(Duration::from_millis(200));
    let c = start(&ctx, cfg, registry);
    wait_stats(&ctx, "acked on the second run", |s| {
        s.counters.get("acked") == Some(&1)
    })
    .await;
    let report = c.stop().await;
    assert_eq!(seen.attempts("t"), [0, 1]);
    assert_eq!((report.acked, report.retried), (1, 1));
}

/// A backpressure error defers the job by its Retry-After, capped by the pool's
/// `max_defer_delay` (default 5 min), and charges no attempt.
#[tokio::test]
async fn retry_after_sets_the_delay() {
    let ctx = Ctx::new("retryafter").await;
    ctx.producer()
        .enqueue(NewJob::new("k", &1).unwrap().id("b"))
        .await
        .unwrap();
    let registry = Registry::new().on(
        "k",
        handler_fn(|_| async { Err(JobError::backpressure("429", Some(Duration::from_secs(3600)))) }),
    );
    let c = start(&ctx, config(&ctx), registry);
    let s = wait_stats(&ctx, "delayed", |s| s.delayed == 1).await;
    c.stop().await;
    assert_eq!(s.in_flight, 0);
    let due = ctx.snapshot().await.delayed[1][0].1;
    let now = ctx.now_ms().await;
    assert!(
        due > now + 250_000 && due <= now + 300_000,
        "due in 5 minutes (the hour asked for, capped), not after the 10 ms backoff"
    );
    let snap = ctx.snapshot().await;
    assert_eq!(snap.errors["b"], "429");
    assert!(snap.jobs["b"].starts_with(r#"{"attempt":0,"#), "not charged");
}

/// The dead-letter cap is the queue's setting: every consumer applies it.
#[tokio::test]
async fn consumer_applies_the_queue_dead_letter_cap() {
    let ctx = Ctx::new("ccap").await;
    ctx.producer().enqueue_bulk(jobs("k", "d", 10)).await.unwrap();
    let cap = weir::queue::settings::Settings {
        dead_cap: Some(4),
        ..Default::default()
    };
    cap.store(&mut ctx.c(), &ctx.queue).await.unwrap();
    let registry = Registry::new().on("k", handler_fn(|_| async { Err(JobError::fatal("no")) }));
    let c = start(&ctx, config(&ctx), registry);
    wait_stats(&ctx, "all settled", |s| {
        s.pending() == 0 && s.counters.get("dead") == Some(&10)
    })
    .await;
    let report = c.stop().await;
    assert_eq!(report.dead, 10);
    let s = ctx.stats().await;
    assert_eq!((s.dead, s.counters["trimmed"]), (4, 6));
    assert_eq!(ctx.snapshot().await.jobs.len(), 4, "trimmed jobs are deleted");
}

/// The concurrency limit can change while the consumer runs; a shrink holds from then on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_limit_changes_at_run_time() {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    let ctx = Ctx::new("limit").await;
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (r, pk) = (running.clone(), peak.clone());
    let registry = Registry::new().on(
        "k",
        handler_fn(move |_| {
            let (r, pk) = (r.clone(), pk.clone());
            async move {
                pk.fetch_max(r.fetch_add(1, SeqCst) + 1, SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                r.fetch_sub(1, SeqCst);
                Ok(())
            }
        }),
    );
    let c = start(&ctx, config(&ctx), registry);
    ctx.producer().enqueue_bulk(jobs("k", "a", 80)).await.unwrap();
    wait_stats(&ctx, "first round", |s| s.counters.get("acked") == Some(&80)).await;
    assert!(
        peak.load(SeqCst) > 2,
        "ran in parallel at limit 8: {}",
        peak.load(SeqCst)
    );
    c.handle.limit.set(2);
    assert_eq!(c.handle.limit.get(), 2);
    peak.store(0, SeqCst);
    ctx.producer().enqueue_bulk(jobs("k", "b", 40)).await.unwrap();
    wait_stats(&ctx, "second round", |s| s.counters.get("acked") == Some(&120)).await;
    assert!(
        peak.load(SeqCst) <= 2,
        "at most 2 at once after the shrink: {}",
        peak.load(SeqCst)
    );
    assert_eq!(c.stop().await.acked, 120);
}

/// A limit raised while every slot holds a long job starts more jobs at once, not when
/// one of those finishes: the fetcher, which holds jobs only for free slots, hears of
/// the new ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raised_limit_is_filled_without_waiting_for_a_job_to_finish() {
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    let ctx = Ctx::new("limit-up").await;
    let running = Arc::new(AtomicUsize::new(0));
    let release = Arc::new(tokio::sync::Notify::new());
    let (r, rel) = (running.clone(), release.clone());
    let registry = Registry::new().on(
        "k",
        handler_fn(move |_| {
            let (r, rel) = (r.clone(), rel.clone());
            async move {
                r.fetch_add(1, SeqCst);
                rel.notified().await;
                Ok(())
            }
        }),
    );
    let mut cfg = config(&ctx);
    cfg.concurrency = 1;
    let c = start(&ctx, cfg, registry);
    ctx.producer().enqueue_bulk(jobs("k", "a", 5)).await.unwrap();
    wait_until("one job running", Duration::from_secs(10), || async {
        running.load(SeqCst) == 1
    })
    .await;
    c.handle.limit.set(3);
    wait_until("three jobs running", Duration::from_secs(10), || async {
        running.load(SeqCst) == 3
    })
    .await;
    release.notify_waiters();
    // The last two start as slots free; release them as they come.
    wait_until("all acked", Duration::from_secs(10), || async {
        release.notify_waiters();
        ctx.stats().await.counters.get("acked") == Some(&5)
    })
    .await;
    assert_eq!(c.stop().await.acked, 5);
}

/// `ConsumerConfig::validate` "checks every value against its range": values that would
/// make a task spin or leases expire at once are refused with a message naming them.
#[tokio::test]
async fn config_values_out_of_range_are_refused() {
    let ctx = Ctx::new("cfg").await;
    let registry = || Registry::new().on("k", handler_fn(|_| async { Ok(()) }));
    type Change = Box<dyn Fn(&mut weir::ConsumerConfig)>;
    let cases: Vec<(&str, Change)> = vec![
        ("concurrency", Box::new(|c| c.concurrency = 0)),
        ("batch", Box::new(|c| c.fetcher.batch = 0)),
        ("visibility", Box::new(|c| c.lease = Duration::from_millis(5))),
        ("visibility", Box::new(|c| c.lease = Duration::ZERO)),
        (
            "reclaim interval",
            Box::new(|c| c.reclaimer.interval = Duration::ZERO),
        ),
        (
            "job timeout must be at least 10ms",
            Box::new(|c| c.pool.job_timeout = Some(Duration::ZERO)),
        ),
        (
            "job timeout must be at least 10ms",
            Box::new(|c| c.pool.job_timeout = Some(Duration::from_millis(9))),
        ),
        (
            "unknown-kind grace",
            Box::new(|c| c.pool.unknown_kind_grace = Duration::ZERO),
        ),
    ];
    for (want, change) in cases {
        let mut cfg = config(&ctx);
        change(&mut cfg);
        let err = weir::Consumer::new(cfg, ctx.redis.clone(), registry()).err();
        let msg = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(
            msg.contains(want),
            "expected an error naming {want:?}, got {msg:?}"
        );
    }
}
