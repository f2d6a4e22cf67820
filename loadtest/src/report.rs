//! The report: the figures of a run, printed as a human summary and as the last line
//! `RESULT {json}`, and (with `--out DIR`) written as result.json, timeseries.csv and
//! PNG charts.

use crate::histogram::Summary;
use crate::sampler::Row;
use anyhow::Context;
use serde::Serialize;
use serde_json::{Map, Value};
use std::io::Write;
use std::path::Path;

/// Every figure of a run. Fields that do not apply to a scenario are left out.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Report {
    pub scenario: String,
    pub jobs: u64,
    pub consumers: usize,
    pub concurrency: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enqueue_jobs_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drain_jobs_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub achieved_jobs_per_s: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ideal_jobs_per_s: Option<f64>,
    /// What the latency figures measure: `end_to_end` (enqueued → processed) or
    /// `downstream_call`.
    pub latency: &'static str,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// `None` (left out) with `--no-track`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicates: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra_runs: Option<u64>,
    pub limit_min: u64,
    pub limit_mean: f64,
    pub limit_max: u64,
    pub elapsed_s: f64,
    /// Scenario-specific figures (errors, kills, tracking comparison, …).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
    /// A table the summary prints in place of one of `extra`'s figures: (its name, the
    /// text).
    #[serde(skip)]
    pub table: Option<(&'static str, String)>,
}

impl Report {
    /// Latency figures from a summary.
    pub(crate) fn set_latency(&mut self, what: &'static str, s: &Summary) {
        self.latency = what;
        self.p50_ms = round(s.p50_ms, 3);
        self.p95_ms = round(s.p95_ms, 3);
        self.p99_ms = round(s.p99_ms, 3);
        self.max_ms = round(s.max_ms, 3);
    }

    /// Limit figures over the rows of the measured window.
    pub(crate) fn set_limits(&mut self, rows: &[Row]) {
        let limits: Vec<u64> = rows.iter().map(|r| r.limit).filter(|&l| l > 0).collect();
        if limits.is_empty() {
            return;
        }
        self.limit_min = *limits.iter().min().unwrap_or(&0);
        self.limit_max = *limits.iter().max().unwrap_or(&0);
        self.limit_mean = round(limits.iter().sum::<u64>() as f64 / limits.len() as f64, 1);
    }

    pub(crate) fn put(&mut self, key: &str, v: impl Serialize) {
        if let Ok(v) = serde_json::to_value(v) {
            self.extra.insert(key.to_owned(), v);
        }
    }

    /// True if the run failed its checks (jobs lost).
    pub(crate) fn failed(&self) -> bool {
        self.lost.is_some_and(|l| l > 0) || self.extra.get("check_failed").is_some()
    }

    /// The human summary, then `RESULT {json}` as the last line, on stdout.
    pub(crate) fn print(&self) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", self.summary());
        let json = serde_json::to_string(self).unwrap_or_else(|_| "{}".into());
        let _ = writeln!(out, "RESULT {json}");
    }

    fn summary(&self) -> String {
        let rate = |v: Option<f64>| v.map_or_else(String::new, |r| format!("{r:.0} jobs/s"));
        let mut s = format!(
            "{} — {} jobs, {} consumer(s), concurrency {}, {:.1}s\n",
            self.scenario, self.jobs, self.consumers, self.concurrency, self.elapsed_s
        );
        let mut line = |label: &str, v: String| {
            if !v.is_empty() {
                s.push_str(&format!("  {label:<26} {v}\n"));
            }
        };
        line("enqueue", rate(self.enqueue_jobs_per_s));
        line("drain", rate(self.drain_jobs_per_s));
        line("achieved", rate(self.achieved_jobs_per_s));
        line("ideal", rate(self.ideal_jobs_per_s));
        line(
            &format!("latency ({})", self.latency),
            format!(
                "p50 {:.1} ms · p95 {:.1} ms · p99 {:.1} ms · max {:.1} ms",
                self.p50_ms, self.p95_ms, self.p99_ms, self.max_ms
            ),
        );
        line(
            "limit",
            format!(
                "min {} · mean {} · max {}",
                self.limit_min, self.limit_mean, self.limit_max
            ),
        );
        match (self.lost, self.duplicates) {
            (Some(l), Some(d)) => line("accounting", format!("lost {l} · duplicates {d}")),
            _ => line("accounting", "not tracked (--no-track)".into()),
        }
        for (k, v) in &self.extra {
            if self.table.as_ref().is_none_or(|t| t.0 != k) {
                line(k, v.to_string());
            }
        }
        if let Some((_, table)) = &self.table {
            s.push_str(table.trim_end());
            s.push('\n');
        }
        s.trim_end().to_owned()
    }

    /// Writes result.json, timeseries.csv and the charts into `dir`.
    pub(crate) fn write(&self, dir: &Path, rows: &[Row]) -> anyhow::Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let json = serde_json::to_string_pretty(self)?;
        std::fs::write(dir.join("result.json"), json + "\n")
            .with_context(|| format!("cannot write {}", dir.join("result.json").display()))?;
        write_csv(&dir.join("timeseries.csv"), rows)?;
        let target = self.extra.get("target_p95_ms").and_then(Value::as_f64);
        crate::plot::charts(dir, &self.scenario, rows, target)
    }
}

fn write_csv(path: &Path, rows: &[Row]) -> anyhow::Result<()> {
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))?,
    );
    writeln!(
        f,
        "t_s,throughput,in_flight,in_flight_max,limit,p50_ms,p95_ms,p99_ms,queue_depth,ideal,capacity,errors_per_s"
    )?;
    for r in rows {
        writeln!(
            f,
            "{:.3},{:.1},{:.1},{},{},{:.3},{:.3},{:.3},{},{:.1},{},{:.1}",
            r.t_s,
            r.throughput,
            r.in_flight,
            r.in_flight_max,
            r.limit,
            r.p50_ms,
            r.p95_ms,
            r.p99_ms,
            r.queue_depth,
            r.ideal,
            r.capacity,
            r.errors_per_s
        )?;
    }
    f.flush()?;
    Ok(())
}

/// `v` rounded to `digits` decimals (keeps the JSON readable).
pub(crate) fn round(v: f64, digits: i32) -> f64 {
    let m = 10f64.powi(digits);
    (v * m).round() / m
}
