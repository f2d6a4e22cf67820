//! A full Redis can be drained: with `maxmemory` reached under `noeviction`, the scripts
//! of a consumer's drain (fetch, settle, and the lease calls) still run, because they
//! free memory overall (`allow-oom`), while an enqueue is refused.

use crate::common::*;
use weir::Priority;
use weir::queue::functions;
use weir::queue::scripts::{self, EnqueueArg, Settle, StartMarks};

const VT: u64 = 30_000;
/// Each job's payload: big, so a few hundred jobs fill the headroom.
const PAD: usize = 8_000;

fn big_job(id: &str) -> EnqueueArg {
    let pad = "x".repeat(PAD);
    let envelope = format!(
        r#"{{"attempt":0,"max_attempts":3,"priority":1,"enqueued_at":{ENQUEUED_AT},"id":"{id}","kind":"k","payload":{{"pad":"{pad}"}}}}"#
    );
    EnqueueArg {
        id: id.to_owned(),
        priority: Priority::Normal,
        delay_ms: 0,
        run_at_ms: 0,
        envelope: envelope.into_bytes(),
        unique: true,
        unique_for_ms: 0,
    }
}

/// Settle call number `call` of a consumer, as its acker records it.
fn record(call: u64) -> scripts::CallRecord<'static> {
    scripts::CallRecord {
        tag: "c1.full",
        call,
        ttl_ms: 60_000,
    }
}

/// `acks` in settle call number `call`, recorded.
async fn settle_numbered(ctx: &Ctx, acks: &[Settle], call: u64) -> weir::Result<scripts::Settled> {
    let marks = StartMarks::default();
    scripts::settle_call(
        &mut ctx.c(),
        &ctx.keys,
        &[],
        acks,
        marks,
        None,
        Some(record(call)),
    )
    .await
}

async fn used_memory(ctx: &Ctx) -> u64 {
    let info: String = ctx.cmd(&["INFO", "memory"]).await;
    let line = info
        .lines()
        .find(|l| l.starts_with("used_memory:"))
        .expect("used_memory");
    line["used_memory:".len()..].trim().parse().unwrap()
}

/// Enqueues batches of big jobs, then single ones, until Redis refuses one for memory;
/// returns how many it took and the refusal.
async fn fill(ctx: &Ctx) -> (usize, weir::Error) {
    let (mut n, mut size) = (0, 20);
    for batch in 0..10_000 {
        let jobs: Vec<EnqueueArg> = (0..size).map(|i| big_job(&format!("j{batch}-{i}"))).collect();
        match scripts::enqueue(&mut ctx.c(), &ctx.keys, &jobs).await {
            Ok(refused) => {
                assert!(refused.is_empty(), "no duplicates: {refused:?}");
                n += jobs.len();
            }
            Err(_) if size > 1 => size = 1,
            Err(e) => return (n, e),
        }
    }
    panic!("Redis never refused a write");
}

#[tokio::test]
async fn a_full_redis_drains_and_refuses_enqueues() {
    let ctx = Ctx::private("oom").await;
    let base = used_memory(&ctx).await;
    let cap = base + 4 * 1024 * 1024;
    let _: () = ctx
        .cmd(&["CONFIG", "SET", "maxmemory-policy", "noeviction"])
        .await;
    let _: () = ctx.cmd(&["CONFIG", "SET", "maxmemory", &cap.to_string()]).await;

    functions::load(&mut ctx.c(), false)
        .await
        .expect("the library loads");
    let (queued, refusal) = fill(&ctx).await;
    assert!(queued > 100, "only {queued} jobs fit");
    assert!(
        refusal.to_string().contains("OOM"),
        "refused for memory: {refusal}"
    );
    // (Redis counts a call's own arguments in the memory it checks: the refusal can come
    // just under the cap.)
    let full = used_memory(&ctx).await;
    assert!(full > cap - cap / 10, "Redis is at maxmemory ({full}, cap {cap})");
    // Still full: another enqueue is refused, and changes nothing.
    let before = ctx.snapshot().await;
    let again = scripts::enqueue(&mut ctx.c(), &ctx.keys, &[big_job("late")]).await;
    assert!(again.is_err_and(|e| e.to_string().contains("OOM")));
    assert_eq!(ctx.snapshot().await, before);

    // The drain: fetch, extend, release, settle while over maxmemory.
    let mut drained = 0;
    let mut released = false;
    loop {
        let f = scripts::fetch(&mut ctx.c(), &ctx.keys, 50, VT)
            .await
            .expect("fetch runs when full");
        if f.jobs.is_empty() {
            break;
        }
        let token = f.deadline_ms;
        let mut held: Vec<(String, u64)> = f.jobs.iter().map(|j| (j.name.clone(), token)).collect();
        let pairs: Vec<(&str, u64)> = held.iter().map(|(id, t)| (id.as_str(), *t)).collect();
        let lost = scripts::extend(&mut ctx.c(), &ctx.keys, VT, &pairs)
            .await
            .expect("extend runs when full");
        assert!(lost.1.is_empty(), "extend kept every lease: {lost:?}");
        // The library's function too (its first write, ZADD, adds memory).
        let mut fcall = redis::cmd("FCALL");
        fcall
            .arg("weir_extend")
            .arg(ctx.keys.all().len())
            .arg(ctx.keys.all());
        let lost: Vec<redis::Value> = fcall
            .arg(VT)
            .arg(&held[0].0)
            .arg(token)
            .query_async(&mut ctx.c())
            .await
            .expect("weir_extend runs when full");
        assert_eq!(lost.len(), 1, "only the deadline: {lost:?}");
        if !released {
            let (id, token) = held.pop().unwrap();
            let missed = scripts::release(&mut ctx.c(), &ctx.keys, &[(&id, token, Priority::Normal)])
                .await
                .expect("release runs when full");
            assert!(missed.is_empty());
            released = true;
        }
        // Start marks alone: a settle whose first write adds memory.
        let marks = StartMarks {
            tag: "c1",
            started: &held,
            ended: &[],
        };
        scripts::settle_marked(&mut ctx.c(), &ctx.keys, &[], marks)
            .await
            .expect("marks when full");
        let acks: Vec<Settle> = held
            .iter()
            .map(|(id, token)| Settle::Ack {
                id: id.clone(),
                token: *token,
            })
            .collect();
        // (numbered and recorded, as a consumer's: the record is written when full too)
        let s = settle_numbered(&ctx, &acks, drained as u64)
            .await
            .expect("settle runs when full");
        assert!(s.missed.is_empty(), "every ack applied: {s:?}");
        drained += acks.len();
    }
    assert_eq!(drained, queued, "every queued job was drained");
    let after = used_memory(&ctx).await;
    assert!(after < cap, "the drain freed memory: {after} >= {cap}");
    assert_eq!(ctx.stats().await.counters["acked"], queued as u64);
    // With room again, enqueues are taken.
    scripts::enqueue(&mut ctx.c(), &ctx.keys, &[big_job("late")])
        .await
        .expect("enqueue after the drain");
}

/// Acks of inline jobs travel as plain commands in MULTI/EXEC (`ack_inline`), whose
/// counter bump a full Redis refuses: they go through the settle script then.
#[tokio::test]
async fn inline_acks_of_a_full_redis_are_applied() {
    let ctx = Ctx::private("oom-inline").await;
    let cap = used_memory(&ctx).await + 2 * 1024 * 1024;
    let _: () = ctx
        .cmd(&["CONFIG", "SET", "maxmemory-policy", "noeviction"])
        .await;
    let _: () = ctx.cmd(&["CONFIG", "SET", "maxmemory", &cap.to_string()]).await;
    let pad = "x".repeat(PAD);
    let mut queued = 0;
    for batch in 0..10_000 {
        assert!(batch < 9_999, "Redis never refused a write");
        let jobs =
            (0..10).map(|n| weir::NewJob::new("k", &serde_json::json!({ "n": n, "pad": pad })).unwrap());
        match ctx.producer().enqueue_bulk(jobs).await {
            Ok(r) => queued += r.enqueued,
            Err(_) => break,
        }
    }
    let f = scripts::fetch(&mut ctx.c(), &ctx.keys, 10_000, VT).await.unwrap();
    assert_eq!(f.jobs.len() as u64, queued);
    assert!(f.jobs.iter().all(|j| j.is_inline()));
    let acks = crate::acks_of(&f);
    let s = scripts::ack_inline_call(&mut ctx.c(), &ctx.keys, &acks, &[], &[], Some(record(1)))
        .await
        .expect("acks when full");
    assert_eq!(s.missed_inline, 0);
    let snap = ctx.snapshot().await;
    assert!(snap.lease.is_empty(), "every lease ended");
    assert_eq!(snap.counters["acked"], queued);
    // The call's record was written with it, when full: sent again, it changes nothing.
    let again = settle_numbered(&ctx, &acks, 1)
        .await
        .expect("the retry when full");
    assert_eq!(again, scripts::Settled::default(), "the retry finds the record");
    assert_eq!(ctx.snapshot().await.counters["acked"], queued);
    assert!(used_memory(&ctx).await < cap, "the acks freed memory");
}
