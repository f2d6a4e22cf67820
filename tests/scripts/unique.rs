//! Unique keys with a window (enqueue.lua, lib.lua's bury): a job whose key is held is
//! refused, in the same batch or across calls, while the key's job waits, runs or is done;
//! the key expires with its window; a dead-lettered job frees it.

use crate::N;
use crate::common::*;
use weir::queue::scripts::{self, EnqueueArg, Settle};
use weir::{Error, NewJob, Priority};

const HOUR: u64 = 3_600_000;

/// [`env`] for a job that holds unique key `key`.
fn env_u(id: &str, key: &str) -> String {
    env(id, 0, 3, 1).replace(
        ",\"payload\":",
        &format!(",\"unique_key\":\"{key}\",\"payload\":"),
    )
}

/// Job `id` (normal priority, ready now) with a window of an hour on `key`.
fn windowed(id: &str, key: &str, chosen_id: bool) -> EnqueueArg {
    EnqueueArg {
        id: id.into(),
        priority: Priority::Normal,
        delay_ms: 0,
        run_at_ms: 0,
        envelope: env_u(id, key).into_bytes(),
        unique: chosen_id,
        unique_for_ms: HOUR,
    }
}

struct Case {
    name: &'static str,
    before: State,
    jobs: Vec<EnqueueArg>,
    dups: &'static [&'static str],
    after: State,
}

fn cases() -> Vec<Case> {
    let stored = |s: State, id: &str, key: &str| s.raw_job(id, &env_u(id, key)).unique(key, id);
    vec![
        Case {
            name: "a window takes the key; another job with the key is refused, in the same batch too",
            before: State::default(),
            jobs: vec![
                windowed("a", "k1", false),
                windowed("b", "k1", false),
                windowed("c", "k2", false),
            ],
            dups: &["b"],
            after: stored(stored(State::default(), "a", "k1"), "c", "k2")
                .ready(N, &["a", "c"])
                .counter("enqueued", 2),
        },
        Case {
            name: "a key still held by a job that is done refuses a new one",
            before: State::default().unique("k1", "old").counter("enqueued", 1),
            jobs: vec![windowed("a", "k1", true)],
            dups: &["a"],
            after: State::default().unique("k1", "old").counter("enqueued", 1),
        },
        Case {
            name: "a chosen id that exists is refused without taking its key",
            before: State::default().job("a", 0, 3, 1).ready(N, &["a"]),
            jobs: vec![windowed("a", "k3", true)],
            dups: &["a"],
            after: State::default().job("a", 0, 3, 1).ready(N, &["a"]),
        },
    ]
}

#[tokio::test]
async fn unique_table() {
    let ctx = Ctx::new("uniq").await;
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

#[tokio::test]
async fn the_window_starts_when_the_job_is_due() {
    let ctx = Ctx::new("uniqttl").await;
    let p = ctx.producer();
    let job = |key: &str| {
        NewJob::new("k", &1)
            .unwrap()
            .unique_key(key)
            .unique_for(std::time::Duration::from_secs(60))
    };
    p.enqueue(job("now")).await.unwrap();
    p.enqueue_in(std::time::Duration::from_secs(30), job("later"))
        .await
        .unwrap();
    let pttl = |key: &str| format!("{}{key}", ctx.keys.unique_prefix());
    let now: i64 = ctx.cmd(&["PTTL", &pttl("now")]).await;
    let later: i64 = ctx.cmd(&["PTTL", &pttl("later")]).await;
    assert!(
        (55_000..=60_000).contains(&now),
        "window of a ready job: {now} ms"
    );
    assert!(
        (85_000..=90_000).contains(&later),
        "window of a job due in 30 s: {later} ms"
    );
    assert!(matches!(p.enqueue(job("later")).await, Err(Error::Duplicate(_))));
}

#[tokio::test]
async fn the_id_is_the_key_without_unique_key() {
    let ctx = Ctx::new("uniqid").await;
    let p = ctx.producer();
    let job = || {
        NewJob::new("k", &1)
            .unwrap()
            .id("order-7")
            .unique_for(std::time::Duration::from_secs(60))
    };
    p.enqueue(job()).await.unwrap();
    let s = ctx.snapshot().await;
    assert_eq!(s.unique.get("order-7").map(String::as_str), Some("order-7"));
    let mut c = ctx.c();
    let f = scripts::fetch(&mut c, &ctx.keys, 10, 60_000).await.unwrap();
    let ack = Settle::Ack {
        id: "order-7".into(),
        token: f.deadline_ms,
    };
    scripts::settle(&mut c, &ctx.keys, &[ack]).await.unwrap();
    assert!(
        matches!(p.enqueue(job()).await, Err(Error::Duplicate(_))),
        "done within its window: still a duplicate"
    );
    assert!(
        p.enqueue(NewJob::new("k", &1).unwrap().id("order-7"))
            .await
            .is_ok(),
        "without a window only the id counts"
    );
}

#[tokio::test]
async fn a_dead_lettered_job_frees_its_key_and_only_its_own() {
    let ctx = Ctx::new("uniqdead").await;
    let held = |owner: &str| {
        State::default()
            .raw_job("a", &env_u("a", "k1"))
            .lease(&[("a", FUTURE)])
            .unique("k1", owner)
    };
    let dead = |s: Settle| move |mut conn, k| async move { scripts::settle(&mut conn, &k, &[s]).await };
    let bury = Settle::Dead {
        id: "a".into(),
        token: FUTURE,
        reason: "bad".into(),
    };
    let after = |owner: Option<&str>| {
        let s = State::default()
            .raw_job("a", &env_u("a", "k1"))
            .dead(&[("a", NOW)])
            .error("a", "bad")
            .counter("dead", 1);
        match owner {
            Some(o) => s.unique("k1", o),
            None => s,
        }
    };
    run_case(
        &ctx,
        "dead-lettered: its key is free",
        &held("a"),
        dead(bury.clone()),
        &after(None),
    )
    .await;
    run_case(
        &ctx,
        "the key went to another job after the window: kept",
        &held("b"),
        dead(bury),
        &after(Some("b")),
    )
    .await;
    let last_retry = Settle::Retry {
        id: "a".into(),
        token: FUTURE,
        priority: Priority::Normal,
        delay_ms: 0,
        error: "boom".into(),
    };
    let spent = State::default()
        .raw_job("a", &env_u("a", "k1").replace("\"attempt\":0", "\"attempt\":2"))
        .lease(&[("a", FUTURE)])
        .unique("k1", "a");
    let after = State::default()
        .raw_job("a", &env_u("a", "k1").replace("\"attempt\":0", "\"attempt\":3"))
        .dead(&[("a", NOW)])
        .error("a", "boom")
        .counter("dead", 1);
    run_case(
        &ctx,
        "attempts spent: its key is free",
        &spent,
        dead(last_retry),
        &after,
    )
    .await;
}

#[tokio::test]
async fn bad_sections_and_headers_are_refused_with_nothing_stored() {
    let ctx = Ctx::new("uniqbad").await;
    let plain = |id: &str, p: Priority, env: String| EnqueueArg {
        id: id.into(),
        priority: p,
        delay_ms: 0,
        run_at_ms: 0,
        envelope: env.into_bytes(),
        unique: true,
        unique_for_ms: 0,
    };
    let ok = plain("ok", Priority::Normal, env("ok", 0, 3, 1));
    let bad = [
        (
            "window without unique_key",
            EnqueueArg {
                unique_for_ms: HOUR,
                ..plain("a", Priority::Normal, env("a", 0, 3, 1))
            },
            "has unique_for but its envelope has no valid unique_key",
        ),
        (
            "envelope of another id",
            plain("a", Priority::Normal, env("b", 0, 3, 1)),
            "does not open with the header",
        ),
        (
            "envelope of another priority",
            plain("a", Priority::High, env("a", 0, 3, 1)),
            "does not open with the header",
        ),
        (
            "not an envelope",
            plain("a", Priority::Normal, "{}".into()),
            "does not open with the header",
        ),
        (
            "an id outside the alphabet",
            plain("a b", Priority::Normal, env("a b", 0, 3, 1)),
            "invalid job id",
        ),
    ];
    for (what, arg, msg) in bad {
        let (_, keys) = ctx.other_queue("bad");
        let e = scripts::enqueue(&mut ctx.c(), &keys, &[ok.clone(), arg])
            .await
            .unwrap_err();
        assert!(e.to_string().contains(msg), "{what}: {e}");
        assert_eq!(
            snapshot(&mut ctx.c(), &keys).await,
            State::default(),
            "{what}: nothing stored"
        );
    }
}
