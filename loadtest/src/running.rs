//! Jobs running, as a figure per window: a consumer's in-flight count read every
//! millisecond on a thread of its own, summed up as the window's mean and peak.
//!
//! One reading per 100 ms row is not enough: with no-op handlers a consumer starts a
//! fetched batch's jobs in a burst that is over in about a millisecond and then waits for
//! Redis, so a reading at a random instant is mostly 0 while hundreds of jobs pass
//! through every window. A thread (not a task) takes the readings, so a runtime busy with
//! the burst itself does not hold them back.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// Time between two readings.
pub(crate) const EVERY: Duration = Duration::from_millis(1);

/// Jobs running over a window.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Running {
    /// Mean of the readings (the time-average of jobs running).
    pub mean: f64,
    /// The highest reading.
    pub max: u64,
}

#[derive(Default)]
struct Sums {
    sum: AtomicU64,
    count: AtomicU64,
    max: AtomicU64,
}

/// Reads a count every [`EVERY`] until dropped.
pub(crate) struct Probe {
    sums: Arc<Sums>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Probe {
    /// Starts reading `read` (a consumer's in-flight count).
    pub(crate) fn start(read: impl Fn() -> u64 + Send + 'static) -> Self {
        let (sums, stop) = (Arc::new(Sums::default()), Arc::new(AtomicBool::new(false)));
        let (s, halt) = (sums.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("in-flight-probe".into())
            .spawn(move || {
                while !halt.load(Ordering::Relaxed) {
                    s.add(read());
                    std::thread::sleep(EVERY);
                }
            })
            .ok();
        Self { sums, stop, thread }
    }

    /// The readings since the last call (then starts a new window). A window without a
    /// reading yet gives `now`, read at once.
    pub(crate) fn take(&self, now: u64) -> Running {
        let sum = self.sums.sum.swap(0, Ordering::Relaxed);
        let count = self.sums.count.swap(0, Ordering::Relaxed);
        let max = self.sums.max.swap(0, Ordering::Relaxed);
        if count == 0 {
            return Running {
                mean: now as f64,
                max: now,
            };
        }
        Running {
            mean: sum as f64 / count as f64,
            max,
        }
    }
}

impl Sums {
    fn add(&self, n: u64) {
        self.sum.fetch_add(n, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.max.fetch_max(n, Ordering::Relaxed);
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_and_max_of_a_bursty_count() {
        // Busy 1 reading in 4 (a burst of 200), idle otherwise: a single reading would
        // mostly say 0.
        let ticks = Arc::new(AtomicU64::new(0));
        let t = ticks.clone();
        let probe = Probe::start(move || {
            let n = t.fetch_add(1, Ordering::Relaxed);
            if n.is_multiple_of(4) { 200 } else { 0 }
        });
        while ticks.load(Ordering::Relaxed) < 40 {
            std::thread::sleep(Duration::from_millis(5));
        }
        let r = probe.take(0);
        assert_eq!(r.max, 200);
        assert!((30.0..=70.0).contains(&r.mean), "{r:?}");
        drop(probe);
        let after = ticks.load(Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(10));
        assert_eq!(ticks.load(Ordering::Relaxed), after, "the thread stopped");
    }

    #[test]
    fn an_empty_window_reads_now() {
        let sums = Probe {
            sums: Arc::new(Sums::default()),
            stop: Arc::new(AtomicBool::new(true)),
            thread: None,
        };
        assert_eq!(sums.take(7), Running { mean: 7.0, max: 7 });
    }
}
