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
