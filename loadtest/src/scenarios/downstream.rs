//! `downstream`: consumers call the simulated downstream while its capacity follows a
//! script. The queue always has a backlog, so the consumers' limit alone decides the
//! rate. Reports throughput against the ideal (capacity / base latency), the limit over
//! time and p95 of the calls against a target.
//!
//! With `--consumers K` processes each one has its own downstream with 1/K of the
//! capacity (a shared one needs the HTTP front, not built yet).

use super::timed::{self, Pace, Timed};
use super::{account, base_report};
use crate::cli::DownstreamArgs;
use crate::downstream::Config;
use crate::report::{Report, round};
use crate::sampler::Row;
use crate::target::Target;
use std::sync::Arc;
use std::time::Duration;

/// Jobs one consumer can fail before it is dead-lettered: effectively never here, since a
/// shed call is the downstream's fault, not the job's.
const MAX_ATTEMPTS: u32 = 1000;

pub(crate) async fn run(a: DownstreamArgs) -> anyhow::Result<(Report, Vec<Row>)> {
    let target = Target::open(&a.common).await?;
    let (mut r, o) = once(&a, &target).await?;
    let rows = o.rows;
    if a.compare_fixed {
        let mut fixed = a.clone();
        fixed.common.limits.adaptive = false;
        fixed.common.limits.target_p95 = None;
        fixed.common.limits.adaptive_per_key = false;
        eprintln!(
            "adaptive run done; now the same script with a fixed limit of {}",
            a.common.concurrency()
        );
        let (f, fixed) = once(&fixed, &target).await?;
        if let Some(dir) = &a.common.out {
            f.write(&dir.join("fixed"), &fixed.rows)?;
        }
        compare(&mut r, &f);
    }
    r.put("redis", target.describe());
    Ok((r, rows))
}

/// The mean of the ideal over `length` of the script from `from`, sampled like the time
/// series.
fn ideal_mean(config: &Config, from: Duration, length: Duration) -> f64 {
    let step = Duration::from_millis(100);
    let steps = (length.as_millis() / step.as_millis()).max(1) as u32;
    (0..steps)
        .map(|i| config.ideal_rate_at(from + step * i))
        .sum::<f64>()
        / steps as f64
}

/// Jobs that keep the queue full for `length` with `backlog` waiting: the ideal with half
/// again to spare (retried jobs come back), and the backlog twice.
pub(crate) fn jobs_needed(config: &Config, length: Duration, backlog: u64) -> u64 {
    (ideal_mean(config, Duration::ZERO, length) * length.as_secs_f64() * 1.5) as u64 + 2 * backlog
}

/// One run of the script on a fresh queue: its report and what was observed.
pub(crate) async fn once(a: &DownstreamArgs, target: &Target) -> anyhow::Result<(Report, timed::Outcome)> {
    let c = &a.common;
    let config = a.downstream.config(c.seed).map_err(anyhow::Error::msg)?;
    let length = c.duration.unwrap_or_else(|| config.script_length());
    let ideal_max = config.script.iter().map(|p| p.capacity).max().unwrap_or(1) as f64
        / config.base_latency.as_secs_f64();
    // One second of the fastest phase keeps the consumers busy between top-ups.
    let backlog = (ideal_max as u64).max(2000);
    let needed = jobs_needed(&config, length, backlog);
    let jobs = c.jobs.unwrap_or(needed);
    if jobs < needed {
        eprintln!(
            "warning: --jobs {jobs} is below the {needed} the {:.0}s script needs: the run stops when they are enqueued, and only what ran is reported",
            length.as_secs_f64()
        );
    }
    let ideal_config = config.clone();
    let o = timed::run(
        target,
        c,
        Timed {
            scenario: "downstream",
            length,
            jobs_cap: jobs,
            pace: Pace::Backlog(backlog),
            downstream: Some((a.downstream.clone(), c.seed)),
            ideal: Some(Arc::new(move |t| {
                (ideal_config.ideal_rate_at(t), ideal_config.capacity_at(t))
            })),
            max_attempts: MAX_ATTEMPTS,
        },
    )
    .await?;
    let r = report(a, &config, &o, length);
    Ok((r, o))
}

/// The p95 target in milliseconds, and where the figure comes from: as given, the
/// limiter's own (a relative target, in-process), or the model's no-load p95 times the
/// factor (a relative target in consumer processes, or a fixed run).
fn target_ms(a: &DownstreamArgs, config: &Config, o: &timed::Outcome) -> (f64, &'static str) {
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
    match (a.target(), o.target_p95) {
        (weir::limiter::Target::Absolute(d), _) => (ms(d), "absolute"),
        (_, Some(live)) => (ms(live), "limiter"),
        (weir::limiter::Target::Relative(x), None) => (ms(config.no_load_p95()) * x, "model"),
    }
}

/// The downstream figures of a finished run. The ideal is the mean over what ran: the
/// whole `length`, or up to the moment the job cap stopped the feed.
fn report(a: &DownstreamArgs, config: &Config, o: &timed::Outcome, length: Duration) -> Report {
    let c = &a.common;
    let ran = o.window.min(length);
    let ideal_mean = ideal_mean(config, o.script_offset, ran);
    let mut r = base_report("downstream", c, o.enqueued);
    if ran + Duration::from_millis(100) < length {
        r.put(
            "capped",
            format!(
                "--jobs {} ran out after {:.1}s of the {:.1}s script: figures cover what ran",
                o.enqueued,
                ran.as_secs_f64(),
                length.as_secs_f64()
            ),
        );
    }
    r.achieved_jobs_per_s = Some(o.achieved_rate);
    r.ideal_jobs_per_s = Some(round(ideal_mean, 1));
    r.put("script_offset_s", round(o.script_offset.as_secs_f64(), 3));
    r.elapsed_s = round(o.elapsed.as_secs_f64(), 3);
    r.set_latency("downstream_call", &o.observed.total.summary());
    let rows = timed::window_rows(&o.rows, o.window);
    r.set_limits(rows);
    account(&mut r, o.tally, &o.totals);
    let (target_ms, source) = target_ms(a, config, o);
    r.put("target_p95", a.target().to_string());
    r.put("target_p95_ms", round(target_ms, 3));
    r.put("target_p95_from", source);
    r.put(
        "throughput_vs_ideal_pct",
        round(o.achieved_rate / ideal_mean.max(1e-9) * 100.0, 1),
    );
    let busy: Vec<&Row> = rows.iter().filter(|r| r.throughput > 0.0).collect();
    let over = busy.iter().filter(|r| r.p95_ms > target_ms).count();
    r.put(
        "windows_over_target_pct",
        round(over as f64 / busy.len().max(1) as f64 * 100.0, 1),
    );
    r.put(
        "downstream_errors",
        o.observed.errors.load(std::sync::atomic::Ordering::Relaxed),
    );
    r.put("capacity_script", &a.downstream.capacity);
    r.put("phases", phases(config, rows, target_ms, c.consumers(), ran));
    r.put("window_s", round(o.window.as_secs_f64(), 3));
    if !o.settled {
        r.put(
            "check_failed",
            "the backlog was not worked off within 60s after the run",
        );
    }
    r
}

/// Puts the fixed run's figures beside the adaptive run's: `fixed` (its main figures
/// and phases) and `compare_fixed` (per phase: achieved jobs/s and p95, adaptive vs fixed).
fn compare(r: &mut Report, f: &Report) {
    let keys = [
        "throughput_vs_ideal_pct",
        "windows_over_target_pct",
        "downstream_errors",
        "phases",
        "limits",
    ];
    let mut m = serde_json::Map::new();
    m.insert("achieved_jobs_per_s".into(), f.achieved_jobs_per_s.into());
    m.insert("p95_ms".into(), f.p95_ms.into());
    m.insert("lost".into(), f.lost.into());
    for k in keys {
        if let Some(v) = f.extra.get(k) {
            m.insert(k.into(), v.clone());
        }
    }
    if let Some(check) = f.extra.get("check_failed") {
        r.put("check_failed", format!("fixed run: {check}"));
    }
    if f.lost.is_some_and(|l| l > 0) {
        r.put("check_failed", "fixed run: jobs lost");
    }
    let side = |rep: &Report| -> Vec<(f64, f64)> {
        rep.extra
            .get("phases")
            .and_then(|p| p.as_array())
            .map(|ps| {
                ps.iter()
                    .map(|p| {
                        (
                            p["achieved_jobs_per_s"].as_f64().unwrap_or(0.0),
                            p["p95_ms"].as_f64().unwrap_or(0.0),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let table: Vec<String> = side(r)
        .iter()
        .zip(side(f))
        .enumerate()
        .map(|(i, (a, x))| {
            format!(
                "phase {}: adaptive {:.0} jobs/s p95 {:.1} ms | fixed {:.0} jobs/s p95 {:.1} ms",
                i + 1,
                a.0,
                a.1,
                x.0,
                x.1
            )
        })
        .collect();
    r.put("fixed", serde_json::Value::Object(m));
    r.put("compare_fixed", table);
}

/// How the consumers did in one step of the capacity script.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct PhaseReport {
    pub capacity: u64,
    pub start_s: f64,
    /// Where the phase ended, or where the run did if it stopped first.
    pub end_s: f64,
    /// False for a phase the run stopped in (the job cap ran out): its figures cover
    /// `start_s..end_s` only.
    pub complete: bool,
    pub ideal_jobs_per_s: f64,
    pub achieved_jobs_per_s: f64,
    /// Achieved over the phase's second half (after settling), as a share of the ideal.
    pub settled_vs_ideal_pct: f64,
    /// Median of the 100 ms windows' p95 over the phase's second half (after settling).
    pub p95_ms: f64,
    pub p95_over_target: bool,
    /// Limit over the phase's second half.
    pub limit_mean: f64,
    /// Seconds from the phase's start until the limit is first within 20% of the
    /// capacity (the limiter simulations' measure, `tests/limiter_sim.rs`); `None`: never.
    pub reach_s: Option<f64>,
    /// Seconds from the phase's start until the limit is within 20% of the capacity
    /// (the knee) and stays there for the rest of the phase; `None`: never.
    pub converge_s: Option<f64>,
}

/// One report per phase of the script that ran, from the rows of the fed window, which
/// lasted `ran`. With `k` consumer processes each has 1/k of the capacity (rounded down),
/// so the knee the summed limit is compared with is that share times k.
pub(crate) fn phases(
    config: &Config,
    rows: &[Row],
    target_ms: f64,
    k: usize,
    ran: Duration,
) -> Vec<PhaseReport> {
    let mut start = 0.0;
    let mut out = Vec::new();
    let k = k.max(1) as u64;
    let ran = ran.as_secs_f64();
    for p in &config.script {
        if start >= ran {
            break;
        }
        let knee = ((p.capacity / k).max(1) * k) as f64;
        let full_end = start + p.length.as_secs_f64();
        let end = full_end.min(ran);
        let in_phase: Vec<&Row> = rows.iter().filter(|r| r.t_s > start && r.t_s <= end).collect();
        if in_phase.is_empty() {
            break;
        }
        let settled: Vec<&Row> = in_phase
            .iter()
            .copied()
            .filter(|r| r.t_s > (start + end) / 2.0)
            .collect();
        let mean = |f: &dyn Fn(&Row) -> f64, rs: &[&Row]| {
            rs.iter().map(|r| f(r)).sum::<f64>() / rs.len().max(1) as f64
        };
        let mut p95s: Vec<f64> = settled
            .iter()
            .filter(|r| r.throughput > 0.0)
            .map(|r| r.p95_ms)
            .collect();
        p95s.sort_by(f64::total_cmp);
        let p95 = p95s.get(p95s.len() / 2).copied().unwrap_or(0.0);
        let near = |r: &&Row| (r.limit as f64 - knee).abs() <= 0.2 * knee;
        let reach_s = in_phase.iter().find(|r| near(r)).map(|r| round(r.t_s - start, 1));
        // The last window outside the band; convergence is the window after it.
        let converge_s = match in_phase.iter().rposition(|r| !near(r)) {
            None => Some(0.0),
            Some(i) if i + 1 < in_phase.len() => Some(round(in_phase[i + 1].t_s - start, 1)),
            Some(_) => None,
        };
        out.push(PhaseReport {
            capacity: p.capacity,
            start_s: round(start, 1),
            end_s: round(end, 1),
            complete: end >= full_end,
            ideal_jobs_per_s: round(config.ideal_rate_at(std::time::Duration::from_secs_f64(start)), 1),
            achieved_jobs_per_s: round(mean(&|r| r.throughput, &in_phase), 1),
            settled_vs_ideal_pct: round(
                mean(&|r| r.throughput, &settled) / (knee / config.base_latency.as_secs_f64()) * 100.0,
                1,
            ),
            p95_ms: round(p95, 3),
            p95_over_target: p95 > target_ms,
            limit_mean: round(mean(&|r| r.limit as f64, &settled), 1),
            reach_s,
            converge_s,
        });
        start = full_end;
    }
    out
}
