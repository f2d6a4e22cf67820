//! Compact envelopes (`Producer::compact_envelopes`) beside every other way of enqueueing:
//! each job is written compact exactly where the compact form says all of it, and runs,
//! retries and is dead-lettered with the values its full form would have carried.

use crate::common::*;
use crate::support::*;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use weir::{JobError, NewJob, Priority, Registry, handler_fn};

/// Each run the handler saw, by job id: (attempt, max_attempts, priority, enqueued_at).
type Runs = Arc<Mutex<BTreeMap<String, Vec<(u32, u32, Priority, u64)>>>>;

#[tokio::test]
async fn compact_jobs_run_retry_and_die_with_the_values_of_their_full_form() {
    let ctx = Ctx::new("compact").await;
    let p = ctx.producer().compact_envelopes(true);
    let t0 = ctx.now_ms().await;
    let mut ids = BTreeMap::new();
    // Alone in the queue, a compact job's age is its id's: the oldest ready job's age
    // grows from it.
    ids.insert("plain", p.enqueue(NewJob::new("k", &1).unwrap()).await.unwrap());
    wait_until("100 ms on Redis's clock", SOON, || async {
        ctx.now_ms().await >= t0 + 100
    })
    .await;
    let oldest = ctx.stats().await.oldest_ready_age_ms;
    assert!(
        oldest >= 100,
        "the oldest ready job's age, from its id: {oldest} ms"
    );
    for (name, job) in [
        ("keyed", NewJob::new("k", &2).unwrap().key("acme")),
        (
            "unique",
            NewJob::new("k", &3)
                .unwrap()
                .unique_for(Duration::from_secs(3600)),
        ),
        ("traced", NewJob::new("k", &4).unwrap().trace_id("t-1")),
        (
            "delayed",
            NewJob::new("k", &5).unwrap().delay(Duration::from_millis(30)),
        ),
        ("high", NewJob::new("k", &6).unwrap().priority(Priority::High)),
        ("low", NewJob::new("k", &7).unwrap().priority(Priority::Low)),
        ("three", NewJob::new("k", &8).unwrap().max_attempts(3)),
        ("named", NewJob::new("k", &9).unwrap().id("named")),
        ("doomed", NewJob::new("doom", &10).unwrap()),
    ] {
        ids.insert(name, p.enqueue(job).await.unwrap());
    }
    let bulk = p.bulk("k").enqueue(100..400).await.unwrap();
    assert_eq!(bulk.enqueued, 300);
    let t1 = ctx.now_ms().await;

    // Compact where the form says everything; the full form elsewhere.
    let s = ctx.snapshot().await.by_id();
    for (name, id) in &ids {
        let env = &s.jobs[id];
        let compact = matches!(
            *name,
            "plain" | "keyed" | "unique" | "traced" | "delayed" | "doomed"
        );
        assert_eq!(env.starts_with(r#"{"id":""#), compact, "{name}: {env}");
        assert_eq!(env.starts_with(r#"{"attempt":0,"#), !compact, "{name}: {env}");
        if compact {
            let at = weir::queue::envelope::time_of_id(id).unwrap_or_else(|| panic!("{name}: {id}"));
            assert!(
                (t0..=t1).contains(&at),
                "{name}: enqueued at {at}, within {t0}..={t1}"
            );
        }
    }
    assert!(s.jobs[&ids["keyed"]].contains(r#","key":"acme""#));
    let compact = s.jobs.values().filter(|e| e.starts_with(r#"{"id":""#)).count();
    assert_eq!(compact, 306, "the bulk load's 300 and six of the ten");
    let listed = ctx.admin().job(&ids["unique"]).await.unwrap().unwrap().job;
    assert_eq!(listed.kind.as_deref(), Some("k"));
    assert_eq!((listed.attempt, listed.max_attempts), (Some(0), Some(5)));
    assert_eq!(listed.priority, Some("normal"));
    let at = listed
        .enqueued_at
        .expect("a compact job's enqueue time is known")
        .0;
    assert!((t0..=t1).contains(&at), "listed as enqueued at {at}");

    // Every job but the bulk's fails its first run; "doom" fails every run.
    let runs: Runs = Arc::default();
    let record = |runs: Runs, fail_all: bool| {
        handler_fn(move |job: weir::Job| {
            let mut r = runs.lock().unwrap();
            let mine = r.entry(job.id.clone()).or_default();
            mine.push((job.attempt, job.max_attempts, job.priority(), job.enqueued_at_ms));
            let n: u64 = job.payload().unwrap();
            let fail = fail_all || (n < 100 && job.attempt == 0);
            async move {
                match fail {
                    true => Err(JobError::retry("once more")),
                    false => Ok(()),
                }
            }
        })
    };
    let registry = Registry::new()
        .on("k", record(runs.clone(), false))
        .on("doom", record(runs.clone(), true));
    let c = start(&ctx, config(&ctx), registry);
    wait_stats(&ctx, "all done", |s| {
        s.dead == 1 && s.pending() == 0 && s.counters.get("acked") == Some(&309)
    })
    .await;
    c.stop().await;

    let runs = std::mem::take(&mut *runs.lock().unwrap());
    assert_eq!(runs.len(), 310, "every job ran");
    for (name, id) in &ids {
        let seen = &runs[id];
        let (max, prio) = match *name {
            "high" => (5, Priority::High),
            "low" => (5, Priority::Low),
            "three" => (3, Priority::Normal),
            _ => (5, Priority::Normal),
        };
        let tries = if *name == "doomed" { 5 } else { 2 };
        assert_eq!(seen.len(), tries, "{name}: {seen:?}");
        for (attempt, run) in seen.iter().enumerate() {
            assert_eq!(
                (run.0, run.1, run.2),
                (attempt as u32, max, prio),
                "{name}: {seen:?}"
            );
            assert!(
                (t0..=t1).contains(&run.3),
                "{name}: enqueued_at {} kept on every run",
                run.3
            );
        }
    }
    assert!(
        runs.values()
            .all(|r| r.iter().all(|run| (t0..=t1).contains(&run.3)))
    );
    let dead = ctx.admin().dead_jobs(0, 10).await.unwrap();
    assert_eq!(dead.len(), 1);
    let env = dead[0].envelope.clone().unwrap();
    assert!(
        env.starts_with(r#"{"attempt":5,"max_attempts":5,"priority":1,"enqueued_at":"#),
        "{env}"
    );
    assert!(
        env.contains(&format!(r#""id":"{}","kind":"doom""#, ids["doomed"])),
        "{env}"
    );
    assert_empty(&ctx, 1).await;
}

#[tokio::test]
async fn compact_jobs_spread_over_partitions_name_them_and_all_run() {
    let ctx = Ctx::new("compact-parts").await;
    let parts = weir::queue::partitions::Partitions::create(&mut ctx.c(), &ctx.queue, 3)
        .await
        .unwrap()
        .partitions;
    let p = weir::Producer::open(ctx.c(), &ctx.queue)
        .await
        .unwrap()
        .compact_envelopes(true);
    let t0 = ctx.now_ms().await;
    assert_eq!(p.bulk("k").enqueue(0..300).await.unwrap().enqueued, 300);
    for i in 0..3 {
        p.enqueue(NewJob::new("k", &i).unwrap().key(format!("tenant-{i}")))
            .await
            .unwrap();
    }
    let t1 = ctx.now_ms().await;
    let mut stored = 0;
    for lane in 0..parts.count() {
        let keys = parts.partition(lane);
        let items: Vec<String> = ctx
            .cmd(&["LRANGE", keys.ready(Priority::Normal), "0", "-1"])
            .await;
        for item in items {
            assert!(item.starts_with(r#"{"id":""#), "{item}");
            let v: serde_json::Value = serde_json::from_str(&item).unwrap();
            let id = v["id"].as_str().unwrap();
            assert_eq!(parts.of_id(id), lane, "{id} names its partition");
            let at = weir::queue::envelope::time_of_id(id).unwrap();
            assert!((t0..=t1).contains(&at), "{id}");
            stored += 1;
        }
    }
    assert_eq!(stored, 303);

    let mut cfg = config(&ctx);
    cfg.drain = true;
    let registry = Registry::new().on("k", handler_fn(|_| async { Ok(()) }));
    assert_eq!(start(&ctx, cfg, registry).join().await.acked, 303);
}
