//! Secrets in URLs never reach a message, a log line or Redis: a Redis password the URL
//! parser refuses (base64 with '/'), `redis+unix://…?pass=`, and a handler URL with
//! `user:pass@` and `?api_key=` (at start, and in the dead-letter reason of a job whose
//! request failed).

use super::T;
use super::faults::{self, run_weir};
use weir::EmbeddedRedis;

const SECRETS: [&str; 4] = ["Hunter2pw", "K3yK3yK3y", "ab/cd+ef==", "S3cretPw9"];

fn clean(what: &str, text: &str) {
    for s in SECRETS {
        assert!(!text.contains(s), "{what} shows the secret {s}:\n{text}");
    }
    assert!(
        !text.contains("cd+ef=="),
        "{what} shows part of the password:\n{text}"
    );
}

#[test]
fn redis_urls_with_secrets_fail_without_showing_them() {
    for url in [
        "redis://:ab/cd+ef==@127.0.0.1:1/0",
        "redis://weir:ab/cd+ef==@127.0.0.1:1",
        "redis+unix:///nonexistent/weir.sock?pass=S3cretPw9",
        "redis://:Hunter2pw@127.0.0.1:1",
    ] {
        let (code, out, err) = run_weir(&["stats", "-q", "x", "--redis-url", url], None, T);
        assert_ne!(code, 0, "{url}\n{out}\n{err}");
        assert!(err.starts_with("error:"), "{err}");
        clean(url, &format!("{out}{err}"));
    }
}

#[test]
fn a_handler_url_with_credentials_is_not_shown_at_start() {
    // Nothing listens on port 1: the start-up probe fails, naming the URL.
    let redis = EmbeddedRedis::start().unwrap();
    let url = "http://bob:Hunter2pw@127.0.0.1:1/hook?api_key=K3yK3yK3y";
    let args = [
        "work",
        "-q",
        "h",
        "--handler",
        url,
        "--drain",
        "--no-metrics",
        "--redis-url",
    ];
    let redis_url = redis.url();
    let mut all = args.to_vec();
    all.push(&redis_url);
    let (code, out, err) = run_weir(&all, None, T);
    assert_ne!(code, 0, "{out}\n{err}");
    assert!(err.contains("127.0.0.1:1"), "names the handler: {err}");
    clean("the start-up error", &format!("{out}{err}"));
    let bad = "http://bob:Hunter2pw@[::1/hook?api_key=K3yK3yK3y";
    all[4] = bad;
    let (code, out, err) = run_weir(&all, None, T);
    assert_ne!(code, 0, "{out}\n{err}");
    clean("the URL error", &format!("{out}{err}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_reason_never_holds_the_handler_urls_credentials() {
    let redis = EmbeddedRedis::start().unwrap();
    // A handler that takes the connection and closes it without an answer: the request
    // fails with an error of the HTTP client, which quotes the URL it was sent to.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming().take(20) {
            drop(conn);
        }
    });
    let q = "redact";
    let url = format!("http://bob:Hunter2pw@127.0.0.1:{port}/hook?api_key=K3yK3yK3y");
    let r = redis.url();
    let (code, out, err) = run_weir(
        &["enqueue", "-q", q, "--max-attempts", "1", "--redis-url", &r],
        Some(b"{\"kind\":\"a\",\"payload\":1}\n"),
        T,
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let (code, out, err) = run_weir(
        &[
            "work",
            "-q",
            q,
            "--handler",
            &url,
            "--drain",
            "--no-metrics",
            "--redis-url",
            &r,
        ],
        None,
        T,
    );
    assert_eq!(code, 0, "{out}\n{err}");
    clean("weir work", &format!("{out}{err}"));
    let (code, list, err) = run_weir(&["dlq", "list", "--json", "-q", q, "--redis-url", &r], None, T);
    assert_eq!(code, 0, "{list}\n{err}");
    assert!(
        list.contains("HTTP request failed") || list.contains("HTTP connection reset"),
        "{list}"
    );
    clean("weir dlq list", &list);
    // And nothing in Redis holds them.
    let mut c = faults::raw(&r).await;
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query_async(&mut c).await.unwrap();
    for k in keys {
        let dump: Vec<u8> = redis::cmd("DUMP").arg(&k).query_async(&mut c).await.unwrap();
        clean(&k, &String::from_utf8_lossy(&dump));
    }
}
