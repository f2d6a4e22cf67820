//! The adaptive limiter against simulated downstreams (see `tests/sim/scenarios.rs` for
//! each scenario and its expected behaviour), under paused tokio time: minutes of
//! simulated traffic in seconds, identical on every run. Assertions are ranges.
//! `cargo run --example limiter_sim` prints the comparison table with fixed limits and
//! Netflix's AIMD.

mod sim;

use sim::run::{Control, Trace, run};
use sim::scenarios::{self, Case, TARGET};
use sim::stats::{Stats, limit_at, stats, time_to_at_most, time_to_band};
use std::time::Duration;
use weir::limiter::Target;

async fn weir(case: &Case) -> (Trace, Stats) {
    let trace = run(&case.scenario, &Control::Adaptive(case.limiter.clone())).await;
    let st = stats(&trace, case.steady.0, case.steady.1);
    (trace, st)
}

/// The bars after convergence: ≥ 90 % of the ideal throughput, p95 ≤ 1.2 × target.
fn assert_converged(case: &Case, st: &Stats, target: Duration) {
    let share = st.throughput / case.ideal_rate;
    assert!(
        share >= 0.9,
        "{}: throughput {share:.2} of ideal; {st:?}",
        case.scenario.name
    );
    assert!(
        st.p95 <= target.mul_f64(1.2),
        "{}: p95 {:?} over 1.2 × {target:?}; {st:?}",
        case.scenario.name,
        st.p95
    );
}

/// The limit hovers over the knee: from `lo` to `hi` times it on average.
fn assert_mean_limit(case: &Case, st: &Stats, lo: f64, hi: f64) {
    let k = case.ideal_limit as f64;
    let m = st.mean_limit;
    assert!((lo * k..=hi * k).contains(&m), "mean limit {m} for knee {k}");
}

#[tokio::test(start_paused = true)]
async fn knee_at_10() {
    let case = scenarios::knee(10);
    let (_, st) = weir(&case).await;
    assert_converged(&case, &st, TARGET);
    assert_mean_limit(&case, &st, 0.9, 1.3);
    assert_eq!(
        st.error_rate, 0.0,
        "never pushed past the hard limit once converged"
    );
}

#[tokio::test(start_paused = true)]
async fn knee_at_50_with_timeouts_past_the_hard_limit() {
    let case = scenarios::knee(50);
    let (_, st) = weir(&case).await;
    assert_converged(&case, &st, TARGET);
    assert_mean_limit(&case, &st, 0.9, 1.3);
    assert!(st.error_rate < 0.01, "{st:?}");
}

#[tokio::test(start_paused = true)]
async fn knee_at_300() {
    let case = scenarios::knee(300);
    let (trace, st) = weir(&case).await;
    assert_converged(&case, &st, TARGET);
    assert_mean_limit(&case, &st, 0.9, 1.3);
    let reached = time_to_band(&trace, 0.0, 300, 0.2).expect("reaches the knee");
    assert!(reached < 25.0, "from 64 to 300 ± 20 % took {reached} s");
}

#[tokio::test(start_paused = true)]
async fn relative_target_needs_no_latency_figure() {
    // Same knee, but the user left the default "1.5x": target = 1.5 × the lowest recent
    // window p95 ≈ 1.5 × 59 ms ≈ 88 ms.
    let mut case = scenarios::knee(50);
    case.limiter.aimd.target = Target::Relative(1.5);
    let (_, st) = weir(&case).await;
    let target = case.scenario.phases[0].1.no_load_p95().mul_f64(1.5);
    assert_converged(&case, &st, target);
    assert_eq!(st.error_rate, 0.0, "short of the hard limit (2 × knee)");
    // A looser target than the absolute 75 ms lets the limit ride higher.
    assert_mean_limit(&case, &st, 1.0, 1.6);
}

#[tokio::test(start_paused = true)]
async fn capacity_halves_then_recovers() {
    let case = scenarios::capacity_halves();
    let (trace, st) = weir(&case).await;
    assert_converged(&case, &st, TARGET);
    assert_mean_limit(&case, &st, 0.9, 1.3);
    let down = time_to_band(&trace, 60.0, 50, 0.2).expect("follows the halving");
    assert!(down <= 10.0, "within 20 % of the new knee after {down} s");
    let during = stats(&trace, 70.0, 90.0);
    assert!((40.0..=70.0).contains(&during.mean_limit), "{during:?}");
    assert!(during.throughput >= 0.9 * case.ideal_rate / 2.0, "{during:?}");
    let up = time_to_band(&trace, 90.0, 100, 0.2).expect("follows the recovery");
    assert!(up <= 30.0, "back within 20 % of the old knee after {up} s");
}

#[tokio::test(start_paused = true)]
async fn error_burst_halves_within_two_windows_and_recovers() {
    let case = scenarios::error_burst();
    let (trace, _) = weir(&case).await;
    let before = limit_at(&trace, 30.0);
    assert_eq!(before, 200, "at max before the burst");
    // The first two windows closing after 30 s.
    let second = trace
        .decisions
        .iter()
        .filter(|d| d.0.as_secs_f64() >= 30.0)
        .nth(1)
        .unwrap();
    assert!(
        second.2 <= before / 2,
        "after two windows of the burst: {second:?}"
    );
    let halved = time_to_at_most(&trace, 30.0, before / 2).unwrap();
    assert!(halved <= 2.5, "halved after {halved} s");
    let end = limit_at(&trace, 70.0);
    assert!(end >= 180, "back to {end} of 200 by the end");
}

#[tokio::test(start_paused = true)]
async fn latency_noise_without_knee_climbs_to_max() {
    for target in [None, Some(Target::Relative(1.5))] {
        let mut case = scenarios::noise();
        if let Some(t) = target {
            // Heavy jitter (p95 ≈ 2.3 × median): a relative target measured on the p95
            // does not mistake the spread for congestion.
            case.limiter.aimd.target = t;
        }
        noise_climbs(&case).await;
    }
}

async fn noise_climbs(case: &Case) {
    let (trace, st) = weir(case).await;
    let at_max = time_to_band(&trace, 0.0, 1000, 0.0).expect("reaches max");
    assert!(at_max < 35.0, "reached max after {at_max} s");
    assert!(st.min_limit >= 900, "stays near max: {st:?}");
    assert!(st.throughput >= 0.9 * case.ideal_rate, "{st:?}");
}

#[tokio::test(start_paused = true)]
async fn light_load_never_grows_the_limit() {
    let case = scenarios::light_load();
    let (trace, st) = weir(&case).await;
    let all = stats(&trace, 0.0, 60.0);
    assert_eq!(
        (all.min_limit, all.max_limit),
        (64, 64),
        "not binding: no reason to move"
    );
    assert!((8.0..=12.0).contains(&st.mean_in_flight), "{st:?}");
    assert!(
        (0.95..=1.05).contains(&(st.throughput / case.ideal_rate)),
        "all arrivals served: {st:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn min_equal_max_never_moves() {
    let case = scenarios::fixed_bounds();
    let (trace, st) = weir(&case).await;
    assert!(trace.limits.iter().all(|l| l.1 == 40));
    assert!(st.p95 > TARGET, "every window over target, and still 40: {st:?}");
    assert!(!trace.decisions.is_empty(), "the rule ran");
}

#[tokio::test(start_paused = true)]
async fn relative_target_does_not_drift_under_sustained_load() {
    // Ten minutes past the knee with no hard limit to stop a drift: once the quiet
    // start-up windows age out of the baseline (60 windows here), only the periodic
    // dips keep the no-load reading honest. Without them the limit climbed to max.
    let mut case = scenarios::knee(10);
    case.scenario.duration = Duration::from_secs(600);
    case.scenario.phases[0].1.hard = None;
    case.limiter.aimd.target = Target::Relative(1.5);
    case.limiter.aimd.baseline_windows = 60;
    let target = case.scenario.phases[0].1.no_load_p95().mul_f64(1.5);
    let trace = run(&case.scenario, &Control::Adaptive(case.limiter.clone())).await;
    for minute in [2.0, 5.0, 9.0] {
        let st = stats(&trace, minute * 60.0, minute * 60.0 + 60.0);
        assert_converged(&case, &st, target);
        assert_mean_limit(&case, &st, 1.0, 1.6);
    }
}

#[tokio::test(start_paused = true)]
async fn plain_500s_are_the_jobs_failure_not_overload() {
    let case = scenarios::plain_errors();
    let (trace, st) = weir(&case).await;
    let calls = st.calls / case.ideal_rate;
    assert!(calls >= 0.9, "calls/s {calls:.2} of the no-error rate; {st:?}");
    assert!(st.min_limit >= 180, "the limit stays near max: {st:?}");
    assert!(
        trace.decisions.iter().all(|d| d.2 >= d.1 || d.2 >= 150),
        "no cut on 500s"
    );
}

#[tokio::test(start_paused = true)]
async fn no_trap_at_the_floor_after_errors_stop() {
    let case = scenarios::errors_stop();
    let (trace, st) = weir(&case).await;
    let share = st.throughput / case.ideal_rate;
    assert!(
        share >= 0.8,
        "throughput {share:.2} of ideal from 10 s after the errors; {st:?}; limit at 40 s: {}, at 89 s: {}",
        limit_at(&trace, 40.0),
        limit_at(&trace, 89.0)
    );
    let first = stats(&trace, 40.0, 45.0).throughput / case.ideal_rate;
    assert!(first >= 0.8, "10 to 15 s after the errors: {first:.2} of ideal");
}

#[tokio::test(start_paused = true)]
async fn cold_start_reaches_the_knee_in_slow_start() {
    // From the default 64 to a knee of 300: doubling per window until the first cut.
    let case = scenarios::knee(300);
    let (trace, _) = weir(&case).await;
    let reached = time_to_band(&trace, 0.0, 300, 0.2).expect("reaches the knee");
    assert!(reached <= 5.0, "from 64 to 300 ± 20 % took {reached} s");
    // And a max of 1000 with no knee in reach.
    let (trace, _) = weir(&scenarios::noise()).await;
    let at_max = time_to_band(&trace, 0.0, 1000, 0.0).expect("reaches max");
    assert!(at_max <= 6.0, "from 64 to max 1000 took {at_max} s");
}
