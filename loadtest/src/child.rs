//! A consumer process (`weir-loadtest consumer`, hidden): runs one weir consumer and
//! reports to the parent over stdout (see `wire`). It stops when its stdin closes (the
//! parent asks it to) or, in drain mode, when the queue is empty.
//!
//! Group commit: a handler returns only after its job's index has been written to the
//! pipe, so "reported" happens before "acked". A process killed at any moment has
//! reported every job it acked; the jobs it reported but never acked come back when their
//! leases expire and run again (duplicates, bounded by what the process held).

use crate::cli::DownstreamOpts;
use crate::handler::{self, LoadHandler, Sink, Work};
use crate::pipe_sink::PipeSink;
use crate::running::Probe;
use crate::wire::Frame;
use clap::Args;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use weir::{CancellationToken, Consumer, ConsumerConfig, Redis, Registry};

/// How often a consumer process reports its gauges.
const STATUS_EVERY: Duration = Duration::from_millis(100);

#[derive(Args, Debug, Clone)]
pub(crate) struct ChildArgs {
    #[arg(long)]
    pub redis_url: String,
    #[arg(long)]
    pub queue: String,
    #[arg(long)]
    pub concurrency: usize,
    #[command(flatten)]
    pub limits: crate::limits::LimitOpts,
    #[arg(long)]
    pub batch: usize,
    #[arg(long)]
    pub pipeline: usize,
    #[arg(long, value_parser = crate::cli::parse_duration)]
    pub visibility_timeout: Duration,
    /// Stop once the queue is empty.
    #[arg(long)]
    pub drain: bool,
    /// Call the simulated downstream (its options below) instead of doing nothing.
    #[arg(long)]
    pub downstream: bool,
    #[command(flatten)]
    pub downstream_opts: DownstreamOpts,
    /// Start of the downstream's script, ms since the Unix epoch.
    #[arg(long, default_value_t = 0)]
    pub epoch_ms: u64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Worker threads of this process (default: see `Common::worker_threads`).
    #[arg(long)]
    pub worker_threads: Option<u16>,
}

/// Writes reports and gauges to stdout until `stop`, then a last flush; a `Ready` frame
/// once the consumer is up.
async fn writer(sink: Arc<PipeSink>, handle: weir::Handle, stop: CancellationToken) {
    let limit = handle.limit.clone();
    let mut told_ready = false;
    let probe = {
        let limit = limit.clone();
        Probe::start(move || limit.in_flight() as u64)
    };
    let mut stdout = tokio::io::stdout();
    let mut status = tokio::time::interval(STATUS_EVERY);
    let mut out = Vec::new();
    loop {
        let mut stopping = false;
        tokio::select! {
            _ = sink.wake.notified() => {}
            _ = status.tick() => {
                let r = probe.take(limit.in_flight() as u64);
                Frame::Status {
                    limit: limit.get() as u64,
                    in_flight: r.mean,
                    in_flight_max: r.max,
                }
                .encode(&mut out)
            }
            _ = handle.ready(), if !told_ready => {
                told_ready = true;
                Frame::Ready.encode(&mut out);
            }
            _ = stop.cancelled() => stopping = true,
        }
        let generation = sink.take(&mut out);
        if !out.is_empty() {
            if stdout.write_all(&out).await.is_err() || stdout.flush().await.is_err() {
                return; // the parent is gone: nothing left to report to
            }
            out.clear();
        }
        sink.flushed.send_replace(generation);
        if stopping {
            return;
        }
    }
}

/// Closes `shutdown` when stdin reaches its end (the parent closed it, or died).
async fn watch_stdin(shutdown: CancellationToken) {
    let mut stdin = tokio::io::stdin();
    let mut buf = [0u8; 64];
    while let Ok(n) = stdin.read(&mut buf).await {
        if n == 0 {
            break;
        }
    }
    shutdown.cancel();
}

/// The consumer process's main.
pub(crate) async fn run(a: ChildArgs) -> anyhow::Result<()> {
    let sink = PipeSink::new();
    let work = if a.downstream {
        let config = a.downstream_opts.config(a.seed).map_err(anyhow::Error::msg)?;
        Work::Downstream(handler::downstream(config, a.epoch_ms))
    } else {
        Work::Noop
    };
    let h = LoadHandler {
        work,
        sink: Sink::Pipe(sink.clone()),
    };
    let mut config = ConsumerConfig::new(a.queue.clone());
    config.concurrency = a.concurrency;
    config.limiter = a.limits.limiter().map_err(anyhow::Error::msg)?;
    config.key_limiter = a.limits.key_limiter(a.concurrency).map_err(anyhow::Error::msg)?;
    config.rate = a.limits.rate();
    config.drain = a.drain;
    crate::fleet::tune(&mut config, a.batch, a.pipeline, a.visibility_timeout);
    let consumer = Consumer::new(config, Redis::open(&a.redis_url)?, Registry::new().fallback(h))?;
    let handle = consumer.handle();
    let shutdown = CancellationToken::new();
    tokio::spawn(watch_stdin(shutdown.clone()));
    let stop_writer = CancellationToken::new();
    let writer = tokio::spawn(writer(sink, handle, stop_writer.clone()));
    let report = consumer.run(shutdown).await?;
    stop_writer.cancel();
    let _ = writer.await;
    let mut out = Vec::new();
    Frame::Report([
        report.acked,
        report.retried,
        report.dead,
        report.lost_leases,
        report.released,
    ])
    .encode(&mut out);
    let mut stdout = tokio::io::stdout();
    stdout.write_all(&out).await?;
    stdout.flush().await?;
    Ok(())
}
