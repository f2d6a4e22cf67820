//! `weir work --handler exec:CMD` against a real redis-server and the real `weir` binary,
//! with the exec protocol's workers: clients/python/weir_exec.py and clients/node's
//! `Worker` (tests/exec/worker.{py,js} behave alike): every outcome (ok, retry, raise,
//! defer, fatal), a `kill -9` of the worker process (nothing lost), graceful shutdown
//! (running jobs finish, the rest stay ready), several queues, and the handlers' return
//! values kept as the results of completed jobs.

mod common;
use common::clients::{ensure_clients, root};

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use weir::NewJob;
use weir::queue::json::JobState;

/// The worker command for `lang` ("py" or "js").
fn worker(lang: &str) -> String {
    let script = root().join("tests/exec").join(format!("worker.{lang}"));
    match lang {
        "py" => format!("exec python3 {}", script.display()),
        _ => {
            ensure_clients();
            format!("exec node {}", script.display())
        }
    }
}

fn weir_cmd(ctx: &Ctx, dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_weir"));
    c.args(args)
        .env("REDIS_URL", &ctx.url)
        .env("WEIR_TEST_DIR", dir)
        .env_remove("WEIR_LOG");
    c
}

fn files(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .map(|e| e.path())
        .collect()
}

/// `n` jobs of `kind` with `max` attempts; with `None`, the default attempts, in compact
/// envelopes (the consumer hands them to the worker as it does full ones).
async fn enqueue(ctx: &Ctx, queue: &str, kind: &str, n: usize, payload: serde_json::Value, max: Option<u32>) {
    let p = weir::Producer::new(ctx.c(), queue)
        .unwrap()
        .compact_envelopes(max.is_none());
    let jobs = (0..n).map(|_| {
        let job = NewJob::new(kind, &payload).unwrap();
        match max {
            Some(m) => job.max_attempts(m),
            None => job,
        }
    });
    p.enqueue_bulk(jobs).await.unwrap();
}

/// How many of the queue's stored envelopes are compact.
async fn compact_stored(ctx: &Ctx) -> usize {
    let s = ctx.snapshot().await.by_id();
    s.jobs.values().filter(|e| e.starts_with(r#"{"id":"#)).count()
}

/// The summary's counts: acked, retried, deferred, dead-lettered.
fn counts(out: &str) -> [u64; 4] {
    let line = out
        .lines()
        .find(|l| l.starts_with("processed"))
        .unwrap_or_else(|| panic!("no summary: {out}"));
    let n = |what: &str| -> u64 {
        let before = line.split(what).next().unwrap();
        before
            .trim_end()
            .rsplit([' ', ':', ','])
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    [n(" acked"), n(" retried"), n(" deferred"), n(" dead-lettered")]
}

async fn every_outcome(lang: &str) {
    let ctx = Ctx::new(&format!("exec-outcomes-{lang}")).await;
    let dir = tempfile::tempdir().unwrap();
    let q = ctx.queue.clone();
    // Compact envelopes for the jobs of the default attempts, full ones for the rest.
    enqueue(&ctx, &q, "t", 200, serde_json::json!({"mode": "ok"}), None).await;
    for mode in ["retry_once", "raise_once", "defer_once"] {
        enqueue(&ctx, &q, "t", 10, serde_json::json!({ "mode": mode }), None).await;
    }
    enqueue(&ctx, &q, "t", 5, serde_json::json!({"mode": "fatal"}), Some(3)).await;
    enqueue(&ctx, &q, "sync", 20, serde_json::json!({"mode": "ok"}), Some(3)).await;
    assert_eq!(compact_stored(&ctx).await, 230);
    let cmd = format!("exec:{}", worker(lang));
    let o = weir_cmd(
        &ctx,
        dir.path(),
        &[
            "work",
            "-q",
            &q,
            "--handler",
            &cmd,
            "--drain",
            "--no-metrics",
            "--exec-procs",
            "2",
            "--exec-batch",
            "7",
        ],
    )
    .output()
    .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", String::from_utf8_lossy(&o.stderr));
    // ok 220 + retried 20 then ok + deferred 10 then ok; fatal 5 dead-lettered at once.
    assert_eq!(counts(&out), [250, 20, 10, 5], "{out}");
    assert_eq!(files(dir.path(), "done-").len(), 250);
    let dead = ctx.admin().dead_jobs(0, 10).await.unwrap();
    assert_eq!(dead.len(), 5);
    for d in dead {
        assert!(d.reason.as_deref().unwrap_or("").contains("bad row"), "{d:?}");
    }
}

/// A queue that keeps its 8 newest completed jobs: the workers' return values are their
/// results, a job retried once keeps its second run's, the dead ones keep their reasons
/// and no result, and of the 13 completed the 8 kept have theirs.
async fn results(lang: &str) {
    let ctx = Ctx::new(&format!("exec-results-{lang}")).await;
    let dir = tempfile::tempdir().unwrap();
    let q = ctx.queue.clone();
    let keep = weir::queue::settings::Settings {
        keep_completed_count: Some(8),
        ..Default::default()
    };
    weir::queue::settings::Settings::update(&mut ctx.c(), &q, &keep)
        .await
        .unwrap();
    enqueue(&ctx, &q, "t", 5, serde_json::json!({"mode": "ok"}), Some(3)).await;
    enqueue(&ctx, &q, "t", 5, serde_json::json!({"mode": "retry_once"}), None).await;
    enqueue(&ctx, &q, "t", 2, serde_json::json!({"mode": "fatal"}), Some(3)).await;
    enqueue(&ctx, &q, "sync", 3, serde_json::json!({"mode": "ok"}), None).await;
    assert_eq!(compact_stored(&ctx).await, 8);
    let cmd = format!("exec:{}", worker(lang));
    let args = [
        "work",
        "-q",
        &q,
        "--handler",
        &cmd,
        "--drain",
        "--no-metrics",
        "--exec-procs",
        "2",
    ];
    let o = weir_cmd(&ctx, dir.path(), &args).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(counts(&out), [13, 5, 0, 2], "{out}");
    let page = ctx.admin().jobs(JobState::Done, None, 20, None).await.unwrap();
    assert_eq!(page.jobs.len(), 8, "the count kept");
    for j in &page.jobs {
        let got: serde_json::Value = serde_json::from_str(j.result.as_deref().expect("a result")).unwrap();
        let d = ctx.admin().job(&j.id).await.unwrap().unwrap();
        let want = match j.kind.as_deref() {
            Some("sync") => serde_json::json!(["sync", j.id]),
            _ => serde_json::json!({"id": j.id, "attempt": d.job.attempt}),
        };
        assert_eq!(got, want, "{}", j.id);
    }
    let dead = ctx.admin().jobs(JobState::Dead, None, 10, None).await.unwrap();
    assert_eq!(dead.jobs.len(), 2);
    for j in &dead.jobs {
        assert!(j.last_error.as_deref().unwrap_or("").contains("bad row"), "{j:?}");
        assert_eq!(ctx.admin().job(&j.id).await.unwrap().unwrap().job.result, None);
    }
    assert_eq!(ctx.snapshot().await.results.len(), 8);
}

#[tokio::test]
async fn python_results_are_kept() {
    results("py").await;
}

#[tokio::test]
async fn node_results_are_kept() {
    results("js").await;
}

#[tokio::test]
async fn python_every_outcome() {
    every_outcome("py").await;
}

#[tokio::test]
async fn node_every_outcome() {
    every_outcome("js").await;
}

/// `kill -9` of the worker while it holds jobs in compact envelopes: weir restarts it, and
/// every job is acked (those it held fail as retryable, charged one attempt), none lost or
/// dead.
async fn kill_9(lang: &str) {
    let ctx = Ctx::new(&format!("exec-kill-{lang}")).await;
    let dir = tempfile::tempdir().unwrap();
    let q = ctx.queue.clone();
    let n = 2000;
    enqueue(
        &ctx,
        &q,
        "t",
        n,
        serde_json::json!({"mode": "ok", "sleep_ms": 5}),
        None,
    )
    .await;
    assert_eq!(compact_stored(&ctx).await, n, "every job compact before the run");
    let cmd = format!("exec:{}", worker(lang));
    let child = weir_cmd(
        &ctx,
        dir.path(),
        &[
            "work",
            "-q",
            &q,
            "--handler",
            &cmd,
            "--drain",
            "--no-metrics",
            "-c",
            "8",
            "--exec-batch",
            "10",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let d = dir.path().to_owned();
    wait_until("the worker ran 200 jobs", Duration::from_secs(60), || {
        let d = d.clone();
        async move { files(&d, "done-").len() >= 200 }
    })
    .await;
    let pids = files(dir.path(), "pid-");
    assert_eq!(pids.len(), 1, "one worker process so far");
    let pid: u32 = pids[0].file_name().unwrap().to_string_lossy()["pid-".len()..]
        .parse()
        .unwrap();
    common::signal(pid, rustix::process::Signal::KILL).unwrap();
    let o = child.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{out}{err}");
    let [acked, retried, _, dead] = counts(&out);
    assert_eq!((acked, dead), (n as u64, 0), "{out}");
    assert!(retried > 0, "the jobs the killed worker held are retried: {out}");
    assert_eq!(files(dir.path(), "done-").len(), n, "every job ran to its end");
    assert!(err.contains("restarting"), "{err}");
    assert_eq!(files(dir.path(), "pid-").len(), 2, "restarted once");
    let s = ctx.stats().await;
    assert_eq!(
        (s.ready.iter().sum::<u64>(), s.delayed, s.dead),
        (0, 0, 0),
        "{s:?}"
    );
}

#[tokio::test]
async fn python_kill_9_loses_nothing() {
    kill_9("py").await;
}

#[tokio::test]
async fn node_kill_9_loses_nothing() {
    kill_9("js").await;
}

/// SIGTERM to weir: the jobs the worker runs finish and are acked (no attempt charged),
/// the worker sees its stdin close and exits on its own, the rest stay ready.
async fn graceful(lang: &str) {
    let ctx = Ctx::new(&format!("exec-graceful-{lang}")).await;
    let dir = tempfile::tempdir().unwrap();
    let q = ctx.queue.clone();
    let n = 40u64;
    enqueue(
        &ctx,
        &q,
        "t",
        n as usize,
        serde_json::json!({"mode": "ok", "sleep_ms": 1500}),
        Some(1),
    )
    .await;
    let cmd = format!("exec:{}", worker(lang));
    let child = weir_cmd(
        &ctx,
        dir.path(),
        &[
            "work",
            "-q",
            &q,
            "--handler",
            &cmd,
            "--no-metrics",
            "-c",
            "1",
            "--exec-batch",
            "4",
            "--batch",
            "4",
            "--pipeline",
            "1",
        ],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let d = dir.path().to_owned();
    wait_until("the worker started jobs", Duration::from_secs(30), || {
        let d = d.clone();
        async move { !files(&d, "started-").is_empty() }
    })
    .await;
    common::signal(child.id(), rustix::process::Signal::TERM).unwrap();
    let o = child.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{out}{err}");
    let started = files(dir.path(), "started-").len() as u64;
    let [acked, retried, _, dead] = counts(&out);
    assert_eq!((acked, retried, dead), (started, 0, 0), "{out}");
    assert_eq!(files(dir.path(), "done-").len() as u64, started);
    assert!(
        err.contains("worker exiting"),
        "the worker exits on its own: {err}"
    );
    let s = ctx.stats().await;
    assert_eq!(s.ready.iter().sum::<u64>() + acked, n, "{s:?}");
}

#[tokio::test]
async fn python_graceful_shutdown() {
    graceful("py").await;
}

#[tokio::test]
async fn node_graceful_shutdown() {
    graceful("js").await;
}

async fn several_queues(lang: &str) {
    let ctx = Ctx::new(&format!("exec-queues-{lang}")).await;
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (ctx.queue.clone(), ctx.other_queue("b").0);
    enqueue(&ctx, &a, "t", 300, serde_json::json!({"mode": "ok"}), Some(3)).await;
    enqueue(&ctx, &b, "sync", 100, serde_json::json!({"mode": "ok"}), Some(3)).await;
    let cmd = format!("exec:{}", worker(lang));
    let qs = format!("{a},{b}:3");
    let o = weir_cmd(
        &ctx,
        dir.path(),
        &["work", "-q", &qs, "--handler", &cmd, "--drain", "--no-metrics"],
    )
    .output()
    .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(counts(&out), [400, 0, 0, 0], "{out}");
    assert_eq!(files(dir.path(), "done-").len(), 400);
}

#[tokio::test]
async fn python_several_queues() {
    several_queues("py").await;
}

#[tokio::test]
async fn node_several_queues() {
    several_queues("js").await;
}
