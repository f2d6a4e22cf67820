//! `weir work`: runs a consumer with a built-in handler.

use crate::{Common, parse_duration};
use clap::Args;
use futures_util::future::BoxFuture;
use std::time::{Duration, Instant};
use weir::{CancellationToken, Consumer, ConsumerConfig, Handler, Job, JobResult, Registry, Report};

#[derive(Args, Debug, Clone)]
pub struct WorkArgs {
    #[command(flatten)]
    pub common: Common,
    /// Built-in handler for every job kind: `noop`; `sleep:<duration>` (e.g. sleep:50ms);
    /// `print` or `print:<duration>` (sleep, then write the job as one JSON line
    /// `{"id","kind","attempt","payload"}` to standard output before acking it).
    #[arg(long, default_value = "noop", value_parser = parse_handler)]
    pub handler: BuiltIn,
    /// Jobs running at once.
    #[arg(long, short, default_value_t = 64)]
    pub concurrency: usize,
    /// Most jobs per fetch call.
    #[arg(long, default_value_t = 500)]
    pub batch: usize,
    /// Fetch calls in flight at once.
    #[arg(long, default_value_t = 2)]
    pub pipeline: usize,
    /// Lease length: a job not settled by then is handed to another consumer.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub visibility_timeout: Duration,
    /// Abandon and retry a job that runs longer than this.
    #[arg(long, value_parser = parse_duration)]
    pub job_timeout: Option<Duration>,
    /// How long running jobs may take to finish after SIGINT/SIGTERM.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub shutdown_timeout: Duration,
    /// Exit once nothing is ready, delayed or in flight.
    #[arg(long)]
    pub drain: bool,
    /// Envelope size limit in bytes; bigger envelopes are dead-lettered.
    #[arg(long, default_value_t = weir::envelope::DEFAULT_MAX_ENVELOPE_BYTES)]
    pub max_envelope_bytes: usize,
    /// Dead-letter queue cap (oldest entries beyond it are trimmed and counted).
    #[arg(long, default_value_t = 10_000)]
    pub dead_cap: u64,
    /// Serve Prometheus metrics on this address (loopback unless told otherwise).
    #[arg(long, default_value = weir::metrics::DEFAULT_ADDR)]
    pub metrics_addr: std::net::SocketAddr,
    /// Do not record or serve metrics.
    #[arg(long)]
    pub no_metrics: bool,
}

/// The handlers `weir work` has built in.
#[derive(Debug, Clone, Copy)]
pub enum BuiltIn {
    /// Acks every job at once.
    Noop,
    /// Sleeps, then acks.
    Sleep(Duration),
    /// Sleeps, prints the job as a JSON line on standard output, then acks: a trace of
    /// every job run, for debugging a queue or piping jobs to another tool.
    Print(Duration),
}

fn parse_handler(s: &str) -> Result<BuiltIn, String> {
    match s.split_once(':') {
        None if s == "noop" => Ok(BuiltIn::Noop),
        None if s == "print" => Ok(BuiltIn::Print(Duration::ZERO)),
        Some(("sleep", d)) => Ok(BuiltIn::Sleep(parse_duration(d)?)),
        Some(("print", d)) => Ok(BuiltIn::Print(parse_duration(d)?)),
        _ => Err(format!(
            "unknown handler {s:?}: use noop, sleep:<duration>, print or print:<duration>"
        )),
    }
}

impl Handler for BuiltIn {
    fn call(&self, job: Job) -> BoxFuture<'static, JobResult> {
        match *self {
            BuiltIn::Noop => Box::pin(std::future::ready(Ok(()))),
            BuiltIn::Sleep(d) => Box::pin(async move {
                tokio::time::sleep(d).await;
                Ok(())
            }),
            BuiltIn::Print(d) => Box::pin(async move {
                if !d.is_zero() {
                    tokio::time::sleep(d).await;
                }
                print_job(&job)
            }),
        }
    }
}

/// One line per job, written whole (stdout is locked for the line), before the ack.
fn print_job(job: &Job) -> JobResult {
    use std::io::Write;
    let line = serde_json::json!({
        "id": job.id,
        "kind": job.kind,
        "attempt": job.attempt,
        "payload": &*job.payload,
    });
    writeln!(std::io::stdout().lock(), "{line}")
        .map_err(|e| weir::JobError::retry(format!("cannot write to standard output: {e}")))
}

impl WorkArgs {
    pub fn config(&self) -> ConsumerConfig {
        let mut c = ConsumerConfig {
            queue: self.common.queue.clone(),
            concurrency: self.concurrency,
            shutdown_timeout: self.shutdown_timeout,
            drain: self.drain,
            ..Default::default()
        };
        c.fetcher.batch = self.batch;
        c.fetcher.pipeline = self.pipeline;
        c.fetcher.visibility = self.visibility_timeout;
        c.fetcher.max_envelope_bytes = self.max_envelope_bytes;
        c.acker.visibility = self.visibility_timeout;
        c.acker.dead_cap = self.dead_cap;
        c.reclaimer.dead_cap = self.dead_cap;
        c.pool.job_timeout = self.job_timeout;
        c.metrics = !self.no_metrics;
        c
    }
}

/// Runs the consumer; prints what it did. Returns the report and the elapsed time.
pub async fn run(a: WorkArgs) -> weir::Result<(Report, Duration)> {
    if !a.no_metrics && !weir::metrics::is_installed() {
        // A consumer without its metrics endpoint still does its job: say so and go on.
        match weir::metrics::install(a.metrics_addr) {
            Ok(()) => tracing::info!(addr = %a.metrics_addr, "serving metrics at /metrics"),
            Err(e) => tracing::warn!("{e}; running without a metrics endpoint"),
        }
    }
    let redis = a.common.redis()?;
    let consumer = Consumer::new(a.config(), redis, Registry::new().fallback(a.handler))?;
    let shutdown = CancellationToken::new();
    tokio::spawn(watch_signals(shutdown.clone()));
    tracing::info!(queue = %a.common.queue, concurrency = a.concurrency, "working");
    let started = Instant::now();
    let report = consumer.run(shutdown).await?;
    let elapsed = started.elapsed();
    let done = report.acked + report.retried + report.dead;
    let summary = format!(
        "processed {done} jobs in {:.2}s ({:.0} jobs/s): {} acked, {} retried, {} dead-lettered, {} released",
        elapsed.as_secs_f64(),
        done as f64 / elapsed.as_secs_f64().max(1e-9),
        report.acked,
        report.retried,
        report.dead,
        report.released
    );
    // With `print`, standard output carries only job lines.
    match a.handler {
        BuiltIn::Print(_) => eprintln!("{summary}"),
        _ => println!("{summary}"),
    }
    Ok((report, elapsed))
}

/// First SIGINT/SIGTERM: graceful shutdown. Second: exit at once.
async fn watch_signals(shutdown: CancellationToken) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
        else {
            tracing::error!("cannot install signal handlers");
            return;
        };
        tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
        tracing::info!("signal received: shutting down gracefully (send again to exit now)");
        shutdown.cancel();
        tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        shutdown.cancel();
        let _ = tokio::signal::ctrl_c().await;
    }
    eprintln!("second signal: exiting now; leased jobs come back when their leases expire");
    std::process::exit(130);
}
