//! A refused enqueue says why, in every producer: a job with the chosen id exists
//! (`duplicate_id`), or a job enqueued within the window holds the unique key
//! (`unique_key_held`). The Python package also works over `redis.asyncio`, and Node's
//! errors are named `WeirError`. The packages are installed as tests/clients.rs does
//! (scripts/ensure-clients.sh).

mod common;
use common::clients::{ensure_clients, ok, root};

use common::*;
use std::process::Command;
use std::time::Duration;
use weir::queue::producer::{Enqueued, NewJob};

/// What each step of the scenario the drivers (tests/clients/outcomes.*) run gives:
/// o-1 stored; o-1 again (id taken); a generated id with key u-1 stored; another with
/// u-1 (key held); o-2 with u-1 (key held, id free); o-1 with a free key u-2 (id taken).
const EXPECTED: [&str; 6] = [
    "enqueued",
    "duplicate_id",
    "enqueued",
    "unique_key_held",
    "unique_key_held",
    "duplicate_id",
];

/// Loads the Functions library the packages call, as `weir functions load` does.
fn load(ctx: &Ctx) {
    let o = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["functions", "load"])
        .env("REDIS_URL", &ctx.url)
        .output()
        .unwrap();
    ok("weir functions load", o);
}

fn python(ctx: &Ctx, mode: &str) -> Vec<String> {
    ensure_clients();
    load(ctx);
    let o = Command::new(root().join("target/clients/venv/bin/python"))
        .arg(root().join("tests/clients/outcomes.py"))
        .args([&ctx.url, &ctx.queue, mode])
        .output()
        .unwrap();
    ok("outcomes.py", o).lines().map(str::to_owned).collect()
}

/// The scenario's jobs are in the queue: o-1, o-2 absent, one job holding u-1.
async fn stored(ctx: &Ctx, extra: usize) {
    let jobs = ctx.snapshot().await.jobs;
    assert!(jobs.contains_key("o-1") && !jobs.contains_key("o-2"), "{jobs:?}");
    assert_eq!(jobs.len(), 2 + extra, "{jobs:?}");
}

#[tokio::test]
async fn rust_producer_says_which_duplicate() {
    let ctx = Ctx::new("outcome-rs").await;
    let p = ctx.producer();
    let hour = Duration::from_secs(3600);
    let job = || NewJob::new("outcome", &serde_json::json!({"n": 1})).unwrap();
    let steps = [
        job().id("o-1"),
        job().id("o-1"),
        job().unique_key("u-1").unique_for(hour),
        job().unique_key("u-1").unique_for(hour),
        job().id("o-2").unique_key("u-1").unique_for(hour),
        job().id("o-1").unique_key("u-2").unique_for(hour),
    ];
    let mut got = Vec::new();
    for j in steps {
        got.push(match p.enqueue_outcome(j).await.unwrap() {
            Enqueued::Stored(_) => "enqueued",
            Enqueued::DuplicateId(_) => "duplicate_id",
            Enqueued::UniqueKeyHeld(_) => "unique_key_held",
        });
    }
    assert_eq!(got, EXPECTED);
    let again = p.enqueue(job().id("o-1")).await;
    assert!(
        matches!(again, Err(weir::Error::Duplicate(ref id)) if id == "o-1"),
        "enqueue still reports a duplicate as before: {again:?}"
    );
    stored(&ctx, 0).await;
}

#[tokio::test]
async fn python_producer_says_which_duplicate() {
    let ctx = Ctx::new("outcome-py").await;
    let out = python(&ctx, "sync");
    assert_eq!(out[..6], EXPECTED, "{out:?}");
    assert_eq!(out[6], "enqueue: None", "enqueue still returns None: {out:?}");
    stored(&ctx, 0).await;
}

#[tokio::test]
async fn python_async_producer_works_over_redis_asyncio() {
    let ctx = Ctx::new("outcome-pyasync").await;
    let out = python(&ctx, "async");
    assert_eq!(out[..6], EXPECTED, "{out:?}");
    assert_eq!(out[6], "enqueue: None", "{out:?}");
    assert_eq!(out[7], "bulk: 3 o-1", "bulk over redis.asyncio: {out:?}");
    stored(&ctx, 3).await;
}

#[tokio::test]
async fn node_producer_says_which_duplicate_and_names_its_errors() {
    let ctx = Ctx::new("outcome-js").await;
    ensure_clients();
    load(&ctx);
    let o = Command::new("node")
        .arg(root().join("tests/clients/outcomes.js"))
        .args([&ctx.url, &ctx.queue])
        .output()
        .unwrap();
    let out: Vec<String> = ok("outcomes.js", o).lines().map(str::to_owned).collect();
    assert_eq!(out[..6], EXPECTED, "{out:?}");
    assert_eq!(out[6], "enqueue: null", "enqueue still resolves to null: {out:?}");
    assert!(
        out[7].starts_with("error: WeirError true WeirError: invalid job kind"),
        "{out:?}"
    );
    stored(&ctx, 0).await;
}
