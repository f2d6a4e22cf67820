//! `weir limits clear --<field>` removes that one setting and leaves the others: every
//! field `weir limits set` takes can be cleared alone.

use crate::common::*;
use crate::{cli, text};
use redis::AsyncCommands;
use std::collections::BTreeMap;

/// Each `limits clear` flag and the hash fields it must remove (and only those).
const CLEARS: &[(&str, &[&str])] = &[
    ("--min-concurrency", &["min_concurrency"]),
    ("--max-concurrency", &["max_concurrency"]),
    ("--target-p95", &["target_p95"]),
    ("--error-threshold", &["error_threshold"]),
    ("--overload-status", &["overload_status"]),
    ("--rate", &["rate", "burst"]),
    ("--dead-cap", &["dead_cap"]),
    ("--global-rate", &["global_rate", "global_burst"]),
    ("--global-concurrency", &["global_concurrency"]),
    ("--per-key-rate", &["key_rate", "key_burst"]),
    ("--per-key-concurrency", &["key_concurrency"]),
];

#[tokio::test]
async fn limits_clear_removes_each_field_alone() {
    let ctx = Ctx::new("cli-clear").await;
    let q = ctx.queue.as_str();
    let set = [
        "limits",
        "set",
        "-q",
        q,
        "--create",
        "--min-concurrency",
        "2",
        "--max-concurrency",
        "40",
        "--target-p95",
        "300ms",
        "--error-threshold",
        "0.2",
        "--overload-status",
        "429,503",
        "--rate",
        "50/s",
        "--burst",
        "7",
        "--dead-cap",
        "99",
        "--global-rate",
        "100/s",
        "--global-concurrency",
        "30",
        "--per-key-rate",
        "5/s",
        "--per-key-concurrency",
        "3",
        "--key",
        "acme=9/s",
    ];
    let o = cli(&ctx, &set, "");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let mut conn = ctx.conn.clone();
    let mut before: BTreeMap<String, String> = conn.hgetall(ctx.keys.settings()).await.unwrap();
    for (flag, fields) in CLEARS {
        for f in *fields {
            assert!(before.contains_key(*f), "{f} is set before {flag}: {before:?}");
        }
        let o = cli(&ctx, &["limits", "clear", "-q", q, flag], "");
        assert!(o.status.success(), "{flag}: {}", text(&o.stderr));
        let after: BTreeMap<String, String> = conn.hgetall(ctx.keys.settings()).await.unwrap();
        let mut expected = before.clone();
        for f in *fields {
            expected.remove(*f);
        }
        assert_eq!(after, expected, "{flag} removes {fields:?} and nothing else");
        before = after;
    }
    // What is left is the key's own limit, which `--key` clears.
    assert!(before.contains_key("key_rate:acme"), "{before:?}");
    let o = cli(&ctx, &["limits", "clear", "-q", q, "--key", "acme"], "");
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = cli(&ctx, &["limits", "get", "-q", q], "");
    assert!(
        text(&o.stdout).contains("no runtime settings"),
        "{}",
        text(&o.stdout)
    );
}
