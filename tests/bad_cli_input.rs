//! Bad command-line input gives one clear error line (with the line number where there is
//! one), and `weir enqueue` loads every good line and names exactly the lines it did not.

mod faults;

use faults::run_weir;
use std::time::Duration;
use weir::EmbeddedRedis;

const T: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_loads_good_lines_and_names_the_bad_ones() {
    let redis = EmbeddedRedis::start().unwrap();
    let url = redis.url();
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
    let input = lines.join(&b"\n"[..]);
    let (code, out, err) = run_weir(
        &["enqueue", "--redis-url", &url, "-q", "cli-bad"],
        Some(&input),
        T,
    );
    assert_eq!(code, 3, "exit code 3 when lines were not loaded\n{err}");
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
    let stats = faults::queue(&url, "cli-bad").await.stats().await.unwrap();
    assert_eq!(stats.ready_total() + stats.delayed, 3, "{stats:?}");

    // All good: exit 0, everything loaded.
    let good: String = (0..1000)
        .map(|i| format!("{{\"kind\":\"a\",\"payload\":{i}}}\n"))
        .collect();
    let (code, out, err) = run_weir(
        &["enqueue", "--redis-url", &url, "-q", "cli-good"],
        Some(good.as_bytes()),
        T,
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("enqueued 1000 jobs"), "{out}");
    let stats = faults::queue(&url, "cli-good").await.stats().await.unwrap();
    assert_eq!(stats.ready_total(), 1000);
}

/// The error at the top of standard error: its first line (and the next, for clap's
/// list of missing arguments), which must say what is wrong on its own.
fn first_error_line(args: &[&str]) -> (i32, String) {
    let (code, _, err) = run_weir(args, None, T);
    let mut lines = err.lines();
    let first = lines.next().unwrap_or("").to_owned();
    if first.ends_with("not provided:") {
        return (code, format!("{first} {}", lines.next().unwrap_or("")));
    }
    (code, first)
}

#[test]
fn bad_arguments_give_one_clear_line() {
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
            &["--visibility-timeout", "invalid duration \"5x\"", "500ms"],
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
        (&["stats", "--redis-url", "notaurl"], &["notaurl", "invalid URL"]),
        (
            &["stats", "--redis-url", "redis://127.0.0.1:6379/notadb"],
            &["invalid URL", "database"],
        ),
        (
            &["stats", "--redis-url", dead],
            &["127.0.0.1:1", "connection refused"],
        ),
        (
            &["enqueue", "/nonexistent/jobs.ndjson", "--redis-url", dead],
            &["cannot open /nonexistent/jobs.ndjson"],
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
        let (code, line) = first_error_line(args);
        assert_ne!(code, 0, "{args:?} should fail");
        assert!(line.starts_with("error:"), "{args:?}: {line:?}");
        for w in *wants {
            assert!(line.contains(w), "{args:?}: {line:?} lacks {w:?}");
        }
    }
    println!("bad CLI arguments tried: {}", cases.len());
}
