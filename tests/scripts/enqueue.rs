//! enqueue.lua: routing by priority and delay, duplicate ids refused while the job exists.

use crate::common::*;
use crate::{H, L, N};
use weir::queue::scripts::{self, EnqueueArg};
use weir::{Error, NewJob, Priority};

fn arg(id: &str, p: Priority, delay_ms: u64, run_at_ms: u64) -> EnqueueArg {
    EnqueueArg {
        id: id.into(),
        priority: p,
        delay_ms,
        run_at_ms,
        envelope: env(id, 0, 3, p as u8).into_bytes(),
        unique: true,
        unique_for_ms: 0,
    }
}

/// Jobs a (normal), b (high), c (low), d (normal) routed to their lists, in order, as
/// `enqueue.lua` stores them (ids chosen or generated): ids in the lists, envelopes in
/// the jobs hash.
fn routed() -> State {
    State::default()
        .ready(H, &["b"])
        .ready(N, &["a", "d"])
        .ready(L, &["c"])
        .job("a", 0, 3, 1)
        .job("b", 0, 3, 0)
        .job("c", 0, 3, 2)
        .job("d", 0, 3, 1)
        .counter("enqueued", 4)
}

/// `routed()` as `enqueue_plain` (a batch of generated ids, all ready now) stores it: the
/// same lists in the same order, each job inline (its envelope is the list item), nothing
/// in the jobs hash. Their cases in `enqueue_table` must stay in step.
fn routed_inline() -> State {
    let e = |id: &str, p: u8| env(id, 0, 3, p);
    State::default()
        .ready(H, &[&e("b", 0)])
        .ready(N, &[&e("a", 1), &e("d", 1)])
        .ready(L, &[&e("c", 2)])
        .counter("enqueued", 4)
}

/// Jobs a, b, c, d with `routed()`'s priorities, ready now; `generated[i]` marks an id as
/// weir's own (`unique: false`).
fn generated(generated: &[bool; 4]) -> Vec<EnqueueArg> {
    ["a", "b", "c", "d"]
        .iter()
        .zip([Priority::Normal, Priority::High, Priority::Low, Priority::Normal])
        .zip(generated)
        .map(|((id, p), g)| EnqueueArg {
            unique: !g,
            ..arg(id, p, 0, 0)
        })
        .collect()
}

struct Case {
    name: &'static str,
    before: State,
    jobs: Vec<EnqueueArg>,
    dups: &'static [&'static str],
    after: State,
}

/// The table: state before, the batch, the ids refused, state after.
fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "empty batch changes nothing",
            before: State::default(),
            jobs: vec![],
            dups: &[],
            after: State::default(),
        },
        Case {
            name: "ready jobs go to their priority's list, in order (the script, ids chosen)",
            before: State::default(),
            jobs: generated(&[false; 4]),
            dups: &[],
            after: routed(),
        },
        Case {
            name: "generated ids ready now take the plain bulk path: the same lists, inline",
            before: State::default(),
            jobs: generated(&[true; 4]),
            dups: &[],
            after: routed_inline(),
        },
        Case {
            name: "generated ids beside a chosen one take the script's bulk section: the same state",
            before: State::default(),
            jobs: generated(&[true, true, true, false]),
            dups: &[],
            after: routed(),
        },
        Case {
            name: "delay and run_at go to delayed; run_at wins over delay",
            before: State::default(),
            jobs: vec![
                arg("a", Priority::Low, 5_000, 0),
                arg("b", Priority::High, 5_000, FUTURE),
            ],
            dups: &[],
            after: State::default()
                .delayed(L, &[("a", NOW + 5_000)])
                .delayed(H, &[("b", FUTURE)])
                .job("a", 0, 3, 2)
                .job("b", 0, 3, 0)
                .counter("enqueued", 2),
        },
        Case {
            name: "an id that exists (leased, dead or in the batch) is refused, the rest go in",
            before: State::default()
                .job("a", 1, 5, 1)
                .lease(&[("a", FUTURE)])
                .job("z", 3, 3, 1)
                .dead(&[("z", 10)])
                .error("z", "boom")
                .counter("enqueued", 2),
            jobs: vec![
                arg("a", Priority::Normal, 0, 0),
                arg("b", Priority::Normal, 0, 0),
                arg("b", Priority::High, 0, 0),
                arg("z", Priority::Normal, 0, 0),
            ],
            dups: &["a", "b", "z"],
            after: State::default()
                .job("a", 1, 5, 1)
                .lease(&[("a", FUTURE)])
                .job("z", 3, 3, 1)
                .dead(&[("z", 10)])
                .error("z", "boom")
                .ready(N, &["b"])
                .job("b", 0, 3, 1)
                .counter("enqueued", 3),
        },
    ]
}

#[tokio::test]
async fn enqueue_table() {
    let ctx = Ctx::new("enqueue").await;
    for c in cases() {
        let jobs = c.jobs.clone();
        let dups = run_case(
            &ctx,
            c.name,
            &c.before,
            |mut conn, k| async move { scripts::enqueue(&mut conn, &k, &jobs).await },
            &c.after,
        )
        .await;
        assert_eq!(dups, c.dups, "case {:?}: duplicates", c.name);
    }
}

/// The same table through `FCALL weir_enqueue`, as a producer in another language calls
/// it: the library's function leaves the state the script leaves.
#[tokio::test]
async fn enqueue_table_through_the_functions_library() {
    let ctx = Ctx::new("enqueue-fcall").await;
    weir::queue::functions::ensure(&mut ctx.c()).await.unwrap();
    for c in cases() {
        let jobs = c.jobs.clone();
        // (the function is the script: it stores every job by its id)
        let after = if c.after == routed_inline() {
            routed()
        } else {
            c.after
        };
        let dups = run_case(
            &ctx,
            c.name,
            &c.before,
            |mut conn, k| async move { crate::functions::fcall_enqueue(&mut conn, &k, &jobs).await },
            &after,
        )
        .await;
        assert_eq!(dups, c.dups, "case {:?} through FCALL: duplicates", c.name);
    }
}

#[tokio::test]
async fn test_envelopes_match_what_the_producer_writes() {
    let ctx = Ctx::new("envfmt").await;
    let job = NewJob::from_json("k", r#"{"n":1}"#)
        .unwrap()
        .id("a")
        .max_attempts(3)
        .priority(Priority::Low);
    let arg = ctx.producer().prepare(job, ENQUEUED_AT, &mut Vec::new()).unwrap();
    assert_eq!(String::from_utf8(arg.envelope).unwrap(), env("a", 0, 3, 2));
}

/// [`env`] for a job whose header carries `"key":<key>` (`key` as JSON text).
fn env_k(id: &str, key: &str) -> String {
    env(id, 0, 3, 1).replace(",\"payload\":", &format!(",\"key\":{key},\"payload\":"))
}

/// The job key from a producer in another language: stored as written when it is a
/// token; otherwise the call fails with nothing stored, the Lua path and the Functions
/// library alike. A "key" inside the payload is not the job's key.
#[tokio::test]
async fn a_job_key_is_stored_as_written_and_a_bad_one_refused() {
    let ctx = Ctx::new("enqkey").await;
    weir::queue::functions::ensure(&mut ctx.c()).await.unwrap();
    let keyed = |id: &str, env: String| EnqueueArg {
        envelope: env.into_bytes(),
        ..arg(id, Priority::Normal, 0, 0)
    };
    let good = env_k("a", r#""tenant-7.eu:a_b""#);
    let in_payload = env("b", 0, 3, 1).replace(r#"{"n":1}"#, r#"{"n":1,"key":"x y"}"#);
    let jobs = [keyed("a", good.clone()), keyed("b", in_payload.clone())];
    assert!(
        scripts::enqueue(&mut ctx.c(), &ctx.keys, &jobs)
            .await
            .unwrap()
            .is_empty()
    );
    let stored: Vec<String> = redis::cmd("HMGET")
        .arg(ctx.keys.jobs())
        .arg(&["a", "b"])
        .query_async(&mut ctx.c())
        .await
        .unwrap();
    assert_eq!(stored, [good, in_payload]);

    let long = format!(r#""{}""#, "k".repeat(129));
    for bad in [r#""a b""#, r#""a\"b""#, r#""""#, "7", "null", long.as_str()] {
        for fcall in [false, true] {
            let (_, keys) = ctx.other_queue("badkey");
            let jobs = [arg("ok", Priority::Normal, 0, 0), keyed("x", env_k("x", bad))];
            let e = if fcall {
                crate::functions::fcall_enqueue(&mut ctx.c(), &keys, &jobs).await
            } else {
                scripts::enqueue(&mut ctx.c(), &keys, &jobs).await
            }
            .unwrap_err();
            assert!(
                e.to_string().contains(r#"job x has a "key" that is not"#),
                "{bad}: {e}"
            );
            assert_eq!(
                snapshot(&mut ctx.c(), &keys).await,
                State::default(),
                "{bad}: nothing stored"
            );
        }
    }
}

#[tokio::test]
async fn unique_id_is_refused_while_the_job_exists_and_accepted_after_ack() {
    let ctx = Ctx::new("unique").await;
    let p = ctx.producer();
    let job = || NewJob::new("k", &1).unwrap().id("order-42");
    assert_eq!(p.enqueue(job()).await.unwrap(), "order-42");
    assert!(matches!(p.enqueue(job()).await, Err(Error::Duplicate(id)) if id == "order-42"));

    let mut c = ctx.c();
    let f = scripts::fetch(&mut c, &ctx.keys, 10, 60_000).await.unwrap();
    assert_eq!(f.jobs.len(), 1);
    let refused = p
        .enqueue_bulk([job(), NewJob::new("k", &2).unwrap()])
        .await
        .unwrap();
    assert_eq!(
        (refused.enqueued, refused.duplicates),
        (1, vec!["order-42".to_string()])
    );

    let ack = scripts::Settle::Ack {
        id: "order-42".into(),
        token: f.deadline_ms,
    };
    let missed = scripts::settle(&mut c, &ctx.keys, &[ack]).await.unwrap().missed;
    assert!(missed.is_empty());
    assert_eq!(
        p.enqueue(job()).await.unwrap(),
        "order-42",
        "accepted again after ack"
    );
    assert_eq!(ctx.stats().await.ready[N], 2);
}

#[tokio::test]
async fn producer_refuses_what_it_can_check() {
    let ctx = Ctx::new("prodcheck").await;
    let p = ctx.producer().max_envelope_bytes(200);
    let big = NewJob::new("k", &"x".repeat(300)).unwrap();
    assert!(matches!(
        p.enqueue(big).await,
        Err(Error::TooLarge { limit: 200, .. })
    ));
    let bad_id = NewJob::new("k", &1).unwrap().id("has space");
    assert!(matches!(p.enqueue(bad_id).await, Err(Error::InvalidName { .. })));
    let bad_key = NewJob::new("k", &1).unwrap().key("tenant/7");
    assert!(matches!(
        p.enqueue(bad_key).await,
        Err(Error::InvalidName { what: "job key", .. })
    ));
    // a bad job anywhere in a bulk call fails the call with nothing enqueued
    let jobs = vec![
        NewJob::new("k", &1).unwrap(),
        NewJob::new("bad kind", &1).unwrap(),
    ];
    assert!(p.enqueue_bulk(jobs).await.is_err());
    assert_eq!(ctx.snapshot().await, State::default());
    assert!(matches!(
        weir::Producer::new(ctx.c(), "bad{name}"),
        Err(Error::InvalidName { .. })
    ));
}
