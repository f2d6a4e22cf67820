//! Terminal escapes from a handler's response: `weir jobs`, `weir job show` and `weir dlq
//! list` print them escaped, never raw (the `--json` forms are JSON-escaped anyway).

use super::T;
use super::common::Ctx;
use super::faults::run_weir;
use std::io::{Read, Write};

/// Clears the screen, sets the window title, rings the bell, and rewrites the line.
const HOSTILE: &str = "\u{1b}[2J\u{1b}]0;pwned\u{7}\rfake line\u{9b}31m";

/// A handler that answers every request 400 with [`HOSTILE`] as its body.
fn hostile_handler() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming().take(20) {
            let Ok(mut c) = conn else { continue };
            let mut req = Vec::new();
            let mut buf = [0u8; 4096];
            // The headers, then as much body as they announce.
            while let Ok(n) = c.read(&mut buf) {
                if n == 0 {
                    break;
                }
                req.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&req).to_lowercase();
                if let Some(end) = text.find("\r\n\r\n") {
                    let len = text
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    if req.len() >= end + 4 + len {
                        break;
                    }
                }
            }
            let _ = write!(
                c,
                "HTTP/1.1 400 Bad Request\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{HOSTILE}",
                HOSTILE.len()
            );
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listings_escape_control_characters_from_handlers() {
    let ctx = Ctx::private("escapes").await;
    let port = hostile_handler();
    let q = ctx.queue.as_str();
    let url = ctx.url.as_str();
    let run = |args: &[&str], input: Option<&[u8]>| {
        let mut all = args.to_vec();
        all.extend(["-q", q, "--redis-url", url]);
        let (code, out, err) = run_weir(&all, input, T);
        assert_eq!(code, 0, "{args:?}\n{out}\n{err}");
        out
    };
    run(
        &["enqueue"],
        Some(b"{\"kind\":\"a\",\"payload\":1,\"id\":\"esc-1\"}\n"),
    );
    let handler = format!("http://127.0.0.1:{port}/");
    run(&["work", "--handler", &handler, "--drain", "--no-metrics"], None);
    for args in [
        &["dlq", "list"][..],
        &["jobs", "--state", "dead"],
        &["job", "show", "esc-1"],
    ] {
        let out = run(args, None);
        assert!(out.contains("HTTP 400"), "{args:?}: {out}");
        assert!(
            !out.chars().any(|c| c.is_control() && c != '\n'),
            "{args:?} prints a raw control character: {out:?}"
        );
        assert!(out.contains("\\u{1b}[2J"), "{args:?} shows it escaped: {out}");
    }
    // JSON carries the text as it is, JSON-escaped.
    let out = run(&["dlq", "list", "--json"], None);
    let v: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert!(v["reason"].as_str().unwrap().contains(HOSTILE), "{v}");
}
