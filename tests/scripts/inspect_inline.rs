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
