//! Smoke run of the limiter's scenario suite (`scenarios --quick`): one scenario, a fifth
//! as long, against a private redis-server. It checks what the suite promises: a RESULT
//! line per scenario with its figures, the charts in DIR/NAME/, every job accounted for,
//! and the service's 429s reaching the consumer as answers (retried, not shed).

use serde_json::Value;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_weir-loadtest");

#[test]
fn retry_after_storm_reports_its_figures_and_charts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = Command::new(BIN)
        .args([
            "scenarios",
            "--quick",
            "--only",
            "retry-after-storm",
            "--quiet",
            "--out",
        ])
        .arg(dir.path())
        .output()
        .expect("run weir-loadtest");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results: Vec<Value> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("RESULT "))
        .map(|j| serde_json::from_str(j).expect("RESULT is JSON"))
        .collect();
    assert_eq!(results.len(), 1, "one RESULT line per scenario run:\n{stdout}");
    let r = &results[0];
    assert_eq!(r["scenario"], "retry-after-storm");
    assert_eq!(r["lost"], 0);
    // The storm: half the calls answered 429 for 2 of its 6 s, each retried.
    assert!(r["downstream_errors"].as_u64().unwrap() > 0, "{r}");
    assert!(r["consumer_totals"]["retried"].as_u64().unwrap() > 0, "{r}");
    let changes = r["changes"].as_array().expect("changes");
    assert_eq!(changes.len(), 3, "start, storm, storm over: {r}");
    for key in [
        "calls_vs_ideal_pct",
        "settled_vs_ideal_pct",
        "shed_pct",
        "target_p95_ms",
    ] {
        assert!(r[key].as_f64().is_some(), "{key} in {r}");
    }
    for png in ["throughput.png", "latency.png"] {
        let bytes = std::fs::read(dir.path().join("retry-after-storm").join(png)).expect(png);
        assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "{png} is a PNG");
    }
}

#[test]
fn an_unknown_scenario_is_refused_with_the_names() {
    let out = Command::new(BIN)
        .args(["scenarios", "--only", "knee", "--quiet"])
        .output()
        .expect("run weir-loadtest");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no scenario \"knee\"") && err.contains("capacity-steps"),
        "{err}"
    );
}
