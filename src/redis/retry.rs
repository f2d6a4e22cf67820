//! The one retry loop for Redis calls: log the first failure of a streak (and the
//! recovery), back off exponentially with decorrelated jitter, retry until a deadline or
//! a number of tries.
//!
//! The jitter matters when Redis comes back: processes that lost it together would
//! otherwise retry together, in lockstep, try after try.
//!
//! Two shapes share it: [`retrying`] wraps a call that is simply tried again, and
//! [`Streak`] serves loops that must keep doing other work between tries (the fetcher
//! waits on a timer inside its `select!`).

use rand::Rng;
use std::future::Future;
use std::time::Duration;
use tokio::time::{Instant, sleep};

/// How a streak of failures backs off: waits drawn at random (decorrelated jitter) that
/// grow from `first` about twofold per failure on average, at most `max`.
///
/// Each wait is uniform in `[first, min(max, 3 × previous wait)]`, the previous wait of
/// the first one counting as `first`: the first wait lies in `[first, 3·first]`, and no
/// wait is shorter than `first` or longer than `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Backoff {
    /// Wait after the first failure.
    pub first: Duration,
    /// Longest wait between tries.
    pub max: Duration,
}

impl Backoff {
    /// From 10 ms up to 2 s: outcome writes and lease calls, which hold jobs meanwhile.
    pub(crate) const CALL: Backoff = Backoff {
        first: Duration::from_millis(10),
        max: Duration::from_secs(2),
    };
    /// From 50 ms up to 5 s: fetches, which only delay new work.
    pub(crate) const FETCH: Backoff = Backoff {
        first: Duration::from_millis(50),
        max: Duration::from_secs(5),
    };
    /// From 100 ms up to 2 s: a producer's bulk chunk.
    pub(crate) const ENQUEUE: Backoff = Backoff {
        first: Duration::from_millis(100),
        max: Duration::from_secs(2),
    };
}

/// A run of failures of one kind of call: logs its first failure at `warn` and the
/// recovery at `info` (an outage of minutes logs two lines, not one per try), and says how
/// long to wait before the next try.
#[derive(Debug)]
pub(crate) struct Streak {
    what: &'static str,
    backoff: Backoff,
    /// The last wait given (`first` at the start of a streak).
    last_wait: Duration,
    failures: u32,
}

impl Backoff {
    /// The wait after one that lasted `last`: uniform in `[first, min(max, 3·last)]`
    /// (decorrelated jitter).
    pub(crate) fn next_wait(&self, last: Duration) -> Duration {
        let low = self.first.min(self.max);
        let high = (last * 3).clamp(low, self.max);
        if high <= low {
            return low;
        }
        rand::rng().random_range(low..=high)
    }
}

impl Streak {
    /// A streak of `what` calls (the name goes into the log lines).
    pub(crate) fn new(what: &'static str, backoff: Backoff) -> Self {
        Self {
            what,
            backoff,
            last_wait: backoff.first,
            failures: 0,
        }
    }

    /// Failures in the current streak.
    pub(crate) fn failures(&self) -> u32 {
        self.failures
    }

    /// Records a failure; returns how long to wait before the next try.
    pub(crate) fn failed(&mut self, error: &dyn std::fmt::Display) -> Duration {
        let what = self.what;
        if self.failures == 0 {
            tracing::warn!(what, error = %error, "redis call failed; retrying with backoff");
        } else {
            tracing::debug!(what, error = %error, failures = self.failures, "redis call failed again");
        }
        self.failures += 1;
        self.last_wait = self.backoff.next_wait(self.last_wait);
        self.last_wait
    }

    /// Records a success, ending the streak.
    pub(crate) fn succeeded(&mut self) {
        if self.failures > 0 {
            tracing::info!(
                what = self.what,
                failures = self.failures,
                "redis call succeeded again"
            );
        }
        self.failures = 0;
        self.last_wait = self.backoff.first;
    }
}

/// When [`retrying`] gives up.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct GiveUp {
    /// Give up rather than wait past this instant.
    pub deadline: Option<Instant>,
    /// Give up after this many failed tries.
    pub tries: Option<u32>,
}

impl GiveUp {
    /// Never give up.
    pub(crate) const NEVER: GiveUp = GiveUp {
        deadline: None,
        tries: None,
    };

    /// Give up rather than wait past `deadline`.
    pub(crate) fn at(deadline: Instant) -> Self {
        Self {
            deadline: Some(deadline),
            tries: None,
        }
    }

    /// Give up after `tries` failed tries (the tests' bound; the consumer never gives up by count).
    #[cfg(test)]
    pub(crate) fn after(tries: u32) -> Self {
        Self {
            deadline: None,
            tries: Some(tries),
        }
    }
}

/// Runs `call` until it succeeds, backing off as `backoff` says; gives up as `give_up` says
/// and then returns the last error (logged at `error`).
pub(crate) async fn retrying<T, E, F, Fut>(
    what: &'static str,
    backoff: Backoff,
    give_up: GiveUp,
    call: F,
) -> Result<T, E>
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    retrying_unless(what, backoff, give_up, |_| false, call).await
}

/// [`retrying`], but an error for which `is_final` holds is returned at once, untried
/// again (one a retry cannot cure, such as Redis out of memory).
pub(crate) async fn retrying_unless<T, E, F, Fut>(
    what: &'static str,
    backoff: Backoff,
    give_up: GiveUp,
    is_final: impl Fn(&E) -> bool,
    mut call: F,
) -> Result<T, E>
where
    E: std::fmt::Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut streak = Streak::new(what, backoff);
    loop {
        match call().await {
            Ok(v) => {
                streak.succeeded();
                return Ok(v);
            }
            Err(e) if is_final(&e) => return Err(e),
            Err(e) => {
                let wait = streak.failed(&e);
                let out_of_time = give_up.deadline.is_some_and(|d| Instant::now() + wait > d);
                let out_of_tries = give_up.tries.is_some_and(|n| streak.failures() >= n);
                if out_of_time || out_of_tries {
                    tracing::error!(what, error = %e, failures = streak.failures(), "redis call still failing; giving up");
                    return Err(e);
                }
                sleep(wait).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[tokio::test(start_paused = true)]
    async fn retries_until_success_within_the_jittered_waits() {
        let tries = Cell::new(0);
        let start = Instant::now();
        let r: Result<u32, String> = retrying("t", Backoff::CALL, GiveUp::NEVER, || {
            tries.set(tries.get() + 1);
            let n = tries.get();
            async move { if n < 4 { Err(format!("no {n}")) } else { Ok(n) } }
        })
        .await;
        assert_eq!(r, Ok(4));
        // Three waits of at least 10 ms each, each at most three times the one before
        // (30, 90, 270 ms), under paused time.
        let waited = start.elapsed();
        assert!(
            (Duration::from_millis(30)..=Duration::from_millis(390)).contains(&waited),
            "{waited:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn gives_up_after_tries_or_deadline() {
        let r: Result<(), &str> =
            retrying("t", Backoff::CALL, GiveUp::after(3), || async { Err("down") }).await;
        assert_eq!(r, Err("down"));
        let start = Instant::now();
        let deadline = start + Duration::from_millis(100);
        let r: Result<(), &str> =
            retrying("t", Backoff::CALL, GiveUp::at(deadline), || async { Err("down") }).await;
        assert_eq!(r, Err("down"));
        // It never sleeps past the deadline.
        assert!(
            start.elapsed() <= Duration::from_millis(100),
            "{:?}",
            start.elapsed()
        );
    }

    /// Many streaks failing together (a fleet that lost Redis at the same moment) do not
    /// retry together: their waits for the same failure differ, and every wait stays in
    /// the documented range.
    #[test]
    fn waits_are_jittered_within_the_documented_range() {
        let b = Backoff::FETCH;
        let mut streaks: Vec<Streak> = (0..200).map(|_| Streak::new("t", b)).collect();
        let mut ceiling = b.first;
        for failure in 0..10 {
            let waits: Vec<Duration> = streaks.iter_mut().map(|s| s.failed(&"e")).collect();
            let distinct: std::collections::HashSet<_> = waits.iter().collect();
            assert!(
                distinct.len() > 100,
                "failure {failure}: only {} distinct waits",
                distinct.len()
            );
            ceiling = (ceiling * 3).min(b.max);
            for w in &waits {
                assert!(
                    (b.first..=ceiling).contains(w),
                    "failure {failure}: {w:?} outside [{:?}, {ceiling:?}]",
                    b.first
                );
            }
        }
        // Late in a streak the waits spread over most of [first, max].
        let late: Vec<Duration> = streaks.iter_mut().map(|s| s.failed(&"e")).collect();
        assert!(late.iter().any(|w| *w > b.max * 3 / 4) && late.iter().any(|w| *w < b.max / 4));
    }

    #[test]
    fn a_success_ends_the_streak_and_the_next_wait_starts_low() {
        let mut s = Streak::new("t", Backoff::FETCH);
        for _ in 0..8 {
            s.failed(&"e");
        }
        s.succeeded();
        assert_eq!(s.failures(), 0);
        let w = s.failed(&"e");
        assert!(
            (Duration::from_millis(50)..=Duration::from_millis(150)).contains(&w),
            "{w:?}"
        );
    }
}
