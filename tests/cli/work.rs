//! `weir work`: drain mode and a second signal. (SIGTERM under load, with every slot
//! busy and the buffer full: tests/consumer/shutdown.rs.)

use crate::common::*;
use crate::{cli, no_panic, text};
use std::process::{Command, Stdio};

#[tokio::test]
async fn work_drain_processes_everything_and_exits() {
    let ctx = Ctx::new("cli-work").await;
    let jobs = (0..300).map(|i| weir::NewJob::new("any", &i).unwrap());
    ctx.producer().enqueue_bulk(jobs).await.unwrap();
    let o = cli(
        &ctx,
        &[
            "work",
            "--drain",
            "-q",
            &ctx.queue,
            "--concurrency",
            "16",
            "--batch",
            "50",
        ],
        "",
    );
    no_panic(&o);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("300 acked"), "{}", text(&o.stdout));
    let s = ctx.stats().await;
    assert_eq!((s.pending(), s.dead), (0, 0));

    let o = cli(
        &ctx,
        &["work", "--drain", "-q", &ctx.queue, "--handler", "sleep:10ms"],
        "",
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

/// A second signal exits at once (130); the leases come back by expiry, nothing is lost.
#[tokio::test]
async fn second_signal_exits_at_once() {
    let ctx = Ctx::new("cli-term2").await;
    ctx.producer()
        .enqueue(weir::NewJob::new("k", &1).unwrap())
        .await
        .unwrap();
    let args = [
        "work",
        "-q",
        &ctx.queue,
        "--handler",
        "sleep:1h",
        "--shutdown-timeout",
        "1h",
    ];
    let child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .env("REDIS_URL", &ctx.url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("the job leased", std::time::Duration::from_secs(15), || async {
        ctx.stats().await.in_flight == 1
    })
    .await;
    let pid = child.id().to_string();
    Command::new("kill").args(["-INT", &pid]).status().unwrap();
    // the first signal is being handled once the fetcher stops; give it a moment, then again
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    Command::new("kill").args(["-INT", &pid]).status().unwrap();
    let o = child.wait_with_output().unwrap();
    no_panic(&o);
    assert_eq!(o.status.code(), Some(130), "{}", text(&o.stderr));
    let s = ctx.stats().await;
    assert_eq!(s.in_flight + s.ready_total(), 1, "the job is still there");
}
