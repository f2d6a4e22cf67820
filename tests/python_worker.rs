//! The native Python worker (clients/python, `weir.Worker`) against a real redis-server:
//! async and sync handlers ack, retry on an exception, retry after `weir.Retry(after=)`,
//! defer without charging on `weir.Backpressure`, dead-letter on `weir.Fatal`; several
//! queues; a worker killed with SIGKILL loses nothing (its jobs come back by lease); SIGTERM
//! finishes the running jobs and loses none; plain functions run side by side on threads;
//! async jobs the loop holds beyond its concurrency (`run_ahead`) never run beyond it, a
//! killed worker leaves the ones it held without a start mark, and a shutdown past its
//! timeout returns and releases them.
//! The driver is tests/clients/python_worker.py; scripts/ensure-clients.sh builds and
//! installs the package.

mod common;
use common::clients::{ensure_clients, root};

use common::*;
use serde_json::json;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use weir::NewJob;

/// One worker process.
struct Worker {
    child: Child,
}

/// Starts the driver with `settings` (Worker keyword arguments, plus url and queues).
fn start(ctx: &Ctx, log: &Path, mut settings: serde_json::Value) -> Worker {
    ensure_clients();
    settings["url"] = json!(ctx.url);
    settings["log"] = json!(log);
    let child = Command::new(root().join("target/clients/venv/bin/python"))
        .arg(root().join("tests/clients/python_worker.py"))
        .arg(settings.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python starts");
    Worker { child }
}

impl Worker {
    /// Waits for the process to exit (up to a minute); its report, per queue: (acked,
    /// retried, deferred, dead).
    fn report(self) -> HashMap<String, (u64, u64, u64, u64)> {
        let mut child = self.child;
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while child.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > deadline {
                child.kill().ok();
                panic!("the worker did not exit within 60 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let o = child.wait_with_output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "worker failed ({}): {out}\n{}",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        );
        let last = out.lines().last().expect("a report");
        let rows: Vec<(String, u64, u64, u64, u64)> = serde_json::from_str(last).unwrap();
        rows.into_iter()
            .map(|(q, a, r, d, x)| (q, (a, r, d, x)))
            .collect()
    }
}

/// A run's start in the log: (id, kind, attempt, unix time).
type Start = (String, String, u32, f64);

/// The log's runs: (id, kind, attempt, unix time) per start, and the ids that ended.
fn runs(log: &Path) -> (Vec<Start>, Vec<String>) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let (mut starts, mut ends) = (vec![], vec![]);
    for l in text.lines() {
        let f: Vec<&str> = l.split(' ').collect();
        match f[..] {
            ["start", id, kind, attempt, t] => starts.push((
                id.into(),
                kind.into(),
                attempt.parse().unwrap(),
                t.parse().unwrap(),
            )),
            ["end", id] => ends.push(id.into()),
            ["loop", _, _] => {}
            _ => panic!("bad log line: {l}"),
        }
    }
    (starts, ends)
}

/// The log's async runs: (id, the class of the loop each ran on).
fn loops(log: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter_map(|l| match l.split(' ').collect::<Vec<_>>()[..] {
            ["loop", id, class] => Some((id.to_string(), class.to_string())),
            _ => None,
        })
        .collect()
}

fn log_file(dir: &tempfile::TempDir, name: &str) -> PathBuf {
    dir.path().join(name)
}

async fn enqueue(ctx: &Ctx, queue: &str, kind: &str, payload: serde_json::Value, max: u32) -> String {
    let p = weir::Producer::new(ctx.c(), queue).unwrap();
    p.enqueue(NewJob::new(kind, &payload).unwrap().max_attempts(max))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn outcomes_of_async_and_sync_handlers() {
    let ctx = Ctx::new("py-outcomes").await;
    let dir = tempfile::tempdir().unwrap();
    let mut ids: HashMap<(String, &str), String> = HashMap::new();
    for kind in ["async", "sync"] {
        for (what, payload) in [
            ("ok", json!({"do": "ok"})),
            ("raise", json!({"do": "raise"})),
            ("retry_after", json!({"do": "retry_after", "s": 0.3})),
            ("backpressure", json!({"do": "backpressure", "s": 0.1})),
            ("fatal", json!({"do": "fatal"})),
        ] {
            let id = enqueue(&ctx, &ctx.queue, kind, payload, 3).await;
            ids.insert((kind.to_string(), what), id);
        }
    }
    let log = log_file(&dir, "outcomes.log");
    let w = start(
        &ctx,
        &log,
        json!({"queues": [ctx.queue], "drain": true, "concurrency": 8}),
    );
    let report = w.report();
    // Per kind: 4 acked (ok, raise, retry_after, backpressure), 2 retried (raise,
    // retry_after), 1 deferred (backpressure), 1 dead (fatal).
    assert_eq!(report[&ctx.queue], (8, 4, 2, 2), "acked, retried, deferred, dead");
    let (starts, ends) = runs(&log);
    let attempts =
        |id: &str| -> Vec<(u32, f64)> { starts.iter().filter(|s| s.0 == id).map(|s| (s.2, s.3)).collect() };
    for kind in ["async", "sync"] {
        let id = |what| ids[&(kind.to_string(), what)].clone();
        assert_eq!(attempts(&id("ok")).len(), 1, "{kind} ok runs once");
        let raised: Vec<u32> = attempts(&id("raise")).iter().map(|a| a.0).collect();
        assert_eq!(
            raised,
            vec![0, 1],
            "{kind}: an exception charges an attempt and retries"
        );
        let later = attempts(&id("retry_after"));
        assert_eq!(
            later.iter().map(|a| a.0).collect::<Vec<_>>(),
            vec![0, 1],
            "{kind} Retry"
        );
        assert!(
            later[1].1 - later[0].1 >= 0.29,
            "{kind}: Retry(after=0.3) ran again after {:.3} s",
            later[1].1 - later[0].1
        );
        let deferred: Vec<u32> = attempts(&id("backpressure")).iter().map(|a| a.0).collect();
        assert_eq!(
            deferred,
            vec![0, 0],
            "{kind}: Backpressure defers without charging an attempt"
        );
        assert_eq!(
            attempts(&id("fatal")).len(),
            1,
            "{kind}: Fatal dead-letters at once"
        );
        for what in ["ok", "raise", "retry_after", "backpressure"] {
            assert!(ends.contains(&id(what)), "{kind} {what} finished");
        }
    }
    let stats = ctx.stats().await;
    assert_eq!((stats.pending(), stats.in_flight, stats.dead), (0, 0, 2));
    let dead = ctx.admin().dead_jobs(0, 10).await.unwrap();
    assert!(
        dead.iter().all(|d| format!("{d:?}").contains("cannot be done")),
        "{dead:?}"
    );
    assert!(ctx.snapshot().await.results.is_empty(), "no results unless kept");
}

/// On a queue that keeps completed jobs, async and plain handlers' return values are the
/// jobs' results, as JSON: a job that raised once keeps its second run's, `None` keeps
/// none, a value JSON cannot encode is kept by its `str()`, a dead job keeps none.
#[tokio::test(flavor = "multi_thread")]
async fn return_values_are_kept_as_results() {
    let ctx = Ctx::new("py-results").await;
    let dir = tempfile::tempdir().unwrap();
    let keep = weir::queue::settings::Settings {
        keep_completed_count: Some(100),
        ..Default::default()
    };
    weir::queue::settings::Settings::update(&mut ctx.c(), &ctx.queue, &keep)
        .await
        .unwrap();
    let mut ids = Vec::new();
    for kind in ["async", "sync"] {
        for what in ["ok", "raise", "none", "set", "fatal"] {
            let id = enqueue(&ctx, &ctx.queue, kind, json!({ "do": what }), 3).await;
            ids.push((kind, what, id));
        }
    }
    let log = log_file(&dir, "results.log");
    let w = start(&ctx, &log, json!({"queues": [ctx.queue], "drain": true}));
    assert_eq!(
        w.report()[&ctx.queue],
        (8, 2, 0, 2),
        "acked, retried, deferred, dead"
    );
    for (kind, what, id) in ids {
        let d = ctx.admin().job(&id).await.unwrap().unwrap();
        let want = match what {
            "ok" => Some(json!({"id": id, "attempt": 0}).to_string()),
            "raise" => Some(json!({"id": id, "attempt": 1}).to_string()),
            "set" => Some("\"{1, 2}\"".to_string()),
            _ => None,
        };
        let got = d
            .job
            .result
            .map(|r| serde_json::from_str::<serde_json::Value>(&r).unwrap().to_string());
        assert_eq!(got, want, "{kind} {what}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn several_queues_are_drained() {
    let ctx = Ctx::new("py-multi").await;
    let (other, _) = ctx.other_queue("py-multi-b");
    let dir = tempfile::tempdir().unwrap();
    for i in 0..50 {
        let kind = if i % 2 == 0 { "async" } else { "sync" };
        enqueue(&ctx, &ctx.queue, kind, json!({"do": "ok"}), 3).await;
        enqueue(&ctx, &other, kind, json!({"do": "ok"}), 3).await;
    }
    let log = log_file(&dir, "multi.log");
    let queues = json!([[ctx.queue, 3], [other, 1]]);
    let report = start(&ctx, &log, json!({"queues": queues, "drain": true})).report();
    assert_eq!(report[&ctx.queue], (50, 0, 0, 0));
    assert_eq!(report[&other], (50, 0, 0, 0));
    let (starts, ends) = runs(&log);
    assert_eq!((starts.len(), ends.len()), (100, 100));
}

#[tokio::test(flavor = "multi_thread")]
async fn plain_functions_run_side_by_side() {
    // Eight plain functions that each wait until all eight wait: they pass only if eight
    // threads run them at once, none queued behind another that holds the GIL.
    let ctx = Ctx::new("py-threads").await;
    let dir = tempfile::tempdir().unwrap();
    for _ in 0..8 {
        enqueue(&ctx, &ctx.queue, "sync", json!({"do": "barrier", "n": 8}), 1).await;
    }
    let log = log_file(&dir, "threads.log");
    let settings = json!({"queues": [ctx.queue], "drain": true, "concurrency": 8});
    let report = start(&ctx, &log, settings).report();
    assert_eq!(report[&ctx.queue], (8, 0, 0, 0), "acked, retried, deferred, dead");
    assert_eq!(runs(&log).1.len(), 8, "every run ended");
}

#[tokio::test(flavor = "multi_thread")]
async fn async_handlers_run_on_the_loop_factory_loop() {
    // `loop_factory` makes the loop: every async run sees the driver's RecordingLoop as
    // its running loop (the default would be asyncio's own), sleeps included, and the
    // outcomes are the same as on asyncio's loop.
    let ctx = Ctx::new("py-loop").await;
    let dir = tempfile::tempdir().unwrap();
    let mut ids = vec![];
    for i in 0..20 {
        let payload = match i % 3 {
            0 => json!({"do": "sleep", "s": 0.01}),
            1 => json!({"do": "raise"}),
            _ => json!({"do": "ok"}),
        };
        ids.push(enqueue(&ctx, &ctx.queue, "async", payload, 3).await);
    }
    let log = log_file(&dir, "loop.log");
    let settings = json!({"queues": [ctx.queue], "drain": true, "concurrency": 8, "loop": "recording"});
    let report = start(&ctx, &log, settings).report();
    // 7 of the 20 (i = 1, 4, ..., 19) raise once, then succeed.
    assert_eq!(
        report[&ctx.queue],
        (20, 7, 0, 0),
        "acked, retried, deferred, dead"
    );
    let loops = loops(&log);
    assert_eq!(loops.len(), 27, "every run, retries included, logged its loop");
    for (id, class) in &loops {
        assert_eq!(class, "RecordingLoop", "job {id} ran on another loop");
    }
    let mut seen: Vec<&String> = loops.iter().map(|(id, _)| id).collect();
    seen.sort();
    seen.dedup();
    ids.sort();
    assert_eq!(seen, ids.iter().collect::<Vec<_>>(), "every job ran");
}

/// Sleeping jobs of both kinds, `n` of them.
async fn sleepers(ctx: &Ctx, n: usize, s: f64) -> Vec<String> {
    let mut ids = vec![];
    for i in 0..n {
        let kind = if i % 2 == 0 { "async" } else { "sync" };
        ids.push(enqueue(ctx, &ctx.queue, kind, json!({"do": "sleep", "s": s}), 5).await);
    }
    ids
}

async fn started(log: &Path, n: usize) {
    wait_until(&format!("{n} jobs started"), Duration::from_secs(30), || async {
        runs(log).0.len() >= n
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sigkill_loses_nothing() {
    let ctx = Ctx::new("py-kill").await;
    let dir = tempfile::tempdir().unwrap();
    let ids = sleepers(&ctx, 20, 0.5).await;
    let first = log_file(&dir, "killed.log");
    let settings = json!({"queues": [ctx.queue], "concurrency": 4, "visibility_timeout": 1.0});
    let mut w = start(&ctx, &first, settings);
    started(&first, 4).await;
    w.child.kill().unwrap(); // SIGKILL
    w.child.wait().unwrap();
    let second = log_file(&dir, "after.log");
    let settings = json!({"queues": [ctx.queue], "concurrency": 4, "visibility_timeout": 1.0, "drain": true});
    let report = start(&ctx, &second, settings).report();
    let (_, mut ended) = runs(&first);
    ended.extend(runs(&second).1);
    for id in &ids {
        assert!(ended.contains(id), "job {id} never finished");
    }
    assert_eq!(report[&ctx.queue].3, 0, "none dead");
    let stats = ctx.stats().await;
    assert_eq!((stats.pending(), stats.in_flight, stats.dead), (0, 0, 0));
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_finishes_running_jobs() {
    let ctx = Ctx::new("py-term").await;
    let dir = tempfile::tempdir().unwrap();
    let ids = sleepers(&ctx, 30, 1.0).await;
    let log = log_file(&dir, "term.log");
    let w = start(&ctx, &log, json!({"queues": [ctx.queue], "concurrency": 6}));
    started(&log, 6).await;
    common::signal(w.child.id(), rustix::process::Signal::TERM).unwrap();
    let report = w.report();
    let (starts, ends) = runs(&log);
    let ran: Vec<&String> = starts.iter().map(|s| &s.0).collect();
    for id in &ran {
        assert!(
            ends.contains(id),
            "job {id} started and was not finished at SIGTERM"
        );
    }
    assert_eq!(
        report[&ctx.queue].0,
        ends.len() as u64,
        "every finished job acked"
    );
    let stats = ctx.stats().await;
    assert_eq!(stats.in_flight, 0, "no lease left behind");
    assert_eq!(stats.pending() as usize + ends.len(), ids.len(), "none lost");
}

/// The most runs at once in the log (its start and end lines, in order).
fn most_at_once(log: &Path) -> usize {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let (mut now, mut most) = (0usize, 0usize);
    for l in text.lines() {
        match l.split(' ').next() {
            Some("start") => {
                now += 1;
                most = most.max(now);
            }
            Some("end") => now -= 1,
            _ => {}
        }
    }
    most
}

#[tokio::test(flavor = "multi_thread")]
async fn held_jobs_never_run_beyond_the_concurrency() {
    let ctx = Ctx::new("py-held").await;
    let dir = tempfile::tempdir().unwrap();
    let mut ids = vec![];
    for _ in 0..40 {
        ids.push(enqueue(&ctx, &ctx.queue, "async", json!({"do": "sleep", "s": 0.05}), 5).await);
    }
    let log = log_file(&dir, "held.log");
    let settings = json!({"queues": [ctx.queue], "concurrency": 2, "run_ahead": 4, "drain": true});
    let w = start(&ctx, &log, settings);
    // The engine hands the loop jobs beyond its 2 slots: more than 2 leased at once.
    wait_until(
        "jobs held beyond the concurrency",
        Duration::from_secs(30),
        || async { ctx.stats().await.in_flight > 2 },
    )
    .await;
    let report = w.report();
    assert_eq!(report[&ctx.queue], (40, 0, 0, 0), "every job acked once");
    assert_eq!(most_at_once(&log), 2, "never more than the concurrency at once");
    let (starts, _) = runs(&log);
    assert_eq!(starts.len(), 40, "each job ran once");
}

/// The start marks in Redis (a mark names the job's item: an inline job's envelope).
async fn marks(ctx: &Ctx) -> Vec<String> {
    ctx.cmd(&["HKEYS", ctx.keys.started()]).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_worker_marks_only_the_job_it_ran_not_those_it_held() {
    let ctx = Ctx::new("py-held-kill").await;
    let dir = tempfile::tempdir().unwrap();
    let mut ids = vec![];
    for _ in 0..4 {
        ids.push(enqueue(&ctx, &ctx.queue, "async", json!({"do": "sleep", "s": 60}), 5).await);
    }
    let first = log_file(&dir, "killed.log");
    let settings =
        json!({"queues": [ctx.queue], "concurrency": 1, "run_ahead": 3, "visibility_timeout": 1.0});
    let mut w = start(&ctx, &first, settings);
    started(&first, 1).await;
    let running = runs(&first).0[0].0.clone();
    let only_running = |m: &[String]| m.len() == 1 && m[0].contains(&running);
    // One runs, its start marked; the other three are leased and held, unmarked.
    wait_until("one run marked, three held", Duration::from_secs(30), || async {
        only_running(&marks(&ctx).await) && ctx.stats().await.in_flight == 4
    })
    .await;
    w.child.kill().unwrap(); // SIGKILL
    w.child.wait().unwrap();
    assert_eq!(runs(&first).0.len(), 1, "the held jobs never started");
    assert!(
        only_running(&marks(&ctx).await),
        "no held job marked: {:?}",
        marks(&ctx).await
    );
    // The marked job comes back as a suspect, the held ones to ready: all run, uncharged.
    let second = log_file(&dir, "after.log");
    let settings = json!({"queues": [ctx.queue], "concurrency": 4, "visibility_timeout": 1.0,
                          "drain": true, "sleep_scale": 0});
    let report = start(&ctx, &second, settings).report();
    assert_eq!(report[&ctx.queue], (4, 0, 0, 0), "all four acked");
    let mut ran: Vec<(String, u32)> = runs(&second).0.into_iter().map(|s| (s.0, s.2)).collect();
    ran.sort();
    let mut want: Vec<(String, u32)> = ids.iter().map(|id| (id.clone(), 0)).collect();
    want.sort();
    assert_eq!(ran, want, "each ran once more, uncharged");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_shutdown_past_its_timeout_returns_and_releases_the_held_jobs() {
    let ctx = Ctx::new("py-held-term").await;
    let dir = tempfile::tempdir().unwrap();
    for _ in 0..3 {
        // Longer than `report` waits: a worker that waited for this run would fail it.
        enqueue(&ctx, &ctx.queue, "async", json!({"do": "sleep", "s": 120}), 5).await;
    }
    let log = log_file(&dir, "term.log");
    let settings = json!({"queues": [ctx.queue], "concurrency": 1, "run_ahead": 2, "shutdown_timeout": 1.0});
    let w = start(&ctx, &log, settings);
    started(&log, 1).await;
    wait_until("two held", Duration::from_secs(30), || async {
        ctx.stats().await.in_flight == 3
    })
    .await;
    common::signal(w.child.id(), rustix::process::Signal::TERM).unwrap();
    let report = w.report();
    assert_eq!(report[&ctx.queue].0, 0, "nothing finished");
    assert_eq!(runs(&log).0.len(), 1, "the held jobs never started");
    // The held jobs go back to ready at once; the run given up keeps its lease until it
    // expires (it may still be running).
    assert!(ctx.stats().await.pending() >= 2, "{:?}", ctx.stats().await);
}

/// `run_ahead` where the loop cannot hold jobs is refused at once, with the reason.
#[test]
fn run_ahead_is_refused_where_the_loop_cannot_hold_jobs() {
    ensure_clients();
    let check = r#"
import weir
for kw in ({"adaptive": True}, {"queue": ["a", "b"]}, {"job_timeout": 5}):
    try:
        weir.Worker("redis://127.0.0.1:1", run_ahead=2, **kw)
        print("accepted", sorted(kw))
    except ValueError as e:
        print("refused:", e)
weir.Worker("redis://127.0.0.1:1", run_ahead=2)
print("accepted one fixed queue")
"#;
    let o = Command::new(root().join("target/clients/venv/bin/python"))
        .args(["-c", check])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}{}", String::from_utf8_lossy(&o.stderr));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert!(
        lines[0].contains("needs a fixed concurrency on one queue"),
        "{out}"
    );
    assert!(
        lines[1].contains("needs a fixed concurrency on one queue"),
        "{out}"
    );
    assert!(lines[2].contains("cannot go with job_timeout"), "{out}");
    assert_eq!(lines[3], "accepted one fixed queue");
}
