//! How much the fetcher keeps fetched ahead under a backlog: [`Pace`].

use std::time::Duration;
use tokio::time::Instant;

/// How fast the fetcher hands jobs to the pool, over windows of [`Pace::WINDOW`]. Fast
/// jobs need more fetched ahead than two per slot: at 300,000 jobs/s, 512 jobs last under
/// 2 ms, less than a fetch's round trip under load, so Redis and the consumer took turns
/// instead of working side by side (`weir work --drain` of 1,000,000 no-op jobs: 4.6 s with
/// 512 jobs ahead, 3.1 s with 2,048). [`Pace::ahead`] is the work the pool does at the
/// rate seen while a fetch is on its way: a round trip (measured), at least
/// [`Pace::AHEAD`]. Jobs longer than that get none held ahead: a consumer with free slots
/// runs them sooner. The fetcher uses it only while the queue holds a backlog (fetches come
/// back full): near an empty queue a larger fetch buys nothing. Large jobs are held ahead
/// only up to a byte budget, at their average size.
#[derive(Debug)]
pub(super) struct Pace {
    since: Instant,
    count: usize,
    per_s: f64,
    /// A fetch's round trip, averaged (zero before the first).
    rtt: Duration,
    /// How far round trips stray from that average, averaged (as TCP's RTTVAR): a busy
    /// machine's fetches come back late now and then, and the jobs held ahead cover the
    /// round trip and four times its spread, not the average alone.
    spread: Duration,
    /// Envelope bytes per job, averaged over fetches (zero before the first).
    bytes_per_job: f64,
    /// No jobs handed over since the start or the last idle spell: the next hand-over
    /// fills free slots at once, which says nothing of the rate, so it only starts the
    /// measuring window.
    fresh: bool,
}

impl Pace {
    /// How long a measuring window lasts.
    const WINDOW: Duration = Duration::from_millis(20);
    /// How long the first one lasts: a drain is often over in a second.
    const FIRST_WINDOW: Duration = Duration::from_millis(2);
    /// How much work is fetched ahead.
    const AHEAD: Duration = Duration::from_millis(10);
    /// At most this many fetches' worth.
    const MAX_BATCHES: usize = 4;

    pub(super) fn new(now: Instant) -> Self {
        Self {
            since: now,
            count: 0,
            per_s: 0.0,
            rtt: Duration::ZERO,
            spread: Duration::ZERO,
            bytes_per_job: 0.0,
            fresh: true,
        }
    }

    /// The queue ran dry: the rate is measured afresh when jobs come again (jobs of
    /// another kind, maybe much longer).
    pub(super) fn idle(&mut self) {
        (self.per_s, self.count, self.fresh) = (0.0, 0, true);
    }

    /// A fetch came back `rtt` after it was sent.
    pub(super) fn round_trip(&mut self, rtt: Duration) {
        if self.rtt.is_zero() {
            self.rtt = rtt;
            return;
        }
        self.spread = (self.spread * 3 + self.rtt.abs_diff(rtt)) / 4;
        self.rtt = (self.rtt * 7 + rtt) / 8;
    }

    /// A fetch brought `jobs` jobs of `bytes` envelope bytes in all.
    pub(super) fn sizes(&mut self, bytes: usize, jobs: usize) {
        if jobs == 0 {
            return;
        }
        let b = bytes as f64 / jobs as f64;
        self.bytes_per_job = if self.bytes_per_job == 0.0 {
            b
        } else {
            (self.bytes_per_job * 7.0 + b) / 8.0
        };
    }

    /// `n` jobs handed to the pool at `now`.
    pub(super) fn saw(&mut self, n: usize, now: Instant) {
        if std::mem::take(&mut self.fresh) {
            (self.since, self.count) = (now, 0);
            return;
        }
        self.count += n;
        let dt = now.saturating_duration_since(self.since);
        let window = if self.per_s == 0.0 {
            Self::FIRST_WINDOW
        } else {
            Self::WINDOW
        };
        if dt >= window {
            let rate = self.count as f64 / dt.as_secs_f64();
            self.per_s = if self.per_s == 0.0 {
                rate
            } else {
                (self.per_s + rate) / 2.0
            };
            (self.since, self.count) = (now, 0);
        }
    }

    /// Jobs worth fetching ahead at the rate seen, at most [`Pace::MAX_BATCHES`] fetches
    /// of `batch` and `max_bytes` at the jobs' average size: the jobs run during a round
    /// trip and four times its spread (at least [`Pace::AHEAD`]), rounded down, so jobs
    /// longer than that get none.
    pub(super) fn ahead(&self, batch: usize, max_bytes: usize) -> usize {
        let during = (self.rtt + 4 * self.spread).max(Self::AHEAD).as_secs_f64();
        let jobs = ((self.per_s * during) as usize).min(Self::MAX_BATCHES * batch);
        if self.bytes_per_job > 0.0 {
            jobs.min((max_bytes as f64 / self.bytes_per_job) as usize)
        } else {
            jobs
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pace_fetches_ten_ms_ahead_at_the_rate_seen_up_to_four_batches() {
        let t0 = Instant::now();
        let mut p = Pace::new(t0);
        assert_eq!(p.ahead(500, usize::MAX), 0);
        // The first hand-over (free slots filled) only starts the window.
        p.saw(5_000, t0);
        assert_eq!(p.ahead(500, usize::MAX), 0);
        // 100,000 jobs/s for the first window, then 50,000.
        p.saw(2_000, t0 + Pace::WINDOW);
        assert!(
            (999..=1000).contains(&p.ahead(500, usize::MAX)),
            "{}",
            p.ahead(500, usize::MAX)
        );
        p.saw(1_000, t0 + 2 * Pace::WINDOW);
        assert!(
            (749..=750).contains(&p.ahead(500, usize::MAX)),
            "{}",
            p.ahead(500, usize::MAX)
        );
        // 1,000,000 jobs/s: capped at four batches.
        for i in 3..10 {
            p.saw(20_000, t0 + i * Pace::WINDOW);
        }
        assert_eq!(p.ahead(500, usize::MAX), 2_000);
        // A slow queue: 1,000 jobs/s wants 10 jobs ahead, under two per slot.
        let mut slow = Pace::new(t0);
        for i in 0..20 {
            slow.saw(20, t0 + i * Pace::WINDOW);
        }
        assert!(
            (9..=10).contains(&slow.ahead(500, usize::MAX)),
            "{}",
            slow.ahead(500, usize::MAX)
        );
        // Round trips longer than 10 ms: what runs during one.
        slow.round_trip(Duration::from_millis(40));
        assert!(
            (39..=40).contains(&slow.ahead(500, usize::MAX)),
            "{}",
            slow.ahead(500, usize::MAX)
        );
        // Round trips that stray (40 ms, then 8, 72 and 8 ms): their spread is covered
        // too. Average about 36 ms, spread about 19 ms: some 114 ms of work.
        slow.round_trip(Duration::from_millis(8));
        slow.round_trip(Duration::from_millis(72));
        slow.round_trip(Duration::from_millis(8));
        let straying = slow.ahead(500, usize::MAX);
        assert!((105..=120).contains(&straying), "{straying}");
        // Jobs of 6 s in 20 slots (3.3 jobs/s): none ahead.
        let mut long = Pace::new(t0);
        long.saw(20, t0);
        long.saw(20, t0 + Duration::from_secs(6));
        long.round_trip(Duration::from_millis(2));
        assert_eq!(long.ahead(500, usize::MAX), 0);
        // The same after fast jobs: the pace is measured afresh after an idle spell.
        let mut p = Pace::new(t0);
        p.saw(500, t0);
        p.saw(2_000, t0 + Pace::WINDOW);
        assert!(p.ahead(500, usize::MAX) > 0);
        p.idle();
        assert_eq!(p.ahead(500, usize::MAX), 0);
        p.saw(20, t0 + 2 * Pace::WINDOW);
        assert_eq!(p.ahead(500, usize::MAX), 0);
    }

    #[test]
    fn large_jobs_are_held_ahead_only_up_to_the_byte_budget() {
        let t0 = Instant::now();
        let mut p = Pace::new(t0);
        // 100,000 jobs/s: 1,000 jobs ahead.
        p.saw(5_000, t0);
        p.saw(2_000, t0 + Pace::WINDOW);
        assert!(
            (999..=1000).contains(&p.ahead(500, 64 << 20)),
            "{}",
            p.ahead(500, 64 << 20)
        );
        // Jobs of 1 MiB: 64 fit in 64 MiB.
        p.sizes(10 << 20, 10);
        assert_eq!(p.ahead(500, 64 << 20), 64);
        // Smaller jobs since: the average moves toward them (1 MiB * 7/8 + 64 KiB / 8).
        p.sizes(64 << 10, 1);
        assert_eq!(p.ahead(500, 64 << 20), 72);
        // A fetch of nothing changes nothing.
        p.sizes(0, 0);
        assert_eq!(p.ahead(500, 64 << 20), 72);
    }
}
