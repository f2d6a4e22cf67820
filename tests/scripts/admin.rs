//! pause.lua and stats.lua.

use crate::common::*;
use crate::{H, L, N};
use weir::queue::scripts;

#[tokio::test]
async fn pause_table() {
    let ctx = Ctx::new("pause").await;
    let live = State::default().job("a", 0, 3, 1).ready(N, &["a"]);
    let cases = [
        (
            "pause a running queue",
            live.clone(),
            true,
            true,
            live.clone().paused(true),
        ),
        (
            "pause a paused queue",
            live.clone().paused(true),
            true,
            false,
            live.clone().paused(true),
        ),
        (
            "resume a paused queue",
            live.clone().paused(true),
            false,
            true,
            live.clone(),
        ),
        ("resume a running queue", live.clone(), false, false, live.clone()),
    ];
    for (name, before, pause, changed, after) in cases {
        let got = run_case(
            &ctx,
            name,
            &before,
            |mut c, k| async move { scripts::pause(&mut c, &k, pause).await },
            &after,
        )
        .await;
        assert_eq!(got, changed, "case {name:?}");
    }
}

#[tokio::test]
async fn stats_is_a_snapshot_of_every_key() {
    let ctx = Ctx::new("stats").await;
    let now = ctx.now_ms().await;
    let old = format!(
        r#"{{"attempt":0,"max_attempts":3,"priority":2,"enqueued_at":{},"id":"l1","kind":"k","payload":{{"enqueued_at":1}}}}"#,
        now - 60_000
    );
    let before = State::default()
        .job("h1", 0, 3, 0)
        .job("n1", 0, 3, 1)
        .job("n2", 0, 3, 1)
        .raw_job("l1", &old)
        .job("d1", 1, 3, 1)
        .job("d2", 0, 3, 0)
        .job("f1", 0, 3, 1)
        .job("x", 3, 3, 1)
        .ready(H, &["h1"])
        .ready(N, &["n1", "n2"])
        .ready(L, &["l1"])
        .delayed(N, &[("d1", FUTURE)])
        .delayed(H, &[("d2", FUTURE)])
        .lease(&[("f1", FUTURE)])
        .dead(&[("x", 5)])
        .error("x", "boom")
        .paused(true)
        .counter("enqueued", 9)
        .counter("acked", 1)
        .deferral("d1", 2, 1_000)
        .setting("dead_cap", "50");
    let s = run_case(
        &ctx,
        "stats",
        &before,
        |mut c, k| async move { scripts::stats(&mut c, &k).await },
        &before,
    )
    .await;
    assert_eq!(s.ready, [1, 2, 1]);
    assert_eq!((s.delayed, s.in_flight, s.dead, s.paused), (2, 1, 1, true));
    assert_eq!((s.ready_total(), s.pending()), (4, 7));
    // the oldest ready job heads a list: h1 and n1, enqueued at ENQUEUED_AT (2023)
    assert!(
        s.oldest_ready_age_ms >= now - ENQUEUED_AT,
        "{}",
        s.oldest_ready_age_ms
    );
    assert_eq!(s.counters.get("enqueued"), Some(&9));
    assert_eq!(s.counters.get("acked"), Some(&1));
    assert_eq!((s.deferred, s.dead_cap), (1, 50));

    let (_, empty) = ctx.other_queue("empty");
    let s = scripts::stats(&mut ctx.c(), &empty).await.unwrap();
    let cap = weir::queue::settings::DEFAULT_DEAD_CAP;
    assert_eq!(
        s,
        weir::Stats {
            dead_cap: cap,
            ..Default::default()
        }
    );
}
