//! `weir demo`: the quick start. Starts a private redis-server (unless --redis-url is
//! given), enqueues a bulk no-op workload the way `weir enqueue` does, drains it with the
//! `weir work` consumer, and prints both rates.

use crate::handlers::BuiltIn;
use crate::work::WorkArgs;
use crate::{Common, work};
use clap::Args;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use weir::{EmbeddedRedis, NewJob, Producer, Redis};

#[derive(Args, Debug)]
pub struct DemoArgs {
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
    #[arg(long, default_value_t = 500)]
    pub batch: usize,
    /// Use this Redis instead of a private one (its queue `demo` is emptied first).
    #[arg(long)]
    pub redis_url: Option<String>,
}

pub async fn run(a: DemoArgs) -> weir::Result<ExitCode> {
    let embedded = match &a.redis_url {
        Some(_) => None,
        None => Some(EmbeddedRedis::start()?),
    };
    let url = a
        .redis_url
        .clone()
        .unwrap_or_else(|| embedded.as_ref().map(|e| e.url()).unwrap_or_default());
    if let Some(e) = &embedded {
        println!(
            "started a private redis-server on port {} (pid {})",
            e.port(),
            e.pid()
        );
    }
    let queue = "demo";
    let conn = Redis::open(&url)?.connect().await?;
    let producer = Producer::new(conn.clone(), queue)?;
    weir::Queue::new(conn, queue)?.purge_dead().await?;

    let payload = serde_json::json!({ "data": "x".repeat(a.payload_bytes.saturating_sub(11)) });
    let started = Instant::now();
    let mut loaded = 0;
    // In slices, so the prepared envelopes never all sit in memory at once.
    while loaded < a.jobs {
        let n = (a.jobs - loaded).min(100_000);
        let jobs = (0..n)
            .map(|_| NewJob::new("noop", &payload))
            .collect::<weir::Result<Vec<_>>>()?;
        loaded += producer.enqueue_bulk(jobs).await?.enqueued;
    }
    let enqueue_secs = started.elapsed().as_secs_f64();
    println!(
        "enqueued {loaded} jobs in {enqueue_secs:.2}s ({:.0} jobs/s)",
        loaded as f64 / enqueue_secs
    );

    let work_args = WorkArgs {
        common: Common {
            queue: queue.into(),
            redis_url: url,
        },
        handler: BuiltIn::Noop,
        http_timeout: Duration::from_secs(30),
        batch_http: None,
        concurrency: a.concurrency,
        limits: Default::default(),
        batch: a.batch,
        pipeline: 2,
        visibility_timeout: Duration::from_secs(30),
        job_timeout: None,
        shutdown_timeout: Duration::from_secs(30),
        drain: true,
        max_envelope_bytes: weir::envelope::DEFAULT_MAX_ENVELOPE_BYTES,
        dead_cap: 10_000,
    };
    let (report, _) = work::run(work_args).await?;
    if report.acked != loaded {
        eprintln!("expected {loaded} acked jobs, got {}", report.acked);
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
