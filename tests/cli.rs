//! The `weir` binary against the test redis-server: enqueue, work, stats, dlq, pause and
//! resume, and the one-line errors.

mod common;

use common::*;
use std::io::Write;
use std::process::{Command, Output, Stdio};
use weir::scripts::{self, Settle};

/// Runs `weir args...` with `stdin`, Redis from `REDIS_URL` (or `--redis-url` in `args`).
fn weir(ctx: &Ctx, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .env("REDIS_URL", &ctx.url)
        .env("RUST_BACKTRACE", "1")
        .env_remove("WEIR_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("weir runs");
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    child.wait_with_output().unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn no_panic(o: &Output) {
    let err = text(&o.stderr);
    assert!(!err.contains("panicked") && !err.contains("backtrace"), "{err}");
}

#[tokio::test]
async fn enqueue_ndjson_loads_good_lines_and_reports_bad_ones_by_number() {
    let ctx = Ctx::new("cli-enq").await;
    let input = [
        r#"{"kind":"k","payload":{"a":1}}"#,
        r#"{"kind":"k","payload":2,"id":"fixed","priority":"high","max_attempts":7}"#,
        r#"{"kind":"k","payload":3,"delay":"1h"}"#,
        r#"{"kind":"k","payload":4,"delay":60000,"priority":"low"}"#,
        "not json",
        "",
        r#"{"kind":"k","payload":5,"priority":"urgent"}"#,
        r#"{"kind":"bad kind","payload":6}"#,
        r#"{"kind":"k","payload":7,"extra":1}"#,
    ]
    .join("\n");
    let t0 = ctx.now_ms().await;
    let o = weir(&ctx, &["enqueue", "--queue", &ctx.queue], &input);
    let t1 = ctx.now_ms().await;
    no_panic(&o);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(o.status.code(), Some(2), "bad lines make a non-zero exit: {err}");
    assert!(out.contains("enqueued 4 jobs"), "{out}");
    for n in [5, 7, 8, 9] {
        assert!(err.contains(&format!("line {n}:")), "line {n} reported: {err}");
    }
    assert!(!err.contains("line 6:"), "empty lines are skipped: {err}");
    let s = ctx.snapshot().await;
    assert_eq!(s.ready[0], ["fixed"]);
    assert_eq!(s.ready[1].len(), 1);
    assert!(s.jobs["fixed"].starts_with(r#"{"attempt":0,"max_attempts":7,"priority":0,"#));
    assert!(s.jobs[&s.ready[1][0]].starts_with(r#"{"attempt":0,"max_attempts":5,"priority":1,"#));
    let (hour, minute) = (&s.delayed[1][0], &s.delayed[2][0]);
    check_time("1h delay", NOW + 3_600_000, hour.1, (t0, t1));
    check_time("60000 ms delay", NOW + 60_000, minute.1, (t0, t1));

    // the same file again: the fixed id is a duplicate
    let o = weir(&ctx, &["enqueue", "--queue", &ctx.queue], &input);
    assert!(text(&o.stderr).contains("skipped 1 jobs whose id already exists: fixed"));
}

#[tokio::test]
async fn enqueue_with_kind_takes_bare_payloads_and_defaults() {
    let ctx = Ctx::new("cli-kind").await;
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), "{\"x\":1}\n2\n\"s\"\n{bad\n").unwrap();
    let path = file.path().to_str().unwrap();
    let args = [
        "enqueue",
        "-q",
        &ctx.queue,
        "--kind",
        "mail",
        "--priority",
        "low",
        "--delay",
        "5m",
        path,
    ];
    let o = weir(&ctx, &args, "");
    no_panic(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("line 4:"), "{}", text(&o.stderr));
    let s = ctx.snapshot().await;
    assert_eq!(s.delayed[2].len(), 3);
    assert!(
        s.jobs
            .values()
            .all(|e| e.contains(r#""kind":"mail""#) && e.contains(r#""priority":2,"#))
    );
    assert!(s.jobs.values().any(|e| e.ends_with(r#""payload":{"x":1}}"#)));

    let o = weir(&ctx, &["enqueue", "-q", &ctx.queue, "--kind", "mail"], "1\n2\n");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(ctx.stats().await.ready[1], 2);
}

#[tokio::test]
async fn work_drain_processes_everything_and_exits() {
    let ctx = Ctx::new("cli-work").await;
    let jobs = (0..300).map(|i| weir::NewJob::new("any", &i).unwrap());
    ctx.producer().enqueue_bulk(jobs).await.unwrap();
    let o = weir(
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

    let o = weir(
        &ctx,
        &["work", "--drain", "-q", &ctx.queue, "--handler", "sleep:10ms"],
        "",
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

#[tokio::test]
async fn stats_json_parses() {
    let ctx = Ctx::new("cli-stats").await;
    ctx.producer()
        .enqueue_bulk((0..3).map(|i| weir::NewJob::new("k", &i).unwrap()))
        .await
        .unwrap();
    let o = weir(&ctx, &["stats", "--json", "-q", &ctx.queue], "");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stats --json is JSON");
    assert_eq!(v["queue"], ctx.queue.as_str());
    assert_eq!(v["stats"]["ready"], serde_json::json!([0, 3, 0]));
    assert_eq!(v["stats"]["in_flight"], 0);
    assert_eq!(v["stats"]["paused"], false);
    assert_eq!(v["stats"]["counters"]["enqueued"], 3);
    let o = weir(&ctx, &["stats", "-q", &ctx.queue], "");
    assert!(
        text(&o.stdout).contains("ready      3 (high 0, normal 3, low 0)"),
        "{}",
        text(&o.stdout)
    );
}

async fn bury(ctx: &Ctx, ids: &[&str]) {
    let jobs = ids
        .iter()
        .map(|id| weir::NewJob::new("k", &1).unwrap().id(*id).max_attempts(2));
    ctx.producer().enqueue_bulk(jobs).await.unwrap();
    let f = scripts::fetch(&mut ctx.c(), &ctx.keys, 100, 60_000)
        .await
        .unwrap();
    let (mine, others): (Vec<_>, Vec<_>) = f.jobs.iter().partition(|(id, _)| ids.contains(&id.as_str()));
    let items: Vec<Settle> = mine
        .iter()
        .map(|(id, _)| Settle::Dead {
            id: id.clone(),
            token: f.deadline_ms,
            reason: format!("broke {id}"),
        })
        .collect();
    scripts::settle(&mut ctx.c(), &ctx.keys, 100, &items)
        .await
        .unwrap();
    let back: Vec<(&str, u64, weir::Priority)> = others
        .iter()
        .map(|(id, _)| (id.as_str(), f.deadline_ms, weir::Priority::Normal))
        .collect();
    scripts::release(&mut ctx.c(), &ctx.keys, &back).await.unwrap();
}

#[tokio::test]
async fn dlq_list_requeue_purge() {
    let ctx = Ctx::new("cli-dlq").await;
    bury(&ctx, &["a", "b", "c"]).await;
    let q = ctx.queue.as_str();
    let o = weir(&ctx, &["dlq", "list", "-q", q], "");
    let out = text(&o.stdout);
    assert_eq!(out.lines().count(), 3, "{out}");
    assert!(
        out.lines().any(|l| l.starts_with("a ") && l.ends_with("broke a")),
        "{out}"
    );
    let o = weir(&ctx, &["dlq", "list", "--json", "--limit", "2", "-q", q], "");
    let rows: Vec<serde_json::Value> = text(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 2);
    assert!(
        rows.iter()
            .all(|r| r["reason"].as_str().unwrap().starts_with("broke"))
    );

    let o = weir(&ctx, &["dlq", "requeue", "a", "zz", "-q", q], "");
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stdout).contains("requeued 1 jobs"));
    assert!(text(&o.stderr).contains("not in the dead-letter queue: zz"));
    let s = ctx.snapshot().await;
    assert_eq!(s.ready[1], ["a"]);
    assert!(s.jobs["a"].starts_with(r#"{"attempt":0,"#));

    let o = weir(&ctx, &["dlq", "requeue", "-q", q], "");
    assert_ne!(o.status.code(), Some(0), "requeue needs ids or --all");
    no_panic(&o);
    let o = weir(&ctx, &["dlq", "requeue", "--all", "-q", q], "");
    assert!(text(&o.stdout).contains("requeued 2 jobs"), "{}", text(&o.stdout));
    assert_eq!(ctx.stats().await.ready[1], 3);

    bury(&ctx, &["d", "e"]).await;
    let o = weir(&ctx, &["dlq", "purge", "-q", q], "");
    assert!(text(&o.stdout).contains("purged 2 jobs"), "{}", text(&o.stdout));
    let s = ctx.stats().await;
    assert_eq!((s.dead, s.ready[1]), (0, 3));
}

#[tokio::test]
async fn pause_and_resume() {
    let ctx = Ctx::new("cli-pause").await;
    let q = ctx.queue.as_str();
    assert!(text(&weir(&ctx, &["pause", "-q", q], "").stdout).contains(&format!("queue {q} paused")));
    assert!(ctx.stats().await.paused);
    assert!(text(&weir(&ctx, &["pause", "-q", q], "").stdout).contains("already paused"));
    assert!(text(&weir(&ctx, &["resume", "-q", q], "").stdout).contains(&format!("queue {q} resumed")));
    assert!(!ctx.stats().await.paused);
}

#[tokio::test]
async fn bad_duration_is_one_clear_line() {
    let ctx = Ctx::new("cli-dur").await;
    let o = weir(
        &ctx,
        &["work", "--visibility-timeout", "5x", "-q", &ctx.queue],
        "",
    );
    no_panic(&o);
    assert_ne!(o.status.code(), Some(0));
    let err = text(&o.stderr);
    let first = err.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("error:") && first.contains("invalid duration"),
        "{err}"
    );
    assert!(first.contains("500ms, 2s or 5m"), "says how to write it: {err}");
}

#[tokio::test]
async fn unreachable_redis_is_one_line() {
    let ctx = Ctx::new("cli-down").await;
    let url = "redis://127.0.0.1:1";
    for args in [
        vec!["stats", "--redis-url", url],
        vec!["enqueue", "--redis-url", url, "--kind", "k"],
        vec!["work", "--redis-url", url],
        vec!["dlq", "list", "--redis-url", url],
        vec!["pause", "--redis-url", url],
    ] {
        let o = weir(&ctx, &args, "1\n");
        no_panic(&o);
        assert_ne!(o.status.code(), Some(0), "{args:?}");
        let err = text(&o.stderr);
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{args:?}: one line, got {err:?}");
        assert!(
            lines[0].contains("cannot reach Redis at redis://127.0.0.1:1"),
            "{args:?}: {err}"
        );
    }
}

#[tokio::test]
async fn passwords_never_show_in_errors() {
    let ctx = Ctx::new("cli-pw").await;
    let o = weir(
        &ctx,
        &["stats", "--redis-url", "redis://:hunter2@127.0.0.1:1"],
        "",
    );
    let err = text(&o.stderr);
    assert!(
        err.contains("cannot reach Redis at redis://:***@127.0.0.1:1"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");
}

/// SIGTERM: running jobs finish and are acked, buffered ones go back to ready, exit 0.
#[tokio::test]
async fn work_shuts_down_gracefully_on_sigterm() {
    let ctx = Ctx::new("cli-term").await;
    ctx.producer()
        .enqueue_bulk((0..40).map(|i| weir::NewJob::new("k", &i).unwrap()))
        .await
        .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args([
            "work",
            "-q",
            &ctx.queue,
            "--handler",
            "sleep:300ms",
            "--concurrency",
            "2",
        ])
        .env("REDIS_URL", &ctx.url)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until("jobs leased", std::time::Duration::from_secs(15), || async {
        ctx.stats().await.in_flight > 2
    })
    .await;
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let o = child.wait_with_output().unwrap();
    no_panic(&o);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let s = ctx.stats().await;
    assert_eq!(s.in_flight, 0, "nothing left leased");
    let acked = s.counters.get("acked").copied().unwrap_or(0);
    assert_eq!(acked + s.ready_total(), 40, "none lost");
    assert!(out.contains(&format!("{acked} acked")), "{out}");
    assert!(
        !out.contains(" 0 released"),
        "buffered jobs were handed back: {out}"
    );
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

#[tokio::test]
async fn bad_arguments_are_one_clear_line() {
    let ctx = Ctx::new("cli-args").await;
    let cases: [(&[&str], &str); 4] = [
        (&["stats", "-q", "bad name"], "invalid queue name"),
        (
            &["work", "--concurrency", "0"],
            "concurrency must be between 1 and 100000",
        ),
        (&["work", "--batch", "20000"], "batch must be between 1 and 10000"),
        (
            &["work", "--visibility-timeout", "10ms"],
            "visibility timeout must be at least 100ms",
        ),
    ];
    for (args, want) in cases {
        let o = weir(&ctx, args, "");
        no_panic(&o);
        assert_ne!(o.status.code(), Some(0), "{args:?}");
        let err = text(&o.stderr);
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{args:?}: {err:?}");
        assert!(
            lines[0].starts_with("error: ") && lines[0].contains(want),
            "{args:?}: {err}"
        );
    }
}
