//! Several queues in one process (`MultiConsumer`): the weights divide the shared slots
//! while every queue has work, a queue with nothing ready leaves the whole budget to the
//! others, and each job is settled once, in its own queue.

use crate::common::*;
use crate::support::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use weir::{ConsumerConfig, MultiConsumer, Registry, Report, WeightedQueue, handler_fn};

/// What the handler saw: the order jobs started in (their ids), and the most that ran at
/// once across every queue.
#[derive(Clone, Default)]
struct Starts {
    order: Arc<Mutex<Vec<String>>>,
    running: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

impl Starts {
    /// A registry whose handler for `k` records each start, then takes `hold`.
    fn registry(&self, hold: Duration) -> Registry {
        let s = self.clone();
        Registry::new().on(
            "k",
            handler_fn(move |job| {
                let s = s.clone();
                async move {
                    s.order.lock().unwrap().push(job.id.clone());
                    let now = s.running.fetch_add(1, Ordering::SeqCst) + 1;
                    s.peak.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(hold).await;
                    s.running.fetch_sub(1, Ordering::SeqCst);
                    Ok(())
                }
            }),
        )
    }

    fn order(&self) -> Vec<String> {
        self.order.lock().unwrap().clone()
    }
}

/// The test config in drain mode with `concurrency` slots for the whole process.
fn drain_config(ctx: &Ctx, concurrency: usize) -> ConsumerConfig {
    let mut c = config(ctx);
    c.concurrency = concurrency;
    c.drain = true;
    c
}

/// Runs `consumer` until it drains (bounded), with the reports of its queues.
async fn drain(consumer: MultiConsumer) -> Vec<(String, Report)> {
    let run = consumer.run(weir::CancellationToken::new());
    tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("drains within 60 s")
        .expect("runs without failure")
}

/// The `acked` counter of `queue`.
/// `n` jobs `a-*` in `ctx`'s queue and `n` jobs `b-*` in a second queue named from `name`
/// (returned).
async fn two_backlogged(ctx: &Ctx, name: &str, n: usize) -> String {
    let (b, _) = ctx.other_queue(name);
    ctx.producer().enqueue_bulk(jobs("k", "a-", n)).await.unwrap();
    let pb = weir::Producer::new(ctx.c(), &b).unwrap();
    pb.enqueue_bulk(jobs("k", "b-", n)).await.unwrap();
    b
}

async fn acked(ctx: &Ctx, queue: &str) -> u64 {
    let s = weir::Queue::new(ctx.c(), queue).unwrap().stats().await.unwrap();
    assert_eq!(s.pending(), 0, "{queue}: nothing left");
    s.counters.get("acked").copied().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weights_divide_the_slots_while_both_queues_have_work() {
    let ctx = Ctx::new("multi-weights").await;
    const N: usize = 600;
    let b = two_backlogged(&ctx, "multi-weights-b", N).await;

    let starts = Starts::default();
    let queues = vec![WeightedQueue::new(&ctx.queue, 1), WeightedQueue::new(&b, 3)];
    let consumer = MultiConsumer::new(
        drain_config(&ctx, 4),
        queues,
        ctx.redis.clone(),
        // (jobs long beside a fetch's round trip: a fetch that comes back late on a busy
        // machine, b's buffer empty meanwhile, hands b's slots to a for a smaller part of
        // the window; the gate is work-conserving)
        starts.registry(Duration::from_millis(10)),
    )
    .unwrap();
    let reports = drain(consumer).await;

    // A window while both queues have a backlog, from just after both are running (one
    // queue's consumer may start a little before the other's, and take every slot
    // meanwhile): b's 300-odd starts stay under its 600, a's 100-odd plus its head start
    // under its 600.
    let order = starts.order();
    assert_eq!(order.len(), 2 * N, "every job started once");
    let both = 1 + order
        .iter()
        .position(|id| id.starts_with("a-"))
        .max(order.iter().position(|id| id.starts_with("b-")))
        .unwrap();
    assert!(
        both < 300,
        "both queues started within the first 300 starts: {both}"
    );
    let window = &order[both + 20..both + 420];
    let from_a = window.iter().filter(|id| id.starts_with("a-")).count();
    let from_b = window.len() - from_a;
    let ratio = from_b as f64 / from_a.max(1) as f64;
    assert!(
        (2.2..=4.0).contains(&ratio),
        "starts b:a = {from_b}:{from_a} ({ratio:.2}), want about 3"
    );
    // One budget for the process, and it was used in full.
    assert_eq!(
        starts.peak.load(Ordering::SeqCst),
        4,
        "at most 4 at once across both queues"
    );

    // Each job settled once, in its own queue.
    let mut ids = order.clone();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 2 * N, "no job ran twice");
    assert_eq!(reports[0], (ctx.queue.clone(), report_of(N)));
    assert_eq!(reports[1], (b.clone(), report_of(N)));
    assert_eq!(acked(&ctx, &ctx.queue).await, N as u64);
    assert_eq!(acked(&ctx, &b).await, N as u64);
    assert_empty(&ctx, 0).await;
}

/// `rate` binds the process, not each queue: under a jobs/s cap that binds (handlers that
/// finish at once, a limit far above what runs), the starts still follow the weights. Were
/// the cap each queue's own, both would start at the full rate, 1:1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rate_is_the_processs_and_the_weights_divide_it() {
    let ctx = Ctx::new("multi-rate").await;
    const N: usize = 300;
    let b = two_backlogged(&ctx, "multi-rate-b", N).await;

    let starts = Starts::default();
    let mut cfg = config(&ctx);
    cfg.concurrency = 64;
    cfg.rate = Some("400/s".parse::<weir::Rate>().unwrap().with_burst(4));
    let queues = vec![WeightedQueue::new(&ctx.queue, 1), WeightedQueue::new(&b, 3)];
    let consumer =
        MultiConsumer::new(cfg, queues, ctx.redis.clone(), starts.registry(Duration::ZERO)).unwrap();
    let shutdown = weir::CancellationToken::new();
    let task = tokio::spawn(consumer.run(shutdown.clone()));
    wait_until("300 starts", SOON, || async { starts.order().len() >= 300 }).await;
    shutdown.cancel();
    let reports = tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("stops within 30 s")
        .unwrap()
        .unwrap();

    // b's 225-odd starts stay under its 300: both had work throughout the window.
    let order = starts.order();
    let window = &order[20..300];
    let from_a = window.iter().filter(|id| id.starts_with("a-")).count();
    let from_b = window.len() - from_a;
    let ratio = from_b as f64 / from_a.max(1) as f64;
    assert!(
        (2.2..=4.0).contains(&ratio),
        "starts b:a = {from_b}:{from_a} ({ratio:.2}), want about 3"
    );
    let acked: u64 = reports.iter().map(|(_, r)| r.acked).sum();
    assert_eq!(acked, order.len() as u64, "every started job acked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_with_nothing_ready_leaves_the_whole_budget_to_the_other() {
    let ctx = Ctx::new("multi-idle").await;
    let (empty, _) = ctx.other_queue("multi-idle-empty");
    const N: usize = 64;
    ctx.producer().enqueue_bulk(jobs("k", "a-", N)).await.unwrap();

    let starts = Starts::default();
    // The empty queue has the larger weight: it still takes nothing it cannot use.
    let queues = vec![WeightedQueue::new(&ctx.queue, 1), WeightedQueue::new(&empty, 5)];
    let consumer = MultiConsumer::new(
        drain_config(&ctx, 8),
        queues,
        ctx.redis.clone(),
        starts.registry(Duration::from_millis(30)),
    )
    .unwrap();
    let handles = consumer.handles();
    assert_eq!(handles.len(), 2);
    assert!(Arc::ptr_eq(&handles[0].1.limit, &handles[1].1.limit), "one limit");
    let reports = drain(consumer).await;

    assert_eq!(starts.peak.load(Ordering::SeqCst), 8, "the full concurrency");
    assert_eq!(starts.order().len(), N);
    assert_eq!(reports[0], (ctx.queue.clone(), report_of(N)));
    assert_eq!(reports[1], (empty.clone(), Report::default()));
    assert_eq!(acked(&ctx, &ctx.queue).await, N as u64);
    assert_eq!(acked(&ctx, &empty).await, 0);
    assert_empty(&ctx, 0).await;
}

/// Each queue has a worker-registry entry while it runs, and a shutdown hands back what
/// was fetched and not started, to its own queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_queue_registers_and_gets_its_unstarted_jobs_back_at_shutdown() {
    let ctx = Ctx::new("multi-stop").await;
    const N: usize = 200;
    let b = two_backlogged(&ctx, "multi-stop-b", N).await;

    let starts = Starts::default();
    let queues = vec![WeightedQueue::new(&ctx.queue, 2), WeightedQueue::new(&b, 1)];
    let consumer = MultiConsumer::new(
        config(&ctx),
        queues,
        ctx.redis.clone(),
        starts.registry(Duration::from_millis(20)),
    )
    .unwrap();
    let shutdown = weir::CancellationToken::new();
    let task = tokio::spawn(consumer.run(shutdown.clone()));
    for q in [&ctx.queue, &b] {
        let admin = weir::Queue::new(ctx.c(), q).unwrap();
        wait_until("a worker entry for each queue", SOON, || async {
            admin.workers().await.unwrap().workers.len() == 1
        })
        .await;
        let w = &admin.workers().await.unwrap().workers[0];
        assert_eq!(
            (w.pid, w.concurrency_limit),
            (std::process::id(), 8),
            "{q}: this process, the shared limit"
        );
    }
    wait_until("jobs of both queues to start", SOON, || async {
        let o = starts.order();
        o.iter().any(|id| id.starts_with("a-")) && o.iter().any(|id| id.starts_with("b-"))
    })
    .await;
    shutdown.cancel();
    let reports = tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("stops within 30 s")
        .unwrap()
        .unwrap();

    let started = starts.order();
    for (i, (q, prefix)) in [(&ctx.queue, "a-"), (&b, "b-")].into_iter().enumerate() {
        let ran = started.iter().filter(|id| id.starts_with(prefix)).count() as u64;
        let (name, r) = &reports[i];
        assert_eq!(name, q);
        assert_eq!(r.acked, ran, "{q}: every started job acked");
        let s = weir::Queue::new(ctx.c(), q).unwrap().stats().await.unwrap();
        assert_eq!(s.counters.get("acked").copied().unwrap_or(0), ran, "{q}");
        assert_eq!(s.ready_total(), N as u64 - ran, "{q}: the rest ready: {s:?}");
        assert_eq!(
            (s.in_flight, s.delayed),
            (0, 0),
            "{q}: no lease left behind: {s:?}"
        );
        let admin = weir::Queue::new(ctx.c(), q).unwrap();
        assert!(
            admin.workers().await.unwrap().workers.is_empty(),
            "{q}: entry removed"
        );
    }
}

/// What a queue of `n` jobs that all ran and were acked reports.
fn report_of(n: usize) -> Report {
    Report {
        acked: n as u64,
        ..Report::default()
    }
}
