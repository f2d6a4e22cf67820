//! Batch leases (lib.lua's batch leases; docs/batch-leases.md): a fetch that leases its jobs
//! as one entry, acked whole by one settle group, split into per-job leases for anything
//! else, reclaimed job by job once expired, and seen by the calls that count and find jobs.

use crate::N;
use crate::common::*;
use weir::queue::retry_policy::DeferralBudget;
use weir::queue::scripts::{self, BatchAck, Fetched, Settle};

const VT: u64 = 30_000;

/// Two inline jobs around one stored by id, ready at normal priority.
fn three() -> (String, String, State) {
    let (a, c) = (env("a", 0, 3, 1), env("c", 0, 3, 1));
    let s = State::default().ready(N, &[&a, "b", &c]).job("b", 0, 3, 1);
    (a, c, s)
}

async fn fetch_batch(ctx: &Ctx, name: &str) -> Fetched {
    scripts::fetch_batch(&mut ctx.c(), &ctx.keys, 10, VT, false, Some(name))
        .await
        .unwrap()
}

async fn lease_count(ctx: &Ctx) -> (u64, u64) {
    let lease: u64 = ctx.cmd(&["ZCARD", ctx.keys.lease()]).await;
    let batches: u64 = ctx.cmd(&["ZCARD", &ctx.keys.batches()]).await;
    (lease, batches)
}

/// The batch ack of every job of `f`'s batch.
async fn ack_whole(ctx: &Ctx, f: &Fetched) -> scripts::Settled {
    scripts::settle_batches(
        &mut ctx.c(),
        &ctx.keys,
        &[ack_of(f)],
        &[],
        Default::default(),
        None,
    )
    .await
    .unwrap()
}

fn ack_of(f: &Fetched) -> BatchAck {
    let b = f.batch.as_ref().expect("leased as a batch");
    BatchAck {
        name: b.name.clone(),
        token: f.deadline_ms,
        ids: b.ids.clone(),
    }
}

#[tokio::test]
async fn a_batch_is_one_lease_entry_and_its_ack_removes_it_whole() {
    let ctx = Ctx::new("batch-ack").await;
    let (a, c, before) = three();
    seed(&mut ctx.c(), &ctx.keys, &before).await;
    let f = fetch_batch(&ctx, "t:1").await;
    let names: Vec<&str> = f.jobs.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(names, [a.as_str(), "b", c.as_str()], "in ready order");
    assert_eq!(
        f.jobs[1].envelope(),
        env("b", 0, 3, 1).as_bytes(),
        "the id's envelope read after"
    );
    let b = f.batch.clone().expect("leased as a batch");
    assert_eq!(
        (b.name.as_str(), b.len, b.ids.clone()),
        ("t:1", 3, vec!["b".to_string()])
    );
    assert_eq!(
        lease_count(&ctx).await,
        (0, 1),
        "one entry for the batch, none per job"
    );
    let s = ctx.snapshot().await;
    assert!(s.ready.iter().all(Vec::is_empty));
    assert_eq!(s.counters.get("fetched").copied(), Some(3));
    assert_eq!(
        ctx.stats().await.in_flight,
        3,
        "stats count the batch's jobs as leased"
    );

    let settled = ack_whole(&ctx, &f).await;
    assert!(settled.missed_batches.is_empty());
    assert_eq!(lease_count(&ctx).await, (0, 0));
    let exists: u64 = ctx.cmd(&["EXISTS", &ctx.keys.batch("t:1")]).await;
    assert_eq!(exists, 0, "the batch's list goes with it");
    let s = ctx.snapshot().await;
    assert!(
        s.jobs.is_empty(),
        "the stored job's record goes with the ack: {:?}",
        s.jobs
    );
    assert_eq!(s.counters.get("acked").copied(), Some(3));

    let again = ack_whole(&ctx, &f).await;
    assert_eq!(
        again.missed_batches,
        ["t:1"],
        "a second ack of the batch is missed"
    );
    assert_eq!(ctx.snapshot().await.counters.get("acked").copied(), Some(3));
}

#[tokio::test]
async fn a_split_batch_leases_each_job_at_the_batch_token() {
    let ctx = Ctx::new("batch-split").await;
    let (a, c, before) = three();
    seed(&mut ctx.c(), &ctx.keys, &before).await;
    let f = fetch_batch(&ctx, "t:1").await;
    let missed = scripts::split(&mut ctx.c(), &ctx.keys, &[("t:1", f.deadline_ms)])
        .await
        .unwrap();
    assert!(missed.is_empty());
    let s = ctx.snapshot().await;
    let mut lease = s.lease.clone();
    lease.sort();
    let mut want = vec![
        (a.clone(), f.deadline_ms),
        ("b".to_string(), f.deadline_ms),
        (c.clone(), f.deadline_ms),
    ];
    want.sort();
    assert_eq!(lease, want);
    assert_eq!(lease_count(&ctx).await, (3, 0));
    // the batch's ack now misses; each job is settled with the batch's token
    let settled = ack_whole(&ctx, &f).await;
    assert_eq!(settled.missed_batches, ["t:1"]);
    let items = vec![
        Settle::Ack {
            id: a.clone(),
            token: f.deadline_ms,
        },
        Settle::Retry {
            id: "b".into(),
            token: f.deadline_ms,
            priority: weir::Priority::Normal,
            delay_ms: 0,
            error: "boom".into(),
        },
        Settle::Ack {
            id: c.clone(),
            token: f.deadline_ms,
        },
    ];
    let settled = scripts::settle(&mut ctx.c(), &ctx.keys, &items).await.unwrap();
    assert!(
        settled.missed.is_empty() && settled.missed_inline == 0,
        "{settled:?}"
    );
    let s = ctx.snapshot().await;
    assert!(s.lease.is_empty());
    assert_eq!(s.delayed[N].len(), 1, "the retry waits");
    let stale = scripts::split(&mut ctx.c(), &ctx.keys, &[("t:1", f.deadline_ms)])
        .await
        .unwrap();
    assert_eq!(stale, ["t:1"], "a batch split already is not held");
}

#[tokio::test]
async fn an_expired_batch_is_reclaimed_job_by_job() {
    let ctx = Ctx::new("batch-reclaim").await;
    let (_, _, before) = three();
    seed(&mut ctx.c(), &ctx.keys, &before).await;
    let f = fetch_batch(&ctx, "t:1").await;
    let _: () = ctx.cmd(&["ZADD", &ctx.keys.batches(), "XX", "1000", "t:1"]).await;
    let r = scripts::reclaim(&mut ctx.c(), &ctx.keys, 100, DeferralBudget::default())
        .await
        .unwrap();
    assert_eq!(r.returned, 3, "{r:?}");
    assert_eq!(lease_count(&ctx).await, (0, 0));
    let s = ctx.snapshot().await;
    assert_eq!(s.ready[N].len(), 3, "back to ready, not started so not charged");
    let settled = ack_whole(&ctx, &f).await;
    assert_eq!(
        settled.missed_batches,
        ["t:1"],
        "the owner's late ack applies nothing"
    );
    assert_eq!(ctx.snapshot().await.counters.get("acked"), None);
}

#[tokio::test]
async fn limits_that_read_each_job_lease_per_job_and_a_global_concurrency_counts_batches() {
    let ctx = Ctx::new("batch-limits").await;
    let (_, _, before) = three();
    seed(&mut ctx.c(), &ctx.keys, &before).await;
    let _: () = ctx
        .cmd(&[
            "RPUSH",
            ctx.keys.ready(weir::Priority::Normal),
            &env("d", 0, 3, 1),
        ])
        .await;
    // two jobs in a batch, then a global concurrency of 3: one more job may be leased
    let f = scripts::fetch_batch(&mut ctx.c(), &ctx.keys, 2, VT, false, Some("t:1"))
        .await
        .unwrap();
    assert_eq!(f.batch.as_ref().map(|b| b.len), Some(2));
    let _: () = ctx
        .cmd(&["HSET", &ctx.keys.settings(), "global_concurrency", "3"])
        .await;
    let g = fetch_batch(&ctx, "t:2").await;
    assert!(
        g.batch.is_none(),
        "under a global concurrency jobs are leased one by one"
    );
    assert_eq!(g.jobs.len(), 1, "the batch's two jobs count against the limit");
    assert!(g.global.cut_by_concurrency);
    // kept completed jobs: per job too
    let _: () = ctx
        .cmd(&["HDEL", &ctx.keys.settings(), "global_concurrency"])
        .await;
    let _: () = ctx
        .cmd(&["HSET", &ctx.keys.settings(), "keep_completed_count", "10"])
        .await;
    let h = fetch_batch(&ctx, "t:3").await;
    assert!(h.batch.is_none() && h.jobs.len() == 1);
    // and a batch acked while completed jobs are kept is split, for its jobs to be kept
    let settled = ack_whole(&ctx, &f).await;
    assert_eq!(settled.missed_batches, ["t:1"]);
    assert_eq!(
        lease_count(&ctx).await,
        (4, 0),
        "the batch's two jobs leased one by one now"
    );
}

/// A fetch whose batch name is in use (names are never reused by weir's consumers) leases
/// its jobs one by one: a batch list written over would lose the live batch's jobs.
#[tokio::test]
async fn a_batch_name_in_use_is_never_written_over() {
    let ctx = Ctx::new("batch-name").await;
    let (a, c, before) = three();
    seed(&mut ctx.c(), &ctx.keys, &before).await;
    let f = scripts::fetch_batch(&mut ctx.c(), &ctx.keys, 2, VT, false, Some("t:1"))
        .await
        .unwrap();
    assert_eq!(f.batch.as_ref().map(|b| b.len), Some(2));
    let g = fetch_batch(&ctx, "t:1").await;
    assert!(g.batch.is_none(), "the name is in use: no batch");
    let names: Vec<&str> = g.jobs.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(names, [c.as_str()], "the job left, leased on its own");
    let held: Vec<String> = ctx.cmd(&["LRANGE", &ctx.keys.batch("t:1"), "0", "-1"]).await;
    assert_eq!(
        held,
        [a.clone(), "b".to_string()],
        "the first batch's jobs are intact"
    );
    assert_eq!(lease_count(&ctx).await, (1, 1));
    ack_whole(&ctx, &f).await;
    assert_eq!(lease_count(&ctx).await, (1, 0));
}

#[tokio::test]
async fn operators_find_batched_jobs_and_a_delete_splits_their_batch() {
    let ctx = Ctx::new("batch-inspect").await;
    let (a, c, before) = three();
    seed(&mut ctx.c(), &ctx.keys, &before).await;
    let f = fetch_batch(&ctx, "t:1").await;
    for id in ["a", "b"] {
        let shown = scripts::job_show(&mut ctx.c(), &ctx.keys, id).await.unwrap();
        assert_eq!(shown.state, "in_flight", "job {id}");
        assert_eq!(shown.score, Some(f.deadline_ms), "job {id}");
    }
    let out = scripts::jobs_delete(&mut ctx.c(), &ctx.keys, false, &["b".to_string()])
        .await
        .unwrap();
    assert_eq!(out, [("b".to_string(), "in_flight".to_string())]);
    let s = ctx.snapshot().await;
    let mut lease: Vec<String> = s.lease.iter().map(|(m, _)| m.clone()).collect();
    lease.sort();
    let mut want = vec![a.clone(), c.clone()];
    want.sort();
    assert_eq!(lease, want, "the batch was split; the deleted job has no lease");
    assert_eq!(s.counters.get("deleted").copied(), Some(1));
    let settled = ack_whole(&ctx, &f).await;
    assert_eq!(
        settled.missed_batches,
        ["t:1"],
        "so the deleted job is never counted as acked"
    );
}

#[tokio::test]
async fn in_flight_pages_list_the_jobs_of_batches_after_the_other_leases() {
    let ctx = Ctx::new("batch-page").await;
    let (a, c, before) = three();
    seed(
        &mut ctx.c(),
        &ctx.keys,
        &before.lease(&[("x", FUTURE)]).job("x", 0, 3, 1),
    )
    .await;
    let f = fetch_batch(&ctx, "t:1").await;
    assert_eq!(f.batch.as_ref().map(|b| b.len), Some(3));
    let mut ids = Vec::new();
    let mut offsets = [0, 0, 0];
    // pages of two: the cursor crosses from the lease set into the batch
    loop {
        let page = scripts::jobs_page(&mut ctx.c(), &ctx.keys, "in_flight", offsets, 2, 2, "", "")
            .await
            .unwrap();
        for e in &page.entries {
            let deadline = if e.id == "x" { FUTURE } else { f.deadline_ms };
            assert_eq!(e.score, Some(deadline), "job {}", e.id);
            assert!(e.envelope.is_some(), "job {}", e.id);
        }
        ids.extend(page.entries.into_iter().map(|e| e.id));
        if !page.more {
            break;
        }
        offsets = page.offsets;
    }
    assert_eq!(ids, ["x", "a", "b", "c"]);
    let _ = (a, c);
}

#[tokio::test]
async fn a_user_refused_sort_leases_its_jobs_one_by_one_and_loses_none() {
    let ctx = Ctx::private("batch-acl").await;
    let (_, _, before) = three();
    seed(&mut ctx.c(), &ctx.keys, &before).await;
    // the worker role of an older weir had no SORT (docs/security.md)
    let _: () = ctx
        .cmd(&[
            "ACL",
            "SETUSER",
            "old-worker",
            "reset",
            "on",
            ">pw",
            "~*",
            "&*",
            "+@all",
            "-sort",
        ])
        .await;
    let url = format!("redis://old-worker:pw@127.0.0.1:{}", ctx.server.port());
    let mut old = weir::Redis::open(&url).unwrap().connect().await.unwrap();
    let f = scripts::fetch_batch(&mut old, &ctx.keys, 10, VT, false, Some("t:1"))
        .await
        .unwrap();
    assert!(f.batch.is_none(), "no batch without SORT");
    assert_eq!(f.jobs.len(), 3);
    assert_eq!(lease_count(&ctx).await, (3, 0), "every job leased on its own");
    let exists: u64 = ctx.cmd(&["EXISTS", &ctx.keys.batch("t:1")]).await;
    assert_eq!(exists, 0);
    assert!(ctx.snapshot().await.ready.iter().all(Vec::is_empty));
}

#[tokio::test]
async fn a_batch_fetch_after_a_script_flush_loads_the_script_and_reads_its_batch() {
    let ctx = Ctx::private("batch-noscript").await;
    let (a, c, before) = three();
    seed(&mut ctx.c(), &ctx.keys, &before).await;
    // the batch's LRANGE rides behind the script call; without the script, nothing ran
    let _: () = ctx.cmd(&["SCRIPT", "FLUSH"]).await;
    let f = fetch_batch(&ctx, "t:1").await;
    let names: Vec<&str> = f.jobs.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(names, [a.as_str(), "b", c.as_str()]);
    assert_eq!(f.batch.map(|b| b.len), Some(3));
    assert_eq!(lease_count(&ctx).await, (0, 1));
}
