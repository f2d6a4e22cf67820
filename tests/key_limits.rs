//! Per-key limits (`weir limits set --per-key-rate/--per-key-concurrency/--key`): the fetch
//! script call by call (a key at its limit holds back only its own jobs, uncharged and
//! visible as delayed; parked jobs come back as soon as their key has a free slot; a job
//! the key's rate gives a later start is not held back again when it comes due; a key's
//! own limits replace the defaults), the CLI, and a consumer with 100 backlogged keys
//! giving each its share.

mod common;
mod faults;

use common::{Ctx, wait_until};
use faults::run_weir;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use weir::limiter::{LimiterOptions, Rate, Target};
use weir::queue::scripts::{Fetched, Settle, fetch, fetch_keyed, key_shares, settle};
use weir::queue::settings::{KeyLimits, Settings};
use weir::{CancellationToken, Consumer, ConsumerConfig, Job, NewJob, Registry, handler_fn};

const T: Duration = Duration::from_secs(60);
const LEASE_MS: u64 = 30_000;

/// Enqueues `(id, key)` jobs in order (`key` "" for none).
async fn enqueue(ctx: &Ctx, jobs: &[(&str, &str)]) {
    let jobs = jobs.iter().map(|(id, key)| {
        let j = NewJob::new("k", &serde_json::json!({})).unwrap().id(*id);
        if key.is_empty() { j } else { j.key(*key) }
    });
    ctx.producer().enqueue_bulk(jobs).await.unwrap();
}

async fn set(ctx: &Ctx, s: Settings) {
    Settings::update(&mut ctx.c(), &ctx.queue, &s).await.unwrap();
}

fn ids(f: &Fetched) -> Vec<&str> {
    f.jobs.iter().map(|j| j.name.as_str()).collect()
}

async fn ack(ctx: &Ctx, f: &Fetched, which: &[&str]) {
    let items: Vec<Settle> = which
        .iter()
        .map(|id| Settle::Ack {
            id: id.to_string(),
            token: f.deadline_ms,
        })
        .collect();
    settle(&mut ctx.c(), &ctx.keys, &items).await.unwrap();
}

fn delayed_ids(st: &common::State) -> Vec<String> {
    let mut v: Vec<String> = st.delayed.iter().flatten().map(|(id, _)| id.clone()).collect();
    v.sort();
    v
}

#[tokio::test]
async fn a_key_at_its_concurrency_holds_back_only_its_own_jobs_until_a_slot_frees() {
    let ctx = Ctx::new("key-conc").await;
    enqueue(
        &ctx,
        &[
            ("a1", "a"),
            ("a2", "a"),
            ("b1", "b"),
            ("a3", "a"),
            ("n1", ""),
            ("b2", "b"),
        ],
    )
    .await;
    set(
        &ctx,
        Settings {
            key_concurrency: Some(1),
            ..Settings::default()
        },
    )
    .await;
    let mut c = ctx.c();
    let first = fetch(&mut c, &ctx.keys, 10, LEASE_MS).await.unwrap();
    assert_eq!(
        ids(&first),
        ["a1", "b1", "n1"],
        "one per key; a job without a key is free"
    );
    assert!(first.global.held_by_key);
    let st = ctx.snapshot().await;
    assert_eq!(
        delayed_ids(&st),
        ["a2", "a3", "b2"],
        "held back: delayed, visible"
    );
    assert!(st.ready.iter().all(Vec::is_empty));
    assert!(st.deferrals.is_empty(), "no deferral record: nothing charged");
    assert_eq!(st.counters.get("key_throttled"), Some(&3));

    // Nothing comes while the slots are held.
    let none = fetch(&mut c, &ctx.keys, 10, LEASE_MS).await.unwrap();
    assert!(none.jobs.is_empty());

    // a1 done: a's next job comes back (first parked first), b's stays parked.
    ack(&ctx, &first, &["a1"]).await;
    let next = fetch(&mut c, &ctx.keys, 10, LEASE_MS).await.unwrap();
    assert_eq!(ids(&next), ["a2"]);
    // A parked job deleted meanwhile is skipped when its key's slot frees.
    let deleted = ctx.admin().delete_jobs(&["a3".to_string()], false).await.unwrap();
    assert_eq!(deleted.done.len(), 1, "{deleted:?}");
    ack(&ctx, &next, &["a2"]).await;
    ack(&ctx, &first, &["b1", "n1"]).await;
    let last = fetch(&mut c, &ctx.keys, 10, LEASE_MS).await.unwrap();
    assert_eq!(ids(&last), ["b2"]);
    ack(&ctx, &last, &["b2"]).await;
    let st = ctx.snapshot().await;
    assert!(st.jobs.is_empty() && delayed_ids(&st).is_empty(), "{st:?}");
    assert_eq!(st.counters.get("acked"), Some(&5));
}

#[tokio::test]
async fn a_key_over_its_rate_gets_its_next_free_starts_reserved() {
    let ctx = Ctx::new("key-rate").await;
    let jobs: Vec<(String, &str)> = (1..=4).map(|i| (format!("a{i}"), "a")).collect();
    let mut all: Vec<(&str, &str)> = jobs.iter().map(|(id, k)| (id.as_str(), *k)).collect();
    all.push(("b1", "b"));
    enqueue(&ctx, &all).await;
    set(
        &ctx,
        Settings {
            key_rate: Some("10/s".parse::<Rate>().unwrap().with_burst(1)),
            ..Settings::default()
        },
    )
    .await;
    let mut c = ctx.c();
    let t0 = ctx.now_ms().await;
    let first = fetch(&mut c, &ctx.keys, 10, LEASE_MS).await.unwrap();
    assert_eq!(ids(&first), ["a1", "b1"]);
    // It took the last ready job, and says when the first job held back comes due (read
    // after holding them back), so a fetcher sleeps until then, not until its recheck.
    assert!(first.emptied && first.global.held_by_key);
    assert!(
        (1..=150).contains(&first.next_due_ms),
        "next due in {} ms, expected about 100",
        first.next_due_ms
    );
    let st = ctx.snapshot().await;
    let mut due: Vec<(String, u64)> = st.delayed[1].clone();
    due.sort_by_key(|(_, t)| *t);
    let order: Vec<&str> = due.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(order, ["a2", "a3", "a4"]);
    for (i, (_, t)) in due.iter().enumerate() {
        let expect = t0 + 100 * (i as u64 + 1);
        assert!(
            (expect.saturating_sub(20)..=expect + 50).contains(t),
            "a{} due at +{} ms, not about +{} ms",
            i + 2,
            t - t0,
            expect - t0
        );
    }
    // Each comes due with its start reserved: admitted, not pushed back again.
    wait_until("every reserved start to pass", T, || async {
        ctx.now_ms().await > due[2].1
    })
    .await;
    let rest = fetch(&mut c, &ctx.keys, 10, LEASE_MS).await.unwrap();
    assert_eq!(ids(&rest), ["a2", "a3", "a4"]);
    assert!(!rest.global.held_by_key);
}

#[tokio::test]
async fn a_keys_own_limits_replace_the_defaults_and_clear_back_to_them() {
    let ctx = Ctx::new("key-own").await;
    let jobs: Vec<(String, &str)> = (1..=4)
        .flat_map(|i| [(format!("acme{i}"), "acme"), (format!("other{i}"), "other")])
        .collect();
    let all: Vec<(&str, &str)> = jobs.iter().map(|(id, k)| (id.as_str(), *k)).collect();
    enqueue(&ctx, &all).await;
    let mut own = std::collections::BTreeMap::new();
    own.insert(
        "acme".to_string(),
        KeyLimits {
            rate: None,
            concurrency: Some(3),
        },
    );
    set(
        &ctx,
        Settings {
            key_concurrency: Some(1),
            key_overrides: own,
            ..Settings::default()
        },
    )
    .await;
    let mut c = ctx.c();
    let got = fetch(&mut c, &ctx.keys, 20, LEASE_MS).await.unwrap();
    let mut per: HashMap<&str, usize> = HashMap::new();
    for id in ids(&got) {
        *per.entry(if id.starts_with("acme") { "acme" } else { "other" })
            .or_default() += 1;
    }
    assert_eq!((per["acme"], per["other"]), (3, 1));

    let out = run_limits(&ctx, &["clear", "--key", "acme"]);
    assert!(
        !out.contains("key_concurrency:acme") && !out.contains("key_overrides"),
        "{out}"
    );
    let s = Settings::load(&mut ctx.c(), &ctx.queue).await.unwrap();
    assert!(s.key_overrides.is_empty() && s.key_concurrency == Some(1));
}

fn run_limits(ctx: &Ctx, args: &[&str]) -> String {
    faults::weir_on(&ctx.url, &ctx.queue, &[&["limits"][..], args].concat())
}

#[tokio::test]
async fn limits_set_get_and_clear_per_key_limits() {
    let ctx = Ctx::new("key-cli").await;
    let out = run_limits(
        &ctx,
        &[
            "set",
            "--create",
            "--per-key-rate",
            "5/s",
            "--per-key-concurrency",
            "2",
            "--key",
            "acme=50/s",
            "--key-concurrency",
            "acme=10",
        ],
    );
    for want in [
        "key_rate=5/s",
        "key_burst=1",
        "key_concurrency=2",
        "key_rate:acme=50/s",
        "key_concurrency:acme=10",
        "keys held back: none so far",
    ] {
        assert!(out.contains(want), "{want}: {out}");
    }
    for (bad, says) in [
        (
            &["--per-key-concurrency", "0"][..],
            "per-key concurrency must be at least 1",
        ),
        (&["--key", "acme"][..], "KEY=VALUE"),
        (&["--key", "bad key=5/s"][..], "job key"),
        (&["--key-concurrency", "acme=lots"][..], "not a count"),
        (&["--per-key-burst", "3"][..], "--per-key-rate"),
    ] {
        let all = [
            &["limits", "--redis-url", &ctx.url, "-q", &ctx.queue, "set"][..],
            bad,
        ]
        .concat();
        let (code, out, err) = run_weir(&all, None, T);
        assert_ne!(code, 0, "{bad:?}");
        assert!(err.contains(says), "{bad:?}: {out}{err}");
    }
    let out = run_limits(&ctx, &["clear", "--per-key"]);
    assert!(!out.contains("key_"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_hundred_keys_backlogged_each_gets_its_share() {
    let ctx = Ctx::new("key-fair").await;
    const KEYS: usize = 100;
    const PER_KEY: usize = 12;
    // Interleaved, and then key 0 over-sent: a backlog of its own behind everyone's.
    let mut jobs: Vec<NewJob> = Vec::new();
    for round in 0..PER_KEY {
        for k in 0..KEYS {
            jobs.push(
                NewJob::new("k", &serde_json::json!({}))
                    .unwrap()
                    .id(format!("k{k}-{round}"))
                    .key(format!("k{k}")),
            );
        }
    }
    for i in 0..600 {
        jobs.push(
            NewJob::new("k", &serde_json::json!({}))
                .unwrap()
                .id(format!("hot-{i}"))
                .key("k0"),
        );
    }
    ctx.producer().enqueue_bulk(jobs).await.unwrap();
    set(
        &ctx,
        Settings {
            key_concurrency: Some(1),
            ..Settings::default()
        },
    )
    .await;
    let done: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let seen = done.clone();
    let registry = Registry::new().on(
        "k",
        handler_fn(move |job: Job| {
            let seen = seen.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                *seen
                    .lock()
                    .unwrap()
                    .entry(job.key.unwrap_or_default())
                    .or_default() += 1;
                Ok(())
            }
        }),
    );
    let mut config = ConsumerConfig::new(&ctx.queue);
    config.concurrency = 400;
    config.metrics = false;
    let stop = CancellationToken::new();
    let consumer = Consumer::new(config, ctx.redis.clone(), registry).unwrap();
    let run = tokio::spawn(consumer.run(stop.clone()));
    // Until every key but the hot one has run most of its jobs.
    wait_until("the keys to run", T, || async {
        let d = done.lock().unwrap();
        (1..KEYS).all(|k| d.get(&format!("k{k}")).copied().unwrap_or(0) >= PER_KEY - 2)
    })
    .await;
    let counts = done.lock().unwrap().clone();
    stop.cancel();
    run.await.unwrap().unwrap();
    let hot = counts.get("k0").copied().unwrap_or(0);
    let others: Vec<usize> = (1..KEYS).map(|k| counts[&format!("k{k}")]).collect();
    let mean = others.iter().sum::<usize>() as f64 / others.len() as f64;
    eprintln!("per-key concurrency 1, 100 keys: mean {mean:.1} jobs per key, hot key {hot}");
    for (k, n) in others.iter().enumerate() {
        assert!(
            (*n as f64 - mean).abs() <= 0.1 * mean + 1.0,
            "key k{} ran {n} jobs, the mean is {mean:.1}",
            k + 1
        );
    }
    // The over-sent key got its one slot's worth, no more: it did not crowd the others.
    assert!(
        (hot as f64) <= 1.5 * mean + 2.0,
        "the hot key ran {hot}, the others {mean:.1} each"
    );
}

/// Key `key`'s adaptive shares in Redis: consumer tag -> share.
async fn shares(ctx: &Ctx, key: &str) -> HashMap<String, usize> {
    let h: HashMap<String, String> = redis::cmd("HGETALL")
        .arg(format!("{}auto:{key}", ctx.keys.key_limits_prefix()))
        .query_async(&mut ctx.c())
        .await
        .unwrap();
    h.into_iter()
        .map(|(tag, v)| (tag, v.split(' ').next().unwrap().parse().unwrap()))
        .collect()
}

#[tokio::test]
async fn adaptive_shares_of_the_live_consumers_add_up_to_a_keys_limit() {
    let ctx = Ctx::new("key-shares").await;
    let jobs: Vec<(String, &str)> = (1..=6).map(|i| (format!("a{i}"), "a")).collect();
    let mut all: Vec<(&str, &str)> = jobs.iter().map(|(id, k)| (id.as_str(), *k)).collect();
    all.push(("b1", "b"));
    enqueue(&ctx, &all).await;
    let mut c = ctx.c();
    let share = |tag: &'static str, key: &'static str, n: usize, ttl: u64| {
        let mut c = ctx.c();
        let keys = ctx.keys.clone();
        async move {
            key_shares(&mut c, &keys, tag, ttl, &[(key.to_string(), n)])
                .await
                .unwrap()
        }
    };
    share("c1", "a", 1, 10_000).await;
    share("c2", "a", 2, 10_000).await;
    // A share past its life counts for nothing (and is removed when read).
    share("c3", "a", 50, 1).await;
    tokio::time::sleep(Duration::from_millis(5)).await;

    let one = fetch_keyed(&mut c, &ctx.keys, 1, LEASE_MS, true).await.unwrap();
    assert_eq!(ids(&one), ["a1"]);
    let first = fetch_keyed(&mut c, &ctx.keys, 10, LEASE_MS, true).await.unwrap();
    assert_eq!(ids(&first), ["a2", "a3", "b1"], "3 of a running in all: 1 + 2");
    assert!(first.global.held_by_key && first.global.parked);
    assert_eq!(delayed_ids(&ctx.snapshot().await), ["a4", "a5", "a6"]);
    assert_eq!(
        shares(&ctx, "a").await,
        HashMap::from([("c1".into(), 1), ("c2".into(), 2)]),
        "the expired share is gone"
    );

    // A consumer that does not adapt per key does not read the shares.
    enqueue(&ctx, &[("a7", "a")]).await;
    let plain = fetch(&mut c, &ctx.keys, 10, LEASE_MS).await.unwrap();
    assert_eq!(ids(&plain), ["a7"]);

    // c2 withdraws: a's limit is 1; a1..a3 and a7 done, one more of a comes back from
    // parked.
    share("c2", "a", 0, 10_000).await;
    ack(&ctx, &one, &["a1"]).await;
    ack(&ctx, &plain, &["a7"]).await;
    ack(&ctx, &first, &["a2", "a3", "b1"]).await;
    let next = fetch_keyed(&mut c, &ctx.keys, 10, LEASE_MS, true).await.unwrap();
    assert_eq!(ids(&next), ["a4"]);
    let st = ctx.snapshot().await;
    assert!(st.deferrals.is_empty(), "held back jobs are not charged");
    assert!(
        st.jobs
            .values()
            .all(|env| env.contains(r#""attempt":0"#) || env.contains(r#""attempt":1"#))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_adaptive_per_key_a_slow_key_backs_off_alone() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let ctx = Ctx::new("key-adaptive").await;
    // A slow key (300 ms, three times the 100 ms target) among five fast ones (10 ms).
    let mut jobs: Vec<NewJob> = Vec::new();
    // Enough fast jobs to outlast the slow key's cut (a window of at least a second per
    // step: 10 -> 7 -> 5 -> 3 -> 2).
    for i in 0..30_000 {
        let key = if i % 10 == 0 {
            "slow".to_string()
        } else {
            format!("fast-{}", i % 5)
        };
        jobs.push(NewJob::new("k", &serde_json::json!({})).unwrap().key(key));
    }
    ctx.producer().enqueue_bulk(jobs).await.unwrap();
    #[derive(Default)]
    struct Seen {
        slow_running: AtomicUsize,
        slow_peak: AtomicUsize,
        slow_done: AtomicUsize,
        fast_done: AtomicUsize,
    }
    let seen: Arc<Seen> = Arc::default();
    let s = seen.clone();
    let registry = Registry::new().on(
        "k",
        handler_fn(move |job: Job| {
            let s = s.clone();
            async move {
                if job.key.as_deref() == Some("slow") {
                    let now = s.slow_running.fetch_add(1, Ordering::SeqCst) + 1;
                    s.slow_peak.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    s.slow_running.fetch_sub(1, Ordering::SeqCst);
                    s.slow_done.fetch_add(1, Ordering::SeqCst);
                } else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    s.fast_done.fetch_add(1, Ordering::SeqCst);
                }
                Ok(())
            }
        }),
    );
    let mut options = LimiterOptions::default();
    options.adaptive = true;
    options.adaptive_per_key = true;
    options.target_p95 = Some(Target::Absolute(Duration::from_millis(100)));
    let mut config = ConsumerConfig::new(&ctx.queue);
    config.concurrency = 20;
    config.limiter = options.limiter().unwrap();
    config.key_limiter = options.key_limiter(10).unwrap();
    config.metrics = false;
    let stop = CancellationToken::new();
    let consumer = Consumer::new(config, ctx.redis.clone(), registry).unwrap();
    let run = tokio::spawn(consumer.run(stop.clone()));

    wait_until("the slow key's share to fall to 2 or less", T, || async {
        let s = shares(&ctx, "slow").await;
        !s.is_empty() && s.values().sum::<usize>() <= 2
    })
    .await;
    // From now on: the slow key runs at its share; the fast keys keep their pace.
    tokio::time::sleep(Duration::from_millis(400)).await;
    seen.slow_peak
        .store(seen.slow_running.load(Ordering::SeqCst), Ordering::SeqCst);
    let (slow0, fast0) = (
        seen.slow_done.load(Ordering::SeqCst),
        seen.fast_done.load(Ordering::SeqCst),
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let slow = seen.slow_done.load(Ordering::SeqCst) - slow0;
    let fast = seen.fast_done.load(Ordering::SeqCst) - fast0;
    let peak = seen.slow_peak.load(Ordering::SeqCst);
    let fast_shares: Vec<usize> = {
        let mut v = Vec::new();
        for k in 0..5 {
            v.push(shares(&ctx, &format!("fast-{k}")).await.values().sum());
        }
        v
    };
    eprintln!(
        "in 3 s after the cut: slow key {slow} jobs (peak {peak} at once), fast keys {fast}; fast shares {fast_shares:?}"
    );
    stop.cancel();
    run.await.unwrap().unwrap();
    assert!(
        peak <= 2,
        "the slow key ran {peak} at once over a share of at most 2"
    );
    assert!(
        fast >= 20 * slow.max(1),
        "fast keys ran {fast} jobs, the slow one {slow}"
    );
    assert!(
        fast_shares.iter().all(|&s| s >= 10),
        "the fast keys were not cut: {fast_shares:?}"
    );
    // The consumer withdrew its shares as it stopped.
    assert!(shares(&ctx, "slow").await.is_empty());
}
