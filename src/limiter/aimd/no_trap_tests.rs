//! The rule's guards against being held down: the relative target's baseline (its dips
//! and its floor from uncongested windows), the recheck, and the trap of issue 35.

use super::tests::{MS, cfg, failing, healthy, near, settled, slow};
use super::*;

fn relative(baseline_windows: usize) -> AimdConfig {
    AimdConfig {
        target: Target::Relative(2.0),
        baseline_windows,
        ..cfg()
    }
}

#[test]
fn relative_target_dips_to_remeasure_the_no_load_latency() {
    let mut a = Aimd::new(relative(8), 50).unwrap();
    assert_eq!(a.target(), None);
    let mut run = |s: Summary| {
        let d = a.decide(&s);
        (d.from, d.to, d.reason)
    };
    // An overload window ends slow start (ceiling 50) and gives the first reading:
    // p95 50 ms → target 100 ms.
    assert!(matches!(run(failing(50, 50)), (50, 25, Reason::Overload { .. })));
    // Healthy: the limit dips to half of 25 for one window, then comes back to what the
    // rule chose meanwhile (47: the headroom of a p95 at half the target).
    // Dips recur every 8 / 2 = 4 windows.
    assert_eq!(run(healthy(25)), (25, 12, Reason::Baseline));
    assert_eq!(run(healthy(12)), (12, 47, Reason::NotBinding));
    let headroom = Reason::Headroom {
        p95: 50 * MS,
        target: 100 * MS,
    };
    assert_eq!(run(healthy(47)), (47, 89, headroom));
    assert_eq!(run(healthy(89)), (89, 169, headroom));
    assert_eq!(run(healthy(169)), (169, 84, Reason::Baseline));
    assert_eq!(run(healthy(84)), (84, 321, Reason::NotBinding));
    // A decrease is never turned into a dip; the dip waits for a healthy window.
    assert_eq!(run(slow(321)).1, 240);
    assert_eq!(run(near(240)), (240, 241, Reason::Probe));
    assert_eq!(run(near(241)), (241, 120, Reason::Baseline));
    assert_eq!(run(near(120)), (120, 243, Reason::NotBinding));
    assert_eq!(run(near(243)), (243, 244, Reason::Probe));
    assert_eq!(run(near(244)), (244, 246, Reason::Probe));
    assert_eq!(run(near(246)), (246, 123, Reason::Baseline));
    // An unhealthy dip window cuts from the restored limit (250 × 0.5).
    let d = run(failing(50, 123));
    assert!(matches!(d, (123, 125, Reason::Overload { .. })), "{d:?}");
}

#[test]
fn relative_target_follows_the_low_readings_but_not_under_the_uncongested_ones() {
    let mut a = Aimd::new(relative(4), 50).unwrap();
    a.decide(&failing(50, 50));
    assert_eq!(a.target(), Some(100 * MS), "2 × the window's p95");
    let loaded = Summary {
        p50: 70 * MS,
        p95: 120 * MS,
        ..healthy(25)
    };
    for _ in 0..3 {
        assert!(matches!(a.decide(&loaded).reason, Reason::Latency { .. }));
    }
    // Four windows later the 50 ms reading has aged out: target 2 × 120 ms.
    a.decide(&loaded);
    assert_eq!(a.target(), Some(240 * MS));
    // A quick window brings it down at once...
    a.decide(&Summary {
        p95: 40 * MS,
        ..healthy(1)
    });
    assert_eq!(a.target(), Some(80 * MS));
    // ...but not under what windows at the floor showed: here the limit is at min (1),
    // so each window's reading is an uncongested one, averaged with weight 1/4.
    let floor = AimdConfig {
        min: 25,
        ..relative(4)
    };
    let mut a = Aimd::new(floor, 25).unwrap();
    a.decide(&Summary {
        p95: 80 * MS,
        ..failing(50, 25)
    });
    a.decide(&Summary {
        p95: 40 * MS,
        ..failing(50, 25)
    });
    assert_eq!(a.target(), Some(140 * MS), "2 × (80 × 3/4 + 40 / 4) = 2 × 70 ms");
}

/// The trap (issue 35): overload answers cut the limit from 64 to 1, and the relative
/// target comes from one lucky window (p95 20 ms: target 30 ms) under the service's own
/// p95 (56 ms at any load), so every window at the floor reads as "over target" and
/// the limit could never leave 1.
#[test]
fn no_trap_at_the_floor_when_the_target_is_under_the_no_load_latency() {
    let c = AimdConfig {
        target: Target::Relative(1.5),
        ..cfg()
    };
    let mut a = Aimd::new(c, 64).unwrap();
    let shown = |limit| Summary {
        p50: 20 * MS,
        p95: 56 * MS,
        ..healthy(limit)
    };
    let lucky = Summary {
        p95: 20 * MS,
        ..failing(50, 64)
    };
    assert_eq!(a.decide(&lucky).to, 32);
    let cuts: Vec<usize> = (0..5)
        .map(|_| {
            a.decide(&Summary {
                overloads: 50,
                ..shown(a.limit())
            })
            .to
        })
        .collect();
    assert_eq!(cuts, [16, 8, 4, 2, 1]);
    assert_eq!(a.target(), Some(30 * MS), "1.5 × the lucky 20 ms");
    // The overload stops. The first window at the floor is an uncongested reading:
    // target 1.5 × 56 ms, so the limit is free (its second healthy window is spent on
    // a baseline dip, 2 → 1, restoring 4), and doubles towards half the ceiling
    // (64 / 2), kept under 7/8 of 32, the highest limit that drew overload answers at a
    // congested latency; then probes.
    let limits: Vec<usize> = (0..10).map(|_| a.decide(&shown(a.limit())).to).collect();
    assert_eq!(a.target(), Some(84 * MS));
    assert_eq!(limits, [2, 1, 4, 8, 16, 28, 30, 33, 37, 41]);
}

#[test]
fn a_target_never_met_still_rechecks_every_recheck_windows() {
    // An absolute 100 ms target against a service whose p95 is 150 ms at any load: the
    // limit sinks to the floor, and the window after `recheck_windows` in a row over
    // target steps up once (the cut in `settled` was the first of the first run).
    let c = AimdConfig {
        recheck_windows: 3,
        ..cfg()
    };
    let mut a = settled(c, 3);
    let reasons: Vec<(usize, &str)> = (0..8)
        .map(|_| {
            let d = a.decide(&slow(a.limit()));
            (d.to, d.reason.name())
        })
        .collect();
    assert_eq!(
        reasons,
        [
            (2, "latency"),
            (1, "latency"),
            (2, "recheck"),
            (1, "latency"),
            (1, "latency"),
            (1, "latency"),
            (2, "recheck"),
            (1, "latency")
        ]
    );
    let d = Reason::Recheck { windows: 3 };
    assert_eq!(d.to_string(), "recheck: 3 windows without an increase");
}
