//! The simulated downstream: a service with a concurrency "knee", the shape adaptive
//! concurrency is judged against (as in Vector's ARC simulations).
//!
//! With `n` calls in flight and capacity `c` (which follows a script over time):
//! - `n ≤ c`: a call takes the base latency (± jitter);
//! - `n > c`: calls queue inside the service, so latency grows as `base · n / c` and
//!   throughput stays at the ideal `c / base` (Little's law);
//! - `n > c · hard_factor`: the service sheds load: the call fails fast (an HTTP 503).
//!
//! A baseline error rate adds failures unrelated to load. The model has no weir types in
//! it, so an HTTP front can serve the same `call` later.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One step of the capacity script: `capacity` concurrent calls for `length`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Phase {
    /// Calls the service serves at base latency.
    pub capacity: u64,
    /// How long the phase lasts.
    pub length: Duration,
}

/// Parses `"200@20s,80@20s,200@20s"`: capacity 200 for 20 s, then 80 for 20 s, …
pub(crate) fn parse_script(s: &str) -> Result<Vec<Phase>, String> {
    let phases = s
        .split(',')
        .map(|part| {
            let (cap, len) = part
                .trim()
                .split_once('@')
                .ok_or_else(|| format!("capacity step {part:?}: use CAPACITY@DURATION, e.g. 200@20s"))?;
            let capacity: u64 = cap
                .parse()
                .map_err(|_| format!("capacity {cap:?} is not a whole number"))?;
            let length = humantime::parse_duration(len).map_err(|e| format!("duration {len:?}: {e}"))?;
            if capacity == 0 || length.is_zero() {
                return Err(format!(
                    "capacity step {part:?}: capacity and duration must be > 0"
                ));
            }
            Ok(Phase { capacity, length })
        })
        .collect::<Result<Vec<_>, String>>()?;
    if phases.is_empty() {
        return Err("the capacity script is empty".into());
    }
    Ok(phases)
}

/// The downstream's settings.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    /// Capacity over time; the last phase holds after the script ends.
    pub script: Vec<Phase>,
    /// Latency of a call below the knee.
    pub base_latency: Duration,
    /// Relative jitter of latency, 0..1 (0.1: ±10%).
    pub jitter: f64,
    /// Probability that a call fails regardless of load.
    pub error_rate: f64,
    /// The HTTP status of those failures: 500 (the job's own failure), 429 or 503
    /// (overload answers, with `retry_after`).
    pub error_status: u16,
    /// When the failures happen: from..until into the script (`None`: always).
    pub error_window: Option<(Duration, Duration)>,
    /// The Retry-After a 429 or 503 failure carries.
    pub retry_after: Duration,
    /// Calls beyond `capacity · hard_factor` fail fast.
    pub hard_factor: f64,
    /// Seed of the jitter and error draws.
    pub seed: u64,
}

impl Config {
    /// The script's total length.
    pub(crate) fn script_length(&self) -> Duration {
        self.script.iter().map(|p| p.length).sum()
    }

    /// Capacity `elapsed` into the script.
    pub(crate) fn capacity_at(&self, elapsed: Duration) -> u64 {
        let mut end = Duration::ZERO;
        for p in &self.script {
            end += p.length;
            if elapsed < end {
                return p.capacity;
            }
        }
        self.script.last().map_or(1, |p| p.capacity)
    }

    /// The most jobs/s the service can take `elapsed` into the script.
    pub(crate) fn ideal_rate_at(&self, elapsed: Duration) -> f64 {
        self.capacity_at(elapsed) as f64 / self.base_latency.as_secs_f64().max(1e-6)
    }

    /// Whether the baseline failures happen `elapsed` into the script.
    pub(crate) fn errors_at(&self, elapsed: Duration) -> bool {
        self.error_window
            .is_none_or(|(from, until)| elapsed >= from && elapsed < until)
    }

    /// p95 latency of a call below the knee: the jitter is uniform, so its 95th
    /// percentile is 0.9 of its range.
    pub(crate) fn no_load_p95(&self) -> Duration {
        self.base_latency.mul_f64(1.0 + 0.9 * self.jitter)
    }

    /// How long a call takes with `n` in flight against capacity `cap`; `None`: shed.
    /// `u` in [-1, 1] scales the jitter.
    pub(crate) fn latency(&self, n: u64, cap: u64, u: f64) -> Option<Duration> {
        if n as f64 > cap as f64 * self.hard_factor {
            return None;
        }
        let queueing = (n as f64 / cap.max(1) as f64).max(1.0);
        let factor = queueing * (1.0 + self.jitter * u).max(0.0);
        Some(self.base_latency.mul_f64(factor))
    }
}

/// Why a call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// Over the hard limit: shed at once (retry later, slow down).
    Overloaded,
    /// A baseline error, answered with this HTTP status.
    Failed(u16),
}

/// A running simulated downstream; share it with `Arc`.
#[derive(Debug)]
pub(crate) struct Downstream {
    config: Config,
    /// Script start, ms since the Unix epoch: processes started at different times share
    /// one timeline.
    epoch_ms: u64,
    in_flight: AtomicU64,
    draws: AtomicU64,
}

/// Milliseconds since the Unix epoch.
pub(crate) fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Downstream {
    /// The model's settings.
    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// A downstream whose script starts at `epoch_ms`.
    pub(crate) fn new(config: Config, epoch_ms: u64) -> Self {
        Self {
            config,
            epoch_ms,
            in_flight: AtomicU64::new(0),
            draws: AtomicU64::new(0),
        }
    }

    /// Time since the script started.
    pub(crate) fn elapsed(&self) -> Duration {
        Duration::from_millis(unix_ms().saturating_sub(self.epoch_ms))
    }

    /// One call: waits for the simulated latency, then succeeds or fails.
    pub(crate) async fn call(&self) -> Result<(), Failure> {
        let n = self.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        let _guard = InFlight(&self.in_flight);
        let elapsed = self.elapsed();
        let cap = self.config.capacity_at(elapsed);
        let (u, e) = (self.draw() * 2.0 - 1.0, self.draw());
        let Some(latency) = self.config.latency(n, cap, u) else {
            // Shedding is cheap for the service but not free: a short wait.
            tokio::time::sleep(self.config.base_latency / 10).await;
            return Err(Failure::Overloaded);
        };
        tokio::time::sleep(latency).await;
        if e < self.config.error_rate && self.config.errors_at(elapsed) {
            return Err(Failure::Failed(self.config.error_status));
        }
        Ok(())
    }

    /// A uniform draw in [0, 1): splitmix64 over a counter, lock-free and seedable.
    fn draw(&self) -> f64 {
        let mut z = self
            .draws
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_add(self.config.seed)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

struct InFlight<'a>(&'a AtomicU64);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        Config {
            script: parse_script("200@20s,80@20s,200@20s").unwrap(),
            base_latency: Duration::from_millis(20),
            jitter: 0.0,
            error_rate: 0.0,
            error_status: 500,
            error_window: None,
            retry_after: Duration::from_secs(1),
            hard_factor: 2.0,
            seed: 1,
        }
    }

    #[test]
    fn script_parses_and_holds_its_last_phase() {
        let c = config();
        assert_eq!(c.script_length(), Duration::from_secs(60));
        assert_eq!(c.capacity_at(Duration::from_secs(5)), 200);
        assert_eq!(c.capacity_at(Duration::from_secs(20)), 80);
        assert_eq!(c.capacity_at(Duration::from_secs(600)), 200);
        assert_eq!(c.ideal_rate_at(Duration::ZERO), 10_000.0);
        assert!(parse_script("200").is_err());
        assert!(parse_script("0@1s").is_err());
        assert!(parse_script("5@x").is_err());
    }

    #[test]
    fn latency_has_a_knee_and_a_hard_limit() {
        let c = config();
        assert_eq!(c.latency(100, 200, 0.0), Some(Duration::from_millis(20)));
        assert_eq!(c.latency(200, 200, 0.0), Some(Duration::from_millis(20)));
        assert_eq!(c.latency(300, 200, 0.0), Some(Duration::from_millis(30)));
        assert_eq!(c.latency(400, 200, 0.0), Some(Duration::from_millis(40)));
        assert_eq!(c.latency(401, 200, 0.0), None);
        let jittered = Config { jitter: 0.1, ..c };
        assert_eq!(jittered.latency(1, 200, 1.0), Some(Duration::from_millis(22)));
    }

    #[tokio::test]
    async fn failures_keep_to_their_window_and_status() {
        let c = Config {
            script: parse_script("100@10s").unwrap(),
            error_rate: 1.0,
            error_status: 429,
            error_window: Some((Duration::from_secs(2), Duration::from_secs(4))),
            ..config()
        };
        assert!(!c.errors_at(Duration::from_millis(1999)));
        assert!(c.errors_at(Duration::from_secs(2)));
        assert!(!c.errors_at(Duration::from_secs(4)));
        let now = unix_ms();
        let inside = Downstream::new(c.clone(), now - 3000);
        assert_eq!(inside.call().await, Err(Failure::Failed(429)));
        let after = Downstream::new(c, now - 5000);
        assert_eq!(after.call().await, Ok(()));
    }
}
