//! Compact envelopes (lib.lua's header: the full form without its four leading numbers,
//! `{"id":..,"kind":..,..}`) through the scripts that run jobs: fetched, found and acked as
//! they are; written back in the full form once charged an attempt (a retry, a suspect's
//! reclaim), with the enqueue time their id holds; requeued from the dead-letter queue as
//! they are, and by kind. (compact_enqueue.rs: enqueue, a key's limits, stats.)

use crate::N;
use crate::common::*;
use std::time::Duration;
use weir::Priority;
use weir::queue::retry_policy::DeferralBudget;
use weir::queue::scripts::{self, Reclaimed, Settle};

pub(crate) const VT: u64 = 30_000;
/// The time `mim3k2ab` holds (the time id of the format's description).
const T: u64 = 1_764_529_922_963;

/// A compact envelope of kind `kind`, with `extra` fields (`,"key":"acme"`) before its payload.
pub(crate) fn compact_of(id: &str, kind: &str, extra: &str) -> String {
    format!(r#"{{"id":"{id}","kind":"{kind}"{extra},"payload":{{"n":1}}}}"#)
}

pub(crate) fn compact(id: &str) -> String {
    compact_of(id, "k", "")
}

/// [`compact`]`(id)` in the full form, as lib.lua's with_attempt writes it.
pub(crate) fn expanded(id: &str, attempt: u32, at: u64) -> String {
    format!(
        r#"{{"attempt":{attempt},"max_attempts":5,"priority":1,"enqueued_at":{at},"id":"{id}","kind":"k","payload":{{"n":1}}}}"#
    )
}

/// A time id enqueued at `ms`: 8 base-36 digits, '.', 16 hex digits, '-', a hex counter.
pub(crate) fn time_id(ms: u64) -> String {
    let mut d = [b'0'; 8];
    let mut rest = ms;
    for c in d.iter_mut().rev() {
        *c = b"0123456789abcdefghijklmnopqrstuvwxyz"[(rest % 36) as usize];
        rest /= 36;
    }
    assert_eq!(rest, 0, "{ms} fits 8 digits");
    format!("{}.0123456789abcdef-1f", String::from_utf8(d.to_vec()).unwrap())
}

fn retry(id: &str, token: u64, delay_ms: u64, error: &str) -> Settle {
    Settle::Retry {
        id: id.into(),
        token,
        priority: Priority::Normal,
        delay_ms,
        error: error.into(),
    }
}

#[tokio::test]
async fn a_compact_job_is_fetched_found_by_its_id_and_kind_and_acked() {
    assert_eq!(time_id(T), "mim3k2ab.0123456789abcdef-1f");
    let ctx = Ctx::new("compact-fetch").await;
    let (t, a, b) = (time_id(T), compact(&time_id(T)), compact("plain-1"));
    seed(&mut ctx.c(), &ctx.keys, &State::default().ready(N, &[&a, &b])).await;
    let f = scripts::fetch(&mut ctx.c(), &ctx.keys, 10, VT).await.unwrap();
    let names: Vec<&str> = f.jobs.iter().map(|j| j.name.as_str()).collect();
    assert_eq!(
        names,
        [a.as_str(), b.as_str()],
        "inline: named by their envelopes"
    );
    assert!(f.jobs.iter().all(|j| j.envelope() == j.name.as_bytes()));
    let st = ctx.snapshot().await;
    assert_eq!(
        st.lease.iter().map(|l| l.0.as_str()).collect::<Vec<_>>(),
        [&a, &b]
    );

    // Listed in flight by their ids (item_id), kept by their kind (env_kind).
    let page = |kind: &'static str| {
        let (mut c, keys) = (ctx.c(), ctx.keys.clone());
        async move { scripts::jobs_page(&mut c, &keys, "in_flight", [0; 3], 10, 10, kind, "").await }
    };
    let listed = page("k").await.unwrap();
    let ids: Vec<&str> = listed.entries.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, [t.as_str(), "plain-1"]);
    assert_eq!(listed.entries[1].envelope.as_deref(), Some(b.as_str()));
    assert!(page("other").await.unwrap().entries.is_empty(), "another kind");
    // Shown by id: found in the lease by its envelope's id.
    let shown = scripts::job_show(&mut ctx.c(), &ctx.keys, "plain-1")
        .await
        .unwrap();
    assert_eq!(
        (shown.state.as_str(), shown.envelope.as_deref()),
        ("in_flight", Some(b.as_str()))
    );

    let s = scripts::settle(&mut ctx.c(), &ctx.keys, &crate::acks_of(&f))
        .await
        .unwrap();
    assert_eq!((s.missed.len(), s.missed_inline), (0, 0));
    let st = ctx.snapshot().await;
    assert!(st.lease.is_empty() && st.jobs.is_empty() && st.ready.iter().all(Vec::is_empty));
    assert_eq!(
        (st.counters.get("fetched"), st.counters.get("acked")),
        (Some(&2), Some(&2))
    );
}

#[tokio::test]
async fn a_retried_compact_job_comes_back_in_the_full_form_with_its_ids_time() {
    let ctx = Ctx::new("compact-retry").await;
    // A time id, one with a partition's suffix, an id that is no time id, and two that
    // almost are (upper-case hex; a suffix without its number): the last three were
    // enqueued at an unknown time, 0.
    let (t, tp) = (time_id(T), format!("{}.p3", time_id(T + 1)));
    let (upper, bare) = (format!("{}.0123456789ABCDEF-1f", &t[..8]), format!("{t}.p"));
    let ids = [t.as_str(), tp.as_str(), "plain-1", upper.as_str(), bare.as_str()];
    let items: Vec<String> = ids.iter().map(|id| compact(id)).collect();
    let leases: Vec<(&str, u64)> = items.iter().map(|i| (i.as_str(), FUTURE)).collect();
    let before = State::default().lease(&leases);
    let calls: Vec<Settle> = items.iter().map(|i| retry(i, FUTURE, 5_000, "boom")).collect();
    let mut after = State::default().counter("retried", 5);
    for (id, at) in ids.iter().zip([T, T + 1, 0, 0, 0]) {
        after = after.raw_job(id, &expanded(id, 1, at)).error(id, "boom");
    }
    let delayed: Vec<(&str, u64)> = ids.iter().map(|id| (*id, NOW + 5_000)).collect();
    let after = after.delayed(N, &delayed);
    let s = run_case(
        &ctx,
        "five compact retries",
        &before,
        |mut c, k| async move { scripts::settle(&mut c, &k, &calls).await },
        &after,
    )
    .await;
    assert!(s.missed.is_empty(), "{:?}", s.missed);

    // Five failed runs in all (the compact form's max_attempts): then dead-lettered.
    seed(
        &mut ctx.c(),
        &ctx.keys,
        &State::default().ready(N, &[&compact(&t)]),
    )
    .await;
    for run in 1..=5u32 {
        // (a retry without a delay falls due in the millisecond it was made)
        let mut f = scripts::fetch(&mut ctx.c(), &ctx.keys, 10, VT).await.unwrap();
        for _ in 0..100 {
            if !f.jobs.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
            f = scripts::fetch(&mut ctx.c(), &ctx.keys, 10, VT).await.unwrap();
        }
        assert_eq!(f.jobs.len(), 1, "run {run}");
        let want = if run == 1 {
            compact(&t)
        } else {
            expanded(&t, run - 1, T)
        };
        assert_eq!(f.jobs[0].envelope(), want.as_bytes(), "run {run}");
        let name = f.jobs[0].name.clone();
        let e = format!("boom {run}");
        scripts::settle(&mut ctx.c(), &ctx.keys, &[retry(&name, f.deadline_ms, 0, &e)])
            .await
            .unwrap();
    }
    let st = ctx.snapshot().await;
    assert_eq!(
        st.dead.iter().map(|d| d.0.as_str()).collect::<Vec<_>>(),
        [t.as_str()]
    );
    assert_eq!(st.jobs.get(&t), Some(&expanded(&t, 5, T)), "five attempts spent");
    assert_eq!(st.errors.get(&t).map(String::as_str), Some("boom 5"));
    assert!(st.delayed.iter().all(Vec::is_empty) && st.lease.is_empty());
    assert_eq!(
        (st.counters.get("retried"), st.counters.get("dead")),
        (Some(&4), Some(&1))
    );
}

#[tokio::test]
async fn a_reclaimed_compact_suspect_is_charged_in_the_full_form() {
    let ctx = Ctx::new("compact-reclaim").await;
    let t = time_id(T);
    let (s, p, u) = (compact(&t), compact("plain-1"), compact("u-1"));
    let before = State::default()
        .lease(&[(&s, PAST), (&p, PAST), (&u, PAST)])
        .started(&s, "c1:s")
        .started(&p, "c1:s");
    let suspect = "lease expired while it ran as a suspect";
    // (expired leases are taken by deadline, then by item: t's "mim3k2ab" before "plain-1")
    let after = State::default()
        .raw_job(&t, &expanded(&t, 1, T))
        .raw_job("plain-1", &expanded("plain-1", 1, 0))
        .raw_job("u-1", &u)
        .suspects(&[&t, "plain-1"])
        .ready(N, &["u-1"])
        .error(&t, suspect)
        .error("plain-1", suspect)
        .error("u-1", "lease expired before its run started")
        .deferral("u-1", 1, NOW)
        .counter("reclaimed", 3)
        .counter("deferred", 1);
    let budget = DeferralBudget {
        max_deferrals: 1_000,
        max_age: Duration::from_secs(86_400),
    };
    let r = run_case(
        &ctx,
        "two suspects and one that never ran",
        &before,
        |mut c, k| async move { scripts::reclaim(&mut c, &k, 100, budget).await },
        &after,
    )
    .await;
    let want = Reclaimed {
        returned: 1,
        suspects: 2,
        ..Reclaimed::default()
    };
    assert_eq!(
        Reclaimed {
            next_expiry: None,
            ..r
        },
        want
    );
}

#[tokio::test]
async fn a_compact_job_requeued_from_the_dead_letter_queue_stays_readable() {
    let ctx = Ctx::new("compact-dlq").await;
    let t = time_id(T);
    let before = State::default()
        .raw_job(&t, &compact(&t))
        .raw_job("plain-1", &expanded("plain-1", 5, 0))
        .dead(&[(&t, 100), ("plain-1", 200)])
        .error(&t, "boom")
        .error("plain-1", "boom");
    // fresh: a compact envelope (attempt 0 already) as it is; an expanded one at attempt 0
    let after = State::default()
        .raw_job(&t, &compact(&t))
        .raw_job("plain-1", &expanded("plain-1", 0, 0))
        .ready(N, &[&t, "plain-1"]);
    let (n, missing) = run_case(
        &ctx,
        "requeue",
        &before,
        |mut c, k| async move { scripts::dlq_requeue(&mut c, &k, 10, &[]).await },
        &after,
    )
    .await;
    assert_eq!((n, missing.len()), (2, 0));

    // By kind (env_kind): only the compact job of kind mail is requeued.
    let (m, k) = (compact_of("m-1", "mail", ""), compact("k-1"));
    let before = State::default()
        .raw_job("m-1", &m)
        .raw_job("k-1", &k)
        .dead(&[("m-1", 100), ("k-1", 200)]);
    let after = State::default()
        .raw_job("m-1", &m)
        .raw_job("k-1", &k)
        .dead(&[("k-1", 200)])
        .ready(N, &["m-1"]);
    let step = run_case(
        &ctx,
        "requeue kind mail",
        &before,
        |mut c, keys| async move { scripts::dlq_bulk(&mut c, &keys, true, 0, 10, 0, "mail").await },
        &after,
    )
    .await;
    assert_eq!(step.acted, 1);

    // Requeued, it is fetched as it was written.
    seed(&mut ctx.c(), &ctx.keys, &before).await;
    let _ = scripts::dlq_bulk(&mut ctx.c(), &ctx.keys, true, 0, 10, 0, "")
        .await
        .unwrap();
    let f = scripts::fetch(&mut ctx.c(), &ctx.keys, 10, VT).await.unwrap();
    let got: Vec<(&str, &[u8])> = f.jobs.iter().map(|j| (j.name.as_str(), j.envelope())).collect();
    assert_eq!(got, [("m-1", m.as_bytes()), ("k-1", k.as_bytes())]);
}
