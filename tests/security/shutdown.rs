//! `weir work … 2>&1 | head -1`: once the reader of its standard output and error is
//! gone, SIGTERM still shuts the consumer down gracefully: it exits, and every job it had
//! leased is acked or back in the queue.

use super::T;
use super::common::{Ctx, wait_until};
use super::faults::{WEIR, enqueue_range};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_shuts_down_gracefully_with_stdout_and_stderr_closed() {
    let ctx = Ctx::private("closed-pipe").await;
    const N: u64 = 200;
    enqueue_range(&ctx.url, &ctx.queue, "a", "j", 0, N as usize).await;
    let mut child = Command::new(WEIR)
        .args([
            "work",
            "-q",
            &ctx.queue,
            "--handler",
            "sleep:300ms",
            "--concurrency",
            "8",
        ])
        .args(["--no-metrics", "--redis-url", &ctx.url])
        .env("WEIR_LOG", "weir=info,warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A job running, not only leased: a shutdown releases the leased jobs no handler
    // has started, so the acks below need a run under way when the signal comes.
    wait_until("a job started", T, || async {
        let mut c = ctx.conn.clone();
        let started: u64 = redis::cmd("HLEN")
            .arg(ctx.keys.started())
            .query_async(&mut c)
            .await
            .unwrap();
        started > 0
    })
    .await;
    // The reader goes away, as `head -1` does after its line.
    drop(child.stdout.take());
    drop(child.stderr.take());
    crate::common::signal(child.id(), rustix::process::Signal::TERM).unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("weir work ignored SIGTERM with its pipes closed");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    let s = ctx.stats().await;
    let acked = s.counters.get("acked").copied().unwrap_or(0);
    assert_eq!((s.in_flight, s.dead, s.delayed), (0, 0, 0), "{s:?}");
    assert!(acked > 0, "{s:?}");
    assert_eq!(
        acked + s.ready_total(),
        N,
        "every job acked or back in the queue: {s:?}"
    );
}
