//! Inline jobs (lib.lua's items: the envelope is the ready-list item and the lease member,
//! with nothing in the jobs hash) through the lease scripts: fetched beside jobs stored by
//! id, acked by one ZREM without a token read, adopted by id for a retry, a dead letter or
//! a reclaim, released and extended as they are.

use crate::N;
use crate::common::*;
use std::time::Duration;
use weir::Priority;
use weir::queue::retry_policy::DeferralBudget;
use weir::queue::scripts::{self, Reclaimed, Settle};

const VT: u64 = 30_000;

/// Job `id`'s envelope (normal priority, 3 attempts): its inline item.
fn item(id: &str) -> String {
    env(id, 0, 3, 1)
}

#[tokio::test]
async fn fetch_leases_inline_jobs_by_their_envelopes_beside_jobs_by_id() {
    let ctx = Ctx::new("inline-fetch").await;
    let (a, c) = (item("a"), item("c"));
    let before = State::default().ready(N, &[&a, "b", &c]).job("b", 0, 3, 1);
    let after = State::default()
        .job("b", 0, 3, 1)
        .lease(&[(&a, NOW + VT), ("b", NOW + VT), (&c, NOW + VT)])
        .counter("fetched", 3);
    let f = run_case(
        &ctx,
        "mixed ready list",
        &before,
        |mut conn, k| async move { scripts::fetch(&mut conn, &k, 10, VT).await },
        &after,
    )
    .await;
    let names: Vec<&str> = f.jobs.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(
        names,
        [a.as_str(), "b", c.as_str()],
        "inline jobs are named by their envelopes"
    );
    for j in &f.jobs {
        let (name, e) = (&j.name, j.envelope());
        assert_eq!(j.is_inline(), name != "b");
        let want = if name == "b" { item("b") } else { name.clone() };
        assert_eq!(String::from_utf8(e.to_vec()).unwrap(), want);
        let job = j.decode(usize::MAX).unwrap();
        let by_bytes = weir::queue::envelope::decode(name, e, usize::MAX).unwrap();
        assert_eq!(
            (&job.id, job.payload.get()),
            (&by_bytes.id, by_bytes.payload.get())
        );
        assert_eq!(job.id, item_id(&want).unwrap());
    }
}

#[tokio::test]
async fn inline_acks_remove_the_lease_and_count_what_they_missed() {
    let ctx = Ctx::new("inline-ack").await;
    let (a, b, gone) = (item("a"), item("b"), item("gone"));
    let before = State::default()
        .lease(&[(&a, FUTURE), (&b, FUTURE)])
        .started(&b, "c1")
        .lease_token(&a, FUTURE - 5);
    let items = vec![
        Settle::Ack {
            id: a.clone(),
            token: FUTURE - 5,
        },
        Settle::Ack {
            id: b.clone(),
            token: FUTURE,
        },
        Settle::Ack {
            id: gone.clone(),
            token: FUTURE,
        },
    ];
    let after = State::default().started(&b, "c1").counter("acked", 2);
    let settled = run_case(
        &ctx,
        "two held, one gone",
        &before,
        |mut conn, k| async move { scripts::settle(&mut conn, &k, &items).await },
        &after,
    )
    .await;
    assert!(settled.missed.is_empty(), "{:?}", settled.missed);
    assert_eq!(settled.missed_inline, 1);

    // With its start mark named as ended, the mark goes with the ack.
    let before = State::default().lease(&[(&b, FUTURE)]).started(&b, "c1");
    let ended = [b.clone()];
    let items = vec![Settle::Ack {
        id: b.clone(),
        token: FUTURE,
    }];
    let marks = scripts::StartMarks {
        tag: "c1",
        started: &[],
        ended: &ended,
    };
    let settled = run_case(
        &ctx,
        "marked ack",
        &before,
        |mut conn, k| async move { scripts::settle_marked(&mut conn, &k, &items, marks).await },
        &State::default().counter("acked", 1),
    )
    .await;
    assert_eq!(settled.missed_inline, 0);
}

#[tokio::test]
async fn failures_of_inline_jobs_adopt_them_by_id() {
    let ctx = Ctx::new("inline-fail").await;
    let (a, b, x) = (item("a"), item("b"), r#"{"not":"weir's"}"#.to_string());
    let before = State::default()
        .lease(&[(&a, FUTURE), (&b, FUTURE), (&x, FUTURE)])
        .started(&a, "c1");
    let items = vec![
        Settle::Retry {
            id: a.clone(),
            token: FUTURE,
            priority: Priority::Normal,
            delay_ms: 5_000,
            error: "boom".into(),
        },
        Settle::Dead {
            id: b.clone(),
            token: FUTURE,
            reason: "bad".into(),
        },
        Settle::Dead {
            id: x.clone(),
            token: FUTURE,
            reason: "unreadable".into(),
        },
        // not held (another token): reported by the name it was given
        Settle::Dead {
            id: item("c"),
            token: FUTURE,
            reason: "late".into(),
        },
    ];
    let unnamed = format!("unnamed-{}", sha1_hex(&x));
    let after = State {
        jobs: [
            ("a".to_string(), env("a", 1, 3, 1)),
            ("b".to_string(), item("b")),
            (unnamed.clone(), x.clone()),
        ]
        .into_iter()
        .collect(),
        ..State::default()
    }
    .delayed(N, &[("a", NOW + 5_000)])
    .dead(&[("b", NOW), (&unnamed, NOW)])
    .error("a", "boom")
    .error("b", "bad")
    .error(&unnamed, "unreadable")
    .counter("retried", 1)
    .counter("dead", 2);
    let settled = run_case(
        &ctx,
        "retry, dead, unnamed dead, late",
        &before,
        |mut conn, k| async move { scripts::settle(&mut conn, &k, &items).await },
        &after,
    )
    .await;
    assert_eq!(settled.missed, [item("c")]);
}

#[tokio::test]
async fn expired_inline_leases_are_reclaimed_by_id() {
    let ctx = Ctx::new("inline-reclaim").await;
    let (a, s) = (item("a"), item("s"));
    let before = State::default()
        .lease(&[(&a, PAST), (&s, PAST)])
        .started(&s, "c1");
    let after = State::default()
        .job("a", 0, 3, 1)
        .job("s", 0, 3, 1)
        .ready(N, &["a"])
        .suspects(&["s"])
        .deferral("a", 1, NOW)
        .error("a", "lease expired before its run started")
        .counter("reclaimed", 2)
        .counter("deferred", 1);
    let budget = DeferralBudget {
        max_deferrals: 1_000,
        max_age: Duration::from_secs(86_400),
    };
    let r = run_case(
        &ctx,
        "never ran, and ran",
        &before,
        |mut conn, k| async move { scripts::reclaim(&mut conn, &k, 100, budget).await },
        &after,
    )
    .await;
    assert_eq!(
        r,
        Reclaimed {
            returned: 1,
            suspects: 1,
            ..Reclaimed::default()
        }
    );
}

#[tokio::test]
async fn inline_leases_extend_and_release_as_they_are() {
    let ctx = Ctx::new("inline-upkeep").await;
    let (a, b) = (item("a"), item("b"));
    let before = State::default().lease(&[(&a, FUTURE), (&b, FUTURE)]);
    let held = [(a.as_str(), FUTURE), (b.as_str(), FUTURE + 1)];
    let after = State::default()
        .lease(&[(&a, NOW + 10_000), (&b, FUTURE)])
        .lease_token(&a, FUTURE);
    let (_, lost) = run_case(
        &ctx,
        "extend",
        &before,
        |mut c, k| async move { scripts::extend(&mut c, &k, 10_000, &held).await },
        &after,
    )
    .await;
    assert_eq!(lost, std::slice::from_ref(&b));

    let held = [
        (a.as_str(), FUTURE, Priority::Normal),
        (b.as_str(), FUTURE, Priority::Normal),
    ];
    let missed = run_case(
        &ctx,
        "release",
        &before,
        |mut c, k| async move { scripts::release(&mut c, &k, &held).await },
        &State::default().ready(N, &[&a, &b]),
    )
    .await;
    assert!(missed.is_empty(), "{missed:?}");

    let marked = run_case(
        &ctx,
        "start_suspect",
        &before,
        |mut c, k| async move { scripts::start_suspect(&mut c, &k, &a, FUTURE, "c1").await },
        &before.clone().started(&item("a"), "c1:s"),
    )
    .await;
    assert!(marked);
}

/// SHA-1 of `s` in hex, as Lua's `redis.sha1hex` gives it.
fn sha1_hex(s: &str) -> String {
    let out = std::process::Command::new("sha1sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(s.as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    String::from_utf8(out.stdout).unwrap()[..40].to_string()
}

/// Acks of inline jobs alone, as plain commands: the leases go, with the start marks and
/// token records named; the counter counts what was held, a retried call included.
#[tokio::test]
async fn plain_inline_acks_leave_what_the_script_leaves() {
    let ctx = Ctx::new("inline-plain").await;
    let (a, b, c, gone) = (item("a"), item("b"), item("c"), item("gone"));
    let before = State::default()
        .lease(&[(&a, FUTURE), (&b, FUTURE), (&c, FUTURE)])
        .started(&b, "c1")
        .lease_token(&a, FUTURE - 5)
        .counter("acked", 7);
    let items: Vec<Settle> = [&a, &b, &gone]
        .iter()
        .map(|id| Settle::Ack {
            id: id.to_string(),
            token: FUTURE,
        })
        .collect();
    let (ended, extended) = (vec![b.clone()], vec![a.clone()]);
    let after = State::default().lease(&[(&c, FUTURE)]).counter("acked", 9);
    let settled = run_case(
        &ctx,
        "two held, one gone",
        &before,
        |mut conn, k| {
            let (items, ended, extended) = (items.clone(), ended.clone(), extended.clone());
            async move { scripts::ack_inline(&mut conn, &k, &items, &ended, &extended).await }
        },
        &after,
    )
    .await;
    assert!(settled.missed.is_empty() && settled.spent.is_empty());
    assert_eq!(settled.missed_inline, 1);

    // The same call again (its first reply lost): nothing held, nothing more counted.
    let again = run_case(
        &ctx,
        "retried",
        &after,
        |mut conn, k| async move { scripts::ack_inline(&mut conn, &k, &items, &ended, &extended).await },
        &after,
    )
    .await;
    assert_eq!(again.missed_inline, 3);
}

#[tokio::test]
async fn fetch_says_when_a_concurrency_is_set() {
    let ctx = Ctx::new("inline-conc").await;
    for (setting, set) in [
        (None, false),
        (Some(("global_concurrency", "5")), true),
        (Some(("key_concurrency", "2")), true),
        (Some(("key_overrides", "1")), true),
        (Some(("global_rate", "10/s")), false),
    ] {
        let before = match setting {
            Some((f, v)) => State::default().setting(f, v),
            None => State::default(),
        };
        let f = run_case(
            &ctx,
            "empty queue",
            &before,
            |mut conn, k| async move { scripts::fetch(&mut conn, &k, 10, VT).await },
            &before,
        )
        .await;
        assert_eq!(f.global.concurrency_set, set, "{setting:?}");
    }
}

/// The items of `k`'s normal ready list and of its lease set.
async fn items(c: &mut weir::Conn, k: &weir::queue::keys::QueueKeys) -> (Vec<String>, Vec<String>) {
    let list: Vec<String> = redis::cmd("LRANGE")
        .arg(k.ready(Priority::Normal))
        .arg(0)
        .arg(-1)
        .query_async(c)
        .await
        .unwrap();
    let leased: Vec<String> = redis::cmd("ZRANGE")
        .arg(k.lease())
        .arg(0)
        .arg(-1)
        .query_async(c)
        .await
        .unwrap();
    (list, leased)
}

/// Job `id`'s envelope in `k`'s jobs hash.
async fn stored(c: &mut weir::Conn, k: &weir::queue::keys::QueueKeys, id: &str) -> Option<String> {
    redis::cmd("HGET")
        .arg(k.jobs())
        .arg(id)
        .query_async(c)
        .await
        .unwrap()
}

/// A job over `INLINE_MAX_BYTES` is stored by its id even where a small one goes inline:
/// the list, the lease set and the ack name it by its id, so its envelope crosses the
/// wire once (in the fetch) and the lease set holds no copy of it.
#[tokio::test]
async fn a_large_job_is_stored_and_leased_by_its_id() {
    let ctx = Ctx::new("inline-large").await;
    let k = weir::queue::keys::QueueKeys::new(&ctx.queue).unwrap();
    let mut c = ctx.c();
    let p = ctx.producer();
    let big = "x".repeat(scripts::INLINE_MAX_BYTES);
    let small = p.enqueue(weir::NewJob::new("k", "small").unwrap()).await.unwrap();
    let large = p.enqueue(weir::NewJob::new("k", &big).unwrap()).await.unwrap();
    let (list, _) = items(&mut c, &k).await;
    assert_eq!(list.len(), 2, "{list:?}");
    assert!(
        list[0].starts_with('{') && list[0].contains(&small),
        "a small job is inline: {}",
        &list[0]
    );
    assert_eq!(list[1], large, "a large job is listed by its id");
    let envelope = stored(&mut c, &k, &large).await;
    assert!(
        envelope.is_some_and(|e| e.contains(&big)),
        "its envelope is in the jobs hash"
    );

    let f = scripts::fetch(&mut c, &k, 10, VT).await.unwrap();
    let fetched: Vec<(bool, &str)> = f.jobs.iter().map(|j| (j.is_inline(), j.name.as_str())).collect();
    assert_eq!(fetched[1], (false, large.as_str()), "leased by its id");
    let job = f.jobs[1].decode(usize::MAX).unwrap();
    assert_eq!(
        job.payload.get(),
        format!("\"{big}\""),
        "the fetch carries the envelope"
    );
    let (_, leased) = items(&mut c, &k).await;
    assert!(leased.contains(&large), "{leased:?}");

    let acks = [Settle::Ack {
        id: large.clone(),
        token: f.deadline_ms,
    }];
    scripts::settle(&mut c, &k, &acks).await.unwrap();
    assert_eq!(
        stored(&mut c, &k, &large).await,
        None,
        "acked by its id, its envelope goes"
    );
    let (_, leased) = items(&mut c, &k).await;
    assert_eq!(leased.len(), 1, "only the small job's lease is left: {leased:?}");
}

/// A bulk load writes what `enqueue` writes: its large jobs with generated ids by their
/// ids, the rest inline.
#[tokio::test]
async fn a_bulk_load_stores_its_large_jobs_by_id() {
    let ctx = Ctx::new("inline-large-bulk").await;
    let k = weir::queue::keys::QueueKeys::new(&ctx.queue).unwrap();
    let mut c = ctx.c();
    let big = "x".repeat(scripts::INLINE_MAX_BYTES);
    let report = ctx
        .producer()
        .bulk("k")
        .enqueue(["small", &big, "small"])
        .await
        .unwrap();
    assert_eq!(report.enqueued, 3);
    let (list, _) = items(&mut c, &k).await;
    let inline: Vec<bool> = list.iter().map(|i| i.starts_with('{')).collect();
    assert_eq!(inline, [true, false, true], "{list:?}");
    let envelope = stored(&mut c, &k, &list[1]).await;
    assert!(
        envelope.is_some_and(|e| e.contains(&big)),
        "its envelope is in the jobs hash"
    );
    let f = scripts::fetch(&mut c, &k, 10, VT).await.unwrap();
    let job = f.jobs[1].decode(usize::MAX).unwrap();
    assert_eq!(job.id, list[1]);
    assert_eq!(job.payload.get(), format!("\"{big}\""));
}
