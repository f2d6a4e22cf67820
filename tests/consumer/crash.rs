//! Consumers that die without settling: leases abandoned, a runtime torn down, a `run`
//! task aborted, `weir work` processes killed with SIGKILL at random moments or with a
//! full buffer. Their jobs come back once the leases expire, no job is lost, and a job
//! that never ran is never charged for a crash. (A job that kills every consumer that runs
//! it: poison.rs.)

use crate::common::*;
use crate::faults::{Proc, printed_ids};
use crate::support::*;
use rand::Rng;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use weir::queue::scripts;
use weir::{Consumer, NewJob, Registry, handler_fn};

/// A registry whose handler counts the jobs it starts in `started` and never finishes them.
fn stuck(started: &Arc<AtomicUsize>) -> Registry {
    let s = started.clone();
    Registry::new().on(
        "k",
        handler_fn(move |_| {
            s.fetch_add(1, Ordering::SeqCst);
            std::future::pending::<weir::JobResult>()
        }),
    )
}

/// A "consumer" that fetched (leased) jobs and vanished before running them: after the
/// visibility timeout the reclaimer of a live consumer brings them back, uncharged (they
/// never ran: each counts as a deferral), and they are processed.
#[tokio::test]
async fn jobs_fetched_and_never_settled_come_back_after_the_visibility_timeout() {
    let ctx = Ctx::new("abandon").await;
    ctx.producer().enqueue_bulk(jobs("k", "j", 10)).await.unwrap();
    let gone = scripts::fetch(&mut ctx.c(), &ctx.keys, 6, 300).await.unwrap();
    assert_eq!(gone.jobs.len(), 6);
    let seen = Seen::default();
    let c = start(&ctx, config(&ctx), seen.acking("k"));
    wait_stats(&ctx, "all 10 acked", |s| s.counters.get("acked") == Some(&10)).await;
    let report = c.stop().await;
    assert_eq!(report.acked, 10);
    for id in gone.jobs.iter().map(|j| &j.name) {
        assert_eq!(
            seen.attempts(id),
            [0],
            "{id}: it never ran, so it was not charged"
        );
    }
    assert_eq!(seen.attempts("j9"), [0]);
    let counters = ctx.stats().await.counters;
    assert_eq!((counters["reclaimed"], counters["deferred"]), (6, 6));
    assert_empty(&ctx, 0).await;
}

/// A consumer process that dies mid-job (its runtime torn down: no shutdown, no release,
/// no heartbeat): another consumer picks its jobs up once the leases expire. None is
/// charged: the four that were running come back as suspects (and run one at a time),
/// the buffered ones as deferrals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_of_a_crashed_consumer_are_processed_by_another() {
    let ctx = Ctx::new("crash").await;
    ctx.producer().enqueue_bulk(jobs("k", "j", 20)).await.unwrap();

    let started = Arc::new(AtomicUsize::new(0));
    let mut cfg = config(&ctx);
    cfg.concurrency = 4;
    // jobs waiting in its buffer too (stuck jobs get none held ahead by themselves)
    cfg.fetcher.prefetch = 8;
    cfg.lease = Duration::from_millis(500);
    let doomed = Consumer::new(cfg, ctx.redis.clone(), stuck(&started)).unwrap();
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
    let started_key = ctx.keys.started().to_owned();
    wait_until("the four starts written", SOON, || async {
        ctx.cmd::<u64>(&["HLEN", &started_key]).await == 4
    })
    .await;
    rt.shutdown_background();

    let seen = Seen::default();
    let c = start(&ctx, config(&ctx), seen.acking("k"));
    wait_stats(&ctx, "all 20 acked", |s| s.counters.get("acked") == Some(&20)).await;
    assert_eq!(c.stop().await.acked, 20);
    assert_eq!(seen.ids(), 20);
    for i in 0..20 {
        assert_eq!(seen.attempts(&format!("j{i}")), [0], "j{i} was charged");
    }
    // the crashed consumer may have fetched more after `leased` was read: count by Redis
    let counters = ctx.stats().await.counters;
    let (reclaimed, deferred) = (counters["reclaimed"], counters["deferred"]);
    assert!(reclaimed >= leased, "{reclaimed} reclaimed, {leased} seen leased");
    assert_eq!(
        deferred,
        reclaimed - 4,
        "all but the four running came back as deferrals"
    );
    assert_empty(&ctx, 0).await;
}

/// Aborting the task that runs a consumer (or dropping its `run` future) stops it: its
/// leases are no longer extended, so its jobs come back and another consumer does them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_consumer_stops_and_its_jobs_come_back() {
    let ctx = Ctx::new("abort").await;
    ctx.producer().enqueue_bulk(jobs("k", "j", 10)).await.unwrap();
    let started = Arc::new(AtomicUsize::new(0));
    let mut cfg = config(&ctx);
    cfg.concurrency = 2;
    cfg.lease = Duration::from_millis(500);
    let doomed = start(&ctx, cfg, stuck(&started));
    wait_until("the doomed consumer to start jobs", SOON, || async {
        started.load(Ordering::SeqCst) == 2
    })
    .await;
    doomed.task.abort();
    assert!(doomed.task.await.unwrap_err().is_cancelled());

    let seen = Seen::default();
    let c = start(&ctx, config(&ctx), seen.acking("k"));
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

/// `weir work` processes are killed with SIGKILL at random moments (at start-up, while
/// fetching, with a full buffer, mid-ack-flush), again and again, and restarted; a last
/// consumer drains the queue. Every job runs at least once, and a job runs twice only if
/// a killed process held its lease when it died.
///
/// The trace of what ran is the `print` handler's output: one JSON line per job, written
/// before the job is acked. `WEIR_CRASH_KILLS=100` runs a longer version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_at_random_moments_loses_no_job() {
    let kills: usize = std::env::var("WEIR_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    // Enough work that the queue outlasts the kills (about 1,300 jobs run per kill).
    let n = (kills * 1_400).max(20_000);
    let ctx = Ctx::private("crashes").await;
    ctx.producer()
        .enqueue_bulk(jobs("crash", "job-", n))
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rng();
    let mut leased_by_killed: HashSet<String> = HashSet::new();
    let (mut killed, mut run) = (0, 0);
    let started = Instant::now();

    while killed < kills && started.elapsed() < Duration::from_secs(90) {
        // Alternate a fast handler (acks flushed constantly) and a slow one (the buffer
        // stays full); kill at a random moment, sometimes before the consumer is up.
        let handler = if run % 2 == 0 { "print:1ms" } else { "print:10ms" };
        let mut p = spawn_worker(&ctx, handler, dir.path(), run, false);
        run += 1;
        let wait = if run % 5 == 0 {
            rng.random_range(0..30)
        } else {
            rng.random_range(50..600)
        };
        std::thread::sleep(Duration::from_millis(wait));
        p.kill9();
        killed += 1;
        // One consumer at a time: what is leased now was leased by the process just killed
        // (or an earlier one, whose leases have not expired yet).
        let leased: Vec<String> = ctx.cmd(&["ZRANGE", ctx.keys.lease(), "0", "-1"]).await;
        leased_by_killed.extend(leased);
        // and the jobs of its batch leases (docs/batch-leases.md)
        let batches: Vec<String> = ctx.cmd(&["ZRANGE", &ctx.keys.batches(), "0", "-1"]).await;
        for b in batches {
            let jobs: Vec<String> = ctx.cmd(&["LRANGE", &ctx.keys.batch(&b), "0", "-1"]).await;
            leased_by_killed.extend(jobs);
        }
        let stats = ctx.stats().await;
        if stats.ready_total() + stats.delayed == 0 {
            break;
        }
    }

    // The survivor drains the queue, reclaiming the killed consumers' leases as they expire.
    let mut last = spawn_worker(&ctx, "print", dir.path(), run, true);
    let status = last
        .wait_timeout(Duration::from_secs(90))
        .expect("the last consumer drains the queue");
    let log = std::fs::read_to_string(dir.path().join(format!("err-{run}"))).unwrap_or_default();
    assert!(status.success(), "{status:?}: {log}");

    let mut runs: HashMap<String, usize> = HashMap::new();
    for r in 0..=run {
        for (id, times) in printed_ids(&dir.path().join(format!("out-{r}"))) {
            *runs.entry(id).or_insert(0) += times;
        }
    }
    let missing: Vec<_> = (0..n)
        .map(|i| format!("job-{i}"))
        .filter(|id| !runs.contains_key(id))
        .collect();
    assert!(
        missing.is_empty(),
        "{} jobs never ran, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    let dups: Vec<&String> = runs.iter().filter(|(_, t)| **t > 1).map(|(id, _)| id).collect();
    let unexplained: Vec<_> = dups
        .iter()
        .filter(|id| !leased_by_killed.contains(**id))
        .collect();
    assert!(
        unexplained.is_empty(),
        "ran twice without a killed lease holder: {unexplained:?}"
    );
    let stats = ctx.stats().await;
    assert_eq!((stats.pending(), stats.dead), (0, 0), "{stats:?}");
    assert_eq!(stats.counters.get("acked").copied(), Some(n as u64), "{stats:?}");
    println!(
        "kills survived: {killed}; jobs: {n}; lost: {}; duplicates: {} (all among the {} jobs leased by killed processes)",
        missing.len(),
        dups.len(),
        leased_by_killed.len()
    );
}

/// The crash tests' worker: concurrency 8, batches of 100, optionally draining.
fn spawn_worker(ctx: &Ctx, handler: &str, dir: &Path, run: usize, drain: bool) -> Proc {
    let drain: &[&str] = if drain { &["--drain"] } else { &[] };
    let extra = [
        &[
            "--visibility-timeout",
            "2s",
            "--concurrency",
            "8",
            "--batch",
            "100",
        ][..],
        drain,
    ]
    .concat();
    weir_work(ctx, handler, &extra, dir, &run.to_string())
}

/// The acceptance run of "attempts are charged only for runs that started": `kill -9` of a
/// `weir work` holding a full prefetch buffer (concurrency 50, `--prefetch 100`, a handler
/// that sleeps, lease 2 s), every job with `max_attempts 1`. Another consumer drains the queue: the
/// jobs that were only buffered come back uncharged and are acked; the ~50 that had
/// started come back as suspects, uncharged, and run one at a time; none of them crashes,
/// so they are acked too: nothing is dead-lettered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_with_a_full_buffer_charges_only_started_jobs() {
    const N: usize = 400;
    let ctx = Ctx::private("killfull").await;
    let once = (0..N).map(|i| {
        NewJob::new("k", &i)
            .unwrap()
            .id(format!("job-{i}"))
            .max_attempts(1)
    });
    ctx.producer().enqueue_bulk(once).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let worker = |handler: &str, drain: bool, run: usize| {
        let drain: &[&str] = if drain { &["--drain"] } else { &[] };
        let extra = [
            &[
                "--visibility-timeout",
                "2s",
                "--concurrency",
                "50",
                "--prefetch",
                "100",
            ][..],
            drain,
        ]
        .concat();
        weir_work(&ctx, handler, &extra, dir.path(), &run.to_string())
    };
    let mut doomed = worker("sleep:1h", false, 0);
    // Full: 50 running, 100 more fetched and waiting for a slot, all leased.
    wait_until("a full buffer", Duration::from_secs(30), || async {
        ctx.stats().await.in_flight >= 150
    })
    .await;
    // The starts reach Redis in the acker's next write (a couple of ms later).
    let started = ctx.keys.started().to_owned();
    try_wait_until(Duration::from_secs(5), || async {
        ctx.cmd::<u64>(&["HLEN", &started]).await >= 50
    })
    .await;
    let marked: Vec<String> = ctx.cmd(&["HKEYS", &started]).await;
    doomed.kill9();

    let mut survivor = worker("noop", true, 1);
    let status = survivor
        .wait_timeout(Duration::from_secs(90))
        .expect("the survivor drains the queue");
    let log = std::fs::read_to_string(dir.path().join("err-1")).unwrap_or_default();
    assert!(status.success(), "{status:?}: {log}");
    let stats = ctx.stats().await;
    let acked = stats.counters.get("acked").copied().unwrap_or(0);
    println!(
        "kill -9 with a full buffer: {} runs had started; afterwards {acked} acked, {} dead-lettered; {:?}",
        marked.len(),
        stats.dead,
        stats.counters
    );
    assert!(marked.len() >= 50, "the runs had started: {marked:?}");
    assert_eq!(stats.dead, 0, "no job charged for the crash: {stats:?}");
    assert_eq!(acked, N as u64, "{stats:?}");
    assert_eq!(stats.pending(), 0, "{stats:?}");
    // Every job that had started is gone from Redis acked: not dead, not left anywhere.
    let snap = ctx.snapshot().await;
    for id in &marked {
        assert!(
            !snap.jobs.contains_key(id),
            "{id} was started and is still stored"
        );
        assert!(!snap.dead.iter().any(|(d, _)| d == id), "{id} dead-lettered");
    }
}
