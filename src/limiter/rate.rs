//! An optional jobs-per-second cap per consumer: GCRA (`governor`) with a burst. The pool
//! takes a rate token before it asks for a concurrency slot, so a job waiting on the rate
//! holds no slot and never makes the concurrency limit look binding.
//!
//! The limiter reads `tokio::time`, not the wall clock, so paused-time tests can drive it
//! and the wait is an ordinary tokio sleep.

use super::error::{LimiterError, check};
use governor::clock::Clock;
use governor::middleware::NoOpMiddleware;
use governor::nanos::Nanos;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::time::Instant;

/// A rate: `count` jobs per `per`, with bursts of up to `burst` jobs at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Jobs per period, more than 0.
    pub count: f64,
    /// The period (1 s for `/s`, 60 s for `/m`, 3600 s for `/h`).
    pub per: Duration,
    /// Jobs that may start back to back after a quiet spell, 1..=1000000 (default: the
    /// count of the rate, rounded up, as `governor`'s own quotas do).
    pub burst: u32,
}

impl Rate {
    /// Jobs per second.
    pub fn per_second(&self) -> f64 {
        self.count / self.per.as_secs_f64()
    }

    /// Checks the range, with a message that names it.
    pub fn validate(&self) -> Result<(), LimiterError> {
        let r = self.per_second();
        check(
            r.is_finite() && (1e-3..=1e7).contains(&r),
            "rate",
            "between 0.001 and 10000000 jobs/s",
            format!("{r} jobs/s"),
        )?;
        check(
            (1..=1_000_000).contains(&self.burst),
            "burst",
            "between 1 and 1000000",
            self.burst,
        )
    }

    /// The same rate with another burst.
    pub fn with_burst(self, burst: u32) -> Self {
        Self { burst, ..self }
    }
}

impl std::str::FromStr for Rate {
    type Err = LimiterError;

    /// `500/s`, `500/m`, `10/h`, `0.5/s` or a bare `500` (per second).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || LimiterError::Parse {
            what: "rate",
            value: s.to_owned(),
            hint: "write it like 500/s, 30/m or 10/h",
        };
        let (n, unit) = s.trim().split_once('/').unwrap_or((s.trim(), "s"));
        let per = match unit.trim() {
            "s" | "sec" | "second" => Duration::from_secs(1),
            "m" | "min" | "minute" => Duration::from_secs(60),
            "h" | "hour" => Duration::from_secs(3600),
            _ => return Err(bad()),
        };
        let count: f64 = n.trim().parse().map_err(|_| bad())?;
        if !(count > 0.0 && count.is_finite()) {
            return Err(bad());
        }
        let rate = Rate {
            count,
            per,
            burst: count.ceil().clamp(1.0, 1e6) as u32,
        };
        rate.validate()?;
        Ok(rate)
    }
}

impl Rate {
    /// The rate as it parses back, without the burst: `500/s`, `30/m`.
    pub fn spec(&self) -> String {
        let unit = match self.per.as_secs() {
            60 => "m",
            3600 => "h",
            _ => "s",
        };
        format!("{}/{unit}", self.count)
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (burst {})", self.spec(), self.burst)
    }
}

/// `governor`'s clock on `tokio::time`.
#[derive(Debug, Clone, Copy)]
struct TokioClock {
    origin: Instant,
}

impl Clock for TokioClock {
    type Instant = Nanos;

    fn now(&self) -> Nanos {
        Nanos::from(self.origin.elapsed())
    }
}

type Gcra = RateLimiter<NotKeyed, InMemoryState, TokioClock, NoOpMiddleware<Nanos>>;

/// A GCRA rate limit shared by a consumer's workers.
#[derive(Debug)]
pub struct RateLimit {
    gcra: Gcra,
    clock: TokioClock,
    rate: Rate,
}

impl RateLimit {
    /// A limit at `rate`.
    pub fn new(rate: Rate) -> Result<Self, LimiterError> {
        rate.validate()?;
        let period = Duration::from_secs_f64(1.0 / rate.per_second()).max(Duration::from_nanos(1));
        let burst = NonZeroU32::new(rate.burst).unwrap_or(NonZeroU32::MIN);
        let quota = Quota::with_period(period)
            .ok_or_else(|| LimiterError::Conflict("rate period rounds to zero".into()))?
            .allow_burst(burst);
        let clock = TokioClock {
            origin: Instant::now(),
        };
        Ok(Self {
            gcra: RateLimiter::direct_with_clock(quota, clock),
            clock,
            rate,
        })
    }

    /// The rate enforced.
    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// Waits for a token: returns at once while under the rate.
    pub async fn until_ready(&self) {
        while let Err(not_until) = self.gcra.check() {
            tokio::time::sleep(not_until.wait_time_from(self.clock.now())).await;
        }
    }
}

/// The rate limit in force, if any, swappable while workers wait on it (runtime tuning).
#[derive(Debug)]
pub struct RateGate {
    current: RwLock<Option<Arc<RateLimit>>>,
    /// Jobs worth fetching ahead: about one second at the rate (`usize::MAX`: no cap).
    /// Also the lock-free "no cap" test on the job path.
    prefetch: AtomicUsize,
}

impl Default for RateGate {
    fn default() -> Self {
        Self {
            current: RwLock::new(None),
            prefetch: AtomicUsize::new(usize::MAX),
        }
    }
}

impl RateGate {
    /// A gate at `rate` (none: no cap).
    pub fn new(rate: Option<Rate>) -> Result<Self, LimiterError> {
        let gate = Self::default();
        gate.set(rate)?;
        Ok(gate)
    }

    /// Replaces the rate (none: no cap). A new rate starts with a full burst; the rate in
    /// force set again changes nothing (a settings read that finds what a consumer applied
    /// at its start must not grant a second burst).
    pub fn set(&self, rate: Option<Rate>) -> Result<(), LimiterError> {
        if let Some(r) = rate {
            r.validate()?;
        }
        if rate == self.rate() {
            return Ok(());
        }
        let next = rate.map(RateLimit::new).transpose()?.map(Arc::new);
        let prefetch = rate.map_or(usize::MAX, |r| r.per_second().ceil().max(1.0) as usize);
        let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
        *current = next;
        self.prefetch.store(prefetch, Ordering::Relaxed);
        Ok(())
    }

    /// How many jobs a consumer should hold fetched but un-started: about a second's worth
    /// at the rate, so a slow-paced consumer does not sit on jobs its peers could run
    /// (`usize::MAX` without a cap).
    pub fn prefetch(&self) -> usize {
        self.prefetch.load(Ordering::Relaxed)
    }

    /// No rate is in force now.
    pub fn is_unlimited(&self) -> bool {
        self.prefetch() == usize::MAX
    }

    /// The rate in force.
    pub fn rate(&self) -> Option<Rate> {
        self.get().map(|r| r.rate())
    }

    fn get(&self) -> Option<Arc<RateLimit>> {
        self.current.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Waits for a token of the rate in force; returns at once without a cap.
    pub async fn until_ready(&self) {
        if self.is_unlimited() {
            return;
        }
        if let Some(r) = self.get() {
            r.until_ready().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse() {
        let r: Rate = "500/s".parse().unwrap();
        assert_eq!((r.per_second(), r.burst), (500.0, 500));
        let r: Rate = "30/m".parse().unwrap();
        assert_eq!((r.per_second(), r.burst), (0.5, 30));
        assert_eq!("0.5/s".parse::<Rate>().unwrap().burst, 1);
        assert_eq!("7".parse::<Rate>().unwrap().per_second(), 7.0);
        for bad in ["", "x/s", "5/week", "-1/s", "0/s"] {
            let e = bad.parse::<Rate>().unwrap_err().to_string();
            assert!(e.contains("500/s"), "{bad}: {e}");
        }
        let e = "1/h".parse::<Rate>().unwrap_err().to_string();
        assert!(e.contains("between 0.001 and 10000000 jobs/s"), "{e}");
    }

    #[tokio::test(start_paused = true)]
    async fn paces_after_the_burst() {
        let rate = "10/s".parse::<Rate>().unwrap().with_burst(5);
        let rl = RateLimit::new(rate).unwrap();
        let t0 = Instant::now();
        for _ in 0..5 {
            rl.until_ready().await;
        }
        assert_eq!(t0.elapsed(), Duration::ZERO, "the burst passes at once");
        for _ in 0..20 {
            rl.until_ready().await;
        }
        // 20 more at 10/s: the 20th token is due 2 s after the burst.
        let e = t0.elapsed().as_secs_f64();
        assert!((1.99..=2.01).contains(&e), "took {e} s");
    }

    #[tokio::test(start_paused = true)]
    async fn the_gate_swaps_rates() {
        let gate = RateGate::new(None).unwrap();
        let t0 = Instant::now();
        for _ in 0..1000 {
            gate.until_ready().await;
        }
        assert_eq!(t0.elapsed(), Duration::ZERO, "no cap");
        assert_eq!(gate.prefetch(), usize::MAX);
        gate.set(Some("2/s".parse::<Rate>().unwrap().with_burst(1)))
            .unwrap();
        assert_eq!(gate.prefetch(), 2, "a second's worth");
        assert_eq!(gate.rate().map(|r| r.per_second()), Some(2.0));
        for _ in 0..3 {
            gate.until_ready().await;
        }
        assert_eq!(t0.elapsed(), Duration::from_secs(1), "burst 1, then 500 ms apart");
        assert!(
            gate.set(Some(Rate {
                count: 0.0,
                per: Duration::from_secs(1),
                burst: 1
            }))
            .is_err()
        );
    }
}
