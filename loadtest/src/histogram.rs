//! A lock-free latency histogram: log-linear buckets of atomic counters, so hundreds of
//! worker tasks can record at once without a lock (a `Mutex<hdrhistogram>` would be
//! contended at 100k+ records/s on two cores). Relative error ≤ 1/32 (about 3%); the
//! maximum is kept exactly.

use std::sync::atomic::{AtomicU64, Ordering};

const SUB_BITS: u32 = 5;
const SUB: u64 = 1 << SUB_BITS;
/// Values (µs) up to 2^40 µs (12 days) are kept; larger ones land in the last bucket.
const BUCKETS: usize = ((40 - SUB_BITS as usize) + 1) * SUB as usize;

/// Latencies in microseconds.
#[derive(Debug)]
pub(crate) struct Histogram {
    counts: Box<[AtomicU64]>,
    max: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self {
            counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            max: AtomicU64::new(0),
        }
    }
}

fn bucket_of(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let shift = 63 - v.leading_zeros() - SUB_BITS;
    let i = ((shift as u64 + 1) * SUB + ((v >> shift) - SUB)) as usize;
    i.min(BUCKETS - 1)
}

/// The middle of bucket `i`, the value reported for every record in it.
fn value_of(i: usize) -> u64 {
    let i = i as u64;
    if i < SUB {
        return i;
    }
    let shift = i / SUB - 1;
    let low = (SUB + i % SUB) << shift;
    low + ((1u64 << shift) >> 1)
}

/// Percentiles read from a histogram, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub(crate) struct Summary {
    /// Records.
    pub count: u64,
    /// Median.
    pub p50_ms: f64,
    /// 95th percentile.
    pub p95_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Largest record (exact).
    pub max_ms: f64,
}

impl Histogram {
    /// Records one latency.
    pub(crate) fn record(&self, us: u64) {
        self.counts[bucket_of(us)].fetch_add(1, Ordering::Relaxed);
        // Read first: the max rarely changes, and a read does not bounce the cache line
        // between worker threads the way a write does.
        if us > self.max.load(Ordering::Relaxed) {
            self.max.fetch_max(us, Ordering::Relaxed);
        }
    }

    /// Adds bucket counts taken from another histogram ([`Histogram::take`]).
    pub(crate) fn merge_counts(&self, counts: &[u64], max: u64) {
        for (c, &n) in self.counts.iter().zip(counts) {
            if n > 0 {
                c.fetch_add(n, Ordering::Relaxed);
            }
        }
        self.max.fetch_max(max, Ordering::Relaxed);
    }

    /// Empties the histogram and returns what it held: (counts, max).
    pub(crate) fn take(&self) -> (Vec<u64>, u64) {
        let counts = self.counts.iter().map(|c| c.swap(0, Ordering::Relaxed)).collect();
        (counts, self.max.swap(0, Ordering::Relaxed))
    }

    /// Percentiles of everything recorded.
    pub(crate) fn summary(&self) -> Summary {
        let counts: Vec<u64> = self.counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        summarize(&counts, self.max.load(Ordering::Relaxed))
    }
}

/// Percentiles of bucket `counts` (as returned by [`Histogram::take`]).
pub(crate) fn summarize(counts: &[u64], max_us: u64) -> Summary {
    let count: u64 = counts.iter().sum();
    if count == 0 {
        return Summary::default();
    }
    let at = |q: f64| {
        let rank = ((count as f64 * q).ceil() as u64).clamp(1, count);
        let mut seen = 0;
        for (i, &n) in counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return value_of(i).min(max_us) as f64 / 1000.0;
            }
        }
        max_us as f64 / 1000.0
    };
    Summary {
        count,
        p50_ms: at(0.50),
        p95_ms: at(0.95),
        p99_ms: at(0.99),
        max_ms: max_us as f64 / 1000.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_tight() {
        let mut last = 0;
        for v in (0..100_000u64).chain([1 << 30, 1 << 39]) {
            let b = bucket_of(v);
            assert!(b >= last, "bucket order at {v}");
            last = b;
            let mid = value_of(b) as f64;
            assert!((mid - v as f64).abs() <= v as f64 / 32.0 + 1.0, "{v} → {mid}");
        }
    }

    #[test]
    fn percentiles_of_a_uniform_spread() {
        let h = Histogram::default();
        for ms in 1..=1000u64 {
            h.record(ms * 1000);
        }
        let s = h.summary();
        assert_eq!(s.count, 1000);
        assert!((s.p50_ms - 500.0).abs() < 20.0, "{s:?}");
        assert!((s.p99_ms - 990.0).abs() < 35.0, "{s:?}");
        assert_eq!(s.max_ms, 1000.0);
        let (counts, max) = h.take();
        assert_eq!(summarize(&counts, max), s);
        assert_eq!(h.summary().count, 0);
    }
}
