//! Several queues in one process (`MultiConsumer`): no shared slot sits idle while a queue
//! has work it may start. A queue held back by its own stored rate, or one that has run
//! dry, leaves the slots it cannot use to the others.

use crate::common::*;
use crate::support::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use weir::{MultiConsumer, Registry, WeightedQueue, handler_fn};

/// Counts, per queue (by the job id's prefix), the jobs started, the jobs running now and
/// the most that ran at once since [`PerQueue::watch_peak`]; the handler takes `hold` for
/// jobs of the prefix `slow`, nothing for the others.
#[derive(Clone, Default)]
struct PerQueue {
    running: Arc<Mutex<std::collections::HashMap<String, Running3>>>,
}

/// Started, running now, peak.
type Running3 = (usize, usize, usize);

impl PerQueue {
    fn registry(&self, slow: &'static str, hold: Duration) -> Registry {
        let s = self.clone();
        Registry::new().on(
            "k",
            handler_fn(move |job| {
                let s = s.clone();
                async move {
                    let prefix = job.id.split('-').next().unwrap_or_default().to_owned();
                    s.step(&prefix, true);
                    if prefix == slow {
                        tokio::time::sleep(hold).await;
                    }
                    s.step(&prefix, false);
                    Ok(())
                }
            }),
        )
    }

    fn step(&self, prefix: &str, start: bool) {
        let mut m = self.running.lock().unwrap();
        let (started, now, peak) = m.entry(prefix.to_owned()).or_default();
        if start {
            *started += 1;
            *now += 1;
            *peak = (*peak).max(*now);
        } else {
            *now -= 1;
        }
    }

    fn peak(&self, prefix: &str) -> usize {
        self.running.lock().unwrap().get(prefix).map_or(0, |r| r.2)
    }

    fn started(&self, prefix: &str) -> usize {
        self.running.lock().unwrap().get(prefix).map_or(0, |r| r.0)
    }

    /// The peak counts from now: the jobs running now.
    fn watch_peak(&self, prefix: &str) {
        let mut m = self.running.lock().unwrap();
        let (_, now, peak) = m.entry(prefix.to_owned()).or_default();
        *peak = *now;
    }
}

/// A queue held back by its own stored rate (5/s, burst 1) keeps no shared slot it cannot
/// use: the other queue, whose jobs take 50 ms, gets the whole concurrency of 10 while the
/// throttled one still has a backlog. (A pool that waits on its rate with slots parked for
/// its fetched jobs, about a second's worth, keeps them from the other queue.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_held_back_by_its_rate_leaves_the_slots_to_the_others() {
    let ctx = Ctx::new("multi-held").await;
    let (b, _) = ctx.other_queue("multi-held-b");
    ctx.producer().enqueue_bulk(jobs("k", "a-", 200)).await.unwrap();
    weir::Producer::new(ctx.c(), &b)
        .unwrap()
        .enqueue_bulk(jobs("k", "b-", 3000))
        .await
        .unwrap();
    weir::queue::settings::Settings {
        rate: Some(weir::queue::settings::RateSetting::Limit(
            "5/s".parse::<weir::Rate>().unwrap().with_burst(1),
        )),
        ..Default::default()
    }
    .store(&mut ctx.c(), &ctx.queue)
    .await
    .unwrap();

    let seen = PerQueue::default();
    let mut cfg = config(&ctx);
    cfg.concurrency = 10;
    let queues = vec![WeightedQueue::new(&ctx.queue, 1), WeightedQueue::new(&b, 1)];
    let consumer = MultiConsumer::new(
        cfg,
        queues,
        ctx.redis.clone(),
        seen.registry("b", Duration::from_millis(50)),
    )
    .unwrap();
    let shutdown = weir::CancellationToken::new();
    let task = tokio::spawn(consumer.run(shutdown.clone()));
    // Past its burst, the throttled queue waits on its rate between starts; from then
    // on, the other queue has every slot the throttled one is not running a job in.
    wait_until("the throttled queue past its burst", SOON, || async {
        seen.started("a") >= 3
    })
    .await;
    seen.watch_peak("b");
    let full = try_wait_until(SOON, || async { seen.peak("b") == 10 }).await;
    let a_backlog = weir::Queue::new(ctx.c(), &ctx.queue)
        .unwrap()
        .stats()
        .await
        .unwrap()
        .ready_total();
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("stops within 30 s")
        .unwrap()
        .unwrap();
    assert!(a_backlog > 0, "the throttled queue still had work");
    assert!(
        full,
        "the unthrottled queue ran at most {} of 10 at once",
        seen.peak("b")
    );
}

/// A batch handler for kind `batch`: calls of up to 10 jobs, each taking `hold`; counts
/// the jobs it ran.
struct Batches {
    ran: Arc<AtomicUsize>,
    hold: Duration,
}

impl weir::BatchHandler for Batches {
    fn call(&self, jobs: Vec<weir::Job>) -> futures_util::future::BoxFuture<'static, Vec<weir::JobResult>> {
        let (ran, hold) = (self.ran.clone(), self.hold);
        Box::pin(async move {
            tokio::time::sleep(hold).await;
            ran.fetch_add(jobs.len(), Ordering::SeqCst);
            jobs.iter().map(|_| Ok(())).collect()
        })
    }

    fn max_batch(&self) -> usize {
        10
    }
}

/// A queue that runs dry mid-run leaves every slot to the other: the slots granted for
/// its fetched jobs beyond what they used (ten jobs of a batch-handler call take one) go
/// back when it has nothing more to start, though it has the larger weight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_that_runs_dry_leaves_no_slot_idle() {
    let ctx = Ctx::new("multi-dry").await;
    let (b, _) = ctx.other_queue("multi-dry-b");
    const A: usize = 200;
    ctx.producer().enqueue_bulk(jobs("batch", "a-", A)).await.unwrap();
    weir::Producer::new(ctx.c(), &b)
        .unwrap()
        .enqueue_bulk(jobs("k", "b-", 3000))
        .await
        .unwrap();
    let seen = PerQueue::default();
    let ran_a = Arc::new(AtomicUsize::new(0));
    let batches = Batches {
        ran: ran_a.clone(),
        hold: Duration::from_millis(100),
    };
    let registry = seen
        .registry("b", Duration::from_millis(30))
        .on_batch("batch", batches);
    let mut cfg = config(&ctx);
    cfg.concurrency = 8;
    let queues = vec![WeightedQueue::new(&ctx.queue, 10), WeightedQueue::new(&b, 1)];
    let consumer = MultiConsumer::new(cfg, queues, ctx.redis.clone(), registry).unwrap();
    let shutdown = weir::CancellationToken::new();
    let task = tokio::spawn(consumer.run(shutdown.clone()));
    // Both queues have work, then the first runs dry while the other still has plenty.
    wait_until("the first queue's jobs all ran", SOON, || async {
        ran_a.load(Ordering::SeqCst) == A
    })
    .await;
    seen.watch_peak("b");
    let full = try_wait_until(SOON, || async { seen.peak("b") == 8 }).await;
    let b_started = seen.started("b");
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("stops within 30 s")
        .unwrap()
        .unwrap();
    assert!(
        full,
        "after the first queue ran dry, the other ran at most {} of 8 at once",
        seen.peak("b")
    );
    assert!(b_started < 3000, "the other queue still had work");
}
