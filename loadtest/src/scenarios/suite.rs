//! `scenarios`: the adaptive limiter's named scenarios, each a `downstream` run of its own
//! (a fresh queue, the simulated service set up for it), with the figures the limiter is
//! judged by: the share of the ideal call rate (overall, and settled: leaving out the
//! first 3 s after each change), the time to get back to 80% of the ideal after each
//! change, p95 against the target, and the calls the service shed. Each prints its
//! summary and one `RESULT` line and, with `--out DIR`, writes DIR/NAME/ (result.json,
//! timeseries.csv, throughput.png, latency.png).
//!
//! A call is a success or a failed answer (the ideal counts every call the service can
//! take: capacity / base latency); the shed calls (over the hard limit) are counted apart.

use super::downstream::once;
use crate::cli::{Common, DownstreamArgs, DownstreamOpts};
use crate::report::{Report, round};
use crate::sampler::Row;
use crate::target::Target;
use clap::Args;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The scenarios, in the order they run.
pub(crate) const NAMES: [&str; 7] = [
    "latency-knee",
    "plain-errors",
    "error-burst",
    "capacity-steps",
    "retry-after-storm",
    "cold-start",
    "fleet",
];

/// Seconds after a change before the settled share counts (scaled with `--quick`).
const SETTLE_S: f64 = 3.0;

#[derive(Args, Debug, Clone)]
pub(crate) struct SuiteArgs {
    #[command(flatten)]
    pub common: Common,
    /// Run only these scenarios (comma-separated names; see the list in docs/limiter.md).
    #[arg(long, value_delimiter = ',')]
    pub only: Vec<String>,
    /// Scripts a fifth as long (seconds each): a smoke run, not a measurement.
    #[arg(long)]
    pub quick: bool,
}

/// One scenario: the service, the consumers and what it is judged by.
struct Setup {
    downstream: DownstreamOpts,
    /// Consumer processes (1: in the harness).
    consumers: usize,
    /// Where the limit starts.
    start: usize,
    /// Moments (s) the service changes: capacity steps, errors starting or stopping.
    changes: Vec<f64>,
}

fn setup(name: &str, scale: f64) -> Setup {
    let s = |secs: f64| secs * scale;
    let ms = |secs: f64| format!("{}ms", (s(secs) * 1000.0).round() as u64);
    let base = DownstreamOpts {
        capacity: format!("100@{}", ms(20.0)),
        base_latency: Duration::from_millis(20),
        jitter: 0.1,
        error_rate: 0.0,
        error_status: 500,
        error_from: None,
        error_until: None,
        retry_after: Duration::from_secs(1),
        hard_factor: 2.0,
    };
    let window = |from: f64, until: f64| {
        (
            Some(Duration::from_secs_f64(s(from))),
            Some(Duration::from_secs_f64(s(until))),
        )
    };
    let one = |downstream, changes| Setup {
        downstream,
        consumers: 1,
        start: 64,
        changes,
    };
    match name {
        "latency-knee" => one(base, vec![0.0]),
        "plain-errors" => one(
            DownstreamOpts {
                error_rate: 0.15,
                ..base
            },
            vec![0.0],
        ),
        "error-burst" => {
            let (error_from, error_until) = window(5.0, 15.0);
            one(
                DownstreamOpts {
                    capacity: format!("100@{}", ms(30.0)),
                    error_rate: 0.2,
                    error_status: 503,
                    error_from,
                    error_until,
                    retry_after: Duration::ZERO,
                    ..base
                },
                vec![0.0, s(5.0), s(15.0)],
            )
        }
        "capacity-steps" => one(
            DownstreamOpts {
                capacity: format!("200@{0},80@{0},200@{0}", ms(15.0)),
                ..base
            },
            vec![0.0, s(15.0), s(30.0)],
        ),
        "retry-after-storm" => {
            let (error_from, error_until) = window(5.0, 15.0);
            one(
                DownstreamOpts {
                    capacity: format!("100@{}", ms(30.0)),
                    error_rate: 0.5,
                    error_status: 429,
                    error_from,
                    error_until,
                    ..base
                },
                vec![0.0, s(5.0), s(15.0)],
            )
        }
        "cold-start" => Setup {
            start: 1,
            ..one(
                DownstreamOpts {
                    capacity: format!("300@{}", ms(15.0)),
                    ..base
                },
                vec![0.0],
            )
        },
        "fleet" => Setup {
            consumers: 4,
            start: 16,
            ..one(
                DownstreamOpts {
                    capacity: format!("200@{}", ms(20.0)),
                    ..base
                },
                vec![0.0],
            )
        },
        _ => unreachable!("checked against NAMES"),
    }
}

/// Runs the chosen scenarios one after another against one Redis.
pub(crate) async fn run(a: SuiteArgs) -> anyhow::Result<bool> {
    for n in &a.only {
        if !NAMES.contains(&n.as_str()) {
            anyhow::bail!("no scenario {n:?}; the scenarios: {}", NAMES.join(", "));
        }
    }
    let target = Target::open(&a.common).await?;
    let scale = if a.quick { 0.2 } else { 1.0 };
    let mut failed = false;
    let mut knee_calls = None;
    for name in NAMES
        .iter()
        .filter(|n| a.only.is_empty() || a.only.iter().any(|o| o == *n))
    {
        eprintln!("scenario {name}");
        let s = setup(name, scale);
        let mut common: Common = a.common.clone();
        common.consumers = Some(s.consumers);
        common.concurrency = Some(s.start);
        common.limits.max_concurrency = Some(common.limits.max_concurrency.unwrap_or(1000));
        common.out = None;
        let mut args = DownstreamArgs {
            common,
            downstream: s.downstream,
            fixed: false,
            compare_fixed: false,
            target_p95: None,
        };
        args.resolve();
        let (mut r, o) = once(&args, &target).await?;
        r.scenario = (*name).into();
        let rows = super::timed::window_rows(&o.rows, o.window);
        // The script ran for a moment before the clock (the consumers starting up).
        let offset = o.script_offset.as_secs_f64();
        let changes: Vec<f64> = s.changes.iter().map(|c| (c - offset).max(0.0)).collect();
        let calls = judge(&mut r, rows, &changes, SETTLE_S * scale);
        let shed = o.observed.shed.load(Ordering::Relaxed);
        let all = o.observed.processed() + o.observed.errors.load(Ordering::Relaxed);
        if s.consumers == 1 {
            r.put("shed_calls", shed);
            r.put("shed_pct", round(shed as f64 / all.max(1) as f64 * 100.0, 2));
        } else {
            r.put("shed_calls", "not counted with consumer processes");
        }
        match *name {
            "latency-knee" => knee_calls = Some(calls),
            "plain-errors" => {
                if let Some(k) = knee_calls {
                    r.put("calls_vs_no_errors", round(calls / k.max(1e-9), 3));
                }
            }
            _ => {}
        }
        if let Some(dir) = &a.common.out {
            r.write(&dir.join(name), &o.rows)?;
        }
        r.print();
        failed |= r.failed();
    }
    Ok(!failed)
}

/// Calls per second in a window: successes and failed answers (not the shed calls).
fn calls(r: &Row) -> f64 {
    r.throughput + (r.errors_per_s - r.shed_per_s).max(0.0)
}

/// Puts the suite's figures into `r`; returns the call rate over the whole run.
fn judge(r: &mut Report, rows: &[Row], changes: &[f64], settle_s: f64) -> f64 {
    let sum = |rs: &[&Row], f: &dyn Fn(&Row) -> f64| rs.iter().map(|x| f(x)).sum::<f64>();
    let all: Vec<&Row> = rows.iter().collect();
    let overall = sum(&all, &calls) / sum(&all, &|x| x.ideal).max(1e-9);
    let end = rows.last().map_or(0.0, |x| x.t_s);
    let mut settled_rows = Vec::new();
    let mut per_change = Vec::new();
    for (i, &c) in changes.iter().enumerate() {
        let next = changes.get(i + 1).copied().unwrap_or(end + 1.0);
        let seg: Vec<&Row> = all
            .iter()
            .copied()
            .filter(|x| x.t_s > c && x.t_s <= next)
            .collect();
        let settled: Vec<&Row> = seg.iter().copied().filter(|x| x.t_s > c + settle_s).collect();
        settled_rows.extend(settled.iter().copied());
        // The first window from which the next second's calls reach 80% of its ideal.
        let to_80 = (0..seg.len()).find_map(|j| {
            let second: Vec<&Row> = seg[j..].iter().take(10).copied().collect();
            (second.len() == 10 && sum(&second, &calls) >= 0.8 * sum(&second, &|x| x.ideal))
                .then(|| round(seg[j].t_s - c, 1))
        });
        per_change.push(serde_json::json!({
            "at_s": round(c, 1),
            "to_80pct_s": to_80,
            "settled_pct": round(sum(&settled, &calls) / sum(&settled, &|x| x.ideal).max(1e-9) * 100.0, 1),
            "p95_ms_median": median_p95(&settled),
        }));
    }
    let settled = sum(&settled_rows, &calls) / sum(&settled_rows, &|x| x.ideal).max(1e-9);
    r.put("calls_vs_ideal_pct", round(overall * 100.0, 1));
    r.put("settled_vs_ideal_pct", round(settled * 100.0, 1));
    r.put("changes", per_change);
    sum(&all, &calls) / all.len().max(1) as f64
}

/// Median of the busy windows' p95 (0 for none).
fn median_p95(rows: &[&Row]) -> f64 {
    let mut v: Vec<f64> = rows
        .iter()
        .filter(|x| x.throughput > 0.0)
        .map(|x| x.p95_ms)
        .collect();
    v.sort_by(f64::total_cmp);
    round(v.get(v.len() / 2).copied().unwrap_or(0.0), 3)
}
