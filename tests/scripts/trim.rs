//! The queue's dead-letter cap (its `dead_cap` setting): trimming is bounded per call, so
//! a cap lowered under a big dead-letter queue drains over calls (the reclaimer's, every
//! second, whether or not leases expired) instead of blocking Redis in one; every trim is
//! counted.

use crate::common::*;
use weir::queue::retry_policy::DeferralBudget;
use weir::queue::scripts;

/// A dead-letter queue of `n` entries (`dN` at score N, with envelopes and reasons).
fn dead(n: usize) -> State {
    let mut s = State::default();
    let mut entries = Vec::with_capacity(n);
    let ids: Vec<String> = (0..n).map(|i| format!("d{i:05}")).collect();
    for (i, id) in ids.iter().enumerate() {
        s = s.job(id, 3, 3, 1).error(id, "boom");
        entries.push((id.as_str(), i as u64 + 1));
    }
    s.dead(&entries)
}

/// What is left of [`dead`]`(n)` once the oldest `trimmed` are gone.
fn left(n: usize, trimmed: usize) -> State {
    let mut s = dead(n);
    let gone: Vec<String> = (0..trimmed).map(|i| format!("d{i:05}")).collect();
    for id in &gone {
        s.jobs.remove(id);
        s.errors.remove(id);
    }
    s.dead.retain(|(id, _)| !gone.contains(id));
    s
}

#[tokio::test]
async fn a_lowered_cap_drains_over_calls_at_most_1000_each() {
    let ctx = Ctx::new("trim").await;
    let (_, k) = ctx.other_queue("big");
    let mut c = ctx.c();
    seed(&mut c, &k, &dead(2_500).setting("dead_cap", "100")).await;
    let mut totals = Vec::new();
    for _ in 0..4 {
        let r = scripts::reclaim(&mut c, &k, 100, DeferralBudget::default())
            .await
            .unwrap();
        assert_eq!(r.total(), 0, "no lease expired");
        totals.push((r.trimmed, r.trimmed_total));
    }
    assert_eq!(totals, [(1_000, 1_000), (1_000, 2_000), (400, 2_400), (0, 2_400)]);
    let after = left(2_500, 2_400)
        .setting("dead_cap", "100")
        .counter("trimmed", 2_400);
    assert_state("drained", &snapshot(&mut c, &k).await, &after, (0, 0));
    let s = scripts::stats(&mut c, &k).await.unwrap();
    assert_eq!((s.dead, s.dead_cap, s.counters["trimmed"]), (100, 100, 2_400));
}

#[tokio::test]
async fn a_settle_that_buries_trims_one_bounded_step_too() {
    let ctx = Ctx::new("trimsettle").await;
    let before = dead(1_500)
        .setting("dead_cap", "10")
        .job("a", 0, 3, 1)
        .lease(&[("a", FUTURE)]);
    let mut after = left(1_500, 1_000)
        .setting("dead_cap", "10")
        .job("a", 0, 3, 1)
        .error("a", "r")
        .counter("dead", 1)
        .counter("trimmed", 1_000);
    after.dead.push(("a".into(), NOW));
    let items = vec![scripts::Settle::Dead {
        id: "a".into(),
        token: FUTURE,
        reason: "r".into(),
    }];
    run_case(
        &ctx,
        "bury one over a cap of 10 under 1,500",
        &before,
        |mut c, k| async move { scripts::settle(&mut c, &k, &items).await },
        &after,
    )
    .await;
}

#[tokio::test]
async fn stats_show_the_cap_in_force_and_the_jobs_deferred() {
    let ctx = Ctx::new("trimstats").await;
    let (_, k) = ctx.other_queue("s");
    let mut c = ctx.c();
    let s = scripts::stats(&mut c, &k).await.unwrap();
    assert_eq!(
        (s.dead_cap, s.deferred),
        (weir::queue::settings::DEFAULT_DEAD_CAP, 0),
        "no setting: the default, as settings.rs and lib.lua both say"
    );
    seed(
        &mut c,
        &k,
        &State::default()
            .setting("dead_cap", "7")
            .job("a", 0, 3, 1)
            .delayed(crate::N, &[("a", FUTURE)])
            .deferral("a", 2, 5),
    )
    .await;
    let s = scripts::stats(&mut c, &k).await.unwrap();
    assert_eq!((s.dead_cap, s.deferred, s.delayed), (7, 1, 1));
}
