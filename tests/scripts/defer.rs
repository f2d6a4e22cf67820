//! settle.lua's defer outcome ('F'): back to delayed with the attempt untouched, counted
//! in the job's deferral record; dead-lettered with a reason that says so once the record
//! is over its budget (count or age). Acks and dead-letters drop the record; retries keep
//! it.

use crate::common::*;
use crate::{H, N};
use std::time::Duration;
use weir::metrics::DeferReason;
use weir::queue::scripts::{self, Settle};
use weir::{DeferralBudget, Priority};

fn defer(id: &str, p: Priority, delay_ms: u64, budget: (u32, u64), reason: &str) -> Settle {
    Settle::Defer {
        id: id.into(),
        token: FUTURE,
        priority: p,
        delay_ms,
        reason: reason.into(),
        budget: DeferralBudget {
            max_deferrals: budget.0,
            max_age: Duration::from_millis(budget.1),
        },
        cause: DeferReason::Backpressure,
    }
}

fn held(id: &str, attempt: u32, max: u32) -> State {
    State::default().job(id, attempt, max, 1).lease(&[(id, FUTURE)])
}

struct Case {
    name: &'static str,
    before: State,
    items: Vec<Settle>,
    missed: &'static [&'static str],
    spent: &'static [&'static str],
    after: State,
}

/// The table; `now` is Redis time just before, for records seeded with a known age.
fn cases(now: u64) -> Vec<Case> {
    let busy = |id| defer(id, Priority::Normal, 5_000, (3, 0), "HTTP 429: busy");
    vec![
        Case {
            name: "first deferral: delayed by the delay, attempt untouched, counted",
            before: held("a", 1, 3).error("a", "older"),
            items: vec![busy("a")],
            missed: &[],
            spent: &[],
            after: State::default()
                .job("a", 1, 3, 1)
                .delayed(N, &[("a", NOW + 5_000)])
                .error("a", "HTTP 429: busy")
                .deferral("a", 1, NOW)
                .counter("deferred", 1),
        },
        Case {
            name: "a later deferral keeps the time of the first",
            before: held("a", 0, 1).deferral("a", 2, now - 10_000),
            items: vec![busy("a")],
            missed: &[],
            spent: &[],
            after: State::default()
                .job("a", 0, 1, 1)
                .delayed(N, &[("a", NOW + 5_000)])
                .error("a", "HTTP 429: busy")
                .deferral("a", 3, now - 10_000)
                .counter("deferred", 1),
        },
        Case {
            name: "one deferral over the count: dead with a reason that says so, record gone",
            before: held("a", 0, 1).deferral("a", 3, now),
            items: vec![busy("a")],
            missed: &[],
            spent: &["a"],
            after: State::default()
                .job("a", 0, 1, 1)
                .dead(&[("a", NOW)])
                .error(
                    "a",
                    "deferral budget spent (3 deferrals over 0 s): HTTP 429: busy",
                )
                .counter("dead", 1),
        },
        Case {
            name: "older than the budget's age: dead, whatever the count",
            before: held("a", 0, 3).deferral("a", 1, now - 60_200),
            items: vec![defer("a", Priority::Normal, 0, (0, 30_000), "unknown job kind")],
            missed: &[],
            spent: &["a"],
            after: State::default()
                .job("a", 0, 3, 1)
                .dead(&[("a", NOW)])
                .error(
                    "a",
                    "deferral budget spent (1 deferrals over 60 s): unknown job kind",
                )
                .counter("dead", 1),
        },
        Case {
            name: "no limits: deferred however often; priority from the caller, delay 0 due now",
            before: held("a", 0, 3).deferral("a", 5_000, now - 90_000_000),
            items: vec![defer("a", Priority::High, 0, (0, 0), "r")],
            missed: &[],
            spent: &[],
            after: State::default()
                .job("a", 0, 3, 1)
                .delayed(H, &[("a", NOW)])
                .error("a", "r")
                .deferral("a", 5_001, now - 90_000_000)
                .counter("deferred", 1),
        },
        Case {
            name: "stale token or listed twice: reported, applied once",
            before: held("a", 0, 3)
                .job("b", 0, 3, 1)
                .lease(&[("a", FUTURE), ("b", FUTURE + 5)]),
            items: vec![busy("a"), busy("a"), busy("b")],
            missed: &["a", "b"],
            spent: &[],
            after: State::default()
                .job("a", 0, 3, 1)
                .delayed(N, &[("a", NOW + 5_000)])
                .error("a", "HTTP 429: busy")
                .deferral("a", 1, NOW)
                .job("b", 0, 3, 1)
                .lease(&[("b", FUTURE + 5)])
                .counter("deferred", 1),
        },
        Case {
            name: "ack and dead-letter drop the record; a retry keeps it",
            before: State::default()
                .job("a", 0, 3, 1)
                .job("b", 0, 3, 1)
                .job("c", 0, 3, 1)
                .lease(&[("a", FUTURE), ("b", FUTURE), ("c", FUTURE)])
                .deferral("a", 1, now)
                .deferral("b", 2, now)
                .deferral("c", 3, now),
            items: vec![
                Settle::Ack {
                    id: "a".into(),
                    token: FUTURE,
                },
                Settle::Dead {
                    id: "b".into(),
                    token: FUTURE,
                    reason: "fatal".into(),
                },
                Settle::Retry {
                    id: "c".into(),
                    token: FUTURE,
                    priority: Priority::Normal,
                    delay_ms: 0,
                    error: "e".into(),
                },
            ],
            missed: &[],
            spent: &[],
            after: State::default()
                .job("b", 0, 3, 1)
                .dead(&[("b", NOW)])
                .error("b", "fatal")
                .job("c", 1, 3, 1)
                .delayed(N, &[("c", NOW)])
                .error("c", "e")
                .deferral("c", 3, now)
                .counter("acked", 1)
                .counter("retried", 1)
                .counter("dead", 1),
        },
    ]
}

#[tokio::test]
async fn defer_table() {
    let ctx = Ctx::new("defer").await;
    let now = ctx.now_ms().await;
    for c in cases(now) {
        let items = c.items.clone();
        let settled = run_case(
            &ctx,
            c.name,
            &c.before,
            |mut conn, k| async move { scripts::settle(&mut conn, &k, &items).await },
            &c.after,
        )
        .await;
        assert_eq!(settled.missed, c.missed, "case {:?}: missed ids", c.name);
        assert_eq!(settled.spent, c.spent, "case {:?}: spent ids", c.name);
    }
}
