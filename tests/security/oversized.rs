//! `weir enqueue` bounds each line it reads at the envelope limit: a line far longer is
//! skipped (reported by its number) without ever being held whole, and the lines after it
//! are enqueued.

use super::T;
use super::common::Ctx;
use super::faults::WEIR;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The peak resident set (`VmHWM`) of process `pid`, in KiB.
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::test]
async fn an_oversized_line_is_skipped_without_being_read_whole() {
    let ctx = Ctx::private("oversized").await;
    let mut child = Command::new(WEIR)
        .args(["enqueue", "-q", &ctx.queue, "--redis-url", &ctx.url])
        .env_remove("REDIS_URL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"{\"kind\":\"a\",\"payload\":1}\n").unwrap();
    // 96 MiB of one line (the limit is 1 MiB), not yet ended: held whole, it would show
    // in the peak resident set.
    stdin.write_all(b"{\"kind\":\"a\",\"payload\":\"").unwrap();
    let chunk = vec![b'x'; 1 << 20];
    for _ in 0..96 {
        stdin.write_all(&chunk).unwrap();
    }
    stdin.flush().unwrap();
    // The pipe holds at most 1 MiB: the rest went through weir's reader already.
    let peak = peak_kib(child.id());
    stdin.write_all(b"\"}\n{\"kind\":\"a\",\"payload\":3}\n").unwrap();
    drop(stdin);
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(started.elapsed() < T, "weir enqueue did not finish");
        std::thread::sleep(Duration::from_millis(10));
    }
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(peak < 48 * 1024, "peak RSS {peak} KiB: the 96 MiB line was held");
    assert_eq!(o.status.code(), Some(3), "some lines were not loaded: {err}");
    assert!(
        err.contains("line 2: longer than the envelope limit of 1048576 bytes: skipped"),
        "{err}"
    );
    let s = ctx.stats().await;
    assert_eq!(s.ready_total(), 2, "lines 1 and 3 are enqueued: {s:?}");
}
