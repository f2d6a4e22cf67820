//! `weir-loadtest pauses`: what the machine does to a thread that never waits. One thread
//! per core reads the monotonic clock in a loop for `--duration`; a gap between two reads
//! is time the thread was not running (preempted by another thread, an interrupt, or, on a
//! virtual machine, the host running something else). Run on an otherwise idle machine, it
//! shows the pauses any work in progress meets: a job pipeline whose Redis, producer or
//! consumer thread is paused mid-work waits that long, whatever the consumer does. Latency
//! figures (`steady`) read against it.

use crate::report::round;
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug, Clone)]
pub(crate) struct PausesArgs {
    /// How long to watch.
    #[arg(long, default_value = "3s", value_parser = crate::cli::parse_duration)]
    pub duration: Duration,
    /// Watching threads [default: one per core].
    #[arg(long)]
    pub threads: Option<usize>,
    /// Only the RESULT line.
    #[arg(short, long)]
    pub quiet: bool,
}

/// Gaps counted, by length: at least 0.5, 1, 2 and 5 ms.
const BOUNDS_US: [u64; 4] = [500, 1_000, 2_000, 5_000];

#[derive(Debug, Default, Clone, serde::Serialize)]
struct Watch {
    /// Gaps of at least each of [`BOUNDS_US`].
    over_0_5ms: u64,
    over_1ms: u64,
    over_2ms: u64,
    over_5ms: u64,
    longest_ms: f64,
    /// Share of the time lost in gaps of 0.5 ms or more.
    lost_pct: f64,
}

fn watch(length: Duration) -> Watch {
    let start = Instant::now();
    let (mut last, mut over, mut longest, mut lost) = (start, [0u64; 4], Duration::ZERO, Duration::ZERO);
    loop {
        let now = Instant::now();
        let gap = now - last;
        last = now;
        let us = gap.as_micros() as u64;
        if us >= BOUNDS_US[0] {
            for (n, b) in over.iter_mut().zip(BOUNDS_US) {
                *n += u64::from(us >= b);
            }
            longest = longest.max(gap);
            lost += gap;
        }
        if now - start >= length {
            break;
        }
    }
    let whole = start.elapsed().as_secs_f64().max(1e-9);
    Watch {
        over_0_5ms: over[0],
        over_1ms: over[1],
        over_2ms: over[2],
        over_5ms: over[3],
        longest_ms: round(longest.as_secs_f64() * 1e3, 3),
        lost_pct: round(lost.as_secs_f64() / whole * 100.0, 3),
    }
}

pub(crate) fn run(a: &PausesArgs) -> anyhow::Result<()> {
    let n = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let length = a.duration;
    let watches: Vec<Watch> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..n).map(|_| s.spawn(move || watch(length))).collect();
        hs.into_iter().map(|h| h.join().unwrap_or_default()).collect()
    });
    let secs = length.as_secs_f64().max(1e-9);
    for (i, w) in watches.iter().enumerate().filter(|_| !a.quiet) {
        eprintln!(
            "thread {i}: pauses ≥1 ms {:.1}/s, ≥2 ms {:.1}/s, ≥5 ms {:.1}/s, longest {:.2} ms, {:.2}% of the time lost",
            w.over_1ms as f64 / secs,
            w.over_2ms as f64 / secs,
            w.over_5ms as f64 / secs,
            w.longest_ms,
            w.lost_pct
        );
    }
    let result = serde_json::json!({
        "scenario": "pauses",
        "threads": n,
        "duration_s": round(secs, 3),
        "per_thread": watches,
    });
    println!("RESULT {result}");
    Ok(())
}
