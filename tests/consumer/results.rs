//! A completed job kept keeps its handler's result, and a run's history tells its lease's
//! start and the runs whose consumer stopped: through running consumers, with retries,
//! dead letters and the count that trims what is kept.

use crate::common::*;
use crate::support::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;
use weir::queue::json::JobState;
use weir::queue::settings::Settings;
use weir::{JobError, NewJob, Registry, handler_fn};

async fn keep(ctx: &Ctx, count: u64) {
    let s = Settings {
        keep_completed_count: Some(count),
        ..Settings::default()
    };
    Settings::update(&mut ctx.c(), &ctx.queue, &s).await.unwrap();
}

/// `flaky` fails its first two runs, then returns `{"n": payload, "run": attempt}`;
/// `doomed` sets a result and then fails for good; `big` returns 5,000 characters;
/// `plain` returns its payload. `kept` counts the runs that saw `keeps_result()`.
fn registry(kept: Arc<AtomicUsize>) -> Registry {
    let result = |job: &weir::Job, v: serde_json::Value| {
        job.set_result(&v).map_err(|e| JobError::fatal(e.to_string()))
    };
    Registry::new()
        .on(
            "flaky",
            handler_fn(move |job| async move {
                if job.attempt < 2 {
                    job.set_result(&"not kept: this run fails").unwrap();
                    return Err(JobError::retry(format!("down #{}", job.attempt)));
                }
                let n: u64 = job.payload().unwrap();
                result(&job, serde_json::json!({ "n": n, "run": job.attempt }))
            }),
        )
        .on(
            "doomed",
            handler_fn(|job| async move {
                job.set_result(&"never kept").unwrap();
                Err(JobError::fatal("bad input"))
            }),
        )
        .on(
            "big",
            handler_fn(|job| async move {
                job.set_result_text(format!("\"{}\"", "é".repeat(2500)));
                Ok(())
            }),
        )
        .on(
            "plain",
            handler_fn(move |job| {
                let kept = kept.clone();
                async move {
                    if job.keeps_result() {
                        kept.fetch_add(1, Ordering::SeqCst);
                    }
                    job.set_result_text(job.payload_json().to_owned());
                    Ok(())
                }
            }),
        )
}

/// Results with retries, dead letters, bulk loads and the count kept, together: the job
/// that failed twice keeps its third run's result (not the failed runs' ones); the dead
/// one keeps its last error and no result; a result over 4096 bytes is cut at a
/// character's start; inline jobs of a bulk load keep theirs; once more jobs complete
/// than the count kept, the oldest go with their results. `weir job show`'s detail and
/// `weir jobs --state done`'s page carry them.
#[tokio::test]
async fn a_kept_job_keeps_its_handlers_result() {
    let ctx = Ctx::new("res-keep").await;
    keep(&ctx, 5).await;
    let p = ctx.producer();
    let flaky = NewJob::new("flaky", &7).unwrap().id("f").max_attempts(5);
    p.enqueue(flaky.retry("fixed:10ms,attempts=5".parse().unwrap()))
        .await
        .unwrap();
    p.enqueue(NewJob::new("doomed", &1).unwrap().id("d"))
        .await
        .unwrap();
    p.enqueue(NewJob::new("big", &1).unwrap().id("b")).await.unwrap();
    let c = start(&ctx, config(&ctx), registry(Arc::default()));
    wait_stats(&ctx, "two done, one dead", |s| s.done == 2 && s.dead == 1).await;

    let f = ctx.admin().job("f").await.unwrap().expect("kept");
    assert_eq!(f.job.state, JobState::Done);
    assert_eq!(f.job.result.as_deref(), Some(r#"{"n":7,"run":2}"#));
    let outcomes: Vec<&str> = f.history.iter().map(|r| r.outcome.as_str()).collect();
    assert_eq!(outcomes, ["retry", "retry", "done"]);
    let d = ctx.admin().job("d").await.unwrap().expect("dead jobs stay");
    assert_eq!(d.job.state, JobState::Dead);
    assert_eq!(d.job.last_error.as_deref(), Some("bad input"));
    assert_eq!(d.job.result, None, "a failed run keeps no result");
    let b = ctx.admin().job("b").await.unwrap().unwrap();
    let big = b.job.result.expect("a result");
    assert_eq!(big.len(), 4095, "cut at 4096 bytes, on a character's start");
    assert!(big.starts_with("\"é"));

    // six more (a bulk load: inline jobs) with a count of 5: the oldest go
    let plain: Vec<NewJob> = (0..6).map(|i| NewJob::new("plain", &i).unwrap()).collect();
    p.enqueue_bulk(plain).await.unwrap();
    wait_stats(&ctx, "8 acked", |s| s.counters.get("acked") == Some(&8)).await;
    wait_stats(&ctx, "5 kept", |s| s.done == 5).await;
    c.stop().await;
    let page = ctx.admin().jobs(JobState::Done, None, 10, None).await.unwrap();
    assert_eq!(page.jobs.len(), 5);
    for j in &page.jobs {
        let env = ctx.admin().job(&j.id).await.unwrap().unwrap().envelope.unwrap();
        let payload = serde_json::from_str::<serde_json::Value>(env.get()).unwrap()["payload"].to_string();
        assert_eq!(j.result.as_ref(), Some(&payload), "{}: its own result", j.id);
        assert_eq!(j.kind.as_deref(), Some("plain"), "the newest five: the bulk's");
    }
    let s = ctx.snapshot().await;
    assert_eq!(s.results.len(), 5, "results go with their jobs: {:?}", s.results);
    assert!(s.results.keys().all(|id| s.done.iter().any(|(d, _)| d == id)));
    assert!(!s.results.contains_key("f") && !s.results.contains_key("b"));
}

/// While the queue keeps no completed jobs, a handler sees `keeps_result()` false, its
/// result goes nowhere (no results key), and the job goes as before.
#[tokio::test]
async fn without_keeping_a_result_goes_nowhere() {
    let ctx = Ctx::new("res-off").await;
    let kept = Arc::new(AtomicUsize::new(0));
    ctx.producer()
        .enqueue_bulk((0..20).map(|i| NewJob::new("plain", &i).unwrap()))
        .await
        .unwrap();
    ctx.producer()
        .enqueue(NewJob::new("plain", &99).unwrap().id("p"))
        .await
        .unwrap();
    let c = start(&ctx, config(&ctx), registry(kept.clone()));
    wait_stats(&ctx, "21 acked", |s| s.counters.get("acked") == Some(&21)).await;
    c.stop().await;
    assert_eq!(
        kept.load(Ordering::SeqCst),
        0,
        "no handler was told its result is kept"
    );
    let s = ctx.snapshot().await;
    assert!(
        s.results.is_empty() && s.jobs.is_empty() && s.done.is_empty(),
        "{s:?}"
    );
}

/// A run's start is its lease's start (its fetch), not its handler's: two jobs fetched
/// together by a consumer running one at a time share it, though the second's handler
/// began after the first's 300 ms.
#[tokio::test]
async fn a_runs_start_is_its_lease_start() {
    let ctx = Ctx::new("res-start").await;
    keep(&ctx, 10).await;
    ctx.producer()
        .enqueue_bulk((0..2).map(|i| NewJob::new("slow", &i).unwrap().id(format!("s{i}"))))
        .await
        .unwrap();
    let mut cfg = config(&ctx);
    cfg.concurrency = 1;
    cfg.fetcher.prefetch = 4;
    let slow = handler_fn(|_| async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        Ok(())
    });
    let c = start(&ctx, cfg, Registry::new().on("slow", slow));
    wait_stats(&ctx, "both done", |s| s.done == 2).await;
    c.stop().await;
    let ((s0, e0), (s1, e1)) = (only_run(&ctx, "s0").await, only_run(&ctx, "s1").await);
    assert_eq!(s0, s1, "one fetch leased both");
    let (first, second) = if e0 < e1 { (e0, e1) } else { (e1, e0) };
    assert!(first - s0 >= 300 && second - s0 >= 600, "{s0} {e0} {e1}");
}

/// The (start, end) of job `id`'s one run.
async fn only_run(ctx: &Ctx, id: &str) -> (u64, u64) {
    let h = ctx.admin().job(id).await.unwrap().unwrap().history;
    assert_eq!(h.len(), 1, "{h:?}");
    (h[0].start.as_ms(), h[0].end.as_ms())
}

/// A consumer that stops during a run (its task aborted): once the lease expires, the
/// reclaimer of another consumer brings the job back, and the job's history records that
/// run as `expired`, by the consumer that ran it, from its lease's start to its deadline
/// (the lease of 500 ms, extended meanwhile); the second consumer then completes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_consumer_stopped_is_in_the_history() {
    let ctx = Ctx::new("res-crash").await;
    keep(&ctx, 10).await;
    ctx.producer()
        .enqueue(NewJob::new("k", &1).unwrap().id("c"))
        .await
        .unwrap();
    let started = Arc::new(AtomicBool::new(false));
    let s = started.clone();
    let stuck = handler_fn(move |_| {
        s.store(true, Ordering::SeqCst);
        std::future::pending::<weir::JobResult>()
    });
    let mut cfg = config(&ctx);
    cfg.lease = Duration::from_millis(500);
    let doomed = start(&ctx, cfg.clone(), Registry::new().on("k", stuck));
    wait_until("the run to start and its start mark to land", SOON, || async {
        started.load(Ordering::SeqCst) && !ctx.snapshot().await.started.is_empty()
    })
    .await;
    let first = ctx.admin().workers().await.unwrap().workers[0].id.clone();
    doomed.task.abort();
    assert!(doomed.task.await.unwrap_err().is_cancelled());

    let ok = handler_fn(|job| async move {
        job.set_result(&"second run").unwrap();
        Ok(())
    });
    let c = start(&ctx, cfg, Registry::new().on("k", ok));
    wait_stats(&ctx, "done", |s| s.done == 1).await;
    c.stop().await;
    let d = ctx.admin().job("c").await.unwrap().unwrap();
    let runs: Vec<(&str, &str)> = d
        .history
        .iter()
        .map(|r| (r.outcome.as_str(), r.worker.as_str()))
        .collect();
    assert_eq!(runs[0], ("expired", first.as_str()), "{:?}", d.history);
    assert_eq!(runs[1].0, "done");
    assert_ne!(runs[1].1, first);
    let lost = &d.history[0];
    assert!(lost.end.as_ms() - lost.start.as_ms() >= 500, "{lost:?}");
    assert!(lost.start.as_ms() <= d.history[1].start.as_ms());
    assert_eq!(d.job.result.as_deref(), Some("\"second run\""));
}
