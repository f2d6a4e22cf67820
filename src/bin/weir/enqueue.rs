//! `weir enqueue`: NDJSON in, bulk enqueue calls out, bad lines reported by number.

use crate::{Common, parse_duration, parse_priority};
use clap::Args;
use futures_util::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::io::BufRead;
use std::process::ExitCode;
use std::time::{Duration, Instant};
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

pub async fn run(a: EnqueueArgs) -> weir::Result<ExitCode> {
    let reader: Box<dyn BufRead + Send> = match &a.file {
        Some(p) if p.as_os_str() != "-" => Box::new(std::io::BufReader::with_capacity(
            1 << 20,
            std::fs::File::open(p)
                .map_err(|e| crate::failure(format!("cannot open {}: {e}", p.display())))?,
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
    let loaded = load(&a, reader, &producer, &bar).await;
    bar.finish_and_clear();
    let secs = started.elapsed().as_secs_f64();
    println!(
        "enqueued {} jobs into {} in {secs:.2}s ({:.0} jobs/s)",
        loaded.stored,
        a.common.queue,
        loaded.stored as f64 / secs.max(1e-9)
    );
    report_problems(&loaded)
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
}

/// Reads the input line by line into the producer's bulk path (which chunks, keeps calls
/// in flight and retries each chunk), keeping each job's line number for the report.
async fn load(
    a: &EnqueueArgs,
    reader: Box<dyn BufRead + Send>,
    producer: &Producer,
    bar: &ProgressBar,
) -> Loaded {
    let mut out = Loaded::default();
    let now = weir::envelope::unix_ms();
    let mut buf = Vec::new();
    let bad = &mut out.bad;
    let jobs = reader.lines().enumerate().filter_map(|(i, line)| {
        let line_no = i + 1;
        let job = match line {
            Err(e) => Err(format!("unreadable: {e}")),
            Ok(l) if l.trim().is_empty() => return None,
            Ok(l) => {
                to_job(a, &l).and_then(|j| producer.prepare(j, now, &mut buf).map_err(|e| e.to_string()))
            }
        };
        match job {
            Ok(arg) => Some((line_no, arg)),
            Err(e) => {
                bad.push((line_no, e));
                None
            }
        }
    });
    let mut chunks = Box::pin(producer.enqueue_tagged(jobs));
    while let Some(chunk) = chunks.next().await {
        match chunk.result {
            Ok(r) => {
                out.stored += r.enqueued;
                bar.inc(r.enqueued);
                out.dups.extend(r.duplicates);
            }
            Err(e) => out.failed.push((chunk.tags, e)),
        }
    }
    drop(chunks); // it reads the input, and so holds `out.bad`
    out
}

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

fn report_problems(loaded: &Loaded) -> weir::Result<ExitCode> {
    let Loaded {
        dups, bad, failed, ..
    } = loaded;
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
        return Ok(ExitCode::from(crate::exit::PARTIAL));
    }
    Ok(ExitCode::SUCCESS)
}
