//! Prints the limiter comparison table: every simulation scenario (tests/sim) run under
//! weir's AIMD limiter, weir's rule without step acceleration, a fixed limit at the
//! ideal, and Netflix's default AIMD. Paused tokio time: a few seconds of CPU in all.
//!
//! `cargo run --example limiter_sim` (add `--release` for speed);
//! `cargo run --example limiter_sim -- --beta 0.5` replays weir's rows with another β.

#[path = "../tests/sim/mod.rs"]
mod sim;

use sim::run::{Control, run};
use sim::scenarios::{self, Case};
use sim::stats::{limit_at, stats, time_to_at_most, time_to_band};
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let beta: Option<f64> = args
        .iter()
        .position(|a| a == "--beta")
        .and_then(|i| args.get(i + 1))
        .map(|b| b.parse().expect("--beta takes a number"));
    let cases = [
        scenarios::knee(10),
        scenarios::knee(50),
        scenarios::knee(300),
        scenarios::capacity_halves(),
        scenarios::error_burst(),
        scenarios::noise(),
        scenarios::light_load(),
        scenarios::fixed_bounds(),
        scenarios::plain_errors(),
        scenarios::errors_stop(),
    ];
    println!(
        "| scenario | control | throughput / ideal | p95 / target | mean limit (ideal) | limit cv | errors | notes |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for mut case in cases {
        if let Some(b) = beta {
            case.limiter.aimd.beta = b;
        }
        for (name, control, target) in case.controls() {
            if beta.is_some() && name != "weir" {
                continue;
            }
            row(&case, name, &control, target);
        }
    }
}

fn row(case: &Case, name: &str, control: &Control, target: Duration) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let s = &case.scenario;
    let trace = rt.block_on(run(s, control));
    let (from, to) = case.steady;
    let st = stats(&trace, from, to);
    let title = match s.name {
        "knee" => format!("knee {}", case.ideal_limit),
        n => n.to_string(),
    };
    println!(
        "| {title} | {name} | {:.2} | {:.2} | {:.0} ({}) | {:.2} | {:.1} % | {} |",
        st.throughput / case.ideal_rate,
        st.p95.as_secs_f64() / target.as_secs_f64(),
        st.mean_limit,
        case.ideal_limit,
        st.limit_cv,
        st.error_rate * 100.0,
        notes(case, &trace, target),
    );
}

fn notes(case: &Case, t: &sim::run::Trace, target: Duration) -> String {
    let fmt = |x: Option<f64>| x.map_or("never".to_string(), |s| format!("{s:.1} s"));
    match case.scenario.name {
        "capacity halves" => format!(
            "to 50±20 %: {}; back to 100±20 %: {}; p95/target 60–70 s: {:.2}, 70–90 s: {:.2}",
            fmt(time_to_band(t, 60.0, 50, 0.2)),
            fmt(time_to_band(t, 90.0, 100, 0.2)),
            stats(t, 60.0, 70.0).p95.as_secs_f64() / target.as_secs_f64(),
            stats(t, 70.0, 90.0).p95.as_secs_f64() / target.as_secs_f64(),
        ),
        "error burst" => {
            let before = limit_at(t, 30.0);
            let after: Vec<usize> = t
                .limits
                .iter()
                .filter(|l| l.0.as_secs_f64() >= 30.0)
                .map(|l| l.1)
                .collect();
            format!(
                "limit {before} at burst; ≤ half after {}; min in burst {}; {} at end",
                fmt(time_to_at_most(t, 30.0, before / 2)),
                after.iter().take(100).min().unwrap_or(&0),
                limit_at(t, 70.0)
            )
        }
        "noise, no knee" => format!("reaches max after {}", fmt(time_to_band(t, 0.0, 1000, 0.0))),
        "knee" => format!(
            "knee ±20 % after {}",
            fmt(time_to_band(t, 0.0, case.ideal_limit, 0.2))
        ),
        "plain errors" => format!(
            "calls/s {:.2} of the no-error rate; min limit {}",
            stats(t, 10.0, 40.0).calls / case.ideal_rate,
            stats(t, 10.0, 40.0).min_limit
        ),
        "errors stop" => format!(
            "limit {} when they stop; throughput 10–15 s after: {:.2} of ideal",
            limit_at(t, 30.0),
            stats(t, 40.0, 45.0).throughput / case.ideal_rate
        ),
        "light load" => format!(
            "limit range {}–{}",
            stats(t, 0.0, 60.0).min_limit,
            stats(t, 0.0, 60.0).max_limit
        ),
        "min = max" => format!(
            "limit range {}–{}",
            stats(t, 0.0, 30.0).min_limit,
            stats(t, 0.0, 30.0).max_limit
        ),
        _ => String::new(),
    }
}
