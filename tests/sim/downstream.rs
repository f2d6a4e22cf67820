//! A simulated downstream: flat latency up to a concurrency knee, latency growing in
//! proportion past it (a saturated server: throughput plateaus at knee / base), and past
//! a hard limit it rejects (503) or hangs. Lognormal jitter and random errors on top, all
//! from one seeded RNG so a scenario replays exactly.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::Mutex;
use std::time::Duration;
use weir::JobError;

/// What happens past the hard limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Overload {
    /// Answers 503 after the base latency: a backpressure error.
    Reject,
    /// Never answers in time: the job times out.
    Hang,
}

/// The downstream's behaviour during one phase of a scenario.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Profile {
    /// Latency at or under the knee (median, before jitter).
    pub base: Duration,
    /// Concurrency past which latency grows as base × n / knee.
    pub knee: usize,
    /// Concurrency past which requests fail.
    pub hard: Option<usize>,
    /// What failing means.
    pub overload: Overload,
    /// Sigma of the lognormal jitter factor (0.1: p95 ≈ 1.18 × median).
    pub jitter: f64,
    /// Chance that a request fails with a plain 500 regardless of load (a broken
    /// endpoint: the job's failure, not overload).
    pub error_rate: f64,
    /// Chance that a request is answered 429 regardless of load (a rate limit upstream:
    /// backpressure).
    pub reject_rate: f64,
}

impl Profile {
    /// A downstream with a knee at `knee`, failing past twice that.
    pub(crate) fn knee(knee: usize, base: Duration) -> Self {
        Self {
            base,
            knee,
            hard: Some(knee * 2),
            overload: Overload::Reject,
            jitter: 0.1,
            error_rate: 0.0,
            reject_rate: 0.0,
        }
    }

    /// p95 latency under the knee: the median times the jitter's 95th percentile.
    pub(crate) fn no_load_p95(&self) -> Duration {
        self.base.mul_f64((1.645 * self.jitter).exp())
    }

    /// Successful jobs/s at the knee.
    pub(crate) fn ideal_rate(&self) -> f64 {
        self.knee as f64 / self.base.as_secs_f64()
    }
}

/// The downstream: phases by start time, in-flight count, RNG.
pub(crate) struct Downstream {
    phases: Vec<(Duration, Profile)>,
    state: Mutex<(usize, StdRng)>,
}

impl Downstream {
    pub(crate) fn new(phases: Vec<(Duration, Profile)>, seed: u64) -> Self {
        Self {
            phases,
            state: Mutex::new((0, StdRng::seed_from_u64(seed))),
        }
    }

    /// The profile in force at `t` since the start.
    pub(crate) fn profile(&self, t: Duration) -> Profile {
        self.phases
            .iter()
            .rev()
            .find(|(at, _)| *at <= t)
            .unwrap_or(&self.phases[0])
            .1
    }

    /// A request arrives at `t`: how long it takes and how it ends. Call [`Self::end`]
    /// when it is over.
    pub(crate) fn begin(&self, t: Duration) -> (Duration, Result<(), JobError>) {
        let p = self.profile(t);
        let mut s = self.state.lock().unwrap();
        s.0 += 1;
        let n = s.0;
        let rng = &mut s.1;
        // Box–Muller: one standard normal from two uniforms.
        let (u1, u2): (f64, f64) = (rng.random::<f64>().max(1e-12), rng.random());
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        let jitter = (p.jitter * z).exp();
        if p.hard.is_some_and(|h| n > h) {
            return match p.overload {
                Overload::Reject => (
                    p.base.mul_f64(jitter),
                    Err(JobError::backpressure("503", None).with_status(503)),
                ),
                Overload::Hang => (Duration::from_secs(3600), Ok(())),
            };
        }
        let load = (n as f64 / p.knee as f64).max(1.0);
        let roll = rng.random::<f64>();
        let result = if roll < p.error_rate {
            Err(JobError::retry("500").with_status(500))
        } else if roll < p.error_rate + p.reject_rate {
            Err(JobError::backpressure("429", None).with_status(429))
        } else {
            Ok(())
        };
        (p.base.mul_f64(load * jitter), result)
    }

    pub(crate) fn end(&self) {
        self.state.lock().unwrap().0 -= 1;
    }
}
