//! Batches far beyond Lua's `unpack` limit (about 8,000 values) go through every script
//! that takes or returns a list.

use crate::N;
use crate::common::*;
use std::time::Duration;
use weir::Priority;
use weir::queue::retry_policy::DeferralBudget;
use weir::queue::scripts::{self, EnqueueArg, Settle};

const BIG: usize = 10_000;

fn ids() -> Vec<String> {
    (0..BIG).map(|i| format!("j{i:05}")).collect()
}

#[tokio::test]
async fn ten_thousand_jobs_in_one_call_each() {
    let ctx = Ctx::new("big").await;
    let args = enqueue_all(&ctx).await;
    expire_and_reclaim(&ctx).await;
    extend_and_dead_letter_past_the_cap(&ctx).await;
    requeue_the_dead(&ctx).await;
    release_and_ack(&ctx, &args).await;
    dead_letter_and_purge(&ctx, &args).await;
}

/// Enqueues [`BIG`] jobs with chosen ids in one call; returns them for later rounds.
async fn enqueue_all(ctx: &Ctx) -> Vec<EnqueueArg> {
    let (mut c, k) = (ctx.c(), &ctx.keys);
    let ids = ids();
    let args: Vec<EnqueueArg> = ids
        .iter()
        .map(|id| EnqueueArg {
            id: id.clone(),
            priority: Priority::Normal,
            delay_ms: 0,
            run_at_ms: 0,
            envelope: env(id, 0, 1, 1).into_bytes(),
            unique: true,
            unique_for_ms: 0,
        })
        .collect();
    assert!(scripts::enqueue(&mut c, k, &args).await.unwrap().is_empty());
    assert_eq!(ctx.snapshot().await.ready[N], ids, "one RPUSH order, all 10,000");
    args
}

/// Fetches all with a short lease, lets it expire, reclaims all in one call (none had
/// started: all back to ready, uncharged).
async fn expire_and_reclaim(ctx: &Ctx) {
    let (mut c, k) = (ctx.c(), &ctx.keys);
    let f = scripts::fetch(&mut c, k, BIG, 100).await.unwrap();
    assert_eq!(f.jobs.len(), BIG);
    let t = f.deadline_ms;
    wait_until("leases to expire", Duration::from_secs(10), || {
        let mut c = ctx.c();
        async move { redis_now_ms(&mut c).await > t }
    })
    .await;
    let r = scripts::reclaim(&mut c, k, BIG, DeferralBudget::default())
        .await
        .unwrap();
    assert_eq!((r.returned, r.suspects, r.dead), (BIG as u64, 0, 0));
}

/// Fetches all again, extends all, marks all started, and sends all to the dead letters
/// through a last retry, with a cap that trims most: 1,000 entries per call, the rest
/// over reclaim calls.
async fn extend_and_dead_letter_past_the_cap(ctx: &Ctx) {
    let (mut c, k) = (ctx.c(), &ctx.keys);
    let f = scripts::fetch(&mut c, k, BIG, 60_000).await.unwrap();
    assert_eq!(f.jobs.len(), BIG);
    assert!(
        f.jobs
            .iter()
            .all(|j| j.envelope().starts_with(br#"{"attempt":0,"#))
    );
    let token = f.deadline_ms;
    let held: Vec<(&str, u64)> = f.jobs.iter().map(|j| (j.name.as_str(), token)).collect();
    let (_, lost) = scripts::extend(&mut c, k, 60_000, &held).await.unwrap();
    assert!(lost.is_empty());
    let started: Vec<(String, u64)> = f.jobs.iter().map(|j| (j.name.clone(), token)).collect();
    let marks = scripts::StartMarks {
        tag: "c1",
        started: &started,
        ended: &[],
    };
    let missed = scripts::settle_marked(&mut c, k, &[], marks).await.unwrap();
    assert!(missed.missed.is_empty());
    assert_eq!(ctx.snapshot().await.started.len(), BIG, "every start marked");
    let items: Vec<Settle> = f
        .jobs
        .iter()
        .map(|j| Settle::Retry {
            id: j.name.clone(),
            token,
            priority: Priority::Normal,
            delay_ms: 0,
            error: "last".into(),
        })
        .collect();
    let _: () = redis::cmd("HSET")
        .arg(k.settings())
        .arg("dead_cap")
        .arg(1_000)
        .query_async(&mut c)
        .await
        .unwrap();
    assert!(
        scripts::settle(&mut c, k, &items)
            .await
            .unwrap()
            .missed
            .is_empty()
    );
    assert!(
        ctx.snapshot().await.started.is_empty(),
        "the marks end with the leases"
    );
    let s = ctx.stats().await;
    assert_eq!((s.dead, s.pending()), (9_000, 0), "one bounded trim step");
    assert_eq!(s.counters.get("trimmed"), Some(&1_000));
    for _ in 0..8 {
        scripts::reclaim(&mut c, k, BIG, DeferralBudget::default())
            .await
            .unwrap();
    }
    let s = ctx.stats().await;
    assert_eq!((s.dead, s.pending()), (1_000, 0));
    assert_eq!(s.counters.get("trimmed"), Some(&9_000));
    let _: () = redis::cmd("DEL")
        .arg(k.settings())
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(
        ctx.snapshot().await.jobs.len(),
        1_000,
        "trimmed envelopes are deleted"
    );
}

/// Requeues the 1,000 dead jobs left by the cap, by id.
async fn requeue_the_dead(ctx: &Ctx) {
    let (mut c, k) = (ctx.c(), &ctx.keys);
    let dead_ids: Vec<String> = ctx.snapshot().await.dead.into_iter().map(|(id, _)| id).collect();
    assert_eq!(
        scripts::dlq_requeue(&mut c, k, 1, &dead_ids).await.unwrap(),
        (1_000, vec![])
    );
    assert_eq!(ctx.stats().await.ready_total(), 1_000);
}

/// A second round at full size: enqueues the trimmed 9,000 again, fetches, releases, acks.
async fn release_and_ack(ctx: &Ctx, args: &[EnqueueArg]) {
    let (mut c, k) = (ctx.c(), &ctx.keys);
    assert!(scripts::enqueue(&mut c, k, args).await.unwrap().len() == 1_000);
    let f = scripts::fetch(&mut c, k, BIG, 60_000).await.unwrap();
    assert_eq!(f.jobs.len(), BIG);
    let held: Vec<(&str, u64, Priority)> = f
        .jobs
        .iter()
        .map(|j| (j.name.as_str(), f.deadline_ms, Priority::Normal))
        .collect();
    assert!(scripts::release(&mut c, k, &held).await.unwrap().is_empty());
    let f = scripts::fetch(&mut c, k, BIG, 60_000).await.unwrap();
    let acks = crate::acks_of(&f);
    assert_eq!(acks.len(), BIG);
    assert!(scripts::settle(&mut c, k, &acks).await.unwrap().missed.is_empty());
    let after = ctx.snapshot().await;
    assert!(after.jobs.is_empty() && after.lease.is_empty() && after.ready.iter().all(Vec::is_empty));
    assert_eq!(after.counters.get("acked"), Some(&(BIG as u64)));
}

/// Dead-letters [`BIG`] jobs and purges them in one call.
async fn dead_letter_and_purge(ctx: &Ctx, args: &[EnqueueArg]) {
    let (mut c, k) = (ctx.c(), &ctx.keys);
    let buried: Vec<Settle> = {
        assert!(scripts::enqueue(&mut c, k, args).await.unwrap().is_empty());
        let f = scripts::fetch(&mut c, k, BIG, 60_000).await.unwrap();
        f.jobs
            .iter()
            .map(|j| Settle::Dead {
                id: j.name.clone(),
                token: f.deadline_ms,
                reason: "r".into(),
            })
            .collect()
    };
    assert!(
        scripts::settle(&mut c, k, &buried)
            .await
            .unwrap()
            .missed
            .is_empty()
    );
    assert_eq!(scripts::dlq_purge(&mut c, k, BIG).await.unwrap(), BIG as u64);
    let after = ctx.snapshot().await;
    assert!(after.jobs.is_empty() && after.dead.is_empty() && after.errors.is_empty());
}
