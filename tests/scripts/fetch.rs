//! fetch.lua: promotion of due delayed jobs, priority order, partial batches, pause.

use crate::common::*;
use crate::{H, L, N};
use weir::queue::scripts;

const VT: u64 = 30_000;

struct Case {
    name: &'static str,
    before: State,
    n: usize,
    /// Ids returned, in order.
    got: &'static [&'static str],
    paused: bool,
    after: State,
}

fn leased(ids: &[&'static str]) -> Vec<(&'static str, u64)> {
    ids.iter().map(|id| (*id, NOW + VT)).collect()
}

/// The table: state before, the batch size, the ids leased, state after.
fn cases() -> Vec<Case> {
    let three = State::default()
        .ready(N, &["a", "b", "c"])
        .job("a", 0, 3, 1)
        .job("b", 0, 3, 1)
        .job("c", 0, 3, 1);
    let prio = State::default()
        .ready(H, &["h1"])
        .ready(N, &["n1", "n2"])
        .ready(L, &["l1"])
        .job("h1", 0, 3, 0)
        .job("n1", 0, 3, 1)
        .job("n2", 0, 3, 1)
        .job("l1", 0, 3, 2);
    vec![
        Case {
            name: "empty queue",
            before: State::default(),
            n: 10,
            got: &[],
            paused: false,
            after: State::default(),
        },
        Case {
            name: "partial batch: ask 10, 3 ready",
            before: three.clone().counter("fetched", 7),
            n: 10,
            got: &["a", "b", "c"],
            paused: false,
            after: three
                .clone()
                .ready(N, &[])
                .lease(&leased(&["a", "b", "c"]))
                .counter("fetched", 10),
        },
        Case {
            name: "high before normal before low",
            before: prio.clone(),
            n: 3,
            got: &["h1", "n1", "n2"],
            paused: false,
            after: prio
                .clone()
                .ready(H, &[])
                .ready(N, &[])
                .lease(&leased(&["h1", "n1", "n2"]))
                .counter("fetched", 3),
        },
        Case {
            name: "paused: nothing handed out",
            before: three.clone().paused(true),
            n: 10,
            got: &[],
            paused: true,
            after: three.clone().paused(true),
        },
        Case {
            name: "delayed not yet due stays delayed",
            before: State::default().delayed(N, &[("d", FUTURE)]).job("d", 0, 3, 1),
            n: 10,
            got: &[],
            paused: false,
            after: State::default().delayed(N, &[("d", FUTURE)]).job("d", 0, 3, 1),
        },
        Case {
            name: "due delayed jobs are promoted behind the ready ones, then fetched",
            before: State::default()
                .ready(N, &["r"])
                .delayed(N, &[("d", PAST), ("later", FUTURE)])
                .delayed(H, &[("dh", PAST)])
                .job("r", 0, 3, 1)
                .job("d", 1, 3, 1)
                .job("dh", 1, 3, 0)
                .job("later", 0, 3, 1),
            n: 10,
            got: &["dh", "r", "d"],
            paused: false,
            after: State::default()
                .delayed(N, &[("later", FUTURE)])
                .job("r", 0, 3, 1)
                .job("d", 1, 3, 1)
                .job("dh", 1, 3, 0)
                .job("later", 0, 3, 1)
                .lease(&leased(&["dh", "r", "d"]))
                .counter("fetched", 3),
        },
        // A delayed set alone in the queue, of the first priority and of the last: found
        // by the fetch's one look for any delayed set.
        Case {
            name: "a due high-priority job alone is promoted, then fetched",
            before: State::default().delayed(H, &[("dh", PAST)]).job("dh", 1, 3, 0),
            n: 10,
            got: &["dh"],
            paused: false,
            after: State::default()
                .job("dh", 1, 3, 0)
                .lease(&leased(&["dh"]))
                .counter("fetched", 1),
        },
        Case {
            name: "a due low-priority job alone is promoted, then fetched",
            before: State::default().delayed(L, &[("dl", PAST)]).job("dl", 1, 3, 2),
            n: 10,
            got: &["dl"],
            paused: false,
            after: State::default()
                .job("dl", 1, 3, 2)
                .lease(&leased(&["dl"]))
                .counter("fetched", 1),
        },
        Case {
            name: "promotion is bounded by N per call",
            before: State::default()
                .delayed(N, &[("d1", PAST), ("d2", PAST + 1), ("d3", PAST + 2)])
                .job("d1", 0, 3, 1)
                .job("d2", 0, 3, 1)
                .job("d3", 0, 3, 1),
            n: 1,
            got: &["d1"],
            paused: false,
            after: State::default()
                .delayed(N, &[("d2", PAST + 1), ("d3", PAST + 2)])
                .job("d1", 0, 3, 1)
                .job("d2", 0, 3, 1)
                .job("d3", 0, 3, 1)
                .lease(&leased(&["d1"]))
                .counter("fetched", 1),
        },
        Case {
            name: "an id whose envelope was purged is dropped, not leased",
            before: State::default().ready(N, &["ghost", "a"]).job("a", 0, 3, 1),
            n: 10,
            got: &["a"],
            paused: false,
            after: State::default()
                .job("a", 0, 3, 1)
                .lease(&leased(&["a"]))
                .counter("fetched", 1),
        },
    ]
}

#[tokio::test]
async fn fetch_table() {
    let ctx = Ctx::new("fetch").await;
    for c in cases() {
        let (n, before) = (c.n, c.before.clone());
        let t0 = ctx.now_ms().await;
        let f = run_case(
            &ctx,
            c.name,
            &c.before,
            |mut conn, k| async move { scripts::fetch(&mut conn, &k, n, VT).await },
            &c.after,
        )
        .await;
        let t1 = ctx.now_ms().await;
        let ids: Vec<&str> = f.jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(ids, c.got, "case {:?}: ids", c.name);
        for j in &f.jobs {
            let id = &j.name;
            assert_eq!(
                Some(&String::from_utf8(j.envelope().to_vec()).unwrap()),
                before.jobs.get(id),
                "{id}"
            );
        }
        assert_eq!(f.paused, c.paused, "case {:?}: paused flag", c.name);
        if c.got.is_empty() {
            assert_eq!(f.deadline_ms, 0, "case {:?}", c.name);
        } else {
            check_time(c.name, NOW + VT, f.deadline_ms, (t0, t1));
        }
    }
}

#[tokio::test]
async fn empty_fetch_says_when_the_next_delayed_job_is_due() {
    let ctx = Ctx::new("nextdue").await;
    let now = ctx.now_ms().await;
    let before = State::default()
        .delayed(L, &[("soon", now + 60_000)])
        .delayed(H, &[("later", now + 120_000)])
        .job("soon", 0, 3, 2)
        .job("later", 0, 3, 0);
    let f = run_case(
        &ctx,
        "next due",
        &before,
        |mut c, k| async move { scripts::fetch(&mut c, &k, 10, VT).await },
        &before,
    )
    .await;
    assert!(f.jobs.is_empty() && !f.paused);
    assert!(
        (50_000..=60_000).contains(&f.next_due_ms),
        "next due in {} ms, expected about 60 s",
        f.next_due_ms
    );
}

/// A fetch that takes the last ready job says so, with the next due time, so the fetcher
/// waits for a wake message instead of asking again; one that may have left jobs behind
/// (it filled its batch, or a suspect waits) does not.
#[tokio::test]
async fn a_fetch_that_takes_the_last_ready_job_says_so() {
    let ctx = Ctx::new("emptied").await;
    let now = ctx.now_ms().await;
    let three = State::default()
        .ready(N, &["a", "b", "c"])
        .delayed(L, &[("soon", now + 60_000)])
        .job("a", 0, 3, 1)
        .job("b", 0, 3, 1)
        .job("c", 0, 3, 1)
        .job("soon", 0, 3, 2);
    // (name, state before, N, emptied, next due about 60 s)
    let cases = [
        (
            "asks more than ready: emptied, with the next due time",
            three.clone(),
            10,
            true,
            true,
        ),
        (
            "asks exactly what is ready: not known to be empty",
            three.clone(),
            3,
            false,
            false,
        ),
        ("asks fewer than ready", three.clone(), 2, false, false),
        (
            "a suspect still waits: not emptied",
            three
                .clone()
                .suspects(&["s1", "s2"])
                .job("s1", 0, 3, 1)
                .job("s2", 0, 3, 1),
            10,
            false,
            false,
        ),
        (
            "the last suspect taken, ready emptied",
            three.clone().suspects(&["s1"]).job("s1", 0, 3, 1),
            10,
            true,
            true,
        ),
    ];
    for (name, before, n, emptied, due) in cases {
        let (_, keys) = ctx.other_queue("case");
        seed(&mut ctx.c(), &keys, &before).await;
        let f = scripts::fetch(&mut ctx.c(), &keys, n, VT).await.unwrap();
        assert!(!f.jobs.is_empty(), "{name}");
        assert_eq!(f.emptied, emptied, "{name}");
        assert_eq!(
            (50_000..=60_000).contains(&f.next_due_ms),
            due,
            "{name}: next due in {} ms",
            f.next_due_ms
        );
        if !due {
            assert_eq!(f.next_due_ms, 0, "{name}");
        }
    }
    // An empty fetch is not "emptied": it took nothing (it says when to look again).
    let (_, keys) = ctx.other_queue("case");
    let f = scripts::fetch(&mut ctx.c(), &keys, 10, VT).await.unwrap();
    assert!(f.jobs.is_empty() && !f.emptied);
}

/// name, state before, N, ids returned, how many of them are suspects, state after.
type SuspectCase = (&'static str, State, usize, &'static [&'static str], usize, State);

/// Suspects (jobs that were running when a consumer died) come first, one per call, and
/// are flagged as such.
#[tokio::test]
async fn suspects_come_first_one_per_call() {
    let ctx = Ctx::new("suspects").await;
    let queue = State::default()
        .suspects(&["s1", "s2"])
        .ready(N, &["a", "b"])
        .job("s1", 0, 3, 1)
        .job("s2", 1, 3, 0)
        .job("a", 0, 3, 1)
        .job("b", 0, 3, 1);
    let cases: Vec<SuspectCase> = vec![
        (
            "one suspect, then ready jobs",
            queue.clone(),
            3,
            &["s1", "a", "b"],
            1,
            queue
                .clone()
                .suspects(&["s2"])
                .ready(N, &[])
                .lease(&leased(&["s1", "a", "b"]))
                .counter("fetched", 3),
        ),
        (
            "N = 1: the suspect alone",
            queue.clone(),
            1,
            &["s1"],
            1,
            queue
                .clone()
                .suspects(&["s2"])
                .lease(&leased(&["s1"]))
                .counter("fetched", 1),
        ),
        (
            "a suspect whose envelope was purged is dropped",
            State::default()
                .suspects(&["ghost"])
                .ready(N, &["a"])
                .job("a", 0, 3, 1),
            10,
            &["a"],
            0,
            State::default()
                .job("a", 0, 3, 1)
                .lease(&leased(&["a"]))
                .counter("fetched", 1),
        ),
        (
            "paused: suspects wait too",
            queue.clone().paused(true),
            10,
            &[],
            0,
            queue.clone().paused(true),
        ),
    ];
    for (name, before, n, got, suspects, after) in cases {
        let f = run_case(
            &ctx,
            name,
            &before,
            |mut c, k| async move { scripts::fetch(&mut c, &k, n, VT).await },
            &after,
        )
        .await;
        let ids: Vec<&str> = f.jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!((ids.as_slice(), f.suspects), (got, suspects), "case {name:?}");
    }
}

/// A large envelope does not go through the fetch script (it is read after it, with
/// HMGET), beside a small job with an id of the caller's and an inline one in the same
/// fetch, in order; retried, it comes back with its attempt counted.
#[tokio::test]
async fn a_large_job_fetched_beside_small_ones_and_retried_comes_back_whole() {
    let ctx = Ctx::new("inline-large-mixed").await;
    let k = weir::queue::keys::QueueKeys::new(&ctx.queue).unwrap();
    let mut c = ctx.c();
    let p = ctx.producer();
    let big = "y".repeat(4 * scripts::INLINE_MAX_BYTES);
    let inline = p
        .enqueue(weir::NewJob::new("k", "inline").unwrap())
        .await
        .unwrap();
    let large = p.enqueue(weir::NewJob::new("k", &big).unwrap()).await.unwrap();
    let named = p
        .enqueue(weir::NewJob::new("k", "named").unwrap().id("mine-1"))
        .await
        .unwrap();
    let f = scripts::fetch(&mut c, &k, 10, VT).await.unwrap();
    let jobs: Vec<weir::Job> = f.jobs.iter().map(|j| j.decode(usize::MAX).unwrap()).collect();
    let ids: Vec<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(ids, [inline.as_str(), large.as_str(), named.as_str()]);
    assert_eq!(jobs[1].payload.get(), format!("\"{big}\""));
    assert_eq!(jobs[2].payload.get(), "\"named\"");

    let retry = [scripts::Settle::Retry {
        id: large.clone(),
        token: f.deadline_ms,
        priority: weir::Priority::Normal,
        delay_ms: 0,
        error: "again".into(),
    }];
    scripts::settle(&mut c, &k, &retry).await.unwrap();
    let f = scripts::fetch(&mut c, &k, 10, VT).await.unwrap();
    assert_eq!(f.jobs.len(), 1);
    let job = f.jobs[0].decode(usize::MAX).unwrap();
    assert_eq!((job.id.as_str(), job.attempt), (large.as_str(), 1));
    assert_eq!(job.payload.get(), format!("\"{big}\""));
}

/// Behind a large envelope (read after the script), an envelope stored empty by hand is
/// still an envelope: fetched as one (and dead-lettered as undecodable by the consumer),
/// not taken for a missing job or for one left to read.
#[tokio::test]
async fn an_empty_envelope_behind_a_large_one_is_fetched_as_it_is() {
    let ctx = Ctx::new("large-then-empty").await;
    let k = weir::queue::keys::QueueKeys::new(&ctx.queue).unwrap();
    let mut c = ctx.c();
    let big = "z".repeat(2 * scripts::INLINE_MAX_BYTES);
    let large = ctx
        .producer()
        .enqueue(weir::NewJob::new("k", &big).unwrap())
        .await
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg(k.jobs())
        .arg("empty-1")
        .arg("")
        .query_async(&mut c)
        .await
        .unwrap();
    let _: () = redis::cmd("RPUSH")
        .arg(k.ready(weir::Priority::Normal))
        .arg("empty-1")
        .query_async(&mut c)
        .await
        .unwrap();
    let f = scripts::fetch(&mut c, &k, 10, VT).await.unwrap();
    let fetched: Vec<(&str, usize)> = f
        .jobs
        .iter()
        .map(|j| (j.name.as_str(), j.envelope().len()))
        .collect();
    assert_eq!(fetched.len(), 2, "{fetched:?}");
    assert_eq!(fetched[0].0, large);
    assert!(fetched[0].1 > 2 * scripts::INLINE_MAX_BYTES);
    assert_eq!(fetched[1], ("empty-1", 0));
    assert!(f.jobs[1].decode(usize::MAX).is_err());
}
