//! The retry policy: exponential backoff with jitter, `min(cap, base * 2^attempt)`; and the
//! deferral budget, which bounds how often a job may be put back without charging an
//! attempt.

use rand::Rng;
use std::time::Duration;

/// Backoff for retryable failures.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Delay after the first failure, before jitter (default 1 s).
    pub base: Duration,
    /// Longest delay (default 1 h).
    pub cap: Duration,
    /// Fraction of the delay drawn at random, 0.0 to 1.0 (default 0.5: the delay is
    /// between half and all of the exponential figure, so retries of a failed burst spread).
    pub jitter: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(3600),
            jitter: 0.5,
        }
    }
}

impl RetryPolicy {
    /// The delay before the retry that follows failure number `attempt + 1`.
    pub fn delay(&self, attempt: u32) -> Duration {
        let exp = self.base.as_secs_f64() * 2f64.powi(attempt.min(62) as i32);
        let full = exp.min(self.cap.as_secs_f64());
        let jitter = self.jitter.clamp(0.0, 1.0);
        let r: f64 = rand::rng().random();
        Duration::from_secs_f64(full * (1.0 - jitter * r))
    }
}

/// How long a job may keep being deferred (put back without charging an attempt: the
/// downstream pushed back, or no consumer could take it) before it is dead-lettered with a
/// reason that says so. The job's deferrals are counted in Redis, across consumers; an ack
/// or a dead-letter clears the count, a retry keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeferralBudget {
    /// Most deferrals, 0 for no limit (default 1,000).
    pub max_deferrals: u32,
    /// Longest time from the first deferral, zero for no limit (default 24 h).
    pub max_age: Duration,
}

impl DeferralBudget {
    /// Default of [`DeferralBudget::max_deferrals`].
    pub const DEFAULT_MAX_DEFERRALS: u32 = 1000;
    /// Default of [`DeferralBudget::max_age`].
    pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(24 * 3600);

    /// A budget of at most `max_age` from the first deferral, however many deferrals.
    pub fn for_time(max_age: Duration) -> Self {
        Self {
            max_deferrals: 0,
            max_age,
        }
    }
}

impl Default for DeferralBudget {
    fn default() -> Self {
        Self {
            max_deferrals: Self::DEFAULT_MAX_DEFERRALS,
            max_age: Self::DEFAULT_MAX_AGE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_then_caps() {
        let p = RetryPolicy {
            base: Duration::from_millis(100),
            cap: Duration::from_secs(1),
            jitter: 0.0,
        };
        assert_eq!(p.delay(0), Duration::from_millis(100));
        assert_eq!(p.delay(3), Duration::from_millis(800));
        assert_eq!(p.delay(4), Duration::from_secs(1));
        assert_eq!(p.delay(1000), Duration::from_secs(1));
    }

    /// Jitter 0.5 draws the delay from [half, all] of the exponential figure, and spreads
    /// it over that range: a constant, or draws bunched in one part, would not spread the
    /// retries of a failed burst.
    #[test]
    fn jitter_stays_in_range_and_spreads_over_it() {
        let p = RetryPolicy {
            base: Duration::from_secs(8),
            cap: Duration::from_secs(3600),
            jitter: 0.5,
        };
        let (lo, hi) = (Duration::from_secs(4), Duration::from_secs(8));
        let mut quarters = [0usize; 4];
        for _ in 0..1000 {
            let d = p.delay(0);
            assert!(d >= lo && d <= hi, "{d:?}");
            let q = ((d - lo).as_secs_f64() / (hi - lo).as_secs_f64() * 4.0) as usize;
            quarters[q.min(3)] += 1;
        }
        // Uniform draws put 250 in each quarter; fewer than 150 in one has a chance
        // far below one in a billion.
        assert!(quarters.iter().all(|&n| n >= 150), "{quarters:?}");
    }
}
