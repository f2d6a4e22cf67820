//! Compact envelopes (lib.lua's header) on their way in and while they wait: taken by
//! enqueue at normal priority only, held back under their key like full ones, and aged by
//! stats by the time their id holds.

use crate::common::*;
use crate::compact::{VT, compact, compact_of, expanded, time_id};
use crate::{H, L, N};
use weir::Priority;
use weir::queue::scripts::{self, EnqueueArg, Settle};
use weir::queue::settings::Settings;

#[tokio::test]
async fn a_compact_job_with_a_key_counts_against_its_key() {
    let ctx = Ctx::new("compact-key").await;
    let acme = r#","key":"acme""#;
    let (c1, c3, n1) = (
        compact_of("c1", "k", acme),
        compact_of("c3", "k", acme),
        compact("n1"),
    );
    let f2 = env("f2", 0, 5, 1).replace(r#","payload":"#, &format!(r#"{acme},"payload":"#));
    seed(
        &mut ctx.c(),
        &ctx.keys,
        &State::default().ready(N, &[&c1, &f2, &c3, &n1]),
    )
    .await;
    let s = Settings {
        key_concurrency: Some(1),
        ..Settings::default()
    };
    Settings::update(&mut ctx.c(), &ctx.queue, &s).await.unwrap();
    let first = scripts::fetch(&mut ctx.c(), &ctx.keys, 10, VT).await.unwrap();
    let names: Vec<&str> = first.jobs.iter().map(|j| j.name.as_str()).collect();
    // c1 takes acme's slot (adopted by its id, as an inline job with a key is); n1 has no
    // key; f2 (full form) and c3 are held back, parked in normal's delayed set
    assert_eq!(names, ["c1", n1.as_str()]);
    assert!(first.global.held_by_key);
    let st = ctx.snapshot().await;
    let mut held: Vec<&str> = st.delayed[N].iter().map(|d| d.0.as_str()).collect();
    held.sort();
    assert_eq!(held, ["c3", "f2"]);
    assert_eq!(st.jobs.get("c3"), Some(&c3), "adopted as it is");
    assert_eq!(st.counters.get("key_throttled"), Some(&2));
    assert!(
        scripts::fetch(&mut ctx.c(), &ctx.keys, 10, VT)
            .await
            .unwrap()
            .jobs
            .is_empty()
    );

    // c1 done: acme's first parked job comes back, then, f2 done, the next.
    let (mut held, mut token) = ("c1", first.deadline_ms);
    for want in ["f2", "c3"] {
        let ack = Settle::Ack {
            id: held.into(),
            token,
        };
        scripts::settle(&mut ctx.c(), &ctx.keys, &[ack]).await.unwrap();
        let next = scripts::fetch(&mut ctx.c(), &ctx.keys, 10, VT).await.unwrap();
        assert_eq!(
            next.jobs.iter().map(|j| j.name.as_str()).collect::<Vec<_>>(),
            [want]
        );
        if want == "c3" {
            assert_eq!(next.jobs[0].envelope(), c3.as_bytes());
        }
        (held, token) = (want, next.deadline_ms);
    }
}

#[tokio::test]
async fn stats_ages_a_compact_job_by_the_time_its_id_holds() {
    let ctx = Ctx::new("compact-stats").await;
    let now0 = ctx.now_ms().await;
    let (a, b) = (time_id(now0 - 60_000), format!("{}.p2", time_id(now0 - 120_000)));
    let in_payload = r#"{"id":"x-1","kind":"k","payload":{"enqueued_at":5}}"#;
    // state, the age it shows (ms before now0; None: unknown, 0)
    let cases: Vec<(&str, State, Option<u64>)> = vec![
        (
            "inline, time id",
            State::default().ready(N, &[&compact(&a)]),
            Some(60_000),
        ),
        (
            "by id, partition's time id",
            State::default().raw_job(&b, &compact(&b)).ready(L, &[&b]),
            Some(120_000),
        ),
        (
            "the older of two lists",
            State::default()
                .ready(H, &[&compact(&a)])
                .raw_job(&b, &compact(&b))
                .ready(L, &[&b]),
            Some(120_000),
        ),
        (
            "no time id",
            State::default().ready(N, &[&compact("plain-1")]),
            None,
        ),
        (
            "no time id, enqueued_at in its payload",
            State::default().ready(N, &[in_payload]),
            None,
        ),
        (
            "no time id, retried: the full form's enqueued_at 0",
            State::default().ready(N, &[&expanded("plain-2", 1, 0)]),
            None,
        ),
    ];
    for (case, state, age) in cases {
        let (_, keys) = ctx.other_queue("stats");
        seed(&mut ctx.c(), &keys, &state).await;
        let got = scripts::stats(&mut ctx.c(), &keys)
            .await
            .unwrap()
            .oldest_ready_age_ms;
        let now1 = ctx.now_ms().await;
        match age {
            Some(d) => assert!(
                d <= got && got <= d + (now1 - now0),
                "{case}: {got} ms, want {d} ms"
            ),
            None => assert_eq!(got, 0, "{case}"),
        }
    }
}

fn arg(id: &str, priority: Priority, envelope: &str) -> EnqueueArg {
    EnqueueArg {
        id: id.into(),
        priority,
        delay_ms: 0,
        run_at_ms: 0,
        envelope: envelope.as_bytes().to_vec(),
        unique: true,
        unique_for_ms: 0,
    }
}

#[tokio::test]
async fn enqueue_takes_a_compact_envelope_at_normal_priority_only() {
    let ctx = Ctx::new("compact-enqueue").await;
    let u = compact_of("u1", "k", r#","unique_key":"uk""#);
    // The implied fields' names in the payload are the payload's.
    let p = r#"{"id":"c4","kind":"k","payload":{"n":1,"attempt":2,"priority":0}}"#;
    let jobs = vec![
        arg("c1", Priority::Normal, &compact("c1")),
        EnqueueArg {
            unique_for_ms: 60_000,
            ..arg("u1", Priority::Normal, &u)
        },
        arg("c4", Priority::Normal, p),
    ];
    let after = State::default()
        .raw_job("c1", &compact("c1"))
        .raw_job("u1", &u)
        .raw_job("c4", p)
        .ready(N, &["c1", "u1", "c4"])
        .unique("uk", "u1")
        .counter("enqueued", 3);
    let dups = run_case(
        &ctx,
        "compact at normal",
        &State::default(),
        |mut c, k| async move { scripts::enqueue(&mut c, &k, &jobs).await },
        &after,
    )
    .await;
    assert!(dups.is_empty(), "{dups:?}");

    // Refused, with nothing written (a good section first): compact at high or low, with
    // another id than its own, or naming a field its form implies (the consumer would
    // read that field, the scripts the implied value).
    const OPENING: &str = "does not open with the header for its id and priority";
    const IMPLIED: &str = "names a field its form implies";
    for (p, id, envelope, why) in [
        (Priority::High, "c2", compact("c2"), OPENING),
        (Priority::Low, "c2", compact("c2"), OPENING),
        (Priority::Normal, "c2", compact("c3"), OPENING),
        (
            Priority::Normal,
            "c2",
            compact_of("c2", "k", r#","attempt":3"#),
            IMPLIED,
        ),
        (
            Priority::Normal,
            "c2",
            compact_of("c2", "k", r#","max_attempts":10"#),
            IMPLIED,
        ),
        (
            Priority::Normal,
            "c2",
            compact_of("c2", "k", r#","key":"a","priority":0"#),
            IMPLIED,
        ),
        (
            Priority::Normal,
            "c2",
            compact_of("c2", "k", r#","enqueued_at":1"#),
            IMPLIED,
        ),
    ] {
        let (_, keys) = ctx.other_queue("enqueue-refused");
        let jobs = [
            arg("ok", Priority::Low, &env("ok", 0, 3, 2)),
            arg(id, p, &envelope),
        ];
        let e = scripts::enqueue(&mut ctx.c(), &keys, &jobs).await.unwrap_err();
        assert!(e.to_string().contains(why), "{p:?} {envelope}: {e}");
        assert_eq!(
            snapshot(&mut ctx.c(), &keys).await,
            State::default(),
            "{p:?} {envelope}"
        );
    }
}
