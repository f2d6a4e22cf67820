//! The inspection and operator scripts over inline jobs (lib.lua's items: the envelope
//! itself in a ready list, the suspects or the lease, with no entry in the jobs hash):
//! jobs_page.lua, job_show.lua, jobs_delete.lua, job_run_now.lua, stats.lua.

use crate::common::*;
use crate::{H, L, N};
use weir::queue::scripts::{self, Page};

/// An inline job: its envelope, as it stands in a list or the lease.
fn inline(id: &str, priority: u8) -> String {
    env(id, 0, 5, priority)
}

fn ids(p: &Page) -> Vec<&str> {
    p.entries.iter().map(|e| e.id.as_str()).collect()
}

/// Reads one page of `state` from `before` (a read changes nothing).
async fn page(ctx: &Ctx, before: &State, state: &'static str, limit: usize, kind: &'static str) -> Page {
    run_case(
        ctx,
        state,
        before,
        |mut c, k| async move { scripts::jobs_page(&mut c, &k, state, [0, 0, 0], limit, 1000, kind, "").await },
        before,
    )
    .await
}

#[tokio::test]
async fn pages_report_inline_jobs_by_the_id_their_envelope_holds() {
    let ctx = Ctx::new("inline-page").await;
    let (s1, n1, f2) = (inline("s1", 1), inline("n1", 1), inline("f2", 1));
    let mail = env("m1", 0, 5, 2).replace(r#""kind":"k""#, r#""kind":"mail""#);
    let before = State::default()
        .job("h1", 0, 3, 0)
        .job("n2", 0, 3, 1)
        .job("f1", 0, 3, 1)
        .suspects(&[&s1])
        .ready(H, &["h1"])
        .ready(N, &[&n1, "n2"])
        .ready(L, &[&mail, r#"{"not":"weir's"}"#])
        .error("n1", "deferred: 429")
        .lease(&[("f1", FUTURE), (&f2, FUTURE + 5)])
        .started(&f2, "abc");
    let p = page(&ctx, &before, "ready", 10, "").await;
    assert_eq!(ids(&p), ["s1", "h1", "n1", "n2", "m1", ""]);
    let envs: Vec<Option<&str>> = p.entries.iter().map(|e| e.envelope.as_deref()).collect();
    let other = r#"{"not":"weir's"}"#;
    assert_eq!(
        envs,
        [
            Some(s1.as_str()),
            before.jobs.get("h1").map(String::as_str),
            Some(n1.as_str()),
            before.jobs.get("n2").map(String::as_str),
            Some(mail.as_str()),
            Some(other),
        ]
    );
    let segs: Vec<u8> = p.entries.iter().map(|e| e.segment).collect();
    assert_eq!(segs, [0, 1, 2, 2, 3, 3]);
    assert_eq!(p.entries[2].error.as_deref(), Some("deferred: 429"));
    // a kind filter reads an inline job's kind from its item
    let p = page(&ctx, &before, "ready", 10, "mail").await;
    assert_eq!(ids(&p), ["m1"]);
    // a start mark is keyed by the item
    let p = page(&ctx, &before, "in_flight", 10, "").await;
    assert_eq!(ids(&p), ["f1", "f2"]);
    let got: Vec<_> = p
        .entries
        .iter()
        .map(|e| (e.envelope.as_deref(), e.score, e.mark.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            (before.jobs.get("f1").map(String::as_str), Some(FUTURE), None),
            (Some(f2.as_str()), Some(FUTURE + 5), Some("abc")),
        ]
    );
}

#[tokio::test]
async fn job_show_finds_inline_jobs_ready_suspect_and_leased() {
    let ctx = Ctx::new("inline-show").await;
    let (r, s, f) = (inline("r", 1), inline("s", 1), inline("f", 1));
    // past the first scan chunks: 2,500 inline jobs in low, the one shown near the end
    let low: Vec<String> = (0..2500).map(|i| inline(&format!("l{i}"), 2)).collect();
    let before = State::default()
        .job("j", 0, 3, 1)
        .ready(N, &["j", &r])
        .suspects(&[&s])
        .ready(L, &low.iter().map(String::as_str).collect::<Vec<_>>())
        .lease(&[(&f, FUTURE)])
        .lease_token(&f, 123)
        .started(&f, "tag1");
    let j = before.jobs["j"].clone();
    let cases = [
        ("r", "ready", Some(r.as_str())),
        ("s", "ready", Some(s.as_str())),
        ("l2345", "ready", Some(low[2345].as_str())),
        ("f", "in_flight", Some(f.as_str())),
        ("j", "ready", Some(j.as_str())),
        ("nope", "missing", None),
    ];
    for (id, state, envelope) in cases {
        let got = run_case(
            &ctx,
            id,
            &before,
            |mut c, k| async move { scripts::job_show(&mut c, &k, id).await },
            &before,
        )
        .await;
        assert_eq!(
            (got.state.as_str(), got.envelope.as_deref()),
            (state, envelope),
            "{id}"
        );
        // the lease's deadline, and its records read by the item
        let lease = (got.score, got.mark.as_deref(), got.token.as_deref());
        let want = if id == "f" {
            (Some(FUTURE), Some("tag1"), Some("123"))
        } else {
            (None, None, None)
        };
        assert_eq!(lease, want, "{id}");
    }
}

#[tokio::test]
async fn jobs_delete_takes_inline_jobs_out_of_lists_and_the_lease() {
    let ctx = Ctx::new("inline-delete").await;
    let (r, r2, s, f) = (inline("r", 1), inline("r2", 1), inline("s", 0), inline("f", 1));
    let before = State::default()
        .job("j", 0, 3, 1)
        .job("x", 3, 3, 1)
        .ready(N, &[&r2, "j", &r])
        .suspects(&[&s])
        .lease(&[(&f, FUTURE)])
        .lease_token(&f, 123)
        .started(&f, "tag1")
        .dead(&[("x", 900)])
        .error("x", "boom");
    let asked = ["r", "j", "s", "f", "r", "nope"].map(String::from);
    let after = State::default()
        .job("x", 3, 3, 1)
        .ready(N, &[&r2])
        .dead(&[("x", 900)])
        .error("x", "boom")
        .counter("deleted", 4);
    let got = run_case(
        &ctx,
        "any",
        &before,
        |mut c, k| async move { scripts::jobs_delete(&mut c, &k, false, &asked).await },
        &after,
    )
    .await;
    let states: Vec<&str> = got.iter().map(|(_, s)| s.as_str()).collect();
    assert_eq!(
        states,
        ["ready", "ready", "ready", "in_flight", "missing", "missing"]
    );
    // only dead: an inline job is never dead-lettered, and stays
    let asked = ["r".to_string()];
    let got = run_case(
        &ctx,
        "only dead",
        &before,
        |mut c, k| async move { scripts::jobs_delete(&mut c, &k, true, &asked).await },
        &before,
    )
    .await;
    assert_eq!(got, [("r".into(), "missing".into())]);
}

#[tokio::test]
async fn job_run_now_leaves_inline_jobs_where_they_are() {
    let ctx = Ctx::new("inline-runnow").await;
    let (r, f) = (inline("r", 1), inline("f", 1));
    let before = State::default().ready(N, &[&r]).lease(&[(&f, FUTURE)]);
    for (id, was) in [("r", "ready"), ("f", "in_flight"), ("nope", "missing")] {
        let got = run_case(
            &ctx,
            id,
            &before,
            |mut c, k| async move { scripts::job_run_now(&mut c, &k, id).await },
            &before,
        )
        .await;
        assert_eq!(got, was, "{id}");
    }
}

/// The search for an inline job waiting in a list reads at most its budget (5,000 items)
/// a call, from the lists' tails, so it misses no job that waits on while consumers pop
/// the heads and producers push the tails between its calls; and the operator's calls
/// find, delete and leave in place such a job deep in a backlog.
#[tokio::test]
async fn the_search_for_a_waiting_inline_job_goes_a_page_a_call_and_misses_none_that_wait() {
    let ctx = Ctx::new("inline-find").await;
    let (mut c, k) = (ctx.conn.clone(), ctx.keys.clone());
    let normal = k.ready(weir::Priority::Normal).to_string();
    let (deep, far) = (inline("deep", 1), inline("far", 1));
    let fill = |from: usize, n: usize| (from..from + n).map(|i| format!("id{i}")).collect::<Vec<_>>();
    // 25,000 items in normal, the inline job 12,000 from the head: 12,999 from the tail.
    let mut items = fill(0, 25_000);
    items[12_000] = deep.clone();
    items[20_000] = far.clone();
    // A payload that holds the text of the id's field is not the job.
    let other = inline("other", 1);
    items[24_000] = other.replace(r#""payload":{"#, r#""payload":{"id":"deep","#);
    assert_ne!(items[24_000], other);
    redis::cmd("RPUSH")
        .arg(&normal)
        .arg(&items)
        .exec_async(&mut c)
        .await
        .unwrap();
    redis::cmd("RPUSH")
        .arg(k.suspects())
        .arg("s0")
        .exec_async(&mut c)
        .await
        .unwrap();

    // One call reads its budget and stops: the suspects (1 item), then 4,999 of normal.
    let first = scripts::inline_find(&mut c, &k, (1, 0), &["deep"]).await.unwrap();
    assert_eq!(first.next, Some((3, 4_999)), "{first:?}");
    assert!(first.found.is_empty());

    // Between calls, consumers fetch 3,000 from the head and producers push 3,000: the
    // job, 15,999 from the tail now, is found by the fourth call, 5,000 items a call.
    redis::cmd("LPOP")
        .arg(&normal)
        .arg(3_000)
        .exec_async(&mut c)
        .await
        .unwrap();
    redis::cmd("RPUSH")
        .arg(&normal)
        .arg(fill(25_000, 3_000))
        .exec_async(&mut c)
        .await
        .unwrap();
    let mut at = first.next;
    let mut pages = vec![first.next];
    let found = loop {
        let page = scripts::inline_find(&mut c, &k, at.expect("the job is found"), &["deep"])
            .await
            .unwrap();
        at = page.next;
        pages.push(at);
        if !page.found.is_empty() {
            break page.found;
        }
    };
    assert_eq!(found, [("deep".to_string(), 3, deep.clone().into_bytes(), 9_000)]);
    assert_eq!(
        pages,
        [Some((3, 4_999)), Some((3, 9_999)), Some((3, 14_999)), None],
        "every id found: over"
    );

    // The operator's calls, through the search: shown, left by run-now, deleted.
    let shown = scripts::job_show(&mut c, &k, "deep").await.unwrap();
    assert_eq!(
        (shown.state.as_str(), shown.envelope.as_deref()),
        ("ready", Some(deep.as_str()))
    );
    assert_eq!(scripts::job_run_now(&mut c, &k, "deep").await.unwrap(), "ready");
    let asked = ["deep", "far", "nope"].map(String::from);
    let got = scripts::jobs_delete(&mut c, &k, false, &asked).await.unwrap();
    let states: Vec<&str> = got.iter().map(|(_, s)| s.as_str()).collect();
    assert_eq!(states, ["ready", "ready", "missing"]);
    let left: Vec<String> = redis::cmd("LRANGE")
        .arg(k.ready(weir::Priority::Normal))
        .arg(0)
        .arg(-1)
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(left.len(), 25_000 - 2);
    assert!(!left.contains(&deep) && !left.contains(&far));
    let shown = scripts::job_show(&mut c, &k, "deep").await.unwrap();
    assert_eq!(shown.state, "missing");
}

/// jobs_delete.lua (the source the library runs) with `argv`, on `k`'s queue.
async fn delete_raw(c: &mut weir::Conn, k: &weir::queue::keys::QueueKeys, argv: &[&[u8]]) -> Vec<String> {
    let body = scripts::SOURCES
        .iter()
        .find(|s| s.name == "jobs_delete")
        .unwrap()
        .body;
    let script = redis::Script::new(&[scripts::LIB, body].concat());
    let mut inv = script.prepare_invoke();
    for key in k.all() {
        inv.key(key);
    }
    inv.key(k.history()).key(k.done()).key(k.results());
    for a in argv {
        inv.arg(*a);
    }
    inv.invoke_async(c).await.unwrap()
}

/// A hint (where the search saw a job wait) is looked at again, not trusted: the acting
/// call takes the item only if it still waits in that list and holds that id.
#[tokio::test]
async fn a_hint_moves_nothing_that_is_not_where_it_says() {
    let ctx = Ctx::new("inline-hint").await;
    let (mut c, k) = (ctx.conn.clone(), ctx.keys.clone());
    let (a, b) = (inline("a", 1), inline("b", 1));
    let normal = k.ready(weir::Priority::Normal).to_string();
    redis::cmd("RPUSH")
        .arg(&normal)
        .arg(&a)
        .arg(&b)
        .exec_async(&mut c)
        .await
        .unwrap();
    let gone = inline("gone", 1);
    let cases: [(&str, &[&[u8]], &str); 5] = [
        // fetched since the search saw it: no longer in the list
        ("moved", &[b"gone", b"3", gone.as_bytes(), b"0"], "missing"),
        // another job's item under this id
        ("another's item", &[b"a", b"3", b.as_bytes(), b"1"], "missing"),
        // the right item, the wrong list (high)
        ("another list", &[b"a", b"2", a.as_bytes(), b"0"], "missing"),
        // not numbers: ignored, not an error after the call's first write
        ("no list", &[b"a", b"x", a.as_bytes(), b"y"], "missing"),
        // the index only picks the end LREM starts from: a stale one finds it too
        ("where it says", &[b"a", b"3", a.as_bytes(), b"7"], "ready"),
    ];
    for (case, hint, want) in cases {
        let id = hint[0];
        let mut argv: Vec<&[u8]> = vec![b"any", b"1", id];
        argv.extend_from_slice(hint);
        let got = delete_raw(&mut c, &k, &argv).await;
        assert_eq!(got, [std::str::from_utf8(id).unwrap(), want], "{case}");
    }
    let left: Vec<String> = redis::cmd("LRANGE")
        .arg(&normal)
        .arg(0)
        .arg(-1)
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(left, [b], "only the job a true hint named is gone");
}

#[tokio::test]
async fn stats_reads_the_age_of_an_inline_head() {
    let ctx = Ctx::new("inline-stats").await;
    let now = ctx.now_ms().await;
    let at = |ms: u64| move |e: String| e.replace(&ENQUEUED_AT.to_string(), &ms.to_string());
    let old = at(now - 60_000)(inline("h1", 0));
    // an inline head older than an id's
    let before = State::default()
        .ready(H, &[&old])
        .raw_job("l1", &at(now - 30_000)(env("l1", 0, 3, 2)))
        .ready(L, &["l1"]);
    let s = run_case(
        &ctx,
        "inline head",
        &before,
        |mut c, k| async move { scripts::stats(&mut c, &k).await },
        &before,
    )
    .await;
    assert_eq!(s.ready, [1, 0, 1]);
    let age = s.oldest_ready_age_ms;
    assert!((60_000..70_000).contains(&age), "{age}");
    // inline heads only: n1 was enqueued at ENQUEUED_AT (2023)
    let before = State::default().ready(H, &[&old]).ready(N, &[&inline("n1", 1)]);
    let s = run_case(
        &ctx,
        "inline heads",
        &before,
        |mut c, k| async move { scripts::stats(&mut c, &k).await },
        &before,
    )
    .await;
    assert!(
        s.oldest_ready_age_ms >= now - ENQUEUED_AT,
        "{}",
        s.oldest_ready_age_ms
    );
}
