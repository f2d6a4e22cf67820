//! Errors are one clear line: bad arguments, bad durations, unreachable Redis.

use crate::common::*;
use crate::{cli, no_panic, text};

#[tokio::test]
async fn bad_duration_is_one_clear_line() {
    let ctx = Ctx::new("cli-dur").await;
    let o = cli(
        &ctx,
        &[
            "work",
            "--handler",
            "noop",
            "--visibility-timeout",
            "5x",
            "-q",
            &ctx.queue,
        ],
        "",
    );
    no_panic(&o);
    assert_ne!(o.status.code(), Some(0));
    let err = text(&o.stderr);
    let first = err.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("error:") && first.contains("invalid duration"),
        "{err}"
    );
    assert!(first.contains("500ms, 2s or 5m"), "says how to write it: {err}");
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
            lines[0].contains("cannot reach Redis at redis://127.0.0.1:1"),
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

#[tokio::test]
async fn bad_arguments_are_one_clear_line() {
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
