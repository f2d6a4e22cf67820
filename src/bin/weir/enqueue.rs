//! `weir enqueue`: NDJSON in, bulk enqueue calls out, bad lines reported by number.

use crate::{Common, parse_duration, parse_priority};
use clap::Args;
use futures_util::StreamExt;
use futures_util::stream::FuturesOrdered;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::io::BufRead;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use weir::producer::{BULK_CHUNK, BULK_PIPELINE};
use weir::scripts::EnqueueArg;
use weir::{NewJob, Priority, Producer};

#[derive(Args, Debug)]
pub struct EnqueueArgs {
    #[command(flatten)]
    pub common: Common,
    /// NDJSON file; standard input when absent or `-`.
    pub file: Option<std::path::PathBuf>,
    /// Every line is a bare payload of this kind.
    #[arg(long)]
    pub kind: Option<String>,
    /// Default delay before jobs are ready (e.g. 30s).
    #[arg(long, value_parser = parse_duration)]
    pub delay: Option<Duration>,
    /// Default priority: high, normal or low.
    #[arg(long, value_parser = parse_priority, default_value = "normal")]
    pub priority: Priority,
    /// Default attempts per job.
    #[arg(long, default_value_t = weir::producer::DEFAULT_MAX_ATTEMPTS)]
    pub max_attempts: u32,
    /// Envelope size limit in bytes.
    #[arg(long, default_value_t = weir::envelope::DEFAULT_MAX_ENVELOPE_BYTES)]
    pub max_envelope_bytes: usize,
}

/// One NDJSON line without `--kind`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    kind: String,
    payload: Box<RawValue>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    priority: Option<String>,
    /// A duration string ("30s") or milliseconds.
    #[serde(default)]
    delay: Option<serde_json::Value>,
    #[serde(default)]
    max_attempts: Option<u32>,
}

/// A chunk of prepared jobs and the line numbers they came from.
struct Chunk {
    args: Vec<EnqueueArg>,
    lines: Vec<usize>,
}

pub async fn run(a: EnqueueArgs) -> weir::Result<ExitCode> {
    let reader: Box<dyn BufRead + Send> = match &a.file {
        Some(p) if p.as_os_str() != "-" => Box::new(std::io::BufReader::with_capacity(
            1 << 20,
            std::fs::File::open(p)
                .map_err(|e| weir::Error::Config(format!("cannot open {}: {e}", p.display())))?,
        )),
        _ => Box::new(std::io::BufReader::with_capacity(1 << 20, std::io::stdin())),
    };
    // After the file opened, so a wrong path is reported even when Redis is down.
    let conn = a.common.redis()?.connect().await?;
    let producer = Producer::new(conn, &a.common.queue)?
        .max_envelope_bytes(a.max_envelope_bytes)
        .default_max_attempts(a.max_attempts);
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {human_pos} jobs enqueued ({per_sec}) {elapsed}").unwrap(),
    );
    bar.enable_steady_tick(Duration::from_millis(200));

    let started = Instant::now();
    let (mut loaded, mut dups, mut bad, mut failed) = (0u64, Vec::new(), Vec::new(), Vec::new());
    let mut inflight = FuturesOrdered::new();
    let mut lines = reader.lines();
    let mut line_no = 0usize;
    let now = weir::envelope::unix_ms();
    let mut buf = Vec::new();
    loop {
        let mut chunk = Chunk {
            args: Vec::with_capacity(BULK_CHUNK),
            lines: Vec::with_capacity(BULK_CHUNK),
        };
        while chunk.args.len() < BULK_CHUNK {
            let Some(line) = lines.next() else { break };
            line_no += 1;
            let line = match line {
                Ok(l) => l,
                Err(e) => {
                    bad.push((line_no, format!("unreadable: {e}")));
                    continue;
                }
            };
            if line.trim().is_empty() {
                continue;
            }
            match to_job(&a, &line)
                .and_then(|j| producer.prepare(j, now, &mut buf).map_err(|e| e.to_string()))
            {
                Ok(arg) => {
                    chunk.args.push(arg);
                    chunk.lines.push(line_no);
                }
                Err(e) => bad.push((line_no, e)),
            }
        }
        let done = chunk.args.len() < BULK_CHUNK;
        if !chunk.args.is_empty() {
            let p = producer.clone();
            inflight.push_back(async move {
                let r = enqueue_retrying(&p, &chunk.args).await;
                (chunk.lines, r)
            });
        }
        while inflight.len() >= BULK_PIPELINE || (done && !inflight.is_empty()) {
            let Some((lines, r)) = inflight.next().await else {
                break;
            };
            match r {
                Ok((n, d)) => {
                    loaded += n;
                    bar.inc(n);
                    dups.extend(d);
                }
                Err(e) => failed.push((lines, e)),
            }
        }
        if done {
            break;
        }
    }
    bar.finish_and_clear();
    let secs = started.elapsed().as_secs_f64();
    println!(
        "enqueued {loaded} jobs into {} in {secs:.2}s ({:.0} jobs/s)",
        a.common.queue,
        loaded as f64 / secs.max(1e-9)
    );
    report_problems(&dups, &bad, &failed)
}

/// Tries a chunk up to [`CHUNK_TRIES`] times, backing off from 100 ms to 2 s: a dropped
/// connection or a restarting Redis costs a retry, not the chunk. A retry of a chunk whose
/// first call landed but whose reply was lost stores the same ids again (duplicates are
/// reported for ids given in the input; generated ids may be queued twice).
async fn enqueue_retrying(p: &Producer, args: &[EnqueueArg]) -> weir::Result<(u64, Vec<String>)> {
    let mut backoff = Duration::from_millis(100);
    let mut tries = 1;
    loop {
        match p.enqueue_args(args).await {
            Err(e) if tries < CHUNK_TRIES => {
                if tries == 1 {
                    tracing::warn!(error = %e, "enqueue call failed; retrying");
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
                tries += 1;
            }
            r => return r,
        }
    }
}

/// Calls per chunk before its lines are reported as not loaded (about 15 s of retries).
const CHUNK_TRIES: u32 = 10;

fn to_job(a: &EnqueueArgs, line: &str) -> Result<NewJob, String> {
    if let Some(kind) = &a.kind {
        let payload =
            RawValue::from_string(line.to_owned()).map_err(|e| format!("payload is not JSON: {e}"))?;
        let mut job = NewJob::from_raw(kind.clone(), payload).priority(a.priority);
        if let Some(d) = a.delay {
            job = job.delay(d);
        }
        return Ok(job);
    }
    let l: Line = serde_json::from_str(line).map_err(|e| format!("not a job line: {e}"))?;
    let mut job = NewJob::from_raw(l.kind, l.payload).priority(a.priority);
    if let Some(p) = l.priority {
        job = job.priority(p.parse()?);
    }
    match l.delay {
        Some(serde_json::Value::String(s)) => job = job.delay(parse_duration(&s)?),
        Some(serde_json::Value::Number(n)) => {
            let ms = n
                .as_u64()
                .ok_or_else(|| format!("delay {n} must be whole milliseconds"))?;
            job = job.delay(Duration::from_millis(ms));
        }
        Some(other) => return Err(format!("delay {other} must be a duration string or milliseconds")),
        None => {
            if let Some(d) = a.delay {
                job = job.delay(d);
            }
        }
    }
    if let Some(id) = l.id {
        job = job.id(id);
    }
    if let Some(n) = l.max_attempts {
        job = job.max_attempts(n);
    }
    Ok(job)
}

type Failed = Vec<(Vec<usize>, weir::Error)>;

fn report_problems(dups: &[String], bad: &[(usize, String)], failed: &Failed) -> weir::Result<ExitCode> {
    if !dups.is_empty() {
        let shown: Vec<_> = dups.iter().take(10).map(String::as_str).collect();
        eprintln!(
            "skipped {} jobs whose id already exists: {}",
            dups.len(),
            shown.join(", ")
        );
    }
    for (n, e) in bad {
        eprintln!("line {n}: {e}");
    }
    for (lines, e) in failed {
        eprintln!("lines {} to {} not loaded: {e}", lines[0], lines[lines.len() - 1]);
    }
    let not_loaded = bad.len() + failed.iter().map(|(l, _)| l.len()).sum::<usize>();
    if not_loaded > 0 {
        eprintln!("{not_loaded} lines not loaded");
        return Ok(ExitCode::from(2));
    }
    Ok(ExitCode::SUCCESS)
}
