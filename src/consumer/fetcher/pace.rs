//! How much the fetcher keeps fetched ahead under a backlog: [`Pace`].

use std::time::Duration;
use tokio::time::Instant;

/// How fast the fetcher hands jobs to the pool, over windows of [`Pace::WINDOW`]. Fast
/// jobs need more fetched ahead than two per slot: at 300,000 jobs/s, 512 jobs last under
/// 2 ms, less than a fetch's round trip under load, so Redis and the consumer took turns
/// instead of working side by side (`weir work --drain` of 1,000,000 no-op jobs: 4.6 s with
/// 512 jobs ahead, 3.1 s with 2,048). [`Pace::ahead`] is [`Pace::AHEAD`] of work at the
/// rate seen: for jobs of 2.5 ms or more at a steady rate, no more than two per slot. The
/// fetcher uses it only while the queue holds a backlog (fetches come back full): near an
/// empty queue a larger fetch buys nothing.
#[derive(Debug)]
pub(super) struct Pace {
    since: Instant,
    count: usize,
    per_s: f64,
}

impl Pace {
    /// How long a measuring window lasts.
    const WINDOW: Duration = Duration::from_millis(20);
    /// How much work is fetched ahead.
    const AHEAD: Duration = Duration::from_millis(10);
    /// At most this many fetches' worth.
    const MAX_BATCHES: usize = 4;

    pub(super) fn new(now: Instant) -> Self {
        Self {
            since: now,
            count: 0,
            per_s: 0.0,
        }
    }

    /// `n` jobs handed to the pool at `now`.
    pub(super) fn saw(&mut self, n: usize, now: Instant) {
        self.count += n;
        let dt = now.saturating_duration_since(self.since);
        if dt >= Self::WINDOW {
            let rate = self.count as f64 / dt.as_secs_f64();
            // The first window counts whole: a drain is often over in a second.
            self.per_s = if self.per_s == 0.0 {
                rate
            } else {
                (self.per_s + rate) / 2.0
            };
            (self.since, self.count) = (now, 0);
        }
    }

    /// Jobs worth fetching ahead at the rate seen, at most [`Pace::MAX_BATCHES`] fetches
    /// of `batch`.
    pub(super) fn ahead(&self, batch: usize) -> usize {
        ((self.per_s * Self::AHEAD.as_secs_f64()) as usize).min(Self::MAX_BATCHES * batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pace_fetches_ten_ms_ahead_at_the_rate_seen_up_to_four_batches() {
        let t0 = Instant::now();
        let mut p = Pace::new(t0);
        assert_eq!(p.ahead(500), 0);
        // 100,000 jobs/s for the first window, then 50,000.
        p.saw(2_000, t0 + Pace::WINDOW);
        assert!((999..=1000).contains(&p.ahead(500)), "{}", p.ahead(500));
        p.saw(1_000, t0 + 2 * Pace::WINDOW);
        assert!((749..=750).contains(&p.ahead(500)), "{}", p.ahead(500));
        // 1,000,000 jobs/s: capped at four batches.
        for i in 3..10 {
            p.saw(20_000, t0 + i * Pace::WINDOW);
        }
        assert_eq!(p.ahead(500), 2_000);
        // A slow queue: 1,000 jobs/s wants 10 jobs ahead, under two per slot.
        let mut slow = Pace::new(t0);
        for i in 1..20 {
            slow.saw(20, t0 + i * Pace::WINDOW);
        }
        assert!((9..=10).contains(&slow.ahead(500)), "{}", slow.ahead(500));
    }
}
