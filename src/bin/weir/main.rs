//! The `weir` command line: enqueue, work, limits, stats, queues, jobs, job, workers, dlq,
//! cron, pause/resume, ui, demo, functions, completions.

mod cron;
mod demo;
mod dlq;
mod enqueue;
mod envs;
mod error;
mod functions;
mod handlers;
mod jobs;
mod known;
mod limits;
mod output;
mod queue;
mod queues;
mod retry;
mod stats;
mod ui;
mod work;

use clap::{Args, FromArgMatches, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use weir::{Priority, Queue, Redis, TlsFiles};

pub(crate) use error::{failure, usage};

/// mimalloc: the consumer allocates a few small buffers per job, which glibc's malloc
/// made about a quarter of its instructions (callgrind, `weir work --drain`).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Exit codes, one scheme for every subcommand (stated in `weir --help` and the README).
pub mod exit {
    /// The command did its job.
    pub const OK: u8 = 0;
    /// The command line was valid but the command could not be carried out: Redis, a
    /// file or the handler could not be reached or read.
    pub const FAILURE: u8 = 1;
    /// The command line is wrong: an unknown option, a missing argument, a value that does
    /// not parse or is out of range. Clap exits with it for what it checks; values weir
    /// refuses later (ranges, names) get it too, before anything is touched.
    pub const USAGE: u8 = 2;
    /// Done in part: `weir enqueue` did not load some lines, or `weir dlq requeue`, `dlq
    /// delete`, `job delete` or `job run-now` could not act on some ids; each is named on
    /// standard error.
    pub const PARTIAL: u8 = 3;
}

const EXIT_CODES: &str = "\
Exit codes:
  0  done
  1  runtime failure: Redis, a file or the handler could not be reached or read
  2  usage error: unknown option, missing argument, value that does not parse or is out of range
  3  done in part: weir enqueue did not load some lines, or weir dlq requeue, dlq delete,
     job delete or job run-now could not act on some ids (each is named on standard error)";

/// `weir --version`: the version, the commit it was built from and the build date
/// (build.rs).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("WEIR_GIT_COMMIT"),
    ", built ",
    env!("WEIR_BUILD_DATE"),
    ")"
);

#[derive(Parser)]
#[command(
    name = "weir",
    version = VERSION,
    about = "Drain Redis job queues as fast as Redis can move them",
    after_help = EXIT_CODES
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log lines as text (coloured on a terminal) or as JSON objects.
    #[arg(long, value_enum, default_value = "text", global = true)]
    log_format: LogFormat,
    /// Worker threads of the process [default: one per core, less one when Redis runs on
    /// this machine: a loopback or Unix socket URL, or demo's private server; none for
    /// `enqueue` of a file, which runs on the thread that reads it].
    #[arg(long, env = "WEIR_THREADS", global = true, value_parser = clap::value_parser!(u16).range(1..))]
    threads: Option<u16>,
}

/// Whether the command's Redis runs on this machine: its `--redis-url` names a loopback
/// address or a socket, or it starts a private redis-server (`demo` without a URL). A URL
/// that does not parse counts as not local; the command reports it.
fn redis_on_this_machine(matches: &clap::ArgMatches) -> bool {
    let Some((_, sub)) = matches.subcommand() else {
        return false;
    };
    match sub.try_get_one::<String>("redis_url") {
        Ok(Some(url)) => Redis::open(url).is_ok_and(|r| r.on_this_machine()),
        Ok(None) => true,
        Err(_) => false,
    }
}

/// How log lines are written to standard error.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogFormat {
    /// Human-readable lines; ANSI colours only when standard error is a terminal.
    Text,
    /// One JSON object per line.
    Json,
}

// Parsed once per process: the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Enqueue jobs from NDJSON (a file, or standard input), in bulk.
    Enqueue(enqueue::EnqueueArgs),
    /// Run a consumer of one queue or several until SIGINT/SIGTERM (or, with --drain,
    /// until they are empty).
    Work(work::WorkArgs),
    /// Show or change the limits running consumers apply within a second (no restart).
    Limits(limits::LimitsArgs),
    /// Show or change the retry rules (delays, runs in all) of the queue and its kinds.
    Retry(retry::RetryArgs),
    /// Show the queue's sizes and counters.
    Stats(stats::StatsArgs),
    /// List every queue in this Redis with its sizes and rates.
    Queues(queues::QueuesArgs),
    /// List a page of a queue's jobs in one state.
    Jobs(jobs::JobsArgs),
    /// Show, delete or run now one job (or a few) by id.
    Job(jobs::JobArgs),
    /// List the live consumers of a queue.
    Workers(queues::WorkersArgs),
    /// Inspect, requeue, delete or purge the dead-letter queue.
    Dlq(dlq::DlqArgs),
    /// Periodic jobs: add, list or remove schedules (the queue's consumers fire them).
    Cron(cron::CronArgs),
    /// Pause the queue: consumers stop fetching; running jobs finish.
    Pause(Common),
    /// Resume a paused queue.
    Resume(Common),
    /// Serve the web UI: queues, jobs, the dead-letter queue, limits and workers, with
    /// JSON under /api/.
    Ui(ui::UiArgs),
    /// Start a private redis-server, enqueue a bulk workload, drain it, print throughput.
    Demo(demo::DemoArgs),
    /// Print a shell completion script: `weir completions bash > /etc/bash_completion.d/weir`.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Load or show the `weir` Redis Functions library that producers in other languages
    /// call (FCALL weir_enqueue; docs/protocol.md).
    Functions(functions::FunctionsArgs),
    /// Create a partitioned queue (one queue spread over every shard of a Redis Cluster),
    /// or show its partitions.
    Queue(queue::QueueArgs),
}

/// Options every subcommand takes: the queue, and how to reach Redis.
#[derive(Args, Clone, Debug)]
pub struct Common {
    /// Queue name.
    #[arg(long, short, default_value = "default", global = true)]
    pub queue: String,
    /// Act on a queue never seen in this Redis (no jobs, consumers or schedules): commands
    /// that change a queue refuse one without it, in case its name is a typo.
    #[arg(long, global = true)]
    pub create: bool,
    /// How to reach Redis.
    #[command(flatten)]
    pub connect: Connect,
}

/// How to reach Redis (every subcommand; `weir work` takes its queues on their own, as it
/// may consume several).
#[derive(Args, Clone, Debug)]
pub struct Connect {
    /// Redis URL (redis:// or rediss://).
    #[arg(
        long,
        env = "REDIS_URL",
        default_value = "redis://127.0.0.1:6379",
        global = true,
        hide_env_values = true
    )]
    pub redis_url: String,
    /// With rediss://: PEM file of the CA that signed the server's certificate (instead of
    /// the system roots).
    #[arg(long, env = "WEIR_TLS_CA", global = true)]
    pub tls_ca: Option<PathBuf>,
    /// With rediss://: PEM client certificate, for servers with `tls-auth-clients yes`.
    #[arg(long, env = "WEIR_TLS_CERT", global = true, requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// With rediss://: PEM private key of the client certificate.
    #[arg(long, env = "WEIR_TLS_KEY", global = true, requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
}

impl Connect {
    /// The Redis endpoint these options name.
    pub fn redis(&self) -> crate::error::Result<Redis> {
        // `host:port` alone is a common slip; redis-rs's own message for it names its
        // internals.
        if let Some(bare) = self
            .redis_url
            .split(',')
            .map(str::trim)
            .find(|u| !u.contains("://"))
        {
            return Err(crate::usage(format!(
                "invalid Redis URL {bare:?}: it needs a scheme, like redis://{bare} (rediss:// for TLS)"
            )));
        }
        let mut tls = TlsFiles::default();
        tls.ca = self.tls_ca.clone();
        tls.cert = self.tls_cert.clone();
        tls.key = self.tls_key.clone();
        Ok(Redis::open_tls(&self.redis_url, &tls)?)
    }

    /// The options of a plain `redis://` URL.
    pub fn url(url: &str) -> Self {
        Self {
            redis_url: url.to_owned(),
            tls_ca: None,
            tls_cert: None,
            tls_key: None,
        }
    }
}

impl Common {
    /// The Redis endpoint these options name. Checks the queue name first: a bad one is a
    /// usage error, reported as such even when Redis is down.
    pub fn redis(&self) -> crate::error::Result<Redis> {
        weir::queue::keys::validate_queue_name(&self.queue)?;
        self.connect.redis()
    }

    /// An admin handle on the queue these options name.
    pub async fn queue_handle(&self) -> crate::error::Result<Queue> {
        let conn = self.redis()?.connect().await?;
        Ok(Queue::new(conn, &self.queue)?)
    }
}

/// Parses durations like `500ms`, `2s`, `5m`, `1h30m`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim())
        .map_err(|e| format!("invalid duration {s:?} ({e}); write it like 500ms, 2s or 5m"))
}

/// Parses an RFC 3339 time: `2026-12-02T00:00:00Z`, with fractional seconds or a
/// numeric offset (`2026-12-02T01:00:00+01:00`) if wanted.
pub fn parse_time(s: &str) -> Result<std::time::SystemTime, String> {
    let bad = |e: &dyn std::fmt::Display| {
        format!("invalid time {s:?} ({e}); write it in RFC 3339, like 2026-12-02T00:00:00Z")
    };
    let t = s.trim();
    let b = t.as_bytes();
    let n = b.len();
    // A numeric offset `+HH:MM`/`-HH:MM`: parse the rest as UTC, then shift by it.
    let (utc, offset) = if n > 6 && matches!(b[n - 6], b'+' | b'-') && b[n - 3] == b':' {
        let (h, m) = (t[n - 5..n - 3].parse::<u64>(), t[n - 2..].parse::<u64>());
        let (Ok(h), Ok(m)) = (h, m) else {
            return Err(bad(&"bad offset"));
        };
        let secs = Duration::from_secs(h * 3600 + m * 60);
        (format!("{}Z", &t[..n - 6]), Some((b[n - 6] == b'+', secs)))
    } else {
        (t.replace('z', "Z"), None)
    };
    let at = humantime::parse_rfc3339(&utc).map_err(|e| bad(&e))?;
    Ok(match offset {
        Some((true, d)) => at - d,
        Some((false, d)) => at + d,
        None => at,
    })
}

/// Parses a priority: high, normal or low.
pub fn parse_priority(s: &str) -> Result<Priority, String> {
    s.parse()
}

/// Logs to standard error: `WEIR_LOG` filters (default `weir=info,warn`); colours only on
/// a terminal.
fn init_logs(format: LogFormat) {
    use std::io::IsTerminal;
    let filter =
        tracing_subscriber::EnvFilter::try_from_env("WEIR_LOG").unwrap_or_else(|_| "weir=info,warn".into());
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // A closed standard error (`weir work 2>&1 | head -1`) loses the log lines, never
        // more: the default would report the write error with `eprintln!`, which panics
        // then, in whatever task logged (the signal watch among them).
        .log_internal_errors(false)
        .with_target(false);
    match format {
        LogFormat::Text => logs.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => logs.json().with_current_span(false).init(),
    }
}

fn main() -> ExitCode {
    let matches = envs::command::<Cli>().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    init_logs(cli.log_format);
    let threads = cli.threads.map_or_else(
        || weir::runtime::worker_threads(redis_on_this_machine(&matches)),
        usize::from,
    );
    // `enqueue` of a file takes one thread (`runtime::build_single`), unless --threads says
    // otherwise: a read that can wait (a pipe, a terminal) keeps the replies moving on
    // a thread of their own.
    let runtime = match &cli.command {
        Command::Enqueue(a) if cli.threads.is_none() && a.reads_a_file() => weir::runtime::build_single(),
        _ => weir::runtime::build(threads),
    };
    let runtime = match runtime {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(exit::FAILURE);
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Enqueue(a) => enqueue::run(a).await,
            Command::Work(a) => work::run(a).await.map(|_| ExitCode::SUCCESS),
            Command::Limits(a) => limits::run(a).await,
            Command::Retry(a) => retry::run(a).await,
            Command::Stats(a) => stats::run(a).await,
            Command::Queues(a) => queues::run(a).await,
            Command::Jobs(a) => jobs::run_list(a).await,
            Command::Job(a) => jobs::run_job(a).await,
            Command::Workers(a) => queues::run_workers(a).await,
            Command::Dlq(a) => dlq::run(a).await,
            Command::Cron(a) => cron::run(a).await,
            Command::Pause(c) => queue::pause(c, true).await,
            Command::Resume(c) => queue::pause(c, false).await,
            Command::Ui(a) => ui::run(a).await,
            Command::Demo(a) => demo::run(a).await,
            Command::Completions { shell } => {
                let mut cmd = envs::command::<Cli>();
                clap_complete::generate(shell, &mut cmd, "weir", &mut std::io::stdout());
                Ok(ExitCode::SUCCESS)
            }
            Command::Functions(a) => functions::run(a).await,
            Command::Queue(a) => queue::run(a).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            use std::io::Write;
            // A closed standard error must not turn the exit code into a panic's.
            let _ = writeln!(std::io::stderr(), "error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_in_utc_and_with_offsets() {
        let utc = parse_time("2026-12-02T00:00:00Z").unwrap();
        assert_eq!(parse_time("2026-12-02T01:00:00+01:00").unwrap(), utc);
        assert_eq!(parse_time("2026-12-01T19:30:00-04:30").unwrap(), utc);
        assert_eq!(
            parse_time("2026-12-02T00:00:00.250Z").unwrap(),
            utc + Duration::from_millis(250)
        );
        for bad in [
            "tomorrow",
            "2026-12-02",
            "2026-13-02T00:00:00Z",
            "2026-12-02T00:00:00+1:00",
        ] {
            let e = parse_time(bad).unwrap_err();
            assert!(e.contains("RFC 3339"), "{bad}: {e}");
        }
    }
}
