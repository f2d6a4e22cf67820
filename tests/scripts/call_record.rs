//! settle.lua's call record ('C'): a call sent again with the same record (its reply was
//! lost) changes nothing and answers as its first try did; a new call number is applied.

use crate::N;
use crate::common::*;
use weir::queue::keys::QueueKeys;
use weir::queue::scripts::{self, CallRecord, Settle, Settled, StartMarks};

const TAG: &str = "c1.0000beef";

fn record(call: u64) -> CallRecord<'static> {
    CallRecord {
        tag: TAG,
        call,
        ttl_ms: 60_000,
    }
}

async fn settle_with(ctx: &Ctx, keys: &QueueKeys, items: &[Settle], call: u64) -> Settled {
    scripts::settle_call(
        &mut ctx.c(),
        keys,
        &[],
        items,
        StartMarks::default(),
        None,
        Some(record(call)),
    )
    .await
    .unwrap()
}

/// A queue of its own holding `before`.
async fn seeded(ctx: &Ctx, before: &State) -> QueueKeys {
    let (_, keys) = ctx.other_queue("case");
    seed(&mut ctx.c(), &keys, before).await;
    keys
}

/// The queue's state, checked against `after` (a call made since `t0`).
async fn applied(ctx: &Ctx, keys: &QueueKeys, case: &str, after: &State, t0: u64) -> State {
    let t1 = ctx.now_ms().await;
    let got = snapshot(&mut ctx.c(), keys).await;
    assert_state(case, &got, after, (t0, t1));
    got
}

#[tokio::test]
async fn a_settle_call_sent_again_is_applied_once_and_answers_as_its_first_try() {
    let ctx = Ctx::new("call-record").await;
    let before = State::default()
        .job("a", 0, 3, 1)
        .job("b", 0, 3, 1)
        .lease(&[("a", FUTURE), ("b", FUTURE)]);
    let items = vec![
        Settle::Ack {
            id: "a".into(),
            token: FUTURE,
        },
        Settle::Ack {
            id: "gone".into(),
            token: FUTURE,
        },
        Settle::Retry {
            id: "b".into(),
            token: FUTURE,
            priority: weir::Priority::Normal,
            delay_ms: 60_000,
            error: "boom".into(),
        },
    ];
    let after = State::default()
        .job("b", 1, 3, 1)
        .delayed(N, &[("b", NOW + 60_000)])
        .error("b", "boom")
        .counter("acked", 1)
        .counter("retried", 1);
    let keys = seeded(&ctx, &before).await;
    let t0 = ctx.now_ms().await;
    let first = settle_with(&ctx, &keys, &items, 7).await;
    let applied = applied(&ctx, &keys, "first try", &after, t0).await;
    assert_eq!(first.missed, ["gone"], "{first:?}");

    let again = settle_with(&ctx, &keys, &items, 7).await;
    assert_eq!(again, first, "the retry answers as the first try did");
    assert_eq!(
        snapshot(&mut ctx.c(), &keys).await,
        applied,
        "and changes nothing"
    );
    let ttl: i64 = ctx.cmd(&["PTTL", &keys.settle_record(TAG)]).await;
    assert!(ttl > 0 && ttl <= 60_000, "the record expires: {ttl}");

    // a new call is applied: its outcomes find no lease left
    let next = settle_with(&ctx, &keys, &items, 8).await;
    assert_eq!(next.missed, ["a", "gone", "b"], "{next:?}");
    assert_eq!(snapshot(&mut ctx.c(), &keys).await, applied);
}

/// ack_inline's MULTI records its call's number alone; its retry goes through the
/// script, which finds the record and leaves the acks and the counter as they were.
#[tokio::test]
async fn an_inline_ack_call_retried_through_the_script_is_applied_once() {
    let ctx = Ctx::new("call-record-inline").await;
    let (a, b) = (env("a", 0, 3, 1), env("b", 0, 3, 1));
    let before = State::default().lease(&[(&a, FUTURE), (&b, FUTURE)]);
    let items: Vec<Settle> = [&a, &b]
        .into_iter()
        .map(|id| Settle::Ack {
            id: id.clone(),
            token: FUTURE,
        })
        .collect();
    let keys = seeded(&ctx, &before).await;
    let t0 = ctx.now_ms().await;
    let first = scripts::ack_inline_call(&mut ctx.c(), &keys, &items, &[], &[], Some(record(3)))
        .await
        .unwrap();
    let after = State::default().counter("acked", 2);
    let applied = applied(&ctx, &keys, "inline acks", &after, t0).await;
    assert_eq!(first, Settled::default());

    let again = settle_with(&ctx, &keys, &items, 3).await;
    assert_eq!(again, Settled::default(), "nothing reported missed");
    assert_eq!(
        snapshot(&mut ctx.c(), &keys).await,
        applied,
        "the counter is not raised again"
    );

    // without the record (a new call) the acks find no lease, and say so
    let next = settle_with(&ctx, &keys, &items, 4).await;
    assert_eq!(next.missed_inline, 2, "{next:?}");
    assert_eq!(snapshot(&mut ctx.c(), &keys).await, applied);
}
