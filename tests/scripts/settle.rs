//! settle.lua: ack, retry, defer and dead-letter in one batch; stale, duplicate and late
//! outcomes reported instead of applied; attempts exhausted; deferral budgets spent; the
//! queue's dead-letter cap.

use crate::common::*;
use crate::{H, N};
use std::time::Duration;
use weir::Priority;
use weir::queue::retry_policy::DeferralBudget;
use weir::queue::scripts::{self, Settle};

fn ack(id: &str, token: u64) -> Settle {
    Settle::Ack { id: id.into(), token }
}
fn retry(id: &str, token: u64, p: Priority, delay_ms: u64, e: &str) -> Settle {
    Settle::Retry {
        id: id.into(),
        token,
        priority: p,
        delay_ms,
        error: e.into(),
    }
}
fn dead(id: &str, token: u64, reason: &str) -> Settle {
    Settle::Dead {
        id: id.into(),
        token,
        reason: reason.into(),
    }
}

struct Case {
    name: &'static str,
    before: State,
    items: Vec<Settle>,
    missed: &'static [&'static str],
    after: State,
}

fn held(id: &str, attempt: u32, max: u32) -> State {
    State::default().job(id, attempt, max, 1).lease(&[(id, FUTURE)])
}

/// `s` with 300 more leases at [`FUTURE`], as many fetches in one millisecond leave (their
/// jobs are not in `s`), and `b`'s lease at FUTURE too.
fn crowd(s: State) -> State {
    let mut ids: Vec<String> = (0..300).map(|i| format!("other-{i}")).collect();
    ids.extend(s.lease.iter().map(|(id, _)| id.clone()));
    ids.push("b".into());
    let leases: Vec<(&str, u64)> = ids.iter().map(|id| (id.as_str(), FUTURE)).collect();
    s.lease(&leases)
}

/// The table: state before, the outcomes, the ids missed, state after.
fn cases() -> Vec<Case> {
    let abc = State::default()
        .job("a", 0, 3, 1)
        .job("b", 0, 3, 1)
        .job("c", 0, 3, 1)
        .job("d", 0, 3, 1)
        .lease(&[("a", FUTURE), ("b", FUTURE), ("c", FUTURE), ("d", FUTURE + 7)]);
    vec![
        Case {
            name: "ack deletes the job, its lease and its last error",
            before: held("a", 1, 3).error("a", "earlier failure").counter("acked", 4),
            items: vec![ack("a", FUTURE)],
            missed: &[],
            after: State::default().counter("acked", 5),
        },
        Case {
            name: "the same id twice in one call: the second is reported",
            before: held("a", 0, 3),
            items: vec![ack("a", FUTURE), ack("a", FUTURE)],
            missed: &["a"],
            after: State::default().counter("acked", 1),
        },
        Case {
            name: "a second settle later: the job is gone, reported, nothing changes",
            before: State::default().counter("acked", 1),
            items: vec![ack("a", FUTURE), dead("a", FUTURE, "x")],
            missed: &["a", "a"],
            after: State::default().counter("acked", 1),
        },
        Case {
            name: "stale token (job re-leased to someone else): reported, new holder untouched",
            before: State::default().job("a", 1, 3, 1).lease(&[("a", FUTURE + 5)]),
            items: vec![
                ack("a", FUTURE),
                retry("a", FUTURE, Priority::Normal, 0, "e"),
                dead("a", FUTURE, "r"),
            ],
            missed: &["a", "a", "a"],
            after: State::default().job("a", 1, 3, 1).lease(&[("a", FUTURE + 5)]),
        },
        Case {
            name: "lease expired but not reclaimed yet: nobody else has the job, the ack counts",
            before: State::default().job("a", 0, 3, 1).lease(&[("a", PAST)]),
            items: vec![ack("a", PAST)],
            missed: &[],
            after: State::default().counter("acked", 1),
        },
        Case {
            name: "acks among many other leases of their score (fetches in the same ms): each id read",
            before: crowd(held("a", 0, 3).job("b", 0, 3, 1)),
            items: vec![ack("a", FUTURE), ack("zz", FUTURE), ack("a", FUTURE)],
            missed: &["zz", "a"],
            after: crowd(State::default().job("b", 0, 3, 1)).counter("acked", 1),
        },
        Case {
            name: "retry: attempt + 1, delayed by the delay at the given priority, error kept",
            before: held("a", 0, 3).error("a", "older"),
            items: vec![retry("a", FUTURE, Priority::Normal, 5_000, "boom")],
            missed: &[],
            after: State::default()
                .job("a", 1, 3, 1)
                .delayed(N, &[("a", NOW + 5_000)])
                .error("a", "boom")
                .counter("retried", 1),
        },
        Case {
            name: "retry with zero delay is due at once; priority comes from the caller",
            before: held("a", 1, 3),
            items: vec![retry("a", FUTURE, Priority::High, 0, "boom")],
            missed: &[],
            after: State::default()
                .job("a", 2, 3, 1)
                .delayed(H, &[("a", NOW)])
                .error("a", "boom")
                .counter("retried", 1),
        },
        Case {
            name: "retry of the last attempt: dead with the last error",
            before: held("a", 2, 3),
            items: vec![retry("a", FUTURE, Priority::Normal, 5_000, "boom 3")],
            missed: &[],
            after: State::default()
                .job("a", 3, 3, 1)
                .dead(&[("a", NOW)])
                .error("a", "boom 3")
                .counter("dead", 1),
        },
        Case {
            name: "max_attempts 1: the first failure is final",
            before: held("a", 0, 1),
            items: vec![retry("a", FUTURE, Priority::Normal, 5_000, "once")],
            missed: &[],
            after: State::default()
                .job("a", 1, 1, 1)
                .dead(&[("a", NOW)])
                .error("a", "once")
                .counter("dead", 1),
        },
        Case {
            name: "dead: to the dead-letter queue now with the reason, attempt kept",
            before: held("a", 0, 3),
            items: vec![dead("a", FUTURE, "fatal: bad input")],
            missed: &[],
            after: State::default()
                .job("a", 0, 3, 1)
                .dead(&[("a", NOW)])
                .error("a", "fatal: bad input")
                .counter("dead", 1),
        },
        Case {
            name: "retry of an envelope weir did not write: dead-lettered as it is",
            before: State::default().raw_job("x", "not json").lease(&[("x", FUTURE)]),
            items: vec![retry("x", FUTURE, Priority::Normal, 0, "undecodable")],
            missed: &[],
            after: State::default()
                .raw_job("x", "not json")
                .dead(&[("x", NOW)])
                .error("x", "undecodable")
                .counter("dead", 1),
        },
        Case {
            name: "mixed batch: each outcome applied, the stale one reported",
            before: abc.clone(),
            items: vec![
                ack("a", FUTURE),
                retry("b", FUTURE, Priority::Normal, 1_000, "e"),
                dead("c", FUTURE, "r"),
                ack("d", FUTURE),
            ],
            missed: &["d"],
            after: State::default()
                .job("b", 1, 3, 1)
                .delayed(N, &[("b", NOW + 1_000)])
                .error("b", "e")
                .job("c", 0, 3, 1)
                .dead(&[("c", NOW)])
                .error("c", "r")
                .job("d", 0, 3, 1)
                .lease(&[("d", FUTURE + 7)])
                .counter("acked", 1)
                .counter("retried", 1)
                .counter("dead", 1),
        },
    ]
}

#[tokio::test]
async fn settle_table() {
    let ctx = Ctx::new("settle").await;
    for c in cases() {
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
        assert!(settled.spent.is_empty(), "case {:?}: no deferral", c.name);
    }
}

/// The cap is the queue's `dead_cap` setting, the same for every consumer.
#[tokio::test]
async fn dead_letter_cap_trims_the_oldest_and_counts_them() {
    let ctx = Ctx::new("cap").await;
    let ids = ["a", "b", "c", "d", "e"];
    let mut before = State::default()
        .setting("dead_cap", "3")
        .job("old", 3, 3, 1)
        .dead(&[("old", 5)])
        .error("old", "x");
    for id in ids {
        before = before.job(id, 0, 3, 1);
    }
    before = before.lease(&ids.map(|id| (id, FUTURE)));
    let items: Vec<Settle> = ids.iter().map(|id| dead(id, FUTURE, "r")).collect();
    // cap 3: the old entry and the two oldest of the five (same time: member order) go
    let after = State::default()
        .setting("dead_cap", "3")
        .job("c", 0, 3, 1)
        .job("d", 0, 3, 1)
        .job("e", 0, 3, 1)
        .dead(&[("c", NOW), ("d", NOW), ("e", NOW)])
        .error("c", "r")
        .error("d", "r")
        .error("e", "r")
        .counter("dead", 5)
        .counter("trimmed", 3);
    let settled = run_case(
        &ctx,
        "cap 3, bury 5 on top of 1",
        &before,
        |mut c, k| async move { scripts::settle(&mut c, &k, &items).await },
        &after,
    )
    .await;
    assert!(settled.missed.is_empty());

    // cap 3 on an empty dead-letter queue, bury 5: 2 trimmed
    let mut before = State::default().setting("dead_cap", "3");
    for id in ids {
        before = before.job(id, 0, 3, 1);
    }
    before = before.lease(&ids.map(|id| (id, FUTURE)));
    let items: Vec<Settle> = ids.iter().map(|id| dead(id, FUTURE, "r")).collect();
    let after = after.counter("trimmed", 2);
    run_case(
        &ctx,
        "cap 3, bury 5",
        &before,
        |mut c, k| async move { scripts::settle(&mut c, &k, &items).await },
        &after,
    )
    .await;

    // no setting (or one that is not a positive number): the default cap, nothing trimmed
    for setting in [None, Some("0"), Some("lots")] {
        let mut before = State::default();
        let mut after = State::default();
        if let Some(v) = setting {
            before = before.setting("dead_cap", v);
            after = after.setting("dead_cap", v);
        }
        let before = before.job("a", 0, 3, 1).lease(&[("a", FUTURE)]);
        let after = after
            .job("a", 0, 3, 1)
            .dead(&[("a", NOW)])
            .error("a", "r")
            .counter("dead", 1);
        let items = vec![dead("a", FUTURE, "r")];
        run_case(
            &ctx,
            "default cap",
            &before,
            |mut c, k| async move { scripts::settle(&mut c, &k, &items).await },
            &after,
        )
        .await;
    }
}

/// An ack that arrives after the lease expired and the job was reclaimed and leased again
/// by another fetch is refused; the new holder's ack works.
#[tokio::test]
async fn ack_after_expiry_and_re_lease_is_refused_and_the_new_holder_wins() {
    let ctx = Ctx::new("late").await;
    let mut c = ctx.c();
    let k = &ctx.keys;
    let job = weir::NewJob::new("k", &1).unwrap().id("a").max_attempts(3);
    ctx.producer().enqueue(job).await.unwrap();
    let first = scripts::fetch(&mut c, k, 10, 100).await.unwrap();
    assert_eq!(first.jobs.len(), 1);
    let t1 = first.deadline_ms;
    wait_until("the lease to expire", Duration::from_secs(10), || {
        let mut c = ctx.c();
        async move { redis_now_ms(&mut c).await > t1 }
    })
    .await;
    let r = scripts::reclaim(&mut c, k, 100, DeferralBudget::default())
        .await
        .unwrap();
    assert_eq!(r.returned, 1);
    let second = scripts::fetch(&mut c, k, 10, 60_000).await.unwrap();
    assert_eq!(second.jobs.len(), 1);
    assert!(String::from_utf8_lossy(second.jobs[0].envelope()).starts_with(r#"{"attempt":0,"#));
    let t2 = second.deadline_ms;
    assert_ne!(t1, t2);

    let before = ctx.snapshot().await;
    let missed = scripts::settle(&mut c, k, &[ack("a", t1)]).await.unwrap().missed;
    assert_eq!(missed, ["a"], "the late ack is reported as not acted on");
    assert_eq!(ctx.snapshot().await, before, "and changes nothing");

    let missed = scripts::settle(&mut c, k, &[ack("a", t2)]).await.unwrap().missed;
    assert!(missed.is_empty());
    let after = ctx.snapshot().await;
    assert!(
        after.jobs.is_empty()
            && after.lease.is_empty()
            && after.errors.is_empty()
            && after.deferrals.is_empty(),
        "{after:?}"
    );
    assert_eq!(after.counters.get("acked"), Some(&1));
}

/// A settle call's outcomes and start marks: state before, outcomes, marks (started,
/// ended), the ids missed, state after.
struct MarkCase {
    name: &'static str,
    before: State,
    items: Vec<Settle>,
    started: Vec<(String, u64)>,
    ended: Vec<String>,
    missed: &'static [&'static str],
    after: State,
}

fn marks(ids: &[(&str, u64)]) -> Vec<(String, u64)> {
    ids.iter().map(|(id, t)| (id.to_string(), *t)).collect()
}

/// Tokens of extended leases, start marks written and removed.
fn mark_cases() -> Vec<MarkCase> {
    let ab = State::default()
        .job("a", 0, 3, 1)
        .job("b", 0, 3, 1)
        .lease(&[("a", FUTURE), ("b", FUTURE + 7)]);
    vec![
        MarkCase {
            name: "an extended lease settles with its fetch token; its token record goes with it",
            before: held("a", 0, 3)
                .lease(&[("a", FUTURE + 100)])
                .lease_token("a", FUTURE),
            items: vec![ack("a", FUTURE)],
            started: vec![],
            ended: vec![],
            missed: &[],
            after: State::default().counter("acked", 1),
        },
        MarkCase {
            name: "a lease another consumer holds now (another token record) is not the old token's",
            before: held("a", 0, 3)
                .lease(&[("a", FUTURE + 100)])
                .lease_token("a", FUTURE + 50),
            items: vec![ack("a", FUTURE), dead("a", FUTURE, "r")],
            started: vec![],
            ended: vec![],
            missed: &["a", "a"],
            after: held("a", 0, 3)
                .lease(&[("a", FUTURE + 100)])
                .lease_token("a", FUTURE + 50),
        },
        MarkCase {
            name: "start marks: ids still held get the consumer's tag; stale and unknown ones are skipped",
            before: ab.clone(),
            items: vec![],
            started: marks(&[("a", FUTURE), ("b", FUTURE + 7), ("zz", FUTURE), ("b", FUTURE)]),
            ended: vec![],
            missed: &[],
            after: ab.clone().started("a", "c1").started("b", "c1"),
        },
        MarkCase {
            name: "an ack removes the marks listed with it, and only those of jobs it acked",
            before: ab.clone().started("a", "c1").started("b", "c2"),
            items: vec![ack("a", FUTURE), ack("b", FUTURE)],
            started: vec![],
            ended: vec!["a".into(), "b".into()],
            missed: &["b"],
            after: State::default()
                .job("b", 0, 3, 1)
                .lease(&[("b", FUTURE + 7)])
                .started("b", "c2")
                .counter("acked", 1),
        },
        MarkCase {
            name: "a retry or a dead-letter ends its lease's mark and token record itself",
            before: ab
                .clone()
                .lease(&[("a", FUTURE + 100), ("b", FUTURE + 7)])
                .lease_token("a", FUTURE)
                .started("a", "c1")
                .started("b", "c1:s"),
            items: vec![
                retry("a", FUTURE, Priority::Normal, 0, "e"),
                dead("b", FUTURE + 7, "r"),
            ],
            started: vec![],
            ended: vec![],
            missed: &[],
            after: State::default()
                .job("a", 1, 3, 1)
                .job("b", 0, 3, 1)
                .delayed(N, &[("a", NOW)])
                .dead(&[("b", NOW)])
                .error("a", "e")
                .error("b", "r")
                .counter("retried", 1)
                .counter("dead", 1),
        },
    ]
}

#[tokio::test]
async fn marks_and_tokens_table() {
    let ctx = Ctx::new("marks").await;
    for c in mark_cases() {
        let MarkCase {
            name,
            before,
            items,
            started,
            ended,
            missed,
            after,
        } = c;
        let got = run_case(
            &ctx,
            name,
            &before,
            |mut conn, k| async move {
                let marks = scripts::StartMarks {
                    tag: "c1",
                    started: &started,
                    ended: &ended,
                };
                scripts::settle_marked(&mut conn, &k, &items, marks).await
            },
            &after,
        )
        .await;
        assert_eq!(got.missed, missed, "case {name:?}");
    }
}
