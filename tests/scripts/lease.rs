//! extend.lua, release.lua: leases kept alive (with a token that never changes), or
//! handed back. (What happens to leases that expire: reclaim.rs.)

use crate::common::*;
use crate::{H, N};
use std::time::Duration;
use weir::Priority;
use weir::queue::scripts::{self, Settle};

/// name, state before, (id, token) pairs, lost ids, state after.
type ExtendCase = (
    &'static str,
    State,
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
    // `a` was extended once already: its score moved on, its token did not.
    let extended = before
        .clone()
        .lease(&[("a", FUTURE + 100), ("b", FUTURE + 5)])
        .lease_token("a", FUTURE);
    let cases: Vec<ExtendCase> = vec![
        (
            "held lease: new deadline = Redis time + visibility; the token stays the fetch's",
            before.clone(),
            vec![("a", FUTURE)],
            &[],
            before
                .clone()
                .lease(&[("a", NOW + 10_000), ("b", FUTURE + 5)])
                .lease_token("a", FUTURE),
        ),
        (
            "stale token and unknown id reported lost, untouched",
            before.clone(),
            vec![("b", FUTURE), ("zz", FUTURE), ("a", FUTURE)],
            &["b", "zz"],
            before
                .clone()
                .lease(&[("a", NOW + 10_000), ("b", FUTURE + 5)])
                .lease_token("a", FUTURE),
        ),
        (
            "an extended lease is extended again with its fetch token (a lost reply changes nothing)",
            extended.clone(),
            vec![("a", FUTURE)],
            &[],
            extended.clone().lease(&[("a", NOW + 10_000), ("b", FUTURE + 5)]),
        ),
        (
            "a lease another consumer holds now (its token differs) is not extended",
            extended.clone().lease_token("a", FUTURE + 50),
            vec![("a", FUTURE)],
            &["a"],
            extended.clone().lease_token("a", FUTURE + 50),
        ),
    ];
    for (name, before, held, lost, after) in cases {
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

/// A lease's token never changes: after extends (one of whose replies the caller never
/// saw), the fetch token still extends and settles the lease.
#[tokio::test]
async fn extend_keeps_the_token() {
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
    // The first extend's reply is "lost": the caller goes on with its fetch token.
    let (t2, lost) = scripts::extend(&mut c, k, 10_000, &[("a", t1)]).await.unwrap();
    assert!(lost.is_empty() && t2 > t1);
    let (t3, lost) = scripts::extend(&mut c, k, 10_000, &[("a", t1)]).await.unwrap();
    assert!(
        lost.is_empty() && t3 >= t2,
        "the fetch token still holds the lease"
    );
    let stale = Settle::Ack {
        id: "a".into(),
        token: t1 - 1,
    };
    assert_eq!(scripts::settle(&mut c, k, &[stale]).await.unwrap().missed, ["a"]);
    let by_token = Settle::Ack {
        id: "a".into(),
        token: t1,
    };
    assert!(
        scripts::settle(&mut c, k, &[by_token])
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
            .counter("acked", 1),
        "the ack ended the lease and forgot its token"
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

/// An extended lease is released with its fetch token; its token record and any start
/// mark end with it.
#[tokio::test]
async fn release_of_an_extended_lease() {
    let ctx = Ctx::new("relext").await;
    let before = State::default()
        .job("a", 0, 3, 1)
        .job("b", 0, 3, 1)
        .lease(&[("a", FUTURE + 100), ("b", FUTURE + 100)])
        .lease_token("a", FUTURE)
        .lease_token("b", FUTURE + 50)
        .started("a", "c1");
    let held = vec![("a", FUTURE, Priority::Normal), ("b", FUTURE, Priority::Normal)];
    let missed = run_case(
        &ctx,
        "extended lease released; another holder's kept",
        &before,
        |mut c, k| async move { scripts::release(&mut c, &k, &held).await },
        &State::default()
            .job("a", 0, 3, 1)
            .job("b", 0, 3, 1)
            .ready(N, &["a"])
            .lease(&[("b", FUTURE + 100)])
            .lease_token("b", FUTURE + 50),
    )
    .await;
    assert_eq!(missed, ["b"]);
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
    let ids: Vec<String> = f.jobs.iter().map(|j| j.name.clone()).collect();
    assert_eq!(ids, ["j0", "j1", "j2"]);
    let held: Vec<(&str, u64, Priority)> = ids
        .iter()
        .map(|id| (id.as_str(), f.deadline_ms, Priority::Normal))
        .collect();
    assert!(scripts::release(&mut c, k, &held).await.unwrap().is_empty());
    let again = scripts::fetch(&mut c, k, 10, 60_000).await.unwrap();
    let ids: Vec<&str> = again.jobs.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(ids, ["j0", "j1", "j2", "j3", "j4", "j5"]);
    assert!(
        again
            .jobs
            .iter()
            .all(|j| j.envelope().starts_with(br#"{"attempt":0,"#))
    );
}
