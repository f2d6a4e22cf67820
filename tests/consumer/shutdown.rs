//! Shutdown: a consumer cancelled in process, and `weir work` sent SIGTERM while busy.
//! Running jobs finish and are acked, un-started ones go back to the front of ready at
//! once (nothing waits for the visibility timeout), and no job stays leased. A handler
//! that outlives the shutdown timeout is aborted and its job charged one attempt (retried
//! later, or dead-lettered once its attempts are spent). Outcomes that cannot be written
//! at shutdown keep their jobs leased: only jobs that never ran are handed back. (A second
//! signal, which exits at once, is tested with the CLI: tests/cli/work.rs.)

use crate::common::*;
use crate::faults::proxy::Proxy;
use crate::faults::{printed_ids, script_sha};
use crate::support::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use weir::{NewJob, handler_fn};

/// Shutdown while slow jobs run and more are buffered: running jobs finish and are acked,
/// un-started ones go back to the front of ready at once; nothing stays leased.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_leaves_no_job_leased() {
    let ctx = Ctx::new("graceful").await;
    ctx.producer().enqueue_bulk(jobs("k", "j", 30)).await.unwrap();
    let started = Seen::default();
    let finished = Arc::new(AtomicUsize::new(0));
    let f = finished.clone();
    let slow = started.recording("k", move |_| {
        let f = f.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(700)).await;
            f.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    });
    let mut cfg = config(&ctx);
    cfg.concurrency = 3;
    cfg.fetcher.batch = 10;
    // jobs of 700 ms get none held ahead by themselves
    cfg.fetcher.prefetch = 6;
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

/// Counts its drops: proof that a handler's future was dropped (its task aborted).
struct DropCount(Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Jobs that always outlive the shutdown timeout: each is charged one attempt (back to
/// delayed with the reason, or dead-lettered on its last attempt) and its task aborted,
/// so it neither runs on after the consumer stopped nor comes back uncharged forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_outliving_the_shutdown_timeout_are_charged_and_aborted() {
    let ctx = Ctx::new("abandoned").await;
    let p = ctx.producer();
    p.enqueue(NewJob::new("k", &1).unwrap().id("again").max_attempts(2))
        .await
        .unwrap();
    p.enqueue(NewJob::new("k", &2).unwrap().id("last").max_attempts(1))
        .await
        .unwrap();
    let (started, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (s, d) = (started.clone(), dropped.clone());
    let hang = weir::Registry::new().on(
        "k",
        handler_fn(move |_| {
            let guard = DropCount(d.clone());
            s.fetch_add(1, Ordering::SeqCst);
            async move {
                let _guard = guard;
                std::future::pending::<weir::JobResult>().await
            }
        }),
    );
    let mut cfg = config(&ctx);
    cfg.shutdown_timeout = Duration::from_millis(300);
    let c = start(&ctx, cfg, hang);
    wait_until("both jobs running", SOON, || async {
        started.load(Ordering::SeqCst) == 2
    })
    .await;
    let report = c.stop().await;
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        2,
        "both handlers were aborted by the time the consumer returned"
    );
    assert_eq!(
        (report.retried, report.dead, report.released),
        (1, 1, 0),
        "{report:?}"
    );
    let snap = ctx.snapshot().await;
    assert!(
        snap.lease.is_empty() && snap.ready.iter().all(Vec::is_empty),
        "{snap:?}"
    );
    assert_eq!(snap.delayed[1].len(), 1, "{snap:?}");
    assert_eq!(snap.delayed[1][0].0, "again");
    assert!(snap.jobs["again"].starts_with(r#"{"attempt":1,"#), "{snap:?}");
    assert_eq!(snap.errors["again"], "abandoned at shutdown after 300ms");
    assert_eq!(snap.dead.len(), 1, "{snap:?}");
    assert_eq!(snap.dead[0].0, "last");
    assert_eq!(snap.errors["last"], "abandoned at shutdown after 300ms");
}

/// Every settle call refused on the way to Redis at shutdown (everything else gets
/// through): the final flush cannot write the outcomes, and the final release hands back
/// only the jobs that never ran. The finished job and the abandoned one stay leased (their
/// leases expire and the reclaimer brings them back); neither is handed back as if it
/// had never run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_final_release_hands_back_only_jobs_without_an_outcome() {
    let ctx = Ctx::new("finalrelease").await;
    let proxy = Proxy::start(ctx.server.port());
    ctx.producer().enqueue_bulk(jobs("k", "j", 10)).await.unwrap();
    let seen = Seen::default();
    // j0 finishes at once; j1 hangs past the shutdown timeout; the rest wait, un-started.
    let registry = seen.recording("k", |job| async move {
        if job.id != "j0" {
            std::future::pending::<()>().await;
        }
        Ok(())
    });
    let mut cfg = config(&ctx);
    cfg.concurrency = 1;
    cfg.fetcher.batch = 10;
    cfg.shutdown_timeout = Duration::from_millis(200);
    // Nothing is written before the shutdown: every outcome waits for the final flush.
    cfg.acker.linger = Duration::from_secs(3600);
    cfg.acker.flush_max = 10_000;
    cfg.acker.final_flush_timeout = Duration::from_millis(500);
    let via_proxy = weir::Redis::open(&proxy.url()).unwrap();
    let consumer = weir::Consumer::new(cfg, via_proxy, registry).unwrap();
    let shutdown = weir::CancellationToken::new();
    let run = tokio::spawn(consumer.run(shutdown.clone()));
    wait_until("j1 running", SOON, || async { seen.ids() == 2 }).await;
    proxy.refuse_requests(Some(&script_sha("settle")));
    shutdown.cancel();
    let report = run.await.unwrap().unwrap();
    assert!(proxy.counts().refused.load(Ordering::SeqCst) > 0);
    let snap = ctx.snapshot().await;
    let leased: Vec<&str> = snap.lease.iter().map(|(id, _)| id.as_str()).collect();
    let mut leased = leased;
    leased.sort();
    assert_eq!(leased, ["j0", "j1"], "jobs with an outcome stay leased: {snap:?}");
    let back: Vec<String> = (2..10).map(|i| format!("j{i}")).collect();
    assert_eq!(
        snap.ready[1], back,
        "the jobs that never ran are handed back, in order"
    );
    let fetched = snap.counters["fetched"];
    assert_eq!(
        report.released + 2,
        fetched,
        "the fetched jobs that never ran: {report:?}"
    );
    assert!(snap.jobs.values().all(|e| e.starts_with(r#"{"attempt":0,"#)));
}

const JOBS: usize = 2_000;

/// What a SIGTERM to a busy `weir work` left behind.
struct Stopped {
    /// Jobs finished (and acked) after the signal or before it.
    acked: usize,
    /// Jobs still running at the shutdown timeout: aborted and charged (now delayed).
    abandoned: usize,
    /// From the signal to the exit.
    took: Duration,
    /// The summary line `weir work` ends with.
    summary: String,
}

/// Runs `weir work` on [`JOBS`] jobs until every slot runs a job and the buffer is full,
/// sends SIGTERM, and checks what must hold after any graceful exit: exit 0, no panic,
/// no job leased, every finished job acked once and deleted, every job abandoned at the
/// shutdown timeout charged (delayed, attempt 1), every other job back in ready untouched
/// (the visibility timeout is 60 s, so nothing waits for it), a summary that agrees.
async fn sigterm_while_busy(label: &str, handler: &str, shutdown_timeout: &str) -> Stopped {
    let ctx = Ctx::private(label).await;
    ctx.producer()
        .enqueue_bulk(jobs("k", "job-", JOBS))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("out-w"), dir.path().join("err-w"));
    let extra = [
        "--concurrency",
        "16",
        "--batch",
        "100",
        // a full buffer whatever the handler's pace
        "--prefetch",
        "32",
        "--visibility-timeout",
        "60s",
        "--shutdown-timeout",
        shutdown_timeout,
    ];
    let mut p = weir_work(&ctx, handler, &extra, dir.path(), "w");
    // Busy: the buffer is full and every slot runs a job.
    wait_until("the consumer busy", Duration::from_secs(30), || async {
        ctx.stats().await.in_flight >= 32
    })
    .await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let signalled = Instant::now();
    p.sigterm();
    let status = p
        .wait_timeout(Duration::from_secs(30))
        .expect("exits after SIGTERM");
    let took = signalled.elapsed();
    let log = std::fs::read_to_string(&err).unwrap();
    assert!(status.success(), "{status:?}\n{log}");
    assert!(!log.contains("panicked"), "{log}");

    let stats = ctx.stats().await;
    assert_eq!(stats.in_flight, 0, "no job left leased\n{log}");
    let finished = printed_ids(&out);
    let acked = stats.counters.get("acked").copied().unwrap_or(0) as usize;
    assert_eq!(acked, finished.len(), "every finished job acked, no other\n{log}");
    assert!(finished.values().all(|n| *n == 1));
    let abandoned = stats.delayed as usize;
    assert_eq!(
        stats.ready_total() as usize,
        JOBS - acked - abandoned,
        "the rest back in ready at once: {stats:?}"
    );
    let snap = ctx.snapshot().await;
    for id in finished.keys() {
        assert!(!snap.jobs.contains_key(id), "{id} finished but still stored");
    }
    let charged = |e: &&String| e.starts_with(r#"{"attempt":1,"#);
    assert_eq!(snap.jobs.values().filter(charged).count(), abandoned, "{stats:?}");
    for id in snap.ready.iter().flatten() {
        assert!(
            snap.jobs[id].starts_with(r#"{"attempt":0,"#),
            "{id} handed back charged"
        );
    }
    // With the `print` handler the summary goes to standard error.
    let summary = log
        .lines()
        .find(|l| l.starts_with("processed "))
        .unwrap_or_else(|| panic!("no summary line\n{log}"))
        .to_owned();
    assert!(
        summary.contains(&format!(": {acked} acked, {abandoned} retried,")),
        "{summary}"
    );
    Stopped {
        acked,
        abandoned,
        took,
        summary,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_running_jobs_and_hands_back_the_rest() {
    let s = sigterm_while_busy("sigterm", "print:300ms", "10s").await;
    assert!(s.acked >= 16, "the jobs running at SIGTERM finished: {}", s.acked);
    assert_eq!(s.abandoned, 0, "none outlived the shutdown timeout");
    assert!(
        s.took < Duration::from_secs(10),
        "exit within the shutdown timeout: {:?}",
        s.took
    );
    assert!(
        !s.summary.ends_with(" 0 released"),
        "buffered jobs were handed back: {}",
        s.summary
    );
    println!(
        "SIGTERM under load: exit 0 after {:?}, {} finished jobs acked, {} handed back",
        s.took,
        s.acked,
        JOBS - s.acked
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_with_hung_handlers_charges_them_and_hands_back_the_rest() {
    let s = sigterm_while_busy("sigterm-slow", "print:1h", "1s").await;
    assert_eq!(s.acked, 0);
    assert!(
        s.took < Duration::from_secs(10),
        "exit soon after the 1s shutdown timeout: {:?}",
        s.took
    );
    assert_eq!(s.abandoned, 16, "the 16 hung jobs were charged: {}", s.summary);
    println!(
        "SIGTERM with hung handlers: exit 0 after {:?}, {} hung jobs charged (retried), the other {} handed back",
        s.took,
        s.abandoned,
        JOBS - s.abandoned
    );
}
