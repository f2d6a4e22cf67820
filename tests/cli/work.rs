//! `weir work`: drain mode, a second signal, and the settings it refuses before touching
//! the queue (no handler, a job timeout under the floor, a handler it cannot reach).
//! (SIGTERM under load, with every slot busy and the buffer full:
//! tests/consumer/shutdown.rs.)

use crate::common::*;
use crate::{cli, cli_within, closed_port, error_lines, no_panic, text};
use std::process::{Command, Stdio};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);

/// Enqueues `n` jobs and returns their ids.
async fn seed_jobs(ctx: &Ctx, n: u32) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        ids.push(
            ctx.producer()
                .enqueue(weir::NewJob::new("k", &i).unwrap())
                .await
                .unwrap(),
        );
    }
    ids
}

/// Every job is still ready, uncharged, and nothing was leased, acked or dead-lettered.
async fn untouched(ctx: &Ctx, ids: &[String]) {
    let s = ctx.snapshot().await;
    let mut ready = s.ready[1].clone();
    ready.sort();
    let mut want = ids.to_vec();
    want.sort();
    assert_eq!(ready, want, "every job still ready");
    for id in ids {
        assert!(
            s.jobs[id].starts_with(r#"{"attempt":0,"#),
            "{id} uncharged: {}",
            s.jobs[id]
        );
    }
    assert!(s.lease.is_empty() && s.dead.is_empty(), "{s:?}");
    assert_eq!(s.counters.get("acked").copied().unwrap_or(0), 0, "{s:?}");
}

/// There is no default handler: `noop` would ack (delete) every job of a real queue.
#[tokio::test]
async fn work_without_a_handler_is_a_usage_error_and_touches_nothing() {
    let ctx = Ctx::new("cli-nohandler").await;
    let ids = seed_jobs(&ctx, 5).await;
    let o = cli_within(&ctx, &["work", "--drain", "-q", &ctx.queue], LIMIT);
    no_panic(&o);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.starts_with("error:") && err.contains("--handler"), "{err}");
    untouched(&ctx, &ids).await;
}

/// A job timeout of 0 (or any value under 10ms) would abandon every job before its
/// handler could run: refused with one line, before Redis is touched.
#[tokio::test]
async fn a_job_timeout_under_the_floor_is_refused() {
    let ctx = Ctx::new("cli-jobtimeout").await;
    let ids = seed_jobs(&ctx, 5).await;
    let q = ctx.queue.as_str();
    let args = |t| {
        let work = ["work", "--handler", "noop", "--drain", "--no-metrics", "-q"];
        [&work[..], &[q, "--job-timeout", t]].concat()
    };
    for t in ["0s", "0ms", "1us", "9ms"] {
        let o = cli_within(&ctx, &args(t), LIMIT);
        no_panic(&o);
        let lines = error_lines(&o);
        assert_eq!(o.status.code(), Some(2), "{t}: {lines:?}");
        assert_eq!(lines.len(), 1, "{t}: one line: {lines:?}");
        assert!(
            lines[0].starts_with("error:") && lines[0].contains("job timeout must be at least 10ms"),
            "{t}: {lines:?}"
        );
        untouched(&ctx, &ids).await;
    }
    let o = cli_within(&ctx, &args("10ms"), LIMIT);
    assert_eq!(
        o.status.code(),
        Some(0),
        "the floor itself is accepted: {}",
        text(&o.stderr)
    );
    assert!(text(&o.stdout).contains("5 acked"), "{}", text(&o.stdout));
}

/// A handler URL with nothing behind it (a typo, a service not up yet) is one line of
/// error and exit 1 before any job is fetched: the queue is not drained into the
/// dead-letter queue.
#[tokio::test]
async fn an_unreachable_handler_is_reported_before_any_job_is_fetched() {
    let ctx = Ctx::new("cli-nohost").await;
    let ids = seed_jobs(&ctx, 5).await;
    let url = format!("http://127.0.0.1:{}/x", closed_port());
    let args = [
        "work",
        "--handler",
        &url,
        "--drain",
        "--no-metrics",
        "-q",
        &ctx.queue,
    ];
    let o = cli_within(&ctx, &args, LIMIT);
    no_panic(&o);
    let lines = error_lines(&o);
    assert_eq!(o.status.code(), Some(1), "{lines:?}");
    assert_eq!(lines.len(), 1, "one line: {lines:?}");
    assert!(
        lines[0].starts_with("error:")
            && lines[0].contains(&format!("cannot reach the handler at {url}"))
            && lines[0].contains("refused"),
        "{lines:?}"
    );
    untouched(&ctx, &ids).await;
}

#[tokio::test]
async fn work_drain_processes_everything_and_exits() {
    let ctx = Ctx::new("cli-work").await;
    let jobs = (0..300).map(|i| weir::NewJob::new("any", &i).unwrap());
    ctx.producer().enqueue_bulk(jobs).await.unwrap();
    let o = cli(
        &ctx,
        &[
            "work",
            "--handler",
            "noop",
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
