//! Starting and stopping consumers. (Handlers that record what they saw: [`Seen`].)

use crate::common::*;
use crate::faults::Proc;
use std::time::Duration;
use tokio::task::JoinHandle;
use weir::{CancellationToken, Consumer, ConsumerConfig, Handle, NewJob, Registry, Report, RetryPolicy};

/// Generous bound for anything a consumer should do "soon".
pub(crate) const SOON: Duration = Duration::from_secs(15);

/// Test defaults: small batches, fast retries, a reclaimer that looks often.
pub(crate) fn config(ctx: &Ctx) -> ConsumerConfig {
    let mut c = ConsumerConfig::new(ctx.queue.clone());
    c.concurrency = 8;
    c.shutdown_timeout = Duration::from_secs(10);
    c.fetcher.batch = 50;
    let mut retry = RetryPolicy::default();
    retry.base = Duration::from_millis(10);
    retry.cap = Duration::from_millis(50);
    retry.jitter = 0.0;
    c.pool.retry = retry;
    c.reclaimer.interval = Duration::from_millis(100);
    c
}

pub(crate) struct Running {
    pub shutdown: CancellationToken,
    pub task: JoinHandle<weir::Result<Report>>,
    pub handle: Handle,
}

pub(crate) fn start(ctx: &Ctx, config: ConsumerConfig, registry: Registry) -> Running {
    let consumer = Consumer::new(config, ctx.redis.clone(), registry).expect("consumer config is valid");
    let handle = consumer.handle();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(consumer.run(shutdown.clone()));
    Running {
        shutdown,
        task,
        handle,
    }
}

impl Running {
    /// Cancels the consumer and waits for its report.
    pub(crate) async fn stop(self) -> Report {
        self.shutdown.cancel();
        self.join().await
    }

    /// Waits for the consumer to stop by itself (drain mode).
    pub(crate) async fn join(self) -> Report {
        tokio::time::timeout(Duration::from_secs(30), self.task)
            .await
            .expect("consumer stops within 30 s")
            .expect("consumer task does not panic")
            .expect("consumer returns a report")
    }
}

/// Polls the queue's stats until `ok` holds (up to [`SOON`]); returns the last stats.
pub(crate) async fn wait_stats(ctx: &Ctx, what: &str, ok: impl Fn(&weir::Stats) -> bool) -> weir::Stats {
    wait_until(what, SOON, || async { ok(&ctx.stats().await) }).await;
    ctx.stats().await
}

/// `n` jobs of `kind` with payload `i`, ids `{prefix}{i}`.
pub(crate) fn jobs(kind: &str, prefix: &str, n: usize) -> Vec<NewJob> {
    (0..n)
        .map(|i| NewJob::new(kind, &i).unwrap().id(format!("{prefix}{i}")))
        .collect()
}

/// Asserts nothing is left to do and nothing is leased or stored but the dead.
pub(crate) async fn assert_empty(ctx: &Ctx, dead: usize) {
    let s = ctx.snapshot().await;
    assert!(s.ready.iter().all(Vec::is_empty), "ready: {:?}", s.ready);
    assert!(s.delayed.iter().all(Vec::is_empty), "delayed: {:?}", s.delayed);
    assert!(s.lease.is_empty(), "leased: {:?}", s.lease);
    assert_eq!(s.dead.len(), dead, "dead: {:?}", s.dead);
    assert_eq!(s.jobs.len(), dead, "only dead jobs keep their envelope");
}

/// A `weir work` process on the test's queue with `handler` and `extra` flags (no metrics
/// server), its output in `out-{name}` and `err-{name}` under `dir`.
pub(crate) fn weir_work(ctx: &Ctx, handler: &str, extra: &[&str], dir: &std::path::Path, name: &str) -> Proc {
    let base = [
        "work",
        "--redis-url",
        &ctx.url,
        "-q",
        &ctx.queue,
        "--no-metrics",
        "--handler",
        handler,
    ];
    let args = [&base[..], extra].concat();
    Proc::weir(
        &args,
        &dir.join(format!("out-{name}")),
        &dir.join(format!("err-{name}")),
    )
}
