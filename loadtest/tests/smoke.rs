//! Smoke runs of every scenario: small and short (the whole file takes seconds in a
//! debug build), each against its own private redis-server. They check what the harness
//! promises: lost = 0, a last line `RESULT {json}`, and a report directory whose files
//! exist and parse. Full runs are for people and benchmarks, not CI.

use serde_json::Value;
use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_weir-loadtest");

/// Runs the harness with `args` and `--out` in a temp dir; returns the RESULT json and
/// the directory.
fn run(args: &[&str]) -> (Value, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let result = result_of(args, Some(dir.path()));
    check_files(dir.path(), &result);
    (result, dir)
}

/// Runs the harness with `args` (and `--out DIR`); returns the RESULT json.
fn result_of(args: &[&str], dir: Option<&Path>) -> Value {
    output_of(args, dir).0
}

/// Runs the harness with `args` (and `--out DIR`); returns the RESULT json and stdout.
fn output_of(args: &[&str], dir: Option<&Path>) -> (Value, String) {
    let mut cmd = Command::new(BIN);
    cmd.args(args).arg("--quiet");
    if let Some(dir) = dir {
        cmd.arg("--out").arg(dir);
    }
    let out = cmd.output().expect("run weir-loadtest");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{args:?} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().unwrap_or_default();
    let json = last
        .strip_prefix("RESULT ")
        .unwrap_or_else(|| panic!("last line is not RESULT: {last:?}"));
    (
        serde_json::from_str(json).expect("RESULT is JSON"),
        stdout.into_owned(),
    )
}

fn check_files(dir: &Path, result: &Value) {
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("result.json")).expect("result.json"))
            .expect("result.json parses");
    assert_eq!(&saved, result, "result.json matches the RESULT line");
    let csv = std::fs::read_to_string(dir.join("timeseries.csv")).expect("timeseries.csv");
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().expect("csv header").split(',').collect();
    for col in ["t_s", "throughput", "in_flight", "limit", "p95_ms", "queue_depth"] {
        assert!(header.contains(&col), "column {col} in {header:?}");
    }
    let rows: Vec<&str> = lines.collect();
    assert!(!rows.is_empty(), "time series has rows");
    for row in rows {
        let cells: Vec<&str> = row.split(',').collect();
        assert_eq!(cells.len(), header.len(), "row {row:?}");
        for c in cells {
            c.parse::<f64>()
                .unwrap_or_else(|_| panic!("cell {c:?} of {row:?} is a number"));
        }
    }
    for png in ["throughput.png", "latency.png"] {
        let bytes = std::fs::read(dir.join(png)).unwrap_or_else(|e| panic!("{png}: {e}"));
        assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "{png} is a PNG");
    }
}

fn num(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("{key} in {v}"))
}

#[test]
fn drain_accounts_for_every_job() {
    let (r, _dir) = run(&["drain", "--jobs", "3000"]);
    assert_eq!(r["scenario"], "drain");
    assert_eq!(num(&r, "lost"), 0.0);
    assert_eq!(num(&r, "duplicates"), 0.0);
    assert!(num(&r, "drain_jobs_per_s") > 0.0 && num(&r, "enqueue_jobs_per_s") > 0.0);
    for key in [
        "p50_ms",
        "p95_ms",
        "p99_ms",
        "max_ms",
        "limit_min",
        "limit_mean",
        "limit_max",
    ] {
        assert!(r.get(key).is_some(), "{key} in {r}");
    }
}

/// The time series' in-flight columns show the jobs that ran: with no-op handlers a
/// batch's jobs run in a burst of about a millisecond, which a single reading per window
/// mostly misses.
#[test]
fn drain_series_shows_the_jobs_running() {
    let (_r, dir) = run(&["drain", "--jobs", "20000", "--concurrency", "64"]);
    let csv = std::fs::read_to_string(dir.path().join("timeseries.csv")).expect("timeseries.csv");
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).expect(name);
    let (mean, max, tput) = (col("in_flight"), col("in_flight_max"), col("throughput"));
    let busy: Vec<Vec<f64>> = lines
        .map(|l| {
            l.split(',')
                .map(|c| c.parse().expect("number"))
                .collect::<Vec<f64>>()
        })
        .filter(|r| r[tput] > 0.0)
        .collect();
    assert!(!busy.is_empty(), "{csv}");
    for r in &busy {
        assert!(
            r[mean] <= r[max] + 1e-9 && r[max] <= 64.0,
            "mean <= peak <= limit: {r:?}"
        );
    }
    let peak = busy.iter().map(|r| r[max]).fold(0.0, f64::max);
    assert!(peak > 0.0, "some window saw jobs running:\n{csv}");
}

/// The harness's consumer cap is `--rate`, as in `weir work` (`--rate-limit` still parses);
/// `steady --rate N`, which once meant the enqueue rate, is refused without
/// `--enqueue-rate`.
#[test]
fn one_name_for_the_rate_cap() {
    let out = Command::new(BIN)
        .args(["steady", "--rate", "500", "--quiet"])
        .output()
        .expect("run weir-loadtest");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--enqueue-rate"), "{err}");
    // Rounds pair weir's run with the bare queue's: without it they mean nothing.
    let out = Command::new(BIN)
        .args(["steady", "--rounds", "2", "--duration", "1s", "--quiet"])
        .output()
        .expect("run weir-loadtest");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--compare-bare"), "{err}");
    let (r, _dir) = run(&["drain", "--jobs", "500", "--rate-limit", "100000/s"]);
    assert_eq!(r["limits"]["rate_limit"], "100000/s (burst 100000)", "{r}");
}

/// `--jobs` below what the script needs: the run stops when they are enqueued, says so,
/// reports only the phases that ran, and the ideal over what ran.
#[test]
fn downstream_capped_by_jobs_reports_what_ran() {
    let (r, _dir) = run(&[
        "downstream",
        "--fixed",
        "--capacity",
        "40@2s,10@2s",
        "--base-latency",
        "10ms",
        "--concurrency",
        "40",
        "--jobs",
        "6000",
    ]);
    assert_eq!(num(&r, "lost"), 0.0);
    assert!(r["capped"].is_string(), "{r}");
    let phases = r["phases"].as_array().expect("phases");
    assert_eq!(phases.len(), 1, "only the first phase ran: {r}");
    // 6000 jobs at 4000/s (the first phase's ideal) run out within the first phase
    // (2000 of them are its starting backlog, topped up from the feed).
    assert_eq!(phases[0]["complete"], false, "{r}");
    assert_eq!(num(&r, "ideal_jobs_per_s"), 4000.0, "the ideal of what ran: {r}");
    assert!(num(&r, "throughput_vs_ideal_pct") <= 105.0, "{r}");
}

/// weir against raw RPUSH and the bare reliable drain: every figure there, per round and
/// as medians, and weir's own run fully accounted.
#[test]
fn drain_compares_with_the_bare_queue() {
    let (r, _dir) = run(&["drain", "--jobs", "3000", "--compare-bare", "--reps", "2"]);
    assert_eq!(num(&r, "lost"), 0.0);
    let c = &r["compare_bare"];
    assert_eq!(num(c, "rounds"), 2.0, "{r}");
    for side in ["weir_median", "bare_median"] {
        for key in [
            "enqueue_jobs_per_s",
            "drain_jobs_per_s",
            "redis_total_us",
            "drain_peak_rss_mb",
        ] {
            assert!(num(&c[side], key) > 0.0, "{side}.{key} in {r}");
        }
        let s = &c[side];
        let sum = num(s, "redis_enqueue_us") + num(s, "redis_drain_us");
        assert!((sum - num(s, "redis_total_us")).abs() < 0.01, "{side}: {s}");
    }
    for key in ["enqueue_vs_rpush", "drain_vs_bare", "redis_cpu_per_job_vs_bare"] {
        assert!(num(&c["weir_vs_bare_median"], key) > 0.0, "{key} in {r}");
    }
    assert_eq!(c["weir_vs_bare_rounds"].as_array().map(Vec::len), Some(2), "{r}");
    assert!(r["redis_cpu_us_per_job"]["total"].as_f64().is_some(), "{r}");
}

/// A drain on a private 3-primary cluster, the queue in 6 partitions: nothing lost, and
/// the comparison with a single server reports the cost per job and the spread.
#[test]
fn drain_runs_on_a_cluster_and_compares_with_a_single_server() {
    let (r, _dir) = run(&["drain", "--jobs", "3000", "--cluster", "3", "--partitions", "6"]);
    assert_eq!((num(&r, "lost"), num(&r, "duplicates")), (0.0, 0.0), "{r}");
    assert!(r["redis"].as_str().unwrap().contains("Redis Cluster"), "{r}");
    let (r, _dir) = run(&["drain", "--jobs", "3000", "--compare-single", "--rounds", "1"]);
    let s = &r["compare_single"]["summary"];
    for key in [
        "single_redis_us_per_job",
        "cluster_redis_us_per_job",
        "redis_cpu_per_job_ratio",
        "projected_speedup",
    ] {
        assert!(num(s, key) > 0.0, "{key} in {r}");
    }
    let shares = r["compare_single"]["cluster_rounds"][0]["shares"]
        .as_array()
        .unwrap();
    assert_eq!(shares.len(), 3, "one share per primary: {r}");
}

/// Drains with fleet-wide limits that never bind, and without: both rates reported.
#[test]
fn drain_prices_the_global_limits() {
    let (r, _dir) = run(&[
        "drain",
        "--jobs",
        "3000",
        "--compare-global-limits",
        "--reps",
        "1",
    ]);
    assert_eq!(num(&r, "lost"), 0.0, "{r}");
    let c = &r["compare_global_limits"];
    for key in [
        "drain_jobs_per_s_with",
        "drain_jobs_per_s_without",
        "redis_drain_us_per_job_with",
    ] {
        assert!(num(c, key) > 0.0, "{key} in {r}");
    }
    assert!(c["drain_change_pct"].as_f64().is_some(), "{r}");
}

/// Drain rate with a big backlog against a small one (small sizes here).
#[test]
fn drain_compares_backlog_sizes() {
    let r = result_of(
        &[
            "drain",
            "--compare-backlog",
            "--jobs",
            "2000",
            "--small-backlog",
            "1000",
            "--big-backlog",
            "20000",
            "--reps",
            "1",
        ],
        None,
    );
    let c = &r["compare_backlog"];
    assert_eq!(
        (num(c, "jobs_per_side"), num(c, "big_waiting")),
        (2000.0, 20000.0),
        "{r}"
    );
    for key in [
        "small_drain_jobs_per_s",
        "big_drain_jobs_per_s",
        "big_vs_small_drain",
        "big_peak_rss_mb",
    ] {
        assert!(num(c, key) > 0.0, "{key} in {r}");
    }
}

#[test]
fn drain_compares_tracking_side_by_side() {
    let (r, _dir) = run(&["drain", "--jobs", "2000", "--compare-tracking", "--rounds", "1"]);
    assert_eq!(num(&r, "lost"), 0.0);
    assert!(num(&r, "untracked_drain_jobs_per_s") > 0.0);
    assert!(r["tracking_overhead_pct"].is_number());
}

#[test]
fn steady_reports_end_to_end_latency() {
    // In-process consumer with the adaptive limiter and a jobs/s cap above the rate.
    let (r, _dir) = run(&[
        "steady",
        "--enqueue-rate",
        "500",
        "--duration",
        "2s",
        "--adaptive",
        "--rate",
        "5000/s",
    ]);
    assert_eq!(num(&r, "lost"), 0.0);
    assert_eq!(r["limits"]["adaptive"], true, "{r}");
    assert!(r["limits"]["rate_limit"].is_string(), "{r}");
    // The pacer may end a tick short of the last job on a busy machine: count, not time.
    let jobs = num(&r, "jobs");
    assert!((900.0..=1000.0).contains(&jobs), "{r}");
    assert!(num(&r, "achieved_jobs_per_s") > 0.0, "{r}");
    assert!(num(&r, "p95_ms") >= num(&r, "p50_ms"), "{r}");
}

/// Two rounds: the bare queue first, then weir first; the ratio reported is the median of
/// the rounds' (of two, their mean).
#[test]
fn steady_compares_with_the_bare_queue() {
    let (r, _dir) = run(&[
        "steady",
        "--enqueue-rate",
        "2000",
        "--duration",
        "1s",
        "--compare-bare",
        "--rounds",
        "2",
    ]);
    assert_eq!(num(&r, "lost"), 0.0);
    let c = &r["compare_bare"];
    assert_eq!(c["rounds"], 2, "{r}");
    let rounds = c["rounds_latency"].as_array().expect("rounds_latency");
    assert_eq!(rounds.len(), 2, "{r}");
    assert_eq!(
        (&rounds[0]["bare_first"], &rounds[1]["bare_first"]),
        (&Value::Bool(true), &Value::Bool(false)),
        "{r}"
    );
    for q in ["p50", "p99"] {
        let each: Vec<f64> = rounds
            .iter()
            .map(|p| p["weir_vs_bare"][q].as_f64().unwrap())
            .collect();
        let median = c["weir_vs_bare"][q].as_f64().unwrap();
        assert!((median - (each[0] + each[1]) / 2.0).abs() < 0.002, "{q}: {r}");
        // Each round's ratio is of that round's own runs.
        for p in rounds {
            let x = p["weir"][format!("{q}_ms")].as_f64().unwrap()
                / p["bare"][format!("{q}_ms")].as_f64().unwrap();
            assert!(
                (x - p["weir_vs_bare"][q].as_f64().unwrap()).abs() < 0.002,
                "{q}: {p}"
            );
        }
    }
    // The last round's bare run, beside the report's own figures (the last weir run's).
    assert_eq!(c["bare_latency"], rounds[1]["bare"], "{r}");
    assert_eq!(
        num(&r, "p50_ms"),
        rounds[1]["weir"]["p50_ms"].as_f64().unwrap(),
        "{r}"
    );
    let b = &c["bare_latency"];
    // Every bare item was fetched and timed (the pacer may end a tick short: count, not time).
    assert!((1800.0..=2000.0).contains(&b["count"].as_f64().unwrap()), "{r}");
    assert!(
        b["p99_ms"].as_f64().unwrap() >= b["p50_ms"].as_f64().unwrap(),
        "{r}"
    );
    assert!(b["p50_ms"].as_f64().unwrap() > 0.0, "{r}");
    assert!(
        r["compare_bare"]["weir_vs_bare"]["p99"].as_f64().unwrap() > 0.0,
        "{r}"
    );
    // CPU per job of both sides: the harness process and Redis.
    for cpu in [&r["cpu_per_job"], &r["compare_bare"]["bare_cpu_per_job"]] {
        assert!(cpu["harness_us"].as_f64().is_some_and(|us| us >= 0.0), "{r}");
        assert!(cpu["redis_us"].as_f64().is_some_and(|us| us > 0.0), "{r}");
    }
}

/// On a Redis Cluster the bare queue listens on sharded pub/sub, as weir's consumers do:
/// its pushes must wake it there. Unwoken, each fetch waits for the 100 ms recheck, and
/// the median is about half of that.
#[test]
fn the_bare_queue_is_woken_on_a_cluster() {
    let (r, _dir) = run(&[
        "steady",
        "--enqueue-rate",
        "500",
        "--duration",
        "1s",
        "--compare-bare",
        "--cluster",
        "3",
    ]);
    assert_eq!(num(&r, "lost"), 0.0);
    let p50 = r["compare_bare"]["bare_latency"]["p50_ms"].as_f64().unwrap();
    assert!(
        p50 < 25.0,
        "the bare queue waited for its recheck, not a wake: {r}"
    );
}

#[test]
fn pauses_watches_one_thread_per_core_or_as_asked() {
    let r = result_of(&["pauses", "--duration", "200ms", "--threads", "2"], None);
    assert_eq!(r["threads"], 2, "{r}");
    let per = r["per_thread"].as_array().expect("per_thread");
    assert_eq!(per.len(), 2, "{r}");
    for w in per {
        let lost = w["lost_pct"].as_f64().unwrap();
        assert!((0.0..=100.0).contains(&lost), "{r}");
        assert!(
            w["over_1ms"].as_u64().unwrap() >= w["over_2ms"].as_u64().unwrap(),
            "{r}"
        );
    }
}

#[test]
fn downstream_reports_against_the_ideal() {
    let (r, _dir) = run(&[
        "downstream",
        "--fixed",
        "--target-p95",
        "15ms",
        "--capacity",
        "40@1s,10@1s",
        "--base-latency",
        "10ms",
        "--concurrency",
        "16",
    ]);
    assert_eq!(num(&r, "lost"), 0.0);
    // The mean of the ideal over the window, sampled every 100 ms from where the script
    // was when the clock started (the consumer starting up).
    let offset = num(&r, "script_offset_s");
    let ideal: f64 = (0..20)
        .map(|i| {
            if offset + 0.1 * f64::from(i) < 1.0 {
                4000.0
            } else {
                1000.0
            }
        })
        .sum::<f64>()
        / 20.0;
    assert!(
        (num(&r, "ideal_jobs_per_s") - ideal).abs() < 1.0,
        "{r} against {ideal}"
    );
    assert!(num(&r, "achieved_jobs_per_s") > 0.0);
    assert_eq!(r["latency"], "downstream_call");
    assert_eq!(num(&r, "target_p95_ms"), 15.0);
    assert_eq!(r["limits"]["adaptive"], false);
    assert_eq!((num(&r, "limit_min"), num(&r, "limit_max")), (16.0, 16.0));
}

/// The adaptive limiter (the downstream default) in two consumer processes: the
/// options reach the processes and the summed limit moves. 16 per process against a
/// knee of 20 each: the first windows are binding and healthy, so the limit grows;
/// then capacity drops to 5 each and it falls. (`--worker-threads` reaches them too.)
#[test]
fn downstream_adapts_the_limit_in_consumer_processes() {
    let (r, _dir) = run(&[
        "downstream",
        "--consumers",
        "2",
        "--capacity",
        "40@2s,10@2s",
        "--base-latency",
        "10ms",
        "--concurrency",
        "16",
        "--max-concurrency",
        "200",
        "--target-p95",
        "20ms",
        "--worker-threads",
        "2",
    ]);
    assert_eq!(num(&r, "lost"), 0.0);
    assert_eq!(num(&r, "worker_threads"), 2.0, "{r}");
    let limits = &r["limits"];
    assert_eq!(limits["adaptive"], true, "{r}");
    assert_eq!(
        (num(limits, "max"), limits["target_p95"].as_str()),
        (200.0, Some("20ms"))
    );
    assert!(
        num(&r, "limit_min") < num(&r, "limit_max"),
        "the limit moved: {r}"
    );
}

#[test]
fn adaptive_options_without_adaptive_are_refused() {
    let out = Command::new(BIN)
        .args(["drain", "--max-concurrency", "10"])
        .output()
        .expect("run weir-loadtest");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--adaptive"), "{err}");
}

#[test]
fn chaos_loses_nothing_when_consumers_are_killed() {
    let (r, _dir) = run(&[
        "chaos",
        "--jobs",
        "6000",
        "--kills",
        "2",
        "--consumers",
        "2",
        "--concurrency",
        "32",
        "--batch",
        "100",
        "--visibility-timeout",
        "1s",
    ]);
    assert_eq!(num(&r, "lost"), 0.0);
    let chaos = &r["chaos"];
    assert_eq!(num(chaos, "kills"), 2.0, "{r}");
    assert!(num(&r, "extra_runs") <= num(chaos, "reclaimed"), "{r}");
}

/// The stdout table has a row per key (tenant-0 the slow one, with no A figures) and the
/// ratio line; RESULT has a row per key and side and the ratio; keys.csv the same rows.
#[test]
fn keys_reports_every_key_and_the_ratio() {
    let dir = tempfile::tempdir().expect("temp dir");
    let args = [
        "keys",
        "--keys",
        "4",
        "--duration",
        "1s",
        "--fast-key-latency",
        "2ms",
        "--slow-key-latency",
        "50ms",
    ];
    let (r, stdout) = output_of(&args, Some(dir.path()));
    check_files(dir.path(), &r);
    assert_eq!(r["scenario"], "keys");
    assert_eq!(r["keys"]["special"], "slow", "{r}");
    assert_eq!(r["per_key_limits"], Value::Null, "{r}");
    for k in 0..4 {
        let row = stdout
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("tenant-{k} ")))
            .unwrap_or_else(|| panic!("a row for tenant-{k}:\n{stdout}"));
        assert!(row.contains(if k == 0 { "slow" } else { "fast" }), "{row}");
    }
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("fast keys' throughput, B / A: ") && l.contains("goal >= 0.9")),
        "{stdout}"
    );
    let rows = r["per_key"].as_array().expect("per_key");
    assert_eq!(rows.len(), 3 + 4, "3 fast keys without, 4 keys with: {r}");
    assert!(num(&r, "fast_keys_ratio") > 0.0, "{r}");
    let csv = std::fs::read_to_string(dir.path().join("keys.csv")).expect("keys.csv");
    assert_eq!(csv.lines().count(), 1 + rows.len(), "{csv}");
    assert!(dir.path().join("without/timeseries.csv").exists());
}

/// A hot key, per-key limits stored in the queue's settings, the adaptive limiter.
#[test]
fn keys_takes_a_hot_key_and_per_key_limits() {
    let r = result_of(
        &[
            "keys",
            "--keys",
            "3",
            "--duration",
            "1s",
            "--hot-key-share",
            "0.5",
            "--per-key-concurrency",
            "2",
            "--per-key-rate",
            "500/s",
            "--per-key-burst",
            "50",
            "--adaptive",
        ],
        None,
    );
    assert_eq!(r["keys"]["special"], "hot", "{r}");
    assert_eq!(r["limits"]["adaptive"], true, "{r}");
    let l = &r["per_key_limits"];
    assert_eq!(
        (
            l["key_concurrency"].as_str(),
            l["key_rate"].as_str(),
            l["key_burst"].as_str()
        ),
        (Some("2"), Some("500/s"), Some("50")),
        "{r}"
    );
    assert_eq!(r["per_key"].as_array().map(Vec::len), Some(2 + 3), "{r}");
    assert!(r["fast_keys_ratio"].is_number(), "{r}");
}

#[test]
fn bad_options_give_one_line_and_exit_2() {
    let out = Command::new(BIN)
        .args(["drain", "--consumers", "0"])
        .output()
        .expect("run weir-loadtest");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--consumers"), "{err}");
}

#[test]
fn downstream_serves_over_local_http() {
    use std::io::{BufRead, BufReader, Read, Write};
    let mut server = Server(
        Command::new(BIN)
            .args([
                "serve-downstream",
                "--capacity",
                "1@1h",
                "--hard-factor",
                "1",
                "--base-latency",
                "50ms",
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start serve-downstream"),
    );
    let mut first = String::new();
    BufReader::new(server.0.stdout.take().expect("stdout"))
        .read_line(&mut first)
        .expect("address line");
    let addr = first
        .trim()
        .strip_prefix("listening on ")
        .expect("listening on ADDR")
        .to_owned();
    let call = |body: &str| {
        let mut s = std::net::TcpStream::connect(&addr).expect("connect");
        let req = format!(
            "POST /job HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).expect("send");
        s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .expect("timeout");
        let mut buf = [0u8; 256];
        let n = s.read(&mut buf).expect("answer");
        (s, String::from_utf8_lossy(&buf[..n]).into_owned())
    };
    let (_held, ok) = std::thread::scope(|sc| {
        // Capacity 1, hard limit 1: while the first call runs, a second one is shed.
        let a = sc.spawn(|| call("{}"));
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (_, shed) = call("{}");
        assert!(shed.starts_with("HTTP/1.1 503"), "{shed}");
        a.join().expect("first call")
    });
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
}

/// A server process this test started, killed (by its own handle, so its PID) when the
/// test ends, passed or failed.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
