//! The one retry loop for Redis calls: log the first failure of a streak (and the
//! recovery), back off exponentially, retry until a deadline or a number of tries.
//!
//! Two shapes share it: [`retrying`] wraps a call that is simply tried again, and
//! [`Streak`] serves loops that must keep doing other work between tries (the fetcher
//! waits on a timer inside its `select!`).

use std::future::Future;
use std::time::Duration;
use tokio::time::{Instant, sleep};

/// How a streak of failures backs off: `first`, doubling, at most `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Wait after the first failure.
    pub first: Duration,
    /// Longest wait between tries.
    pub max: Duration,
}

impl Backoff {
    /// 10 ms doubling to 2 s: outcome writes and lease calls, which hold jobs meanwhile.
    pub const CALL: Backoff = Backoff {
        first: Duration::from_millis(10),
        max: Duration::from_secs(2),
    };
    /// 50 ms doubling to 5 s: fetches, which only delay new work.
    pub const FETCH: Backoff = Backoff {
        first: Duration::from_millis(50),
        max: Duration::from_secs(5),
    };
    /// 100 ms doubling to 2 s: a producer's bulk chunk.
    pub const ENQUEUE: Backoff = Backoff {
        first: Duration::from_millis(100),
        max: Duration::from_secs(2),
    };
}

/// A run of failures of one kind of call: logs its first failure at `warn` and the
/// recovery at `info` (an outage of minutes logs two lines, not one per try), and says how
/// long to wait before the next try.
#[derive(Debug)]
pub struct Streak {
    what: &'static str,
    backoff: Backoff,
    next_wait: Duration,
    failures: u32,
}

impl Streak {
    /// A streak of `what` calls (the name goes into the log lines).
    pub fn new(what: &'static str, backoff: Backoff) -> Self {
        Self {
            what,
            backoff,
            next_wait: backoff.first,
            failures: 0,
        }
    }

    /// Failures in the current streak.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Records a failure; returns how long to wait before the next try.
    pub fn failed(&mut self, error: &dyn std::fmt::Display) -> Duration {
        let what = self.what;
        if self.failures == 0 {
            tracing::warn!(what, error = %error, "redis call failed; retrying with backoff");
        } else {
            tracing::debug!(what, error = %error, failures = self.failures, "redis call failed again");
        }
        self.failures += 1;
        let wait = self.next_wait;
        self.next_wait = (self.next_wait * 2).min(self.backoff.max);
        wait
    }

    /// Records a success, ending the streak.
    pub fn succeeded(&mut self) {
        if self.failures > 0 {
            tracing::info!(
                what = self.what,
                failures = self.failures,
                "redis call succeeded again"
            );
        }
        self.failures = 0;
        self.next_wait = self.backoff.first;
    }
}

/// When [`retrying`] gives up.
#[derive(Debug, Clone, Copy, Default)]
pub struct GiveUp {
    /// Give up rather than wait past this instant.
    pub deadline: Option<Instant>,
    /// Give up after this many failed tries.
    pub tries: Option<u32>,
}

impl GiveUp {
    /// Never give up.
    pub const NEVER: GiveUp = GiveUp {
        deadline: None,
        tries: None,
    };

    /// Give up rather than wait past `deadline`.
    pub fn at(deadline: Instant) -> Self {
        Self {
            deadline: Some(deadline),
            tries: None,
        }
    }

    /// Give up after `tries` failed tries.
    pub fn after(tries: u32) -> Self {
        Self {
            deadline: None,
            tries: Some(tries),
        }
    }
}

/// Runs `call` until it succeeds, backing off as `backoff` says; gives up as `give_up` says
/// and then returns the last error (logged at `error`).
pub async fn retrying<T, E, F, Fut>(
    what: &'static str,
    backoff: Backoff,
    give_up: GiveUp,
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
    async fn retries_until_success_with_doubling_waits() {
        let tries = Cell::new(0);
        let start = Instant::now();
        let r: Result<u32, String> = retrying("t", Backoff::CALL, GiveUp::NEVER, || {
            tries.set(tries.get() + 1);
            let n = tries.get();
            async move { if n < 4 { Err(format!("no {n}")) } else { Ok(n) } }
        })
        .await;
        assert_eq!(r, Ok(4));
        // 10 + 20 + 40 ms of backoff under paused time.
        assert_eq!(start.elapsed(), Duration::from_millis(70));
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
        // Waits 10, 20, 40 (= 70 ms); the next wait of 80 would pass the deadline.
        assert_eq!(start.elapsed(), Duration::from_millis(70));
    }

    #[test]
    fn waits_double_up_to_the_cap_and_reset_on_success() {
        let mut s = Streak::new("t", Backoff::FETCH);
        let waits: Vec<u64> = (0..8).map(|_| s.failed(&"e").as_millis() as u64).collect();
        assert_eq!(waits, [50, 100, 200, 400, 800, 1600, 3200, 5000]);
        s.succeeded();
        assert_eq!(s.failures(), 0);
        assert_eq!(s.failed(&"e"), Duration::from_millis(50));
    }
}
