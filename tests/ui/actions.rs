//! The pages and their actions against a real Redis: what Redis holds is escaped, deletes
//! and bulk actions ask first, requeue and run-now move jobs as the commands do, and
//! limits pass the checks of `weir limits set`.

use crate::common::*;
use crate::{Ui, seeded};

const SCRIPT: &str = "<script>alert(\"x\")</script>";

fn dead(ids: &[&str]) -> State {
    let mut s = State::default();
    for (i, id) in ids.iter().enumerate() {
        s = s.job(id, 5, 5, 1).error(id, "the downstream said 400");
        s.dead.push((id.to_string(), 1_700_000_000_000 + i as u64));
    }
    s
}

#[tokio::test]
async fn pages_escape_what_redis_holds() {
    let ctx = Ctx::new("escape").await;
    let envelope = format!(
        r#"{{"attempt":5,"max_attempts":5,"priority":1,"enqueued_at":{ENQUEUED_AT},"id":"x","kind":"k","payload":{{"html":"<img src=x onerror=alert(1)>"}}}}"#
    );
    let state = State::default()
        .raw_job("x", &envelope)
        .dead(&[("x", 1_700_000_000_000)])
        .error("x", SCRIPT);
    seeded(&ctx, &state).await;
    let ui = Ui::start(&ctx, &[], &[]).await;
    let q = &ctx.queue;
    for path in [
        format!("/queue?queue={q}&state=dead"),
        format!("/job?queue={q}&id=x"),
    ] {
        let (code, body) = ui.get(&path).await;
        assert_eq!(code, 200, "{path}: {body}");
        assert!(
            body.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;"),
            "{path}: {body}"
        );
        assert!(
            !body.contains("<script>alert") && !body.contains("<img src=x"),
            "{path}"
        );
    }
    let (_, body) = ui.get(&format!("/job?queue={q}&id=x")).await;
    assert!(body.contains("&lt;img src=x onerror=alert(1)&gt;"), "{body}");
}

#[tokio::test]
async fn dead_deletes_ask_first() {
    let ctx = Ctx::new("delete").await;
    seeded(&ctx, &dead(&["d1", "d2", "d3"])).await;
    let ui = Ui::start(&ctx, &[], &[]).await;
    let q = ctx.queue.as_str();
    let token = ui.token(q).await;
    let ask = [("csrf", token.as_str()), ("queue", q), ("id", "d1"), ("id", "d2")];
    let (code, _, page) = ui.post("/dead/delete", &ask, &[]).await;
    assert_eq!(code, 200);
    assert!(
        page.contains("Delete 2 jobs of the dead-letter queue") && page.contains("d2"),
        "{page}"
    );
    assert!(page.contains(r#"name="confirmed" value="yes""#));
    assert_eq!(
        ctx.snapshot().await.dead.len(),
        3,
        "nothing deleted before the answer"
    );
    let yes = [&ask[..], &[("confirmed", "yes")]].concat();
    let (code, location, _) = ui.post("/dead/delete", &yes, &[]).await;
    assert_eq!(code, 303);
    assert!(
        location.contains("state=dead") && location.contains("did=deleted&n=2"),
        "{location}"
    );
    let after = ctx.snapshot().await;
    assert_eq!(
        after.dead.iter().map(|(id, _)| id.as_str()).collect::<Vec<_>>(),
        ["d3"]
    );
    assert!(!after.jobs.contains_key("d1"));
    // The page it lands on says what was done.
    let (_, body) = ui.get(&location).await;
    assert!(body.contains("Deleted 2 jobs."), "{body}");
}

#[tokio::test]
async fn requeue_one_at_once_and_by_kind_after_asking() {
    let ctx = Ctx::new("requeue").await;
    seeded(&ctx, &dead(&["d1", "d2", "d3"])).await;
    let ui = Ui::start(&ctx, &[], &[]).await;
    let q = ctx.queue.as_str();
    let token = ui.token(q).await;
    let (code, location, _) = ui
        .post(
            "/dead/requeue",
            &[("csrf", &token), ("queue", q), ("id", "d1")],
            &[],
        )
        .await;
    assert_eq!(code, 303, "one job is requeued without a question");
    assert!(location.contains("did=requeued&n=1"), "{location}");
    let s = ctx.snapshot().await;
    assert_eq!(s.ready[1], ["d1"]);
    assert_eq!(s.dead.len(), 2);
    let filter = [
        ("csrf", token.as_str()),
        ("queue", q),
        ("scope", "filter"),
        ("kind", "k"),
    ];
    let (code, _, page) = ui.post("/dead/requeue", &filter, &[]).await;
    assert_eq!(code, 200);
    assert!(
        page.contains("Requeue every dead job of kind k of queue"),
        "{page}"
    );
    assert_eq!(ctx.snapshot().await.dead.len(), 2);
    let yes = [&filter[..], &[("confirmed", "yes")]].concat();
    let (code, location, _) = ui.post("/dead/requeue", &yes, &[]).await;
    assert_eq!((code, location.contains("n=2")), (303, true), "{location}");
    let s = ctx.snapshot().await;
    assert!(s.dead.is_empty());
    assert_eq!(s.ready[1].len(), 3);
    // A bad filter is a clear 400 that touches nothing.
    let bad = [
        ("csrf", token.as_str()),
        ("queue", q),
        ("scope", "filter"),
        ("older_than", "soon"),
    ];
    let (code, _, page) = ui.post("/dead/delete", &bad, &[]).await;
    assert_eq!(code, 400);
    assert!(page.contains("invalid duration"), "{page}");
}

#[tokio::test]
async fn pause_resume_run_now_and_delete_a_job() {
    let ctx = Ctx::new("jobacts").await;
    let state = State::default()
        .job("later", 0, 5, 1)
        .delayed(1, &[("later", FUTURE)])
        .job("r", 0, 5, 1)
        .ready(1, &["r"]);
    seeded(&ctx, &state).await;
    let ui = Ui::start(&ctx, &[], &[]).await;
    let q = ctx.queue.as_str();
    let token = ui.token(q).await;
    let (code, _, _) = ui
        .post("/queue/pause", &[("csrf", &token), ("queue", q)], &[])
        .await;
    assert_eq!(code, 303);
    assert!(ctx.stats().await.paused);
    let (_, body) = ui.get(&format!("/queue?queue={q}")).await;
    assert!(body.contains(">Resume<"), "a paused queue offers Resume");
    ui.post("/queue/resume", &[("csrf", &token), ("queue", q)], &[])
        .await;
    assert!(!ctx.stats().await.paused);
    let (_, job) = ui.get(&format!("/job?queue={q}&id=later")).await;
    assert!(
        job.contains("Run now") && !job.contains(">Requeue<"),
        "a delayed job runs now"
    );
    let (code, _, _) = ui
        .post(
            "/jobs/run-now",
            &[("csrf", &token), ("queue", q), ("id", "later")],
            &[],
        )
        .await;
    assert_eq!(code, 303);
    assert_eq!(
        ctx.snapshot().await.ready[1],
        ["later", "r"],
        "to the front of ready"
    );
    let del = [("csrf", token.as_str()), ("queue", q), ("id", "r")];
    let (code, _, page) = ui.post("/jobs/delete", &del, &[]).await;
    assert_eq!(code, 200);
    assert!(page.contains("Delete 1 job from queue"), "{page}");
    let yes = [&del[..], &[("confirmed", "yes")]].concat();
    let (code, _, _) = ui.post("/jobs/delete", &yes, &[]).await;
    assert_eq!(code, 303);
    assert_eq!(ctx.snapshot().await.ready[1], ["later"]);
    let (code, body) = ui.get(&format!("/job?queue={q}&id=r")).await;
    assert_eq!(code, 404);
    assert!(body.contains("no job r in queue"), "{body}");
}

#[tokio::test]
async fn limits_pass_the_commands_checks() {
    let ctx = Ctx::new("limits").await;
    seeded(&ctx, &State::default()).await;
    let ui = Ui::start(&ctx, &[], &[]).await;
    let q = ctx.queue.as_str();
    let token = ui.token(q).await;
    let set = [
        ("csrf", token.as_str()),
        ("queue", q),
        ("max_concurrency", "40"),
        ("rate", "50/s"),
        ("burst", "10"),
        ("target_p95", ""),
    ];
    let (code, location, _) = ui.post("/limits/set", &set, &[]).await;
    assert_eq!(code, 303);
    assert!(location.contains("did=limits_set"));
    let expected = State::default()
        .setting("max_concurrency", "40")
        .setting("rate", "50/s")
        .setting("burst", "10");
    assert_eq!(ctx.snapshot().await.settings, expected.settings);
    let (_, page) = ui.get(&format!("/limits?queue={q}")).await;
    assert!(
        page.contains("50/s") && page.contains("10000 (default)"),
        "{page}"
    );
    for (field, value, says) in [
        ("min_concurrency", "100", "min"),
        ("error_threshold", "2", "error"),
        ("rate", "fast", "rate"),
        ("dead_cap", "0", "dead-letter cap"),
    ] {
        let (code, _, page) = ui
            .post(
                "/limits/set",
                &[("csrf", &token), ("queue", q), (field, value)],
                &[],
            )
            .await;
        assert_eq!(code, 400, "{field}={value}");
        assert!(page.to_lowercase().contains(says), "{field}={value}: {page}");
        assert_eq!(
            ctx.snapshot().await.settings,
            expected.settings,
            "{field}={value} stored nothing"
        );
    }
    ui.post("/limits/clear", &[("csrf", &token), ("queue", q)], &[])
        .await;
    assert!(ctx.snapshot().await.settings.is_empty());
}
