//! Accounting: which jobs ran, and how often. Every job the harness enqueues has the id
//! `lt-<index>`, so a handler can mark one bit per job instead of keeping a set of
//! strings: two bitmaps of atomic words (seen once, seen twice) cost 2 bits per job and
//! one `fetch_or` per run, lock-free.

use std::sync::atomic::{AtomicU64, Ordering};

/// Prefix of every job id the harness enqueues.
pub(crate) const ID_PREFIX: &str = "lt-";

/// The id of job `index` (written without the formatting machinery: the feed builds one
/// per job).
pub(crate) fn job_id(index: u64) -> String {
    let mut n = itoa::Buffer::new();
    let digits = n.format(index);
    let mut id = String::with_capacity(ID_PREFIX.len() + digits.len());
    id.push_str(ID_PREFIX);
    id.push_str(digits);
    id
}

/// The index in an id built by [`job_id`]; `None` for any other id.
pub(crate) fn parse_index(id: &str) -> Option<u64> {
    id.strip_prefix(ID_PREFIX)?.parse().ok()
}

/// Seen-once and seen-twice bitmaps over job indexes `0..capacity`.
#[derive(Debug)]
pub(crate) struct Tracker {
    once: Vec<AtomicU64>,
    twice: Vec<AtomicU64>,
    extra_runs: AtomicU64,
    foreign: AtomicU64,
    capacity: u64,
}

/// What the bitmaps say at the end of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Tally {
    /// Jobs enqueued but never processed.
    pub lost: u64,
    /// Jobs processed more than once.
    pub duplicates: u64,
    /// Runs beyond the first, over all jobs (≥ `duplicates`).
    pub extra_runs: u64,
    /// Processed ids that the harness did not enqueue (index out of range or bad id).
    pub foreign: u64,
}

impl Tally {
    /// Both runs' findings together.
    pub(crate) fn plus(self, o: Tally) -> Tally {
        Tally {
            lost: self.lost + o.lost,
            duplicates: self.duplicates + o.duplicates,
            extra_runs: self.extra_runs + o.extra_runs,
            foreign: self.foreign + o.foreign,
        }
    }
}

impl Tracker {
    /// Bitmaps for jobs `0..capacity`.
    pub(crate) fn new(capacity: u64) -> Self {
        let words = capacity.div_ceil(64) as usize;
        Self {
            once: (0..words).map(|_| AtomicU64::new(0)).collect(),
            twice: (0..words).map(|_| AtomicU64::new(0)).collect(),
            extra_runs: AtomicU64::new(0),
            foreign: AtomicU64::new(0),
            capacity,
        }
    }

    /// Records one run of job `index` (`None`: an id the harness did not make).
    pub(crate) fn mark(&self, index: Option<u64>) {
        let Some(i) = index.filter(|&i| i < self.capacity) else {
            self.foreign.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let (word, bit) = ((i / 64) as usize, 1u64 << (i % 64));
        // Relaxed is enough: the bits are only read after every worker has stopped.
        if self.once[word].fetch_or(bit, Ordering::Relaxed) & bit != 0 {
            self.twice[word].fetch_or(bit, Ordering::Relaxed);
            self.extra_runs.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts over jobs `0..enqueued`; call once every worker has stopped.
    pub(crate) fn tally(&self, enqueued: u64) -> Tally {
        let enqueued = enqueued.min(self.capacity);
        let full = (enqueued / 64) as usize;
        let mut seen = 0u64;
        for w in &self.once[..full] {
            seen += u64::from(w.load(Ordering::Relaxed).count_ones());
        }
        let rest = enqueued % 64;
        if rest > 0 {
            let mask = (1u64 << rest) - 1;
            seen += u64::from((self.once[full].load(Ordering::Relaxed) & mask).count_ones());
        }
        let duplicates = self
            .twice
            .iter()
            .map(|w| u64::from(w.load(Ordering::Relaxed).count_ones()))
            .sum();
        Tally {
            lost: enqueued - seen,
            duplicates,
            extra_runs: self.extra_runs.load(Ordering::Relaxed),
            foreign: self.foreign.load(Ordering::Relaxed),
        }
    }
}

/// What tracking costs per job, in ns of one thread: parse `n` ids and mark them, as a
/// handler does. A figure the neighbours' load on a shared machine barely moves, unlike
/// the drain rates it is reported beside.
pub(crate) fn cost_ns_per_job(n: u64) -> f64 {
    let n = n.clamp(1, 1_000_000);
    let ids: Vec<String> = (0..n).map(job_id).collect();
    let t = Tracker::new(n);
    let start = std::time::Instant::now();
    for id in &ids {
        t.mark(parse_index(std::hint::black_box(id)));
    }
    let ns = start.elapsed().as_nanos() as f64 / n as f64;
    std::hint::black_box(t.tally(n));
    ns
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip() {
        assert_eq!(parse_index(&job_id(123_456)), Some(123_456));
        assert_eq!(parse_index("other-1"), None);
        assert_eq!(parse_index("lt-x"), None);
    }

    #[test]
    fn counts_lost_duplicates_and_foreign() {
        let t = Tracker::new(130);
        for i in (0..130).filter(|i| i % 10 != 0) {
            t.mark(Some(i));
        }
        t.mark(Some(5));
        t.mark(Some(5));
        t.mark(Some(129));
        t.mark(Some(130));
        t.mark(None);
        let tally = t.tally(130);
        assert_eq!(tally.lost, 13, "0, 10, …, 120 never ran");
        assert_eq!(tally.duplicates, 2, "5 and 129");
        assert_eq!(tally.extra_runs, 3);
        assert_eq!(tally.foreign, 2);
        assert_eq!(t.tally(65).lost, 7, "0, 10, …, 60");
    }
}
