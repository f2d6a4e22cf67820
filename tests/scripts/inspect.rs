//! jobs_page.lua, job_show.lua, jobs_delete.lua, job_run_now.lua, dlq_bulk.lua,
//! worker_beat.lua, and the queue registry enqueue keeps.

use crate::common::*;
use crate::{H, L, N};
use weir::queue::scripts::{self, Page};

/// An envelope as `envelope.rs` writes it, of kind `kind`.
fn env_of(id: &str, kind: &str, attempt: u32, priority: u8) -> String {
    env(id, attempt, 5, priority).replace(r#""kind":"k""#, &format!(r#""kind":"{kind}""#))
}

fn ids(p: &Page) -> Vec<&str> {
    p.entries.iter().map(|e| e.id.as_str()).collect()
}

/// Reads one page of `state` from `before` (a read changes nothing).
async fn page(
    ctx: &Ctx,
    before: &State,
    state: &'static str,
    offsets: [u64; 3],
    limit: usize,
    kind: &'static str,
) -> Page {
    let window = if kind.is_empty() { limit } else { 1000 };
    run_case(
        ctx,
        state,
        before,
        |mut c, k| async move { scripts::jobs_page(&mut c, &k, state, offsets, limit, window, kind, "").await },
        before,
    )
    .await
}

#[tokio::test]
async fn ready_pages_follow_fetch_order_across_lists() {
    let ctx = Ctx::new("page-ready").await;
    let before = State::default()
        .job("s1", 0, 3, 1)
        .job("h1", 0, 3, 0)
        .job("n1", 0, 3, 1)
        .job("n2", 0, 3, 1)
        .job("l1", 0, 3, 2)
        .error("n1", "deferred: 429")
        .suspects(&["s1"])
        .ready(H, &["h1"])
        .ready(N, &["n1", "n2"])
        .ready(L, &["l1"]);
    // (offset, limit) -> ids, more, next offset
    let cases: [(u64, usize, &[&str], bool, u64); 5] = [
        (0, 3, &["s1", "h1", "n1"], true, 3),
        (3, 3, &["n2", "l1"], false, 5),
        (1, 1, &["h1"], true, 2),
        (4, 10, &["l1"], false, 5),
        (9, 10, &[], false, 9),
    ];
    for (offset, limit, want, more, next) in cases {
        let p = page(&ctx, &before, "ready", [offset, 0, 0], limit, "").await;
        assert_eq!(
            (ids(&p), p.more, p.offsets[0]),
            (want.to_vec(), more, next),
            "from {offset}"
        );
    }
    let p = page(&ctx, &before, "ready", [0, 0, 0], 5, "").await;
    let segs: Vec<u8> = p.entries.iter().map(|e| e.segment).collect();
    assert_eq!(segs, [0, 1, 2, 2, 3]);
    assert_eq!(p.entries[2].error.as_deref(), Some("deferred: 429"));
    assert_eq!(p.entries[1].envelope.as_ref(), before.jobs.get("h1"));
    assert_eq!(p.entries[1].score, None);
}

#[tokio::test]
async fn delayed_pages_merge_priorities_by_due_time() {
    let ctx = Ctx::new("page-delayed").await;
    let before = State::default()
        .job("dh", 1, 3, 0)
        .job("dn", 1, 3, 1)
        .job("dl", 0, 3, 2)
        .job("dn2", 0, 3, 1)
        .delayed(H, &[("dh", 300)])
        .delayed(N, &[("dn", 100), ("dn2", 400)])
        .delayed(L, &[("dl", 200)]);
    let p = page(&ctx, &before, "delayed", [0, 0, 0], 2, "").await;
    assert_eq!((ids(&p), p.more, p.offsets), (vec!["dn", "dl"], true, [0, 1, 1]));
    assert_eq!(p.entries[0].score, Some(100));
    let p = page(&ctx, &before, "delayed", p.offsets, 2, "").await;
    assert_eq!(
        (ids(&p), p.more, p.offsets),
        (vec!["dh", "dn2"], false, [1, 2, 1])
    );
    let p = page(&ctx, &before, "delayed", [1, 2, 1], 2, "").await;
    assert_eq!((ids(&p), p.more), (Vec::<&str>::new(), false));
}

#[tokio::test]
async fn in_flight_and_dead_pages_carry_marks_and_reasons() {
    let ctx = Ctx::new("page-flight").await;
    let before = State::default()
        .job("f1", 0, 3, 1)
        .job("f2", 0, 3, 1)
        .job("x1", 3, 3, 1)
        .job("x2", 3, 3, 1)
        .lease(&[("f1", FUTURE), ("f2", FUTURE + 5)])
        .started("f2", "abc")
        .dead(&[("x1", 100), ("x2", 200)])
        .error("x1", "boom 1")
        .error("x2", "boom 2");
    let p = page(&ctx, &before, "in_flight", [0, 0, 0], 10, "").await;
    assert_eq!(ids(&p), ["f1", "f2"]);
    assert_eq!(
        (p.entries[0].mark.as_deref(), p.entries[0].score),
        (None, Some(FUTURE))
    );
    assert_eq!(p.entries[1].mark.as_deref(), Some("abc"));
    let p = page(&ctx, &before, "dead", [0, 0, 0], 1, "").await;
    assert_eq!((ids(&p), p.more, p.offsets[0]), (vec!["x2"], true, 1));
    assert_eq!(
        (p.entries[0].error.as_deref(), p.entries[0].score),
        (Some("boom 2"), Some(200))
    );
    let p = page(&ctx, &before, "dead", [1, 0, 0], 1, "").await;
    assert_eq!((ids(&p), p.more), (vec!["x1"], false));
}

#[tokio::test]
async fn a_kind_filter_keeps_its_kind_and_stops_the_cursor_after_the_last_kept() {
    let ctx = Ctx::new("page-kind").await;
    let before = State::default()
        .raw_job("a", &env_of("a", "mail", 3, 1))
        .raw_job("b", &env_of("b", "sms", 3, 1))
        .raw_job("c", &env_of("c", "mail", 3, 1))
        .raw_job("d", &env_of("d", "mail", 3, 1))
        .raw_job("e", "not json")
        .dead(&[("a", 500), ("b", 400), ("c", 300), ("e", 250), ("d", 200)]);
    let p = page(&ctx, &before, "dead", [0, 0, 0], 2, "mail").await;
    // newest first: a, b (skipped), c, e (skipped); the page is full when d comes, so the
    // cursor stops at d
    assert_eq!((ids(&p), p.more, p.offsets[0]), (vec!["a", "c"], true, 4));
    let p = page(&ctx, &before, "dead", [4, 0, 0], 2, "mail").await;
    assert_eq!((ids(&p), p.more, p.offsets[0]), (vec!["d"], false, 5));
    let p = page(&ctx, &before, "dead", [0, 0, 0], 10, "none").await;
    assert_eq!((ids(&p), p.more), (Vec::<&str>::new(), false));
    // a window smaller than the set: a page with no match still moves the cursor on
    let p = run_case(
        &ctx,
        "window",
        &before,
        |mut c, k| async move { scripts::jobs_page(&mut c, &k, "dead", [1, 0, 0], 1, 1, "mail", "").await },
        &before,
    )
    .await;
    assert_eq!((p.more, p.offsets[0]), (true, 2));
}

#[tokio::test]
async fn job_show_finds_each_state() {
    let ctx = Ctx::new("show").await;
    let before = State::default()
        .job("r", 0, 3, 1)
        .job("d", 1, 3, 2)
        .job("f", 0, 3, 1)
        .job("x", 3, 3, 1)
        .ready(N, &["r"])
        .delayed(L, &[("d", 700)])
        .lease(&[("f", FUTURE)])
        .lease_token("f", 123)
        .started("f", "tag1")
        .deferral("d", 2, 50)
        .error("d", "later")
        .dead(&[("x", 900)]);
    let cases = [
        ("r", "ready", None, None),
        ("d", "delayed", Some(700), None),
        ("f", "in_flight", Some(FUTURE), Some("tag1")),
        ("x", "dead", Some(900), None),
        ("nope", "missing", None, None),
    ];
    for (id, state, score, mark) in cases {
        let s = run_case(
            &ctx,
            id,
            &before,
            |mut c, k| async move { scripts::job_show(&mut c, &k, id).await },
            &before,
        )
        .await;
        assert_eq!(
            (s.state.as_str(), s.score, s.mark.as_deref()),
            (state, score, mark),
            "{id}"
        );
        assert_eq!(s.envelope.as_ref(), before.jobs.get(id), "{id}");
    }
    let s = scripts::job_show(&mut ctx.c(), &ctx.keys, "f").await.unwrap();
    assert_eq!(s.state, "missing");
    let (_, k) = ctx.other_queue("show2");
    seed(&mut ctx.c(), &k, &before).await;
    let s = scripts::job_show(&mut ctx.c(), &k, "f").await.unwrap();
    assert_eq!(s.token.as_deref(), Some("123"));
    let s = scripts::job_show(&mut ctx.c(), &k, "d").await.unwrap();
    assert_eq!(
        (s.deferral.as_deref(), s.error.as_deref()),
        (Some("2 50"), Some("later"))
    );
}

#[tokio::test]
async fn jobs_delete_table() {
    let ctx = Ctx::new("delete").await;
    let before = State::default()
        .job("r", 0, 3, 1)
        .job("r2", 0, 3, 1)
        .job("s", 0, 3, 1)
        .job("d", 1, 3, 2)
        .job("f", 0, 3, 1)
        .job("x", 3, 3, 1)
        .ready(N, &["r2", "r"])
        .suspects(&["s"])
        .delayed(L, &[("d", 700)])
        .deferral("d", 1, 50)
        .error("d", "later")
        .lease(&[("f", FUTURE)])
        .lease_token("f", 123)
        .started("f", "tag1")
        .dead(&[("x", 900)])
        .error("x", "boom");
    let all = ["r", "s", "d", "f", "x", "nope"].map(String::from);
    let after = State::default()
        .job("r2", 0, 3, 1)
        .ready(N, &["r2"])
        .counter("deleted", 5);
    let got = run_case(
        &ctx,
        "every state",
        &before,
        |mut c, k| async move { scripts::jobs_delete(&mut c, &k, false, &all).await },
        &after,
    )
    .await;
    let states: Vec<&str> = got.iter().map(|(_, s)| s.as_str()).collect();
    assert_eq!(
        states,
        ["ready", "ready", "delayed", "in_flight", "dead", "missing"]
    );

    // only dead: the others stay
    let some = ["r", "x"].map(String::from);
    let after = before.clone().no_job("x").dead(&[]).counter("deleted", 1);
    let mut after = after;
    after.errors.remove("x");
    let got = run_case(
        &ctx,
        "only dead",
        &before,
        |mut c, k| async move { scripts::jobs_delete(&mut c, &k, true, &some).await },
        &after,
    )
    .await;
    assert_eq!(got, [("r".into(), "missing".into()), ("x".into(), "dead".into())]);
}

#[tokio::test]
async fn a_deleted_running_job_settles_as_missed_and_is_not_retried() {
    let ctx = Ctx::new("delete-running").await;
    ctx.producer()
        .enqueue(weir::NewJob::new("k", &1).unwrap().id("run"))
        .await
        .unwrap();
    let f = scripts::fetch(&mut ctx.c(), &ctx.keys, 10, 60_000).await.unwrap();
    let ids = vec!["run".to_string()];
    let got = scripts::jobs_delete(&mut ctx.c(), &ctx.keys, false, &ids)
        .await
        .unwrap();
    assert_eq!(got, [("run".into(), "in_flight".into())]);
    let retry = weir::queue::scripts::Settle::Retry {
        id: "run".into(),
        token: f.deadline_ms,
        priority: weir::Priority::Normal,
        delay_ms: 0,
        error: "failed".into(),
    };
    let settled = scripts::settle(&mut ctx.c(), &ctx.keys, &[retry]).await.unwrap();
    assert_eq!(settled.missed, ["run"]);
    let s = ctx.snapshot().await;
    assert_eq!(
        s,
        State::default()
            .counter("enqueued", 1)
            .counter("fetched", 1)
            .counter("deleted", 1)
    );
}

#[tokio::test]
async fn job_run_now_table() {
    let ctx = Ctx::new("runnow").await;
    let before = State::default()
        .job("r", 0, 3, 1)
        .job("d", 1, 3, 2)
        .job("f", 0, 3, 1)
        .job("x", 3, 3, 0)
        .ready(L, &["l0"])
        .job("l0", 0, 3, 2)
        .ready(N, &["r"])
        .delayed(L, &[("d", FUTURE)])
        .error("d", "try later")
        .lease(&[("f", FUTURE)])
        .dead(&[("x", 900)])
        .error("x", "boom");
    let delayed_after = before.clone().delayed(L, &[]).ready(L, &["d", "l0"]);
    let mut dead_after = before.clone().dead(&[]).job("x", 0, 3, 0).ready(H, &["x"]);
    dead_after.errors.remove("x");
    let cases = [
        ("d", "delayed", delayed_after),
        ("x", "dead", dead_after),
        ("r", "ready", before.clone()),
        ("f", "in_flight", before.clone()),
        ("nope", "missing", before.clone()),
    ];
    for (id, was, after) in cases {
        let got = run_case(
            &ctx,
            id,
            &before,
            |mut c, k| async move { scripts::job_run_now(&mut c, &k, id).await },
            &after,
        )
        .await;
        assert_eq!(got, was, "{id}");
    }
}

#[tokio::test]
async fn dlq_bulk_table() {
    let ctx = Ctx::new("bulk").await;
    let now = ctx.now_ms().await;
    let old = now - 3_600_000;
    let before = State::default()
        .raw_job("a", &env_of("a", "mail", 5, 1))
        .raw_job("b", &env_of("b", "sms", 5, 0))
        .raw_job("c", &env_of("c", "mail", 5, 2))
        .dead(&[("a", old), ("b", old + 1), ("c", now + 60_000)])
        .error("a", "e")
        .error("b", "e")
        .error("c", "e");
    // requeue mail: a and c back with attempt 0 (c to low), b stays
    let after = State::default()
        .raw_job("a", &env_of("a", "mail", 0, 1))
        .raw_job("b", &env_of("b", "sms", 5, 0))
        .raw_job("c", &env_of("c", "mail", 0, 2))
        .ready(N, &["a"])
        .ready(L, &["c"])
        .dead(&[("b", old + 1)])
        .error("b", "e");
    let step = run_case(
        &ctx,
        "requeue by kind",
        &before,
        |mut c, k| async move { scripts::dlq_bulk(&mut c, &k, true, 0, 100, 0, "mail").await },
        &after,
    )
    .await;
    assert_eq!((step.acted, step.next, step.done), (2, 1, true));

    // delete older than 30 minutes: a and b; c is younger, and ends the walk
    let after = State::default()
        .raw_job("c", &env_of("c", "mail", 5, 2))
        .dead(&[("c", now + 60_000)])
        .error("c", "e")
        .counter("deleted", 2);
    let step = run_case(
        &ctx,
        "delete by age",
        &before,
        |mut c, k| async move { scripts::dlq_bulk(&mut c, &k, false, 0, 100, 1_800_000, "").await },
        &after,
    )
    .await;
    assert_eq!((step.acted, step.next, step.done), (2, 0, true));

    // a window of one: the caller walks on from `next`
    let (_, k) = ctx.other_queue("bulk-walk");
    seed(&mut ctx.c(), &k, &before).await;
    let mut rank = 0;
    let mut steps = Vec::new();
    loop {
        let s = scripts::dlq_bulk(&mut ctx.c(), &k, true, rank, 1, 0, "sms")
            .await
            .unwrap();
        steps.push((s.acted, s.next, s.done));
        rank = s.next;
        if s.done {
            break;
        }
    }
    assert_eq!(steps, [(0, 1, false), (1, 1, false), (0, 2, false), (0, 2, true)]);
}

#[tokio::test]
async fn worker_beat_registers_refreshes_expires_and_removes() {
    let ctx = Ctx::new("workers").await;
    let k = &ctx.keys;
    let fields = [("host", "h".to_string()), ("pid", "7".to_string())];
    let dropped = scripts::worker_beat(&mut ctx.c(), k, "w1", 60_000, &fields)
        .await
        .unwrap();
    assert_eq!(dropped, 0);
    let rec: std::collections::BTreeMap<String, String> = ctx.cmd(&["HGETALL", &k.worker("w1")]).await;
    assert_eq!((rec["host"].as_str(), rec["pid"].as_str()), ("h", "7"));
    assert!(rec["last_beat_ms"].parse::<u64>().unwrap() > 0);
    let ttl: i64 = ctx.cmd(&["PTTL", &k.worker("w1")]).await;
    assert!(ttl > 50_000 && ttl <= 60_000, "{ttl}");
    // a worker that stopped beating: its registry entry is dropped by the next beat
    let _: () = ctx.cmd(&["ZADD", &k.workers(), "1", "dead"]).await;
    let dropped = scripts::worker_beat(&mut ctx.c(), k, "w1", 60_000, &fields)
        .await
        .unwrap();
    assert_eq!(dropped, 1);
    let members: Vec<String> = ctx.cmd(&["ZRANGE", &k.workers(), "0", "-1"]).await;
    assert_eq!(members, ["w1"]);
    // removal
    scripts::worker_beat(&mut ctx.c(), k, "w1", 0, &[]).await.unwrap();
    let n: u64 = ctx.cmd(&["EXISTS", &k.workers(), &k.worker("w1")]).await;
    assert_eq!(n, 0);
}

#[tokio::test]
async fn both_enqueue_paths_register_the_queue() {
    let ctx = Ctx::new("registry").await;
    let (plain, _) = ctx.other_queue("registry-plain");
    let (script, _) = ctx.other_queue("registry-script");
    weir::Producer::new(ctx.c(), &plain)
        .unwrap()
        .enqueue_bulk([weir::NewJob::new("k", &1).unwrap()])
        .await
        .unwrap();
    weir::Producer::new(ctx.c(), &script)
        .unwrap()
        .enqueue(weir::NewJob::new("k", &1).unwrap().id("chosen"))
        .await
        .unwrap();
    for q in [&plain, &script] {
        let member: u64 = ctx.cmd(&["SISMEMBER", weir::queue::keys::QUEUES, q]).await;
        assert_eq!(member, 1, "{q}");
    }
}
