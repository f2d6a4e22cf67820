//! `weir enqueue`: NDJSON in, streamed (memory bounded by the chunks in flight, whatever
//! the input's size), bulk enqueue calls out, bad lines reported by number. A read error
//! ends the input: exit 1; lines not loaded: exit 3.

use crate::{Common, parse_duration, parse_priority, parse_time};
use clap::Args;
use futures_util::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::{BufRead, BufReader};
use std::os::fd::AsFd;

mod job_line;
mod lines;
use job_line::{plain_parts, to_job};
use lines::Lines;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use weir::queue::producer::Load;
use weir::{NewJob, Priority, Producer};

#[derive(Args, Debug)]
pub(crate) struct EnqueueArgs {
    #[command(flatten)]
    pub common: Common,
    /// NDJSON file; standard input when absent or `-`.
    pub file: Option<std::path::PathBuf>,
    /// Every line is a bare payload of this kind.
    #[arg(long)]
    pub kind: Option<String>,
    /// Default delay before jobs are ready (e.g. 30s).
    #[arg(long, value_parser = parse_duration, conflicts_with = "at")]
    pub delay: Option<Duration>,
    /// Default time jobs become ready, RFC 3339 (e.g. 2026-12-02T00:00:00Z).
    #[arg(long, value_parser = parse_time)]
    pub at: Option<std::time::SystemTime>,
    /// Default priority: high, normal or low.
    #[arg(long, value_parser = parse_priority, default_value = "normal")]
    pub priority: Priority,
    /// Default attempts per job.
    #[arg(long, default_value_t = weir::queue::producer::DEFAULT_MAX_ATTEMPTS)]
    pub max_attempts: u32,
    /// Envelope size limit in bytes.
    #[arg(long, default_value_t = weir::queue::envelope::DEFAULT_MAX_ENVELOPE_BYTES)]
    pub max_envelope_bytes: usize,
    /// Default uniqueness window (e.g. 1h): a job whose unique key (its `unique_key`, else
    /// its id) was enqueued within the window, by any producer, is skipped as a duplicate,
    /// even if that job is done.
    #[arg(long, value_parser = parse_duration)]
    pub unique_for: Option<Duration>,
    /// Default job key (a tenant, customer or destination host) that per-key limits
    /// count jobs against: 1 to 128 characters from A-Z a-z 0-9 _ . : -. A line's `key`
    /// wins over it.
    #[arg(long, value_parser = parse_key)]
    pub key: Option<String>,
    /// Write compact envelopes: 61 bytes fewer per job, about a fifth less of Redis's CPU
    /// to store a small one. Only for queues whose consumers all run this version or later
    /// (older ones dead-letter such jobs as undecodable).
    #[arg(long)]
    pub compact: bool,
    /// Durability: each call's jobs count as enqueued only once this many replicas of
    /// their primary confirm them (WAIT), so they survive a failover of that primary. A
    /// call that gets fewer within --wait-timeout fails (its jobs are stored, not sent
    /// again) and the exit code says so.
    #[arg(long, default_value_t = 0)]
    pub wait_replicas: usize,
    /// How long --wait-replicas waits for the replicas.
    #[arg(long, value_parser = parse_duration, default_value = "1s", requires = "wait_replicas")]
    pub wait_timeout: Duration,
}

impl EnqueueArgs {
    /// Whether the input is a regular file (named, or given as standard input), whose
    /// reads never wait on a writer.
    pub(crate) fn reads_a_file(&self) -> bool {
        let meta = match &self.file {
            Some(p) if p.as_os_str() != "-" => std::fs::metadata(p),
            _ => std::io::stdin()
                .as_fd()
                .try_clone_to_owned()
                .and_then(|fd| std::fs::File::from(fd).metadata()),
        };
        meta.is_ok_and(|m| m.is_file())
    }
}

pub(crate) async fn run(a: EnqueueArgs) -> crate::error::Result<ExitCode> {
    let (name, reader): (String, Box<dyn BufRead + Send>) = match &a.file {
        Some(p) if p.as_os_str() != "-" => {
            let file = std::fs::File::open(p)
                .map_err(|e| crate::failure(format!("cannot open {}: {e}", p.display())))?;
            let mut reader = BufReader::with_capacity(1 << 20, file);
            // A first read now, so a directory or a device error is reported even when
            // Redis is down (standard input is not read ahead: it may not have come yet).
            reader
                .fill_buf()
                .map_err(|e| crate::failure(format!("cannot read {}: {e}", p.display())))?;
            (p.display().to_string(), Box::new(reader))
        }
        _ => (
            "standard input".into(),
            Box::new(BufReader::with_capacity(1 << 20, std::io::stdin())),
        ),
    };
    // After the file opened, so a wrong path is reported even when Redis is down.
    let conn = a.common.redis()?.connect().await?;
    // Reads the queue's partition map: a partitioned queue's jobs spread over its
    // partitions.
    let producer = Producer::open(conn, &a.common.queue)
        .await?
        .max_envelope_bytes(a.max_envelope_bytes)
        .default_max_attempts(a.max_attempts)
        .compact_envelopes(a.compact)
        .wait_replicas(a.wait_replicas, a.wait_timeout);
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {human_pos} jobs enqueued ({per_sec}) {elapsed}").unwrap(),
    );
    bar.enable_steady_tick(Duration::from_millis(200));

    let started = Instant::now();
    let loaded = load(&a, reader, &producer, &bar).await;
    bar.finish_and_clear();
    let loaded = loaded?;
    let secs = started.elapsed().as_secs_f64();
    println!(
        "enqueued {} into {} in {secs:.2}s ({:.0} jobs/s)",
        crate::output::count(loaded.stored, "job"),
        a.common.queue,
        loaded.stored as f64 / secs.max(1e-9)
    );
    report_problems(&loaded, &name)
}

/// What [`load`] did with the input.
#[derive(Default)]
struct Loaded {
    /// Jobs stored.
    stored: u64,
    /// Ids refused because a job with that id exists.
    dups: Vec<String>,
    /// Lines that are not jobs: (line number, why).
    bad: Vec<(usize, String)>,
    /// Chunks that failed after their retries: (their line numbers, the last error).
    failed: Vec<(Vec<usize>, weir::Error)>,
    /// Redis refused a chunk for memory: the input stopped there. The last line taken
    /// into a chunk (the lines after it were not read, or not sent).
    out_of_memory: Option<usize>,
    /// The read error that ended the input early.
    read_error: Option<std::io::Error>,
}

/// Streams the input line by line into the producer's bulk path (which chunks, keeps calls
/// in flight, retries each chunk, and pulls lines only as calls free up, so memory is
/// bounded by the chunks in flight), keeping each job's line number for the report.
async fn load(
    a: &EnqueueArgs,
    reader: Box<dyn BufRead + Send>,
    producer: &Producer,
    bar: &ProgressBar,
) -> weir::Result<Loaded> {
    let mut out = Loaded::default();
    let bad = &mut out.bad;
    // Set when Redis refuses a chunk for memory: no more input is read (the chunks in
    // flight end, refused at once too), since every write would be refused.
    let full = std::sync::atomic::AtomicBool::new(false);
    let mut lines = Lines {
        reader,
        line_no: 0,
        max: a.max_envelope_bytes,
        error: &mut out.read_error,
        line: Vec::new(),
    };
    // Each line lent by `lines`, pushed into the load as its job, or reported as bad.
    let push = |load: &mut Load<'_, usize>, line_no: usize, line: Result<&[u8], String>| {
        let line = match line.map(std::str::from_utf8) {
            Err(e) => return Err(e),
            Ok(Err(e)) => return Err(format!("not UTF-8: {e}")),
            Ok(Ok(l)) if l.trim().is_empty() => return Ok(()),
            Ok(Ok(l)) => l,
        };
        match plain_parts(a, line) {
            // The job `to_job` would build, written without building it.
            Some(parts) => load.push_parts(line_no, parts).map_err(|e| e.to_string()),
            None => to_job(a, line.to_owned()).and_then(|j| load.push(line_no, j).map_err(|e| e.to_string())),
        }
    };
    let fill = |load: &mut Load<'_, usize>| {
        if full.load(std::sync::atomic::Ordering::Relaxed) {
            return false;
        }
        match lines.with_next(|n, line| push(load, n, line).map_err(|e| (n, e))) {
            None => false,
            Some(r) => {
                if let Err(e) = r {
                    bad.push(e);
                }
                true
            }
        }
    };
    let mut chunks = Box::pin(producer.load(a.priority, a.key.as_deref(), fill)?);
    let mut last_line = 0;
    while let Some(chunk) = chunks.next().await {
        last_line = last_line.max(chunk.tags.last().copied().unwrap_or(0));
        match chunk.result {
            Ok(r) => {
                out.stored += r.enqueued;
                bar.inc(r.enqueued);
                out.dups.extend(r.duplicates);
            }
            Err(e) => {
                if matches!(e, weir::Error::OutOfMemory(_)) {
                    full.store(true, std::sync::atomic::Ordering::Relaxed);
                    out.out_of_memory = Some(0);
                }
                out.failed.push((chunk.tags, e));
            }
        }
    }
    out.out_of_memory = out.out_of_memory.map(|_| last_line);
    drop(chunks); // it reads the input, and so holds `out.bad` and `out.read_error`
    Ok(out)
}

/// `--key`, checked by the library's own check of a job key, so that a bad one is a usage
/// error rather than a bad line for every line of the input.
fn parse_key(key: &str) -> Result<String, String> {
    let job = NewJob::from_json("k", "null")
        .map_err(|e| e.to_string())?
        .key(key);
    Producer::prepare_offline(job, 0, &mut Vec::new()).map_err(|e| e.to_string())?;
    Ok(key.to_owned())
}

/// The one line that reports a load Redis refused for memory: what is stored, what is
/// not, why, and what to do.
fn out_of_memory_line(loaded: &Loaded, last: usize) -> String {
    let ranges: Vec<String> = loaded
        .failed
        .iter()
        .map(|(lines, _)| format!("{}-{}", lines[0], lines[lines.len() - 1]))
        .collect();
    format!(
        "enqueue stopped: Redis is out of memory and refuses writes (maxmemory reached, policy noeviction); \
         {} stored; not loaded: lines {} and every line after {last}; \
         drain queues, raise maxmemory (CONFIG SET maxmemory) or free memory, then enqueue those lines",
        crate::output::count(loaded.stored, "job"),
        ranges.join(", "),
    )
}

/// Reports what was not loaded; the exit code: 1 if the input could not be read to its
/// end, 3 if some lines were not loaded, else 0.
fn report_problems(loaded: &Loaded, input: &str) -> crate::error::Result<ExitCode> {
    let Loaded {
        dups,
        bad,
        failed,
        read_error,
        ..
    } = loaded;
    if !dups.is_empty() {
        let shown: Vec<_> = dups.iter().take(10).map(String::as_str).collect();
        eprintln!(
            "skipped {} (a job with the id exists, or the unique key is held): {}",
            crate::output::count(dups.len() as u64, "duplicate job"),
            shown.join(", ")
        );
    }
    for (n, e) in bad {
        eprintln!("line {n}: {e}");
    }
    if let Some(last) = loaded.out_of_memory {
        eprintln!("{}", out_of_memory_line(loaded, last));
        return Ok(ExitCode::from(crate::exit::PARTIAL));
    }
    for (lines, e) in failed {
        eprintln!("lines {} to {} not loaded: {e}", lines[0], lines[lines.len() - 1]);
    }
    let not_loaded = bad.len() + failed.iter().map(|(l, _)| l.len()).sum::<usize>();
    if not_loaded > 0 {
        eprintln!("{} not loaded", crate::output::count(not_loaded as u64, "line"));
    }
    if let Some(e) = read_error {
        return Err(crate::failure(format!("cannot read {input}: {e}")));
    }
    if not_loaded > 0 {
        return Ok(ExitCode::from(crate::exit::PARTIAL));
    }
    Ok(ExitCode::SUCCESS)
}
