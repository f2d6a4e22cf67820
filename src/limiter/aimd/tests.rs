use super::*;

pub(super) const MS: Duration = Duration::from_millis(1);

pub(super) fn cfg() -> AimdConfig {
    AimdConfig {
        target: Target::Absolute(100 * MS),
        ..AimdConfig::default()
    }
}

/// A healthy window: 100 successes at 50 ms, the pool full.
pub(super) fn healthy(peak: usize) -> Summary {
    Summary {
        successes: 100,
        overloads: 0,
        failures: 0,
        p50: 40 * MS,
        p95: 50 * MS,
        peak_in_flight: peak,
    }
}

/// A healthy window near the target (p95 96 ms of 100 ms, no queue: p50 as in
/// [`healthy`]): no headroom to grow by, so an increase is a probe.
pub(super) fn near(peak: usize) -> Summary {
    Summary {
        p95: 96 * MS,
        ..healthy(peak)
    }
}

pub(super) fn slow(peak: usize) -> Summary {
    Summary {
        p95: 150 * MS,
        ..healthy(peak)
    }
}

pub(super) fn failing(errors: usize, peak: usize) -> Summary {
    Summary {
        overloads: errors,
        ..healthy(peak)
    }
}

/// A rule at `limit` that has seen congestion once (a latency cut from ⌈limit / 0.75⌉),
/// so past slow start.
pub(super) fn settled(c: AimdConfig, limit: usize) -> Aimd {
    let from = (limit as f64 / 0.75).ceil() as usize;
    let mut a = Aimd::new(c, from).unwrap();
    assert_eq!(a.decide(&slow(from)).to, limit);
    a
}

#[test]
fn slow_start_doubles_until_the_first_congestion() {
    let mut a = Aimd::new(cfg(), 64).unwrap();
    let limits: Vec<(usize, Reason)> = (0..5)
        .map(|_| {
            let d = a.decide(&healthy(a.limit()));
            (d.to, d.reason)
        })
        .collect();
    let ss = Reason::SlowStart;
    // At max nothing goes faster than a probe.
    assert_eq!(
        limits,
        [(128, ss), (256, ss), (512, ss), (1000, ss), (1000, Reason::Probe)]
    );
    // The first cut ends it: 1000 × 0.75, then +1 near the target (1000 / 2 = 500 is
    // under the limit).
    assert_eq!(a.decide(&slow(1000)).to, 750);
    assert_eq!(
        a.decide(&near(750)),
        Decision {
            from: 750,
            to: 751,
            reason: Reason::Probe
        }
    );
}

#[test]
fn binding_healthy_window_adds_alpha() {
    let mut a = settled(cfg(), 20);
    let d = a.decide(&near(20));
    assert_eq!((d.from, d.to, d.reason), (20, 21, Reason::Probe));
}

#[test]
fn slow_window_multiplies_by_beta_and_floors() {
    let mut a = Aimd::new(cfg(), 30).unwrap();
    let d = a.decide(&slow(30));
    assert_eq!((d.from, d.to), (30, 22), "30 × 0.75 = 22.5, floored");
    assert_eq!(
        d.reason,
        Reason::Latency {
            p95: 150 * MS,
            target: 100 * MS
        }
    );
    assert_eq!(a.decide(&slow(30)).to, 16, "22 × 0.75 = 16.5");
}

#[test]
fn errors_over_threshold_halve() {
    let mut a = settled(cfg(), 30);
    // 6 overload answers in 106 samples = 5.7 % > 5 %.
    let d = a.decide(&failing(6, 30));
    assert_eq!(d.to, 15);
    assert!(matches!(d.reason, Reason::Overload { rate } if (rate - 6.0 / 106.0).abs() < 1e-12));
    // 5 in 105 = 4.8 %: under the threshold, and binding: 15 is under half the
    // ceiling of 40, so slow start doubles, up to that half.
    assert_eq!(a.decide(&failing(5, 15)).to, 20);
}

#[test]
fn plain_failures_are_counted_but_never_cut() {
    let mut a = settled(cfg(), 30);
    // 40 % of the jobs fail on their own (plain 500s): the limit still probes up.
    let s = Summary {
        failures: 40,
        successes: 60,
        ..near(30)
    };
    assert_eq!((s.failure_rate(), s.overload_rate()), (0.4, 0.0));
    assert_eq!(
        a.decide(&s),
        Decision {
            from: 30,
            to: 31,
            reason: Reason::Probe
        }
    );
    // They count in the denominator: 6 overloads among 60 successes and 40 failures is
    // 5.7 % of 106 samples, over the threshold.
    let d = a.decide(&Summary { overloads: 6, ..s });
    assert_eq!(d.to, 15);
}

#[test]
fn errors_win_over_latency() {
    let mut a = Aimd::new(cfg(), 40).unwrap();
    let s = Summary {
        overloads: 50,
        ..slow(40)
    };
    assert_eq!(a.decide(&s).to, 20);
}

#[test]
fn not_binding_holds_and_binding_threshold_is_inclusive() {
    let mut a = settled(cfg(), 20);
    let d = a.decide(&near(17));
    assert_eq!((d.to, d.reason), (20, Reason::NotBinding), "17 < 0.9 × 20");
    assert_eq!(a.decide(&near(18)).to, 21, "18 = 0.9 × 20 counts as binding");
}

#[test]
fn step_doubles_up_to_an_eighth_of_the_limit_and_resets_on_decrease() {
    let mut a = settled(cfg(), 100);
    let limits: Vec<usize> = (0..6).map(|_| a.decide(&near(1000)).to).collect();
    // Steps 1, 2, 4, 8, then the caps ⌊115 / 8⌋ = 14 and ⌊129 / 8⌋ = 16.
    assert_eq!(limits, [101, 103, 107, 115, 129, 145]);
    assert_eq!(a.decide(&slow(145)).to, 108);
    assert_eq!(a.decide(&near(108)).to, 109, "step back to alpha after a cut");
    a.decide(&near(10));
    assert_eq!(a.decide(&near(109)).to, 110, "and after a hold");
}

#[test]
fn slow_start_back_to_half_the_ceiling_after_a_run_of_cuts() {
    let mut a = Aimd::new(cfg(), 200).unwrap();
    let cuts: Vec<usize> = (0..3).map(|_| a.decide(&failing(50, 200)).to).collect();
    assert_eq!(cuts, [100, 50, 25], "one run of cuts: the ceiling stays 200");
    let limits: Vec<usize> = (0..10).map(|_| a.decide(&near(1000)).to).collect();
    // Doubling below 100 (= 200 / 2, where slow start stops), then probes whose step
    // doubled meanwhile, up to 1/8 of the limit.
    assert_eq!(limits, [50, 100, 104, 112, 126, 141, 158, 177, 199, 223]);
    // A new run of cuts sets a new ceiling: 223, so slow start below 111.
    a.decide(&slow(223));
    a.decide(&slow(223));
    a.decide(&slow(223));
    assert_eq!(a.limit(), 93);
    assert_eq!(a.decide(&near(1000)).to, 111);
    assert_eq!(a.decide(&near(1000)).to, 113);
}

#[test]
fn headroom_finds_capacity_that_came_back() {
    // Past slow start, a window at half the target grows the limit by 0.95 × 100 / 50.
    let mut a = settled(cfg(), 100);
    let d = a.decide(&healthy(100));
    let reason = Reason::Headroom {
        p95: 50 * MS,
        target: 100 * MS,
    };
    assert_eq!(
        d,
        Decision {
            from: 100,
            to: 190,
            reason
        }
    );
    assert_eq!(reason.to_string(), "headroom: p95 50ms under the 100ms target");
    // At most a doubling, and never past max.
    let fast = Summary {
        p50: 10 * MS,
        p95: 10 * MS,
        ..healthy(1000)
    };
    assert_eq!(a.decide(&fast).to, 380);
    assert_eq!(a.decide(&fast).to, 760);
    assert_eq!(a.decide(&fast).to, 1000);
}

#[test]
fn a_queue_ends_slow_start() {
    let mut a = Aimd::new(cfg(), 64).unwrap();
    assert_eq!(a.decide(&healthy(64)).to, 128);
    // The median rose 20 % with the limit (a queue at the service), the p95 still under
    // the target: no doubling past the knee, the headroom (0.95 × 100 / 80) instead.
    let queued = Summary {
        p50: 48 * MS,
        p95: 80 * MS,
        ..healthy(128)
    };
    let d = a.decide(&queued);
    assert_eq!((d.to, d.reason.name()), (152, "headroom"));
    // Without the rise it would have doubled.
    let mut b = Aimd::new(cfg(), 64).unwrap();
    b.decide(&healthy(64));
    let flat = Summary {
        p50: 43 * MS,
        ..queued
    };
    assert_eq!(b.decide(&flat).to, 256, "p50 43 ms is within 10 % of 40 ms");
}

#[test]
fn growth_stays_under_a_limit_that_shed_load() {
    let c = AimdConfig {
        recheck_windows: 5,
        ..cfg()
    };
    let mut a = Aimd::new(c, 200).unwrap();
    // Overload answers at a congested latency: a service shedding what it cannot take.
    let shed = Summary {
        overloads: 50,
        ..slow(200)
    };
    assert_eq!(a.decide(&shed).to, 100);
    // The headroom would take 100 to 190, then past 200: kept under 7/8 of 200, and
    // past that by probes only.
    let limits: Vec<usize> = (0..4).map(|_| a.decide(&healthy(1000)).to).collect();
    assert_eq!(limits, [175, 177, 181, 189]);
    // Once the memory is recheck_windows old, the headroom applies again.
    assert_eq!(a.decide(&healthy(1000)).to, 359);
    // Overload answers at a healthy latency (a rate limit) leave no such memory.
    let mut b = Aimd::new(cfg(), 200).unwrap();
    assert_eq!(b.decide(&failing(50, 200)).to, 100);
    assert_eq!(b.decide(&healthy(100)).to, 190);
}

#[test]
fn classic_aimd_without_growth_cap() {
    let c = AimdConfig {
        growth_cap: 0.0,
        ..cfg()
    };
    let mut a = Aimd::new(c, 100).unwrap();
    let limits: Vec<usize> = (0..3).map(|_| a.decide(&healthy(1000)).to).collect();
    assert_eq!(limits, [101, 102, 103]);
    a.decide(&failing(50, 103));
    a.decide(&failing(50, 51));
    let limits: Vec<usize> = (0..3).map(|_| a.decide(&healthy(1000)).to).collect();
    assert_eq!(limits, [26, 27, 28], "no slow start either");
}

#[test]
fn bounds_hold() {
    let c = AimdConfig {
        min: 10,
        max: 12,
        ..cfg()
    };
    let mut a = Aimd::new(c.clone(), 500).unwrap();
    assert_eq!(a.limit(), 12, "initial clamped to max");
    assert_eq!(a.decide(&healthy(12)).to, 12);
    assert_eq!(a.decide(&slow(12)).to, 10, "⌊12 × 0.75⌋ = 9, raised to min");
    assert_eq!(a.decide(&failing(100, 12)).to, 10);
    let fixed = AimdConfig {
        min: 7,
        max: 7,
        ..cfg()
    };
    let mut a = Aimd::new(fixed, 1).unwrap();
    for s in [healthy(7), slow(7), failing(50, 7)] {
        assert_eq!(a.decide(&s).to, 7);
    }
}

#[test]
fn windows_without_successes_leave_the_baseline_alone() {
    let c = AimdConfig {
        target: Target::Relative(2.0),
        ..cfg()
    };
    let mut a = Aimd::new(c, 50).unwrap();
    let all_errors = Summary {
        successes: 0,
        overloads: 10,
        failures: 0,
        p50: Duration::ZERO,
        p95: Duration::ZERO,
        peak_in_flight: 50,
    };
    assert_eq!(a.decide(&all_errors).to, 25);
    assert_eq!(a.target(), None);
    let empty = Summary::default();
    assert_eq!(a.decide(&empty).reason, Reason::NotBinding);
}
