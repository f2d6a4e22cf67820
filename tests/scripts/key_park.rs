//! fetch.lua's per-key state where features meet: a key's running set far beyond Lua's
//! `unpack` limit (left by `--adaptive-per-key` before a concurrency was set), parked jobs
//! over many lease periods (they wait for a slot, and do not churn through delayed), a
//! freed slot bringing back exactly one, a removed limit bringing back all, and ids that
//! cannot be named in the reply (a newline) dead-lettered instead of leased.

use crate::N;
use crate::common::*;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use weir::queue::json::JobState;
use weir::queue::scripts::{self, Fetched, PARKED_AT_MS};
use weir::queue::settings::Settings;
use weir::{NewJob, Priority};

const T: Duration = Duration::from_secs(60);

async fn set_key_concurrency(ctx: &Ctx, n: u64) {
    let s = Settings {
        key_concurrency: Some(n),
        ..Settings::default()
    };
    Settings::update(&mut ctx.c(), &ctx.queue, &s).await.unwrap();
}

/// Enqueues `n` jobs of key `key` (ids `<prefix><i>` when `prefix` is given, else
/// generated: inline jobs).
async fn enqueue_keyed(ctx: &Ctx, key: &str, prefix: Option<&str>, n: usize) {
    let jobs = (0..n).map(|i| {
        let j = NewJob::new("k", &serde_json::json!({ "i": i })).unwrap().key(key);
        match prefix {
            Some(p) => j.id(format!("{p}{i:05}")),
            None => j,
        }
    });
    ctx.producer().enqueue_bulk(jobs).await.unwrap();
}

/// Acks every job `f` leased.
async fn ack_all(ctx: &Ctx, f: &Fetched) {
    let items = crate::acks_of(f);
    if !items.is_empty() {
        scripts::settle(&mut ctx.c(), &ctx.keys, &items).await.unwrap();
    }
}

fn prefix(ctx: &Ctx) -> String {
    ctx.keys.key_limits_prefix()
}

async fn zcard(ctx: &Ctx, key: &str) -> u64 {
    ctx.cmd(&["ZCARD", key]).await
}

async fn llen(ctx: &Ctx, key: &str) -> u64 {
    ctx.cmd(&["LLEN", key]).await
}

async fn throttled(ctx: &Ctx) -> u64 {
    ctx.snapshot()
        .await
        .counters
        .get("key_throttled")
        .copied()
        .unwrap_or(0)
}

#[tokio::test]
async fn a_running_set_of_twenty_thousand_ids_loses_no_job_once_a_concurrency_is_set() {
    let ctx = Ctx::new("park-big-running").await;
    // What draining 20,000 jobs of key a under --adaptive-per-key (no shares) left: the
    // leased set of today's layout, and the plain set of weir before it (which a fetch
    // unpacked whole), both past Lua's unpack limit.
    let leased = format!("{}leased:a", prefix(&ctx));
    let running = format!("{}running:a", prefix(&ctx));
    for chunk in 0..20 {
        let (mut zadd, mut sadd) = (redis::cmd("ZADD"), redis::cmd("SADD"));
        zadd.arg(&leased);
        sadd.arg(&running);
        for i in 0..1000 {
            let id = format!("old-{}", chunk * 1000 + i);
            zadd.arg(1000 + i).arg(&id);
            sadd.arg(&id);
        }
        let _: u64 = zadd.query_async(&mut ctx.c()).await.unwrap();
        let _: u64 = sadd.query_async(&mut ctx.c()).await.unwrap();
    }
    set_key_concurrency(&ctx, 10).await;
    // Inline jobs (lost outright by a failing fetch) and stored ones.
    enqueue_keyed(&ctx, "a", None, 30).await;
    enqueue_keyed(&ctx, "a", Some("s"), 30).await;
    let mut runs: HashMap<String, usize> = HashMap::new();
    let mut calls = 0;
    while runs.len() < 60 {
        calls += 1;
        assert!(calls <= 200, "the jobs stopped coming: {} of 60 ran", runs.len());
        let f = scripts::fetch_keyed(&mut ctx.c(), &ctx.keys, 20, 30_000, true)
            .await
            .expect("the fetch fails on no running set, however big");
        assert!(
            f.jobs.len() <= 10,
            "{} leased over a concurrency of 10",
            f.jobs.len()
        );
        for j in &f.jobs {
            *runs.entry(j.decode(usize::MAX).unwrap().id).or_default() += 1;
        }
        ack_all(&ctx, &f).await;
    }
    assert!(runs.values().all(|&n| n == 1), "a job ran twice: {runs:?}");
    let st = ctx.snapshot().await;
    assert!(
        st.jobs.is_empty() && st.lease.is_empty() && st.delayed.iter().all(Vec::is_empty),
        "{st:?}"
    );
    assert!(st.ready.iter().all(Vec::is_empty));
    assert_eq!(st.counters.get("acked"), Some(&60));
    assert!(zcard(&ctx, &leased).await <= 10, "the stale members were pruned");
}

#[tokio::test]
async fn under_adaptive_per_key_without_a_limit_a_running_set_stays_near_its_leases() {
    let ctx = Ctx::new("park-auto-running").await;
    enqueue_keyed(&ctx, "a", None, 3000).await;
    let leased = format!("{}leased:a", prefix(&ctx));
    let mut fetched = 0;
    while fetched < 3000 {
        let f = scripts::fetch_keyed(&mut ctx.c(), &ctx.keys, 500, 30_000, true)
            .await
            .unwrap();
        assert!(!f.jobs.is_empty(), "every job is free to run");
        fetched += f.jobs.len();
        // At most the leases of this call, and what the last one left unchecked.
        assert!(zcard(&ctx, &leased).await <= 500, "the set grows with the drain");
        ack_all(&ctx, &f).await;
    }
    assert_eq!(fetched, 3000);
}

/// Parks `BACKLOG` jobs of key a under concurrency 1 with a lease of `vt` ms: one leased
/// (its lease is left to expire, unreclaimed: its slot stays taken), the rest parked.
const BACKLOG: usize = 2000;

async fn park_backlog(ctx: &Ctx, vt: u64) -> Fetched {
    enqueue_keyed(ctx, "a", Some("a"), BACKLOG).await;
    set_key_concurrency(ctx, 1).await;
    let first = scripts::fetch(&mut ctx.c(), &ctx.keys, 500, vt).await.unwrap();
    assert_eq!(first.jobs.len(), 1);
    for _ in 0..3 {
        let f = scripts::fetch(&mut ctx.c(), &ctx.keys, 500, vt).await.unwrap();
        assert!(f.jobs.is_empty() && f.global.parked);
    }
    first
}

#[tokio::test]
async fn parked_jobs_wait_for_a_slot_through_lease_periods_without_churn() {
    let ctx = Ctx::new("park-churn").await;
    const VT: u64 = 100;
    let first = park_backlog(&ctx, VT).await;
    let list = format!("{}parked:a", prefix(&ctx));
    assert_eq!(llen(&ctx, &list).await, BACKLOG as u64 - 1);
    assert_eq!(throttled(&ctx).await, BACKLOG as u64 - 1);
    // Ten lease periods of fetching: nothing falls due, nothing is parked again.
    let until = ctx.now_ms().await + 10 * VT;
    let due = AtomicBool::new(false);
    wait_until("ten lease periods of fetches", T, || async {
        let f = scripts::fetch(&mut ctx.c(), &ctx.keys, 500, VT).await.unwrap();
        assert!(f.jobs.is_empty(), "the slot is taken: {:?}", f.jobs);
        assert!(f.global.parked);
        if f.next_due_ms != 0 {
            due.store(true, Ordering::Relaxed);
        }
        ctx.now_ms().await > until
    })
    .await;
    let st = ctx.snapshot().await;
    assert_eq!(
        llen(&ctx, &list).await,
        BACKLOG as u64 - 1,
        "the parked list did not grow"
    );
    assert_eq!(throttled(&ctx).await, BACKLOG as u64 - 1, "each job counted once");
    assert!(!due.into_inner(), "a fetch said a parked job falls due");
    assert_eq!(st.delayed[N].len(), BACKLOG - 1, "parked jobs stay delayed");
    assert!(st.delayed[N].iter().all(|(_, s)| *s >= PARKED_AT_MS));
    assert!(st.ready.iter().all(Vec::is_empty));

    // A freed slot brings back exactly one: the first parked.
    ack_all(&ctx, &first).await;
    let next = scripts::fetch(&mut ctx.c(), &ctx.keys, 500, 30_000)
        .await
        .unwrap();
    let names: Vec<&str> = next.jobs.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(names, ["a00001"]);
    assert_eq!(llen(&ctx, &list).await, BACKLOG as u64 - 2);
    assert_eq!(ctx.snapshot().await.delayed[N].len(), BACKLOG - 2);
    assert_eq!(throttled(&ctx).await, BACKLOG as u64 - 1);
    ack_all(&ctx, &next).await;
    let again = scripts::fetch(&mut ctx.c(), &ctx.keys, 500, 30_000)
        .await
        .unwrap();
    assert_eq!(again.jobs.len(), 1);
    assert_eq!(again.jobs[0].name, "a00002");
    assert_eq!(
        throttled(&ctx).await,
        BACKLOG as u64 - 1,
        "a freed slot parks none again"
    );
}

#[tokio::test]
async fn parked_jobs_stay_listed_and_come_back_when_the_limit_is_removed() {
    let ctx = Ctx::new("park-visible").await;
    let first = park_backlog(&ctx, 30_000).await;
    let admin = ctx.admin();
    // Listed as delayed and parked (no due time), shown, run now and deleted by id.
    let page = admin.jobs(JobState::Delayed, None, 10, None).await.unwrap();
    assert_eq!(page.jobs.len(), 10);
    assert!(
        page.jobs.iter().all(|j| j.parked && j.due_at.is_none()),
        "{page:?}"
    );
    let shown = admin.job("a00005").await.unwrap().expect("shown");
    assert!(shown.job.state == JobState::Delayed && shown.job.parked);
    let moved = admin.run_now(&["a00007".to_string()]).await.unwrap();
    assert_eq!(moved.done.len(), 1, "{moved:?}");
    let deleted = admin.delete_jobs(&["a00009".to_string()], false).await.unwrap();
    assert_eq!(deleted.done.len(), 1, "{deleted:?}");
    // The limit goes: every parked job comes back (a batch per call), each once.
    Settings::clear(&mut ctx.c(), &ctx.queue).await.unwrap();
    let mut runs: HashMap<String, usize> = HashMap::from([(first.jobs[0].name.clone(), 1)]);
    let mut calls = 0;
    while runs.len() < BACKLOG - 1 {
        calls += 1;
        assert!(calls <= 50, "parked jobs stopped coming back: {} ran", runs.len());
        let f = scripts::fetch(&mut ctx.c(), &ctx.keys, 500, 30_000)
            .await
            .unwrap();
        for j in &f.jobs {
            *runs.entry(j.name.clone()).or_default() += 1;
        }
    }
    assert!(runs.values().all(|&n| n == 1), "a job came back twice");
    assert!(!runs.contains_key("a00009"), "the deleted job stays deleted");
    let st = ctx.snapshot().await;
    assert!(st.delayed.iter().all(Vec::is_empty) && st.ready.iter().all(Vec::is_empty));
    assert_eq!(st.lease.len(), BACKLOG - 1);
    assert!(st.jobs.contains_key("a00007"));
    let f = scripts::fetch(&mut ctx.c(), &ctx.keys, 500, 30_000)
        .await
        .unwrap();
    assert!(!f.global.parked, "nothing is parked any more");
}

#[tokio::test]
async fn an_id_with_a_newline_is_dead_lettered_and_its_batch_mates_pair_by_their_items() {
    let ctx = Ctx::new("newline-id").await;
    // An inline job (named by its envelope), the bad id, a stored job: pushed by hand.
    let inline = env("i1", 0, 3, 1);
    for (id, e) in [("x\ny", env("x-y", 0, 3, 1)), ("s1", env("s1", 0, 3, 1))] {
        let _: () = ctx.cmd(&["HSET", ctx.keys.jobs(), id, &e]).await;
    }
    let _: () = ctx
        .cmd(&["RPUSH", ctx.keys.ready(Priority::Normal), &inline, "x\ny", "s1"])
        .await;
    let f = scripts::fetch(&mut ctx.c(), &ctx.keys, 10, 30_000).await.unwrap();
    let names: Vec<&str> = f.jobs.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(names, [inline.as_str(), "s1"]);
    assert_eq!(f.jobs[1].envelope(), env("s1", 0, 3, 1).as_bytes());
    let st = ctx.snapshot().await;
    assert_eq!(st.lease.len(), 2, "the bad id is never leased: {:?}", st.lease);
    assert_eq!(st.dead.len(), 1);
    assert_eq!(st.dead[0].0, "x\ny");
    assert_eq!(
        st.errors.get("x\ny").map(String::as_str),
        Some("invalid id: contains a newline")
    );
    assert_eq!(st.counters.get("dead"), Some(&1));
    assert_eq!(st.counters.get("fetched"), Some(&2));
    // Both batch-mates settle by their items.
    ack_all(&ctx, &f).await;
    let st = ctx.snapshot().await;
    assert!(st.lease.is_empty() && st.ready.iter().all(Vec::is_empty));
    assert_eq!(st.counters.get("acked"), Some(&2));
}
