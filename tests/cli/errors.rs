//! Errors are one clear line: bad arguments, durations, URLs and TLS settings, and an
//! unreachable Redis. `weir enqueue` loads every good line and names exactly the lines it
//! did not load, each with its reason.

use crate::common::*;
use crate::{cli, no_panic, text};

/// The error at the top of standard error: its first line (and the next, for clap's
/// list of missing arguments), which must say what is wrong on its own. (Argument
/// parsing errors go on with a usage hint; the cause is on the first line.)
fn first_error_line(ctx: &Ctx, args: &[&str]) -> (Option<i32>, String) {
    let o = cli(ctx, args, "");
    no_panic(&o);
    let err = text(&o.stderr);
    let mut lines = err.lines();
    let first = lines.next().unwrap_or("").to_owned();
    if first.ends_with("not provided:") {
        return (o.status.code(), format!("{first} {}", lines.next().unwrap_or("")));
    }
    (o.status.code(), first)
}

#[tokio::test]
async fn bad_arguments_lead_with_one_clear_line() {
    let ctx = Ctx::new("cli-badargs").await;
    let dead = "redis://127.0.0.1:1";
    let cases: &[(&[&str], &[&str])] = &[
        (
            &[
                "work",
                "--handler",
                "noop",
                "--visibility-timeout",
                "5x",
                "--redis-url",
                dead,
            ],
            &[
                "--visibility-timeout",
                "invalid duration \"5x\"",
                "500ms, 2s or 5m",
            ],
        ),
        (
            &[
                "work",
                "--handler",
                "noop",
                "--job-timeout",
                "soon",
                "--redis-url",
                dead,
            ],
            &["--job-timeout", "soon"],
        ),
        (
            &["work", "--handler", "teleport", "--redis-url", dead],
            &["unknown handler", "teleport"],
        ),
        (
            &["stats", "--redis-url", "notaurl"],
            &["notaurl", "needs a scheme"],
        ),
        (
            &["stats", "--redis-url", "redis://127.0.0.1:6379/notadb"],
            &["invalid URL", "database"],
        ),
        (
            &[
                "work",
                "--handler",
                "noop",
                "--tls-cert",
                "c.pem",
                "--redis-url",
                dead,
            ],
            &["--tls-key"],
        ),
        (
            &[
                "stats",
                "--tls-ca",
                "/nonexistent/ca.pem",
                "--redis-url",
                "rediss://127.0.0.1:1",
            ],
            &["cannot read the TLS CA file /nonexistent/ca.pem"],
        ),
        (
            &["stats", "--tls-ca", "/nonexistent/ca.pem", "--redis-url", dead],
            &["not a rediss:// URL"],
        ),
    ];
    for (args, wants) in cases {
        let (code, line) = first_error_line(&ctx, args);
        assert_ne!(code, Some(0), "{args:?} should fail");
        assert!(line.starts_with("error:"), "{args:?}: {line:?}");
        for w in *wants {
            assert!(line.contains(w), "{args:?}: {line:?} lacks {w:?}");
        }
    }
}

/// Settings weir itself checks (not the argument parser): the whole error is one line.
#[tokio::test]
async fn bad_settings_are_one_line() {
    let ctx = Ctx::new("cli-args").await;
    let cases: [(&[&str], &str); 5] = [
        (
            &["enqueue", "/nonexistent/jobs.ndjson"],
            "cannot open /nonexistent/jobs.ndjson",
        ),
        (&["stats", "-q", "bad name"], "invalid queue name"),
        (
            &["work", "--handler", "noop", "--concurrency", "0"],
            "concurrency must be between 1 and 100000",
        ),
        (
            &["work", "--handler", "noop", "--batch", "20000"],
            "batch must be between 1 and 10000",
        ),
        (
            &["work", "--handler", "noop", "--visibility-timeout", "10ms"],
            "visibility timeout must be at least 100ms",
        ),
    ];
    for (args, want) in cases {
        let o = cli(&ctx, args, "");
        no_panic(&o);
        assert_ne!(o.status.code(), Some(0), "{args:?}");
        let err = text(&o.stderr);
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{args:?}: {err:?}");
        assert!(
            lines[0].starts_with("error: ") && lines[0].contains(want),
            "{args:?}: {err}"
        );
    }
}

#[tokio::test]
async fn unreachable_redis_is_one_line() {
    let ctx = Ctx::new("cli-down").await;
    let url = "redis://127.0.0.1:1";
    for args in [
        vec!["stats", "--redis-url", url],
        vec!["enqueue", "--redis-url", url, "--kind", "k"],
        vec!["work", "--handler", "noop", "--redis-url", url],
        vec!["dlq", "list", "--redis-url", url],
        vec!["pause", "--redis-url", url],
    ] {
        let o = cli(&ctx, &args, "1\n");
        no_panic(&o);
        assert_ne!(o.status.code(), Some(0), "{args:?}");
        let err = text(&o.stderr);
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{args:?}: one line, got {err:?}");
        assert!(
            lines[0].starts_with("error: ")
                && lines[0].contains("cannot reach Redis at redis://127.0.0.1:1")
                && lines[0].contains("connection refused"),
            "{args:?}: {err}"
        );
    }
}

#[tokio::test]
async fn passwords_never_show_in_errors() {
    let ctx = Ctx::new("cli-pw").await;
    let o = cli(
        &ctx,
        &["stats", "--redis-url", "redis://:hunter2@127.0.0.1:1"],
        "",
    );
    let err = text(&o.stderr);
    assert!(
        err.contains("cannot reach Redis at redis://:***@127.0.0.1:1"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");
}

/// Every kind of bad line, numbered: the good ones load, the exit code is 3, and the
/// report names exactly the bad lines (a blank line is skipped, not an error).
#[tokio::test]
async fn enqueue_names_exactly_the_lines_it_did_not_load() {
    let ctx = Ctx::new("cli-bad").await;
    let lines: Vec<&[u8]> = vec![
        br#"{"kind":"a","payload":{"n":1}}"#,               // 1 good
        b"not json",                                        // 2
        b"",                                                // 3 blank: skipped, not an error
        b"{\"kind\":\"a\",\"payload\":\"\xff\xfe\"}",       // 4 invalid UTF-8
        br#"{"payload":1}"#,                                // 5 missing kind
        br#"{"kind":"a","payload":1,"priority":"urgent"}"#, // 6 bad priority
        br#"{"kind":"a","payload":1,"delay":"5x"}"#,        // 7 bad duration
        br#"{"kind":"a b","payload":1}"#,                   // 8 bad kind
        br#"{"kind":"a","payload":1,"id":"x{y}"}"#,         // 9 bad id
        br#"{"kind":"a","payload":[1,2],"id":"ok-10"}"#,    // 10 good
        br#"{"kind":"a","payload":1,"extra":1}"#,           // 11 unknown field
        br#"{"kind":"a","payload":{"n":1}"#,                // 12 truncated
        br#"{"kind":"a","payload":3,"delay":250}"#,         // 13 good, delayed
    ];
    let o = cli(&ctx, &["enqueue", "-q", &ctx.queue], lines.join(&b"\n"[..]));
    no_panic(&o);
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert_eq!(
        o.status.code(),
        Some(3),
        "exit code 3 when lines were not loaded\n{err}"
    );
    assert!(out.contains("enqueued 3 jobs"), "{out}");
    let reported: Vec<usize> = err
        .lines()
        .filter_map(|l| l.strip_prefix("line ")?.split(':').next()?.parse().ok())
        .collect();
    assert_eq!(reported, vec![2, 4, 5, 6, 7, 8, 9, 11, 12], "{err}");
    assert!(err.contains("9 lines not loaded"), "{err}");
    for l in err.lines().filter(|l| l.starts_with("line ")) {
        assert!(l.len() > 12, "each bad line says why: {l}");
    }
    let stats = ctx.stats().await;
    assert_eq!(stats.ready_total() + stats.delayed, 3, "{stats:?}");

    // All good: exit 0, everything loaded.
    let (good_queue, _) = ctx.other_queue("cli-good");
    let good: String = (0..1000)
        .map(|i| format!("{{\"kind\":\"a\",\"payload\":{i}}}\n"))
        .collect();
    let o = cli(&ctx, &["enqueue", "-q", &good_queue], good);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("enqueued 1000 jobs"),
        "{}",
        text(&o.stdout)
    );
    let stats = weir::Queue::new(ctx.c(), &good_queue)
        .unwrap()
        .stats()
        .await
        .unwrap();
    assert_eq!(stats.ready_total(), 1000);
}
