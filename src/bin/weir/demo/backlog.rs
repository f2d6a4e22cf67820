//! `weir demo --compare-backlog`: the drain rate must not depend on how many jobs wait.
//! Measures, in one run, 100,000 jobs drained as ten rounds of 10,000 waiting, then
//! 100,000 drained off the top of 1,000,000 waiting.

use super::{DemoArgs, QUEUE, fill};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use weir::{CancellationToken, Consumer, ConsumerConfig, Producer, Redis, Registry, handler_fn};

const MEASURED: u64 = 100_000;

pub(super) async fn compare(a: &DemoArgs, producer: &Producer, url: &str) -> crate::error::Result<ExitCode> {
    let small = {
        let mut elapsed = Duration::ZERO;
        for _ in 0..10 {
            fill(producer, MEASURED / 10, a.payload_bytes).await?;
            elapsed += drain(a, url, MEASURED / 10).await?;
        }
        MEASURED as f64 / elapsed.as_secs_f64()
    };
    fill(producer, 1_000_000, a.payload_bytes).await?;
    let big = MEASURED as f64 / drain(a, url, MEASURED).await?.as_secs_f64();
    println!(
        "drain with 10,000 waiting: {small:.0} jobs/s; with 1,000,000 waiting: {big:.0} jobs/s ({:+.1}%)",
        (big / small - 1.0) * 100.0
    );
    Ok(ExitCode::SUCCESS)
}

/// Runs a consumer until `n` jobs are acked; returns the time taken.
async fn drain(a: &DemoArgs, url: &str, n: u64) -> crate::error::Result<Duration> {
    let mut config = ConsumerConfig::new(QUEUE);
    config.concurrency = a.concurrency;
    config.metrics = false;
    config.fetcher.batch = a.batch;
    let registry = Registry::new().fallback(handler_fn(|_| async { Ok(()) }));
    let consumer = Consumer::new(config, Redis::open(url)?, registry)?;
    let tally = consumer.handle().tally;
    let stop = CancellationToken::new();
    let started = Instant::now();
    let run = tokio::spawn(consumer.run(stop.clone()));
    while tally.acked.load(Ordering::Relaxed) < n {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let elapsed = started.elapsed();
    stop.cancel();
    run.await
        .map_err(|e| crate::failure(format!("consumer task failed: {e}")))??;
    Ok(elapsed)
}
