//! Batch handlers: several jobs per call, one outcome per job applied.

use crate::common::*;
use crate::support::*;
use futures_util::future::BoxFuture;
use std::sync::{Arc, Mutex};
use weir::{BatchHandler, Job, JobError, JobResult, Registry};

/// Payload n: n % 3 == 0 acks, 1 fails fatally, 2 fails once then acks.
struct Mixed {
    sizes: Arc<Mutex<Vec<usize>>>,
    seen: Seen,
}

impl BatchHandler for Mixed {
    fn call(&self, jobs: Vec<Job>) -> BoxFuture<'static, Vec<JobResult>> {
        self.sizes.lock().unwrap().push(jobs.len());
        let results = jobs
            .iter()
            .map(|j| {
                self.seen.record(j);
                let n: u64 = j.payload().unwrap();
                match (n % 3, j.attempt) {
                    (0, _) => Ok(()),
                    (1, _) => Err(JobError::fatal(format!("job {n} is fatal"))),
                    (_, 0) => Err(JobError::retry("first try fails")),
                    _ => Ok(()),
                }
            })
            .collect();
        Box::pin(async move { results })
    }

    fn max_batch(&self) -> usize {
        10
    }
}

#[tokio::test]
async fn batch_handler_gets_several_jobs_and_each_outcome_is_applied() {
    let ctx = Ctx::new("batch").await;
    ctx.producer().enqueue_bulk(jobs("b", "j", 30)).await.unwrap();
    let sizes = Arc::new(Mutex::new(Vec::new()));
    let seen = Seen::default();
    let h = Mixed {
        sizes: sizes.clone(),
        seen: seen.clone(),
    };
    let c = start(&ctx, config(&ctx), Registry::new().on_batch("b", h));
    wait_stats(&ctx, "all settled", |s| s.pending() == 0 && s.dead == 10).await;
    let report = c.stop().await;
    let sizes = sizes.lock().unwrap().clone();
    assert!(sizes.iter().any(|&n| n > 1), "batches: {sizes:?}");
    assert!(sizes.iter().all(|&n| n <= 10), "max_batch respected: {sizes:?}");
    assert_eq!((report.acked, report.retried, report.dead), (20, 10, 10));
    assert_eq!(seen.attempts("j2"), [0, 1]);
    assert_eq!(seen.attempts("j1"), [0]);
    let dead = ctx.admin().dead_jobs(0, 100).await.unwrap();
    assert!(
        dead.iter()
            .any(|d| d.id == "j4" && d.reason.as_deref() == Some("job 4 is fatal"))
    );
    assert_empty(&ctx, 10).await;
}

/// A batch handler that returns too few results: the missing ones count as retryable.
struct Short;

impl BatchHandler for Short {
    fn call(&self, jobs: Vec<Job>) -> BoxFuture<'static, Vec<JobResult>> {
        let n = if jobs.iter().all(|j| j.attempt == 0) {
            jobs.len() / 2
        } else {
            jobs.len()
        };
        Box::pin(async move { vec![Ok(()); n] })
    }
}

#[tokio::test]
async fn missing_batch_results_are_retried() {
    let ctx = Ctx::new("short").await;
    ctx.producer().enqueue_bulk(jobs("b", "j", 8)).await.unwrap();
    let c = start(&ctx, config(&ctx), Registry::new().on_batch("b", Short));
    wait_stats(&ctx, "all acked", |s| s.counters.get("acked") == Some(&8)).await;
    let report = c.stop().await;
    assert!(report.retried > 0, "{report:?}");
    assert_empty(&ctx, 0).await;
}

/// A batch handler whose `max_batch` panics: user code the pool calls outside the guard
/// that catches handler panics, so it takes down the pool task itself.
struct PanicsOnSize;

impl BatchHandler for PanicsOnSize {
    fn call(&self, _jobs: Vec<Job>) -> BoxFuture<'static, Vec<JobResult>> {
        unreachable!("the pool fails before it calls the handler")
    }
    fn max_batch(&self) -> usize {
        panic!("max_batch exploded")
    }
}

/// A background task that panics stops the consumer with an error naming it, and the
/// shutdown order still runs for the other tasks: every fetched job is handed back,
/// uncharged, and a healthy consumer then runs each once.
#[tokio::test]
async fn a_panicking_task_stops_the_consumer_with_an_error_and_loses_no_job() {
    let ctx = Ctx::new("taskpanic").await;
    ctx.producer().enqueue_bulk(jobs("k", "p", 10)).await.unwrap();
    let c = start(&ctx, config(&ctx), Registry::new().on_batch("k", PanicsOnSize));
    let result = tokio::time::timeout(SOON, c.task)
        .await
        .expect("the consumer stops by itself")
        .expect("run itself does not panic");
    match result {
        Err(weir::Error::TaskFailed { task, detail }) => {
            assert_eq!(task, "pool");
            assert!(detail.contains("max_batch exploded"), "{detail}");
        }
        other => panic!("expected a failed task, got {other:?}"),
    }
    let s = ctx.snapshot().await;
    assert!(s.lease.is_empty(), "nothing stays leased: {:?}", s.lease);
    assert_eq!(s.ready.iter().map(Vec::len).sum::<usize>(), 10, "{:?}", s.ready);

    let seen = Seen::default();
    let c = start(&ctx, config(&ctx), seen.acking("k"));
    wait_stats(&ctx, "all acked", |s| s.counters.get("acked") == Some(&10)).await;
    assert_eq!(c.stop().await.acked, 10);
    for i in 0..10 {
        assert_eq!(seen.attempts(&format!("p{i}")), [0], "p{i} ran once, uncharged");
    }
    assert_empty(&ctx, 0).await;
}
