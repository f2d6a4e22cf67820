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
    let s = ctx.snapshot().await.by_id();
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
            "--no-metrics",
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
        &[
            "work",
            "--drain",
            "--no-metrics",
            "-q",
            &ctx.queue,
            "--handler",
            "sleep:10ms",
        ],
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
    let pid = child.id();
    crate::common::signal(pid, rustix::process::Signal::INT).unwrap();
    // the first signal is being handled once the fetcher stops; give it a moment, then again
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    crate::common::signal(pid, rustix::process::Signal::INT).unwrap();
    let o = child.wait_with_output().unwrap();
    no_panic(&o);
    assert_eq!(o.status.code(), Some(130), "{}", text(&o.stderr));
    let s = ctx.stats().await;
    assert_eq!(s.in_flight + s.ready_total(), 1, "the job is still there");
}

/// `n` jobs of kind `k` in `queue`, ids `{prefix}{i}`.
async fn seed_queue(ctx: &Ctx, queue: &str, prefix: &str, n: usize) {
    let jobs = (0..n).map(|i| weir::NewJob::new("k", &i).unwrap().id(format!("{prefix}{i}")));
    let p = weir::Producer::new(ctx.c(), queue).unwrap();
    assert_eq!(p.enqueue_bulk(jobs).await.unwrap().enqueued, n as u64);
}

/// The ids of the jobs `print` wrote, one JSON line each.
fn printed_ids(o: &std::process::Output) -> Vec<String> {
    text(&o.stdout)
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}"));
            v["id"].as_str().unwrap().to_owned()
        })
        .collect()
}

/// Every job of each queue was acked once, in its own queue, and nothing is left.
async fn each_acked_once_in_its_own_queue(ctx: &Ctx, ids: &[String], queues: &[(&str, &str, usize)]) {
    let mut sorted = ids.to_vec();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), ids.len(), "no job ran twice");
    for &(q, prefix, n) in queues {
        let ran = ids.iter().filter(|id| id.starts_with(prefix)).count();
        assert_eq!(ran, n, "{q}: every job ran");
        let s = weir::Queue::new(ctx.c(), q).unwrap().stats().await.unwrap();
        assert_eq!(s.counters.get("acked").copied(), Some(n as u64), "{q}: {s:?}");
        assert_eq!((s.pending(), s.dead), (0, 0), "{q}: {s:?}");
    }
}

/// `--queue a --queue b:2 --drain`: both queues drained by one process, each job acked once
/// in its own queue; the summary gives the total and each queue's line.
#[tokio::test]
async fn work_drains_several_queues_each_job_acked_once_in_its_own_queue() {
    let ctx = Ctx::new("cli-multi").await;
    let (b, _) = ctx.other_queue("cli-multi-b");
    seed_queue(&ctx, &ctx.queue, "a-", 150).await;
    seed_queue(&ctx, &b, "b-", 200).await;
    let b2 = format!("{b}:2");
    let args = [
        "work",
        "--handler",
        "print",
        "--drain",
        "--no-metrics",
        "--concurrency",
        "8",
        "--batch",
        "40",
        "--queue",
        &ctx.queue,
        "--queue",
        &b2,
    ];
    let o = cli_within(&ctx, &args, LIMIT);
    no_panic(&o);
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("350 acked"), "{err}");
    assert!(err.contains(&format!("  {}: 150 acked", ctx.queue)), "{err}");
    assert!(err.contains(&format!("  {b}: 200 acked")), "{err}");
    let queues = [(ctx.queue.as_str(), "a-", 150), (b.as_str(), "b-", 200)];
    each_acked_once_in_its_own_queue(&ctx, &printed_ids(&o), &queues).await;
}

/// `WEIR_QUEUE` holds a comma-separated list, as `--queue` does.
#[tokio::test]
async fn weir_queue_takes_a_comma_separated_list() {
    let ctx = Ctx::new("cli-multi-env").await;
    let (b, _) = ctx.other_queue("cli-multi-env-b");
    seed_queue(&ctx, &ctx.queue, "a-", 30).await;
    seed_queue(&ctx, &b, "b-", 40).await;
    let o = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["work", "--handler", "print", "--drain", "--no-metrics"])
        .env("REDIS_URL", &ctx.url)
        .env("WEIR_QUEUE", format!("{},{b}:3", ctx.queue))
        .env_remove("WEIR_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    no_panic(&o);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let queues = [(ctx.queue.as_str(), "a-", 30), (b.as_str(), "b-", 40)];
    each_acked_once_in_its_own_queue(&ctx, &printed_ids(&o), &queues).await;
}

/// While it runs, `weir workers --queue Q` shows the process under each of its queues; a
/// SIGTERM stops every queue's pipeline and removes the entries.
#[tokio::test]
async fn workers_shows_the_process_under_each_queue() {
    let ctx = Ctx::new("cli-multi-workers").await;
    let (b, _) = ctx.other_queue("cli-multi-workers-b");
    let child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args([
            "work",
            "--handler",
            "noop",
            "--no-metrics",
            "--queue",
            &ctx.queue,
            "--queue",
            &b,
        ])
        .env("REDIS_URL", &ctx.url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let workers = |q: &str| {
        let o = cli(&ctx, &["workers", "--json", "--queue", q], "");
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["workers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["pid"].as_u64().unwrap())
            .collect::<Vec<_>>()
    };
    for q in [ctx.queue.as_str(), b.as_str()] {
        wait_until("an entry for each queue", Duration::from_secs(15), || async {
            workers(q) == [u64::from(pid)]
        })
        .await;
    }
    crate::common::signal(pid, rustix::process::Signal::TERM).unwrap();
    let o = child.wait_with_output().unwrap();
    no_panic(&o);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        workers(&ctx.queue).is_empty() && workers(&b).is_empty(),
        "entries removed"
    );
}

/// A weight of 0, a weight that is not a number, a queue given twice: one line naming the
/// problem, exit 2, and the queue untouched.
#[tokio::test]
async fn bad_queue_values_are_refused_before_any_job_is_fetched() {
    let ctx = Ctx::new("cli-multi-bad").await;
    let ids = seed_jobs(&ctx, 5).await;
    let q = ctx.queue.as_str();
    let (zero, word, big, twice) = (
        format!("{q}:0"),
        format!("{q}:3x"),
        format!("{q}:1001"),
        format!("{q}:2"),
    );
    for (extra, says) in [
        (
            vec!["-q", "other", "-q", &zero],
            "weight must be between 1 and 1000, not 0",
        ),
        (
            vec!["-q", &word],
            "weight \"3x\" is not a whole number between 1 and 1000",
        ),
        (vec!["-q", &big], "weight must be between 1 and 1000, not 1001"),
        (vec!["-q", q, "-q", &twice], "is listed twice"),
        (vec!["-q", "other,bad name"], "invalid queue name"),
    ] {
        let args = [
            &["work", "--handler", "noop", "--drain", "--no-metrics"][..],
            &extra,
        ]
        .concat();
        let o = cli_within(&ctx, &args, LIMIT);
        no_panic(&o);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {err}");
        assert!(
            err.starts_with("error:") && err.contains(says),
            "{extra:?}: {err}"
        );
        untouched(&ctx, &ids).await;
    }
}

/// The per-kind series stay bounded: of 25 kinds, the first 20 a consumer runs get series
/// of their own and the rest count as `kind="other"`; every run is counted once.
#[tokio::test]
async fn per_kind_metrics_are_bounded() {
    use std::io::{Read, Write};
    let ctx = Ctx::new("cli-kinds").await;
    let jobs = (0..25).map(|i| weir::NewJob::new(format!("kind-{i:02}"), &i).unwrap());
    ctx.producer().enqueue_bulk(jobs).await.unwrap();
    let port = free_port();
    let mut work = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args([
            "work",
            "-q",
            &ctx.queue,
            "--handler",
            "noop",
            "--concurrency",
            "1",
        ])
        .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
        .env("REDIS_URL", &ctx.url)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let scrape = || {
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
            return String::new();
        };
        let _ = write!(
            s,
            "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        );
        let mut body = String::new();
        let _ = s.read_to_string(&mut body);
        body
    };
    let series = |m: &str| -> Vec<(String, f64)> {
        m.lines()
            .filter(|l| l.starts_with("weir_kind_jobs_total{") && l.contains(r#"outcome="ok""#))
            .map(|l| {
                let kind = l.split(r#"kind=""#).nth(1).unwrap().split('"').next().unwrap();
                (kind.to_owned(), l.rsplit(' ').next().unwrap().parse().unwrap())
            })
            .collect()
    };
    let mut seen = Vec::new();
    let done = try_wait_until(LIMIT, || {
        seen = series(&scrape());
        let total: f64 = seen.iter().map(|(_, n)| n).sum();
        std::future::ready(total == 25.0)
    })
    .await;
    let _ = work.kill();
    let _ = work.wait();
    assert!(done, "25 runs counted: {seen:?}");
    assert_eq!(seen.len(), 21, "20 kinds and other: {seen:?}");
    let other = seen.iter().find(|(k, _)| k == "other").map(|(_, n)| *n);
    assert_eq!(other, Some(5.0), "{seen:?}");
}
