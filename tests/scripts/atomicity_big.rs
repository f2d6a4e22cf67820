//! No script fails on size: every `unpack` of a set, a list, a reply or ARGV is chunked
//! (Lua's unpack fails near 8,000 values), so calls over more than 10,000 members or
//! arguments succeed whole (see atomicity.rs for the other ways a script could fail).

use crate::atomicity::{VT, new_job};
use crate::common::*;
use std::time::Duration;
use weir::queue::keys::QueueKeys;
use weir::queue::scripts::{self, Settle, StartMarks};
use weir::{Conn, DeferralBudget, Priority};

const BIG: usize = 10_001;

fn ids(prefix: &str) -> Vec<String> {
    (0..BIG).map(|i| format!("{prefix}{i}")).collect()
}

/// Runs `cmd key args...` in chunks of 1,000 values (`per` values make one member).
async fn fill(c: &mut Conn, cmd: &str, key: &str, values: &[String], per: usize) {
    for chunk in values.chunks(1000 * per) {
        let _: redis::Value = redis::cmd(cmd).arg(key).arg(chunk).query_async(c).await.unwrap();
    }
}

fn scored(items: &[String], score: u64) -> Vec<String> {
    items
        .iter()
        .flat_map(|i| [score.to_string(), i.clone()])
        .collect()
}

fn with_envs(items: &[String]) -> Vec<String> {
    items.iter().flat_map(|i| [i.clone(), env(i, 0, 3, 1)]).collect()
}

async fn count(c: &mut Conn, cmd: &str, key: &str) -> usize {
    redis::cmd(cmd).arg(key).query_async(c).await.unwrap()
}

async fn fresh(ctx: &Ctx) -> (Conn, QueueKeys) {
    (ctx.c(), ctx.other_queue("big").1)
}

#[tokio::test]
async fn settle_of_more_than_10000_acks_and_marks_applies_whole() {
    let ctx = Ctx::new("big-settle").await;
    let (mut c, k) = fresh(&ctx).await;
    let (stored, inline): (Vec<String>, Vec<String>) =
        (ids("s"), ids("i").iter().map(|i| env(i, 0, 3, 1)).collect());
    let marked = ids("m");
    fill(&mut c, "HSET", k.jobs(), &with_envs(&stored), 2).await;
    for items in [&stored, &inline, &marked] {
        fill(&mut c, "ZADD", k.lease(), &scored(items, FUTURE), 2).await;
    }
    let tokens: Vec<String> = inline
        .iter()
        .flat_map(|e| [e.clone(), FUTURE.to_string()])
        .collect();
    fill(&mut c, "HSET", k.lease_tokens(), &tokens, 2).await;
    let mut acks: Vec<Settle> = stored
        .iter()
        .map(|id| Settle::Ack {
            id: id.clone(),
            token: FUTURE,
        })
        .collect();
    acks.extend(inline.iter().map(|e| Settle::Ack {
        id: e.clone(),
        token: FUTURE,
    }));
    let started: Vec<(String, u64)> = marked.iter().map(|m| (m.clone(), FUTURE)).collect();
    let marks = StartMarks {
        tag: "c1",
        started: &started,
        ended: &[],
    };
    let s = scripts::settle_marked(&mut c, &k, &acks, marks).await.unwrap();
    assert!(s.missed.is_empty() && s.missed_inline == 0, "{s:?}");
    assert_eq!(
        count(&mut c, "ZCARD", k.lease()).await,
        BIG,
        "only the marked leases are left"
    );
    assert_eq!(count(&mut c, "HLEN", k.started()).await, BIG);
    assert_eq!(count(&mut c, "HLEN", k.jobs()).await, 0);
    assert_eq!(count(&mut c, "HLEN", k.lease_tokens()).await, 0);
}

#[tokio::test]
async fn fetch_reclaim_extend_and_release_of_more_than_10000_apply_whole() {
    let ctx = Ctx::new("big-lease").await;
    let (mut c, k) = fresh(&ctx).await;
    let (ready, due) = (ids("r"), ids("d"));
    fill(&mut c, "HSET", k.jobs(), &with_envs(&ready), 2).await;
    fill(&mut c, "HSET", k.jobs(), &with_envs(&due), 2).await;
    fill(&mut c, "RPUSH", &k.all()[1], &ready, 1).await;
    fill(&mut c, "ZADD", &k.all()[4], &scored(&due, 1_000), 2).await;
    let f = scripts::fetch(&mut c, &k, 3 * BIG, VT).await.unwrap();
    assert_eq!(f.jobs.len(), 2 * BIG, "every ready and due job, leased");
    let held: Vec<(&str, u64)> = f.jobs.iter().map(|j| (j.name.as_str(), f.deadline_ms)).collect();
    let (_, lost) = scripts::extend(&mut c, &k, VT, &held).await.unwrap();
    assert!(lost.is_empty());
    assert_eq!(count(&mut c, "HLEN", k.lease_tokens()).await, 2 * BIG);
    let back: Vec<(&str, u64, Priority)> = held.iter().map(|(i, t)| (*i, *t, Priority::Normal)).collect();
    assert!(scripts::release(&mut c, &k, &back).await.unwrap().is_empty());
    assert_eq!(count(&mut c, "LLEN", &k.all()[1]).await, 2 * BIG);
    assert_eq!(count(&mut c, "ZCARD", k.lease()).await, 0);
    // Leased again, expired, half of them marked as started: reclaimed in one call.
    let f = scripts::fetch(&mut c, &k, 3 * BIG, VT).await.unwrap();
    let names: Vec<String> = f.jobs.iter().map(|j| j.name.clone()).collect();
    fill(&mut c, "ZADD", k.lease(), &scored(&names, PAST), 2).await;
    let marks: Vec<String> = names[..BIG]
        .iter()
        .flat_map(|n| [n.clone(), "c1".into()])
        .collect();
    fill(&mut c, "HSET", k.started(), &marks, 2).await;
    let r = scripts::reclaim(&mut c, &k, 3 * BIG, DeferralBudget::default())
        .await
        .unwrap();
    assert_eq!((r.returned, r.suspects), (BIG as u64, BIG as u64));
    assert_eq!(count(&mut c, "ZCARD", k.lease()).await, 0);
}

#[tokio::test]
async fn enqueue_and_operator_calls_over_more_than_10000_apply_whole() {
    let ctx = Ctx::new("big-admin").await;
    let (mut c, k) = fresh(&ctx).await;
    let jobs: Vec<_> = ids("e").iter().map(|i| new_job(i, Priority::Normal)).collect();
    assert!(scripts::enqueue(&mut c, &k, &jobs).await.unwrap().is_empty());
    assert_eq!(count(&mut c, "LLEN", &k.all()[1]).await, BIG);
    let all = ids("e");
    let deleted = scripts::jobs_delete(&mut c, &k, false, &all).await.unwrap();
    assert!(deleted.iter().all(|(_, s)| s == "ready"));
    assert_eq!(count(&mut c, "HLEN", k.jobs()).await, 0);

    let dead = ids("x");
    fill(&mut c, "HSET", k.jobs(), &with_envs(&dead), 2).await;
    fill(&mut c, "ZADD", &k.all()[8], &scored(&dead, 10), 2).await;
    fill(&mut c, "HSET", &k.all()[9], &with_envs(&dead), 2).await;
    let (requeued, missed) = scripts::dlq_requeue(&mut c, &k, 3 * BIG, &[]).await.unwrap();
    assert_eq!((requeued, missed.len()), (BIG as u64, 0));
    fill(&mut c, "ZADD", &k.all()[8], &scored(&dead, 10), 2).await;
    assert_eq!(scripts::dlq_purge(&mut c, &k, 3 * BIG).await.unwrap(), BIG as u64);
    fill(&mut c, "HSET", k.jobs(), &with_envs(&dead), 2).await;
    fill(&mut c, "ZADD", &k.all()[8], &scored(&dead, 10), 2).await;
    let step = scripts::dlq_bulk(&mut c, &k, false, 0, 3 * BIG, 0, "")
        .await
        .unwrap();
    assert_eq!(step.acted, BIG as u64);

    let names: Vec<String> = (0..BIG).map(|i| format!("f{i}")).collect();
    let fields: Vec<(&str, String)> = names.iter().map(|n| (n.as_str(), String::new())).collect();
    scripts::worker_beat(&mut c, &k, "w1", 60_000, &fields)
        .await
        .unwrap();
    assert_eq!(count(&mut c, "HLEN", &k.worker("w1")).await, BIG + 1);
    let shares: Vec<(String, usize)> = ids("t").into_iter().map(|t| (t, 1)).collect();
    let n = scripts::key_shares(
        &mut c,
        &k,
        "c1",
        Duration::from_secs(60).as_millis() as u64,
        &shares,
    )
    .await;
    assert_eq!(n.unwrap(), BIG as u64);
}
