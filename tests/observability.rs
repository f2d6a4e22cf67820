//! Observability checks against real tools: `promtool check metrics` on a live consumer's
//! /metrics, `promtool check rules` / `test rules` on the alert rules, and a real
//! Prometheus scraping a consumer and a producer under load, which must return data for
//! every PromQL expression of every dashboard panel. A dashboard that queries a metric
//! weir does not emit fails here.
//!
//! Needs `prometheus` and `promtool` on PATH (Debian package `prometheus`; scripts/test.sh
//! installs it). Everything listens on loopback and stops by itself.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use weir::{
    CancellationToken, Consumer, ConsumerConfig, EmbeddedRedis, JobError, Redis, Registry, handler_fn,
};

mod common;

const QUEUE: &str = "observability";

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// A minimal HTTP/1.1 GET over loopback; returns the status code and the body.
fn http_get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        dechunk(body)
    } else {
        body.into()
    };
    Ok((status, body))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

struct Prometheus {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(target_port: u16) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: weir\n    \
                 static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n"
            ),
        )
        .unwrap();
        let port = common::free_port();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus on PATH (Debian package `prometheus`; scripts/test.sh installs it)");
        Self {
            child,
            port,
            _dir: dir,
        }
    }

    /// Evaluates an instant query; returns how many series came back.
    fn series(&self, expr: &str) -> Result<usize, String> {
        let (status, body) = http_get(self.port, &format!("/api/v1/query?query={}", urlencode(expr)))
            .map_err(|e| e.to_string())?;
        let v: serde_json::Value =
            serde_json::from_str(&body).map_err(|e| format!("{status}: {e}: {body}"))?;
        if v["status"] != "success" {
            return Err(format!("{status}: {body}"));
        }
        Ok(v["data"]["result"].as_array().map_or(0, |r| r.len()))
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every `expr` of every panel target in the dashboards, with the queue substituted.
fn dashboard_exprs() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(repo("dashboards")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let d: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for panel in d["panels"].as_array().unwrap() {
            for t in panel["targets"].as_array().unwrap() {
                let expr = t["expr"]
                    .as_str()
                    .unwrap()
                    .replace("$queue", QUEUE)
                    .replace("$__rate_interval", "30s");
                out.push((format!("{} / {}", d["title"], panel["title"]), expr));
            }
        }
    }
    assert!(out.len() >= 10, "found only {} panel expressions", out.len());
    out
}

/// Enqueues `lines` (NDJSON jobs) with `weir enqueue`: a producer in a process of its own
/// that exports no metrics, as a Python, Node or CLI producer is. The dashboards must show
/// its jobs all the same (from the queue's counters the consumer samples).
fn enqueue_elsewhere(url: &str, lines: String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["enqueue", "--queue", QUEUE, "--redis-url", url])
        .env_remove("WEIR_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("weir runs");
    child.stdin.take().unwrap().write_all(lines.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "weir enqueue: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A producer (another process) and a consumer with some failures, running until `stop`.
async fn load(url: String, stop: CancellationToken) {
    let redis = Redis::open(&url).unwrap();
    // Keyed jobs over a per-key concurrency, so keys are held back (the per-key panel).
    let limits = weir::queue::settings::Settings {
        key_concurrency: Some(2),
        ..Default::default()
    };
    weir::queue::settings::Settings::update(&mut redis.connect().await.unwrap(), QUEUE, &limits)
        .await
        .unwrap();
    let registry = Registry::new().fallback(handler_fn(|job: weir::Job| async move {
        let n: u64 = job.payload().unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(1)).await;
        match n % 20 {
            0 => Err(JobError::retry("downstream said no")),
            7 => Err(JobError::fatal("bad request")),
            _ => Ok(()),
        }
    }));
    let mut config = ConsumerConfig::new(QUEUE);
    config.concurrency = 16;
    config.limiter = Some(weir::limiter::LimiterConfig::default());
    config.pool.retry.base = Duration::from_millis(100);
    let consumer = Consumer::new(config, redis, registry).unwrap();
    let consumer = tokio::spawn(consumer.run(stop.clone()));
    let mut n = 0u64;
    while !stop.is_cancelled() {
        let lines: String = (0..50)
            .map(|_| {
                n += 1;
                format!(
                    "{{\"kind\":\"work\",\"payload\":{n},\"key\":\"tenant-{}\"}}\n",
                    n % 4
                )
            })
            .collect();
        let url = url.clone();
        tokio::task::spawn_blocking(move || enqueue_elsewhere(&url, lines))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    consumer.await.unwrap().unwrap();
}

fn promtool(args: &[&str], stdin: Option<&str>) {
    let mut child = Command::new("promtool")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool on PATH (Debian package `prometheus`)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.unwrap_or("").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn alert_rules_check_and_pass_their_unit_tests() {
    let rules = repo("dashboards/alerts.yml");
    promtool(&["check", "rules", rules.to_str().unwrap()], None);
    let tests = repo("dashboards/alerts_test.yml");
    promtool(&["test", "rules", tests.to_str().unwrap()], None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_metrics_pass_promtool_and_every_dashboard_query_returns_data() {
    let redis = EmbeddedRedis::start().unwrap();
    let metrics_port = common::free_port();
    weir::metrics::install(([127, 0, 0, 1], metrics_port).into()).unwrap();
    let stop = CancellationToken::new();
    let load = tokio::spawn(load(redis.url(), stop.clone()));
    let prometheus = Prometheus::start(metrics_port);

    // Wait until Prometheus has several scrapes of a consumer under load.
    let acked = format!("weir_jobs_acked_total{{queue=\"{QUEUE}\"}} > 0");
    common::wait_until(
        "Prometheus to see weir_jobs_acked_total",
        Duration::from_secs(60),
        || async { prometheus.series(&acked).unwrap_or(0) > 0 },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(6)).await;

    let (status, body) = http_get(metrics_port, "/metrics").unwrap();
    assert_eq!(status, 200);
    promtool(&["check", "metrics"], Some(&body));
    for name in [
        "weir_queue_jobs_total",
        "weir_job_duration_seconds_bucket",
        "weir_queue_ready_jobs",
    ] {
        assert!(body.contains(name), "/metrics lacks {name}");
    }
    assert!(
        body.contains("# HELP weir_jobs_acked_total"),
        "metrics carry HELP text"
    );

    let mut empty = Vec::new();
    for (panel, expr) in dashboard_exprs() {
        match prometheus.series(&expr) {
            Ok(0) => empty.push(format!("{panel}: no data for {expr}")),
            Ok(_) => {}
            Err(e) => empty.push(format!("{panel}: {expr} failed: {e}")),
        }
    }
    stop.cancel();
    load.await.unwrap();
    assert!(
        empty.is_empty(),
        "dashboard queries without data:\n{}",
        empty.join("\n")
    );
}
