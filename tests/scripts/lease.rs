//! reclaim.lua, extend.lua, release.lua: what happens to leases that expire, are kept
//! alive, or are handed back.

use crate::common::*;
use crate::{H, L, N};
use std::time::Duration;
use weir::Priority;
use weir::scripts::{self, Settle};

struct Reclaim {
    name: &'static str,
    before: State,
    n: usize,
    reply: (u64, u64),
    after: State,
}

/// The table: state before, the batch size, the reply, state after. (The dead-letter cap
/// is the queue's `dead_cap` setting.)
fn reclaim_cases() -> Vec<Reclaim> {
    vec![
        Reclaim {
            name: "no lease expired",
            before: State::default().job("a", 0, 3, 1).lease(&[("a", FUTURE)]),
            n: 100,
            reply: (0, 0),
            after: State::default().job("a", 0, 3, 1).lease(&[("a", FUTURE)]),
        },
        Reclaim {
            name: "expired: attempt + 1, back to the FRONT of its ready list",
            before: State::default()
                .job("a", 0, 3, 2)
                .job("x", 0, 3, 2)
                .ready(L, &["x"])
                .lease(&[("a", PAST)]),
            n: 100,
            reply: (1, 0),
            after: State::default()
                .job("a", 1, 3, 2)
                .job("x", 0, 3, 2)
                .ready(L, &["a", "x"])
                .error("a", "lease expired")
                .counter("reclaimed", 1),
        },
        Reclaim {
            name: "expired on its last attempt: dead-lettered",
            before: State::default().job("a", 2, 3, 1).lease(&[("a", PAST)]),
            n: 100,
            reply: (0, 1),
            after: State::default()
                .job("a", 3, 3, 1)
                .dead(&[("a", NOW)])
                .error("a", "lease expired after 3 attempts")
                .counter("reclaimed", 1)
                .counter("dead", 1),
        },
        Reclaim {
            name: "an envelope weir did not write goes back to normal ready as it is",
            before: State::default().raw_job("x", "{not json").lease(&[("x", PAST)]),
            n: 100,
            reply: (1, 0),
            after: State::default()
                .raw_job("x", "{not json")
                .ready(N, &["x"])
                .counter("reclaimed", 1),
        },
        Reclaim {
            name: "at most n per call, oldest leases first",
            before: State::default()
                .job("a", 0, 3, 0)
                .job("b", 0, 3, 0)
                .job("c", 0, 3, 0)
                .lease(&[("a", PAST), ("b", PAST + 1), ("c", PAST + 2)]),
            n: 2,
            reply: (2, 0),
            after: State::default()
                .job("a", 1, 3, 0)
                .job("b", 1, 3, 0)
                .job("c", 0, 3, 0)
                .ready(H, &["b", "a"])
                .error("a", "lease expired")
                .error("b", "lease expired")
                .lease(&[("c", PAST + 2)])
                .counter("reclaimed", 2),
        },
        Reclaim {
            name: "a lease whose job was purged is dropped",
            before: State::default().lease(&[("ghost", PAST)]),
            n: 100,
            reply: (0, 0),
            after: State::default(),
        },
        Reclaim {
            name: "dead-lettering by reclaim respects the cap",
            before: State::default()
                .job("old", 3, 3, 1)
                .dead(&[("old", 5)])
                .error("old", "x")
                .job("a", 0, 1, 1)
                .lease(&[("a", PAST)])
                .setting("dead_cap", "1"),
            n: 100,
            reply: (0, 1),
            after: State::default()
                .setting("dead_cap", "1")
                .job("a", 1, 1, 1)
                .dead(&[("a", NOW)])
                .error("a", "lease expired after 1 attempts")
                .counter("reclaimed", 1)
                .counter("dead", 1)
                .counter("trimmed", 1),
        },
    ]
}

#[tokio::test]
async fn reclaim_table() {
    let ctx = Ctx::new("reclaim").await;
    for c in reclaim_cases() {
        let n = c.n;
        let r = run_case(
            &ctx,
            c.name,
            &c.before,
            |mut conn, k| async move { scripts::reclaim(&mut conn, &k, n).await },
            &c.after,
        )
        .await;
        assert_eq!((r.requeued, r.dead), c.reply, "case {:?}", c.name);
    }
}

/// name, (id, token) pairs, lost ids, state after.
type ExtendCase = (
    &'static str,
    Vec<(&'static str, u64)>,
    &'static [&'static str],
    State,
);

#[tokio::test]
async fn extend_table() {
    let ctx = Ctx::new("extend").await;
    let before = State::default()
        .job("a", 0, 3, 1)
        .job("b", 0, 3, 1)
        .lease(&[("a", FUTURE), ("b", FUTURE + 5)]);
    let cases: Vec<ExtendCase> = vec![
        (
            "held lease: new deadline = Redis time + visibility",
            vec![("a", FUTURE)],
            &[],
            before.clone().lease(&[("a", NOW + 10_000), ("b", FUTURE + 5)]),
        ),
        (
            "stale token and unknown id reported lost, untouched",
            vec![("b", FUTURE), ("zz", FUTURE), ("a", FUTURE)],
            &["b", "zz"],
            before.clone().lease(&[("a", NOW + 10_000), ("b", FUTURE + 5)]),
        ),
    ];
    for (name, held, lost, after) in cases {
        let t0 = ctx.now_ms().await;
        let (deadline, got_lost) = run_case(
            &ctx,
            name,
            &before,
            |mut c, k| async move { scripts::extend(&mut c, &k, 10_000, &held).await },
            &after,
        )
        .await;
        check_time(name, NOW + 10_000, deadline, (t0, ctx.now_ms().await));
        assert_eq!(got_lost, lost, "case {name:?}");
    }
}

/// The heartbeat changes the token: the old one no longer settles, the new one does.
#[tokio::test]
async fn extend_changes_the_token() {
    let ctx = Ctx::new("extoken").await;
    let mut c = ctx.c();
    let k = &ctx.keys;
    ctx.producer()
        .enqueue(weir::NewJob::new("k", &1).unwrap().id("a"))
        .await
        .unwrap();
    let f = scripts::fetch(&mut c, k, 1, 10_000).await.unwrap();
    let t1 = f.deadline_ms;
    wait_until("the clock to move", Duration::from_secs(5), || {
        let mut c = ctx.c();
        async move { redis_now_ms(&mut c).await > t1 - 10_000 }
    })
    .await;
    let (t2, lost) = scripts::extend(&mut c, k, 10_000, &[("a", t1)]).await.unwrap();
    assert!(lost.is_empty() && t2 > t1);
    let (_, lost) = scripts::extend(&mut c, k, 10_000, &[("a", t1)]).await.unwrap();
    assert_eq!(lost, ["a"], "the pre-heartbeat token is stale");
    let stale = Settle::Ack {
        id: "a".into(),
        token: t1,
    };
    assert_eq!(scripts::settle(&mut c, k, &[stale]).await.unwrap().missed, ["a"]);
    let fresh = Settle::Ack {
        id: "a".into(),
        token: t2,
    };
    assert!(
        scripts::settle(&mut c, k, &[fresh])
            .await
            .unwrap()
            .missed
            .is_empty()
    );
    assert_eq!(
        ctx.snapshot().await,
        State::default()
            .counter("enqueued", 1)
            .counter("fetched", 1)
            .counter("acked", 1)
    );
}

/// name, (id, token, priority) triples, missed ids, state after.
type ReleaseCase = (
    &'static str,
    Vec<(&'static str, u64, Priority)>,
    &'static [&'static str],
    State,
);

#[tokio::test]
async fn release_table() {
    let ctx = Ctx::new("release").await;
    let before = State::default()
        .job("a", 1, 3, 1)
        .job("b", 0, 3, 1)
        .job("c", 0, 3, 0)
        .job("x", 0, 3, 1)
        .ready(N, &["x"])
        .lease(&[("a", FUTURE), ("b", FUTURE), ("c", FUTURE)]);
    let all = vec![
        ("a", FUTURE, Priority::Normal),
        ("b", FUTURE, Priority::Normal),
        ("c", FUTURE, Priority::High),
    ];
    let cases: Vec<ReleaseCase> = vec![
        (
            "un-started jobs go to the front of ready in fetch order, attempts untouched",
            all.clone(),
            &[],
            before
                .clone()
                .lease(&[])
                .ready(N, &["a", "b", "x"])
                .ready(H, &["c"]),
        ),
        (
            "stale token or unknown id: reported, lease kept",
            vec![
                ("a", FUTURE + 1, Priority::Normal),
                ("b", FUTURE, Priority::Normal),
                ("zz", FUTURE, Priority::Low),
            ],
            &["zz", "a"],
            before
                .clone()
                .lease(&[("a", FUTURE), ("c", FUTURE)])
                .ready(N, &["b", "x"]),
        ),
        ("nothing to release", vec![], &[], before.clone()),
    ];
    for (name, held, missed, after) in cases {
        let mut got = run_case(
            &ctx,
            name,
            &before,
            |mut c, k| async move { scripts::release(&mut c, &k, &held).await },
            &after,
        )
        .await;
        got.sort();
        let mut want = missed.to_vec();
        want.sort();
        assert_eq!(got, want, "case {name:?}");
    }
}

/// Released jobs come back out of fetch in the order they were first fetched.
#[tokio::test]
async fn released_jobs_are_fetched_again_first_in_order() {
    let ctx = Ctx::new("relorder").await;
    let mut c = ctx.c();
    let k = &ctx.keys;
    let jobs = (0..6).map(|i| weir::NewJob::new("k", &i).unwrap().id(format!("j{i}")));
    ctx.producer().enqueue_bulk(jobs).await.unwrap();
    let f = scripts::fetch(&mut c, k, 3, 60_000).await.unwrap();
    let ids: Vec<String> = f.jobs.iter().map(|(id, _)| id.clone()).collect();
    assert_eq!(ids, ["j0", "j1", "j2"]);
    let held: Vec<(&str, u64, Priority)> = ids
        .iter()
        .map(|id| (id.as_str(), f.deadline_ms, Priority::Normal))
        .collect();
    assert!(scripts::release(&mut c, k, &held).await.unwrap().is_empty());
    let again = scripts::fetch(&mut c, k, 10, 60_000).await.unwrap();
    let ids: Vec<&str> = again.jobs.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["j0", "j1", "j2", "j3", "j4", "j5"]);
    assert!(again.jobs.iter().all(|(_, e)| e.starts_with(br#"{"attempt":0,"#)));
}
