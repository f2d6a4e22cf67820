//! Jobs that fail, panic, have no handler, or never decode: retried, deferred (a kind or
//! size this consumer cannot take), dead-lettered with their reason, and the consumer goes
//! on with the jobs around them.

use crate::common::*;
use crate::support::*;
use std::time::Duration;
use weir::{JobError, NewJob, Registry, handler_fn};

async fn dead_reason(ctx: &Ctx, id: &str) -> (String, String) {
    let list = ctx.admin().dead_jobs(0, 1000).await.unwrap();
    let d = list
        .iter()
        .find(|d| d.id == id)
        .unwrap_or_else(|| panic!("{id} not dead: {list:?}"));
    (
        d.reason.clone().unwrap_or_default(),
        d.envelope.clone().unwrap_or_default(),
    )
}

#[tokio::test]
async fn failing_job_is_retried_with_backoff_then_dead_lettered_with_its_last_error() {
    let ctx = Ctx::new("retry").await;
    ctx.producer()
        .enqueue(NewJob::new("k", &1).unwrap().id("f").max_attempts(3))
        .await
        .unwrap();
    ctx.producer().enqueue_bulk(jobs("ok", "g", 5)).await.unwrap();
    let seen = Seen::default();
    let registry = seen
        .recording("k", |job| async move {
            Err(JobError::retry(format!("boom on attempt {}", job.attempt)))
        })
        .on("ok", handler_fn(|_| async { Ok(()) }));
    let c = start(&ctx, config(&ctx), registry);
    wait_stats(&ctx, "the failing job dead", |s| s.dead == 1 && s.pending() == 0).await;
    let report = c.stop().await;
    assert_eq!(seen.attempts("f"), [0, 1, 2], "three runs, attempt counted up");
    let (reason, envelope) = dead_reason(&ctx, "f").await;
    assert_eq!(reason, "boom on attempt 2", "the last error is kept");
    assert!(
        envelope.starts_with(r#"{"attempt":3,"max_attempts":3,"#),
        "{envelope}"
    );
    assert_eq!((report.acked, report.retried, report.dead), (5, 2, 1));
    let counters = ctx.stats().await.counters;
    assert_eq!(
        (counters["retried"], counters["dead"], counters["acked"]),
        (2, 1, 5)
    );
    assert_empty(&ctx, 1).await;
}

#[tokio::test]
async fn panicking_handler_is_retried_and_the_worker_survives() {
    let ctx = Ctx::new("panic").await;
    ctx.producer().enqueue_bulk(jobs("k", "p", 20)).await.unwrap();
    let seen = Seen::default();
    let registry = seen.failing_first("k", || async { panic!("handler blew up") });
    let mut cfg = config(&ctx);
    cfg.concurrency = 1;
    let c = start(&ctx, cfg, registry);
    wait_stats(&ctx, "all jobs acked after one panic each", |s| {
        s.counters.get("acked") == Some(&20)
    })
    .await;
    let report = c.stop().await;
    assert_eq!((report.acked, report.retried, report.dead), (20, 20, 0));
    assert_eq!(seen.attempts("p7"), [0, 1]);
    assert_empty(&ctx, 0).await;
}

#[tokio::test]
async fn panic_message_is_the_last_error() {
    let ctx = Ctx::new("panicmsg").await;
    ctx.producer()
        .enqueue(NewJob::new("k", &1).unwrap().id("p").max_attempts(1))
        .await
        .unwrap();
    let registry = Registry::new().on(
        "k",
        handler_fn(|_| async move {
            let v: Vec<u8> = Vec::new();
            if v.is_empty() {
                panic!("index {} out of range", 3);
            }
            Ok(())
        }),
    );
    let c = start(&ctx, config(&ctx), registry);
    wait_stats(&ctx, "dead", |s| s.dead == 1).await;
    c.stop().await;
    assert_eq!(
        dead_reason(&ctx, "p").await.0,
        "handler panicked: index 3 out of range"
    );
}

#[tokio::test]
async fn fatal_error_goes_straight_to_the_dead_letter_queue() {
    let ctx = Ctx::new("fatal").await;
    let p = ctx.producer();
    p.enqueue(NewJob::new("k", &1).unwrap().id("fatal").max_attempts(5))
        .await
        .unwrap();
    p.enqueue_bulk(jobs("ok", "g", 10)).await.unwrap();
    let seen = Seen::default();
    let registry = seen
        .recording("k", |_| async { Err(JobError::fatal("invalid address")) })
        .on("ok", handler_fn(|_| async { Ok(()) }));
    let c = start(&ctx, config(&ctx), registry);
    wait_stats(&ctx, "one dead, the rest acked", |s| {
        s.dead == 1 && s.pending() == 0
    })
    .await;
    let report = c.stop().await;
    assert_eq!(seen.attempts("fatal"), [0], "no retry");
    let (reason, envelope) = dead_reason(&ctx, "fatal").await;
    assert_eq!(reason, "invalid address");
    assert!(envelope.starts_with(r#"{"attempt":0,"#), "{envelope}");
    assert_eq!((report.acked, report.retried, report.dead), (10, 0, 1));
    assert_empty(&ctx, 1).await;
}

/// A kind no handler takes may be new in a rolling deploy: it is deferred (uncharged)
/// for the pool's `unknown_kind_grace`, then dead-lettered with the reason. Before
/// deferrals it was dead-lettered on first sight.
#[tokio::test]
async fn unknown_kind_is_deferred_then_dead_lettered_after_the_grace() {
    let ctx = Ctx::new("unknown").await;
    let p = ctx.producer();
    p.enqueue(NewJob::new("nobody", &1).unwrap().id("orphan").max_attempts(1))
        .await
        .unwrap();
    p.enqueue_bulk(jobs("ok", "g", 10)).await.unwrap();
    let registry = Registry::new().on("ok", handler_fn(|_| async { Ok(()) }));
    let mut cfg = config(&ctx);
    cfg.pool.unknown_kind_grace = Duration::from_millis(500);
    let c = start(&ctx, cfg, registry);
    let s = wait_stats(&ctx, "the orphan deferred", |s| s.deferred == 1).await;
    assert_eq!(s.dead, 0, "not dead on first sight");
    wait_stats(&ctx, "dead after the grace", |s| s.dead == 1 && s.pending() == 0).await;
    let report = c.stop().await;
    let (reason, envelope) = dead_reason(&ctx, "orphan").await;
    assert!(
        reason.starts_with("deferral budget spent (")
            && reason.contains(r#"unknown job kind "nobody": no handler for it"#),
        "{reason}"
    );
    assert!(
        envelope.starts_with(r#"{"attempt":0,"#),
        "never charged: {envelope}"
    );
    assert_eq!((report.acked, report.retried, report.dead), (10, 0, 1));
    assert!(report.deferred >= 1, "{report:?}");
    assert_eq!(ctx.stats().await.deferred, 0, "the record goes with the job");
    assert_empty(&ctx, 1).await;
}

/// The rolling deploy itself: an old consumer defers a kind it does not know and an
/// envelope over its size limit; a consumer started later, within the grace, that knows
/// the kind and takes bigger envelopes runs both, uncharged.
#[tokio::test]
async fn a_consumer_started_later_within_the_grace_runs_what_another_deferred() {
    let ctx = Ctx::new("rolling").await;
    let p = ctx.producer();
    p.enqueue(NewJob::new("new", &1).unwrap().id("n").max_attempts(1))
        .await
        .unwrap();
    let big = "x".repeat(600);
    p.enqueue(NewJob::new("old", &big).unwrap().id("big").max_attempts(1))
        .await
        .unwrap();
    // and one in the compact form, which says its priority by leaving it out
    let compact = p.clone().compact_envelopes(true);
    let bigc = compact.enqueue(NewJob::new("old", &big).unwrap()).await.unwrap();
    let mut old = config(&ctx);
    old.pool.unknown_kind_grace = Duration::from_secs(60);
    old.fetcher.max_envelope_bytes = 512;
    let c = start(
        &ctx,
        old,
        Registry::new().on("old", handler_fn(|_| async { Ok(()) })),
    );
    let s = wait_stats(&ctx, "all three deferred", |s| s.deferred == 3).await;
    assert_eq!((s.dead, s.counters.get("acked")), (0, None));
    let report = c.stop().await;
    assert_eq!((report.deferred, report.dead), (3, 0), "{report:?}");

    // A deferral waits a tenth of the grace (at most 10 s): make them due now.
    let normal = ctx.keys.all()[4].clone();
    let _: () = ctx
        .cmd(&["ZADD", &normal, "XX", "0", "n", "0", "big", "0", &bigc])
        .await;
    let seen = Seen::default();
    let registry = seen.acking("new").on("old", {
        let seen = seen.clone();
        handler_fn(move |job| {
            seen.record(&job);
            async { Ok(()) }
        })
    });
    let c = start(&ctx, config(&ctx), registry);
    wait_stats(&ctx, "all acked", |s| s.counters.get("acked") == Some(&3)).await;
    c.stop().await;
    assert_eq!((seen.attempts("n"), seen.attempts("big")), (vec![0], vec![0]));
    assert_eq!(seen.attempts(&bigc), vec![0]);
    let s = ctx.stats().await;
    assert_eq!((s.dead, s.deferred), (0, 0), "{s:?}");
    assert_empty(&ctx, 0).await;
}

#[tokio::test]
async fn bad_envelopes_are_dead_lettered_and_good_jobs_around_them_run() {
    let ctx = Ctx::new("badenv").await;
    let p = ctx.producer();
    p.enqueue_bulk(jobs("k", "before", 5)).await.unwrap();
    let valid = |id: &str, body: &str| {
        format!(
            r#"{{"attempt":0,"max_attempts":3,"priority":1,"enqueued_at":1,"id":"{id}","kind":"k","payload":{body}}}"#
        )
    };
    let big = valid("big", &format!("\"{}\"", "x".repeat(600)));
    let bad = [
        ("notjson", "this is not json".to_string()),
        ("types", r#"{"attempt":"zero","max_attempts":3,"priority":1,"enqueued_at":1,"id":"types","kind":"k","payload":1}"#.to_string()),
        ("nokind", r#"{"attempt":0,"max_attempts":3,"priority":1,"enqueued_at":1,"id":"nokind","payload":1}"#.to_string()),
        ("big", big),
        ("mismatch", valid("someone-else", "1")),
    ];
    let k = ctx.keys.clone();
    for (id, e) in &bad {
        let _: () = ctx.cmd(&["HSET", k.jobs(), id, e]).await;
        let _: () = ctx.cmd(&["RPUSH", k.ready(weir::Priority::Normal), id]).await;
    }
    p.enqueue_bulk(jobs("k", "after", 5)).await.unwrap();
    let seen = Seen::default();
    let registry = seen.acking("k");
    let mut cfg = config(&ctx);
    cfg.fetcher.max_envelope_bytes = 512;
    // Too big for this consumer is not bad: it waits the grace for another consumer.
    cfg.pool.unknown_kind_grace = Duration::from_millis(500);
    let c = start(&ctx, cfg, registry);
    wait_stats(&ctx, "bad envelopes dead, good jobs acked", |s| {
        s.dead == 5 && s.pending() == 0
    })
    .await;
    let report = c.stop().await;
    assert_eq!((report.acked, report.dead), (10, 5));
    assert!(report.deferred >= 1, "the big one was deferred first: {report:?}");
    assert_eq!(seen.ids(), 10);
    let expect = [
        ("notjson", "undecodable envelope"),
        ("types", "undecodable envelope"),
        ("nokind", "undecodable envelope"),
        ("big", "exceeds the limit of 512 bytes"),
        ("mismatch", "does not match"),
    ];
    for (id, want) in expect {
        let (reason, envelope) = dead_reason(&ctx, id).await;
        assert!(reason.contains(want), "{id}: {reason}");
        let stored = &bad.iter().find(|(b, _)| *b == id).unwrap().1;
        assert_eq!(&envelope, stored, "{id}: the envelope is kept as it was");
    }
    assert_empty(&ctx, 5).await;
}

/// A retry due in 10 ms on an otherwise empty queue runs again promptly: the bound stays
/// under the fetcher's 5 s idle recheck, so passing means the retry woke the fetcher.
#[tokio::test]
async fn short_retry_on_an_idle_queue_runs_again_promptly() {
    let ctx = Ctx::new("retrywake").await;
    ctx.producer()
        .enqueue(NewJob::new("k", &1).unwrap().id("r"))
        .await
        .unwrap();
    let seen = Seen::default();
    let registry = seen.failing_first("k", || async { Err(JobError::retry("try again")) });
    let c = start(&ctx, config(&ctx), registry);
    wait_until("the retry to run", std::time::Duration::from_secs(3), || async {
        seen.attempts("r").len() == 2
    })
    .await;
    wait_stats(&ctx, "acked", |s| s.counters.get("acked") == Some(&1)).await;
    assert_eq!(c.stop().await.retried, 1);
    assert_empty(&ctx, 0).await;
}

/// A job id that is not UTF-8 (pushed into Redis by hand) must not take the good jobs
/// fetched in the same batch down with it.
#[tokio::test]

async fn non_utf8_id_does_not_poison_its_batch() {
    let ctx = Ctx::new("nonutf8").await;
    ctx.producer().enqueue_bulk(jobs("k", "good", 5)).await.unwrap();
    let bad_id: &[u8] = b"bad\xff\xfe";
    let _: () = redis::cmd("HSET")
        .arg(ctx.keys.jobs())
        .arg(bad_id)
        .arg("junk")
        .query_async(&mut ctx.c())
        .await
        .unwrap();
    let _: () = redis::cmd("RPUSH")
        .arg(ctx.keys.ready(weir::Priority::Normal))
        .arg(bad_id)
        .query_async(&mut ctx.c())
        .await
        .unwrap();
    ctx.producer().enqueue_bulk(jobs("k", "after", 5)).await.unwrap();
    let seen = Seen::default();
    let registry = seen.acking("k");
    let mut cfg = config(&ctx);
    cfg.lease = std::time::Duration::from_millis(500);
    let c = start(&ctx, cfg, registry);
    wait_until("the good jobs", SOON, || async { seen.ids() == 10 }).await;
    wait_stats(&ctx, "the bad one dead", |s| s.dead == 1 && s.pending() == 0).await;
    c.stop().await;
    assert!(seen.all().values().all(|a| a == &[0]), "good jobs ran once each");
}
