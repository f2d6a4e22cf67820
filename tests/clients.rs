//! The producer packages in clients/ (Python and Node) against a real redis-server and a
//! real `weir work`: every job they enqueue through `FCALL weir_enqueue` runs once, with
//! its payload byte for byte as sent, and every envelope they write (job keys included)
//! is byte for byte the one the Rust producer writes for the same job; unique windows hold
//! across a Rust and a Python producer; bad job keys are refused before anything is sent.
//! scripts/ensure-clients.sh installs the packages (a venv, `npm ci`).

mod common;
use common::clients::{ensure_clients, ok, root};

use common::*;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;
use weir::{NewJob, Producer};

const JOBS: usize = 10_000;

fn python() -> Command {
    ensure_clients();
    Command::new(root().join("target/clients/venv/bin/python"))
}

fn node() -> Command {
    ensure_clients();
    Command::new("node")
}

fn driver(name: &str) -> PathBuf {
    root().join("tests/clients").join(name)
}

fn weir(ctx: &Ctx, args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .env("REDIS_URL", &ctx.url)
        .env_remove("WEIR_LOG")
        .output()
        .expect("weir runs");
    ok(&format!("weir {args:?}"), o)
}

#[derive(Deserialize)]
struct Printed {
    id: String,
    attempt: u32,
    payload: Box<RawValue>,
}

/// Drains the queue with `weir work --handler print --drain`: id -> payload, as run.
fn drain(ctx: &Ctx) -> HashMap<String, String> {
    let out = weir(
        ctx,
        &[
            "work",
            "--queue",
            &ctx.queue,
            "--handler",
            "print",
            "--drain",
            "--no-metrics",
        ],
    );
    let mut ran = HashMap::new();
    for line in out.lines() {
        let p: Printed = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert_eq!(p.attempt, 0, "job {} ran more than once", p.id);
        let again = ran.insert(p.id.clone(), p.payload.get().to_owned());
        assert!(again.is_none(), "job {} ran twice", p.id);
    }
    ran
}

/// The driver's `id<TAB>key<TAB>payload` lines ('*': an id the package generated; an
/// empty key: a job without one).
fn sent_jobs(sent: &str) -> Vec<(&str, &str, &str)> {
    sent.lines()
        .map(|l| {
            let mut f = l.splitn(3, '\t');
            let mut next = || f.next().unwrap_or_else(|| panic!("not id, key, payload: {l}"));
            (next(), next(), next())
        })
        .collect()
}

/// Checks what a queue holds or ran (id -> value) against what the driver sent (id,
/// value; '*': an id the package generated, matched by value): every job once, every value
/// byte for byte.
fn compare(sent: Vec<(&str, String)>, mut ran: HashMap<String, String>) {
    assert_eq!(sent.len(), JOBS);
    assert_eq!(ran.len(), JOBS, "jobs run");
    let mut by_payload: HashMap<String, usize> = HashMap::new();
    for (id, payload) in &sent {
        if *id == "*" {
            *by_payload.entry(payload.to_string()).or_default() += 1;
            continue;
        }
        let got = ran.remove(*id).unwrap_or_else(|| panic!("job {id} is missing"));
        assert_eq!(got.as_bytes(), payload.as_bytes(), "job {id}");
    }
    let mut rest: HashMap<String, usize> = HashMap::new();
    for payload in ran.into_values() {
        *rest.entry(payload).or_default() += 1;
    }
    assert_eq!(rest, by_payload, "the jobs with generated ids");
}

/// The queue's envelopes as `key<TAB>payload` by id, after checking each against the
/// envelope the Rust producer writes for the same job (same id, kind, priority, attempts,
/// time, trace id, job key and raw payload): byte for byte, so the field order, the
/// optional fields' presence and the payload's text all match.
async fn stored_envelopes(ctx: &Ctx, window: (u64, u64), compact: &mut usize) -> HashMap<String, String> {
    let mut stored = HashMap::new();
    let s = ctx.snapshot().await;
    // where the normal priority's jobs wait: ready or delayed
    let normal: std::collections::HashSet<&str> = (s.ready[1].iter().map(String::as_str))
        .chain(s.delayed[1].iter().map(|(id, _)| id.as_str()))
        .collect();
    for (id, env) in s.jobs.clone() {
        let job = weir::queue::envelope::decode(&id, env.as_bytes(), usize::MAX)
            .unwrap_or_else(|e| panic!("job {id}: {e}: {env}"));
        assert_eq!(job.unique_key, None, "job {id}: no window in this test");
        // enqueued while the producer ran (a compact job's time is its id's)
        let (t0, t1) = window;
        assert!(
            (t0..=t1).contains(&job.enqueued_at_ms),
            "job {id}: enqueued at {}",
            job.enqueued_at_ms
        );
        let mut again = NewJob::from_raw(job.kind.clone(), job.payload.clone())
            .id(&id)
            .priority(job.priority())
            .max_attempts(job.max_attempts);
        if let Some(t) = &job.trace_id {
            again = again.trace_id(t);
        }
        if let Some(k) = &job.key {
            again = again.key(k);
        }
        if let Some(r) = &job.retry {
            again = again.retry(r.parse().unwrap_or_else(|e| panic!("job {id}: {e}")));
        }
        let rust = Producer::prepare_offline(again, job.enqueued_at_ms, &mut Vec::new()).unwrap();
        let mut rust = String::from_utf8(rust.envelope).unwrap();
        if env.starts_with(r#"{"id":""#) {
            // compact: the full form without its numbers, which the id's time and the
            // form's implied values give back
            rust = format!("{{{}", &rust[rust.find(r#","id":"#).unwrap() + 1..]);
            *compact += 1;
            assert!(
                normal.contains(id.as_str()),
                "job {id}: compact, of normal priority"
            );
        }
        assert_eq!(rust, env, "job {id}: the envelope the Rust producer writes");
        let key = job.key.unwrap_or_default();
        stored.insert(id, format!("{key}\t{}", job.payload.get()));
    }
    stored
}

/// `compact`: the producer writes compact envelopes (`WEIR_COMPACT`), for the jobs they
/// describe: some are, and the rest are written in full.
async fn drained_byte_for_byte(label: &str, producer: Command, compact: bool) {
    let ctx = Ctx::new(label).await;
    assert!(weir(&ctx, &["functions", "load"]).contains("weir library"));
    let mut producer = producer;
    if compact {
        producer.env("WEIR_COMPACT", "1");
    }
    let t0 = ctx.now_ms().await;
    let sent = ok(
        label,
        producer
            .args([&ctx.url, &ctx.queue, "all", &JOBS.to_string()])
            .output()
            .unwrap(),
    );
    let t1 = ctx.now_ms().await;
    let sent = sent_jobs(&sent);
    let keyed = sent.iter().filter(|(_, k, _)| !k.is_empty()).count();
    assert!((JOBS / 3..JOBS / 2).contains(&keyed), "{keyed} jobs with a key");
    let with_keys = sent.iter().map(|(id, k, p)| (*id, format!("{k}\t{p}")));
    let mut compacts = 0;
    compare(
        with_keys.collect(),
        stored_envelopes(&ctx, (t0, t1), &mut compacts).await,
    );
    match compact {
        true => assert!((1..JOBS).contains(&compacts), "{compacts} of {JOBS} compact"),
        false => assert_eq!(compacts, 0),
    }
    let payloads = sent.iter().map(|(id, _, p)| (*id, p.to_string()));
    compare(payloads.collect(), drain(&ctx));
    let s = ctx.stats().await;
    assert_eq!(
        (s.counters.get("acked").copied(), s.dead),
        (Some(JOBS as u64), 0),
        "{s:?}"
    );
}

#[tokio::test]
async fn python_jobs_run_once_with_their_payloads_byte_for_byte() {
    let mut p = python();
    p.arg(driver("produce.py"));
    drained_byte_for_byte("py", p, false).await;
}

#[tokio::test]
async fn python_compact_jobs_run_once_with_their_payloads_byte_for_byte() {
    let mut p = python();
    p.arg(driver("produce.py"));
    drained_byte_for_byte("py-compact", p, true).await;
}

#[tokio::test]
async fn node_jobs_run_once_with_their_payloads_byte_for_byte() {
    let mut n = node();
    n.arg(driver("produce.js"));
    drained_byte_for_byte("js", n, false).await;
}

#[tokio::test]
async fn node_compact_jobs_run_once_with_their_payloads_byte_for_byte() {
    let mut n = node();
    n.arg(driver("produce.js"));
    drained_byte_for_byte("js-compact", n, true).await;
}

/// A bad job key (outside the alphabet, empty, too long, not a string) is refused by
/// both packages, through a single enqueue and in a bulk call, with the check's message
/// and nothing stored.
async fn bad_keys_are_refused(label: &str, mut producer: Command) {
    let ctx = Ctx::new(label).await;
    weir(&ctx, &["functions", "load"]);
    let out = ok(
        label,
        producer
            .args([&ctx.url, &ctx.queue, "badkey", "0"])
            .output()
            .unwrap(),
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 12, "{out}");
    for l in &lines {
        assert!(
            l.starts_with("invalid job key ")
                && l.ends_with(": use 1 to 128 characters from A-Z a-z 0-9 _ . : -"),
            "{l}"
        );
    }
    assert!(ctx.snapshot().await.jobs.is_empty(), "nothing stored");
}

#[tokio::test]
async fn python_refuses_bad_job_keys() {
    let mut p = python();
    p.arg(driver("produce.py"));
    bad_keys_are_refused("py-badkey", p).await;
}

#[tokio::test]
async fn node_refuses_bad_job_keys() {
    let mut n = node();
    n.arg(driver("produce.js"));
    bad_keys_are_refused("js-badkey", n).await;
}

/// A bad retry rule (an unknown name, an empty list, a delay that is no duration, a
/// factor or jitter out of range, no runs, a quote, not a string) is refused by both
/// packages, through a single enqueue and in a bulk call, nothing stored.
async fn bad_retry_rules_are_refused(label: &str, mut producer: Command) {
    let ctx = Ctx::new(label).await;
    weir(&ctx, &["functions", "load"]);
    let out = ok(
        label,
        producer
            .args([&ctx.url, &ctx.queue, "badretry", "0"])
            .output()
            .unwrap(),
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 16, "{out}");
    for l in &lines {
        assert!(l.starts_with("invalid retry rule "), "{l}");
    }
    assert!(ctx.snapshot().await.jobs.is_empty(), "nothing stored");
}

#[tokio::test]
async fn python_refuses_bad_retry_rules() {
    let mut p = python();
    p.arg(driver("produce.py"));
    bad_retry_rules_are_refused("py-badretry", p).await;
}

#[tokio::test]
async fn node_refuses_bad_retry_rules() {
    let mut n = node();
    n.arg(driver("produce.js"));
    bad_retry_rules_are_refused("js-badretry", n).await;
}

/// Every attempts value a job is given means what it means to the Rust producer: 0 is
/// one run (as 1 is), none is the default.
async fn attempts_mean_what_they_mean_in_rust(label: &str, mut producer: Command) {
    let ctx = Ctx::new(label).await;
    weir(&ctx, &["functions", "load"]);
    let out = ok(
        label,
        producer
            .args([&ctx.url, &ctx.queue, "attempts", "0"])
            .output()
            .unwrap(),
    );
    let stored = ctx.snapshot().await.jobs;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!((lines.len(), stored.len()), (8, 8), "{out}");
    for line in lines {
        let (id, value) = line.split_once('\t').unwrap();
        let mut job = NewJob::from_json("att", "null").unwrap().id(id);
        if value != "None" {
            job = job.max_attempts(value.parse().unwrap());
        }
        let rust = Producer::prepare_offline(job, 0, &mut Vec::new()).unwrap();
        let want = weir::queue::envelope::decode(id, &rust.envelope, usize::MAX).unwrap();
        let got = weir::queue::envelope::decode(id, stored[id].as_bytes(), usize::MAX).unwrap();
        assert_eq!(got.max_attempts, want.max_attempts, "{id}: max_attempts {value}");
    }
}

#[tokio::test]
async fn python_attempts_mean_what_they_mean_in_rust() {
    let mut p = python();
    p.arg(driver("produce.py"));
    attempts_mean_what_they_mean_in_rust("py-attempts", p).await;
}

#[tokio::test]
async fn node_attempts_mean_what_they_mean_in_rust() {
    let mut n = node();
    n.arg(driver("produce.js"));
    attempts_mean_what_they_mean_in_rust("js-attempts", n).await;
}

/// The Rust producer enqueues the same 1,000 keys with a window of an hour, in the
/// background of the Python script; returns (enqueued, duplicates).
async fn rust_unique(ctx: &Ctx) -> (u64, usize) {
    let jobs = (0..1000).map(|i| {
        let key = format!("key-{i}");
        NewJob::new("uniq", &serde_json::json!({"key": key, "from": "rust"}))
            .unwrap()
            .unique_key(key)
            .unique_for(Duration::from_secs(3600))
    });
    let r = ctx.producer().enqueue_bulk(jobs).await.unwrap();
    (r.enqueued, r.duplicates.len())
}

/// The Python script enqueues the 1,000 keys; returns (enqueued, duplicates).
fn python_unique(url: &str, queue: &str) -> (u64, usize) {
    let out = ok(
        "produce.py unique",
        python()
            .arg(driver("produce.py"))
            .args([url, queue, "unique", "1000"])
            .output()
            .unwrap(),
    );
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    (
        v["enqueued"].as_u64().unwrap(),
        v["duplicates"].as_u64().unwrap() as usize,
    )
}

#[tokio::test]
async fn rust_and_python_producers_share_unique_windows() {
    let ctx = Ctx::new("uniq-2").await;
    weir(&ctx, &["functions", "load"]);
    let (url, queue) = (ctx.url.clone(), ctx.queue.clone());
    let py = std::thread::spawn(move || python_unique(&url, &queue));
    let (rust_enq, rust_dups) = rust_unique(&ctx).await;
    let (py_enq, py_dups) = py.join().unwrap();
    assert_eq!(
        rust_enq + py_enq,
        1000,
        "one job per key: rust {rust_enq}, python {py_enq}"
    );
    assert_eq!(rust_dups + py_dups, 1000);

    let ran = drain(&ctx);
    assert_eq!(ran.len(), 1000, "1,000 jobs run");
    let keys: std::collections::HashSet<String> = ran
        .values()
        .map(|p| {
            serde_json::from_str::<serde_json::Value>(p).unwrap()["key"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(keys.len(), 1000, "one run per key");
    assert_eq!(ctx.stats().await.counters.get("acked").copied(), Some(1000));

    assert_eq!(
        rust_unique(&ctx).await,
        (0, 1000),
        "done within the window: skipped"
    );
    assert_eq!(
        python_unique(&ctx.url, &ctx.queue),
        (0, 1000),
        "done within the window: skipped"
    );
    assert_eq!(ctx.snapshot().await.unique.len(), 1000);
}

/// Whether Redis holds a Functions library.
async fn library_loaded(ctx: &Ctx) -> bool {
    let libs: Vec<redis::Value> = ctx.cmd(&["FUNCTION", "LIST"]).await;
    !libs.is_empty()
}

/// Redis loses the Functions library while a consumer runs (`FUNCTION FLUSH`, as a
/// restart without persistence or a failover to a replica without it would): the
/// consumer loads it again, and the Python and Node producers, whose FCALLs wait for it,
/// enqueue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producers_enqueue_after_redis_loses_the_library_under_a_running_consumer() {
    let ctx = Ctx::private("lib-lost").await;
    let mut config = weir::ConsumerConfig::new(&ctx.queue);
    config.metrics = false;
    let registry = weir::Registry::new().fallback(weir::handler_fn(|_job| async { Ok(()) }));
    let consumer = weir::Consumer::new(config, ctx.redis.clone(), registry).unwrap();
    let stop = weir::CancellationToken::new();
    let running = tokio::spawn(consumer.run(stop.clone()));
    wait_until("the consumer loads the library", Duration::from_secs(10), || {
        library_loaded(&ctx)
    })
    .await;

    let _: () = ctx.cmd(&["FUNCTION", "FLUSH"]).await;
    assert!(!library_loaded(&ctx).await);
    let (url, queue) = (ctx.url.clone(), ctx.queue.clone());
    let py = tokio::task::spawn_blocking(move || python_unique(&url, &queue));
    assert_eq!(
        py.await.unwrap(),
        (1000, 0),
        "python enqueued once the library was back"
    );

    let _: () = ctx.cmd(&["FUNCTION", "FLUSH"]).await;
    let (url, queue) = (ctx.url.clone(), ctx.queue.clone());
    let js = tokio::task::spawn_blocking(move || {
        let mut n = node();
        n.arg(driver("produce.js"))
            .args([url.as_str(), queue.as_str(), "all", "20"]);
        ok("produce.js all", n.output().unwrap())
    });
    let sent = js.await.unwrap();
    assert_eq!(sent_jobs(&sent).len(), 20, "{sent}");
    let enqueued = ctx.stats().await.counters.get("enqueued").copied();
    assert_eq!(enqueued, Some(1020));
    stop.cancel();
    running.await.unwrap().unwrap();
}
