//! Deferral budgets per cause (lib.lua's deferral_record): a job's deferrals are counted
//! in all and per cause, and each cause is held to its own budget, so backpressure does
//! not spend the grace of a kind this consumer lacks, nor the other way round. Records
//! written before causes were kept apart ('count first_ms') count for the next cause.

use crate::common::*;
use std::time::Duration;
use weir::metrics::DeferReason;
use weir::queue::scripts::{self, Settle};
use weir::{DeferralBudget, Priority};

/// The consumer's budgets: backpressure 3 deferrals; an unknown kind 30 s of grace.
fn defer(id: &str, cause: DeferReason) -> Settle {
    let budget = match cause {
        DeferReason::Backpressure => DeferralBudget {
            max_deferrals: 3,
            max_age: Duration::ZERO,
        },
        _ => DeferralBudget::for_time(Duration::from_secs(30)),
    };
    Settle::Defer {
        id: id.into(),
        token: FUTURE,
        priority: Priority::Normal,
        delay_ms: 1_000,
        reason: format!("because {}", cause.label()),
        budget,
        cause,
    }
}

/// Seeds job `id`, leased, with deferral record `rec`, settles `cause`'s deferral; returns
/// whether it was dead-lettered (spent) and the record after.
async fn settle_one(ctx: &Ctx, id: &str, rec: &str, cause: DeferReason) -> (bool, Option<String>) {
    let keys = &ctx.keys;
    seed(
        &mut ctx.c(),
        keys,
        &State::default().job(id, 0, 3, 1).lease(&[(id, FUTURE)]),
    )
    .await;
    let _: () = ctx.cmd(&["HSET", keys.deferrals(), id, rec]).await;
    let s = scripts::settle(&mut ctx.c(), keys, &[defer(id, cause)])
        .await
        .unwrap();
    assert!(s.missed.is_empty(), "{id}: held");
    let dead: Option<u64> = ctx.cmd(&["ZSCORE", &keys.all()[8], id]).await;
    assert_eq!(
        s.spent.contains(&id.to_owned()),
        dead.is_some(),
        "{id}: spent iff dead"
    );
    (dead.is_some(), ctx.cmd(&["HGET", keys.deferrals(), id]).await)
}

#[tokio::test]
async fn backpressure_long_ago_does_not_spend_an_unknown_kinds_grace() {
    let ctx = Ctx::new("causes-bk").await;
    let now = ctx.now_ms().await;
    let old = now - 3_600_000;
    let rec = format!("2 {old} backpressure=2:{old}");
    let (dead, after) = settle_one(&ctx, "a", &rec, DeferReason::UnknownKind).await;
    assert!(!dead, "deferred: the kind's grace starts now");
    let after = after.expect("a record");
    let parts: Vec<&str> = after.split(' ').collect();
    assert_eq!(
        parts[..3],
        ["3", &old.to_string(), &format!("backpressure=2:{old}")]
    );
    let (n, first) = parts[3]
        .strip_prefix("unknown_kind=")
        .unwrap()
        .split_once(':')
        .unwrap();
    assert_eq!(n, "1");
    check_time(
        "first unknown-kind deferral",
        NOW,
        first.parse().unwrap(),
        (now, ctx.now_ms().await),
    );
}

#[tokio::test]
async fn an_unknown_kind_long_ago_does_not_spend_the_backpressure_count() {
    let ctx = Ctx::new("causes-kb").await;
    let old = ctx.now_ms().await - 3_600_000;
    // 3 deferrals in all, over the backpressure count of 3 had they been one budget.
    let rec = format!("3 {old} unknown_kind=3:{old}");
    let (dead, after) = settle_one(&ctx, "a", &rec, DeferReason::Backpressure).await;
    assert!(!dead, "deferred: backpressure has spent none of its count");
    let after = after.unwrap();
    assert!(
        after.starts_with(&format!("4 {old} unknown_kind=3:{old} backpressure=1:")),
        "{after}"
    );
}

#[tokio::test]
async fn each_cause_still_dead_letters_when_its_own_budget_is_spent() {
    let ctx = Ctx::new("causes-spent").await;
    let now = ctx.now_ms().await;
    let old = now - 60_000;
    let rec = format!("4 {old} unknown_kind=1:{now} backpressure=3:{old}");
    let (dead, after) = settle_one(&ctx, "a", &rec, DeferReason::Backpressure).await;
    assert!(dead, "the fourth backpressure deferral is over its count of 3");
    assert_eq!(after, None, "the record goes with the job");
    let reason: String = ctx.cmd(&["HGET", &ctx.keys.all()[9], "a"]).await;
    assert!(
        reason.starts_with("deferral budget spent (3 deferrals over 60 s)"),
        "{reason}"
    );

    let rec = format!("4 {old} unknown_kind=1:{old} backpressure=3:{now}");
    let (dead, _) = settle_one(&ctx, "b", &rec, DeferReason::UnknownKind).await;
    assert!(dead, "the kind's grace (30 s) ended 30 s ago");
}

#[tokio::test]
async fn an_old_format_record_counts_for_the_next_cause() {
    let ctx = Ctx::new("causes-old").await;
    let now = ctx.now_ms().await;
    // Within the kind's grace: deferred, and the record takes the per-cause form.
    let recent = now - 10_000;
    let (dead, after) = settle_one(&ctx, "a", &format!("2 {recent}"), DeferReason::UnknownKind).await;
    assert!(!dead);
    assert_eq!(after.unwrap(), format!("3 {recent} unknown_kind=3:{recent}"));
    // Past it: dead-lettered, as before causes were kept apart.
    let old = now - 60_000;
    let (dead, _) = settle_one(&ctx, "b", &format!("1 {old}"), DeferReason::UnknownKind).await;
    assert!(dead, "an old record's first deferral still starts the grace");
    // A record that does not parse counts as none.
    let (dead, after) = settle_one(&ctx, "c", "garbage", DeferReason::Backpressure).await;
    assert!(!dead);
    assert!(after.unwrap().starts_with("1 "));
}
