//! Consumer crashes: `weir work` processes are killed with SIGKILL at random moments
//! (at start-up, while fetching, with a full buffer, mid-ack-flush), again and again, and
//! restarted; a last consumer drains the queue. Every job runs at least once, and a job
//! runs twice only if a killed process held its lease when it died.
//!
//! The trace of what ran is the `print` handler's output: one JSON line per job, written
//! before the job is acked. `WEIR_CRASH_KILLS=100` runs a longer version.

mod faults;

use faults::{Proc, printed_ids};
use rand::Rng;
use redis::AsyncCommands;
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};
use weir::EmbeddedRedis;
use weir::keys::QueueKeys;

const QUEUE: &str = "crashes";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_at_random_moments_loses_no_job() {
    let kills: usize = std::env::var("WEIR_CRASH_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(15);
    // Enough work that the queue outlasts the kills (about 1,300 jobs run per kill).
    let jobs = (kills * 1_400).max(20_000);
    let redis = EmbeddedRedis::start().unwrap();
    let url = redis.url();
    let keys = QueueKeys::new(QUEUE).unwrap();
    faults::enqueue_range(&url, QUEUE, "crash", "job", 0, jobs).await;
    let dir = tempfile::tempdir().unwrap();
    let mut conn = faults::raw(&url).await;
    let mut rng = rand::rng();
    let mut leased_by_killed: HashSet<String> = HashSet::new();
    let (mut killed, mut run) = (0, 0);
    let started = Instant::now();

    while killed < kills && started.elapsed() < Duration::from_secs(90) {
        // Alternate a fast handler (acks flushed constantly) and a slow one (the buffer
        // stays full); kill at a random moment, sometimes before the consumer is up.
        let handler = if run % 2 == 0 { "print:1ms" } else { "print:10ms" };
        let mut p = spawn(&url, handler, dir.path(), run, false);
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
        let leased: Vec<String> = conn.zrange(keys.lease(), 0, -1).await.unwrap();
        leased_by_killed.extend(leased);
        let stats = faults::queue(&url, QUEUE).await.stats().await.unwrap();
        if stats.ready_total() + stats.delayed == 0 {
            break;
        }
    }

    // The survivor drains the queue, reclaiming the killed consumers' leases as they expire.
    let mut last = spawn(&url, "print", dir.path(), run, true);
    let status = last
        .wait_timeout(Duration::from_secs(90))
        .expect("the last consumer drains the queue");
    assert!(status.success(), "{status:?}: {}", stderr_of(dir.path(), run));

    let mut runs: HashMap<String, usize> = HashMap::new();
    for r in 0..=run {
        for (id, n) in printed_ids(&dir.path().join(format!("out-{r}"))) {
            *runs.entry(id).or_insert(0) += n;
        }
    }
    let missing: Vec<_> = (0..jobs)
        .map(|i| format!("job-{i}"))
        .filter(|id| !runs.contains_key(id))
        .collect();
    assert!(
        missing.is_empty(),
        "{} jobs never ran, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    let dups: Vec<&String> = runs.iter().filter(|(_, n)| **n > 1).map(|(id, _)| id).collect();
    let unexplained: Vec<_> = dups
        .iter()
        .filter(|id| !leased_by_killed.contains(**id))
        .collect();
    assert!(
        unexplained.is_empty(),
        "ran twice without a killed lease holder: {unexplained:?}"
    );
    let stats = faults::queue(&url, QUEUE).await.stats().await.unwrap();
    assert_eq!((stats.pending(), stats.dead), (0, 0), "{stats:?}");
    assert_eq!(
        stats.counters.get("acked").copied(),
        Some(jobs as u64),
        "{stats:?}"
    );
    println!(
        "kills survived: {killed}; jobs: {jobs}; lost: {}; duplicates: {} (all among the {} jobs leased by killed processes)",
        missing.len(),
        dups.len(),
        leased_by_killed.len()
    );
}

fn spawn(url: &str, handler: &str, dir: &std::path::Path, run: usize, drain: bool) -> Proc {
    let mut args = vec![
        "work",
        "--redis-url",
        url,
        "-q",
        QUEUE,
        "--no-metrics",
        "--visibility-timeout",
        "2s",
        "--concurrency",
        "8",
        "--batch",
        "100",
        "--handler",
        handler,
    ];
    if drain {
        args.push("--drain");
    }
    Proc::weir(
        &args,
        &dir.join(format!("out-{run}")),
        &dir.join(format!("err-{run}")),
    )
}

fn stderr_of(dir: &std::path::Path, run: usize) -> String {
    std::fs::read_to_string(dir.join(format!("err-{run}"))).unwrap_or_default()
}
