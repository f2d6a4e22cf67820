//! `weir demo`: the quick start. Starts a private redis-server (unless --redis-url is
//! given), enqueues a bulk no-op workload the way `weir enqueue` does, drains it with the
//! `weir work` consumer, and prints both rates. `--compare-metrics` repeats the round with
//! metrics off and on, alternating, and prints the cost of recording them.

use crate::work::WorkArgs;
use crate::{Connect, work};
use clap::Args;
use std::process::ExitCode;
use std::time::Instant;
use weir::{EmbeddedRedis, FetcherConfig, Producer, Redis};

const QUEUE: &str = "demo";

mod backlog;

#[derive(Args, Debug)]
pub(crate) struct DemoArgs {
    /// Jobs to enqueue and drain.
    #[arg(long, default_value_t = 200_000)]
    pub jobs: u64,
    /// Payload size in bytes.
    #[arg(long, default_value_t = 100)]
    pub payload_bytes: usize,
    /// Consumer concurrency.
    #[arg(long, default_value_t = 256)]
    pub concurrency: usize,
    /// Jobs per fetch call.
    #[arg(long, default_value_t = FetcherConfig::DEFAULT_BATCH)]
    pub batch: usize,
    /// Use this Redis instead of a private one (only its queue `demo` is used, and it must
    /// have no jobs pending).
    #[arg(long)]
    pub redis_url: Option<String>,
    /// Run the round several times with metrics off and on, alternating, and compare.
    #[arg(long)]
    pub compare_metrics: bool,
    /// Rounds per setting with --compare-metrics.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Compare the drain rate with 10,000 jobs waiting against 1,000,000 waiting.
    #[arg(long)]
    pub compare_backlog: bool,
}

pub(crate) async fn run(a: DemoArgs) -> crate::error::Result<ExitCode> {
    let embedded = match &a.redis_url {
        Some(_) => None,
        None => Some(EmbeddedRedis::start()?),
    };
    let url = match (&a.redis_url, &embedded) {
        (Some(u), _) => u.clone(),
        (None, Some(e)) => {
            println!(
                "started a private redis-server on port {} (pid {})",
                e.port(),
                e.pid()
            );
            e.url()
        }
        (None, None) => unreachable!("an embedded server is started when no URL is given"),
    };
    let conn = Redis::open(&url)?.connect().await?;
    let pending = weir::Queue::new(conn.clone(), QUEUE)?.stats().await?.pending();
    if pending > 0 {
        return Err(crate::failure(format!(
            "queue {QUEUE} already has {pending} jobs pending; drain it (weir work --queue {QUEUE} --drain) first"
        )));
    }
    let producer = Producer::new(conn, QUEUE)?;
    if a.compare_backlog {
        return backlog::compare(&a, &producer, &url).await;
    }
    if !a.compare_metrics {
        let ok = round(&a, &producer, &url, false).await?.is_some();
        return Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE });
    }
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for _ in 0..a.rounds.max(1) {
        for (metrics, rates) in [(false, &mut off), (true, &mut on)] {
            match round(&a, &producer, &url, metrics).await? {
                Some(rate) => rates.push(rate),
                None => return Ok(ExitCode::FAILURE),
            }
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (off, on) = (mean(&off), mean(&on));
    println!(
        "drain with metrics off {off:.0} jobs/s, on {on:.0} jobs/s (mean of {} rounds each): metrics cost {:.1}%",
        a.rounds.max(1),
        (1.0 - on / off) * 100.0
    );
    Ok(ExitCode::SUCCESS)
}

/// Enqueues the workload and drains it; returns the drain rate, or None if a job went
/// missing.
async fn round(
    a: &DemoArgs,
    producer: &Producer,
    url: &str,
    metrics: bool,
) -> crate::error::Result<Option<f64>> {
    let loaded = enqueue(a, producer).await?;
    let mut work_args = WorkArgs::defaults(Connect::url(url), QUEUE);
    work_args.concurrency = a.concurrency;
    work_args.batch = a.batch;
    work_args.drain = true;
    work_args.metrics_addr = "127.0.0.1:0".parse().expect("valid address");
    work_args.no_metrics = !metrics;
    let (report, elapsed) = work::run(work_args).await?;
    if report.acked != loaded {
        eprintln!("expected {loaded} acked jobs, got {}", report.acked);
        return Ok(None);
    }
    Ok(Some(report.acked as f64 / elapsed.as_secs_f64()))
}

async fn enqueue(a: &DemoArgs, producer: &Producer) -> crate::error::Result<u64> {
    let started = Instant::now();
    let loaded = fill(producer, a.jobs, a.payload_bytes).await?;
    let secs = started.elapsed().as_secs_f64();
    println!(
        "enqueued {loaded} jobs in {secs:.2}s ({:.0} jobs/s)",
        loaded as f64 / secs
    );
    Ok(loaded)
}

/// Enqueues `n` no-op jobs of about `payload_bytes` in one bulk load (streamed: the
/// envelopes are written as the calls free up, never all in memory); returns how many
/// were stored.
async fn fill(producer: &Producer, n: u64, payload_bytes: usize) -> crate::error::Result<u64> {
    let payload = serde_json::json!({ "data": "x".repeat(payload_bytes.saturating_sub(11)) });
    // Serialized once: every job carries the same payload.
    let payload = serde_json::value::to_raw_value(&payload)?;
    let payloads = std::iter::repeat_n(&*payload, n as usize);
    Ok(producer.bulk("noop").enqueue(payloads).await?.enqueued)
}
