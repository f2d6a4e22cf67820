//! The HTTP endpoints against hostile clients: `/metrics` bound to loopback answers
//! loopback host names only (DNS rebinding), and neither it nor the UI lets a client that
//! sends its request head slowly (slowloris) hold a connection past the header timeout.

use super::T;
use super::common::{Ctx, free_port};
use super::faults::{Proc, WEIR};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Kills the child on drop.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_listening(port: u16) {
    let started = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(started.elapsed() < T, "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `GET path` with `host`: the status code and the body.
fn get(port: u16, path: &str, host: &str) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(T)).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_owned();
    (status, body)
}

/// Opens a connection and sends a request head one byte at a time, a byte every 200 ms
/// (never finishing it); returns how long the server took to close it. Panics if it is
/// still open after `limit`.
fn slowloris(port: u16, limit: Duration) -> Duration {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let started = Instant::now();
    let head = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
        .iter()
        .chain(b"a".iter().cycle());
    let mut buf = [0u8; 1024];
    for b in head {
        if s.write_all(&[*b]).is_err() {
            return started.elapsed();
        }
        match s.read(&mut buf) {
            Ok(0) => return started.elapsed(),
            Ok(_) => {} // an answer (408, say): read on until the close
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return started.elapsed(),
        }
        assert!(
            started.elapsed() < limit,
            "a slow client still holds its connection after {limit:?}"
        );
    }
    unreachable!()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_on_loopback_answer_loopback_host_names_only_and_time_out_slow_clients() {
    let ctx = Ctx::new("metrics-host").await;
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let addr = format!("127.0.0.1:{port}");
    let _p = Proc::weir(
        &[
            "work",
            "-q",
            &ctx.queue,
            "--handler",
            "noop",
            "--metrics-addr",
            &addr,
            "--redis-url",
            &ctx.url,
        ],
        &dir.path().join("out"),
        &dir.path().join("err"),
    );
    wait_listening(port);
    // The consumer records its first figures.
    let started = Instant::now();
    while !get(port, "/metrics", "127.0.0.1").1.contains("# TYPE weir_") {
        assert!(started.elapsed() < T, "no weir metrics");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (status, body) = get(port, "/metrics", &format!("evil.example:{port}"));
    assert_eq!(status, 421, "a rebinding page is refused: {body}");
    assert!(!body.contains(&ctx.queue), "{body}");
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
    ] {
        let (status, body) = get(port, "/metrics", &host);
        assert_eq!(status, 200, "{host}: {body}");
        assert!(body.contains("# TYPE weir_"), "{host}: {body}");
    }
    slowloris(port, Duration::from_secs(30));
}

#[test]
fn the_ui_closes_a_connection_whose_headers_come_slowly() {
    let port = free_port();
    let redis = weir::EmbeddedRedis::start().unwrap();
    let child = Command::new(WEIR)
        .args(["ui", "--addr", &format!("127.0.0.1:{port}"), "--refresh", "0s"])
        .args(["--redis-url", &redis.url()])
        .env_remove("REDIS_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _ui = Killed(child);
    wait_listening(port);
    slowloris(port, Duration::from_secs(30));
    // It still serves.
    let (status, _) = get(port, "/", "127.0.0.1");
    assert_eq!(status, 200);
}
