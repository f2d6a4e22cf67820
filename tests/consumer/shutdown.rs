//! Shutdown: a consumer cancelled in process, and `weir work` sent SIGTERM while busy.
//! Running jobs finish and are acked, un-started ones go back to the front of ready at
//! once (nothing waits for the visibility timeout), and no job stays leased. A handler
//! that outlives the shutdown timeout is abandoned and its job handed back too. (A second
//! signal, which exits at once, is tested with the CLI: tests/cli/work.rs.)

use crate::common::*;
use crate::faults::{Proc, printed_ids};
use crate::support::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

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

const JOBS: usize = 2_000;

/// What a SIGTERM to a busy `weir work` left behind.
struct Stopped {
    /// Jobs finished (and acked) after the signal or before it.
    acked: usize,
    /// From the signal to the exit.
    took: Duration,
    /// The summary line `weir work` ends with.
    summary: String,
}

/// Runs `weir work` on [`JOBS`] jobs until every slot runs a job and the buffer is full,
/// sends SIGTERM, and checks what must hold after any graceful exit: exit 0, no panic,
/// no job leased, every finished job acked once and deleted, every other job back in
/// ready (the visibility timeout is 60 s, so nothing waits for it), a summary that agrees.
async fn sigterm_while_busy(label: &str, handler: &str, shutdown_timeout: &str) -> Stopped {
    let ctx = Ctx::private(label).await;
    ctx.producer()
        .enqueue_bulk(jobs("k", "job-", JOBS))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let mut p = Proc::weir(
        &[
            "work",
            "--redis-url",
            &ctx.url,
            "-q",
            &ctx.queue,
            "--no-metrics",
            "--handler",
            handler,
            "--concurrency",
            "16",
            "--batch",
            "100",
            "--visibility-timeout",
            "60s",
            "--shutdown-timeout",
            shutdown_timeout,
        ],
        &out,
        &err,
    );
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
    assert_eq!(
        stats.ready_total() as usize,
        JOBS - acked,
        "the rest back in ready at once: {stats:?}"
    );
    let stored = ctx.snapshot().await.jobs;
    for id in finished.keys() {
        assert!(!stored.contains_key(id), "{id} finished but still stored");
    }
    // With the `print` handler the summary goes to standard error.
    let summary = log
        .lines()
        .find(|l| l.starts_with("processed "))
        .unwrap_or_else(|| panic!("no summary line\n{log}"))
        .to_owned();
    assert!(summary.contains(&format!(": {acked} acked,")), "{summary}");
    Stopped { acked, took, summary }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_running_jobs_and_hands_back_the_rest() {
    let s = sigterm_while_busy("sigterm", "print:300ms", "10s").await;
    assert!(s.acked >= 16, "the jobs running at SIGTERM finished: {}", s.acked);
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
async fn jobs_outliving_the_shutdown_timeout_are_handed_back() {
    let s = sigterm_while_busy("sigterm-slow", "print:1h", "1s").await;
    assert_eq!(s.acked, 0);
    assert!(
        s.took < Duration::from_secs(10),
        "exit soon after the 1s shutdown timeout: {:?}",
        s.took
    );
    println!(
        "SIGTERM with hung handlers: exit 0 after {:?}, all {JOBS} jobs handed back",
        s.took
    );
}
