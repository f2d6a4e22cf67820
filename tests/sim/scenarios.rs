//! The scenarios, each with the behaviour it expects. Base latency 50 ms and lognormal
//! jitter σ = 0.1 (no-load p95 ≈ 59 ms) unless said otherwise; the limiter defends an
//! absolute p95 target of 75 ms (1.5 × base) with 1-second windows of at least 50
//! samples, starting from the consumer's default concurrency, 64.

use super::downstream::{Overload, Profile};
use super::run::{Control, Load, Scenario};
use std::time::Duration;
use weir::limiter::{LimiterConfig, Target};

pub(crate) const BASE: Duration = Duration::from_millis(50);
pub(crate) const TARGET: Duration = Duration::from_millis(75);

/// weir's limiter as the scenarios configure it: defaults, but for `target` and `max`.
pub(crate) fn limiter(target: Target, min: usize, max: usize) -> LimiterConfig {
    let mut c = LimiterConfig::default();
    c.aimd.min = min;
    c.aimd.max = max;
    c.aimd.target = target;
    c
}

/// A scenario plus what it is measured against.
#[derive(Debug, Clone)]
pub(crate) struct Case {
    pub scenario: Scenario,
    /// weir's configuration for it.
    pub limiter: LimiterConfig,
    /// The best fixed limit, known only to an oracle.
    pub ideal_limit: usize,
    /// Successful jobs/s at the ideal limit.
    pub ideal_rate: f64,
    /// The interval (seconds) judged as converged.
    pub steady: (f64, f64),
}

impl Case {
    /// The controls compared, each with the p95 target it is judged against: weir;
    /// weir told only "1.5x" (the default relative target, judged against 1.5 × the
    /// no-load p95 of the first phase); weir without
    /// step acceleration and slow start (classic +1 AIMD); a fixed limit at the ideal;
    /// Netflix's default AIMD.
    pub(crate) fn controls(&self) -> Vec<(&'static str, Control, Duration)> {
        let target = self.scenario.target;
        let mut classic = self.limiter.clone();
        classic.aimd.growth_cap = 0.0;
        let mut relative = self.limiter.clone();
        relative.aimd.target = Target::Relative(1.5);
        let no_load_p95 = self.scenario.phases[0].1.no_load_p95();
        vec![
            ("weir", Control::Adaptive(self.limiter.clone()), target),
            (
                "weir, target 1.5x",
                Control::Adaptive(relative),
                no_load_p95.mul_f64(1.5),
            ),
            ("weir, classic +1", Control::Adaptive(classic), target),
            ("fixed = ideal", Control::Fixed(self.ideal_limit), target),
            ("netflix AIMD", Control::Netflix(self.limiter.aimd.max), target),
        ]
    }
}

fn scenario(name: &'static str, phases: Vec<(Duration, Profile)>, secs: u64) -> Scenario {
    Scenario {
        name,
        phases,
        load: Load::Backlog,
        duration: Duration::from_secs(secs),
        initial: 64,
        job_timeout: None,
        target: TARGET,
        seed: 7,
    }
}

/// Knee at `k`, rejecting (503) past 2k; for k = 50 the downstream hangs past 2k instead
/// and jobs time out after 1 s. Backlog, max 1000, 60 s.
/// Expect: the limit settles in a sawtooth just around the knee (cut when p95 passes
/// 75 ms, near 1.27 k); over the last 30 s, throughput ≥ 90 % of k / 50 ms and p95 ≤
/// 1.2 × 75 ms.
pub(crate) fn knee(k: usize) -> Case {
    let mut p = Profile::knee(k, BASE);
    let mut s = scenario("knee", vec![(Duration::ZERO, p)], 60);
    if k == 50 {
        p.overload = Overload::Hang;
        s.phases = vec![(Duration::ZERO, p)];
        s.job_timeout = Some(Duration::from_secs(1));
    }
    Case {
        ideal_rate: p.ideal_rate(),
        ideal_limit: k,
        steady: (30.0, 60.0),
        limiter: limiter(Target::Absolute(TARGET), 1, 1000),
        scenario: s,
    }
}

/// Knee 100 for 60 s, then 50 (capacity halves; hard limit 100) for 30 s, then 100 again
/// until 150 s. Expect: the limit within 20 % of 50 less than 10 s after the halving, and
/// within 20 % of 100 less than 30 s after the recovery.
pub(crate) fn capacity_halves() -> Case {
    let full = Profile::knee(100, BASE);
    let half = Profile::knee(50, BASE);
    let phases = vec![
        (Duration::ZERO, full),
        (Duration::from_secs(60), half),
        (Duration::from_secs(90), full),
    ];
    Case {
        scenario: scenario("capacity halves", phases, 150),
        limiter: limiter(Target::Absolute(TARGET), 1, 1000),
        ideal_limit: 100,
        steady: (30.0, 60.0),
        ideal_rate: full.ideal_rate(),
    }
}

/// Flat latency (no knee in reach), max 200; from 30 s to 40 s a third of requests are
/// answered 429 (overload). Expect: the limit at max before the burst, at most half of
/// it within 2 windows of the burst's start, back at max by the end (70 s).
pub(crate) fn error_burst() -> Case {
    let calm = flat(BASE);
    let burst = Profile {
        reject_rate: 0.33,
        ..calm
    };
    let phases = vec![
        (Duration::ZERO, calm),
        (Duration::from_secs(30), burst),
        (Duration::from_secs(40), calm),
    ];
    Case {
        scenario: scenario("error burst", phases, 70),
        limiter: limiter(Target::Absolute(TARGET), 1, 200),
        ideal_limit: 200,
        steady: (50.0, 70.0),
        ideal_rate: 200.0 / BASE.as_secs_f64(),
    }
}

/// No knee, heavy jitter (σ = 0.5, p95 ≈ 2.3 × median) around 200 ms, target 600 ms,
/// max 1000. Expect: noise alone never crosses the target, so the limit climbs to max
/// and stays there.
pub(crate) fn noise() -> Case {
    let base = Duration::from_millis(200);
    let p = Profile {
        jitter: 0.5,
        hard: None,
        ..Profile::knee(1_000_000, base)
    };
    let mut s = scenario("noise, no knee", vec![(Duration::ZERO, p)], 60);
    s.target = 3 * base;
    Case {
        scenario: s,
        limiter: limiter(Target::Absolute(3 * base), 1, 1000),
        ideal_limit: 1000,
        steady: (40.0, 60.0),
        ideal_rate: 1000.0 / base.as_secs_f64() / (0.5f64 * 0.5 / 2.0).exp(),
    }
}

/// Poisson arrivals at 200 jobs/s (10 in flight on average at 50 ms), limit 64, knee far
/// away. Expect: the limit is never binding, so it never grows; every arrival is served.
pub(crate) fn light_load() -> Case {
    let p = Profile {
        hard: None,
        ..Profile::knee(1_000_000, BASE)
    };
    let mut s = scenario("light load", vec![(Duration::ZERO, p)], 60);
    s.load = Load::Poisson(200.0);
    Case {
        scenario: s,
        limiter: limiter(Target::Absolute(TARGET), 1, 1000),
        ideal_limit: 64,
        steady: (10.0, 60.0),
        ideal_rate: 200.0,
    }
}

/// min = max = 40 over a downstream with its knee at 20 (so every window is over the
/// target). Expect: the limit never moves from 40.
pub(crate) fn fixed_bounds() -> Case {
    let p = Profile::knee(20, BASE);
    Case {
        scenario: scenario(
            "min = max",
            vec![(Duration::ZERO, Profile { hard: None, ..p })],
            30,
        ),
        limiter: limiter(Target::Absolute(TARGET), 40, 40),
        ideal_limit: 40,
        steady: (10.0, 30.0),
        ideal_rate: p.ideal_rate(),
    }
}

/// Flat latency `base`: no knee in reach, no hard limit.
fn flat(base: Duration) -> Profile {
    Profile {
        hard: None,
        ..Profile::knee(1_000_000, base)
    }
}

/// Flat latency, max 200, and 15 % of requests answered with a plain 500 all along (one
/// broken endpoint, not overload). Expect: the limit climbs to max and stays; calls/s
/// ≥ 90 % of the no-error rate (200 / 50 ms).
pub(crate) fn plain_errors() -> Case {
    let p = Profile {
        error_rate: 0.15,
        ..flat(BASE)
    };
    Case {
        scenario: scenario("plain errors", vec![(Duration::ZERO, p)], 40),
        limiter: limiter(Target::Absolute(TARGET), 1, 200),
        ideal_limit: 200,
        steady: (10.0, 40.0),
        ideal_rate: 200.0 / BASE.as_secs_f64(),
    }
}

/// Flat latency with heavy jitter (σ = 0.5: p95 ≈ 2.3 × median), the default relative
/// target 1.5x, max 200; from 10 s to 30 s 5 % of requests get a 500 and 5 % a 429.
/// Expect: the limit may fall during the errors, and once they stop it climbs back:
/// ≥ 80 % of the ideal throughput from 10 s after the end of the errors.
pub(crate) fn errors_stop() -> Case {
    let calm = Profile {
        jitter: 0.5,
        ..flat(BASE)
    };
    let errors = Profile {
        error_rate: 0.05,
        reject_rate: 0.05,
        ..calm
    };
    let phases = vec![
        (Duration::ZERO, calm),
        (Duration::from_secs(10), errors),
        (Duration::from_secs(30), calm),
    ];
    Case {
        scenario: scenario("errors stop", phases, 90),
        limiter: limiter(Target::Relative(1.5), 1, 200),
        ideal_limit: 200,
        steady: (40.0, 90.0),
        ideal_rate: 200.0 / BASE.as_secs_f64() / (0.5f64 * 0.5 / 2.0).exp(),
    }
}
