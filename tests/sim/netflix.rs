//! Netflix concurrency-limits' `AIMDLimit` with its defaults, for comparison: updated on
//! every sample (not per window), +1 when in-flight × 2 ≥ limit, × 0.9 on a drop or an
//! RTT over the 5 s timeout, min 20 (its defaults: initial 20, max 200; the max is
//! raised to the scenario's so the comparison is about the rule).

use std::time::Duration;

#[derive(Debug, Clone)]
pub(crate) struct NetflixAimd {
    pub limit: usize,
    pub min: usize,
    pub max: usize,
    pub backoff: f64,
    pub timeout: Duration,
}

impl NetflixAimd {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            limit: 20,
            min: 20,
            max,
            backoff: 0.9,
            timeout: Duration::from_secs(5),
        }
    }

    /// `AIMDLimit._update`, line for line.
    pub(crate) fn update(&mut self, rtt: Duration, in_flight: usize, dropped: bool) -> usize {
        let mut l = self.limit;
        if dropped || rtt > self.timeout {
            l = (l as f64 * self.backoff) as usize;
        } else if in_flight * 2 >= l {
            l += 1;
        }
        self.limit = l.clamp(self.min, self.max);
        self.limit
    }
}
