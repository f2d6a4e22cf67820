//! dlq_list.lua, dlq_requeue.lua, dlq_purge.lua.

use crate::common::*;
use crate::{H, L, N};
use weir::queue::scripts;

fn dead3() -> State {
    State::default()
        .job("a", 3, 3, 0)
        .job("b", 5, 5, 2)
        .raw_job("c", "not json")
        .dead(&[("a", 100), ("b", 200), ("c", 300)])
        .error("a", "boom")
        .error("b", "lease expired after 5 attempts")
        .error("c", "undecodable envelope: expected value")
}

#[tokio::test]
async fn dlq_list_is_newest_first_and_changes_nothing() {
    let ctx = Ctx::new("dlqlist").await;
    let before = dead3().dead(&[("a", 100), ("b", 200), ("c", 300), ("gone", 400)]);
    let cases: Vec<(usize, usize, &[&str])> = vec![
        (0, 2, &["gone", "c"]),
        (2, 10, &["b", "a"]),
        (10, 5, &[]),
        (0, 0, &[]),
        (1, 0, &[]),
    ];
    for (offset, count, ids) in cases {
        let list = run_case(
            &ctx,
            "list",
            &before,
            |mut c, k| async move { scripts::dlq_list(&mut c, &k, offset, count).await },
            &before,
        )
        .await;
        let got: Vec<&str> = list.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(got, ids, "offset {offset} count {count}");
        for d in &list {
            assert_eq!(d.envelope.as_ref(), before.jobs.get(&d.id), "{}", d.id);
            assert_eq!(d.reason.as_ref(), before.errors.get(&d.id), "{}", d.id);
            let at = before.dead.iter().find(|(id, _)| *id == d.id).unwrap().1;
            assert_eq!(d.dead_at_ms, at);
        }
    }
}

/// name, limit, ids, requeued, missing ids, state after.
type RequeueCase = (
    &'static str,
    usize,
    Vec<String>,
    u64,
    &'static [&'static str],
    State,
);

#[tokio::test]
async fn dlq_requeue_table() {
    let ctx = Ctx::new("dlqreq").await;
    let before = dead3();
    let cases: Vec<RequeueCase> = vec![
        (
            "by id: attempt reset to 0, error cleared, back of its ready list; unknown ids reported",
            100,
            vec!["a".into(), "zz".into()],
            1,
            &["zz"],
            dead3()
                .job("a", 0, 3, 0)
                .ready(H, &["a"])
                .dead(&[("b", 200), ("c", 300)]),
        ),
        (
            "no ids: the oldest up to the limit",
            2,
            vec![],
            2,
            &[],
            dead3()
                .job("a", 0, 3, 0)
                .job("b", 0, 5, 2)
                .ready(H, &["a"])
                .ready(L, &["b"])
                .dead(&[("c", 300)]),
        ),
        ("no ids and a limit of 0: nothing", 0, vec![], 0, &[], dead3()),
        (
            "an envelope weir did not write goes back to normal ready unchanged",
            100,
            vec!["c".into()],
            1,
            &[],
            dead3().ready(N, &["c"]).dead(&[("a", 100), ("b", 200)]),
        ),
    ];
    for (name, limit, ids, n, missing, mut after) in cases {
        // requeued jobs lose their dead-letter reason
        let requeued: Vec<String> = after.ready.iter().flatten().cloned().collect();
        after.errors.retain(|id, _| !requeued.contains(id));
        let (got_n, got_missing) = run_case(
            &ctx,
            name,
            &before,
            |mut c, k| async move { scripts::dlq_requeue(&mut c, &k, limit, &ids).await },
            &after,
        )
        .await;
        assert_eq!(
            (got_n, got_missing),
            (n, missing.iter().map(|s| s.to_string()).collect::<Vec<_>>()),
            "case {name:?}"
        );
    }
}

#[tokio::test]
async fn dlq_purge_table() {
    let ctx = Ctx::new("dlqpurge").await;
    let live = |s: State| s.job("live", 0, 3, 1).ready(N, &["live"]);
    let cases: Vec<(&str, State, usize, u64, State)> = vec![
        ("empty", live(State::default()), 10, 0, live(State::default())),
        (
            "oldest first, up to the limit; live jobs untouched",
            live(dead3()),
            2,
            2,
            live(
                State::default()
                    .raw_job("c", "not json")
                    .dead(&[("c", 300)])
                    .error("c", "undecodable envelope: expected value"),
            ),
        ),
        ("all", live(dead3()), 10, 3, live(State::default())),
        ("a limit of 0 deletes nothing", live(dead3()), 0, 0, live(dead3())),
    ];
    for (name, before, limit, n, after) in cases {
        let got = run_case(
            &ctx,
            name,
            &before,
            |mut c, k| async move { scripts::dlq_purge(&mut c, &k, limit).await },
            &after,
        )
        .await;
        assert_eq!(got, n, "case {name:?}");
    }
}
