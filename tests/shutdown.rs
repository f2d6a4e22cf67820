//! Graceful shutdown under load: SIGTERM to a busy `weir work` → exit 0 within the
//! shutdown timeout, every finished job acked, every un-started job back in ready at once
//! (the visibility timeout is 60 s, so nothing waits for it), no job left leased. A
//! handler that outlives the shutdown timeout is abandoned and its job handed back too.

mod faults;

use faults::{Proc, printed_ids};
use redis::AsyncCommands;
use std::time::{Duration, Instant};
use weir::EmbeddedRedis;
use weir::keys::QueueKeys;

const JOBS: usize = 2_000;

async fn sigterm_while_busy(queue: &str, handler: &str, shutdown_timeout: &str) -> (usize, Duration) {
    let redis = EmbeddedRedis::start().unwrap();
    let url = redis.url();
    faults::enqueue_range(&url, queue, "k", "job", 0, JOBS).await;
    let dir = tempfile::tempdir().unwrap();
    let (out, err) = (dir.path().join("out"), dir.path().join("err"));
    let mut p = Proc::weir(
        &[
            "work",
            "--redis-url",
            &url,
            "-q",
            queue,
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
    let keys = QueueKeys::new(queue).unwrap();
    let mut conn = faults::raw(&url).await;
    // Busy: the buffer is full and every slot runs a job.
    let busy = faults::wait_until(Duration::from_secs(30), || {
        let mut conn = conn.clone();
        let lease = keys.lease().to_owned();
        async move { conn.zcard::<_, usize>(lease).await.unwrap() >= 32 }
    })
    .await;
    assert!(busy, "the consumer never got busy");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let signalled = Instant::now();
    p.sigterm();
    let status = p
        .wait_timeout(Duration::from_secs(30))
        .expect("exits after SIGTERM");
    let took = signalled.elapsed();
    let log = std::fs::read_to_string(&err).unwrap();
    assert!(status.success(), "{status:?}\n{log}");

    let leased: usize = conn.zcard(keys.lease()).await.unwrap();
    assert_eq!(leased, 0, "no job left leased\n{log}");
    let stats = faults::queue(&url, queue).await.stats().await.unwrap();
    let finished = printed_ids(&out);
    let acked = stats.counters.get("acked").copied().unwrap_or(0) as usize;
    assert_eq!(acked, finished.len(), "every finished job acked, no other\n{log}");
    assert!(finished.values().all(|n| *n == 1));
    assert_eq!(
        stats.ready_total() as usize,
        JOBS - acked,
        "the rest back in ready at once: {stats:?}"
    );
    for id in finished.keys() {
        let env: Option<String> = conn.hget(keys.jobs(), id).await.unwrap();
        assert!(env.is_none(), "{id} finished but still stored");
    }
    (acked, took)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_running_jobs_and_hands_back_the_rest() {
    let (acked, took) = sigterm_while_busy("shutdown", "print:300ms", "10s").await;
    assert!(acked >= 16, "the jobs running at SIGTERM finished: {acked}");
    assert!(
        took < Duration::from_secs(10),
        "exit within the shutdown timeout: {took:?}"
    );
    println!(
        "SIGTERM under load: exit 0 after {took:?}, {acked} finished jobs acked, {} handed back",
        JOBS - acked
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_outliving_the_shutdown_timeout_are_handed_back() {
    let (acked, took) = sigterm_while_busy("shutdown-slow", "print:1h", "1s").await;
    assert_eq!(acked, 0);
    assert!(
        took < Duration::from_secs(10),
        "exit soon after the 1s shutdown timeout: {took:?}"
    );
    println!("SIGTERM with hung handlers: exit 0 after {took:?}, all {JOBS} jobs handed back");
}
