//! Which calls publish on the queue's wake channel: every one that makes work ready or
//! due (so idle consumers look at once), none that only takes work away.

use crate::common::*;
use futures_util::StreamExt;
use std::time::Duration;
use weir::Priority;
use weir::queue::scripts::{self, EnqueueArg, Settle};

/// Runs `call` on a queue seeded with `before`; returns the wake messages it published.
async fn wakes<F, Fut>(ctx: &Ctx, before: State, call: F) -> Vec<String>
where
    F: FnOnce(weir::Conn, weir::queue::keys::QueueKeys) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let (_, keys) = ctx.other_queue("wake");
    seed(&mut ctx.c(), &keys, &before).await;
    let mut msgs = ctx.redis.subscribe(keys.wake_channel()).await.unwrap();
    call(ctx.c(), keys.clone()).await;
    // a marker published after the call bounds the wait: everything before it has arrived
    let _: u64 = redis::cmd("PUBLISH")
        .arg(keys.wake_channel())
        .arg("marker")
        .query_async(&mut ctx.c())
        .await
        .unwrap();
    let mut got = Vec::new();
    loop {
        let m = tokio::time::timeout(Duration::from_secs(10), msgs.next()).await;
        let payload: String = m.expect("marker arrives").unwrap().get_payload().unwrap();
        if payload == "marker" {
            return got;
        }
        got.push(payload);
    }
}

fn held(id: &str, attempt: u32) -> State {
    State::default().job(id, attempt, 3, 1).lease(&[(id, FUTURE)])
}

#[tokio::test]
async fn calls_that_make_work_ready_wake_idle_consumers() {
    let ctx = Ctx::new("wake").await;
    let arg = |id: &str, delay_ms| EnqueueArg {
        id: id.into(),
        priority: Priority::Normal,
        delay_ms,
        run_at_ms: 0,
        envelope: env(id, 0, 3, 1).into_bytes(),
        unique: true,
        unique_for_ms: 0,
    };
    let empty = State::default();
    let enq = wakes(&ctx, empty.clone(), |mut c, k| async move {
        scripts::enqueue(&mut c, &k, &[arg("a", 0), arg("b", 5_000)])
            .await
            .unwrap();
    });
    assert_eq!(enq.await, ["enqueue"], "one wake per batch");
    let dup = wakes(&ctx, held("a", 0), |mut c, k| async move {
        scripts::enqueue(&mut c, &k, &[arg("a", 0)]).await.unwrap();
    });
    assert!(dup.await.is_empty(), "nothing added, nobody woken");

    let retry = Settle::Retry {
        id: "a".into(),
        token: FUTURE,
        priority: Priority::Normal,
        delay_ms: 10,
        error: "e".into(),
    };
    let w = wakes(&ctx, held("a", 0), |mut c, k| async move {
        scripts::settle(&mut c, &k, &[retry]).await.unwrap();
    });
    assert_eq!(w.await, ["retry"]);
    let defer = Settle::Defer {
        id: "a".into(),
        token: FUTURE,
        priority: Priority::Normal,
        delay_ms: 10,
        reason: "busy".into(),
        budget: weir::DeferralBudget::default(),
        cause: weir::metrics::DeferReason::Backpressure,
    };
    let w = wakes(&ctx, held("a", 0), |mut c, k| async move {
        scripts::settle(&mut c, &k, &[defer]).await.unwrap();
    });
    assert_eq!(w.await, ["retry"], "a deferral is new delayed work too");
    let ack = Settle::Ack {
        id: "a".into(),
        token: FUTURE,
    };
    let w = wakes(&ctx, held("a", 0), |mut c, k| async move {
        scripts::settle(&mut c, &k, &[ack]).await.unwrap();
    });
    assert!(w.await.is_empty(), "an ack adds no work");

    let expired = State::default().job("a", 0, 3, 1).lease(&[("a", PAST)]);
    let w = wakes(&ctx, expired, |mut c, k| async move {
        scripts::reclaim(
            &mut c,
            &k,
            10,
            weir::queue::retry_policy::DeferralBudget::default(),
        )
        .await
        .unwrap();
    });
    assert_eq!(w.await, ["reclaim"]);
    let w = wakes(&ctx, held("a", 0), |mut c, k| async move {
        scripts::release(&mut c, &k, &[("a", FUTURE, Priority::Normal)])
            .await
            .unwrap();
    });
    assert_eq!(w.await, ["release"]);
    let dead = State::default().job("a", 3, 3, 1).dead(&[("a", 1)]);
    let w = wakes(&ctx, dead, |mut c, k| async move {
        scripts::dlq_requeue(&mut c, &k, 10, &[]).await.unwrap();
    });
    assert_eq!(w.await, ["requeue"]);
    let w = wakes(&ctx, State::default().paused(true), |mut c, k| async move {
        scripts::pause(&mut c, &k, false).await.unwrap();
    });
    assert_eq!(w.await, ["resume"]);
    let w = wakes(&ctx, empty.clone(), |mut c, k| async move {
        scripts::pause(&mut c, &k, true).await.unwrap();
    });
    assert!(w.await.is_empty());
}
