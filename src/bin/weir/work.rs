//! `weir work`: runs a consumer with a built-in handler, of one queue or of several with
//! weights ([`MultiConsumer`]).

use crate::handlers::{BuiltIn, ExecArgs, HttpArgs, parse_handler, shown};
use crate::{Connect, parse_duration};
use clap::Args;
use std::time::{Duration, Instant};
use weir::PoolConfig;
use weir::limiter::LimiterOptions;
use weir::queue::samples::SamplesConfig;
use weir::{
    CancellationToken, Consumer, ConsumerConfig, DeferralBudget, FetcherConfig, MultiConsumer, Report,
    WeightedQueue,
};

#[derive(Args, Debug, Clone)]
pub(crate) struct WorkArgs {
    #[command(flatten)]
    pub connect: Connect,
    /// Queue to consume: NAME, or NAME:WEIGHT with a weight from 1 to 1000 (default 1).
    /// Repeat it (or give a comma-separated list) to consume several queues in one process:
    /// --concurrency, --adaptive and --rate then bound the process across them, and while
    /// several have jobs ready the jobs started follow the weights (`--queue a --queue b:3`:
    /// a quarter to a, three quarters to b); a queue with nothing ready leaves its share to
    /// the others. A number after the last ':' is the weight (emails:high is a name; a name
    /// that ends in ':' and a number is written with its weight: jobs:2:1).
    #[arg(
        long,
        short,
        value_name = "NAME[:WEIGHT]",
        default_value = ConsumerConfig::DEFAULT_QUEUE,
        value_delimiter = ',',
        value_parser = parse_queue
    )]
    pub queue: Vec<WeightedQueue>,
    /// Handler for every job kind (required: there is no default, since `noop` would
    /// delete every job): a URL to POST each job to (http://host/path or https://...): 2xx acks, 429/503
    /// back off, other 5xx and timeouts retry, other 4xx dead-letter; `noop` (ack at once);
    /// `sleep:<duration>` (e.g. sleep:50ms); `print` or `print:<duration>` (sleep, then
    /// write the job as one JSON line `{"id","kind","attempt","payload"}` to standard
    /// output before acking it); `exec:<command>` (worker processes started as `sh -c
    /// <command>`, speaking docs/protocol.md's exec protocol on stdin/stdout, e.g.
    /// exec:'node worker.js').
    #[arg(long, value_parser = parse_handler)]
    pub handler: BuiltIn,
    #[command(flatten)]
    pub http: HttpArgs,
    #[command(flatten)]
    pub exec: ExecArgs,
    /// Jobs running at once (with --adaptive, the starting limit).
    #[arg(long, short, default_value_t = ConsumerConfig::DEFAULT_CONCURRENCY)]
    pub concurrency: usize,
    #[command(flatten)]
    pub limits: LimiterOptions,
    /// Most jobs per fetch call.
    #[arg(long, default_value_t = FetcherConfig::DEFAULT_BATCH)]
    pub batch: usize,
    /// Fetch calls in flight at once.
    #[arg(long, default_value_t = FetcherConfig::DEFAULT_PIPELINE)]
    pub pipeline: usize,
    /// Jobs held fetched but un-started beyond the free slots, at least. By default the
    /// consumer holds what it runs through in a fetch's round trip (none for jobs longer
    /// than that), so long jobs are left to consumers with free slots.
    #[arg(long, default_value_t = FetcherConfig::DEFAULT_PREFETCH)]
    pub prefetch: usize,
    /// Most bytes of jobs held ahead of the free slots (the jobs fetched ahead are fewer
    /// when they are large).
    #[arg(long, value_name = "BYTES", default_value_t = FetcherConfig::DEFAULT_AHEAD_BYTES)]
    pub ahead_bytes: usize,
    /// Lease every job of a fetch on its own, not the fetch's jobs as one batch (a batch
    /// costs Redis one lease entry and, acked whole, one removal; docs/batch-leases.md).
    #[arg(long)]
    pub no_batch_leases: bool,
    /// Lease length: a job not settled by then is handed to another consumer.
    #[arg(long, default_value = shown(ConsumerConfig::DEFAULT_LEASE), value_parser = parse_duration)]
    pub visibility_timeout: Duration,
    /// Abandon and retry a job that runs longer than this.
    #[arg(long, value_parser = parse_duration)]
    pub job_timeout: Option<Duration>,
    /// Backpressure (HTTP 429/503) puts a job back without charging an attempt, at most
    /// this many times (0: no limit); then it is dead-lettered.
    #[arg(long, value_name = "N", default_value_t = DeferralBudget::DEFAULT_MAX_DEFERRALS)]
    pub max_deferrals: u32,
    /// ... and for at most this long from the first deferral (0s: no limit).
    #[arg(long, default_value = shown(DeferralBudget::DEFAULT_MAX_AGE), value_parser = parse_duration)]
    pub max_deferral_age: Duration,
    /// How long a job of a kind no handler takes, or over --max-envelope-bytes, is left
    /// for another consumer before it is dead-lettered.
    #[arg(long, default_value = shown(PoolConfig::DEFAULT_UNKNOWN_KIND_GRACE), value_parser = parse_duration)]
    pub unknown_kind_grace: Duration,
    /// How long running jobs may take to finish after SIGINT/SIGTERM.
    #[arg(
        long,
        default_value = shown(ConsumerConfig::DEFAULT_SHUTDOWN_TIMEOUT),
        value_parser = parse_duration
    )]
    pub shutdown_timeout: Duration,
    /// Exit once nothing is ready, delayed or in flight (with several queues: each queue's
    /// pipeline stops once that queue is empty, and the command exits when every one is).
    /// Delayed jobs count: a retry due in an hour keeps it running for that hour (it logs
    /// once what it waits for); see --drain-ignore-delayed.
    #[arg(long)]
    pub drain: bool,
    /// With --drain: exit once nothing is ready or in flight, leaving delayed jobs
    /// (retries not yet due, jobs enqueued for later) in the queue for a later run.
    #[arg(long, requires = "drain")]
    pub drain_ignore_delayed: bool,
    /// Envelope size limit in bytes; bigger envelopes are left for a consumer with a
    /// larger limit, and dead-lettered after --unknown-kind-grace.
    #[arg(long, default_value_t = FetcherConfig::DEFAULT_MAX_ENVELOPE_BYTES)]
    pub max_envelope_bytes: usize,
    /// Gone: the dead-letter cap is the queue's setting (`weir limits set --dead-cap N`).
    #[arg(long, hide = true, value_name = "N", value_parser = dead_cap_moved)]
    pub dead_cap: Option<u64>,
    /// Run even if Redis's maxmemory-policy lets it evict keys (anything but noeviction),
    /// which can lose jobs.
    #[arg(long)]
    pub allow_eviction: bool,
    /// Serve Prometheus metrics on this address (loopback unless told otherwise).
    #[arg(long, default_value = weir::metrics::DEFAULT_ADDR)]
    pub metrics_addr: std::net::SocketAddr,
    /// Do not record or serve metrics.
    #[arg(long)]
    pub no_metrics: bool,
    /// How often the queue's history (its counters and sizes in Redis: the UI's charts,
    /// the rates of `weir stats`) gets a sample; one consumer of the fleet writes each.
    /// Give every consumer of a queue the same, 100ms to 1h.
    #[arg(long, default_value = shown(SamplesConfig::DEFAULT_PERIOD), value_parser = parse_duration)]
    pub sample_period: Duration,
}

/// Parses `NAME[:WEIGHT]`.
fn parse_queue(s: &str) -> Result<WeightedQueue, String> {
    s.parse().map_err(|e: weir::Error| e.to_string())
}

/// `--dead-cap` moved to `weir limits set`: one consumer's flag must not trim the whole
/// fleet's dead-letter queue.
fn dead_cap_moved(_: &str) -> Result<u64, String> {
    Err(
        "the dead-letter cap is a queue setting now, the same for every consumer: \
         set it with `weir limits set --dead-cap N`"
            .into(),
    )
}

impl WorkArgs {
    /// What `weir work` runs with when given no flags but `connect` and `queue` (the
    /// library's defaults, as the flags above read them).
    pub(crate) fn defaults(connect: Connect, queue: &str) -> Self {
        let c = ConsumerConfig::default();
        Self {
            connect,
            queue: vec![WeightedQueue::new(queue, 1)],
            handler: BuiltIn::Noop,
            http: HttpArgs::defaults(),
            exec: ExecArgs::defaults(),
            concurrency: c.concurrency,
            limits: LimiterOptions::default(),
            batch: c.fetcher.batch,
            pipeline: c.fetcher.pipeline,
            prefetch: c.fetcher.prefetch,
            ahead_bytes: c.fetcher.ahead_bytes,
            no_batch_leases: !c.fetcher.batch_leases,
            visibility_timeout: c.lease,
            job_timeout: c.pool.job_timeout,
            max_deferrals: c.pool.deferral_budget.max_deferrals,
            max_deferral_age: c.pool.deferral_budget.max_age,
            unknown_kind_grace: c.pool.unknown_kind_grace,
            shutdown_timeout: c.shutdown_timeout,
            drain: c.drain,
            drain_ignore_delayed: c.drain_ignore_delayed,
            max_envelope_bytes: c.fetcher.max_envelope_bytes,
            dead_cap: None,
            allow_eviction: c.allow_eviction,
            metrics_addr: weir::metrics::DEFAULT_ADDR.parse().expect("a valid address"),
            no_metrics: !c.metrics,
            sample_period: c.samples.period,
        }
    }

    /// The consumer's configuration (the limiter's settings checked on the way), for the
    /// first queue (a [`MultiConsumer`] gives each queue its own copy).
    pub(crate) fn config(&self) -> crate::error::Result<ConsumerConfig> {
        let first = self
            .queue
            .first()
            .map_or(ConsumerConfig::DEFAULT_QUEUE, |q| &q.queue);
        let mut c = ConsumerConfig::new(first);
        c.concurrency = self.concurrency;
        c.lease = self.visibility_timeout;
        c.limiter = self.limits.limiter()?;
        c.key_limiter = self.limits.key_limiter(self.concurrency)?;
        c.rate = self.limits.rate();
        c.shutdown_timeout = self.shutdown_timeout;
        c.drain = self.drain;
        c.samples.period = self.sample_period;
        c.drain_ignore_delayed = self.drain_ignore_delayed;
        c.fetcher.batch = self.batch;
        c.fetcher.pipeline = self.pipeline;
        c.fetcher.prefetch = self.prefetch;
        c.fetcher.ahead_bytes = self.ahead_bytes;
        c.fetcher.batch_leases = !self.no_batch_leases;
        c.fetcher.max_envelope_bytes = self.max_envelope_bytes;
        c.pool.job_timeout = self.job_timeout;
        c.pool.deferral_budget = DeferralBudget {
            max_deferrals: self.max_deferrals,
            max_age: self.max_deferral_age,
        };
        c.pool.unknown_kind_grace = self.unknown_kind_grace;
        c.metrics = !self.no_metrics;
        c.allow_eviction = self.allow_eviction;
        Ok(c)
    }
}

/// What runs: one queue's consumer (the path a single `--queue` has always taken), or
/// several queues' under one budget. (Built once per process: the size of the larger
/// variant does not matter.)
#[allow(clippy::large_enum_variant)]
enum Run {
    One(Consumer),
    Several(MultiConsumer),
}

impl Run {
    fn new(a: &WorkArgs, redis: &weir::Redis, registry: weir::Registry) -> crate::error::Result<Self> {
        let config = a.config()?;
        match a.queue.as_slice() {
            [_] => Ok(Run::One(Consumer::new(config, redis.clone(), registry)?)),
            queues => Ok(Run::Several(MultiConsumer::new(
                config,
                queues.to_vec(),
                redis.clone(),
                registry,
            )?)),
        }
    }

    /// Runs until shutdown (or drained); each queue's report.
    async fn run(self, shutdown: CancellationToken) -> crate::error::Result<Vec<(String, Report)>> {
        match self {
            Run::One(c) => {
                let queue = c.queue().to_owned();
                Ok(vec![(queue, c.run(shutdown).await?)])
            }
            Run::Several(m) => Ok(m.run(shutdown).await?),
        }
    }
}

/// Runs the consumer; prints what it did. Returns the report (every queue's, summed) and
/// the elapsed time.
pub(crate) async fn run(a: WorkArgs) -> crate::error::Result<(Report, Duration)> {
    let redis = a.connect.redis()?;
    let (registry, extras) = a.handler.registry(&a.http, &a.exec, a.job_timeout)?;
    let http = extras.http;
    let consumer = Run::new(&a, &redis, registry)?;
    // Reach Redis before anything else, so a wrong URL is one line of error and nothing more.
    drop(redis.connect().await?);
    // Then the handler, before any job is fetched: a typo or a wrong CA must not drain the
    // queue into the dead-letter queue.
    if let Some(h) = http {
        h.probe(a.http.http_timeout)
            .await
            .map_err(|e| crate::failure(format!("{e}; no job was fetched")))?;
    }
    if !a.no_metrics && !weir::metrics::is_installed() {
        match weir::metrics::install(a.metrics_addr) {
            Ok(()) => tracing::info!(addr = %a.metrics_addr, "serving metrics at /metrics"),
            // A consumer nobody can see is worse than one that does not start: refuse,
            // and say how to go on.
            Err(e) => {
                return Err(crate::usage(format!(
                    "{e}. Choose another address with --metrics-addr, or run without metrics: --no-metrics"
                )));
            }
        }
    }
    let shutdown = CancellationToken::new();
    tokio::spawn(watch_signals(shutdown.clone()));
    if a.limits.adaptive || a.limits.rate().is_some() {
        let rate = a.limits.rate().map_or_else(|| "off".into(), |r| r.to_string());
        tracing::info!(
            adaptive = a.limits.adaptive,
            adaptive_per_key = a.limits.adaptive_per_key,
            rate = %rate,
            "limits"
        );
    }
    if a.queue.len() > 1 {
        let queues: Vec<String> = a.queue.iter().map(|q| q.to_string()).collect();
        tracing::info!(queues = %queues.join(" "), "several queues, one budget: weighted starts");
    }
    let started = Instant::now();
    let reports = consumer.run(shutdown).await;
    if let Some(h) = &extras.exec {
        // Every job is settled (or abandoned): close the workers' stdin and let them exit.
        h.shutdown(a.shutdown_timeout).await;
    }
    let reports = reports?;
    let elapsed = started.elapsed();
    let total = reports.iter().fold(Report::default(), |t, (_, r)| sum(t, r));
    let mut lines = vec![summary(&total, elapsed)];
    if reports.len() > 1 {
        lines.extend(reports.iter().map(|(q, r)| format!("  {q}: {}", outcomes(r))));
    }
    // With `print`, standard output carries only job lines.
    // A closed pipe (`weir work | head -1`) loses the summary, not the exit code.
    use std::io::Write;
    let _ = match a.handler {
        BuiltIn::Print(_) => writeln!(std::io::stderr(), "{}", lines.join("\n")),
        _ => writeln!(std::io::stdout(), "{}", lines.join("\n")),
    };
    Ok((total, elapsed))
}

/// The closing line: jobs done, time, rate and outcomes.
fn summary(r: &Report, elapsed: Duration) -> String {
    let done = r.acked + r.retried + r.deferred + r.dead;
    format!(
        "processed {} in {:.2}s ({:.0} jobs/s): {}",
        crate::output::count(done, "job"),
        elapsed.as_secs_f64(),
        done as f64 / elapsed.as_secs_f64().max(1e-9),
        outcomes(r)
    )
}

fn outcomes(r: &Report) -> String {
    format!(
        "{} acked, {} retried, {} deferred, {} dead-lettered, {} released",
        r.acked, r.retried, r.deferred, r.dead, r.released
    )
}

fn sum(t: Report, r: &Report) -> Report {
    Report {
        acked: t.acked + r.acked,
        retried: t.retried + r.retried,
        deferred: t.deferred + r.deferred,
        dead: t.dead + r.dead,
        lost_leases: t.lost_leases + r.lost_leases,
        released: t.released + r.released,
    }
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
        // Shut down first, say so second: nothing a write does can stop the shutdown.
        shutdown.cancel();
        tracing::info!("signal received: shutting down gracefully (send again to exit now)");
        tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        shutdown.cancel();
        let _ = tokio::signal::ctrl_c().await;
    }
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "second signal: exiting now; leased jobs come back when their leases expire"
    );
    std::process::exit(130);
}

#[cfg(test)]
mod tests;
