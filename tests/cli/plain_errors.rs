//! Mistakes a person makes on the command line get one line, exit 2 and a way out: a
//! Redis URL without its scheme, an address where something other than Redis answers,
//! and a metrics port another process holds.

use crate::common::*;
use crate::{cli, error_lines, no_panic, text};
use std::io::{Read, Write};
use std::net::TcpListener;

#[tokio::test]
async fn a_redis_url_without_its_scheme_is_one_line_with_the_fix() {
    let ctx = Ctx::new("plain-scheme").await;
    let o = cli(&ctx, &["stats", "--redis-url", "127.0.0.1:6379"], "");
    no_panic(&o);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let lines = error_lines(&o);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("needs a scheme, like redis://127.0.0.1:6379"),
        "{lines:?}"
    );
}

#[tokio::test]
async fn an_address_where_no_redis_answers_is_one_line_with_a_hint() {
    let ctx = Ctx::new("plain-notredis").await;
    // A web server's answer, for every connection (two: the probe and a retry at most).
    let web = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = web.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut c in web.incoming().flatten() {
            let mut buf = [0u8; 512];
            let _ = c.read(&mut buf);
            let _ = c.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let url = format!("redis://127.0.0.1:{port}");
    let o = cli(&ctx, &["stats", "--redis-url", &url], "");
    no_panic(&o);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let lines = error_lines(&o);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains(weir::redis::conn::NOT_REDIS), "{lines:?}");
    assert!(lines[0].contains("check the host and port"), "{lines:?}");
}

#[tokio::test]
async fn a_metrics_port_in_use_stops_the_consumer_unless_metrics_are_off() {
    let ctx = Ctx::new("plain-metrics").await;
    let held = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = held.local_addr().unwrap().to_string();
    let q = ctx.queue.as_str();
    let work = ["work", "-q", q, "--handler", "noop", "--drain"];
    let o = cli(&ctx, &[&work[..], &["--metrics-addr", &addr]].concat(), "");
    no_panic(&o);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    let lines = error_lines(&o);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains(&addr) && lines[0].contains("--no-metrics"),
        "{lines:?}"
    );
    let o = cli(&ctx, &[&work[..], &["--no-metrics"]].concat(), "");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    drop(held);
}
