//! Poison: a job that kills every consumer process that runs it. The jobs running beside
//! it when a consumer dies come back as suspects, uncharged, and each suspect runs alone;
//! the poison is charged for the crashes it causes while it runs alone, and ends
//! dead-lettered without taking any other job's attempts with it.

use crate::common::*;
use crate::faults::Proc;
use std::time::Duration;
use weir::{CancellationToken, Consumer, ConsumerConfig, NewJob, Redis, Registry, handler_fn};

/// Names the consumer process the poison test runs: set, the `poison_child` test runs a
/// consumer on `<redis url> <queue>`; unset, it does nothing.
const POISON_CHILD: &str = "WEIR_TEST_POISON_CHILD";

/// Poison: a job that kills its consumer process every time it runs, among innocent jobs
/// with `max_attempts` 1 or 2, consumed by one process after another. The poison ends
/// dead-lettered; every innocent job is acked, none charged for the poison's crashes.
///
/// The consumer processes are this test binary run again with only `poison_child`
/// selected (`WEIR_TEST_POISON_CHILD` tells it the queue): a handler that calls
/// `std::process::abort()` is a few lines of library code there, while `weir work` has
/// built-in handlers only, and a test-only handler does not belong in the CLI. (A `[[bin]]`
/// target would be installed with weir; an example's path is not known to tests.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_job_is_dead_lettered_and_its_batch_mates_are_not_charged() {
    const INNOCENT: usize = 60;
    let ctx = Ctx::private("poison").await;
    let mut all: Vec<NewJob> = (0..INNOCENT)
        .map(|i| {
            NewJob::new("k", &i)
                .unwrap()
                .id(format!("job-{i}"))
                .max_attempts(1 + (i % 2) as u32)
        })
        .collect();
    all.insert(5, NewJob::new("k", &0).unwrap().id("poison").max_attempts(2));
    ctx.producer().enqueue_bulk(all).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let me = std::env::current_exe().unwrap();
    let (mut crashes, mut drained) = (0, false);
    for run in 0..12 {
        let open = |name: String| std::fs::File::create(dir.path().join(name)).unwrap();
        let child = std::process::Command::new(&me)
            .args([
                "poison::poison_child",
                "--exact",
                "--ignored",
                "--test-threads",
                "1",
            ])
            .env(POISON_CHILD, format!("{} {}", ctx.url, ctx.queue))
            .stdout(open(format!("out-{run}")))
            .stderr(open(format!("err-{run}")))
            .spawn()
            .unwrap();
        let mut child = Proc { child };
        let status = child
            .wait_timeout(Duration::from_secs(60))
            .expect("a consumer process ends: it crashes or drains the queue");
        if status.success() {
            drained = true;
            break;
        }
        crashes += 1;
    }
    let stats = ctx.stats().await;
    let snap = ctx.snapshot().await;
    println!(
        "poison: {crashes} consumer processes crashed; {:?}; dead {:?}",
        stats.counters, snap.errors
    );
    assert!(drained, "no consumer drained the queue in 12 runs");
    // One crash among its batch-mates (all of them suspects then, uncharged), then one
    // per attempt (2) while it runs alone: a crash charged to the batch-mates instead, or
    // none charged to the poison, would give another count.
    assert_eq!(crashes, 3, "consumer processes the poison crashed");
    assert_eq!(
        stats.pending(),
        0,
        "the last consumer drained the queue: {stats:?}"
    );
    let dead: Vec<&str> = snap.dead.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(
        dead,
        ["poison"],
        "only the poison is dead-lettered: {:?}",
        snap.errors
    );
    let why = snap.errors.get("poison").map(String::as_str).unwrap_or_default();
    assert!(why.contains("as a suspect after 2 attempts"), "{why}");
    assert_eq!(
        stats.counters.get("acked").copied(),
        Some(INNOCENT as u64),
        "every innocent job acked"
    );
}

/// The consumer process of the poison test (see [`POISON_CHILD`]); a no-op in a normal
/// test run. Each job works 200 ms (so its start is written before anything else
/// happens); the job `poison` then aborts the process.
#[test]
#[ignore = "a child process of the poison test, which runs it"]
fn poison_child() {
    let Ok(spec) = std::env::var(POISON_CHILD) else {
        return;
    };
    let (url, queue) = spec.split_once(' ').expect("<url> <queue>");
    let registry = Registry::new().fallback(handler_fn(|job| async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        if job.id == "poison" {
            std::process::abort();
        }
        Ok(())
    }));
    let mut config = ConsumerConfig::new(queue);
    config.concurrency = 8;
    config.lease = Duration::from_secs(1);
    config.drain = true;
    config.metrics = false;
    config.fetcher.batch = 20;
    config.reclaimer.interval = Duration::from_millis(100);
    let consumer = Consumer::new(config, Redis::open(url).unwrap(), registry).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(consumer.run(CancellationToken::new())).unwrap();
}
