//! Handler faults: panics are retryable failures that never kill a worker; a handler that
//! hangs past the job timeout is abandoned and its job retried (or dead-lettered once its
//! attempts are spent); a slow handler that outlives its lease keeps it through the
//! heartbeat, so it runs once, not twice, even with another consumer reclaiming.

mod common;
mod faults;

use common::Seen;
use std::time::Duration;
use weir::{
    CancellationToken, Consumer, ConsumerConfig, EmbeddedRedis, Job, NewJob, Producer, Redis, Registry,
    Report,
};

fn config(queue: &str) -> ConsumerConfig {
    let mut c = ConsumerConfig::new(queue);
    c.concurrency = 16;
    c.drain = true;
    c.metrics = false;
    c.pool.retry.base = Duration::from_millis(10);
    c.pool.retry.cap = Duration::from_millis(50);
    c.reclaimer.interval = Duration::from_millis(100);
    c
}

async fn enqueue(url: &str, queue: &str, n: usize, max_attempts: u32) {
    let p = Producer::new(Redis::open(url).unwrap().connect().await.unwrap(), queue).unwrap();
    let jobs = (0..n).map(|i| {
        NewJob::new("k", &i)
            .unwrap()
            .id(format!("{queue}-{i}"))
            .max_attempts(max_attempts)
    });
    p.enqueue_bulk(jobs).await.unwrap();
}

/// Runs a draining consumer with `registry` until the queue is empty.
async fn drain(url: &str, config: ConsumerConfig, registry: Registry) -> Report {
    let consumer = Consumer::new(config, Redis::open(url).unwrap(), registry).unwrap();
    tokio::time::timeout(Duration::from_secs(60), consumer.run(CancellationToken::new()))
        .await
        .expect("drained in time")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panics_are_retried_and_spent_attempts_dead_lettered() {
    let redis = EmbeddedRedis::start().unwrap();
    let url = redis.url();
    enqueue(&url, "panics", 200, 3).await;
    let seen = Seen::default();
    let report = drain(
        &url,
        config("panics"),
        seen.recording("k", |job: Job| async move {
            let n: u64 = job.payload().unwrap();
            match (n % 4, job.attempt) {
                (0, _) => panic!("always panics"),            // dead after 3 attempts
                (1, 0) => std::panic::panic_any(42u8),        // non-string panic, then fine
                (2, 0) => panic!("first attempt panics {n}"), // then fine
                _ => Ok(()),
            }
        }),
    )
    .await;
    let runs = seen.all();
    assert_eq!(runs.len(), 200);
    for (id, attempts) in runs.iter() {
        let n: usize = id.rsplit('-').next().unwrap().parse().unwrap();
        let want: &[u32] = match n % 4 {
            0 => &[0, 1, 2],
            1 | 2 => &[0, 1],
            _ => &[0],
        };
        assert_eq!(attempts, want, "{id}");
    }
    assert_eq!((report.acked, report.dead), (150, 50), "{report:?}");
    let q = faults::queue(&url, "panics").await;
    let dead = q.dead_jobs(0, 100).await.unwrap();
    assert_eq!(dead.len(), 50);
    assert!(
        dead.iter()
            .all(|d| d.reason.as_deref() == Some("handler panicked: always panics")),
        "{dead:?}"
    );
    assert_eq!(q.stats().await.unwrap().pending(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hung_handlers_are_abandoned_at_the_job_timeout_and_retried() {
    let redis = EmbeddedRedis::start().unwrap();
    let url = redis.url();
    enqueue(&url, "hangs", 40, 2).await;
    let mut c = config("hangs");
    c.pool.job_timeout = Some(Duration::from_millis(200));
    let seen = Seen::default();
    let report = drain(
        &url,
        c,
        seen.recording("k", |job: Job| async move {
            let n: u64 = job.payload().unwrap();
            if n.is_multiple_of(2) || job.attempt == 0 {
                std::future::pending::<()>().await; // hangs for ever
            }
            Ok(())
        }),
    )
    .await;
    let runs = seen.all();
    assert!(runs.values().all(|a| a == &[0, 1]), "{runs:?}");
    assert_eq!((report.acked, report.dead), (20, 20), "{report:?}");
    let dead = faults::queue(&url, "hangs")
        .await
        .dead_jobs(0, 100)
        .await
        .unwrap();
    assert!(
        dead.iter()
            .all(|d| d.reason.as_deref() == Some("timed out after 200ms")),
        "{dead:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_handlers_keep_their_lease_and_run_once() {
    let redis = EmbeddedRedis::start().unwrap();
    let url = redis.url();
    enqueue(&url, "slow", 24, 5).await;
    let seen = Seen::default();
    // Two consumers: a lease that lapsed would be reclaimed and run by the other.
    let mut c = config("slow");
    c.concurrency = 12;
    c.lease = Duration::from_millis(500);
    let slow = |_job: Job| async {
        tokio::time::sleep(Duration::from_millis(1500)).await; // 3x the lease
        Ok(())
    };
    let (a, b) = tokio::join!(
        drain(&url, c.clone(), seen.recording("k", slow)),
        drain(&url, c, seen.recording("k", slow))
    );
    let runs = seen.all();
    assert_eq!(runs.len(), 24);
    assert!(runs.values().all(|a| a == &[0]), "a job ran twice: {runs:?}");
    assert_eq!(
        (a.acked + b.acked, a.lost_leases + b.lost_leases),
        (24, 0),
        "{a:?} {b:?}"
    );
    let stats = faults::queue(&url, "slow").await.stats().await.unwrap();
    assert_eq!(
        stats.counters.get("reclaimed").copied().unwrap_or(0),
        0,
        "{stats:?}"
    );
}

#[test]
fn cli_job_timeout_dead_letters_a_hung_job_once_its_attempts_are_spent() {
    let redis = EmbeddedRedis::start().unwrap();
    let url = redis.url();
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(enqueue(&url, "cli-hang", 3, 1));
    let (code, _, err) = faults::run_weir(
        &[
            "work",
            "--redis-url",
            &url,
            "-q",
            "cli-hang",
            "--no-metrics",
            "--drain",
            "--handler",
            "sleep:1h",
            "--job-timeout",
            "200ms",
        ],
        None,
        Duration::from_secs(60),
    );
    assert_eq!(code, 0, "{err}");
    let dead = rt.block_on(async {
        faults::queue(&url, "cli-hang")
            .await
            .dead_jobs(0, 10)
            .await
            .unwrap()
    });
    assert_eq!(dead.len(), 3, "{dead:?}");
    assert!(
        dead.iter()
            .all(|d| d.reason.as_deref() == Some("timed out after 200ms"))
    );
}
